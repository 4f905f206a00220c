package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stdiomcp/gateway/internal/gatewaytest"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

func gatewayCode(t *testing.T, err error) int {
	t.Helper()
	var e *jsonrpc.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not a *jsonrpc.Error", err)
	}
	if !strings.Contains(string(e.Data), `"source":"gateway"`) && e.Code > -32600 {
		t.Errorf("gateway error %v does not say it is the gateway's: data %s", e, e.Data)
	}
	return e.Code
}

// The idle timeout fires when nothing comes back, progress resets it, and
// the hard maximum ends a call that keeps reporting progress. Each timeout
// tells the child to cancel.
func TestTimeouts(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// The child answers liveness probes, as a live one does.
		w := &world{t: t, children: make(chan *fakeChild, 8), auto: autoReply{discover: "result"}}
		w.b = New(w.start, strict(t, Options{Era: EraModern, IdleTimeout: time.Minute, MaxDuration: 10 * time.Minute}))
		child := <-w.children
		defer child.exit()
		defer w.b.Close(context.Background())

		// Idle: silence for a minute.
		start := time.Now()
		c := w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
		req := child.expect("tools/call")
		_, err := c.wait()
		if code := gatewayCode(t, err); code != jsonrpc.CodeTimeout {
			t.Fatalf("idle call ended with code %d, want %d", code, jsonrpc.CodeTimeout)
		}
		if d := time.Since(start); d != time.Minute {
			t.Errorf("idle timeout after %v, want 1m", d)
		}
		n := child.expect("notifications/cancelled")
		if !contains(n.Params, `"requestId":`+string(req.ID)) || !contains(n.Params, `"reason":"timeout"`) {
			t.Errorf("cancellation = %s", n.Params)
		}

		// Progress every 50s keeps the call alive until the 10-minute cap.
		start = time.Now()
		c = w.call(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"progressToken":"p"}}}`)
		req = child.expect("tools/call")
		progressDone := make(chan struct{})
		go func() {
			defer close(progressDone)
			for i := 1; ; i++ {
				time.Sleep(50 * time.Second)
				if _, _, ended, _ := c.box.peek(); ended {
					return
				}
				child.send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d}}`, req.ID, i)
			}
		}()
		_, err = c.wait()
		if code := gatewayCode(t, err); code != jsonrpc.CodeTimeout || !strings.Contains(err.Error(), "limit") {
			t.Fatalf("capped call ended with %v, want the maximum-duration timeout", err)
		}
		if d := time.Since(start); d != 10*time.Minute {
			t.Errorf("maximum duration hit after %v, want 10m", d)
		}
		child.expect("notifications/cancelled")
		<-progressDone

		// Silence after progress: the idle limit counts from the last sign
		// of life, not from the start, nor from the timer's first firing.
		start = time.Now()
		c = w.call(context.Background(), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"progressToken":"p"}}}`)
		req = child.expect("tools/call")
		time.Sleep(50 * time.Second)
		child.send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":1}}`, req.ID)
		_, err = c.wait()
		if code := gatewayCode(t, err); code != jsonrpc.CodeTimeout || !strings.Contains(err.Error(), "no response or progress") {
			t.Fatalf("a call silent after progress ended with %v, want the idle timeout", err)
		}
		if d := time.Since(start); d != 110*time.Second {
			t.Errorf("idle timeout %v after the call began, want 1m50s (a minute after its progress)", d)
		}
		child.expect("notifications/cancelled")
	})
}

// The child's own requests are answered at once: ping with {}, anything else
// with method-not-found, ids untouched.
func TestChildRequestsAreAnswered(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	child.send(`{"jsonrpc":"2.0","id":"p-1","method":"ping"}`)
	if m := child.next(); m.Kind != jsonrpc.KindResponse || string(m.ID) != `"p-1"` || string(m.Result) != `{}` {
		t.Errorf("answer to ping = %s", m.Raw)
	}
	child.send(`{"jsonrpc":"2.0","id":9,"method":"sampling/createMessage","params":{}}`)
	m := child.next()
	if code, _ := mcp.ErrorCode(m.Error); m.Kind != jsonrpc.KindResponse || string(m.ID) != `9` || code != jsonrpc.CodeMethodNotFound {
		t.Errorf("answer to sampling/createMessage = %s", m.Raw)
	}
}

