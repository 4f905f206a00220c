package bridge

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// drain waits for the call to end and returns every message its client
// got, and its response.
func drain(t *testing.T, c *call) (notes [][]byte, resp []byte) {
	t.Helper()
	for {
		select {
		case <-c.Wake():
		case <-time.After(10 * time.Second):
			t.Fatal("the call did not end")
		}
		n, r, done, _ := c.Take()
		notes = append(notes, n...)
		if done {
			return notes, r
		}
	}
}

// legacyBubble is a world inside a synctest bubble, on a 2025 child that
// replies as auto says, with an idle timeout of an hour.
func legacyBubble(t *testing.T, auto autoReply) (*world, *fakeChild) {
	w := &world{t: t, children: make(chan *fakeChild, 8), auto: auto}
	w.b = New(w.start, strict(t, Options{Era: EraLegacy, IdleTimeout: time.Hour}))
	child := <-w.children
	t.Cleanup(func() {
		w.b.Close(context.Background())
		child.exit()
	})
	return w, child
}

// bubbleExpect is the next message of method the child gets, others
// skipped. It reads the channel itself: next's ten-second guard would fire
// first on the bubble's clock.
func bubbleExpect(t *testing.T, child *fakeChild, method string) *jsonrpc.Message {
	t.Helper()
	for m := range child.got {
		if m.Method == method {
			return m
		}
	}
	t.Fatalf("no %s for the child", method)
	return nil
}

// readyChild is the world's first child once its handshake is done.
func readyChild(t *testing.T, w *world) *child {
	t.Helper()
	if _, err := w.b.Await(context.Background(), func(s Status) bool { return s.ReadyWorkers() == 1 }); err != nil {
		t.Fatal(err)
	}
	return w.currentChild()
}

// refusedChild waits for the bridge's refusal of the child's request id,
// and checks it says why.
func refusedChild(t *testing.T, child *fakeChild, id, why string) {
	t.Helper()
	m := child.next()
	if m.Kind != jsonrpc.KindResponse || string(m.ID) != id || m.Error == nil || !contains(m.Error, why) {
		t.Fatalf("child got %s, want the refusal of %s saying %q", m.Raw, id, why)
	}
}

// refusedNotAsked waits for the bridge's refusal of the child's question
// id, which says why, and fails if the client of c hears from its call
// first: the question went there.
func refusedNotAsked(t *testing.T, child *fakeChild, c *call, id, why string) {
	t.Helper()
	for {
		select {
		case <-c.Wake():
			notes, resp, _, _ := c.Take()
			t.Fatalf("the client got %q (response %s), not the child its refusal", notes, resp)
		case m := <-child.got:
			if m.Method == mcp.MethodPing {
				continue
			}
			if m.Kind != jsonrpc.KindResponse || string(m.ID) != id || m.Error == nil || !contains(m.Error, why) {
				t.Fatalf("child got %s, want the refusal of %s saying %q", m.Raw, id, why)
			}
			return
		case <-time.After(10 * time.Second):
			t.Fatalf("the child's question %s went nowhere", id)
		}
	}
}

