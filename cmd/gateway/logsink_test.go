package main

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

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