// A 2026-07-28 child must not send requests, and the gateway must not
// write responses to it: its requests go unanswered, and the call it sent
// them during goes on to its answer.
func TestModernChildRequestsAreNotAnswered(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Options{Era: EraModern}, autoReply{discover: "result"})
	child := w.child()
	c, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"p"}}}`), Caller{Modern: true, CanStream: true})
	if err != nil {
		t.Fatal(err)
	}
	m := child.expect("tools/call")
	child.send(`{"jsonrpc":"2.0","id":"p-1","method":"ping"}`)
	child.send(`{"jsonrpc":"2.0","id":9,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`)
	c2 := w.call(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	next := child.next()
	if next.Method != "tools/list" {
		t.Fatalf("child got %s, want no answer to its requests", next.Raw)
	}
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`, next.ID)
	c2.wait()
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","content":[]}}`, m.ID)
	if resp, err := c.wait(); err != nil || !contains(resp, `"resultType":"complete"`) {
		t.Errorf("the call ended with %s, %v; want its answer", resp, err)
	}
	w.b.Close(context.Background())
	for m := range child.got {
		if m.Kind == jsonrpc.KindResponse || m.Method == "notifications/cancelled" {
			t.Errorf("child got %s", m.Raw)
		}
	}
}

// A child that exits fails every pending call at once, readiness drops, and
// a new child is started and handshaken; ids keep counting up.
func TestChildExitFailsPendingAndRestarts(t *testing.T) {
	t.Parallel()
	opts := legacy()
	opts.RestartMin = time.Millisecond
	w := newWorld(t, opts, autoReply{initialize: true})
	child := w.child()
	calls := []*call{
		w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`),
		w.call(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/call"}`),
	}
	first := child.expect("tools/call")
	child.expect("tools/call")
	child.exit()
	for _, c := range calls {
		_, err := c.wait()
		// The fake closed its stdout; whether it exited is not the
		// reader's to know.
		if code := gatewayCode(t, err); code != jsonrpc.CodeUnavailable || !strings.Contains(err.Error(), "stdout ended") {
			t.Errorf("pending call ended with %v, want child-unavailable saying its stdout ended", err)
		}
	}
	second := w.child()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if m := <-second.got; m.Method != "initialize" {
		t.Fatalf("the restarted child got %s first, want initialize", m.Raw)
	}
	c := w.call(ctx, `{"jsonrpc":"2.0","id":3,"method":"tools/call"}`)
	m := second.expect("tools/call")
	id, _ := m.IDInt()
	firstID, _ := first.IDInt()
	if id <= firstID {
		t.Errorf("id after the restart = %d, not above the earlier %d", id, firstID)
	}
	second.send(`{"jsonrpc":"2.0","id":%d,"result":{}}`, id)
	if _, err := c.wait(); err != nil {
		t.Fatal(err)
	}
	if st := w.b.Stats(); st.Restarts != 1 {
		t.Errorf("restarts = %d, want 1", st.Restarts)
	}
}

