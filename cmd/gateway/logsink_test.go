package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// lockedBuffer records every write the sink makes.
type lockedBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Every line arrives once, whole, and in the order each writer wrote it,
// whether it went out with others, by the goroutine, or by a writer that
// found the sink full; lines after Close go out at once.
func TestLogSinkKeepsEveryLineInOrder(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	out := &lockedBuffer{}
	s := newLogSink(out)
	const writers, lines = 8, 1000
	long := strings.Repeat("x", 1500) // 8 × 1000 × 0.75 KB on average passes logSinkMax a few times
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range lines {
				fmt.Fprintf(s, "w%d %d %s\n", w, i, long[:i%len(long)])
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(s, "after close\n")
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != writers*lines+1 || got[len(got)-1] != "after close" {
		t.Fatalf("%d lines, the last %q; want %d and the line written after Close", len(got), got[len(got)-1], writers*lines+1)
	}
	next := make([]int, writers)
	for _, line := range got[:len(got)-1] {
		var w, i int
		var rest string
		if _, err := fmt.Sscanf(line, "w%d %d %s", &w, &i, &rest); err != nil && i%len(long) != 0 {
			t.Fatalf("line %.40q: %v", line, err)
		}
		if i != next[w] || len(line) != len(fmt.Sprintf("w%d %d ", w, i))+i%len(long) {
			t.Fatalf("writer %d: line %d (%d bytes) where %d was due", w, i, len(line), next[w])
		}
		next[w]++
	}
	if out.writes >= writers*lines {
		t.Errorf("%d writes for %d lines: nothing was gathered", out.writes, writers*lines)
	}
	t.Logf("%d lines in %d writes", writers*lines, out.writes)
}

// BenchmarkAuditLine is one audit-sized line logged from two goroutines
// into a pipe that another process would read (here a goroutine), straight
// and through the sink: what logging costs a call.
//
//	go test -run '^$' -bench BenchmarkAuditLine -benchmem ./cmd/gateway
func BenchmarkAuditLine(b *testing.B) {
	for _, via := range []string{"pipe", "sink"} {
		b.Run(via, func(b *testing.B) {
			r, f, err := os.Pipe()
			if err != nil {
				b.Fatal(err)
			}
			drained := make(chan struct{})
			go func() { _, _ = io.Copy(io.Discard, r); close(drained) }()
			defer func() { f.Close(); <-drained; r.Close() }()
			var w io.Writer = f
			if via == "sink" {
				s := newLogSink(f)
				defer s.Close()
				w = s
			}
			log := slog.New(slog.NewTextHandler(w, nil))
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism(1)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					log.LogAttrs(ctx, slog.LevelInfo, "audit", slog.String("who", "anonymous"), slog.String("method", "tools/call"),
						slog.String("tool", "echo"), slog.String("outcome", "ok"), slog.Int("status", 200),
						slog.Duration("dur", 312*time.Microsecond), slog.Int("bytes_in", 236), slog.Int("bytes_out", 120),
						slog.String("remote", "127.0.0.1:40312"), slog.String("request_id", "host/abcdef-000123"))
				}
			})
		})
	}
}
