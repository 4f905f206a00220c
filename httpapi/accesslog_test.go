package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
	"github.com/stdiomcp/gateway/metrics"
)

// A call logs one line at info, its audit line (with the path and the
// client's address); its access line is at debug. A request that never
// became a call keeps its access line at info, with the status sent.
func TestOneLinePerCallAtInfo(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv, logs := guarded(t, f, Options{})
	go func() { f.next(t).finish([]byte(`{"jsonrpc":"2.0","id":7,"result":{}}`), nil) }()
	if resp := post(t, srv+"/mcp", "application/json", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}`, bearer(ciToken)...); resp.StatusCode != 200 {
		t.Fatalf("call: status %d", resp.StatusCode)
	}
	if resp := post(t, srv+"/mcp", "application/json", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo"}}`); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without credentials: status %d", resp.StatusCode)
	}
	text := logs.waitFor(t, func(text string) bool {
		return strings.Contains(text, `"msg":"audit"`) && strings.Contains(text, `"msg":"http request"`)
	})
	var audits, access []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		switch rec["msg"] {
		case "audit":
			audits = append(audits, rec)
		case "http request":
			access = append(access, rec)
		}
	}
	if len(audits) != 1 || audits[0]["path"] != "/mcp" || audits[0]["remote"] != "127.0.0.1" || audits[0]["outcome"] != "ok" {
		t.Errorf("want one audit line for the call, with path /mcp and remote 127.0.0.1: %v", audits)
	}
	if len(access) != 1 || access[0]["status"] != float64(http.StatusUnauthorized) || access[0]["level"] != "INFO" {
		t.Errorf("want one access line at info, for the refused request (401): %v", access)
	}
}

// An answer leaves before the audit line is written: a log handler that
// holds the audit record until the client has read the whole answer must
// not hold the answer back. Errors too.
func TestAnswerLeavesBeforeItsAuditLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, path, body string
		status           int
	}{
		{"mcp", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},` + modernMeta + `}}`, http.StatusOK},
		{"rest", "/v1/tools/echo", `{"text":"hi"}`, http.StatusOK},
		{"rest error", "/v1/tools/nope", `{}`, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hold := holdAudit{slog.NewTextHandler(io.Discard, nil), make(chan struct{}), make(chan struct{}, 1)}
			h := New(instantBackend{tools: toolList(allTools...)}, Options{Logger: slog.New(hold)})
			srv := httptest.NewServer(h)
			defer srv.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			defer close(hold.read)
			req := newPost(srv.URL+tc.path, "application/json", tc.body, modernHeaders("tools/call", "Mcp-Name", "echo", "Accept", "application/json")...)
			resp, err := srv.Client().Do(req.WithContext(ctx))
			if err != nil {
				t.Fatalf("the answer waited for its audit line: %v", err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != tc.status || len(body) == 0 {
				t.Fatalf("got status %d, %q, %v; want %d with a body", resp.StatusCode, body, err, tc.status)
			}
			select {
			case <-hold.held: // the answer was read while its audit line was held
			case <-ctx.Done():
				t.Fatal("no audit line came for the call")
			}
		})
	}
}

// holdAudit is a log handler that holds each audit record until read is
// closed, and says on held that it holds one.
type holdAudit struct {
	slog.Handler
	read chan struct{}
	held chan struct{}
}

func (h holdAudit) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "audit" {
		select {
		case h.held <- struct{}{}:
		default:
		}
		<-h.read
	}
	return h.Handler.Handle(ctx, r)
}

// A client that closes its connection once it has the whole answer (as
// curl does) has not left early: now that answers leave before the audit
// line, its call is still "ok", JSON or stream. One that went before its
// answer reached it is "client_gone"; credentials that ended are not the
// client leaving.
func TestAuditAnsweredCallIsNotClientGone(t *testing.T) {
	t.Parallel()
	answer := []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	for _, tc := range []struct {
		name    string
		before  error // how the request's context ends before the answer; nil: after it
		how     string
		during  bool // the client closes as the answer's flush leaves, before it returns
		outcome string
	}{
		{"json, then the client closes", nil, "json", false, "ok"},
		{"stream, then the client closes", nil, "stream", false, "ok"},
		{"json, the client closes as it arrives", nil, "json", true, "ok"},
		{"stream, the client closes as it arrives", nil, "stream", true, "ok"},
		{"gone before the json answer", context.Canceled, "json", false, "client_gone"},
		{"gone before the stream's answer", context.Canceled, "stream", false, "client_gone"},
		{"gone with no answer", context.Canceled, "none", false, "client_gone"},
		{"credentials ended before the json answer", errCredentialsEnded, "json", false, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, logs, req := auditing(t)
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			r := httptest.NewRequestWithContext(ctx, "POST", "/mcp", nil)
			var conn http.ResponseWriter = httptest.NewRecorder()
			if tc.during {
				conn = closingRecorder{conn.(*httptest.ResponseRecorder), answer, func() { cancel(context.Canceled) }}
			}
			a := newAudited(conn, r)
			if tc.before != nil {
				cancel(tc.before)
			}
			switch tc.how {
			case "json":
				writeJSON(a, http.StatusOK, answer)
			case "stream":
				c := &fakeCall{wake: make(chan struct{}, 1), taken: make(chan struct{}, 1), ended: make(chan struct{})}
				c.finish(answer, nil)
				h.relay(a, r, c, nil, (*sseWriter).event, func(sse *sseWriter, resp []byte, _ error) bool { return sse.event(resp) == nil })
			}
			cancel(context.Canceled) // the client closes its connection, if it had not
			h.audit(r, req, a, 0, time.Now())
			var rec map[string]any
			if err := json.Unmarshal([]byte(logs.String()), &rec); err != nil {
				t.Fatalf("audit line %q: %v", logs.String(), err)
			}
			if rec["outcome"] != tc.outcome {
				t.Errorf("got outcome %v, want %s", rec["outcome"], tc.outcome)
			}
		})
	}
}

// closingRecorder is a connection whose client closes as soon as a flush
// has sent it the answer, so the request's context ends before that flush
// returns.
type closingRecorder struct {
	*httptest.ResponseRecorder
	answer []byte
	close  func()
}

func (c closingRecorder) Flush() {
	c.ResponseRecorder.Flush()
	if bytes.Contains(c.Body.Bytes(), c.answer) {
		c.close()
	}
}

// streamedCall is a 2026-07-28 call of echo that asks for progress, so its
// answer is a stream.
const streamedCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},` +
	`"_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`