// The era decides the first messages a child sees.
func TestHandshakeByEra(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		era     Era
		auto    autoReply
		want    []string // methods the child sees, in order, before the first call
		wantEra Era
	}{
		"legacy":                {era: EraLegacy, auto: autoReply{initialize: true}, want: []string{"initialize", "notifications/initialized"}, wantEra: EraLegacy},
		"modern":                {era: EraModern, auto: autoReply{discover: "result"}, want: []string{"server/discover"}, wantEra: EraModern},
		"auto, modern child":    {era: EraAuto, auto: autoReply{discover: "result"}, want: []string{"server/discover"}, wantEra: EraModern},
		"auto, refusing child":  {era: EraAuto, auto: autoReply{discover: "error", initialize: true}, want: []string{"server/discover", "initialize", "notifications/initialized"}, wantEra: EraLegacy},
		"auto, silent on probe": {era: EraAuto, auto: autoReply{initialize: true}, want: []string{"server/discover", "initialize", "notifications/initialized"}, wantEra: EraLegacy},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, Options{Era: tt.era, ProbeTimeout: 50 * time.Millisecond}, tt.auto)
			child := w.child()
			// A call made at once waits for the handshake.
			c := w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			var got []string
			for {
				m := <-child.got
				if m.Method == "tools/list" {
					child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`, m.ID)
					break
				}
				got = append(got, m.Method)
				if m.Method == "initialize" {
					var p struct {
						ProtocolVersion string          `json:"protocolVersion"`
						Capabilities    json.RawMessage `json:"capabilities"`
					}
					json.Unmarshal(m.Params, &p)
					if p.ProtocolVersion != "2025-11-25" || string(p.Capabilities) != mcp.RelayedCapabilities {
						t.Errorf("initialize params = %s, want 2025-11-25 and the relayed client capabilities", m.Params)
					}
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("child saw %q before the call, want %q", got, tt.want)
			}
			if _, err := c.wait(); err != nil {
				t.Fatal(err)
			}
			era := w.currentChild().eraNow()
			if era != tt.wantEra {
				t.Errorf("era = %s, want %s", era, tt.wantEra)
			}
		})
	}
}

// initialize from a legacy client is answered by the gateway from what the
// child told it, at the client's version; the child never sees it again.
func TestInitializeIsAnsweredByTheGateway(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		era     Era
		auto    autoReply
		version string // the client asks for this
		want    map[string]string
	}{
		"legacy child": {era: EraLegacy, auto: autoReply{initialize: true}, version: "2025-06-18", want: map[string]string{
			// What the child offers, but for the notifications a 2025 client
			// of the gateway would never receive.
			"protocolVersion": `"2025-06-18"`, "capabilities": `{"tools":{"listChanged":false},"resources":{"subscribe":false},"logging":{}}`,
			"serverInfo": `{"name":"fake","version":"1"}`, "instructions": `"be nice"`,
		}},
		"legacy child, unknown version": {era: EraLegacy, auto: autoReply{initialize: true}, version: "1999-01-01", want: map[string]string{
			"protocolVersion": `"2025-11-25"`,
		}},
		"modern child": {era: EraAuto, auto: autoReply{discover: "result"}, version: "2025-11-25", want: map[string]string{
			"protocolVersion": `"2025-11-25"`, "capabilities": `{"tools":{}}`, "serverInfo": `{"name":"fake","version":"1"}`,
		}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, Options{Era: tt.era}, tt.auto)
			child := w.child()
			c := w.call(context.Background(), `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"`+tt.version+`","capabilities":{},"clientInfo":{"name":"c","version":"0"}}}`)
			resp, err := c.wait()
			if err != nil {
				t.Fatal(err)
			}
			m, err := jsonrpc.Parse(resp)
			if err != nil || string(m.ID) != `"init"` {
				t.Fatalf("response %s: %v", resp, err)
			}
			var got map[string]json.RawMessage
			json.Unmarshal(m.Result, &got)
			for k, v := range tt.want {
				if string(got[k]) != v {
					t.Errorf("result.%s = %s, want %s", k, got[k], v)
				}
			}
			// The next thing the child sees is the next call, not initialize.
			c2 := w.call(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
			m2 := child.next()
			if m2.Method != "tools/list" {
				t.Fatalf("child got %s, want tools/list", m2.Raw)
			}
			child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m2.ID)
			c2.wait()
		})
	}
}

// bigCall is a call to a child whose lines may be 1000 bytes at most, and
// the child's request for it; the bridge logs to w.log.
func bigCall(t *testing.T) (*world, *fakeChild, *call, *jsonrpc.Message) {
	t.Helper()
	w := &world{t: t, children: make(chan *fakeChild, 8), auto: autoReply{initialize: true}, maxLine: 1000, log: &gatewaytest.LockedBuffer{}}
	opts := legacy()
	opts.Logger = slog.New(slog.NewTextHandler(w.log, nil))
	w.b = New(w.start, strict(t, opts))
	t.Cleanup(func() { w.b.Close(context.Background()) })
	child := w.child()
	c := w.call(context.Background(), `{"jsonrpc":"2.0","id":"big","method":"tools/call"}`)
	return w, child, c, child.expect("tools/call")
}

// A response over the size limit fails the call it names at once, with an
// error that says so, and the log names the call under its request's
// context (which gives the request id in the gateway's log); the reader
// goes on.
func TestOversizedResponseFailsItsCall(t *testing.T) {
	t.Parallel()
	w, child, c, m := bigCall(t)
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"text":"%s"}}`, m.ID, strings.Repeat("x", 5000))
	_, err := c.wait()
	if code := gatewayCode(t, err); code != jsonrpc.CodeTooLarge || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("Wait = %v, want the too-large error", err)
	}
	want := fmt.Sprintf(`id=%s method=tools/call client_id="\"big\""`, m.ID)
	if !regexp.MustCompile(`msg="call failed: the child's answer is over the size limit" .*` + regexp.QuoteMeta(want)).MatchString(w.log.String()) {
		t.Errorf("the log does not name the call:\n%s\nwant a line with %s", w.log.String(), want)
	}
	c2 := w.call(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	m2 := child.expect("tools/list")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m2.ID)
	if _, err := c2.wait(); err != nil {
		t.Fatalf("the next call failed: %v", err)
	}
}

