package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stdiomcp/gateway/internal/gatewaytest"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

var legacyStreamer = Caller{Capabilities: json.RawMessage(`{"sampling":{},"elicitation":{}}`), CanStream: true}
var modernAsker = Caller{Modern: true, Capabilities: json.RawMessage(`{"sampling":{},"elicitation":{}}`), CanStream: true}

// unread keeps what Take returned beyond the one message nextNote hands
// out, per call.
var (
	unreadMu sync.Mutex
	unread   = map[*call][][]byte{}
)

// nextNote waits for the next message the call has for its client.
func nextNote(t *testing.T, c *call) *jsonrpc.Message {
	t.Helper()
	for {
		unreadMu.Lock()
		queued := unread[c]
		if len(queued) > 0 {
			unread[c] = queued[1:]
		}
		unreadMu.Unlock()
		if len(queued) > 0 {
			m, err := jsonrpc.Parse(queued[0])
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		select {
		case <-c.Wake():
		case <-time.After(10 * time.Second):
			t.Fatal("nothing for the client")
		}
		notes, resp, done, err := c.Take()
		if len(notes) == 0 && done {
			t.Fatalf("the call ended (%s, %v) without a message for the client", resp, err)
		}
		unreadMu.Lock()
		unread[c] = append(unread[c], notes...)
		unreadMu.Unlock()
	}
}

// legacyAsked is a legacy child asking a question ("child-q") in the
// middle of a legacy client's call: the call, the child's request for it,
// and the question as the client got it.
func legacyAsked(t *testing.T) (w *world, child *fakeChild, c *call, req, q *jsonrpc.Message) {
	t.Helper()
	w = newWorld(t, legacy(), autoReply{initialize: true})
	child = w.child()
	c, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_sampling"}}`), legacyStreamer)
	if err != nil {
		t.Fatal(err)
	}
	req = child.expect("tools/call")
	child.send(`{"jsonrpc":"2.0","id":"child-q","method":"sampling/createMessage","params":{"maxTokens":5}}`)
	return w, child, c, req, nextNote(t, c)
}

// A legacy child's question reaches the one call's legacy client on its
// stream, and the client's answer goes back under the child's own id.
func TestLegacyChildAsksALegacyClient(t *testing.T) {
	t.Parallel()
	w, child, c, req, q := legacyAsked(t)
	if q.Kind != jsonrpc.KindRequest || q.Method != "sampling/createMessage" || string(q.Params) != `{"maxTokens":5}` || !strings.HasPrefix(string(q.ID), `"gw-`) {
		t.Fatalf("client got %s", q.Raw)
	}
	answer, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":` + string(q.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"hi"}}}`))
	w.b.Respond(context.Background(), answer)
	got := child.next()
	if string(got.ID) != `"child-q"` || !contains(got.Result, `"text":"hi"`) {
		t.Errorf("child got %s, want the answer under its own id", got.Raw)
	}
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, req.ID)
	if resp, err := c.wait(); err != nil || !contains(resp, `"id":1`) {
		t.Errorf("Wait = %s, %v", resp, err)
	}
	// A second answer to the same question is dropped, not delivered.
	if err := w.b.Respond(context.Background(), answer); err != nil {
		t.Errorf("a second answer: %v", err)
	}
}

