package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// newPoolWorld is a pool of fake children; it returns them in the order
// they started, which is not the workers' order.
func newPoolWorld(t *testing.T, opts Options, auto autoReply) (*Bridge, []*fakeChild) {
	w := &world{t: t, children: make(chan *fakeChild, 16), auto: auto}
	p := New(w.start, strict(t, opts))
	var children []*fakeChild
	for range max(opts.Workers, 1) {
		children = append(children, w.child())
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	// Every worker, or the least loaded could be the only one ready.
	if _, err := p.Await(context.Background(), func(s Status) bool { return s.ReadyWorkers() == len(s.Workers) }); err != nil {
		t.Fatal(err)
	}
	return p, children
}

func poolCall(t *testing.T, p *Bridge, ctx context.Context, body string) *call {
	t.Helper()
	c, err := callOn(p, ctx, request(t, body), Caller{})
	if err != nil {
		t.Fatalf("Call(%s): %v", body, err)
	}
	return c
}

// Calls go to the worker with the fewest in flight; ids stay unique across
// the workers' children; progress and cancellation stay with the worker
// that owns the call.
func TestPoolSpreadsCallsAndKeepsThemWithTheirWorker(t *testing.T) {
	t.Parallel()
	p, children := newPoolWorld(t, Options{Era: EraLegacy, Workers: 2}, autoReply{initialize: true})
	ctx, leave := context.WithCancel(context.Background())
	var calls []*call
	for i := range 4 {
		calls = append(calls, poolCall(t, p, ctx, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{"progressToken":"t%d"}}}`, i, i)))
	}
	seen := map[string]bool{}
	owner := map[string]*fakeChild{} // the child's request id -> the child
	for _, ch := range children {
		for range 2 {
			m := ch.expect("tools/call")
			if seen[string(m.ID)] {
				t.Errorf("id %s reached two children", m.ID)
			}
			seen[string(m.ID)] = true
			owner[string(m.ID)] = ch
		}
	}
	if st := p.Stats(); st.InFlight != 4 || st.Pending != 4 {
		t.Errorf("stats = %+v, want 4 in flight and pending", st)
	}
	// Progress from one child reaches the call it belongs to.
	for id, ch := range owner {
		ch.send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":1}}`, id)
	}
	for i, c := range calls {
		m := nextNote(t, c)
		if m.Method != "notifications/progress" || !contains(m.Params, fmt.Sprintf(`"progressToken":"t%d"`, i)) {
			t.Errorf("call %d got %s", i, m.Raw)
		}
	}
	// Leaving cancels each call on its own child.
	leave()
	for _, c := range calls {
		c.wait()
	}
	for _, ch := range children {
		for range 2 {
			n := ch.expect("notifications/cancelled")
			var params struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			json.Unmarshal(n.Params, &params)
			if owner[string(params.RequestID)] != ch {
				t.Errorf("cancellation for %s reached a child that never had it", params.RequestID)
			}
		}
	}
	// Their slots come back once each child answers the probe that
	// follows the cancellations.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if st, err := p.Await(ctx, func(s Status) bool { return s.InFlight == 0 }); err != nil || st.Pending != 0 {
		t.Errorf("stats after = %+v (%v), want nothing in flight", st.Stats, err)
	}
}

// bubblePool is a pool of fake children inside a synctest bubble, with
// every worker's handshake done and drained.
func bubblePool(t *testing.T, opts Options) (*Bridge, []*fakeChild) {
	w, children := bubbleWorld(t, opts, autoReply{initialize: true})
	return w.b, children
}

// bubbleWorld is bubblePool with children that reply as auto says, and
// the world, whose children channel has those it starts later.
func bubbleWorld(t *testing.T, opts Options, auto autoReply) (*world, []*fakeChild) {
	w := &world{t: t, children: make(chan *fakeChild, 16), auto: auto}
	opts.Era = EraLegacy
	p := New(w.start, strict(t, opts))
	w.b = p
	t.Cleanup(func() { p.Close(context.Background()) })
	synctest.Wait()
	var children []*fakeChild
	for range max(opts.Workers, 1) {
		c := <-w.children
		t.Cleanup(c.exit)
		for len(c.got) > 0 {
			<-c.got // the handshake
		}
		children = append(children, c)
	}
	return w, children
}