// A response whose line passes the size limit fails its call then, before
// the line's end, which a child that writes without end never sends; once
// it ends, the reader goes on.
func TestOversizedResponseFailsItsCallBeforeItsEnd(t *testing.T) {
	t.Parallel()
	w, child, c, m := bigCall(t)
	// More than the reader's buffer (4 KiB), and no newline.
	child.sendRaw(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"text":"%s`, m.ID, strings.Repeat("x", 6000)))
	_, err := c.wait()
	if code := gatewayCode(t, err); code != jsonrpc.CodeTooLarge || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("Wait = %v, want the too-large error", err)
	}
	c2 := w.call(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	m2 := child.expect("tools/list")
	child.sendRaw(strings.Repeat("x", 6000) + "\"}}\n")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m2.ID)
	if _, err := c2.wait(); err != nil {
		t.Fatalf("the next call failed: %v", err)
	}
	// An id written after the result is found at the line's end, whether
	// the line ends in the reader's buffer or long after.
	for _, size := range []int{1500, 20000} {
		c := w.call(context.Background(), `{"jsonrpc":"2.0","id":"last","method":"tools/call"}`)
		m := child.expect("tools/call")
		child.send(`{"jsonrpc":"2.0","result":{"text":"%s"},"id":%s}`, strings.Repeat("x", size), m.ID)
		if _, err := c.wait(); gatewayCode(t, err) != jsonrpc.CodeTooLarge {
			t.Fatalf("a %d-byte answer with its id last: Wait = %v, want the too-large error", size, err)
		}
	}
}