// A question the child cancels is withdrawn: its legacy client is told so
// under the id it was sent, and an answer that comes anyway is dropped.
func TestLegacyChildWithdrawsAQuestion(t *testing.T) {
	t.Parallel()
	w, child, c, req, q := legacyAsked(t)
	child.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"child-q","reason":"no longer needed"}}`)
	n := nextNote(t, c)
	if n.Method != "notifications/cancelled" || string(n.Params) != `{"requestId":`+string(q.ID)+`,"reason":"no longer needed"}` {
		t.Fatalf("client got %s, want the cancellation of %s", n.Raw, q.ID)
	}
	answer, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":` + string(q.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"hi"}}}`))
	w.b.Respond(context.Background(), answer)
	// What the child hears next is the next call, not the withdrawn answer.
	c2, _ := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`), legacyStreamer)
	if m := child.next(); m.Method != "tools/list" {
		t.Errorf("child got %s, want the next call (the answer to a withdrawn question is dropped)", m.Raw)
	} else {
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`, m.ID)
	}
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, req.ID)
	if _, err := c.wait(); err != nil {
		t.Error(err)
	}
	if _, err := c2.wait(); err != nil {
		t.Error(err)
	}
}

// Questions the gateway cannot route are refused at once.
func TestUnroutableQuestionsAreRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	refused := func(why string) {
		t.Helper()
		m := child.next()
		if m.Kind != jsonrpc.KindResponse || m.Error == nil || !contains(m.Error, why) {
			t.Errorf("child got %s, want a refusal saying %q", m.Raw, why)
		}
	}
	child.send(`{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}}`)
	refused("no call is in flight")

	a, _ := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`), Caller{Capabilities: json.RawMessage(`{}`), CanStream: true})
	ra := child.expect("tools/call")
	child.send(`{"jsonrpc":"2.0","id":2,"method":"elicitation/create","params":{}}`)
	refused("did not declare the elicitation capability")

	b, _ := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call"}`), legacyStreamer)
	rb := child.expect("tools/call")
	child.send(`{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{}}`)
	refused("2 calls are in flight (or parked for their clients' answers) and stdio does not say which one asks sampling/createMessage")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, ra.ID)
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, rb.ID)
	a.wait()
	b.wait()

	// An elicitation in a mode the client did not declare: {} is form alone.
	e, _ := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":4,"method":"tools/call"}`),
		Caller{Capabilities: json.RawMessage(`{"elicitation":{}}`), CanStream: true})
	re := child.expect("tools/call")
	child.send(`{"jsonrpc":"2.0","id":6,"method":"elicitation/create","params":{"mode":"url","message":"go","url":"https://example.com/x","elicitationId":"e1"}}`)
	refused("the client did not declare elicitation in url mode")
	child.send(`{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{"mode":"telepathy","message":"go"}}`)
	refused("neither form nor url")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, re.ID)
	e.wait()

	c, _ := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call"}`), Caller{Capabilities: json.RawMessage(`{"sampling":{}}`)})
	rc := child.expect("tools/call")
	child.send(`{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage","params":{}}`)
	refused("cannot take a stream")
	child.send(`{"jsonrpc":"2.0","id":5,"method":"tasks/list","params":{}}`)
	refused("does not serve tasks/list")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, rc.ID)
	c.wait()
}