// A legacy child may go on with a call whose client left, cancellation
// being advisory, and ask its question later: the question carries that
// call's arguments, and must not reach the client whose call is the only
// one in flight by then. Until the child shows it took the cancellation
// (this one is too busy to answer the probe that would show it, see
// cancelled), the question is refused, and so it is until the child
// answers the call it was told to cancel.
func TestQuestionOfACallWhoseClientLeftIsNotRelayed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Options{Era: EraLegacy, IdleTimeout: time.Minute}, autoReply{initialize: true, ignorePing: true})
	child := w.child()

	ctxA, leave := context.WithCancel(context.Background())
	a, err := callOn(w.b, ctxA, request(t, `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"slow","arguments":{"secret":"A's"}}}`), legacyStreamer)
	if err != nil {
		t.Fatal(err)
	}
	reqA := child.expect("tools/call")
	leave()
	a.Cancel("client disconnected")
	if m := child.expect(mcp.NoteCancelled); !contains(m.Params, `"requestId":`+string(reqA.ID)) {
		t.Fatalf("child got %s, want the cancellation of %s", m.Raw, reqA.ID)
	}

	b, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"quick"}}`), legacyStreamer)
	if err != nil {
		t.Fatal(err)
	}
	reqB := child.expect("tools/call")
	// The child, ignoring the cancellation, asks for A's call.
	child.send(`{"jsonrpc":"2.0","id":"qa","method":"elicitation/create","params":{"message":"confirm A's secret","requestedSchema":{"type":"object","properties":{}}}}`)
	refusedNotAsked(t, child, b, `"qa"`, "a call whose client left (or timed out) may still be running on the child")

	// Once the child answers A's call, late, B's call is the only one the
	// child can be working on again.
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, reqA.ID)
	child.send(`{"jsonrpc":"2.0","id":"qb","method":"elicitation/create","params":{"message":"B's question","requestedSchema":{"type":"object","properties":{}}}}`)
	q := nextNote(t, b)
	if q.Method != "elicitation/create" || !contains(q.Params, "B's question") {
		t.Fatalf("B's client got %s, want B's question", q.Raw)
	}
	answer, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":` + string(q.ID) + `,"result":{"action":"decline"}}`))
	w.b.Respond(context.Background(), answer)
	if m := child.next(); string(m.ID) != `"qb"` {
		t.Fatalf("child got %s, want B's answer", m.Raw)
	}
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, reqB.ID)
	notes, resp := drain(t, b)
	if !contains(resp, `"id":"b"`) {
		t.Errorf("B's call ended with %s", resp)
	}
	for _, n := range notes {
		if strings.Contains(string(n), "A's") {
			t.Errorf("B's client got A's question: %s", n)
		}
	}
}

// A call whose client left counts for no longer than unsettledFor, however
// long the idle timeout: a child that honours the cancellation never
// answers it, and must not keep every later question from its client.
func TestCallWhoseClientLeftCountsForAWhile(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w, child := legacyBubble(t, autoReply{initialize: true, ignorePing: true})
		expect := func(method string) *jsonrpc.Message { return bubbleExpect(t, child, method) }
		a, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":"a","method":"tools/call"}`), legacyStreamer)
		if err != nil {
			t.Fatal(err)
		}
		expect("tools/call")
		a.Cancel("client disconnected")
		expect(mcp.NoteCancelled)

		time.Sleep(unsettledFor)
		b, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":"b","method":"tools/call"}`), legacyStreamer)
		if err != nil {
			t.Fatal(err)
		}
		reqB := expect("tools/call")
		child.send(`{"jsonrpc":"2.0","id":"qb","method":"sampling/createMessage","params":{"maxTokens":5}}`)
		synctest.Wait()
		notes, _, _, _ := b.Take()
		if len(notes) != 1 || !contains(notes[0], `"sampling/createMessage"`) {
			t.Errorf("B's client got %q, want the question", notes)
		}
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, reqB.ID)
		b.wait()
	})
}

// More calls whose clients left than the child keeps track of make every
// question ambiguous until unsettledSpan has passed since.
func TestTooManyCallsWhoseClientsLeft(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Options{Era: EraLegacy, IdleTimeout: time.Minute}, autoReply{initialize: true, ignorePing: true})
	child := w.child()
	c := w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
	req := child.expect("tools/call")
	ch := w.currentChild() // serving: it has its call
	ch.mu.Lock()
	for i := range recentEnds + 1 {
		ch.unsettle(int64(1_000_000 + i))
	}
	ch.mu.Unlock()
	// Answering them all, late, does not bring back the one that did not fit.
	for i := range recentEnds + 1 {
		ch.endedAs(int64(1_000_000 + i))
	}
	if n, more := ch.stillRunning(); n != 0 || !more {
		t.Fatalf("stillRunning = %d, %v; want 0, true", n, more)
	}
	child.send(`{"jsonrpc":"2.0","id":"q","method":"roots/list"}`)
	refusedChild(t, child, `"q"`, "more calls whose clients left (or timed out) than the gateway keeps track of")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID)
	c.wait()
}

