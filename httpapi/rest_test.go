package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/bridge"
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
		{"unknown tool, a member twice", "POST", "/v1/tools/nope", "application/json", `{"a":1,"a":2}`, 404, kindUnknownTool},
		{"unknown tool, not an object", "POST", "/v1/tools/nope", "application/json", `[1]`, 400, kindBadRequest},
		{"duplicate member", "POST", "/v1/tools/echo", "application/json", `{"text":"a","text":5}`, 400, kindBadRequest},
		{"duplicate through an escape", "POST", "/v1/tools/echo", "application/json", `{"text":"a","t\u0065xt":5}`, 400, kindBadRequest},
		{"nested duplicate", "POST", "/v1/tools/echo", "application/json", `{"text":"a","opts":{"n":1,"\u006e":2}}`, 400, kindBadRequest},
		{"duplicate in an array", "POST", "/v1/tools/add", "application/json", `{"l":[1,{"k":1,"k":2}]}`, 400, kindBadRequest},
		{"a declared name by letter case", "POST", "/v1/tools/echo", "application/json", `{"text":"a","TEXT":5}`, 400, kindBadRequest},
		{"a declared name by Unicode case folding", "POST", "/v1/tools/echo", "application/json", `{"text":"a","optſ":{}}`, 400, kindBadRequest},
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
		{"content type twice", "POST", "/v1/tools/add", "application/json|application/json", `{}`, 400, kindBadRequest},
		{"too large", "POST", "/v1/tools/add", "application/json", `{"x":"` + strings.Repeat("a", 2000) + `"}`, 413, kindTooLarge},
		{"unknown query parameter", "POST", "/v1/tools/add?dry=1", "", "", 400, kindBadRequest},
		{"arguments in the query of a POST", "POST", "/v1/tools/add?arguments=%7B%7D", "", "", 400, kindBadRequest},
		{"timeout 0", "POST", "/v1/tools/add?timeout=0", "", "", 400, kindBadRequest},
		{"negative timeout", "POST", "/v1/tools/add?timeout=-1s", "", "", 400, kindBadRequest},
		{"timeout not a duration", "POST", "/v1/tools/add?timeout=abc", "", "", 400, kindBadRequest},
		{"timeout without a unit", "POST", "/v1/tools/add?timeout=5", "", "", 400, kindBadRequest},
		{"timeout over the longest", "POST", "/v1/tools/add?timeout=61m", "", "", 400, kindBadRequest},
		{"timeout twice", "POST", "/v1/tools/add?timeout=1s&timeout=2s", "", "", 400, kindBadRequest},
		{"timeout empty", "POST", "/v1/tools/add?timeout=", "", "", 400, kindBadRequest},
		{"GET of a tool that is not read-only", "GET", "/v1/tools/add", "", "", 405, kindNotReadOnly},
		{"GET of a tool with no annotations", "GET", "/v1/tools/a%2Fb", "", "", 405, kindNotReadOnly},
		{"GET of a tool whose hint is a string", "GET", "/v1/tools/quoted", "", "", 405, kindNotReadOnly},
		{"GET, arguments an array", "GET", "/v1/tools/look?arguments=" + url.QueryEscape(`[1]`), "", "", 400, kindBadRequest},
		{"GET, arguments malformed", "GET", "/v1/tools/look?arguments=" + url.QueryEscape(`{"q":`), "", "", 400, kindBadRequest},
		{"GET, arguments with a duplicate", "GET", "/v1/tools/look?arguments=" + url.QueryEscape(`{"q":"a","q":"b"}`), "", "", 400, kindBadRequest},
		{"GET, arguments twice", "GET", "/v1/tools/look?arguments=%7B%7D&arguments=%7B%7D", "", "", 400, kindBadRequest},
		{"GET, unknown query parameter", "GET", "/v1/tools/look?q=x", "", "", 400, kindBadRequest},
		{"PUT", "PUT", "/v1/tools/add", "application/json", `{}`, 405, ""},
		// JSON would carry these as U+FFFD: another name than the one sent.
		{"a tool name that is not UTF-8", "POST", "/v1/tools/%FF", "", "", 400, kindBadRequest},
		{"a query value that is not UTF-8", "POST", "/v1/tools/add?timeout=%FF", "", "", 400, kindBadRequest},
		{"a resource URI that is not UTF-8", "GET", "/v1/resources/read?uri=%FF", "", "", 400, kindBadRequest},
		{"a prompt name that is not UTF-8", "GET", "/v1/prompts/%FF", "", "", 400, kindBadRequest},
		{"a prompt argument that is not UTF-8", "GET", "/v1/prompts/greet?name=%FF", "", "", 400, kindBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct, more, twice := strings.Cut(tc.contentType, "|")
			var header []string
			if twice {
				header = []string{"Content-Type", more}
			}
			r := restRefused(t, f, restReq(tc.method, srv+tc.path, ct, tc.body, header...))
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
		{name: "a result that is not an object", resp: rpcResult(`[1,2]`), status: 502, kind: kindBadAnswer},
		{name: "gateway timeout", err: jsonrpc.GatewayError(jsonrpc.CodeTimeout, "timeout", "too slow"), status: 504, kind: kindTimeout},
		{name: "child went away", err: jsonrpc.GatewayError(jsonrpc.CodeUnavailable, "child_unavailable", "crashed"), status: 503, kind: kindUnavailable, check: func(t *testing.T, p problemDoc) {
			if p.Code != jsonrpc.CodeUnavailable || p.Reason != "child_unavailable" {
				t.Errorf("code %d, reason %q", p.Code, p.Reason)
			}
		}},
		{name: "overloaded", err: jsonrpc.GatewayError(jsonrpc.CodeOverloaded, "overloaded", "busy"), status: 503, kind: kindUnavailable},
		{name: "shutting down", err: jsonrpc.GatewayError(jsonrpc.CodeShutdown, "shutdown", "bye"), status: 503, kind: kindUnavailable},
		{name: "answer too large", err: jsonrpc.GatewayError(jsonrpc.CodeTooLarge, "too_large", "big"), status: 502, kind: kindAnswerTooLarge},
		{name: "answer not JSON-RPC", err: jsonrpc.GatewayError(jsonrpc.CodeBadAnswer, "bad_answer", "both"), status: 502, kind: kindBadAnswer},
		// The gateway refuses a 2025 child's question for the REST call:
		// its error comes as a child's refusal would, in error.
		{name: "a question the call cannot answer", err: mcp.MissingCapabilities([]string{"elicitation"}), status: 422, kind: kindInputRequired, check: func(t *testing.T, p problemDoc) {
			var e struct {
				Code int
				Data struct{ RequiredCapabilities map[string]any }
			}
			if json.Unmarshal(p.Error, &e) != nil || p.Code != mcp.CodeMissingCapability || e.Code != mcp.CodeMissingCapability || e.Data.RequiredCapabilities["elicitation"] == nil {
				t.Errorf("code %d, error %s; want -32021 and the error naming elicitation", p.Code, p.Error)
			}
		}},
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
			// Members not of the event's types are left out; without a
			// number for progress there is no event.
			c.note(note(`"progress":"abc"`))
			c.note(note(`"progress":null,"total":5`))
			c.note(note(`"progress":4,"total":null,"message":5`))
			c.note(note(`"progress":-1e2,"total":"x","message":"m"`))
			c.finish(rpcResult(result), nil)
			got := sseEvents(t, await(t, answer))
			want := []sseEvent{
				{"progress", `{"progress":1,"total":10,"message":"st\u00e9p <1>"}`},
				{"progress", `{"progress":2.5}`},
				{"progress", `{"progress":3,"total":4}`},
				{"progress", `{"progress":4}`},
				{"progress", `{"progress":-1e2,"message":"m"}`},
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

// Every REST answer, a result or a problem, tells a browser to read it as
// its Content-Type says and never inside another site's frame: a GET route
// may be opened as a page, and the child's text is in it.
func TestRESTAnswersAreNotSniffedOrFramed(t *testing.T) {
	t.Parallel()
	f, srv := restServer(t, Options{}, echoTool)
	list := await(t, restStart(restReq("GET", srv+"/v1/tools", "", "")))
	refused := restRefused(t, f, restReq("POST", srv+"/v1/tools/echo", "application/json", `{"text":5}`))
	missing := await(t, restStart(restReq("GET", srv+"/v1/nothing", "", "")))
	for name, r := range map[string]reply{"a list": list, "a problem": refused, "an unknown route": missing} {
		if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s (%d): X-Content-Type-Options %q, want nosniff", name, r.status, got)
		}
		if got := r.header.Get("Content-Security-Policy"); got != "frame-ancestors 'none'" {
			t.Errorf("%s (%d): Content-Security-Policy %q, want frame-ancestors 'none'", name, r.status, got)
		}
	}
}
