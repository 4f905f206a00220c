package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
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
		{name: "mcp batch", method: "POST", path: "/mcp", header: []string{"Accept", "application/json"}, body: `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`, status: 200},
		{name: "mcp batch on a stream", method: "POST", path: "/mcp", header: []string{"Accept", "application/json, text/event-stream"}, body: `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":` + slow + `,"_meta":{"progressToken":"p"}}},{"jsonrpc":"2.0","id":2,"method":"ping"}]`, status: 200},
		{name: "mcp batch of notifications", method: "POST", path: "/mcp", body: `[{"jsonrpc":"2.0","method":"notifications/initialized"}]`, status: 202},
		{name: "mcp batch in a later revision", method: "POST", path: "/mcp", header: []string{"MCP-Protocol-Version", "2025-06-18"}, body: `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, status: 400},
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