// A legacy child's question for a 2026-07-28 client parks the call: the
// client gets an InputRequiredResult, and its retry continues the same
// call on the child.
func TestLegacyChildAsksAModernClient(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	firstCtx, leave := context.WithCancel(context.Background())
	c, err := callOn(w.b, firstCtx, request(t, `{"jsonrpc":"2.0","id":"first","method":"tools/call","params":{"name":"test_elicitation"}}`), modernAsker)
	if err != nil {
		t.Fatal(err)
	}
	req := child.expect("tools/call")
	child.send(`{"jsonrpc":"2.0","id":"q1","method":"elicitation/create","params":{"message":"name?"}}`)
	resp, err := c.wait()
	if err != nil {
		t.Fatal(err)
	}
	// The first request's client goes away once it has its answer, as
	// every HTTP request does: that must not retire the parked call.
	c.Cancel("client disconnected")
	leave()
	var irr struct {
		ID     json.RawMessage `json:"id"`
		Result struct {
			ResultType    string `json:"resultType"`
			InputRequests map[string]struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			} `json:"inputRequests"`
			RequestState string `json:"requestState"`
		} `json:"result"`
	}
	json.Unmarshal(resp, &irr)
	if string(irr.ID) != `"first"` || irr.Result.ResultType != "input_required" || len(irr.Result.InputRequests) != 1 || !strings.HasPrefix(irr.Result.RequestState, "gw1.") {
		t.Fatalf("first answer = %s", resp)
	}
	var key string
	for k, r := range irr.Result.InputRequests {
		key = k
		if r.Method != "elicitation/create" || string(r.Params) != `{"message":"name?"}` {
			t.Errorf("input request = %+v", r)
		}
	}
	// Bounded, so that a retry whose answer is lost fails instead of hanging.
	retryCtx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	retry := func(id, responses, state string) *call {
		t.Helper()
		r, err := callOn(w.b, retryCtx, request(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"test_elicitation","inputResponses":`+responses+`,"requestState":"`+state+`"}}`), modernAsker)
		if err != nil {
			t.Fatalf("retry: %v", err)
		}
		return r
	}
	// A retry without the answer is asked again, and the child sees nothing.
	again, _ := retry(`"again"`, `{}`, irr.Result.RequestState).wait()
	if !contains(again, `"input_required"`) || !contains(again, `"id":"again"`) {
		t.Errorf("retry without answers got %s", again)
	}
	// A tampered state is refused.
	if _, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"requestState":"`+irr.Result.RequestState+`x"}}`), modernAsker); gatewayCode(t, err) != jsonrpc.CodeInvalidParams {
		t.Errorf("tampered state: %v", err)
	}
	// A retry naming another tool would get this tool's answer: refused.
	if _, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"echo","inputResponses":{},"requestState":"`+irr.Result.RequestState+`"}}`), modernAsker); gatewayCode(t, err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), `for "test_elicitation", not "echo"`) {
		t.Errorf("a retry for another tool: %v", err)
	}
	// The real retry answers the child and gets the call's result.
	r := retry(`"second"`, `{"`+key+`":{"action":"accept","content":{"name":"Ada"}}}`, irr.Result.RequestState)
	got := child.next()
	if string(got.ID) != `"q1"` || !contains(got.Result, `"Ada"`) {
		t.Fatalf("child got %s, want the answer to q1", got.Raw)
	}
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"hello Ada"}]}}`, req.ID)
	final, err := r.wait()
	if err != nil || string(final) != `{"jsonrpc":"2.0","id":"second","result":{"resultType":"complete","content":[{"type":"text","text":"hello Ada"}]}}` {
		t.Errorf("retry got %s, %v", final, err)
	}
	// The state is spent.
	if _, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"requestState":"`+irr.Result.RequestState+`"}}`), modernAsker); gatewayCode(t, err) != jsonrpc.CodeInvalidParams {
		t.Errorf("a spent state: %v", err)
	}
}

// park starts a modern client's call that the child asks one question
// (id "q"), and returns the exchange's request as the child got it and the
// requestState of the InputRequiredResult.
func park(t *testing.T, w *world, child *fakeChild) (*jsonrpc.Message, string) {
	t.Helper()
	return parkAs(t, w, child, modernAsker)
}

// parkAs is park for a caller of the test's choosing.
func parkAs(t *testing.T, w *world, child *fakeChild, who Caller) (*jsonrpc.Message, string) {
	t.Helper()
	c, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":"first","method":"tools/call","params":{"name":"ask"}}`), who)
	if err != nil {
		t.Fatal(err)
	}
	req := child.expect("tools/call")
	child.send(`{"jsonrpc":"2.0","id":"q","method":"elicitation/create","params":{"message":"?"}}`)
	resp, err := c.wait()
	var irr struct {
		Result struct {
			RequestState string `json:"requestState"`
		} `json:"result"`
	}
	if json.Unmarshal(resp, &irr); err != nil || irr.Result.RequestState == "" {
		t.Fatalf("first answer = %s, %v", resp, err)
	}
	return req, irr.Result.RequestState
}

// The answer a retry brings reaches the child even when the retry's
// client is gone by the time it is written: the child waits for it.
func TestRetryAnswerOutlivesItsClient(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	req, state := park(t, w, child)
	gone, leave := context.WithCancel(context.Background())
	leave()
	r, err := callOn(w.b, gone, request(t, `{"jsonrpc":"2.0","id":"second","method":"tools/call","params":{"name":"ask","inputResponses":{"q":{"action":"accept"}},"requestState":"`+state+`"}}`), modernAsker)
	if got := child.next(); string(got.ID) != `"q"` || got.Result == nil {
		t.Fatalf("child got %s, want the answer to q", got.Raw)
	}
	if err == nil {
		if _, err := r.wait(); !errors.Is(err, context.Canceled) {
			t.Errorf("the retry whose client left ended with %v", err)
		}
		if n := child.expect("notifications/cancelled"); !contains(n.Params, `"requestId":`+string(req.ID)) {
			t.Errorf("cancellation = %s", n.Params)
		}
	} else if !errors.Is(err, context.Canceled) {
		t.Errorf("the retry whose client left: %v", err)
	}
}