// A 2026-07-28 client's request other than tools/call, prompts/get and
// resources/read cannot be answered with an InputRequiredResult: a legacy
// child's question during one is refused, and the call goes on, whether
// the client could answer it (it would be parked) or not (it would fail
// with -32021).
func TestQuestionDuringAListIsRefusedForAModernClient(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	bare := Caller{Modern: true, Capabilities: []byte(`{}`)}
	n := 0
	for _, caller := range []Caller{modernAsker, bare} {
		for _, method := range []string{"resources/list", "prompts/list", "tools/list"} {
			c, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":1,"method":"`+method+`"}`), caller)
			if err != nil {
				t.Fatal(err)
			}
			req := child.expect(method)
			n++
			id := fmt.Sprintf(`"q%d"`, n)
			child.send(`{"jsonrpc":"2.0","id":%s,"method":"elicitation/create","params":{"message":"which?","requestedSchema":{"type":"object","properties":{}}}}`, id)
			refusedNotAsked(t, child, c, id, "the client's "+method+" request cannot be answered with input_required")
			child.send(`{"jsonrpc":"2.0","id":%s,"result":{"items":[]}}`, req.ID)
			resp, err := c.wait()
			if err != nil || !contains(resp, `"items":[]`) || contains(resp, mcp.ResultInputRequired) {
				t.Errorf("%s ended with %s, %v; want the child's result", method, resp, err)
			}
		}
	}
}

// A call whose request never reached the child (its client left first)
// is nothing the child can ask about: the questions of the next call go to
// its client.
func TestCallThatNeverReachedTheChildDoesNotCount(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Options{Era: EraLegacy, IdleTimeout: time.Minute}, autoReply{initialize: true})
	child := w.child()
	ch := readyChild(t, w)
	gone, leave := context.WithCancel(context.Background())
	leave()
	c := ch.newCall(gone, callSpec{req: request(t, `{"jsonrpc":"2.0","id":"a","method":"tools/call"}`), caller: legacyStreamer})
	c.Cancel("client disconnected")
	if err := ch.start(gone, c, nil); err == nil {
		t.Fatal("a call that ended first was started")
	}
	if n, more := ch.stillRunning(); n != 0 || more {
		t.Fatalf("stillRunning = %d, %v; want 0, false", n, more)
	}
	b, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":"b","method":"tools/call"}`), legacyStreamer)
	if err != nil {
		t.Fatal(err)
	}
	reqB := child.expect("tools/call")
	child.send(`{"jsonrpc":"2.0","id":"qb","method":"sampling/createMessage","params":{"maxTokens":5}}`)
	if q := nextNote(t, b); q.Method != "sampling/createMessage" {
		t.Errorf("B's client got %s, want the question", q.Raw)
	}
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, reqB.ID)
	b.wait()
}

// A call retired while its request waited to be written (its client left
// then) counts as maybe running until the write gives up, and keeps its
// slot; then it never reached the child, and counts no more: its slot
// comes back.
func TestCallRetiredWhileItsWriteWaitedDoesNotCount(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Options{Era: EraLegacy, IdleTimeout: time.Minute}, autoReply{initialize: true})
	w.child()
	ch := readyChild(t, w)
	_, s, err := w.b.acquire(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := ch.newCall(context.Background(), callSpec{req: request(t, `{"jsonrpc":"2.0","id":"a","method":"tools/call"}`), caller: legacyStreamer, slot: s})
	ex := c.newExchange()
	*ex = exchange{ch: ch, id: ch.b.ids.Add(1), method: c.method, clientID: c.clientID, ctx: c.ctx, call: c}
	if _, err := ch.register(ex); err != nil {
		t.Fatal(err)
	}
	if !c.attach(ex) {
		t.Fatal("attach failed")
	}
	c.Cancel("client disconnected") // retired while the write is under way
	if n, _ := ch.stillRunning(); n != 1 || w.b.Stats().InFlight != 1 {
		t.Fatalf("stillRunning = %d, %d in flight while the write may still go out, want 1 and 1", n, w.b.Stats().InFlight)
	}
	ex.writeDone(context.Canceled) // the write gave up: nothing went out
	if n, more := ch.stillRunning(); n != 0 || more || w.b.Stats().InFlight != 0 {
		t.Errorf("stillRunning = %d, %v, %d in flight after the write gave up; want 0, false, 0", n, more, w.b.Stats().InFlight)
	}
}

