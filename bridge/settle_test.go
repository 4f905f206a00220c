package bridge

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// A call whose client left keeps its slot until it settles (see
// child.holdLocked): MaxInFlight bounds what the child runs, and a child
// may go on with a cancelled call. These tests run legacy children in a
// bubble; those that ignore probes stand for a child too busy to read its
// input, which the gateway cannot tell from one that goes on with what it
// was told to cancel.

// leaveCall makes a call on p that child gets, then has its client leave:
// the client has its ending at once, and the child is told to cancel.
func leaveCall(t *testing.T, p *Bridge, child *fakeChild, id string) *jsonrpc.Message {
	t.Helper()
	ctx, leave := context.WithCancel(context.Background())
	c := poolCall(t, p, ctx, `{"jsonrpc":"2.0","id":"`+id+`","method":"tools/call"}`)
	req := bubbleExpect(t, child, "tools/call")
	left := time.Now()
	leave()
	if _, err := c.wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("call %s whose client left: %v", id, err)
	}
	if d := time.Since(left); d != 0 {
		t.Errorf("the client of %s waited %v for its ending", id, d)
	}
	bubbleExpect(t, child, mcp.NoteCancelled)
	return req
}

// queuedCall is a call made in the background, for one that waits in the
// queue: its call, or the error that refused it.
type queuedCall struct {
	c   *call
	err error
}

func queueCall(t *testing.T, p *Bridge, id string) <-chan queuedCall {
	done := make(chan queuedCall, 1)
	go func() {
		c, err := callOn(p, context.Background(), request(t, `{"jsonrpc":"2.0","id":"`+id+`","method":"tools/call"}`), Caller{})
		done <- queuedCall{c, err}
	}()
	synctest.Wait()
	return done
}

// requests is what the child got since the last look, probes and
// handshake aside, once every goroutine has settled.
func requests(c *fakeChild) []*jsonrpc.Message {
	var ms []*jsonrpc.Message
	for _, m := range received(c) {
		if !isHandshake(m) {
			ms = append(ms, m)
		}
	}
	return ms
}

// expectStats checks the slots in use and the calls queued.
func expectStats(t *testing.T, p *Bridge, step string, inFlight, queued int) {
	t.Helper()
	synctest.Wait()
	if st := p.Stats(); st.InFlight != inFlight || st.Queued != queued {
		t.Fatalf("%s: %d in flight and %d queued, want %d and %d", step, st.InFlight, st.Queued, inFlight, queued)
	}
}

// A child that goes on with a cancelled call (it neither answers the
// probe nor the call) runs it still: the next call waits, and is refused
// past the queue timeout; once the child answers the call, the next goes
// through at once.
func TestCancelledCallKeepsItsSlotUntilTheChildAnswers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w, children := bubbleWorld(t, Options{MaxInFlight: 1, QueueSize: 1, QueueTimeout: 5 * time.Second, IdleTimeout: time.Hour}, autoReply{initialize: true, ignorePing: true})
		p, child := w.b, children[0]
		start := time.Now()
		reqA := leaveCall(t, p, child, "a")
		expectStats(t, p, "A's client left", 1, 0)

		_, err := callOn(p, context.Background(), request(t, `{"jsonrpc":"2.0","id":"b","method":"tools/call"}`), Caller{})
		if gatewayCode(t, err) != jsonrpc.CodeOverloaded || time.Since(start) != 5*time.Second {
			t.Fatalf("B, while A may run: %v after %v; want -32003 after the queue timeout", err, time.Since(start))
		}

		c := queueCall(t, p, "c")
		expectStats(t, p, "C waits", 1, 1)
		if ms := requests(child); len(ms) != 0 {
			t.Fatalf("the child got %s while A may run", ms[0].Raw)
		}
		answered := time.Now()
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, reqA.ID) // late: dropped, and A is settled
		reqC := bubbleExpect(t, child, "tools/call")
		if d := time.Since(answered); d != 0 {
			t.Errorf("C reached the child %v after A's answer, want at once", d)
		}
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, reqC.ID)
		q := <-c
		if q.err != nil {
			t.Fatal(q.err)
		}
		if resp, err := q.c.wait(); err != nil || !contains(resp, `"id":"c"`) {
			t.Errorf("C: %s, %v", resp, err)
		}
		expectStats(t, p, "the end", 0, 0)
	})
}

