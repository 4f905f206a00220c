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
// one in flight by then. It is refused until the child answers the call it
// was told to cancel.
func TestQuestionOfACallWhoseClientLeftIsNotRelayed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Options{Era: EraLegacy, IdleTimeout: time.Minute}, autoReply{initialize: true})
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
		w := &world{t: t, children: make(chan *fakeChild, 8), auto: autoReply{initialize: true}}
		w.b = New(w.start, strict(t, Options{Era: EraLegacy, IdleTimeout: time.Hour}))
		child := <-w.children
		defer child.exit()
		defer w.b.Close(context.Background())
		// Read the channel itself: next's ten-second guard would fire first
		// on the bubble's clock.
		expect := func(method string) *jsonrpc.Message {
			t.Helper()
			for m := range child.got {
				if m.Method == method {
					return m
				}
			}
			t.Fatalf("no %s for the child", method)
			return nil
		}
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
// question ambiguous until the idle timeout has passed since.
func TestTooManyCallsWhoseClientsLeft(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Options{Era: EraLegacy, IdleTimeout: time.Minute}, autoReply{initialize: true})
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
	ch := w.currentChild()
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

// A call parked for its 2026 client's answers is still in flight on the
// child, which may ask it more without waiting for the first answer: while
// another client's call runs too, such a question cannot be told apart
// from one of that call's, and is refused rather than shown to it.
func TestParkedCallCountsAsInFlight(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	parked, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":"m","method":"tools/call","params":{"name":"two"}}`), modernAsker)
	if err != nil {
		t.Fatal(err)
	}
	child.expect("tools/call")
	child.send(`{"jsonrpc":"2.0","id":"q1","method":"elicitation/create","params":{"message":"first, for M"}}`)
	if resp, err := parked.wait(); err != nil || !contains(resp, `"input_required"`) {
		t.Fatalf("M's call: %s, %v; want input_required", resp, err)
	}
	logger := legacyStreamer
	logger.LogLevel = "warning"
	n, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":"n","method":"tools/call","params":{"name":"wait"}}`), logger)
	if err != nil {
		t.Fatal(err)
	}
	set := child.expect("logging/setLevel")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, set.ID)
	reqN := child.expect("tools/call")
	// A log line could be the parked call's too: N does not get it.
	child.send(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","data":"M's"}}`)
	child.send(`{"jsonrpc":"2.0","id":"q2","method":"elicitation/create","params":{"message":"second, for M"}}`)
	refusedNotAsked(t, child, n, `"q2"`, "calls are in flight")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, reqN.ID)
	if resp, err := n.wait(); err != nil || !contains(resp, `"content"`) {
		t.Errorf("N's call: %s, %v", resp, err)
	}
}