// An error the child answers while the call is parked reaches the retry
// with its code, as any error of the child's does.
func TestErrorAnsweredWhileParked(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	req, state := park(t, w, child)
	child.send(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"gone"}}`, req.ID)
	// The reader has the answer once it has read the next line, which it
	// refuses: nothing is in flight that could answer it.
	child.send(`{"jsonrpc":"2.0","id":"x","method":"sampling/createMessage","params":{}}`)
	if m := child.next(); string(m.ID) != `"x"` || m.Error == nil {
		t.Fatalf("child got %s", m.Raw)
	}
	r, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":"second","method":"tools/call","params":{"name":"ask","inputResponses":{"q":{"action":"accept"}},"requestState":"`+state+`"}}`), modernAsker)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := r.wait(); err != nil || !contains(resp, `"code":-32601`) || r.ErrorCode() != -32601 {
		t.Errorf("retry got %s, %v, code %d; want the child's -32601", resp, err, r.ErrorCode())
	}
}

// A parked call whose client never comes back is cancelled toward the
// child, and the child's question is refused.
func TestParkedCallIsAbandoned(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := &world{t: t, children: make(chan *fakeChild, 8), auto: autoReply{initialize: true}}
		w.b = New(w.start, strict(t, Options{Era: EraLegacy, IdleTimeout: time.Minute}))
		child := <-w.children
		defer child.exit()
		defer w.b.Close(context.Background())
		c, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`), modernAsker)
		if err != nil {
			t.Fatal(err)
		}
		req := child.expect("tools/call")
		child.send(`{"jsonrpc":"2.0","id":"q","method":"sampling/createMessage","params":{}}`)
		c.wait()
		start := time.Now()
		// Read the channel itself: next's ten-second guard would fire first
		// on the bubble's clock. Both go out at once, in either order (and
		// the probe that follows a cancellation, see cancelled).
		var cancelled, refused bool
		for seen := 0; seen < 2; {
			m := <-child.got
			if m.Method == "ping" {
				continue
			}
			seen++
			switch {
			case m.Method == "notifications/cancelled" && contains(m.Params, `"requestId":`+string(req.ID)):
				cancelled = true
			case string(m.ID) == `"q"` && m.Error != nil:
				refused = true
			default:
				t.Errorf("child got %s", m.Raw)
			}
		}
		if !cancelled || !refused || time.Since(start) != time.Minute {
			t.Errorf("after %v: cancelled %v, question refused %v; want both after the idle timeout", time.Since(start), cancelled, refused)
		}
	})
}

// A modern child's InputRequiredResult for a legacy client becomes
// questions on the client's stream; with the answers the gateway retries
// the child, carrying its requestState, and relays the final result.
func TestModernChildAsksALegacyClient(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Options{Era: EraModern}, autoReply{discover: "result"})
	child := w.child()
	c, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test_sampling"}}`), legacyStreamer)
	if err != nil {
		t.Fatal(err)
	}
	first := child.expect("tools/call")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"resultType":"input_required","inputRequests":{"s":{"method":"sampling/createMessage","params":{"maxTokens":9}}},"requestState":"child-state"}}`, first.ID)
	q := nextNote(t, c)
	if q.Method != "sampling/createMessage" || string(q.Params) != `{"maxTokens":9}` {
		t.Fatalf("client got %s", q.Raw)
	}
	answer, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":` + string(q.ID) + `,"result":{"content":{"type":"text","text":"Paris"}}}`))
	w.b.Respond(context.Background(), answer)
	second := child.expect("tools/call")
	if string(second.ID) == string(first.ID) {
		t.Errorf("the retry reused id %s", second.ID)
	}
	var p struct {
		Name           string                     `json:"name"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
		RequestState   string                     `json:"requestState"`
	}
	json.Unmarshal(second.Params, &p)
	if p.Name != "test_sampling" || p.RequestState != "child-state" || string(p.InputResponses["s"]) != `{"content":{"type":"text","text":"Paris"}}` {
		t.Errorf("retry params = %s", second.Params)
	}
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","content":[]}}`, second.ID)
	if resp, err := c.wait(); err != nil || !strings.HasPrefix(string(resp), `{"jsonrpc":"2.0","id":7,`) {
		t.Errorf("Wait = %s, %v", resp, err)
	}

	// A client that cannot answer is told so.
	c2, _ := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":8,"method":"tools/call"}`), Caller{Capabilities: json.RawMessage(`{}`), CanStream: true})
	m := child.expect("tools/call")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"resultType":"input_required","inputRequests":{"e":{"method":"elicitation/create","params":{}}}}}`, m.ID)
	var e *jsonrpc.Error
	if _, err := c2.wait(); !errors.As(err, &e) || e.Code != mcp.CodeMissingCapability || !strings.Contains(e.Message, "did not declare") {
		t.Errorf("Wait = %v, want -32021 saying the client cannot answer", err)
	}
	// Nor can one that cannot take a stream.
	c3, _ := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":9,"method":"tools/call"}`), Caller{Capabilities: json.RawMessage(`{"elicitation":{}}`)})
	m = child.expect("tools/call")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"resultType":"input_required","inputRequests":{"e":{"method":"elicitation/create","params":{}}}}}`, m.ID)
	if _, err := c3.wait(); !errors.As(err, &e) || e.Code != mcp.CodeMissingCapability || !strings.Contains(e.Message, "cannot take a stream") {
		t.Errorf("Wait = %v, want -32021 saying the client cannot be asked", err)
	}
	// A result the gateway cannot turn into questions is the child's
	// fault, told as a bad answer (502), not the gateway's own failure.
	for _, bad := range []string{
		`{"resultType":"input_required","inputRequests":["sampling/createMessage"]}`,
		`{"resultType":"input_required","inputRequests":{}}`,
	} {
		c4, _ := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":10,"method":"tools/call"}`), legacyStreamer)
		m = child.expect("tools/call")
		child.send(`{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, bad)
		if _, err := c4.wait(); !errors.As(err, &e) || e.Code != jsonrpc.CodeBadAnswer || !strings.Contains(e.Message, "InputRequiredResult") {
			t.Errorf("after %s: Wait = %v, want -32010 naming the InputRequiredResult", bad, err)
		}
	}
}

// Questions that arrive together go out together, in one
// InputRequiredResult named by the child's request ids; each round of a
// multi-round call gets a requestState of its own, and a stale one is
// refused.
func TestQuestionsForAModernClientAreBatchedPerRound(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	caller := Caller{Modern: true, Capabilities: json.RawMessage(`{"sampling":{},"elicitation":{},"roots":{}}`)}
	c, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`), caller)
	if err != nil {
		t.Fatal(err)
	}
	req := child.expect("tools/call")
	// Three questions in one write, as a child that sends them at once does.
	child.send(`{"jsonrpc":"2.0","id":"user_name","method":"elicitation/create","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":"greeting","method":"sampling/createMessage","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":7,"method":"roots/list","params":{}}`)
	resp, _ := c.wait()
	var irr struct {
		Result struct {
			InputRequests map[string]struct{ Method string } `json:"inputRequests"`
			RequestState  string                             `json:"requestState"`
		} `json:"result"`
	}
	json.Unmarshal(resp, &irr)
	if len(irr.Result.InputRequests) != 3 || irr.Result.InputRequests["user_name"].Method != "elicitation/create" ||
		irr.Result.InputRequests["greeting"].Method != "sampling/createMessage" || irr.Result.InputRequests["7"].Method != "roots/list" {
		t.Fatalf("first answer = %s, want all three questions named by the child's ids", resp)
	}
	retry := func(responses, state string) (*call, error) {
		return callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"inputResponses":`+responses+`,"requestState":"`+state+`"}}`), caller)
	}
	r, err := retry(`{"user_name":{"action":"accept","content":{}},"greeting":{"content":{}},"7":{"roots":[]},"extra":{}}`, irr.Result.RequestState)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for range 3 {
		got[string(child.next().ID)] = true
	}
	if !got[`"user_name"`] || !got[`"greeting"`] || !got["7"] {
		t.Errorf("child got answers for %v", got)
	}
	// A second round: a new question, a new state; the first state is stale.
	child.send(`{"jsonrpc":"2.0","id":"step2","method":"elicitation/create","params":{}}`)
	resp, _ = r.wait()
	var second struct {
		Result struct {
			RequestState string `json:"requestState"`
		} `json:"result"`
	}
	json.Unmarshal(resp, &second)
	if second.Result.RequestState == "" || second.Result.RequestState == irr.Result.RequestState {
		t.Errorf("second round state %q, want a new one", second.Result.RequestState)
	}
	if _, err := retry(`{"step2":{"action":"accept","content":{}}}`, irr.Result.RequestState); gatewayCode(t, err) != jsonrpc.CodeInvalidParams {
		t.Errorf("a stale state: %v", err)
	}
	final, err := retry(`{"step2":{"action":"accept","content":{}}}`, second.Result.RequestState)
	if err != nil {
		t.Fatal(err)
	}
	if m := child.next(); string(m.ID) != `"step2"` {
		t.Errorf("child got %s", m.Raw)
	}
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, req.ID)
	if resp, err := final.wait(); err != nil || !contains(resp, `"resultType":"complete"`) {
		t.Errorf("final = %s, %v", resp, err)
	}
}

// A modern client gets the questions it can answer; when it can answer
// none, the call needs a capability it lacks: -32021, naming it.
func TestModernClientCapabilitiesLimitTheQuestions(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	caller := Caller{Modern: true, Capabilities: json.RawMessage(`{"sampling":{}}`)}

	c, _ := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`), caller)
	child.expect("tools/call")
	child.send(`{"jsonrpc":"2.0","id":"e","method":"elicitation/create","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":"s","method":"sampling/createMessage","params":{}}`)
	if m := child.next(); string(m.ID) != `"e"` || m.Error == nil {
		t.Errorf("child got %s, want the elicitation refused", m.Raw)
	}
	resp, _ := c.wait()
	if !contains(resp, `"s":{"method":"sampling/createMessage"`) || contains(resp, "elicitation") {
		t.Errorf("first answer = %s, want the sampling question only", resp)
	}

	w2 := newWorld(t, legacy(), autoReply{initialize: true})
	child2 := w2.child()
	c2, _ := callOn(w2.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call"}`), Caller{Modern: true, Capabilities: json.RawMessage(`{}`)})
	req := child2.expect("tools/call")
	child2.send(`{"jsonrpc":"2.0","id":"s","method":"sampling/createMessage","params":{}}`)
	_, err := c2.wait()
	var e *jsonrpc.Error
	if !errorsAs(err, &e) || e.Code != -32021 || string(e.Data) != `{"requiredCapabilities":{"sampling":{}}}` {
		t.Fatalf("Wait = %v, want -32021 naming sampling", err)
	}
	var refused, cancelled bool
	for range 2 {
		m := child2.next()
		refused = refused || (string(m.ID) == `"s"` && m.Error != nil)
		cancelled = cancelled || (m.Method == "notifications/cancelled" && contains(m.Params, `"requestId":`+string(req.ID)))
	}
	if !refused || !cancelled {
		t.Errorf("child's question refused %v, call cancelled %v; want both", refused, cancelled)
	}

	// A URL-mode elicitation that a form-only client cannot be asked: the
	// -32021 names the mode, so that a client that follows it is asked.
	for caps, want := range map[string]string{
		`{}`:                         `{"requiredCapabilities":{"elicitation":{"url":{}}}}`,
		`{"elicitation":{}}`:         `{"requiredCapabilities":{"elicitation":{"url":{}}}}`,
		`{"elicitation":{"url":{}}}`: "",
	} {
		w3 := newWorld(t, legacy(), autoReply{initialize: true})
		child3 := w3.child()
		c3, _ := callOn(w3.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call"}`), Caller{Modern: true, Capabilities: json.RawMessage(caps)})
		child3.expect("tools/call")
		child3.send(`{"jsonrpc":"2.0","id":"u","method":"elicitation/create","params":{"mode":"url","message":"sign in","url":"https://example.com/x","elicitationId":"e1"}}`)
		resp, err := c3.wait()
		if want == "" {
			if err != nil || !contains(resp, `"u":{"method":"elicitation/create"`) {
				t.Errorf("a client with URL-mode elicitation: %s %v, want the question", resp, err)
			}
			continue
		}
		if e = nil; !errorsAs(err, &e) || e.Code != -32021 || string(e.Data) != want {
			t.Errorf("a client with %s: %v (data %s), want -32021 with %s", caps, err, dataOf(e), want)
		}
	}
}

func errorsAs(err error, target **jsonrpc.Error) bool { return errors.As(err, target) }

// A parked call resumes only for the caller it was parked for: another
// caller holding its requestState is told the state names nothing, and
// the child sees nothing of it.
func TestParkedCallResumesOnlyForItsCaller(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	alice, mallory := modernAsker, modernAsker
	alice.Principal, mallory.Principal = "alice", "mallory"
	req, state := parkAs(t, w, child, alice)
	retry := func(who Caller) (*call, error) {
		return callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":"second","method":"tools/call","params":{"name":"ask","inputResponses":{"q":{"action":"accept"}},"requestState":"`+state+`"}}`), who)
	}
	if _, err := retry(mallory); gatewayCode(t, err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), "no longer waiting") {
		t.Fatalf("another caller's retry: %v", err)
	}
	r, err := retry(alice)
	if err != nil {
		t.Fatal(err)
	}
	// The first line the child gets after the refusal is alice's answer.
	if got := child.next(); string(got.ID) != `"q"` || got.Result == nil {
		t.Fatalf("child got %s, want alice's answer to q", got.Raw)
	}
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, req.ID)
	if _, err := r.wait(); err != nil {
		t.Errorf("alice's retry: %v", err)
	}
}