// received is what a child got since the last look, once every goroutine
// has settled.
func received(c *fakeChild) []*jsonrpc.Message {
	synctest.Wait()
	var ms []*jsonrpc.Message
	for len(c.got) > 0 {
		ms = append(ms, <-c.got)
	}
	return ms
}

// onlyOne is the one child of children that got a request since the last
// look (as got tells), with that request; the test fails unless exactly
// one request came.
func onlyOne(t *testing.T, children []*fakeChild, got func(*fakeChild) []*jsonrpc.Message, what string) (*fakeChild, *jsonrpc.Message) {
	t.Helper()
	var child *fakeChild
	var msg *jsonrpc.Message
	for _, c := range children {
		for _, m := range got(c) {
			if child != nil {
				t.Fatalf("%s: more than one request reached the children", what)
			}
			child, msg = c, m
		}
	}
	if child == nil {
		t.Fatalf("%s: no child got a request", what)
	}
	return child, msg
}

// initialize, and discover of a legacy child, are answered from the
// child's handshake while every slot is taken: they never reach the child
// and take no slot.
func TestHandshakesNeedNoSlot(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, children := bubblePool(t, Options{Workers: 1, MaxInFlight: 1, QueueSize: 1, QueueTimeout: time.Second})
		busy := poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":"busy","method":"tools/call"}`)
		children[0].expect("tools/call")
		for _, body := range []string{
			`{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"0"}}}`,
			`{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		} {
			c, err := callOn(p, context.Background(), request(t, body), Caller{})
			if err != nil {
				t.Fatalf("%s with every slot taken: %v", body, err)
			}
			if resp, err := c.wait(); err != nil || !contains(resp, `"result"`) {
				t.Errorf("%s: %s, %v", body, resp, err)
			}
		}
		if ms := received(children[0]); len(ms) != 0 {
			t.Errorf("the child got %s", ms[0].Raw)
		}
		busy.Cancel("done")
	})
}

// Beyond the cap, calls wait in the queue; beyond the queue they are
// refused at once; a waiting call whose client leaves never reaches the
// child; a freed slot lets the next waiting call through.
func TestPoolQueue(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, children := bubblePool(t, Options{Workers: 1, MaxInFlight: 1, QueueSize: 1})
		child := children[0]
		first := poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":"first","method":"tools/call"}`)
		req := child.expect("tools/call")

		// One call waits; its client leaves; it never reaches the child.
		ctx, leave := context.WithCancel(context.Background())
		waited := make(chan error, 1)
		go func() {
			_, err := callOn(p, ctx, request(t, `{"jsonrpc":"2.0","id":"gone","method":"tools/call"}`), Caller{})
			waited <- err
		}()
		synctest.Wait()
		if st := p.Stats(); st.Queued != 1 || st.InFlight != 1 {
			t.Fatalf("stats = %+v, want one in flight and one queued", st)
		}
		// The queue is full: the next call is refused at once.
		_, err := callOn(p, context.Background(), request(t, `{"jsonrpc":"2.0","id":"refused","method":"tools/call"}`), Caller{})
		if gatewayCode(t, err) != jsonrpc.CodeOverloaded {
			t.Errorf("call past the queue: %v, want -32003", err)
		}
		leave()
		if err := <-waited; !errors.Is(err, context.Canceled) {
			t.Errorf("waiting call whose client left: %v", err)
		}

		// Another waits, and goes through once the first call ends.
		next := make(chan *call, 1)
		go func() {
			c, err := callOn(p, context.Background(), request(t, `{"jsonrpc":"2.0","id":"next","method":"tools/call"}`), Caller{})
			if err != nil {
				t.Error(err)
			}
			next <- c
		}()
		synctest.Wait()
		if ms := received(child); len(ms) != 0 {
			t.Fatalf("child got %s while its slot was taken", ms[0].Raw)
		}
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID)
		if _, err := first.wait(); err != nil {
			t.Fatal(err)
		}
		req2 := child.expect("tools/call")
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{"n":2}}`, req2.ID)
		if resp, err := (<-next).wait(); err != nil || !contains(resp, `"id":"next"`) {
			t.Errorf("queued call got %s, %v", resp, err)
		}
		// The call that left never reached the child.
		if ms := received(child); len(ms) != 0 {
			t.Errorf("child also got %s", ms[0].Raw)
		}
	})
}

// A worker whose child died, waiting to restart it, takes no call while
// another worker serves: the call waits in the queue for a slot of a child
// that serves (the other's, freed; or the restarted child's), where the
// dead worker would fail it at once.
func TestPoolPassesOverADeadWorker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := &world{t: t, children: make(chan *fakeChild, 16), auto: autoReply{initialize: true}}
		p := New(w.start, strict(t, Options{Era: EraLegacy, Workers: 2, MaxInFlight: 1, QueueSize: 4, RestartMin: 10 * time.Second, RestartMax: 10 * time.Second}))
		t.Cleanup(func() { p.Close(context.Background()) })
		synctest.Wait()
		dying, serving := <-w.children, <-w.children
		t.Cleanup(serving.exit)
		received(serving)
		dying.exit()
		synctest.Wait()
		if st := p.Status(); st.ReadyWorkers() != 1 {
			t.Fatalf("%d workers ready, want the one whose child lives", st.ReadyWorkers())
		}
		first := poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":"first","method":"tools/call"}`)
		req := serving.expect("tools/call")
		waiting := make(chan *call, 2)
		for _, id := range []string{"second", "third"} {
			go func() {
				c, err := callOn(p, context.Background(), request(t, `{"jsonrpc":"2.0","id":"`+id+`","method":"tools/call"}`), Caller{})
				if err != nil {
					t.Errorf("call %s: %v; want it to wait for a child that serves", id, err)
				}
				waiting <- c
			}()
			synctest.Wait()
		}
		if st := p.Stats(); st.Queued != 2 {
			t.Fatalf("stats = %+v, want two calls queued", st)
		}
		// The dead child's restart comes while the living one is still
		// busy: the first in line goes to the new child.
		time.Sleep(11 * time.Second)
		synctest.Wait()
		restarted := <-w.children
		t.Cleanup(restarted.exit)
		answer := func(ch *fakeChild) int {
			n := 0
			for _, m := range received(ch) {
				if m.Method == "tools/call" {
					ch.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
					n++
				}
			}
			return n
		}
		if n := answer(restarted); n != 1 {
			t.Errorf("the restarted child got %d calls, want the first in line", n)
		}
		// The living child's slot frees: the next in line takes it.
		serving.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID)
		if _, err := first.wait(); err != nil {
			t.Fatal(err)
		}
		answer(serving)
		answer(restarted)
		for range 2 {
			c := <-waiting
			if c == nil {
				t.FailNow()
			}
			if _, err := c.wait(); err != nil {
				t.Errorf("a queued call: %v", err)
			}
		}
	})
}

