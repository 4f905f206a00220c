package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/clientlimit"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// Tools as a child might write them: odd spacing and member order, so
// that a test comparing bytes sees whether they passed untouched.
const (
	echoTool = `{ "name" :"echo",  "description":"says it back", "inputSchema":{"type":"object","properties":{"text":{"type":"string"},` +
		`"opts":{"type":"object","properties":{"n":{"type":"integer","minimum":1}}}},"required":["text"]},"annotations":{ "readOnlyHint" : true } }`
	addTool   = `{"inputSchema":{"type":"object"} , "name":"add","annotations":{"readOnlyHint":false}}`
	lookTool  = `{"name":"look","annotations":{"readOnlyHint":true},"inputSchema":{"type":"object","properties":{"q":{"type":"string"}}}}`
	slashTool = `{"name":"a/b","inputSchema":{"type":"object"}}`
	spaceTool = `{"name":"two words","inputSchema":{"type":"object"}}`
	pctTool   = `{"name":"50%","inputSchema":{"type":"object"}}`
	// A "true" that is a string is not a readOnlyHint.
	quotedTool = `{"name":"quoted","annotations":{"readOnlyHint":"true"},"inputSchema":{"type":"object"}}`
)

var allTools = []string{echoTool, addTool, lookTool, slashTool, spaceTool, pctTool, quotedTool}

// toolList is a tool list as the bridge keeps it: each object as the child
// wrote it, its name, and the digest of the whole.
func toolList(tools ...string) *bridge.ToolList {
	l := &bridge.ToolList{}
	d := sha256.New()
	for _, t := range tools {
		name, _ := mcp.String(jsonrpc.Get([]byte(t), "name"))
		l.Tools = append(l.Tools, json.RawMessage(t))
		l.Names = append(l.Names, name)
		d.Write([]byte(t))
		d.Write([]byte{'\n'})
	}
	d.Sum(l.Digest[:0])
	return l
}

// restServer is a server over a fake child that lists tools.
func restServer(t *testing.T, opts Options, tools ...string) (*fakeBackend, string) {
	t.Helper()
	f := newFake()
	f.tools = toolList(tools...)
	return f, newServer(t, f, opts).URL
}

func rpcResult(result string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":1,"result":` + result + `}`)
}

func rpcError(errObj string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":1,"error":` + errObj + `}`)
}

// restReq is a request with the content type (none if empty) and the
// header's name, value pairs.
func restReq(method, url, contentType, body string, header ...string) *http.Request {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		panic(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return req
}

// reply is an answer read whole.
type reply struct {
	status int
	header http.Header
	body   []byte
	err    error
}

// restStart sends req from a goroutine of its own and reads the whole
// answer; the caller must receive from the channel.
func restStart(req *http.Request) <-chan reply {
	ch := make(chan reply, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- reply{err: err}
			return
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		ch <- reply{status: resp.StatusCode, header: resp.Header, body: body, err: err}
	}()
	return ch
}

// restDo sends req and reads the whole answer.
func restDo(t *testing.T, req *http.Request) reply {
	t.Helper()
	return await(t, restStart(req))
}

// restRefused sends req, which must be answered without reaching the
// child: a call that does reach it fails the test and is ended, so that
// the test does not wait for an answer nobody gives.
func restRefused(t *testing.T, f *fakeBackend, req *http.Request) reply {
	t.Helper()
	answer := restStart(req)
	select {
	case r := <-answer:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r
	case c := <-f.calls:
		t.Errorf("a call reached the child: %s", c.req.Raw)
		c.finish(rpcError(`{"code":-32603,"message":"not for the child"}`), nil)
		return await(t, answer)
	}
}

func await(t *testing.T, ch <-chan reply) reply {
	t.Helper()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r
}

// problemDoc is a problem as a client reads it; raw members keep their
// bytes.
type problemDoc struct {
	Type          string          `json:"type"`
	Title         string          `json:"title"`
	Status        int             `json:"status"`
	Detail        string          `json:"detail"`
	Code          int             `json:"code"`
	Reason        string          `json:"reason"`
	Errors        []argumentError `json:"errors"`
	Result        json.RawMessage `json:"result"`
	InputRequests json.RawMessage `json:"inputRequests"`
	Error         json.RawMessage `json:"error"`
}

// checkProblem reads a problem object and checks what every problem
// holds: a type under the gateway's URN, a title, and status.
func checkProblem(t *testing.T, data []byte, status int, kind string) problemDoc {
	t.Helper()
	var p problemDoc
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatalf("not a problem object: %v: %s", err, data)
	}
	if !strings.HasPrefix(p.Type, problemPrefix) || p.Title == "" || p.Status != status {
		t.Errorf("problem: type %q, title %q, status %d; want a type under %s, a title, status %d: %s", p.Type, p.Title, p.Status, problemPrefix, status, data)
	}
	if kind != "" && p.Type != problemPrefix+kind {
		t.Errorf("problem type %q, want %s: %s", p.Type, problemPrefix+kind, data)
	}
	if bytes.Contains(data, []byte(`"jsonrpc"`)) {
		t.Errorf("a JSON-RPC body where a problem belongs: %s", data)
	}
	return p
}

// wantProblem checks that r is an application/problem+json answer with
// status, of the kind (any when "").
func wantProblem(t *testing.T, r reply, status int, kind string) problemDoc {
	t.Helper()
	if r.status != status {
		t.Errorf("status %d, want %d: %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json: %s", ct, r.body)
	}
	p := checkProblem(t, r.body, r.status, kind)
	if (status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests) && r.header.Get("Retry-After") == "" {
		t.Errorf("%d without Retry-After", status)
	}
	return p
}