// A request of the child's own over the size limit is refused, under its
// id, once, however its line is read; its id, of the child's counting,
// fails no call of the gateway's that happens to have the same.
func TestOversizedRequestOfTheChildIsRefused(t *testing.T) {
	t.Parallel()
	w, child, c, m := bigCall(t)
	for _, size := range []int{1500, 20000} {
		for _, idLast := range []bool{false, true} {
			req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"sampling/createMessage","params":{"x":"%s"}}`, m.ID, strings.Repeat("x", size))
			if idLast {
				req = fmt.Sprintf(`{"jsonrpc":"2.0","method":"sampling/createMessage","params":{"x":"%s"},"id":%s}`, strings.Repeat("x", size), m.ID)
			}
			child.send("%s", req)
			got := child.next()
			if got.Kind != jsonrpc.KindResponse || string(got.ID) != string(m.ID) || !contains(got.Error, "size limit") {
				t.Fatalf("a %d-byte request, id last %v: the child got %s, want its request refused", size, idLast, got.Raw)
			}
		}
	}
	// Refused once each: what the child hears next is the next call.
	c2 := w.call(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	m2 := child.next()
	if m2.Method != "tools/list" {
		t.Fatalf("the child got %s, want the next call", m2.Raw)
	}
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m2.ID)
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"ok":true}}`, m.ID)
	if resp, err := c.wait(); err != nil || !contains(resp, `"ok":true`) {
		t.Errorf("the call with the same id as the child's requests: %s, %v; want its own answer", resp, err)
	}
	if _, err := c2.wait(); err != nil {
		t.Error(err)
	}
}

// An answer that is not valid JSON-RPC fails the call whose id it names at
// once, with an error that says so, instead of leaving the call to wait out
// its timeout; a request from the child that is not valid is only skipped,
// and the reader goes on.
func TestInvalidAnswerFailsItsCall(t *testing.T) {
	t.Parallel()
	for name, answer := range map[string]string{
		"result and error": `{"jsonrpc":"2.0","id":%s,"result":{},"error":{"code":1,"message":"m"}}`,
		"null error":       `{"jsonrpc":"2.0","id":%s,"error":null}`,
		"no jsonrpc":       `{"id":%s,"result":{}}`,
		"neither":          `{"jsonrpc":"2.0","id":%s}`,
		"in a batch":       `[{"jsonrpc":"2.0","id":%s,"error":"no"}]`,
		// Not even JSON: the id is read from the line's head, before the
		// text goes wrong, when no method shows.
		"NaN":                  `{"jsonrpc":"2.0","id":%s,"result":{"v":NaN}}`,
		"trailing comma":       `{"jsonrpc":"2.0","id":%s,"result":{"g":1,}}`,
		"error, bad":           `{"jsonrpc":"2.0","id":%s,"error":{"code":1,"message":"m",}}`,
		"duplicated member":    `{"jsonrpc":"2.0","id":%s,"result":{},"result":{}}`,
		"duplicated, then bad": `{"jsonrpc":"2.0","jsonrpc":"2.0","id":%s,"result":{"v":NaN}}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, legacy(), autoReply{initialize: true})
			child := w.child()
			c := w.call(context.Background(), `{"jsonrpc":"2.0","id":"k","method":"tools/call"}`)
			m := child.expect("tools/call")
			child.send(answer, m.ID)
			_, err := c.wait()
			if code := gatewayCode(t, err); code != jsonrpc.CodeBadAnswer || !strings.Contains(err.Error(), "not valid JSON-RPC") {
				t.Fatalf("Wait = %v, want the bad-answer error", err)
			}
			c2 := w.call(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
			m2 := child.expect("tools/list")
			child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m2.ID)
			if _, err := c2.wait(); err != nil {
				t.Fatalf("the next call failed: %v", err)
			}
		})
	}
}

// A line that is not valid JSON-RPC but has a method is no answer, whatever
// its id: the call it names still waits for its own.
func TestInvalidRequestLeavesTheCallWithItsID(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	c := w.call(context.Background(), `{"jsonrpc":"2.0","id":"k","method":"tools/call"}`)
	m := child.expect("tools/call")
	child.send(`{"jsonrpc":"2.0","id":%s,"method":7}`, m.ID)
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"ok":true}}`, m.ID)
	if resp, err := c.wait(); err != nil || !contains(resp, `"ok":true`) {
		t.Fatalf("call got %s, %v; want the child's answer", resp, err)
	}
}