// A child that answers the probe sent after a cancellation has taken it:
// the slot comes back then, with no time passing.
func TestCancelledCallsSlotComesBackWithTheProbe(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// The test answers the probe itself, to see the slot held until then.
		w, children := bubbleWorld(t, Options{MaxInFlight: 1, IdleTimeout: time.Hour}, autoReply{initialize: true, ignorePing: true})
		p, child := w.b, children[0]
		start := time.Now()
		leaveCall(t, p, child, "a")
		probe := bubbleExpect(t, child, mcp.MethodPing)
		b := queueCall(t, p, "b")
		expectStats(t, p, "before the probe's answer", 1, 1)
		if ms := requests(child); len(ms) != 0 {
			t.Fatalf("the child got %s before it answered the probe", ms[0].Raw)
		}
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, probe.ID)
		reqB := bubbleExpect(t, child, "tools/call")
		if d := time.Since(start); d != 0 {
			t.Errorf("B reached the child after %v, want at once", d)
		}
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, reqB.ID)
		if _, err := (<-b).c.wait(); err != nil {
			t.Fatal(err)
		}
		expectStats(t, p, "the end", 0, 0)
	})
}

// A cancelled call that nothing settles gives its slot back once
// unsettledSpan (here the idle timeout) has passed.
func TestCancelledCallsSlotComesBackAfterItsTime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const span = 3 * time.Second
		w, children := bubbleWorld(t, Options{MaxInFlight: 1, IdleTimeout: span, QueueTimeout: 10 * time.Second}, autoReply{initialize: true, ignorePing: true})
		p, child := w.b, children[0]
		start := time.Now()
		leaveCall(t, p, child, "a")
		b := queueCall(t, p, "b")
		reqB := bubbleExpect(t, child, "tools/call")
		if d := time.Since(start); d != span {
			t.Errorf("B reached the child after %v, want %v", d, span)
		}
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, reqB.ID)
		if _, err := (<-b).c.wait(); err != nil {
			t.Fatal(err)
		}
		expectStats(t, p, "the end", 0, 0)
	})
}

// A child that exits gives back every slot it kept for cancelled calls:
// the call waiting gets one at once (and, its worker having no child that
// serves, is told so, as a call waiting for a child that dies always is),
// and the next child has all its slots free.
func TestChildExitGivesBackTheSlotsItKept(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w, children := bubbleWorld(t, Options{MaxInFlight: 2, IdleTimeout: time.Hour}, autoReply{initialize: true, ignorePing: true})
		p, child := w.b, children[0]
		leaveCall(t, p, child, "a")
		leaveCall(t, p, child, "b")
		c := queueCall(t, p, "c")
		expectStats(t, p, "A and B left", 2, 1)
		exited := time.Now()
		child.exit()
		if q := <-c; gatewayCode(t, q.err) != jsonrpc.CodeUnavailable || time.Since(exited) != 0 {
			t.Errorf("C, waiting as the child exited: %v after %v; want -32000 at once", q.err, time.Since(exited))
		}
		expectStats(t, p, "the child exited", 0, 0)
		next := <-w.children
		t.Cleanup(next.exit)
		if _, err := p.Await(context.Background(), func(s Status) bool { return s.ReadyWorkers() == 1 }); err != nil {
			t.Fatal(err)
		}
		var calls []*call
		for _, id := range []string{"d", "e"} {
			calls = append(calls, poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":"`+id+`","method":"tools/call"}`))
		}
		expectStats(t, p, "D and E on the next child", 2, 0)
		for _, c := range calls {
			next.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, bubbleExpect(t, next, "tools/call").ID)
			if _, err := c.wait(); err != nil {
				t.Fatal(err)
			}
		}
		expectStats(t, p, "the end", 0, 0)
	})
}

// A slot is given back once however many things settle its call: the
// child's late answer, then the probe's, then its time passing, then a
// release of its own. With MaxInFlight 1, a second call is refused while
// one runs, as before.
func TestCancelledCallsSlotIsGivenBackOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w, children := bubbleWorld(t, Options{MaxInFlight: 1, QueueSize: -1, IdleTimeout: time.Hour}, autoReply{initialize: true, ignorePing: true})
		p, child := w.b, children[0]
		ctx, leave := context.WithCancel(context.Background())
		a := poolCall(t, p, ctx, `{"jsonrpc":"2.0","id":"a","method":"tools/call"}`)
		a.mu.Lock()
		s := a.slot
		a.mu.Unlock()
		reqA := bubbleExpect(t, child, "tools/call")
		leave()
		a.wait()
		probe := bubbleExpect(t, child, mcp.MethodPing)
		expectStats(t, p, "A's client left", 1, 0)
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, reqA.ID)
		expectStats(t, p, "A answered", 0, 0)
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, probe.ID)
		time.Sleep(unsettledFor) // past the time it would have been given back
		s.release()
		expectStats(t, p, "everything settled A", 0, 0)

		b := poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":"b","method":"tools/call"}`)
		reqB := bubbleExpect(t, child, "tools/call")
		if _, err := callOn(p, context.Background(), request(t, `{"jsonrpc":"2.0","id":"c","method":"tools/call"}`), Caller{}); gatewayCode(t, err) != jsonrpc.CodeOverloaded {
			t.Errorf("a second call beside B: %v, want -32003: MaxInFlight was raised", err)
		}
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, reqB.ID)
		b.wait()
	})
}