// sseEvent is one event of a stream; name "message" when it had none.
type sseEvent struct{ name, data string }

// sseEvents reads the events of a whole stream.
func sseEvents(t *testing.T, r reply) []sseEvent {
	t.Helper()
	if ct := r.header.Get("Content-Type"); r.status != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q, want a 200 stream: %s", r.status, ct, r.body)
	}
	var events []sseEvent
	ev := sseEvent{name: "message"}
	var data []string
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != nil {
				ev.data = strings.Join(data, "\n")
				events = append(events, ev)
			}
			ev, data = sseEvent{name: "message"}, nil
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		}
	}
	if data != nil {
		t.Errorf("the stream ends inside an event: %s", r.body)
	}
	return events
}

// lastEvent is the stream's last event, after checking that exactly one
// result or error ends it.
func lastEvent(t *testing.T, events []sseEvent) sseEvent {
	t.Helper()
	if len(events) == 0 {
		t.Fatal("no events")
	}
	for _, e := range events[:len(events)-1] {
		if e.name != "progress" {
			t.Errorf("event %q before the end, want only progress: %v", e.name, events)
		}
	}
	return events[len(events)-1]
}

// What a REST call becomes at the child: a 2026-07-28 tools/call with
// the arguments as sent; its result comes back as the child wrote it.
func TestRESTToolCallReachesTheChild(t *testing.T) {
	t.Parallel()
	f, srv := restServer(t, Options{}, allTools...)
	// Spacing, member order and characters an HTML-safe encoder would
	// escape all come back as they were.
	const result = `{ "content":[{"type":"text","text":"<b>hi</b> & co"}],  "structuredContent":{"z":1,"a":[ 2 ]} }`
	for _, tc := range []struct {
		name, method, path, contentType, body string
		header                                []string
		tool, args                            string
	}{
		{"arguments", "POST", "/v1/tools/echo", "application/json", `{ "text" : "hi",  "opts":{"n":2, "m":"\u00e9"} }`, nil, "echo", `{ "text" : "hi",  "opts":{"n":2, "m":"\u00e9"} }`},
		{"json with a charset", "POST", "/v1/tools/echo", "application/json; charset=utf-8", `{"text":"x"}`, nil, "echo", `{"text":"x"}`},
		{"empty body", "POST", "/v1/tools/add", "", "", nil, "add", `{}`},
		{"empty JSON body", "POST", "/v1/tools/add", "application/json", "", nil, "add", `{}`},
		{"blank JSON body", "POST", "/v1/tools/add", "application/json", " \n\t ", nil, "add", `{}`},
		{"escaped slash", "POST", "/v1/tools/a%2Fb", "application/json", `{"k":1}`, nil, "a/b", `{"k":1}`},
		{"escaped space", "POST", "/v1/tools/two%20words", "", "", nil, "two words", `{}`},
		{"escaped percent", "POST", "/v1/tools/50%25", "", "", nil, "50%", `{}`},
		{"explicit JSON accept", "POST", "/v1/tools/add", "", "", []string{"Accept", "application/json"}, "add", `{}`},
		{"any accept", "POST", "/v1/tools/add", "", "", []string{"Accept", "*/*"}, "add", `{}`},
		{"a stream refused", "POST", "/v1/tools/add", "", "", []string{"Accept", "text/event-stream;q=0, application/json"}, "add", `{}`},
		{"a timeout", "POST", "/v1/tools/add?timeout=30m", "", "", nil, "add", `{}`},
		{"GET form", "GET", "/v1/tools/look?arguments=" + url.QueryEscape(`{"q" : "<x>"}`), "", "", nil, "look", `{"q" : "<x>"}`},
		{"GET form, no arguments", "GET", "/v1/tools/look", "", "", nil, "look", `{}`},
		{"GET form, a timeout", "GET", "/v1/tools/echo?timeout=10s&arguments=" + url.QueryEscape(`{"text":"a"}`), "", "", nil, "echo", `{"text":"a"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := restStart(restReq(tc.method, srv+tc.path, tc.contentType, tc.body, tc.header...))
			c := f.next(t)
			if c.req.Method != mcp.MethodToolsCall {
				t.Errorf("method %q", c.req.Method)
			}
			if name, _ := c.req.String(mcp.ParamName); name != tc.tool {
				t.Errorf("name %q, want %q", name, tc.tool)
			}
			if args, _ := c.req.Param(mcp.ParamArguments); string(args) != tc.args {
				t.Errorf("arguments\n got %s\nwant %s", args, tc.args)
			}
			if v, _ := c.req.Meta(mcp.MetaProtocolVersion); string(v) != `"`+mcp.Modern+`"` {
				t.Errorf("_meta protocol version %s", v)
			}
			if !c.caller.Modern || c.caller.Principal != "" || string(c.caller.Capabilities) != "{}" || c.caller.CanStream {
				t.Errorf("caller %+v, want a modern anonymous caller without capabilities", c.caller)
			}
			c.finish(rpcResult(result), nil)
			r := await(t, answer)
			if r.status != 200 || r.header.Get("Content-Type") != "application/json" || string(r.body) != result {
				t.Errorf("status %d, Content-Type %q\n got %s\nwant %s", r.status, r.header.Get("Content-Type"), r.body, result)
			}
		})
	}
}

// What the gateway refuses never reaches the child.
func TestRESTToolCallRefused(t *testing.T) {
	t.Parallel()
	f, srv := restServer(t, Options{MaxBodyBytes: 1024, MaxCallDuration: time.Hour}, allTools...)
	for _, tc := range []struct {
		name, method, path, contentType, body string
		status                                int
		kind                                  string
	}{
		{"unknown tool", "POST", "/v1/tools/nope", "", "", 404, kindUnknownTool},
		{"escaped escape", "POST", "/v1/tools/a%252Fb", "", "", 404, kindUnknownTool},
		{"unescaped slash", "POST", "/v1/tools/a/b", "", "", 404, kindNotFound},
		{"duplicate member", "POST", "/v1/tools/echo", "application/json", `{"text":"a","text":5}`, 400, kindBadRequest},
		{"duplicate through an escape", "POST", "/v1/tools/echo", "application/json", `{"text":"a","t\u0065xt":5}`, 400, kindBadRequest},
		{"nested duplicate", "POST", "/v1/tools/echo", "application/json", `{"text":"a","opts":{"n":1,"\u006e":2}}`, 400, kindBadRequest},
		{"duplicate in an array", "POST", "/v1/tools/add", "application/json", `{"l":[1,{"k":1,"k":2}]}`, 400, kindBadRequest},
		{"array", "POST", "/v1/tools/add", "application/json", `[{"text":"a"}]`, 400, kindBadRequest},
		{"string", "POST", "/v1/tools/add", "application/json", `"text"`, 400, kindBadRequest},
		{"null", "POST", "/v1/tools/add", "application/json", `null`, 400, kindBadRequest},
		{"number", "POST", "/v1/tools/add", "application/json", `1`, 400, kindBadRequest},
		{"trailing object", "POST", "/v1/tools/add", "application/json", `{} {}`, 400, kindBadRequest},
		{"trailing bytes", "POST", "/v1/tools/add", "application/json", `{}x`, 400, kindBadRequest},
		{"malformed", "POST", "/v1/tools/add", "application/json", `{"text":`, 400, kindBadRequest},
		{"text/plain", "POST", "/v1/tools/add", "text/plain", `{}`, 415, kindUnsupportedMedia},
		{"form", "POST", "/v1/tools/add", "application/x-www-form-urlencoded", `a=1`, 415, kindUnsupportedMedia},
		{"no content type", "POST", "/v1/tools/add", "", `{}`, 415, kindUnsupportedMedia},
		{"too large", "POST", "/v1/tools/add", "application/json", `{"x":"` + strings.Repeat("a", 2000) + `"}`, 413, kindTooLarge},
		{"unknown query parameter", "POST", "/v1/tools/add?dry=1", "", "", 400, kindBadRequest},
		{"arguments in the query of a POST", "POST", "/v1/tools/add?arguments=%7B%7D", "", "", 400, kindBadRequest},
		{"timeout 0", "POST", "/v1/tools/add?timeout=0", "", "", 400, kindBadRequest},
		{"negative timeout", "POST", "/v1/tools/add?timeout=-1s", "", "", 400, kindBadRequest},
		{"timeout not a duration", "POST", "/v1/tools/add?timeout=abc", "", "", 400, kindBadRequest},
		{"timeout without a unit", "POST", "/v1/tools/add?timeout=5", "", "", 400, kindBadRequest},
		{"timeout over the longest", "POST", "/v1/tools/add?timeout=61m", "", "", 400, kindBadRequest},
		{"timeout twice", "POST", "/v1/tools/add?timeout=1s&timeout=2s", "", "", 400, kindBadRequest},
		{"GET of a tool that is not read-only", "GET", "/v1/tools/add", "", "", 405, kindNotReadOnly},
		{"GET of a tool with no annotations", "GET", "/v1/tools/a%2Fb", "", "", 405, kindNotReadOnly},
		{"GET of a tool whose hint is a string", "GET", "/v1/tools/quoted", "", "", 405, kindNotReadOnly},
		{"GET, arguments an array", "GET", "/v1/tools/look?arguments=" + url.QueryEscape(`[1]`), "", "", 400, kindBadRequest},
		{"GET, arguments malformed", "GET", "/v1/tools/look?arguments=" + url.QueryEscape(`{"q":`), "", "", 400, kindBadRequest},
		{"GET, arguments with a duplicate", "GET", "/v1/tools/look?arguments=" + url.QueryEscape(`{"q":"a","q":"b"}`), "", "", 400, kindBadRequest},
		{"GET, arguments twice", "GET", "/v1/tools/look?arguments=%7B%7D&arguments=%7B%7D", "", "", 400, kindBadRequest},
		{"GET, unknown query parameter", "GET", "/v1/tools/look?q=x", "", "", 400, kindBadRequest},
		{"PUT", "PUT", "/v1/tools/add", "application/json", `{}`, 405, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := restRefused(t, f, restReq(tc.method, srv+tc.path, tc.contentType, tc.body))
			wantProblem(t, r, tc.status, tc.kind)
			if r.status == http.StatusMethodNotAllowed && r.header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
			if tc.kind == kindNotReadOnly && r.header.Get("Allow") != "POST" {
				t.Errorf("Allow %q, want POST", r.header.Get("Allow"))
			}
			nothingReached(t, f)
		})
	}
}

// A tool call's end, as JSON and as the last event of a stream.
func TestRESTToolCallAnswers(t *testing.T) {
	t.Parallel()
	const (
		toolErr  = `{"content":[{"type":"text","text":"<no> & no"}], "isError" : true}`
		question = `{"resultType":"input_required","inputRequests":{ "q1" : {"method":"elicitation/create","params":{"message":"<sure?>"}}},"requestState":"s"}`
	)
	tests := []struct {
		name   string
		resp   []byte
		err    error
		status int
		kind   string
		check  func(*testing.T, problemDoc)
	}{
		{name: "tool error", resp: rpcResult(toolErr), status: 422, kind: kindToolError, check: func(t *testing.T, p problemDoc) {
			if string(p.Result) != toolErr {
				t.Errorf("result\n got %s\nwant %s", p.Result, toolErr)
			}
		}},
		{name: "input required", resp: rpcResult(question), status: 422, kind: kindInputRequired, check: func(t *testing.T, p problemDoc) {
			if want := `{ "q1" : {"method":"elicitation/create","params":{"message":"<sure?>"}}}`; string(p.InputRequests) != want {
				t.Errorf("inputRequests\n got %s\nwant %s", p.InputRequests, want)
			}
		}},
		{name: "invalid params", resp: rpcError(`{"code":-32602, "message":"bad <text>","data":{"at":"/text"}}`), status: 400, kind: kindChildError, check: func(t *testing.T, p problemDoc) {
			if want := `{"code":-32602, "message":"bad <text>","data":{"at":"/text"}}`; p.Code != -32602 || string(p.Error) != want {
				t.Errorf("code %d, error\n got %s\nwant %s", p.Code, p.Error, want)
			}
		}},
		{name: "method not found", resp: rpcError(`{"code":-32601,"message":"no tools"}`), status: 404, kind: kindChildError},
		{name: "legacy not found", resp: rpcError(`{"code":-32002,"message":"gone"}`), status: 404, kind: kindChildError},
		{name: "the child's own error", resp: rpcError(`{"code":-32099,"message":"disk full"}`), status: 502, kind: kindChildError, check: func(t *testing.T, p problemDoc) {
			if p.Code != -32099 || string(p.Error) != `{"code":-32099,"message":"disk full"}` {
				t.Errorf("code %d, error %s", p.Code, p.Error)
			}
		}},
		{name: "internal error", resp: rpcError(`{"code":-32603,"message":"oops"}`), status: 502, kind: kindChildError},
		{name: "gateway timeout", err: jsonrpc.GatewayError(jsonrpc.CodeTimeout, "timeout", "too slow"), status: 504, kind: kindTimeout},
		{name: "child went away", err: jsonrpc.GatewayError(jsonrpc.CodeUnavailable, "child_unavailable", "crashed"), status: 503, kind: kindUnavailable, check: func(t *testing.T, p problemDoc) {
			if p.Code != jsonrpc.CodeUnavailable || p.Reason != "child_unavailable" {
				t.Errorf("code %d, reason %q", p.Code, p.Reason)
			}
		}},
		{name: "overloaded", err: jsonrpc.GatewayError(jsonrpc.CodeOverloaded, "overloaded", "busy"), status: 503, kind: kindUnavailable},
		{name: "shutting down", err: jsonrpc.GatewayError(jsonrpc.CodeShutdown, "shutdown", "bye"), status: 503, kind: kindUnavailable},
		{name: "answer too large", err: jsonrpc.GatewayError(jsonrpc.CodeTooLarge, "too_large", "big"), status: 502, kind: kindAnswerTooLarge},
	}
	f, srv := restServer(t, Options{}, allTools...)
	for _, stream := range []bool{false, true} {
		for _, tc := range tests {
			name := tc.name + ", json"
			if stream {
				name = tc.name + ", stream"
			}
			t.Run(name, func(t *testing.T) {
				var header []string
				if stream {
					header = []string{"Accept", "application/json, text/event-stream"}
				}
				answer := restStart(restReq("POST", srv+"/v1/tools/add", "", "", header...))
				f.next(t).finish(tc.resp, tc.err)
				r := await(t, answer)
				var p problemDoc
				if stream {
					last := lastEvent(t, sseEvents(t, r))
					if last.name != "error" {
						t.Fatalf("last event %q, want error: %s", last.name, r.body)
					}
					p = checkProblem(t, []byte(last.data), tc.status, tc.kind)
				} else {
					p = wantProblem(t, r, tc.status, tc.kind)
				}
				if tc.check != nil {
					tc.check(t, p)
				}
			})
		}
	}
}

// A gateway that cannot reach the child refuses before anything starts:
// a plain problem, even to a client that takes a stream.
func TestRESTBackendErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code, status int
		kind         string
	}{
		{jsonrpc.CodeUnavailable, 503, kindUnavailable},
		{jsonrpc.CodeOverloaded, 503, kindUnavailable},
		{jsonrpc.CodeShutdown, 503, kindUnavailable},
		{jsonrpc.CodeTimeout, 504, kindTimeout},
	} {
		f, srv := restServer(t, Options{}, allTools...)
		f.callErr = jsonrpc.GatewayError(tc.code, "r", "m")
		for _, req := range []*http.Request{
			restReq("POST", srv+"/v1/tools/add", "", ""),
			restReq("POST", srv+"/v1/tools/add", "", "", "Accept", "text/event-stream"),
			restReq("GET", srv+"/v1/tools/look", "", "", "Accept", "text/event-stream"),
			restReq("GET", srv+"/v1/tools", "", ""),
			restReq("GET", srv+"/v1/resources", "", ""),
			restReq("GET", srv+"/v1/resources/read?uri=demo://a", "", ""),
			restReq("GET", srv+"/v1/prompts/greet", "", ""),
		} {
			t.Run(strconv.Itoa(tc.code)+" "+req.Method+" "+req.URL.RequestURI(), func(t *testing.T) {
				p := wantProblem(t, restRefused(t, f, req), tc.status, tc.kind)
				if p.Code != tc.code || p.Reason != "r" {
					t.Errorf("code %d reason %q, want %d r", p.Code, p.Reason, tc.code)
				}
			})
		}
	}
}

// The stream shows the child's progress as it comes, then the result.
func TestRESTProgressStream(t *testing.T) {
	t.Parallel()
	f, srv := restServer(t, Options{}, allTools...)
	const result = `{"content":[{"type":"text","text":"<done>"}] }`
	for _, tc := range []struct {
		name, method, path, accept string
	}{
		{"POST", "POST", "/v1/tools/add", "text/event-stream"},
		{"GET form", "GET", "/v1/tools/look?arguments=%7B%7D", "text/event-stream"},
		{"among other types", "POST", "/v1/tools/add", "application/json;q=0.9, text/event-stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := restStart(restReq(tc.method, srv+tc.path, "", "", "Accept", tc.accept))
			c := f.next(t)
			tok, _ := c.req.Meta(mcp.MetaProgressToken)
			if len(tok) == 0 {
				t.Fatalf("no progress token in %s", c.req.Raw)
			}
			note := func(params string) string {
				return `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + string(tok) + `,` + params + `}}`
			}
			c.note(note(`"progress":1,"total":10,"message":"st\u00e9p <1>"`))
			c.note(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"not progress"}}`)
			c.note(note(`"message":"no progress"`))
			c.note(note(`"progress":2.5`))
			c.note(note(`"total":4, "progress" : 3`))
			c.finish(rpcResult(result), nil)
			got := sseEvents(t, await(t, answer))
			want := []sseEvent{
				{"progress", `{"progress":1,"total":10,"message":"st\u00e9p <1>"}`},
				{"progress", `{"progress":2.5}`},
				{"progress", `{"progress":3,"total":4}`},
				{"result", result},
			}
			if len(got) != len(want) {
				t.Fatalf("events %q, want %q", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("event %d: %q, want %q", i, got[i], want[i])
				}
			}
		})
	}
}

// A quiet stream carries keep-alive comments until the call ends.
func TestRESTStreamKeepAlive(t *testing.T) {
	t.Parallel()
	f, srv := restServer(t, Options{KeepAlive: 20 * time.Millisecond}, allTools...)
	resp, err := http.DefaultClient.Do(restReq("POST", srv+"/v1/tools/add", "", "", "Accept", "text/event-stream"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	c := f.next(t)
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		// The call ends only once a keep-alive has come.
		if sc.Text() == ": keep-alive" {
			c.finish(rpcResult(`{"content":[]}`), nil)
		}
	}
	var keepAlive bool
	for _, l := range lines {
		keepAlive = keepAlive || l == ": keep-alive"
	}
	if n := len(lines); !keepAlive || n < 3 || lines[n-3] != "event: result" || lines[n-2] != `data: {"content":[]}` {
		t.Errorf("stream %q, want keep-alives then the result", lines)
	}
}

// A call's own timeout cancels it toward the child and answers 504.
func TestRESTTimeout(t *testing.T) {
	t.Parallel()
	f, srv := restServer(t, Options{}, allTools...)
	for _, stream := range []bool{false, true} {
		t.Run("stream="+strconv.FormatBool(stream), func(t *testing.T) {
			var header []string
			if stream {
				header = []string{"Accept", "text/event-stream"}
			}
			answer := restStart(restReq("POST", srv+"/v1/tools/add?timeout=50ms", "", "", header...))
			c := f.next(t)
			if cause := c.waitEnded(t); !errors.Is(cause, errCallTimeout) {
				t.Errorf("the call ended with %v, want its timeout", cause)
			}
			r := await(t, answer)
			var p problemDoc
			if stream {
				last := lastEvent(t, sseEvents(t, r))
				if last.name != "error" {
					t.Fatalf("last event %q, want error", last.name)
				}
				p = checkProblem(t, []byte(last.data), 504, kindTimeout)
			} else {
				p = wantProblem(t, r, 504, kindTimeout)
			}
			if p.Code != jsonrpc.CodeTimeout {
				t.Errorf("code %d", p.Code)
			}
		})
	}
}

// A client that goes away cancels its call, waiting for JSON or reading
// a stream.
func TestRESTClientGoneCancelsTheCall(t *testing.T) {
	t.Parallel()
	f, srv := restServer(t, Options{}, allTools...)
	for _, stream := range []bool{false, true} {
		t.Run("stream="+strconv.FormatBool(stream), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := restReq("POST", srv+"/v1/tools/add", "", "").WithContext(ctx)
			if stream {
				req.Header.Set("Accept", "text/event-stream")
			}
			answer := restStart(req)
			c := f.next(t)
			if stream {
				// The stream is open once a progress event went out.
				c.note(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`)
				<-c.taken
			}
			cancel()
			if cause := c.waitEnded(t); !errors.Is(cause, context.Canceled) {
				t.Errorf("the call ended with %v, want context.Canceled", cause)
			}
			<-answer
		})
	}
}