// Close cancels what is in flight, telling the child, and refuses new calls.
func TestCloseCancelsInFlightCalls(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	c := w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
	req := child.expect("tools/call")
	closed := make(chan struct{})
	go func() {
		w.b.Close(context.Background())
		close(closed)
	}()
	_, err := c.wait()
	if code := gatewayCode(t, err); code != jsonrpc.CodeShutdown {
		t.Errorf("in-flight call ended with %v, want the shutdown error", err)
	}
	n := child.expect("notifications/cancelled")
	if !contains(n.Params, `"requestId":`+string(req.ID)) || !contains(n.Params, "shutting down") {
		t.Errorf("cancellation = %s", n.Params)
	}
	<-closed
	if _, ok := <-child.got; ok {
		t.Error("the child's input is still open after Close")
	}
	if _, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`), Caller{}); gatewayCode(t, err) != jsonrpc.CodeShutdown {
		t.Errorf("Call after Close = %v, want the shutdown error", err)
	}
	if w.b.Ready() {
		t.Error("Ready after Close")
	}
}

// Client notifications that only make sense one-to-one are absorbed; others
// are forwarded.
func TestClientNotifications(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	for _, n := range []string{
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12345}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"nobody"}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		"{\n \"jsonrpc\": \"2.0\",\n \"method\": \"notifications/custom\", \"params\": {\"a\": 1}\n}",
	} {
		if err := w.b.Notify(context.Background(), request(t, n).Message); err != nil {
			t.Errorf("Notify(%s) = %v", n, err)
		}
	}
	m := child.next()
	if m.Method != "notifications/custom" || string(m.Raw) != `{"jsonrpc":"2.0","method":"notifications/custom","params":{"a":1}}` {
		t.Errorf("child got %s first, want the compacted custom notification", m.Raw)
	}
}

// Batches, garbage and answers to unknown ids from the child are handled
// without losing the messages around them.
func TestChildOutputOddities(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	a := w.call(context.Background(), `{"jsonrpc":"2.0","id":"a","method":"tools/call"}`)
	ra := child.expect("tools/call")
	b := w.call(context.Background(), `{"jsonrpc":"2.0","id":"b","method":"tools/call"}`)
	rb := child.expect("tools/call")
	child.send(`Server listening on stdio`)
	child.send(`{"jsonrpc":"2.0","id":424242,"result":{}}`)
	child.send(`{"jsonrpc":"2.0","id":"zz","result":{}}`)
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"n":1`, ra.ID) // cut short
	child.send(`[{"jsonrpc":"2.0","id":%s,"result":{"n":"a"}},{"jsonrpc":"2.0","id":%s,"result":{"n":"b"}}]`, ra.ID, rb.ID)
	for _, tc := range []struct {
		c    *call
		want string
	}{{a, `{"jsonrpc":"2.0","id":"a","result":{"n":"a"}}`}, {b, `{"jsonrpc":"2.0","id":"b","result":{"n":"b"}}`}} {
		resp, err := tc.c.wait()
		if err != nil || string(resp) != tc.want {
			t.Errorf("got %s, %v; want %s", resp, err, tc.want)
		}
	}
	if st := w.b.Stats(); st.Unknown != 2 {
		t.Errorf("unknown responses = %d, want 2", st.Unknown)
	}
}

