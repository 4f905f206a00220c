package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// The gateway binary, with the demo child, answers as openapi.yaml says:
// every route, its successes and the errors a client can provoke, each
// request checked against the document too, and each event of a stream
// against the schema the document names for it.
func TestOpenAPILive(t *testing.T) {
	t.Parallel()
	spec := loadLiveSpec(t)

	t.Run("demo", func(t *testing.T) {
		t.Parallel()
		g := startGateway(t, []string{"GATEWAY_MAX_BODY_BYTES=4096", "GATEWAY_MAX_MESSAGE_BYTES=262144"})
		g.WaitReady()
		writeTool := spec.notReadOnlyTool(t, g.URL)
		for _, ex := range demoExchanges(writeTool) {
			spec.exchange(t, g.URL, ex)
		}
		spec.pageAssets(t, g.URL)
	})
	t.Run("guarded", func(t *testing.T) {
		t.Parallel()
		policy := filepath.Join(t.TempDir(), "policy.json")
		if err := os.WriteFile(policy, []byte(`{"tokens":{"ci":{"tools":["echo"]},"rl":{"tools":["*"]}}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		g := startGateway(t, []string{"GATEWAY_AUTH_TOKENS=ci:tok-ci-0123456789abcdef,rl:tok-rl-0123456789abcdef",
			"GATEWAY_AUTH_POLICY_FILE=" + policy, "GATEWAY_RATE_LIMIT=0.001", "GATEWAY_RATE_BURST=2"})
		g.WaitReady()
		ci := []string{"Authorization", "Bearer tok-ci-0123456789abcdef"}
		rl := []string{"Authorization", "Bearer tok-rl-0123456789abcdef"}
		echo := `{"text":"hi"}`
		// In this order: each token's bucket holds two calls and never
		// refills during the test.
		for _, ex := range []liveExchange{
			{name: "no credentials", method: "GET", path: "/v1/tools", status: 401, kind: "unauthorized"},
			{name: "the page needs none", method: "GET", path: "/", status: 200},
			{name: "nor the contract", method: "GET", path: "/openapi.yaml", status: 200},
			{name: "tools of a restricted caller", method: "GET", path: "/v1/tools", header: ci, status: 200, check: onlyTools("echo")},
			{name: "outside the policy", method: "POST", path: "/v1/tools/slow", header: ci, body: `{}`, status: 403, kind: "forbidden"},
			{name: "first call", method: "POST", path: "/v1/tools/echo", header: rl, body: echo, status: 200},
			{name: "second call", method: "POST", path: "/v1/tools/echo", header: rl, body: echo, status: 200},
			{name: "over the rate", method: "POST", path: "/v1/tools/echo", header: rl, body: echo, status: 429, kind: "rate-limited"},
		} {
			spec.exchange(t, g.URL, ex)
		}
	})
	// A REST caller declares no client capabilities, so a 2026-07-28 child
	// refuses a tool that would ask it questions (-32021) rather than ask:
	// input the REST API cannot give.
	t.Run("modern", func(t *testing.T) {
		t.Parallel()
		g := startGateway(t, nil, "--", gatewayBin, "demo", "-era", "modern")
		g.WaitReady()
		for _, ex := range []liveExchange{
			{name: "tool needing input", method: "POST", path: "/v1/tools/test_input_required_result_elicitation", status: 422, kind: "input-required", check: childCode(-32021)},
			{name: "tool needing input, stream", method: "POST", path: "/v1/tools/test_input_required_result_elicitation", header: acceptSSE, status: 200, last: "error", kind: "input-required", eventStatus: 422},
			{name: "prompt needing input", method: "GET", path: "/v1/prompts/test_input_required_result_prompt", status: 422, kind: "input-required", check: childCode(-32021)},
			{name: "call", method: "POST", path: "/v1/tools/echo", body: `{"text":"hi"}`, status: 200, check: firstText("hi")},
			{name: "unknown resource", method: "GET", path: "/v1/resources/read?uri=" + url.QueryEscape("test://nope"), status: 404, kind: "not-found"},
		} {
			spec.exchange(t, g.URL, ex)
		}
	})
	t.Run("crashing child", func(t *testing.T) {
		t.Parallel()
		g := startGateway(t, nil, "--", gatewayBin, "demo", "-fault", "crash-on-call")
		g.WaitReady()
		spec.exchange(t, g.URL, liveExchange{name: "child exits during the call", method: "POST", path: "/v1/tools/echo", body: `{"text":"hi"}`, status: 503, kind: "unavailable"})
	})
}

var acceptSSE = []string{"Accept", "text/event-stream"}

// demoExchanges are the requests made of a gateway with the demo child
// (GATEWAY_MAX_BODY_BYTES=4096, GATEWAY_MAX_MESSAGE_BYTES=262144);
// writeTool is a tool that is not read-only.
func demoExchanges(writeTool string) []liveExchange {
	args := func(s string) string { return "arguments=" + url.QueryEscape(s) }
	slow := `{"duration_ms":300,"interval_ms":100}`
	slowForever := `{"duration_ms":60000,"interval_ms":50}`
	return []liveExchange{
		// The REST API's tools.
		{name: "tools", method: "GET", path: "/v1/tools", status: 200, check: hasTool("echo")},
		{name: "tools, unknown parameter", method: "GET", path: "/v1/tools?cursor=x", status: 400, kind: "bad-request"},
		{name: "call", method: "POST", path: "/v1/tools/echo", body: `{"text":"hi"}`, status: 200, check: firstText("hi")},
		{name: "call, empty body", method: "POST", path: "/v1/tools/test_simple_text", status: 200, check: firstText("This is a simple text response for testing.")},
		{name: "call, GET form", method: "GET", path: "/v1/tools/echo?" + args(`{"text":"hi"}`), status: 200, check: firstText("hi")},
		{name: "call, GET form, stream", method: "GET", path: "/v1/tools/slow?" + args(slow), header: acceptSSE, status: 200, last: "result", progress: true},
		{name: "call, stream", method: "POST", path: "/v1/tools/slow", body: slow, header: acceptSSE, status: 200, last: "result", progress: true},
		{name: "tool error", method: "POST", path: "/v1/tools/test_error_handling", status: 422, kind: "tool-error"},
		{name: "tool error, stream", method: "POST", path: "/v1/tools/test_error_handling", header: acceptSSE, status: 200, last: "error", kind: "tool-error", eventStatus: 422},
		{name: "timeout", method: "POST", path: "/v1/tools/slow?timeout=200ms", body: slowForever, status: 504, kind: "timeout"},
		{name: "timeout, stream", method: "POST", path: "/v1/tools/slow?timeout=200ms", body: slowForever, header: acceptSSE, status: 200, last: "error", kind: "timeout", eventStatus: 504},
		{name: "unknown tool", method: "POST", path: "/v1/tools/nope", body: `{}`, status: 404, kind: "unknown-tool"},
		{name: "unknown tool, stream asked", method: "POST", path: "/v1/tools/nope", header: acceptSSE, status: 404, kind: "unknown-tool"},
		{name: "invalid arguments", method: "POST", path: "/v1/tools/echo", body: `{"text":5}`, status: 400, kind: "invalid-arguments", check: argumentErrorAt("/text")},
		{name: "body not an object", method: "POST", path: "/v1/tools/echo", body: `[1]`, status: 400, kind: "bad-request", invalid: true},
		{name: "body not JSON", method: "POST", path: "/v1/tools/echo", body: `{`, status: 400, kind: "bad-request", invalid: true},
		{name: "timeout not a duration", method: "POST", path: "/v1/tools/echo?timeout=soon", body: `{"text":"hi"}`, status: 400, kind: "bad-request", invalid: true},
		{name: "timeout zero", method: "POST", path: "/v1/tools/echo?timeout=0s", body: `{"text":"hi"}`, status: 400, kind: "bad-request"},
		{name: "timeout over the server's", method: "POST", path: "/v1/tools/echo?timeout=31m", body: `{"text":"hi"}`, status: 400, kind: "bad-request"},
		{name: "arguments not an object", method: "GET", path: "/v1/tools/echo?" + args(`[1]`), status: 400, kind: "bad-request", invalid: true},
		{name: "body not declared JSON", method: "POST", path: "/v1/tools/echo", header: []string{"Content-Type", "text/plain"}, body: `{"text":"hi"}`, status: 415, kind: "unsupported-media-type", invalid: true},
		{name: "body too large", method: "POST", path: "/v1/tools/echo", body: `{"text":"` + strings.Repeat("x", 5000) + `"}`, status: 413, kind: "too-large"},
		{name: "GET form of a tool not read-only", method: "GET", path: "/v1/tools/" + url.PathEscape(writeTool), status: 405, kind: "not-read-only"},
		{name: "answer too large", method: "POST", path: "/v1/tools/big", body: `{"bytes":300000}`, status: 502, kind: "answer-too-large"},
		{name: "child error", method: "POST", path: "/v1/tools/big", body: `{"bytes":-1}`, status: 400, kind: "child-error", check: childCode(-32602)},
		{name: "origin not allowed", method: "GET", path: "/v1/tools", header: []string{"Origin", "http://evil.example"}, status: 403, kind: "forbidden"},
		{name: "no such route", method: "GET", path: "/v1/nope", status: 404, kind: "not-found", undocumented: true},

		// Resources and prompts.
		{name: "resources", method: "GET", path: "/v1/resources", status: 200},
		{name: "resource templates", method: "GET", path: "/v1/resources/templates", status: 200},
		{name: "resource", method: "GET", path: "/v1/resources/read?uri=" + url.QueryEscape("test://static-text"), status: 200},
		{name: "binary resource", method: "GET", path: "/v1/resources/read?uri=" + url.QueryEscape("test://static-binary"), status: 200},
		{name: "unknown resource", method: "GET", path: "/v1/resources/read?uri=" + url.QueryEscape("test://nope"), status: 404, kind: "not-found"},
		{name: "resource without uri", method: "GET", path: "/v1/resources/read", status: 400, kind: "bad-request", invalid: true},
		{name: "prompts", method: "GET", path: "/v1/prompts", status: 200},
		{name: "prompt, GET", method: "GET", path: "/v1/prompts/test_prompt_with_arguments?arg1=a&arg2=b", status: 200, check: promptSays("arg1='a', arg2='b'")},
		{name: "prompt, POST", method: "POST", path: "/v1/prompts/test_prompt_with_arguments", body: `{"arg1":"a","arg2":"b"}`, status: 200, check: promptSays("arg1='a', arg2='b'")},
		{name: "prompt, argument not a string", method: "POST", path: "/v1/prompts/test_prompt_with_arguments", body: `{"arg1":1,"arg2":"b"}`, status: 400, kind: "bad-request", invalid: true},
		{name: "prompt, argument missing", method: "GET", path: "/v1/prompts/test_prompt_with_arguments?arg1=a", status: 400, kind: "child-error"},
		{name: "unknown prompt", method: "GET", path: "/v1/prompts/nope", status: 404, kind: "not-found"},

		// The contracts and the page.
		{name: "tools' OpenAPI", method: "GET", path: "/v1/openapi.json", status: 200, check: validOpenAPI},
		{name: "openapi.yaml", method: "GET", path: "/openapi.yaml", status: 200, check: sameAsFile("../../openapi.yaml")},
		{name: "page", method: "GET", path: "/", status: 200},

		// MCP, health, readiness, metrics.
		{name: "mcp call", method: "POST", path: "/mcp", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, status: 200},
		{name: "mcp call with progress", method: "POST", path: "/mcp", header: []string{"Accept", "application/json, text/event-stream"}, body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":` + slow + `,"_meta":{"progressToken":"p"}}}`, status: 200},
		{name: "mcp notification", method: "POST", path: "/mcp", body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}`, status: 202},
		{name: "mcp parse error", method: "POST", path: "/mcp", body: `{`, status: 400, invalid: true},
		{name: "mcp GET", method: "GET", path: "/mcp", status: 405},
		{name: "mcp DELETE without a session", method: "DELETE", path: "/mcp", status: 405},
		{name: "healthz", method: "GET", path: "/healthz", status: 200},
		{name: "readyz", method: "GET", path: "/readyz", status: 200},
		{name: "readyz, waiting", method: "GET", path: "/readyz?wait=1s&until=all-ready", status: 200},
		{name: "readyz, bad wait", method: "GET", path: "/readyz?wait=forever", status: 400},
		{name: "metrics", method: "GET", path: "/metrics", status: 200},
	}
}

// liveExchange is one request and what its answer must be.
type liveExchange struct {
	name, method, path string
	header             []string // name, value, ...
	body               string   // sent as application/json unless header says otherwise
	status             int
	kind               string // the problem's kind (of the answer, or of a stream's error event)
	last               string // a stream's last event: result or error
	progress           bool   // a stream has progress events before its last
	eventStatus        int    // the status in a stream's error event
	invalid            bool   // the request breaks openapi.yaml: the document refuses it too
	undocumented       bool   // not a route of openapi.yaml (a problem all the same)
	check              func(t *testing.T, body []byte)
}

// liveSpec is openapi.yaml, valid, with a router over its operations.
type liveSpec struct {
	doc    *openapi3.T
	router routers.Router
}

var registerDecoders sync.Once

func loadLiveSpec(t *testing.T) *liveSpec {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile("../../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not valid: %v", err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	// kin-openapi decodes none of these; their schemas are strings.
	registerDecoders.Do(func() {
		for _, ct := range []string{"text/event-stream", "text/html", "text/css", "text/javascript"} {
			openapi3filter.RegisterBodyDecoder(ct, openapi3filter.FileBodyDecoder)
		}
	})
	return &liveSpec{doc: doc, router: router}
}

// exchange sends ex's request to the gateway at base, and checks the
// request and the answer against the document and ex.
func (s *liveSpec) exchange(t *testing.T, base string, ex liveExchange) {
	t.Run(ex.name, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		newRequest := func() *http.Request {
			req, err := http.NewRequestWithContext(ctx, ex.method, base+ex.path, strings.NewReader(ex.body))
			if err != nil {
				t.Fatal(err)
			}
			if ex.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			for i := 0; i+1 < len(ex.header); i += 2 {
				req.Header.Set(ex.header[i], ex.header[i+1])
			}
			return req
		}
		checked := newRequest()
		route, params, err := s.router.FindRoute(checked)
		if (err == nil) == ex.undocumented {
			t.Fatalf("%s %s: route found in openapi.yaml = %v, want %v (%v)", ex.method, ex.path, err == nil, !ex.undocumented, err)
		}
		var in *openapi3filter.RequestValidationInput
		if route != nil {
			in = &openapi3filter.RequestValidationInput{Request: checked, PathParams: params, Route: route,
				Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
			err := openapi3filter.ValidateRequest(ctx, in)
			if ex.invalid && err == nil {
				t.Errorf("openapi.yaml allows a request the test means to break it")
			} else if !ex.invalid && err != nil {
				t.Errorf("the request does not match openapi.yaml: %v", err)
			}
		}
		resp, err := http.DefaultClient.Do(newRequest())
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != ex.status {
			t.Fatalf("status %d, want %d; body %.2000s", resp.StatusCode, ex.status, body)
		}
		if in != nil {
			in.Request = newRequest()
			err := openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
				RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
				Body: io.NopCloser(bytes.NewReader(body)), Options: &openapi3filter.Options{IncludeResponseStatus: true},
			})
			if err != nil {
				t.Errorf("the answer does not match openapi.yaml: %v\nbody: %.2000s", err, body)
			}
		}
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		switch {
		case resp.StatusCode >= 400 && strings.HasPrefix(ex.path, "/v1/"):
			if mt != "application/problem+json" {
				t.Fatalf("Content-Type %q, want application/problem+json", mt)
			}
			s.problem(t, body, ex.kind, resp.StatusCode)
		case ex.last != "":
			if mt != "text/event-stream" {
				t.Fatalf("Content-Type %q, want text/event-stream", mt)
			}
			s.stream(t, route, body, ex)
		}
		if ex.check != nil {
			ex.check(t, body)
		}
	})
}

// problem checks a problem against the Problem schema, its kind and its
// status.
func (s *liveSpec) problem(t *testing.T, body []byte, kind string, status int) {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("a problem that is not JSON: %v: %s", err, body)
	}
	if err := s.doc.Components.Schemas["Problem"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		t.Errorf("not a Problem: %v\n%s", err, body)
	}
	var p struct {
		Type   string
		Status int
	}
	_ = json.Unmarshal(body, &p)
	if p.Type != "urn:stdiomcp:problem:"+kind || p.Status != status {
		t.Errorf("problem of type %q and status %d, want kind %s and %d: %s", p.Type, p.Status, kind, status, body)
	}
}

// stream checks an SSE answer: every event is one that openapi.yaml names
// (x-sse-events) with data matching its schema; progress events, then
// one last event, then the end.
func (s *liveSpec) stream(t *testing.T, route *routers.Route, body []byte, ex liveExchange) {
	t.Helper()
	schemas := map[string]*openapi3.Schema{}
	named, _ := route.Operation.Responses.Status(200).Value.Content.Get("text/event-stream").Extensions["x-sse-events"].(map[string]any)
	for event, ref := range named {
		r, _ := ref.(map[string]any)["$ref"].(string)
		sr := s.doc.Components.Schemas[strings.TrimPrefix(r, "#/components/schemas/")]
		if sr == nil {
			t.Fatalf("x-sse-events names %q for %s, not a schema of openapi.yaml", r, event)
		}
		schemas[event] = sr.Value
	}
	if len(schemas) == 0 {
		t.Fatal("openapi.yaml names no events (x-sse-events) for this stream")
	}
	events, err := readEvents(bytes.NewReader(body))
	if err != nil || len(events) == 0 {
		t.Fatalf("events %v, err %v; body %s", events, err, body)
	}
	progress := 0
	for i, ev := range events {
		schema := schemas[ev.name]
		if schema == nil {
			t.Errorf("event %d is a %q event, which openapi.yaml does not name", i, ev.name)
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
			t.Errorf("event %d (%s): data is not JSON: %v", i, ev.name, err)
		} else if err := schema.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("event %d (%s) does not match its schema: %v\ndata: %s", i, ev.name, err, ev.data)
		}
		switch {
		case i == len(events)-1:
			if ev.name != ex.last {
				t.Errorf("last event %q, want %q", ev.name, ex.last)
			}
		case ev.name == "progress":
			progress++
		default:
			t.Errorf("event %d is %q before the end; only progress comes before the last", i, ev.name)
		}
	}
	if ex.progress && progress == 0 {
		t.Errorf("no progress event before the %s", ex.last)
	}
	if last := events[len(events)-1]; last.name == "error" {
		s.problem(t, []byte(last.data), ex.kind, ex.eventStatus)
	}
}

// streamEvent is one event of a stream: its name ("message" when it has
// none) and its data lines, joined.
type streamEvent struct{ name, data string }

// readEvents reads a whole SSE stream as the WHATWG parser does: comments
// skipped, an event dispatched at a blank line when it has data.
func readEvents(r io.Reader) ([]streamEvent, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 64<<20)
	var events []streamEvent
	var name string
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data != nil {
				if name == "" {
					name = "message"
				}
				events = append(events, streamEvent{name: name, data: strings.Join(data, "\n")})
			}
			name, data = "", nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name = value
		case "data":
			data = append(data, value)
		}
	}
	return events, sc.Err()
}

// notReadOnlyTool is a tool the gateway lists without readOnlyHint: its GET
// form is refused.
func (s *liveSpec) notReadOnlyTool(t *testing.T, base string) string {
	t.Helper()
	var list struct {
		Tools []struct {
			Name        string
			Annotations struct{ ReadOnlyHint bool }
		}
	}
	getJSON(t, base+"/v1/tools", &list)
	for _, tool := range list.Tools {
		if !tool.Annotations.ReadOnlyHint {
			return tool.Name
		}
	}
	t.Fatal("every tool of the demo is read-only")
	return ""
}

// pageAssets fetches every /ui/ file the page refers to, and one that
// does not exist, checking each answer against openapi.yaml.
func (s *liveSpec) pageAssets(t *testing.T, base string) {
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	assets := regexp.MustCompile(`(?:src|href)="/?(ui/[^"?#]+)"`).FindAllSubmatch(page, -1)
	if len(assets) == 0 {
		t.Errorf("the page refers to no /ui/ file:\n%s", page)
	}
	for _, a := range assets {
		s.exchange(t, base, liveExchange{name: string(a[1]), method: "GET", path: "/" + string(a[1]), status: 200})
	}
	s.exchange(t, base, liveExchange{name: "no such asset", method: "GET", path: "/ui/no-such-file.js", status: 404})
}

func getJSON(t *testing.T, url string, into any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v: %s", url, resp.StatusCode, err, b)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, b)
	}
}

func hasTool(name string) func(*testing.T, []byte) {
	return func(t *testing.T, body []byte) {
		if !bytes.Contains(body, []byte(`"name":"`+name+`"`)) {
			t.Errorf("no tool %s in %.2000s", name, body)
		}
	}
}

func onlyTools(names ...string) func(*testing.T, []byte) {
	return func(t *testing.T, body []byte) {
		var list struct{ Tools []struct{ Name string } }
		_ = json.Unmarshal(body, &list)
		var got []string
		for _, tool := range list.Tools {
			got = append(got, tool.Name)
		}
		if fmt.Sprint(got) != fmt.Sprint(names) {
			t.Errorf("tools %v, want %v", got, names)
		}
	}
}

func firstText(want string) func(*testing.T, []byte) {
	return func(t *testing.T, body []byte) {
		var r struct{ Content []struct{ Text string } }
		_ = json.Unmarshal(body, &r)
		if len(r.Content) == 0 || r.Content[0].Text != want {
			t.Errorf("result %s, want the text %q", body, want)
		}
	}
}

func promptSays(want string) func(*testing.T, []byte) {
	return func(t *testing.T, body []byte) {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("prompt %s does not say %q", body, want)
		}
	}
}

func argumentErrorAt(path string) func(*testing.T, []byte) {
	return func(t *testing.T, body []byte) {
		var p struct{ Errors []struct{ Path string } }
		_ = json.Unmarshal(body, &p)
		if len(p.Errors) == 0 || p.Errors[0].Path != path {
			t.Errorf("errors %s, want one at %s", body, path)
		}
	}
}

// childCode checks the child's JSON-RPC error a problem holds.
func childCode(code int) func(*testing.T, []byte) {
	return func(t *testing.T, body []byte) {
		var p struct {
			Code  int
			Error struct{ Code int }
		}
		_ = json.Unmarshal(body, &p)
		if p.Code != code || p.Error.Code != code {
			t.Errorf("problem %s, want the child's error %d", body, code)
		}
	}
}

func sameAsFile(path string) func(*testing.T, []byte) {
	return func(t *testing.T, body []byte) {
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(body, want) {
			t.Errorf("served %d bytes that are not %s (%d bytes)", len(body), path, len(want))
		}
	}
}

// validOpenAPI checks that a document is OpenAPI 3.1 that kin-openapi
// loads and finds valid.
func validOpenAPI(t *testing.T, body []byte) {
	doc, err := openapi3.NewLoader().LoadFromData(body)
	if err != nil {
		t.Fatalf("the tools' document does not load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Errorf("the tools' document is not valid: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() || doc.Paths.Find("/v1/tools/echo") == nil {
		t.Errorf("openapi %q, POST /v1/tools/echo %v; want 3.1 with the echo tool", doc.OpenAPI, doc.Paths.Find("/v1/tools/echo"))
	}
}