// End to end: a client that goes before its answer is audited
// "client_gone".
func TestAuditOutcomeOfAClientThatCloses(t *testing.T) {
	t.Parallel()
	post := func(ctx context.Context, srv *httptest.Server) (*http.Response, error) {
		req := newPost(srv.URL+"/mcp", "application/json", streamedCall, modernHeaders("tools/call", "Mcp-Name", "echo", "Accept", "application/json, text/event-stream")...)
		return srv.Client().Do(req.WithContext(ctx))
	}
	outcome := func(t *testing.T, outcomes chan string) string {
		t.Helper()
		select {
		case o := <-outcomes:
			return o
		case <-time.After(10 * time.Second):
			t.Fatal("no audit line")
			return ""
		}
	}
	t.Run("gone first", func(t *testing.T) {
		t.Parallel()
		f, outcomes := newFake(), make(chan string, 1)
		srv := newServer(t, f, Options{Logger: slog.New(auditTap{outcomes})})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := post(ctx, srv); err == nil {
				resp.Body.Close()
			}
		}()
		c := f.next(t)
		cancel() // the client closes its connection before any answer
		<-done
		c.waitEnded(t)
		if got := outcome(t, outcomes); got != "client_gone" {
			t.Errorf("got outcome %q, want client_gone", got)
		}
	})
}

// auditTap is a log handler that hands over each audit line's outcome.
type auditTap struct{ outcomes chan string }

func (auditTap) Enabled(context.Context, slog.Level) bool { return true }

// Handle sends the outcome of each audit line, with its reason after a
// slash when it has one: "failed/timeout".
func (a auditTap) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "audit" {
		var outcome, reason string
		r.Attrs(func(at slog.Attr) bool {
			switch at.Key {
			case "outcome":
				outcome = at.Value.String()
			case "reason":
				reason = "/" + at.Value.String()
			}
			return true
		})
		a.outcomes <- outcome + reason
	}
	return nil
}
func (a auditTap) WithAttrs([]slog.Attr) slog.Handler { return a }
func (a auditTap) WithGroup(string) slog.Handler      { return a }

// A flush that fails says so through every wrapper of the chain (the
// access log's, the metrics', the audit's): a stream whose client cannot
// take it ends, and says why.
func TestFailedFlushReachesTheStream(t *testing.T) {
	t.Parallel()
	lines := make(chan string, 16)
	h := New(instantBackend{tools: toolList(allTools...)}, Options{Meter: metrics.New(1), Logger: slog.New(lineTap{lines})})
	req := newPost("http://gateway/mcp", "application/json", streamedCall, modernHeaders("tools/call", "Mcp-Name", "echo", "Accept", "application/json, text/event-stream")...)
	req.RemoteAddr = "192.0.2.1:1234"
	h.ServeHTTP(failingFlush{httptest.NewRecorder()}, req)
	close(lines)
	for l := range lines {
		if strings.HasPrefix(l, "client stopped taking the stream") {
			return
		}
	}
	t.Error("got no word of the failed flush, want the stream ended for it")
}

// failingFlush is a response writer whose flushes fail, as they do once
// the client is gone.
type failingFlush struct{ *httptest.ResponseRecorder }

func (failingFlush) FlushError() error { return errors.New("connection reset by peer") }

// lineTap is a log handler that hands over each line's message.
type lineTap struct{ lines chan string }

func (lineTap) Enabled(context.Context, slog.Level) bool { return true }
func (l lineTap) Handle(_ context.Context, r slog.Record) error {
	select {
	case l.lines <- r.Message:
	default:
	}
	return nil
}
func (l lineTap) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l lineTap) WithGroup(string) slog.Handler      { return l }