// A retry is the request it continues, arguments included: one with other
// arguments would get the answer to the parked call's, which the child
// works on. It is refused as a retry for another tool is, reaches nothing
// of the child's, and leaves the call parked for the retry that is the
// request again, however the client spells its arguments this time.
func TestRetryWithOtherArgumentsIsRefused(t *testing.T) {
	t.Parallel()
	const (
		ada        = `{"who":{"name":"Ada","born":1815},"tags":["a","b"]}`
		adaAgain   = "{ \"tags\" : [\"\\u0061\",\"b\"],\n\t\"who\":{\"born\":1.815e3,\"name\":\"Ada\"} }"
		dup        = `{"n":1,"n":2}`
		dupSpaced  = `{"n":1, "n":2}`
		noArgsNull = `null`
	)
	for _, tc := range []struct {
		name, method, first, other, again string // arguments; "" for none
	}{
		{name: "tool", method: "tools/call", first: ada, other: `{"who":{"name":"Bob","born":1815},"tags":["a","b"]}`, again: adaAgain},
		{name: "tool, arguments left out", method: "tools/call", first: ada, other: "", again: ada},
		{name: "tool, a number's value", method: "tools/call", first: `{"n":9007199254740993}`, other: `{"n":9007199254740992}`, again: `{"n":9007199254740993.0}`},
		{name: "tool without arguments", method: "tools/call", first: "", other: `{"x":1}`, again: `{}`},
		{name: "tool with null arguments", method: "tools/call", first: noArgsNull, other: `[]`, again: ""},
		{name: "prompt", method: "prompts/get", first: `{"style":"terse","lang":"en"}`, other: `{"style":"terse","lang":"fr"}`, again: `{"lang":"en","style":"terse"}`},
		// Decoders read a key twice differently: only the same bytes
		// are the same arguments.
		{name: "a key twice", method: "tools/call", first: dup, other: dupSpaced, again: dup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, legacy(), autoReply{initialize: true})
			child := w.child()
			params := func(args, more string) string {
				p := `{"name":"ask"`
				if args != "" {
					p += `,"arguments":` + args
				}
				return p + more + `}`
			}
			c, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":"first","method":"`+tc.method+`","params":`+params(tc.first, "")+`}`), modernAsker)
			if err != nil {
				t.Fatal(err)
			}
			req := child.expect(tc.method)
			child.send(`{"jsonrpc":"2.0","id":"q","method":"elicitation/create","params":{"message":"?"}}`)
			resp, err := c.wait()
			var irr struct {
				Result struct {
					RequestState string `json:"requestState"`
				} `json:"result"`
			}
			if json.Unmarshal(resp, &irr); err != nil || irr.Result.RequestState == "" {
				t.Fatalf("first answer = %s, %v", resp, err)
			}
			retry := func(args, answer, meta string, who Caller) (*call, error) {
				return callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":"second","method":"`+tc.method+`","params":`+
					params(args, `,"inputResponses":{"q":{"action":"accept","content":{"answer":"`+answer+`"}}},"requestState":"`+irr.Result.RequestState+`"`+meta)+`}`), who)
			}
			mallory := modernAsker
			mallory.Principal = "mallory"
			if _, err := retry(tc.other, "mallory", "", mallory); gatewayCode(t, err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), "no longer waiting") {
				t.Errorf("another caller's retry with other arguments: %v, want it told nothing waits", err)
			}
			if _, err := retry(tc.other, "wrong", "", modernAsker); gatewayCode(t, err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), `request for "ask" with other arguments`) {
				t.Errorf("a retry with other arguments: %v", err)
			}
			// _meta is not the arguments.
			r, err := retry(tc.again, "right", `,"_meta":{"progressToken":7}`, modernAsker)
			if err != nil {
				t.Fatalf("the retry that is the request again: %v", err)
			}
			// The first line the child gets after the refusal is the answer
			// the right retry brought.
			if got := child.next(); string(got.ID) != `"q"` || !contains(got.Result, `"right"`) {
				t.Fatalf("child got %s, want the right retry's answer to q", got.Raw)
			}
			child.send(`{"jsonrpc":"2.0","id":%s,"result":{"messages":[],"content":[]}}`, req.ID)
			if final, err := r.wait(); err != nil || !contains(final, `"id":"second"`) || !contains(final, `"resultType":"complete"`) {
				t.Errorf("the right retry got %s, %v", final, err)
			}
		})
	}
}