// Many calls whose clients leave as their answers come, on a child that
// answers probes: every ending, whichever way it went, gives its slot back
// once, and MaxInFlight holds after.
func TestSlotsOfCallsRacingTheirAnswers(t *testing.T) {
	t.Parallel()
	p, children := newPoolWorld(t, Options{Era: EraLegacy, MaxInFlight: 1, QueueSize: -1, IdleTimeout: time.Hour}, autoReply{initialize: true})
	child := children[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 50 {
		cctx, leave := context.WithCancel(context.Background())
		var c *call
		for {
			// A slot given back by the previous call's probe, shortly.
			var err error
			c, err = callOn(p, cctx, request(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call"}`, i)), Caller{})
			if err == nil {
				break
			}
			if gatewayCode(t, err) != jsonrpc.CodeOverloaded {
				t.Fatal(err)
			}
			if _, err := p.Await(ctx, func(s Status) bool { return s.InFlight == 0 }); err != nil {
				t.Fatal(err)
			}
		}
		m := child.next()
		for m.Method == mcp.NoteCancelled {
			m = child.next()
		}
		go leave()
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
		c.wait()
	}
	if st, err := p.Await(ctx, func(s Status) bool { return s.InFlight == 0 }); err != nil || st.InFlight != 0 {
		t.Fatalf("%+v, %v: want every slot back", st.Stats, err)
	}
	b := poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":"b","method":"tools/call"}`)
	if _, err := callOn(p, context.Background(), request(t, `{"jsonrpc":"2.0","id":"c","method":"tools/call"}`), Caller{}); gatewayCode(t, err) != jsonrpc.CodeOverloaded {
		t.Errorf("a second call beside B: %v, want -32003: MaxInFlight was raised", err)
	}
	b.Cancel("done")
}

// A drain waits for the calls clients wait for, not for the slots kept
// for calls whose clients left.
func TestDrainDoesNotWaitForUnsettledCalls(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w, children := bubbleWorld(t, Options{MaxInFlight: 1, IdleTimeout: time.Hour}, autoReply{initialize: true, ignorePing: true})
		p, child := w.b, children[0]
		leaveCall(t, p, child, "a")
		expectStats(t, p, "A's client left", 1, 0)
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.Drain(ctx); err != nil || time.Since(start) != 0 {
			t.Errorf("Drain: %v after %v, want nil at once", err, time.Since(start))
		}
	})
}

// A request about a task waits for a slot of the task's child, one kept
// for a cancelled call included, and gets it once that call settles.
func TestTaskRequestWaitsForACancelledCallToSettle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w, children := bubbleWorld(t, Options{Workers: 2, MaxInFlight: 1, IdleTimeout: time.Hour}, autoReply{initialize: true, ignorePing: true})
		p := w.b
		only := func(what string) (*fakeChild, *jsonrpc.Message) {
			t.Helper()
			return onlyOne(t, children, requests, what)
		}
		c := poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job","task":{}}}`)
		home, m := only("tools/call")
		home.send(`{"jsonrpc":"2.0","id":%s,"result":{"task":{"taskId":"T-9","status":"working"}}}`, m.ID)
		if _, err := c.wait(); err != nil {
			t.Fatal(err)
		}
		// A call on the task's child whose client leaves: ties alternate,
		// so one of two lands there.
		var probe *jsonrpc.Message
		for i := 0; probe == nil; i++ {
			ctx, leave := context.WithCancel(context.Background())
			busy := poolCall(t, p, ctx, fmt.Sprintf(`{"jsonrpc":"2.0","id":"busy%d","method":"tools/call"}`, i))
			on, req := only("busy")
			if on != home {
				on.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID)
				busy.wait()
				leave()
				continue
			}
			leave()
			busy.wait()
			bubbleExpect(t, home, mcp.NoteCancelled)
			probe = bubbleExpect(t, home, mcp.MethodPing)
		}
		get := make(chan *call, 1)
		go func() {
			get <- poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":"get","method":"tasks/get","params":{"taskId":"T-9"}}`)
		}()
		expectStats(t, p, "the task's request waits", 1, 1)
		home.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, probe.ID)
		ch, m := only("tasks/get")
		if ch != home || m.Method != "tasks/get" {
			t.Fatalf("the task's request reached the wrong child, or %s came instead", m.Method)
		}
		ch.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
		(<-get).wait()
	})
}