// Each way a REST call ends is audited as who ended it: the gateway
// refusing a request (an unknown tool) or failing it (a timeout, a stream
// it ends after 200 went out: with the reason gateway_calls_total gives
// it), the child's JSON-RPC error, and a tool's own error result, which is
// the child's answer as it is on /mcp.
func TestAuditOutcomeOfRESTAnswers(t *testing.T) {
	t.Parallel()
	outcomes := make(chan string, 1)
	f, srv := restServer(t, Options{Logger: slog.New(auditTap{outcomes})}, allTools...)
	sse := []string{"Accept", "application/json, text/event-stream"}
	for _, tc := range []struct {
		name, path string
		header     []string
		answer     func(c *fakeCall) // nil: no call reaches the backend
		status     int
		outcome    string
	}{
		{name: "unknown tool", path: "/v1/tools/nope", status: 404, outcome: "refused"},
		{name: "tool error", path: "/v1/tools/add", status: 422, outcome: "ok",
			answer: func(c *fakeCall) { c.finish(rpcResult(`{"content":[],"isError":true}`), nil) }},
		{name: "child error", path: "/v1/tools/add", status: 400, outcome: "error",
			answer: func(c *fakeCall) { c.finish(rpcError(`{"code":-32602,"message":"no"}`), nil) }},
		{name: "timeout", path: "/v1/tools/add", status: 504, outcome: "failed/timeout",
			answer: func(c *fakeCall) { c.finish(nil, jsonrpc.GatewayError(jsonrpc.CodeTimeout, "timeout", "slow")) }},
		{name: "stream ended by shutdown", path: "/v1/tools/add", header: sse, status: 200, outcome: "failed/shutting_down",
			answer: func(c *fakeCall) {
				c.note(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`)
				<-c.taken // the stream has begun: the error comes after 200
				c.finish(nil, jsonrpc.GatewayError(jsonrpc.CodeShutdown, "shutting_down", "bye"))
			}},
	} {
		answer := restStart(restReq("POST", srv+tc.path, "", "", tc.header...))
		if tc.answer != nil {
			tc.answer(f.next(t))
		}
		if r := await(t, answer); r.status != tc.status {
			t.Errorf("%s: status %d, want %d: %s", tc.name, r.status, tc.status, r.body)
		}
		select {
		case got := <-outcomes:
			if got != tc.outcome {
				t.Errorf("%s: audited %q, want %q", tc.name, got, tc.outcome)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no audit line", tc.name)
		}
	}
}

// Behind a trusted proxy, a request refused before it became a call (its
// access line is all the log has of it) names the client the limits went
// by, beside the proxy's connection; from anyone else, X-Forwarded-For is
// not read and the line names the connection alone.
func TestAccessLineNamesTheClientBehindAProxy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		trusted []netip.Prefix
		client  any // the access line's client; nil: none
	}{
		{"a trusted proxy", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, "203.0.113.9"},
		{"an untrusted peer", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, nil},
		{"no proxy trusted", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, logs := guarded(t, newFake(), Options{TrustedProxies: tc.trusted})
			resp := post(t, srv+"/mcp", "application/json", `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`, "X-Forwarded-For", "203.0.113.9")
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("without credentials: status %d", resp.StatusCode)
			}
			text := logs.waitFor(t, func(text string) bool { return strings.Contains(text, `"msg":"http request"`) })
			for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
				var rec map[string]any
				if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "http request" {
					continue
				}
				if rec["client"] != tc.client || !strings.HasPrefix(rec["remote"].(string), "127.0.0.1:") {
					t.Errorf("access line client %v, remote %v; want client %v beside the connection's address", rec["client"], rec["remote"], tc.client)
				}
			}
		})
	}
}

// An error of the gateway's own says on its audit line what the client
// was told: the reason is a kind, and the message which limit or deadline.
func TestAuditSaysWhyTheGatewayRefused(t *testing.T) {
	t.Parallel()
	h, logs, req := auditing(t)
	r := httptest.NewRequest("POST", "/mcp", nil)
	a := newAudited(httptest.NewRecorder(), r)
	why := "1024 listens are open, the most the gateway keeps; try again later"
	writeError(a, http.StatusServiceUnavailable, req.ID, jsonrpc.GatewayError(jsonrpc.CodeOverloaded, "overloaded", why))
	h.audit(r, req, a, 0, time.Now())
	var rec map[string]any
	if err := json.Unmarshal([]byte(logs.String()), &rec); err != nil {
		t.Fatalf("audit line %q: %v", logs.String(), err)
	}
	if rec["reason"] != "overloaded" || rec["why"] != why {
		t.Errorf("audit line %v: want reason overloaded and why %q", rec, why)
	}
}

// auditing is handlers that log JSON lines into logs, and the tools/call
// request they audit.
func auditing(t *testing.T) (*handlers, *strings.Builder, *mcp.Request) {
	t.Helper()
	logs := &strings.Builder{}
	opts := Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))}
	opts.defaults()
	msg, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req, err := mcp.Read(msg)
	if err != nil {
		t.Fatal(err)
	}
	return &handlers{opts: opts, log: opts.Logger}, logs, req
}