// auto survives a legacy child that exits when probed: it is started again
// as legacy, without a probe; and a slow modern child whose DiscoverResult
// comes after the probe's timeout, and after initialize went out, is
// modern.
func TestAutoEraSurvivesHardChildren(t *testing.T) {
	t.Parallel()
	t.Run("exits on the probe", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, Options{Era: EraAuto, RestartMin: time.Millisecond}, autoReply{discover: "exit", initialize: true})
		first := w.child()
		if m := <-first.got; m.Method != "server/discover" {
			t.Fatalf("first child got %s", m.Raw)
		}
		second := w.child()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.b.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		if m := <-second.got; m.Method != "initialize" {
			t.Errorf("the restarted child got %s first, want initialize (no second probe)", m.Raw)
		}
		era := w.currentChild().eraNow()
		if era != EraLegacy {
			t.Errorf("era = %s, want legacy", era)
		}
	})
	t.Run("late DiscoverResult", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, Options{Era: EraAuto, ProbeTimeout: 20 * time.Millisecond}, autoReply{discover: "late"})
		child := w.child()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.b.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		var got []string
		for range 2 {
			got = append(got, (<-child.got).Method)
		}
		era := w.currentChild().eraNow()
		if era != EraModern || strings.Join(got, ",") != "server/discover,initialize" {
			t.Errorf("era = %s after %q; want modern", era, got)
		}
		// No notifications/initialized follows: the child is modern.
		c := w.call(ctx, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)
		if m := <-child.got; m.Method != "tools/list" {
			t.Errorf("child got %s, want the call", m.Raw)
		} else {
			child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
		}
		c.wait()
	})
}

// A call ends once: a second ending loses its claim, and an end delivered
// without a claim (a bug) is reported, and changes nothing.
func TestSecondEndIsReported(t *testing.T) {
	t.Parallel()
	var reported []error
	b := &Bridge{q: newQuestions(nil, nil)}
	b.opts.OnInternalError = func(err error) { reported = append(reported, err) }
	b.opts.defaults()
	b.log = b.opts.Logger
	ch := newChild(&worker{b: b, log: b.log}, nil)
	c := ch.newCall(context.Background(), callSpec{req: request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)})
	if !c.end([]byte(`first`), nil) {
		t.Fatal("the first ending lost its claim")
	}
	if c.end([]byte(`second`), nil) {
		t.Error("a second ending won a claim")
	}
	if len(reported) != 0 {
		t.Errorf("a lost claim was reported: %v", reported)
	}
	c.deliver([]byte(`third`), nil) // an ending that skipped its claim
	if len(reported) != 1 || !strings.Contains(reported[0].Error(), "ended twice") {
		t.Errorf("reported %v, want the call ended twice", reported)
	}
	if _, resp, done, _ := c.Take(); !done || string(resp) != "first" {
		t.Errorf("the call's end is %s, want the first", resp)
	}
}

// A child that never answers initialize: the calls that waited for it are
// told, in a word, why nothing serves them (the log has the details).
func TestHandshakeTimeoutIsExplained(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := &world{t: t, children: make(chan *fakeChild, 8), auto: autoReply{}}
		w.b = New(w.start, strict(t, Options{Era: EraLegacy, HandshakeTimeout: 3 * time.Second, RestartMin: time.Hour, RestartMax: time.Hour}))
		defer w.b.Close(context.Background())
		child := <-w.children
		defer child.exit()
		start := time.Now()
		_, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`), Caller{})
		if code := gatewayCode(t, err); code != jsonrpc.CodeUnavailable || !strings.Contains(err.Error(), "handshake timed out") {
			t.Errorf("the waiting call ended with %v", err)
		}
		if waited := time.Since(start); waited != 3*time.Second {
			t.Errorf("the call waited %v, want the handshake timeout", waited)
		}
	})
}

// A child slower to start than the queue timeout: calls that wait for it
// are refused once the queue timeout has passed, as calls waiting in the
// queue are, and the calls after it, once it is ready, are served.
func TestAStartingChildIsWaitedForAtMostTheQueueTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := &world{t: t, children: make(chan *fakeChild, 8), auto: autoReply{}}
		w.b = New(w.start, strict(t, Options{Era: EraLegacy, QueueTimeout: 3 * time.Second, HandshakeTimeout: time.Minute}))
		defer w.b.Close(context.Background())
		child := <-w.children
		defer child.exit()
		start := time.Now()
		_, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`), Caller{})
		if code := gatewayCode(t, err); code != jsonrpc.CodeUnavailable || !strings.Contains(err.Error(), "starting and was not ready within 3s") {
			t.Errorf("the waiting call ended with %v", err)
		}
		if waited := time.Since(start); waited != 3*time.Second {
			t.Errorf("the call waited %v, want the queue timeout", waited)
		}
		init := <-child.got // next() passes over the handshake
		if init.Method != "initialize" {
			t.Fatalf("the child's first message is %s, want initialize", init.Raw)
		}
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"slow","version":"1"}}}`, init.ID)
		c := w.call(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/call"}`)
		m := child.expect("tools/call")
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
		if _, err := c.wait(); err != nil {
			t.Errorf("a call once the child was ready: %v", err)
		}
	})
}