// A child that answers a probe sent after a cancellation has taken the
// cancellation: a child that honours it has stopped that call, and the
// next call's questions reach its client at once, not after
// unsettledFor. One that answers the call after that goes on with
// cancelled calls: for a while only unsettledFor settles them.
func TestQuestionsFlowOnceTheChildTookTheCancellation(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w, child := legacyBubble(t, autoReply{initialize: true})
		expect := func(method string) *jsonrpc.Message { return bubbleExpect(t, child, method) }
		leaveOne := func(id string) *jsonrpc.Message {
			gone, leave := context.WithCancel(context.Background())
			a, err := callOn(w.b, gone, request(t, `{"jsonrpc":"2.0","id":"`+id+`","method":"tools/call"}`), legacyStreamer)
			if err != nil {
				t.Fatal(err)
			}
			req := expect("tools/call")
			leave()
			a.wait()
			expect(mcp.NoteCancelled)
			synctest.Wait() // the barrier's ping, answered
			return req
		}
		asked := func(id string) bool {
			b, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":"`+id+`","method":"tools/call"}`), legacyStreamer)
			if err != nil {
				t.Fatal(err)
			}
			req := expect("tools/call")
			child.send(`{"jsonrpc":"2.0","id":"q-%s","method":"sampling/createMessage","params":{"maxTokens":5}}`, id)
			synctest.Wait()
			// Judged at once: the notes' buffers are reused once taken.
			notes, _, _, _ := b.Take()
			ok := len(notes) == 1 && contains(notes[0], `"sampling/createMessage"`)
			child.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, req.ID)
			b.wait()
			return ok
		}
		reqA := leaveOne("a")
		if !asked("b") {
			t.Error("B's client was not asked its question once the child had taken A's cancellation")
		}
		// The child answers A after all: it goes on with cancelled calls.
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, reqA.ID)
		synctest.Wait()
		leaveOne("c")
		if asked("d") {
			t.Error("D's client was asked while C, cancelled on a child that goes on with cancelled calls, may still run")
		}
		time.Sleep(unsettledFor)
		if !asked("e") {
			t.Error("E's client was not asked once unsettledFor had passed")
		}
		// The doubt is over: barriers settle again. F and G are settled by
		// theirs; F's late answer brings the doubt back, and with it G,
		// which may be running still, counts again.
		reqF := leaveOne("f")
		leaveOne("g")
		if n, more := w.currentChild().stillRunning(); n != 0 || more {
			t.Errorf("stillRunning = %d, %v once the doubt was over; want F and G settled by their barriers", n, more)
		}
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, reqF.ID)
		synctest.Wait()
		if asked("h") {
			t.Error("H's client was asked while G, settled by a barrier before F showed the child goes on with cancelled calls, may still run")
		}
	})
}

// A barrier settles only the calls whose cancellation went in before its
// probe: a tasks/cancel whose client left is never cancelled (see
// sentOrWanted), so the child still runs it after another call's barrier,
// and answering it later is no sign of a child that goes on with
// cancelled calls.
func TestBarrierSettlesOnlyWhatItFollows(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w, child := legacyBubble(t, autoReply{initialize: true})
		expect := func(method string) *jsonrpc.Message { return bubbleExpect(t, child, method) }
		leave := func(body, method string) *jsonrpc.Message {
			gone, leave := context.WithCancel(context.Background())
			c, err := callOn(w.b, gone, request(t, body), legacyStreamer)
			if err != nil {
				t.Fatal(err)
			}
			m := expect(method)
			leave()
			c.wait()
			synctest.Wait()
			return m
		}
		reqA := leave(`{"jsonrpc":"2.0","id":"a","method":"tasks/cancel","params":{"taskId":"x"}}`, "tasks/cancel")
		ch := w.currentChild()
		leave(`{"jsonrpc":"2.0","id":"c","method":"tools/call"}`, "tools/call") // cancelled: a barrier follows
		if n, more := ch.stillRunning(); n != 1 || more {
			t.Errorf("stillRunning = %d, %v after C's barrier; want the tasks/cancel still counted", n, more)
		}
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, reqA.ID)
		synctest.Wait()
		ch.mu.Lock()
		distrusted := time.Now().Before(ch.barrier.doubt)
		ch.mu.Unlock()
		if n, _ := ch.stillRunning(); n != 0 || distrusted {
			t.Errorf("after the tasks/cancel's answer: stillRunning %d, distrusted %v; want 0, false", n, distrusted)
		}
	})
}