// The queue is first come, first served: each freed slot goes to the call
// that has waited longest, a call that leaves the line gives up its place,
// and a call that arrives while others wait goes behind them.
func TestPoolQueueOrder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, children := bubblePool(t, Options{Workers: 1, MaxInFlight: 1, QueueSize: 8})
		child := children[0]
		poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"first"}}`)
		req := child.expect("tools/call")

		calls := make(chan *call, 8)
		enqueue := func(ctx context.Context, name string) {
			go func() {
				c, err := callOn(p, ctx, request(t, `{"jsonrpc":"2.0","id":"`+name+`","method":"tools/call","params":{"name":"`+name+`"}}`), Caller{})
				if err != nil && ctx.Err() == nil {
					t.Errorf("%s: %v", name, err)
				}
				if c != nil {
					calls <- c
				}
			}()
			synctest.Wait() // in line before the next one
		}
		ctx, leave := context.WithCancel(context.Background())
		for _, name := range []string{"a", "b", "leaves", "c", "d", "e"} {
			if name == "leaves" {
				enqueue(ctx, name)
				continue
			}
			enqueue(context.Background(), name)
		}
		leave()
		synctest.Wait()
		if st := p.Stats(); st.Queued != 5 {
			t.Fatalf("stats = %+v, want five queued", st)
		}
		var got []string
		for range 5 {
			child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID)
			req = child.expect("tools/call")
			var params struct{ Name string }
			if err := json.Unmarshal(req.Params, &params); err != nil {
				t.Fatal(err)
			}
			got = append(got, params.Name)
			if len(got) == 2 {
				enqueue(context.Background(), "late") // behind c, d and e
			}
		}
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID)
		req = child.expect("tools/call")
		if !strings.Contains(string(req.Params), `"late"`) {
			t.Errorf("the call that came last got %s", req.Params)
		}
		if want := "a b c d e"; strings.Join(got, " ") != want {
			t.Errorf("the child got the queued calls in the order %q, want %q", strings.Join(got, " "), want)
		}
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID)
		for range 6 {
			if _, err := (<-calls).wait(); err != nil {
				t.Error(err)
			}
		}
	})
}

// A slot granted to a call whose client leaves at that moment goes on to
// the next in line; none is lost.
func TestPoolQueueGrantToALeavingCall(t *testing.T) {
	t.Parallel()
	for range 20 { // the leaving call sees its slot or its client gone first, as it happens
		synctest.Test(t, func(t *testing.T) {
			p, children := bubblePool(t, Options{Workers: 1, MaxInFlight: 1, QueueSize: 2})
			child := children[0]
			poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":0,"method":"tools/call"}`)
			req := child.expect("tools/call")
			ctx, leave := context.WithCancel(context.Background())
			leaves, stays := make(chan error, 1), make(chan error, 1)
			for _, q := range []struct {
				ctx  context.Context
				name string
				end  chan error
			}{{ctx, "leaves", leaves}, {context.Background(), "stays", stays}} {
				go func() {
					c, err := callOn(p, q.ctx, request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+q.name+`"}}`), Caller{})
					if err == nil {
						_, err = c.wait()
					}
					q.end <- err
				}()
				synctest.Wait()
			}
			leave()
			child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID)
			for {
				// The leaving call may reach the child after all, and be
				// cancelled there.
				m := child.next()
				if m.Method == "tools/call" && strings.Contains(string(m.Params), `"stays"`) {
					child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
					break
				}
			}
			if err := <-leaves; !errors.Is(err, context.Canceled) {
				t.Errorf("the call whose client left: %v", err)
			}
			if err := <-stays; err != nil {
				t.Errorf("the call behind it: %v", err)
			}
			synctest.Wait()
			if st := p.Stats(); st.InFlight != 0 || st.Queued != 0 {
				t.Errorf("stats = %+v, want nothing in flight or queued", st)
			}
		})
	}
}