// A child's end is logged with the calls it cost: each (up to a bound) on
// a line of its own, under its request's context, and counted on the line
// saying the child stopped serving. The gateway's own requests (a
// handshake the child died in) are no client's loss and are not counted.
func TestAChildsEndNamesTheCallsItCost(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w, child, log := loggedWorld(t)
		const n = maxLostNamed + 2
		var calls []*call
		for i := range n {
			calls = append(calls, w.call(context.Background(), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call"}`, i+1)))
			child.expect("tools/call")
		}
		child.exit()
		for _, c := range calls {
			c.wait()
		}
		synctest.Wait()
		text := log.String()
		if got := strings.Count(text, `msg="call lost with its child"`); got != maxLostNamed {
			t.Errorf("%d lines name a lost call, want %d (the bound)", got, maxLostNamed)
		}
		if got := strings.Count(text, `err="the child's stdout ended`); got < maxLostNamed {
			t.Errorf("%d lines say why, want each line naming a lost call to:\n%s", got, text)
		}
		if !regexp.MustCompile(`msg="child stopped serving".*failed_calls=` + strconv.Itoa(n) + `\b`).MatchString(text) {
			t.Errorf("the child's end does not count %d failed calls:\n%s", n, text)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		_, child, log := loggedWorld(t, autoReply{})
		if m := <-child.got; m.Method != "initialize" {
			t.Fatalf("the child's first message is %s, want initialize", m.Raw)
		}
		child.exit() // in its handshake
		synctest.Wait()
		if text := log.String(); !regexp.MustCompile(`msg="child stopped serving".*failed_calls=0\b`).MatchString(text) || strings.Contains(text, "call lost") {
			t.Errorf("a child that died in its handshake is logged as costing calls:\n%s", text)
		}
	})
}

// A child that writes its own lines to stdout (debugging, garbage) gets a
// warning for each of the first few a second, and one counting the rest:
// the log does not grow with what the child prints. The calls go on.
func TestSkippedLinesAreWarnedOfWithinABound(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w, child, log := loggedWorld(t)
		c := w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
		m := child.expect("tools/call")
		for i := range 100 {
			child.send("debug: step %d", i)
		}
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
		if _, err := c.wait(); err != nil {
			t.Fatalf("the call after the noise: %v", err)
		}
		time.Sleep(2 * time.Second) // the bubble's clock: a new second
		synctest.Wait()
		// The second over, the lines it did not warn of are counted, while
		// the child runs on.
		if !strings.Contains(log.String(), "skipped=90") {
			t.Errorf("a second after the burst, no warning counts the 90 lines not logged one by one:\n%s", log.String())
		}
		for i := range 3 {
			child.send("debug: later %d", i)
		}
		child.exit()
		synctest.Wait()
		text := log.String()
		if got := strings.Count(text, "not JSON-RPC; skipped"); got != skippedPerSecond+3 {
			t.Errorf("%d warnings about single lines, want %d (the bound, then the next second's 3)", got, skippedPerSecond+3)
		}
		if !regexp.MustCompile(`msg="child wrote more lines that were skipped; not logged one by one" .*skipped=90\b`).MatchString(text) {
			t.Errorf("no warning counts the 90 lines not logged one by one:\n%s", text)
		}
	})
}