// Arguments over maxCanonicalArguments are not read through at a park (it
// runs on the child's reader): only the same bytes match them; smaller ones
// match when written otherwise.
func TestLargeArgumentsMatchOnlyTheSameBytes(t *testing.T) {
	req := func(args string) *mcp.Request {
		return request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":`+args+`}}`)
	}
	for _, size := range []int{maxCanonicalArguments - 100, maxCanonicalArguments + 1} {
		text := strings.Repeat("x", size)
		args, respaced := `{"a":1,"t":"`+text+`"}`, `{ "t" : "`+text+`", "a" : 1 }`
		bound := bindArguments(req(args))
		if !bound.match(req(args)) {
			t.Errorf("%d bytes: the same bytes do not match", size)
		}
		if got, want := bound.match(req(respaced)), size <= maxCanonicalArguments; got != want {
			t.Errorf("%d bytes written otherwise: match %v, want %v", size, got, want)
		}
	}
	// Escaped, as encoding/json writes "<", the same arguments are six
	// times larger, and still theirs.
	lt := strings.Repeat("<", maxCanonicalArguments-100)
	escaped := `{"t":"` + strings.Repeat(`\u003c`, len(lt)) + `"}`
	if !bindArguments(req(`{"t":"` + lt + `"}`)).match(req(escaped)) {
		t.Errorf("arguments of %d bytes, escaped to %d: no match", len(lt)+8, len(escaped))
	}
}

