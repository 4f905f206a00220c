package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// answeringBackend answers every call at once, as a child that echoes
// would: the response carries the request's id, and a request with a
// progress token gets a progress notification first.
type answeringBackend struct{}

type answeredCall struct {
	notes   [][]byte
	resp    []byte
	streams bool
	wake    chan struct{}
}

func (answeringBackend) Call(ctx context.Context, req *mcp.Request, caller bridge.Caller) (bridge.Call, error) {
	c := &answeredCall{resp: jsonrpc.NewResult(req.ID, []byte(`{"content":[]}`)), wake: make(chan struct{}, 1)}
	if tok, found, _ := jsonrpc.Lookup(req.Params, "_meta", "progressToken"); found {
		c.streams = true
		c.notes = [][]byte{jsonrpc.NewNotification("notifications/progress", append(append([]byte(`{"progress":1,"progressToken":`), req.Params[tok.Start:tok.End]...), '}'))}
	}
	c.wake <- struct{}{}
	return c, nil
}
func (answeringBackend) Notify(context.Context, *jsonrpc.Message) error  { return nil }
func (answeringBackend) Respond(context.Context, *jsonrpc.Message) error { return nil }
func (answeringBackend) Status() bridge.Status                           { return bridge.Status{Ready: true} }
func (answeringBackend) Await(context.Context, func(bridge.Status) bool) (bridge.Status, error) {
	return bridge.Status{Ready: true}, nil
}
func (answeringBackend) ToolHeaders(_ context.Context, tool string) ([]mcp.ParamHeader, error) {
	if tool == "deploy" {
		return []mcp.ParamHeader{{Name: "Region", Path: []string{"region"}, Type: "string"}}, nil
	}
	return nil, nil
}

func (answeringBackend) Tools(context.Context) (*bridge.ToolList, error) {
	return &bridge.ToolList{Tools: []json.RawMessage{json.RawMessage(`{"name":"deploy","inputSchema":{"type":"object"}}`)}, Names: []string{"deploy"}}, nil
}

func (c *answeredCall) Wake() <-chan struct{} { return c.wake }
func (c *answeredCall) Streams() bool         { return c.streams }
func (c *answeredCall) ErrorCode() int        { return 0 }
func (c *answeredCall) Cancel(string)         {}
func (c *answeredCall) Take() ([][]byte, []byte, bool, error) {
	n := c.notes
	c.notes = nil
	// As the bridge's calls do: an ended call keeps signalling.
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return n, c.resp, true, nil
}

// FuzzMCP throws arbitrary bodies and protocol headers at POST /mcp. Whatever
// comes in, the handler must answer (no panic, no hang) with a status it
// documents, never a 5xx (the backend here never fails), and a body that is
// JSON-RPC: one response carrying the request's own id, or SSE events that
// are each a JSON message.
func FuzzMCP(f *testing.F) {
	for _, seed := range []struct{ body, version, method, name, session string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, "", "", "", ""},
		{`{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"echo","_meta":{"progressToken":"p"}}}`, "", "", "", ""},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"deploy","arguments":{"region":"eu"},` + modernMeta + `}}`, "2026-07-28", "tools/call", "deploy", ""},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{` + modernMeta + `}}`, "2026-07-28", "tools/list", "", ""},
		{`{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, "", "", "", ""},
		{`{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"test://x",` + modernMeta + `}}`, "2026-07-28", "resources/read", "=?base64?dGVzdDovL3g=?=", ""},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, "", "", "", "0123456789abcdef0123456789abcdef"},
		{`{"jsonrpc":"2.0","id":"gw-1","result":{}}`, "", "", "", ""},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "", "", "", ""},
		{`{"jsonrpc":"2.0","id":6,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`, "2026-07-28", "subscriptions/listen", "", ""},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`, "", "", "", ""},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"1999-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`, "1999-01-01", "tools/call", "x", ""},
		{`not json`, "", "", "", ""},
	} {
		f.Add(seed.body, seed.version, seed.method, seed.name, seed.session)
	}
	h := New(answeringBackend{}, Options{})
	f.Fuzz(func(t *testing.T, body, version, method, name, session string) {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		req.Host = "localhost"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range map[string]string{"MCP-Protocol-Version": version, "Mcp-Method": method, "Mcp-Name": name, "Mcp-Session-Id": session} {
			if v != "" {
				req.Header.Set(k, v)
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		switch rec.Code {
		case 200, 202, 400, 404, 408:
		default:
			t.Fatalf("status %d for %q; body %s", rec.Code, body, rec.Body.Bytes())
		}
		out := rec.Body.Bytes()
		if rec.Code == 202 {
			if len(out) != 0 {
				t.Fatalf("202 with a body: %s", out)
			}
			return
		}
		var responses [][]byte
		switch ct := rec.Header().Get("Content-Type"); ct {
		case "application/json":
			responses = [][]byte{out}
		case "text/event-stream":
			sc := bufio.NewScanner(bytes.NewReader(out))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				if data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
					responses = append(responses, bytes.Clone(data))
				}
			}
			if len(responses) == 0 {
				t.Fatalf("an event stream with no events for %q", body)
			}
		default:
			t.Fatalf("Content-Type %q for %q; body %s", ct, body, out)
		}
		for _, r := range responses {
			if !json.Valid(r) {
				t.Fatalf("not JSON: %s", r)
			}
		}
		last, err := jsonrpc.Parse(responses[len(responses)-1])
		if err != nil || last.Kind != jsonrpc.KindResponse {
			t.Fatalf("the answer is not a JSON-RPC response (%v): %s", err, responses[len(responses)-1])
		}
		// An id that is not UTF-8 cannot be put back: the answer would not
		// be UTF-8 either.
		if in, err := jsonrpc.Parse([]byte(body)); err == nil && in.Kind == jsonrpc.KindRequest && utf8.Valid(in.ID) && !bytes.Equal(last.ID, in.ID) {
			t.Fatalf("the answer's id %s is not the request's %s", last.ID, in.ID)
		}
	})
}
