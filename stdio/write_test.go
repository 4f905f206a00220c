package stdio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// Lines written at the same time go out together: 64 writers made ready
// at once, on one thread running Go code, cost a few writes to the pipe,
// not one each, and every line arrives whole.
//
// Not parallel: it sets GOMAXPROCS for the whole test binary, and counts
// the binary's writes.
func TestLinesGoOutTogether(t *testing.T) {
	p := start(t, child(t, "cat"))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const writers = 64
	lines := make([][]byte, writers)
	for i := range lines {
		lines[i] = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo"}}`, i)
	}
	before := writeCalls(t)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for _, line := range lines {
		wg.Go(func() {
			<-gate
			if err := p.GatherMessage(context.Background(), line); err != nil {
				t.Error(err)
			}
		})
	}
	close(gate)
	wg.Wait()
	writes := writeCalls(t) - before
	readLines(t, p, nil, lines)
	// The runtime checks its global queue, where the leader waits, once in
	// 61 turns, so a batch can go out before every writer has joined it.
	if writes > writers/8 {
		t.Errorf("%d lines written at once took %d writes", writers, writes)
	}
	t.Logf("%d lines in %d writes", writers, writes)
}

// WriteMessage, for a caller on its own, writes at once: it never gives
// way to the goroutines ready to run, which may compute for a while. With
// one thread running Go code, a goroutine made ready just before the
// write runs only after it. (The thread can lose its turn in the system
// call on a busy machine; one try in ten is enough to show no yield.)
func TestWriteAloneDoesNotWait(t *testing.T) {
	p := start(t, child(t, "cat"))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	before := 0
	for range 10 {
		var ran atomic.Bool
		done := make(chan struct{})
		go func() {
			ran.Store(true)
			close(done)
		}()
		if err := p.WriteMessage(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
		if !ran.Load() {
			before++
		}
		<-done
		if got, err := p.ReadMessage(); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("read %q, %v", got, err)
		}
	}
	if before == 0 {
		t.Error("in each of 10 tries a goroutine made ready before a lone write ran before the write returned")
	}
}

// A batch the pipe takes only part of: a line cut short is finished by
// its own caller once the child reads again, the lines after it go out
// after it, and every line arrives whole, once. The room left ends inside
// a line, exactly between two, and just before a line's newline.
func TestGatheredLineCutShort(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int // each line's, with its newline
	}{
		{"inside a line", 200},     // 8192 = 40 lines and 192 bytes
		{"between lines", 1024},    // 8 lines
		{"before a newline", 2731}, // 3 lines but the last newline
	} {
		t.Run(tc.name, func(t *testing.T) { cutShort(t, tc.size) })
	}
}

func cutShort(t *testing.T, lineSize int) {
	p, size, resume := stoppedCat(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	// Leave two pages of room.
	const page = 4096
	first := bytes.Repeat([]byte("a"), size-2*page-1)
	if err := p.WriteMessage(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	const writers = 64
	lines := make([][]byte, writers)
	for i := range lines {
		lines[i] = fmt.Appendf(nil, "%03d%s", i, bytes.Repeat([]byte("x"), lineSize-4))
	}
	gate := make(chan struct{})
	errs := make(chan error, writers)
	for _, line := range lines {
		go func() {
			<-gate
			errs <- p.GatherMessage(context.Background(), line)
		}()
	}
	close(gate)
	// Once the pipe is full, a write waits in it for room, holding stdin:
	// the one finishing the line cut short, or the first of those left
	// to write alone. (Under the race detector, which shuffles the
	// scheduler, the lines may not all have joined one batch, and the
	// pipe can be full with gaps in its pages.)
	for i := 0; len(p.writeTok) > 0; i++ {
		if i == 1_000_000 {
			t.Fatalf("no write waits for room, with %d of %d bytes in the pipe", queued(t, p.stdin), size)
		}
		runtime.Gosched()
	}
	resume()
	readLines(t, p, first, lines)
	for range writers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// Lines that find stdin held by a write waiting for room go after it,
// each on its own: one whose ctx ends meanwhile is taken back, none of it
// written, and the others go out whole once stdin is free.
func TestGatheredLinesWaitForStdin(t *testing.T) {
	p := start(t, child(t, "cat"))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	<-p.writeTok // a write that waits for room holds stdin
	ctx, cancel := context.WithCancel(context.Background())
	const writers = 8
	var kept [][]byte
	errs := make([]chan error, writers)
	for i := range writers {
		line := fmt.Appendf(nil, "line %d", i)
		wctx := ctx
		if i%2 == 0 {
			wctx = context.Background()
			kept = append(kept, line)
		}
		errs[i] = make(chan error, 1)
		go func() { errs[i] <- p.GatherMessage(wctx, line) }()
	}
	// Yield until every writer has had its turn: the leader's batch found
	// stdin held, and each writer waits for it alone. (Yielding less only
	// tests less: what follows holds at any point.)
	for range 100 {
		runtime.Gosched()
	}
	cancel()
	for i := 1; i < writers; i += 2 {
		if err := <-errs[i]; !errors.Is(err, context.Canceled) {
			t.Errorf("writer %d, its ctx cancelled while stdin was held: %v", i, err)
		}
	}
	p.writeTok <- struct{}{}
	for i := 0; i < writers; i += 2 {
		if err := <-errs[i]; err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	readLines(t, p, nil, kept)
	if err := p.WriteMessage(context.Background(), []byte("last")); err != nil {
		t.Fatal(err)
	}
	if got, err := p.ReadMessage(); err != nil || string(got) != "last" {
		t.Fatalf("after the lines kept, read %q, %v; want the line written last (a line taken back was written)", got, err)
	}
}

// readLines reads first, when it is not nil, then the lines of rest, each
// whole and once, in any order.
func readLines(t *testing.T, p *Process, first []byte, rest [][]byte) {
	t.Helper()
	if first != nil {
		got, err := p.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, first) {
			t.Fatalf("the first line read is %d bytes (%.10q…), want the %d-byte line written first", len(got), got, len(first))
		}
	}
	left := map[string]bool{}
	for _, w := range rest {
		left[string(w)] = true
	}
	for range rest {
		got, err := p.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if !left[string(got)] {
			t.Fatalf("read a line that was not written, or twice: %.60q (%d bytes)", got, len(got))
		}
		delete(left, string(got))
	}
}

// writeCalls is how many write system calls this process has made
// (/proc/self/io).
func writeCalls(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Fatal(err)
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("syscw: ")); ok {
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no syscw in /proc/self/io")
	return 0
}

// BenchmarkGatherMessage is small messages to the child's stdin from 16
// goroutines per thread at once, with the echoes drained: what
// gathering lines into one write saves under load. writes/op is the write
// system calls the whole test binary made per message.
//
//	go test -run '^$' -bench BenchmarkGatherMessage -benchmem -cpu 1,2 ./stdio
func BenchmarkGatherMessage(b *testing.B) {
	p, err := Start(Config{Path: "cat"})
	if err != nil {
		b.Fatal(err)
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for {
			if _, err := p.ReadMessage(); err != nil {
				return
			}
		}
	}()
	msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello from the bench"}}}`)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	b.SetParallelism(16)
	before := writeCalls(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := p.GatherMessage(ctx, msg); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(writeCalls(b)-before)/float64(b.N), "writes/op")
	p.Close()
	<-drained
}