// A burst of the child's own requests, more than there are writers for
// their answers, gets every answer: the rest wait their turn.
func TestEveryRequestOfABurstIsAnswered(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 10 * maxReplies
	child.send("%s", rootsBurst(n))
	answered := map[string]bool{}
	for len(answered) < n {
		select {
		case m := <-child.got:
			if m.Method == "" && m.ID != nil {
				answered[string(m.ID)] = true
			}
		case <-ctx.Done():
			t.Fatalf("%d of %d requests answered", len(answered), n)
		}
	}
}

// Answers that wait for a child that stops serving are dropped at once,
// and the log says how many, rather than written to nobody one by one.
func TestWaitingAnswersGoWithTheirChild(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var log gatewaytest.LockedBuffer
		// A 2025 child: a 2026 one's requests are not answered at all.
		w := &world{t: t, children: make(chan *fakeChild, 8), gated: true, auto: autoReply{initialize: true}}
		w.b = New(w.start, strict(t, Options{Era: EraLegacy, RestartMin: time.Hour, RestartMax: time.Hour, Logger: slog.New(slog.NewTextHandler(&log, nil))}))
		defer w.b.Close(context.Background())
		child := <-w.children
		defer close(child.gate)
		synctest.Wait()
		const n = 3 * maxReplies
		child.send("%s", rootsBurst(n))
		synctest.Wait() // every writer waits on a child that does not read
		child.exit()
		synctest.Wait()
		if want := fmt.Sprintf("dropped=%d", n-maxReplies); !strings.Contains(log.String(), "dropped the answers to its requests that waited") || !strings.Contains(log.String(), want) {
			t.Errorf("the log does not say %s answers were dropped:\n%s", want, log.String())
		}
	})
}

// rootsBurst is n roots/list requests of a child, in one write.
func rootsBurst(n int) string {
	var burst strings.Builder
	for i := range n {
		if i > 0 {
			burst.WriteByte('\n')
		}
		fmt.Fprintf(&burst, `{"jsonrpc":"2.0","id":%d,"method":"roots/list"}`, 50000+i)
	}
	return burst.String()
}