func TestRESTResources(t *testing.T) {
	t.Parallel()
	f, srv := restServer(t, Options{}, allTools...)
	type page struct{ cursor, answer string } // the cursor the request carries
	for _, tc := range []struct {
		name, path, method string
		pages              []page
		want               string
	}{
		{"two pages", "/v1/resources", mcp.MethodResourcesList, []page{
			{"", `{"resources":[ {"uri":"demo://a" ,"name":"a"} ], "nextCursor":"p2"}`},
			{`"p2"`, `{"nextCursor":"","resources":[{"name":"b","uri":"demo://b"},{"uri":"demo://c","name":"c"}]}`},
		}, `{"resources":[{"uri":"demo://a" ,"name":"a"},{"name":"b","uri":"demo://b"},{"uri":"demo://c","name":"c"}]}`},
		{"empty", "/v1/resources", mcp.MethodResourcesList, []page{{"", `{"resources":[]}`}}, `{"resources":[]}`},
		{"templates", "/v1/resources/templates", mcp.MethodTemplatesList, []page{
			{"", `{"resourceTemplates":[{"uriTemplate":"demo://{x}", "name":"x"}],"nextCursor":"t2"}`},
			{`"t2"`, `{"resourceTemplates":[{"uriTemplate":"demo://y/{z}","name":"y"}]}`},
		}, `{"resourceTemplates":[{"uriTemplate":"demo://{x}", "name":"x"},{"uriTemplate":"demo://y/{z}","name":"y"}]}`},
		{"prompts", "/v1/prompts", mcp.MethodPromptsList, []page{
			{"", `{"prompts":[{"name":"greet", "arguments":[{"name":"who","required":true}]}]}`},
		}, `{"prompts":[{"name":"greet", "arguments":[{"name":"who","required":true}]}]}`},
		{"read", "/v1/resources/read?uri=" + url.QueryEscape("demo://a?q=1&r=2"), mcp.MethodResourcesRead, []page{
			{"", `{"contents":[{"uri":"demo://a?q=1&r=2", "text":"<hello>"}]}`},
		}, `{"contents":[{"uri":"demo://a?q=1&r=2", "text":"<hello>"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := restStart(restReq("GET", srv+tc.path, "", ""))
			for _, p := range tc.pages {
				c := f.next(t)
				if c.req.Method != tc.method {
					t.Errorf("method %q, want %q", c.req.Method, tc.method)
				}
				if got := jsonrpc.Get(c.req.Params, "cursor"); string(got) != p.cursor {
					t.Errorf("cursor %s, want %s", got, p.cursor)
				}
				if tc.method == mcp.MethodResourcesRead {
					if uri, _ := c.req.String(mcp.ParamURI); uri != "demo://a?q=1&r=2" {
						t.Errorf("uri %q", uri)
					}
				}
				c.finish(rpcResult(p.answer), nil)
			}
			r := await(t, answer)
			if r.status != 200 || r.header.Get("Content-Type") != "application/json" || string(r.body) != tc.want {
				t.Errorf("status %d, Content-Type %q\n got %s\nwant %s", r.status, r.header.Get("Content-Type"), r.body, tc.want)
			}
			nothingReached(t, f)
		})
	}
	// A resource the child does not know.
	for _, tc := range []struct {
		name, errObj string
		status       int
		kind         string
	}{
		{"invalid params means not found", `{"code":-32602,"message":"no such resource","data":{"uri":"demo://x"}}`, 404, kindNotFound},
		{"legacy not found", `{"code":-32002,"message":"no such resource"}`, 404, kindNotFound},
		{"another error", `{"code":-32603,"message":"broken"}`, 502, kindChildError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := restStart(restReq("GET", srv+"/v1/resources/read?uri=demo://x", "", ""))
			f.next(t).finish(rpcError(tc.errObj), nil)
			p := wantProblem(t, await(t, answer), tc.status, tc.kind)
			if string(p.Error) != tc.errObj {
				t.Errorf("error\n got %s\nwant %s", p.Error, tc.errObj)
			}
		})
	}
	for _, path := range []string{"/v1/resources/read", "/v1/resources/read?uri=", "/v1/resources/read?uri=a&x=1",
		"/v1/resources/read?uri=a&uri=b", "/v1/resources?cursor=c", "/v1/resources/templates?x=1", "/v1/prompts?x=1"} {
		t.Run(path, func(t *testing.T) {
			wantProblem(t, restRefused(t, f, restReq("GET", srv+path, "", "")), 400, kindBadRequest)
			nothingReached(t, f)
		})
	}
}

func TestRESTPrompts(t *testing.T) {
	t.Parallel()
	f, srv := restServer(t, Options{}, allTools...)
	const (
		list   = `{"prompts":[{"name":"greet","arguments":[{"name":"who"}]},{"name":"a/b"}]}`
		result = `{"messages":[{"role":"user","content":{"type":"text","text":"Hi <Ada>"}}] }`
	)
	for _, tc := range []struct {
		name, method, path, contentType, body string
		prompt                                string
		args                                  map[string]string // decoded, when raw is ""
		raw                                   string
	}{
		{"query arguments", "GET", "/v1/prompts/greet?who=Ada&tone=" + url.QueryEscape(`a&b "c"`) + "&empty=", "", "", "greet",
			map[string]string{"who": "Ada", "tone": `a&b "c"`, "empty": ""}, ""},
		{"no arguments", "GET", "/v1/prompts/greet", "", "", "greet", nil, `{}`},
		{"escaped name", "GET", "/v1/prompts/a%2Fb", "", "", "a/b", nil, `{}`},
		{"POST", "POST", "/v1/prompts/greet", "application/json", `{ "who" : "Ada", "x":"\u00e9" }`, "greet", nil, `{ "who" : "Ada", "x":"\u00e9" }`},
		{"POST, empty body", "POST", "/v1/prompts/greet", "", "", "greet", nil, `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := restStart(restReq(tc.method, srv+tc.path, tc.contentType, tc.body))
			c := f.next(t)
			if c.req.Method != mcp.MethodPromptsGet {
				t.Errorf("method %q", c.req.Method)
			}
			if name, _ := c.req.String(mcp.ParamName); name != tc.prompt {
				t.Errorf("name %q, want %q", name, tc.prompt)
			}
			args, _ := c.req.Param(mcp.ParamArguments)
			if tc.raw != "" {
				if string(args) != tc.raw {
					t.Errorf("arguments %s, want %s", args, tc.raw)
				}
			} else {
				var got map[string]string
				if err := json.Unmarshal(args, &got); err != nil || len(got) != len(tc.args) {
					t.Errorf("arguments %s (%v), want %v", args, err, tc.args)
				}
				for k, v := range tc.args {
					if got[k] != v {
						t.Errorf("argument %s = %q, want %q", k, got[k], v)
					}
				}
			}
			c.finish(rpcResult(result), nil)
			r := await(t, answer)
			if r.status != 200 || string(r.body) != result {
				t.Errorf("status %d\n got %s\nwant %s", r.status, r.body, result)
			}
		})
	}
	for _, tc := range []struct {
		name, method, path, contentType, body string
		status                                int
		kind                                  string
	}{
		{"a number", "POST", "/v1/prompts/greet", "application/json", `{"who":1}`, 400, kindBadRequest},
		{"null", "POST", "/v1/prompts/greet", "application/json", `{"who":null}`, 400, kindBadRequest},
		{"an object", "POST", "/v1/prompts/greet", "application/json", `{"who":{"a":"b"}}`, 400, kindBadRequest},
		{"an array", "POST", "/v1/prompts/greet", "application/json", `{"who":["a"]}`, 400, kindBadRequest},
		{"true", "POST", "/v1/prompts/greet", "application/json", `{"who":"a","loud":true}`, 400, kindBadRequest},
		{"not an object", "POST", "/v1/prompts/greet", "application/json", `["a"]`, 400, kindBadRequest},
		{"duplicate", "POST", "/v1/prompts/greet", "application/json", `{"who":"a","w\u0068o":"b"}`, 400, kindBadRequest},
		{"text/plain", "POST", "/v1/prompts/greet", "text/plain", `{"who":"a"}`, 415, kindUnsupportedMedia},
		{"query on a POST", "POST", "/v1/prompts/greet?who=a", "", "", 400, kindBadRequest},
		{"an argument twice", "GET", "/v1/prompts/greet?who=a&who=b", "", "", 400, kindBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantProblem(t, restRefused(t, f, restReq(tc.method, srv+tc.path, tc.contentType, tc.body)), tc.status, tc.kind)
			nothingReached(t, f)
		})
	}
	// -32602 is an unknown prompt, or bad arguments to a known one: the
	// prompt list tells.
	for _, tc := range []struct {
		name, prompt string
		status       int
		kind         string
	}{
		{"unknown prompt", "nope", 404, kindNotFound},
		{"bad arguments", "greet", 400, kindChildError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const errObj = `{"code":-32602,"message":"invalid params"}`
			answer := restStart(restReq("GET", srv+"/v1/prompts/"+tc.prompt, "", ""))
			f.next(t).finish(rpcError(errObj), nil)
			c := f.next(t)
			if c.req.Method != mcp.MethodPromptsList {
				t.Fatalf("then %q, want the prompt list", c.req.Method)
			}
			c.finish(rpcResult(list), nil)
			p := wantProblem(t, await(t, answer), tc.status, tc.kind)
			if p.Code != jsonrpc.CodeInvalidParams || string(p.Error) != errObj {
				t.Errorf("code %d, error %s", p.Code, p.Error)
			}
		})
	}
}