// A call waits in the queue at most the queue timeout.
func TestPoolQueueTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, _ := bubblePool(t, Options{MaxInFlight: 1, QueueTimeout: 30 * time.Second})
		poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
		start := time.Now()
		_, err := callOn(p, context.Background(), request(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call"}`), Caller{})
		if gatewayCode(t, err) != jsonrpc.CodeOverloaded || time.Since(start) != 30*time.Second {
			t.Errorf("after %v: %v, want -32003 after 30s", time.Since(start), err)
		}
		if !strings.Contains(err.Error(), "30s") {
			t.Errorf("error %q does not say how long it waited", err)
		}
	})
}

// A modern client's retry goes to the worker that parked its call, even
// when every worker is full.
func TestPoolRetryReturnsToItsWorker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, children := bubblePool(t, Options{Workers: 2, MaxInFlight: 1})
		c, err := callOn(p, context.Background(), request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask"}}`), modernAsker)
		if err != nil {
			t.Fatal(err)
		}
		var asker, other *fakeChild
		var req *jsonrpc.Message
		for i, ch := range children {
			if ms := received(ch); len(ms) == 1 {
				asker, other, req = ch, children[1-i], ms[0]
			}
		}
		if asker == nil {
			t.Fatal("no child got the call")
		}
		asker.send(`{"jsonrpc":"2.0","id":"q","method":"elicitation/create","params":{"message":"?"}}`)
		irr, err := c.wait()
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Result struct {
				RequestState string `json:"requestState"`
			} `json:"result"`
		}
		json.Unmarshal(irr, &r)
		// The parked call still holds its worker's slot (the child is
		// working on it), so the next call goes to the other worker, and
		// both are full.
		if st := p.Stats(); st.InFlight != 1 {
			t.Errorf("stats with a call parked = %+v, want it in flight", st)
		}
		poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/call"}`)
		if len(received(other)) != 1 {
			t.Fatal("the other worker did not take the second call")
		}
		retry, err := callOn(p, context.Background(), request(t, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"ask","inputResponses":{"q":{"action":"accept"}},"requestState":"`+r.Result.RequestState+`"}}`), modernAsker)
		if err != nil {
			t.Fatal(err)
		}
		got := received(asker)
		if len(got) != 1 || string(got[0].ID) != `"q"` {
			t.Fatalf("asker got %v, want the answer to q", got)
		}
		if ms := received(other); len(ms) != 0 {
			t.Errorf("the other child got %s", ms[0].Raw)
		}
		asker.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, req.ID)
		if resp, err := retry.wait(); err != nil || !contains(resp, `"id":5`) {
			t.Errorf("retry got %s, %v", resp, err)
		}
	})
}

// Draining refuses new calls and waiting ones, reports not ready, and ends
// when the calls in flight have; or when its context does.
func TestPoolDrain(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, children := bubblePool(t, Options{MaxInFlight: 1})
		child := children[0]
		inFlight := poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
		req := child.expect("tools/call")
		waiting := make(chan error, 1)
		go func() {
			_, err := callOn(p, context.Background(), request(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call"}`), Caller{})
			waiting <- err
		}()
		synctest.Wait()
		drained := make(chan error, 1)
		go func() { drained <- p.Drain(context.Background()) }()
		if err := <-waiting; gatewayCode(t, err) != jsonrpc.CodeShutdown {
			t.Errorf("the waiting call got %v, want -32005", err)
		}
		if _, err := callOn(p, context.Background(), request(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call"}`), Caller{}); gatewayCode(t, err) != jsonrpc.CodeShutdown {
			t.Errorf("a new call got %v, want -32005", err)
		}
		if p.Ready() {
			t.Error("a draining pool reports ready")
		}
		// The tool list too, though the child is there to give it.
		if _, err := p.Tools(context.Background()); gatewayCode(t, err) != jsonrpc.CodeShutdown {
			t.Errorf("the tool list while draining: %v, want -32005", err)
		}
		synctest.Wait()
		select {
		case err := <-drained:
			t.Fatalf("Drain returned %v with a call in flight", err)
		default:
		}
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID)
		if _, err := inFlight.wait(); err != nil {
			t.Errorf("the call in flight got %v, want its answer", err)
		}
		if err := <-drained; err != nil {
			t.Errorf("Drain = %v", err)
		}

		// A drain whose grace runs out reports it.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		p2, children2 := bubblePool(t, Options{})
		poolCall(t, p2, context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
		children2[0].expect("tools/call")
		if err := p2.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Drain past its deadline = %v", err)
		}
	})
}

