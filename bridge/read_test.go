package bridge

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
)

// A line that came alone reaches its call's owner before the read loop
// reads again: with nothing more buffered that read would wait, and the
// owner (who writes the line on to its client) goes first. On one thread
// the order is the scheduler's, which the read loop yields to.
func TestTheOwnerTakesALineBeforeTheNextRead(t *testing.T) {
	// Not parallel: GOMAXPROCS is the whole process's.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var (
		mu  sync.Mutex
		log []string // "line" (the transport returned one), "read" (a read began), "take" (the owner took a progress line)
	)
	note := func(event string) {
		mu.Lock()
		log = append(log, event)
		mu.Unlock()
	}
	w := newWorld(t, legacy(), autoReply{initialize: true}, func(w *world) { w.trace = note })
	child := w.child()
	c := w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"tok"},"name":"slow"}}`)
	r := child.expect("tools/call")

	// The call's progress, one line at a time, each sent once the last was
	// taken, then its answer.
	const events = 50
	took := make(chan struct{})
	go func() {
		defer close(took)
		for {
			<-c.Wake()
			notes, _, done, err := c.Take()
			for range notes {
				note("take")
			}
			if done {
				if err != nil {
					t.Error(err)
				}
				return
			}
			if len(notes) > 0 {
				took <- struct{}{}
			}
		}
	}()
	for i := range events {
		child.send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d}}`, r.ID, i)
		select {
		case <-took:
		case <-time.After(10 * time.Second):
			t.Fatalf("progress %d never reached the call's owner", i)
		}
	}
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, r.ID)
	for range took {
	}

	// Each take follows its line: at once, or after the next read began.
	mu.Lock()
	defer mu.Unlock()
	first, takes := 0, 0
	for i, e := range log {
		if e != "take" {
			continue
		}
		takes++
		if i > 0 && log[i-1] == "line" {
			first++
		}
	}
	// The scheduler looks at its global queue first one time in 61; the
	// owner must have gone first nearly always (never, without the yield).
	if takes != events || first < events*3/4 {
		t.Fatalf("%d takes of %d events, %d of them before the next read began", takes, events, first)
	}
}