// Routes under /v1 that do not exist answer with problems too.
func TestRESTUnknownRoutes(t *testing.T) {
	t.Parallel()
	f, srv := restServer(t, Options{}, allTools...)
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/v1/nope", 404},
		{"GET", "/v1", 404},
		{"GET", "/v1/tools/echo/more", 404},
		{"DELETE", "/v1/tools", 405},
		{"POST", "/v1/resources", 405},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := restRefused(t, f, restReq(tc.method, srv+tc.path, "", ""))
			wantProblem(t, r, tc.status, "")
			if tc.status == 405 && r.header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
		})
	}
	nothingReached(t, f)
}

// instantBackend answers every call at once, with the tools it is given.
type instantBackend struct {
	answeringBackend
	tools *bridge.ToolList
}

func (b instantBackend) Tools(context.Context) (*bridge.ToolList, error) { return b.tools, nil }

func BenchmarkRESTToolCall(b *testing.B) {
	h := New(instantBackend{tools: toolList(allTools...)}, Options{})
	for _, bc := range []struct{ name, accept string }{{"json", ""}, {"stream", "text/event-stream"}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest("POST", "/v1/tools/echo", strings.NewReader(`{"text":"hello","opts":{"n":3}}`))
				req.Header.Set("Content-Type", "application/json")
				if bc.accept != "" {
					req.Header.Set("Accept", bc.accept)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
}

// The REST API passes the same front door as /mcp, and says so with
// problems.
func TestRESTFrontDoor(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.tools = toolList(allTools...)
	srv, _ := guarded(t, f, Options{})
	routes := []struct{ method, path, contentType, body string }{
		{"GET", "/v1/tools", "", ""},
		{"POST", "/v1/tools/echo", "application/json", `{"text":"a"}`},
		{"GET", "/v1/tools/echo", "", ""},
		{"GET", "/v1/resources", "", ""},
		{"GET", "/v1/resources/templates", "", ""},
		{"GET", "/v1/resources/read?uri=demo://a", "", ""},
		{"GET", "/v1/prompts", "", ""},
		{"GET", "/v1/prompts/greet", "", ""},
		{"POST", "/v1/prompts/greet", "application/json", `{}`},
	}
	for _, rt := range routes {
		for _, cred := range []struct {
			name   string
			header []string
			status int
			kind   string
		}{
			{"no token", nil, 401, kindUnauthorized},
			{"wrong token", bearer("not-a-token-0123456789"), 401, kindUnauthorized},
			{"no token in the header", []string{"Authorization", "Bearer "}, 400, kindBadRequest},
		} {
			t.Run(cred.name+" "+rt.method+" "+rt.path, func(t *testing.T) {
				r := restRefused(t, f, restReq(rt.method, srv+rt.path, rt.contentType, rt.body, cred.header...))
				wantProblem(t, r, cred.status, cred.kind)
				if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
				}
				nothingReached(t, f)
			})
		}
	}
	// Outside the caller's policy (ci: the tool echo, resources demo://a*,
	// no prompts); an unknown tool is outside it too, and says nothing of
	// which tools exist.
	for _, rt := range []struct{ method, path, contentType, body string }{
		{"POST", "/v1/tools/add", "application/json", `{}`},
		{"POST", "/v1/tools/nope", "", ""},
		{"GET", "/v1/tools/look", "", ""},
		{"GET", "/v1/resources/read?uri=demo://b", "", ""},
		{"GET", "/v1/prompts/greet?who=a", "", ""},
		{"POST", "/v1/prompts/greet", "application/json", `{"who":"a"}`},
	} {
		t.Run("forbidden "+rt.method+" "+rt.path, func(t *testing.T) {
			r := restRefused(t, f, restReq(rt.method, srv+rt.path, rt.contentType, rt.body, bearer(ciToken)...))
			if p := wantProblem(t, r, 403, kindForbidden); p.Code != jsonrpc.CodeForbidden || p.Reason != "forbidden" {
				t.Errorf("code %d, reason %q", p.Code, p.Reason)
			}
			nothingReached(t, f)
		})
	}
	// Inside it: the child learns who calls.
	t.Run("allowed", func(t *testing.T) {
		answer := restStart(restReq("POST", srv+"/v1/tools/echo", "application/json", `{"text":"a"}`, bearer(ciToken)...))
		c := f.next(t)
		if want := callerOwner("token", "ci"); c.caller.Principal != want || !c.caller.Modern {
			t.Errorf("caller %+v, want principal %q", c.caller, want)
		}
		c.finish(rpcResult(`{"content":[]}`), nil)
		if r := await(t, answer); r.status != 200 {
			t.Errorf("status %d: %s", r.status, r.body)
		}
	})
	// Lists show a restricted caller only what it may use.
	t.Run("filtered resources", func(t *testing.T) {
		answer := restStart(restReq("GET", srv+"/v1/resources", "", "", bearer(ciToken)...))
		f.next(t).finish(rpcResult(`{"resources":[{"uri":"demo://b","name":"b"},{"uri":"demo://abc", "name":"a"}]}`), nil)
		if r := await(t, answer); string(r.body) != `{"resources":[{"uri":"demo://abc", "name":"a"}]}` {
			t.Errorf("status %d: %s", r.status, r.body)
		}
	})
}

func TestRESTLimits(t *testing.T) {
	t.Parallel()
	t.Run("rate", func(t *testing.T) {
		t.Parallel()
		f := newFake()
		f.tools = toolList(allTools...)
		srv, _ := guarded(t, f, Options{Limiter: clientlimit.New(clientlimit.Options{Rate: 0.001, Burst: 1})})
		if r := restDo(t, restReq("GET", srv+"/v1/tools", "", "", bearer(ciToken)...)); r.status != 200 {
			t.Fatalf("first: %d", r.status)
		}
		r := restRefused(t, f, restReq("POST", srv+"/v1/tools/echo", "application/json", `{"text":"a"}`, bearer(ciToken)...))
		if p := wantProblem(t, r, 429, kindRateLimited); p.Reason != "rate_limited" {
			t.Errorf("reason %q", p.Reason)
		}
		if n, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || n < 1 {
			t.Errorf("Retry-After %q", r.header.Get("Retry-After"))
		}
		nothingReached(t, f)
	})
	t.Run("open requests", func(t *testing.T) {
		t.Parallel()
		f := newFake()
		f.tools = toolList(allTools...)
		srv, _ := guarded(t, f, Options{Limiter: clientlimit.New(clientlimit.Options{MaxStreams: 1})})
		first := restStart(restReq("POST", srv+"/v1/tools/echo", "application/json", `{"text":"a"}`, bearer(ciToken)...))
		c := f.next(t)
		r := restDo(t, restReq("GET", srv+"/v1/tools", "", "", bearer(ciToken)...))
		if p := wantProblem(t, r, 429, kindRateLimited); p.Reason != "too_many_streams" {
			t.Errorf("reason %q", p.Reason)
		}
		c.finish(rpcResult(`{"content":[]}`), nil)
		if r := await(t, first); r.status != 200 {
			t.Errorf("first: %d", r.status)
		}
	})
}