// Listens take no call slot but are capped: past MaxListens a listen is
// refused at once with -32003, and one that ends makes room.
func TestPoolListenCap(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, _ := bubblePool(t, Options{Workers: 2, MaxInFlight: 1, MaxListens: 2})
		open := func(ctx context.Context, id string) (*call, error) {
			return callOn(p, ctx, request(t, `{"jsonrpc":"2.0","id":"`+id+`","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}`), listenCaller)
		}
		ctx, leave := context.WithCancel(context.Background())
		defer leave()
		first, err := open(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := open(context.Background(), "b"); err != nil {
			t.Fatal(err)
		}
		// Both workers still take a call each: listens hold no slot.
		poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
		poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/call"}`)

		_, err = open(context.Background(), "c")
		if gatewayCode(t, err) != jsonrpc.CodeOverloaded || !strings.Contains(err.Error(), "2 listens") {
			t.Errorf("a listen past the cap: %v, want -32003 naming the cap", err)
		}
		leave()
		first.wait()
		synctest.Wait()
		if _, err := open(context.Background(), "d"); err != nil {
			t.Errorf("a listen after one ended: %v", err)
		}
	})
}

// A parked call holds its slot while its client decides, since the child
// is still working on it; once given up, its slot goes to a waiting call.
func TestPoolParkedCallHoldsItsSlot(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, children := bubblePool(t, Options{MaxInFlight: 1, QueueTimeout: time.Hour})
		child := children[0]
		c, err := callOn(p, context.Background(), request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask"}}`), modernAsker)
		if err != nil {
			t.Fatal(err)
		}
		req := child.expect("tools/call")
		child.send(`{"jsonrpc":"2.0","id":"q","method":"elicitation/create","params":{"message":"?"}}`)
		if _, err := c.wait(); err != nil {
			t.Fatal(err)
		}
		parkedAt := time.Now()

		next := make(chan *call, 1)
		go func() {
			c, err := callOn(p, context.Background(), request(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call"}`), Caller{})
			if err != nil {
				t.Error(err)
			}
			next <- c
		}()
		synctest.Wait()
		if st := p.Stats(); st.InFlight != 1 || st.Queued != 1 {
			t.Fatalf("stats = %+v, want the parked call in flight and the next one waiting", st)
		}
		// The client never retries: after the idle timeout the parked call
		// is given up (the child is told), and the waiting call goes on.
		// (Read straight from the child: the bubble's clock moves on only
		// while everything waits.)
		got := map[string]*jsonrpc.Message{} // by method; "" is the error to the question
		for len(got) < 3 {
			// A liveness probe may come too: the waiting call starts on a
			// child that has been silent for minutes.
			if m := <-child.got; m.Method != "ping" {
				got[m.Method] = m
			}
		}
		if e := got[""]; e == nil || string(e.ID) != `"q"` || e.Error == nil {
			t.Errorf("child got %v, want an error for its question", got)
		}
		if n := got["notifications/cancelled"]; n == nil || !contains(n.Params, `"requestId":`+string(req.ID)) {
			t.Errorf("child got %v, want the parked call %s cancelled", got, req.ID)
		}
		if got["tools/call"] == nil {
			t.Errorf("child got %v, want the waiting call", got)
		}
		if waited := time.Since(parkedAt); waited != 5*time.Minute {
			t.Errorf("the waiting call went on after %v, want the 5m idle timeout", waited)
		}
		if c2 := <-next; c2 != nil {
			c2.Cancel("done")
		}
	})
}

// The overload message counts in words a reader does not stumble on.
func TestBusyMessage(t *testing.T) {
	for _, c := range []struct {
		waiting, perChild int
		want              string
	}{
		{0, 1, "every child is busy with 1 call at once, and no call may wait for one (GATEWAY_QUEUE_SIZE=0)"},
		{1, 64, "1 call is waiting for a child with a free slot (each takes 64 calls at once)"},
		{256, 1, "256 calls are waiting for a child with a free slot (each takes 1 call at once)"},
	} {
		if got := busyMessage(c.waiting, c.perChild); !strings.HasPrefix(got, c.want) {
			t.Errorf("busyMessage(%d, %d) = %q, want %q…", c.waiting, c.perChild, got, c.want)
		}
	}
}
