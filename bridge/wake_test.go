package bridge

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// Two goroutines take turns, each waiting in Await for the other's change
// before it makes its own: a change that slipped in between an Await's
// look at the status and its wait would leave both waiting until the
// deadline. Nothing else changes the status, so a lost wake-up is never
// made good by a later one.
func TestAwaitMissesNoChange(t *testing.T) {
	t.Parallel()
	b := &Bridge{}
	const turns = 20000
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for player := range 2 {
		wg.Go(func() {
			for turn := player; turn < turns; turn += 2 {
				if _, err := b.Await(ctx, func(s Status) bool { return s.Restarts == uint64(turn) }); err != nil {
					t.Errorf("player %d waiting for turn %d: %v (at turn %d)", player, turn, err, b.restarts.Load())
					return
				}
				b.restarts.Add(1)
				b.stateChanged()
			}
		})
	}
	wg.Wait()
}

// Slots are freed and taken by many callers at once, and every waiter is
// woken: each call that waits in the queue gets through, Await sees each
// call's end though the end races with its look, and Drain sees the last.
// A lost wake-up shows as a call that waits out its queue timeout, or a
// wait that reaches the deadline.
func TestPoolWakesEveryWaiter(t *testing.T) {
	t.Parallel()
	p, children := newPoolWorld(t, Options{Era: EraLegacy, MaxInFlight: 2, QueueSize: 64, QueueTimeout: time.Minute}, autoReply{initialize: true})
	child := children[0]
	held := make(chan *jsonrpc.Message, 1)
	go func() {
		for m := range child.got {
			switch {
			case m.Method != "tools/call":
			case contains(m.Params, `"hold"`):
				held <- m
			default:
				child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	call := func(id string) error {
		c, err := callOn(p, ctx, request(t, `{"jsonrpc":"2.0","id":"`+id+`","method":"tools/call","params":{"name":"echo"}}`), Caller{})
		if err != nil {
			return err
		}
		_, err = c.wait()
		return err
	}

	// Eight callers through two slots: most calls wait in the queue.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				if err := call(fmt.Sprintf("%d-%d", i, j)); err != nil {
					t.Errorf("call %d-%d: %v", i, j, err)
					return
				}
			}
		})
	}
	wg.Wait()

	// Await looks while the call's end is on its way.
	for i := range 200 {
		c, err := callOn(p, ctx, request(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":"await-%d","method":"tools/call","params":{"name":"echo"}}`, i)), Caller{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Await(ctx, func(s Status) bool { return s.InFlight == 0 }); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if _, err := c.wait(); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}

	// Drain waits for the last call in flight.
	c, err := callOn(p, ctx, request(t, `{"jsonrpc":"2.0","id":"last","method":"tools/call","params":{"name":"hold"}}`), Caller{})
	if err != nil {
		t.Fatal(err)
	}
	drained := make(chan error, 1)
	go func() { drained <- p.Drain(ctx) }()
	m := <-held
	if _, err := p.Await(ctx, func(s Status) bool { return s.Draining }); err != nil {
		t.Fatal(err)
	}
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
	if _, err := c.wait(); err != nil {
		t.Fatal(err)
	}
	if err := <-drained; err != nil {
		t.Fatalf("Drain: %v", err)
	}
}
