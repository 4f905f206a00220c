package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/go-chi/chi/v5"

	gateway "github.com/stdiomcp/gateway"
	"github.com/stdiomcp/gateway/auth"
	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/clientlimit"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/metrics"
)

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not valid: %v", err)
	}
	return doc
}

// Every route the router serves is in openapi.yaml, and every operation in
// openapi.yaml is served (GET and DELETE /mcp by a 405; /metrics when it is
// not on an admin address; /openapi.yaml when it is handed the document).
func TestOpenAPIListsEveryRoute(t *testing.T) {
	doc := loadSpec(t)
	var served []string
	err := chi.Walk(New(newFake(), Options{Metrics: metrics.New(1).Handler(), Auth: oauthOnly(t), OpenAPI: gateway.OpenAPI()}).(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		served = append(served, method+" "+route)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Responses.Len() == 1 && op.Responses.Status(405) != nil {
				continue // a refusal, checked below
			}
			documented = append(documented, method+" "+path)
		}
	}
	sort.Strings(served)
	sort.Strings(documented)
	if strings.Join(served, "\n") != strings.Join(documented, "\n") {
		t.Errorf("routes served:\n%s\nroutes in openapi.yaml:\n%s", strings.Join(served, "\n"), strings.Join(documented, "\n"))
	}
}

// oauthOnly is an authenticator for OAuth tokens of an issuer that is
// never asked (nothing here needs its keys) and a static token, "tok".
func oauthOnly(t *testing.T) *auth.Authenticator {
	t.Helper()
	a, err := auth.New(auth.Options{Tokens: []string{"ci:tok-0123456789abcdef"}, OAuth: &auth.OAuth{Issuer: "https://issuer.example", Resource: "https://mcp.example.com/mcp"}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Real responses of the handlers match what openapi.yaml says of them.
func TestResponsesMatchOpenAPI(t *testing.T) {
	doc := loadSpec(t)
	// kin-openapi has no decoder for SSE; the body is checked as a string.
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.FileBodyDecoder)
	t.Cleanup(func() { openapi3filter.UnregisterBodyDecoder("text/event-stream") })
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	type exchange struct {
		name, method, path, contentType, body string
		ready                                 bool
		callErr                               error
		answer                                func(*fakeCall)
		status                                int
		guarded                               bool // with authentication (token "tok-0123456789abcdef") and a limit of one call
		header                                []string
	}
	ok := func(c *fakeCall) { c.finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`), nil) }
	answer := func(result string) func(*fakeCall) {
		return func(c *fakeCall) { c.finish([]byte(`{"jsonrpc":"2.0","id":1,"result":`+result+`}`), nil) }
	}
	progress := func(c *fakeCall) {
		c.note(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1,"total":2,"message":"half"}}`)
		<-c.taken
		answer(`{"content":[{"type":"text","text":"done"}]}`)(c)
	}
	sse := []string{"Accept", "text/event-stream"}
	exchanges := []exchange{
		{name: "json answer", method: "POST", path: "/mcp", contentType: "application/json", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, ready: true, answer: ok, status: 200},
		{name: "sse answer", method: "POST", path: "/mcp", contentType: "application/json", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":1}}}`, ready: true, answer: ok, status: 200},
		{name: "notification", method: "POST", path: "/mcp", contentType: "application/json", body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, ready: true, status: 202},
		{name: "parse error", method: "POST", path: "/mcp", contentType: "application/json", body: `{`, ready: true, status: 400},
		{name: "wrong type", method: "POST", path: "/mcp", contentType: "text/plain", body: `{}`, ready: true, status: 415},
		{name: "too big", method: "POST", path: "/mcp", contentType: "application/json", body: `{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":"` + strings.Repeat("y", 4096) + `"}}`, ready: true, status: 413},
		{name: "unavailable", method: "POST", path: "/mcp", contentType: "application/json", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, callErr: jsonrpc.GatewayError(jsonrpc.CodeUnavailable, "child_unavailable", "down"), status: 503},
		{name: "timeout", method: "POST", path: "/mcp", contentType: "application/json", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, ready: true, answer: func(c *fakeCall) { c.finish(nil, jsonrpc.GatewayError(jsonrpc.CodeTimeout, "timeout", "slow")) }, status: 504},
		{name: "too large", method: "POST", path: "/mcp", contentType: "application/json", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, ready: true, answer: func(c *fakeCall) { c.finish(nil, jsonrpc.GatewayError(jsonrpc.CodeTooLarge, "too_large", "big")) }, status: 502},
		{name: "get", method: "GET", path: "/mcp", status: 405},
		{name: "delete", method: "DELETE", path: "/mcp", status: 405},
		{name: "healthz", method: "GET", path: "/healthz", status: 200},
		{name: "ready", method: "GET", path: "/readyz", ready: true, status: 200},
		{name: "not ready", method: "GET", path: "/readyz", status: 503},
		{name: "ready, waiting", method: "GET", path: "/readyz?wait=1s&until=all-ready", ready: true, status: 200},
		{name: "bad wait", method: "GET", path: "/readyz?wait=forever", status: 400},
		{name: "metrics", method: "GET", path: "/metrics", status: 200},
		{name: "no credentials", method: "POST", path: "/mcp", contentType: "application/json", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, ready: true, guarded: true, status: 401},
		{name: "metrics without credentials", method: "GET", path: "/metrics", guarded: true, status: 401},
		{name: "delete without credentials", method: "DELETE", path: "/mcp", guarded: true, header: []string{"Mcp-Session-Id", "s1.a.b"}, status: 401},
		{name: "outside the policy", method: "POST", path: "/mcp", contentType: "application/json", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rm"}}`, ready: true, guarded: true, header: []string{"Authorization", "Bearer tok-0123456789abcdef"}, status: 403},
		{name: "over the rate", method: "POST", path: "/mcp", contentType: "application/json", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rm"}}`, ready: true, guarded: true, header: []string{"Authorization", "Bearer tok-0123456789abcdef"}, status: 429},
		{name: "resource metadata", method: "GET", path: "/.well-known/oauth-protected-resource", guarded: true, status: 200},
		{name: "resource metadata, path form", method: "GET", path: "/.well-known/oauth-protected-resource/mcp", guarded: true, status: 200},
		{name: "resource metadata, preflight", method: "OPTIONS", path: "/.well-known/oauth-protected-resource/mcp", guarded: true, header: []string{"Origin", "https://app.example", "Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "mcp-protocol-version"}, status: 204},
		{name: "openapi.yaml", method: "GET", path: "/openapi.yaml", status: 200},
		{name: "rest tools", method: "GET", path: "/v1/tools", ready: true, status: 200},
		{name: "rest call", method: "POST", path: "/v1/tools/echo", contentType: "application/json", body: `{"text":"hi"}`, ready: true, answer: answer(`{"content":[{"type":"text","text":"hi"}]}`), status: 200},
		{name: "rest call, stream", method: "POST", path: "/v1/tools/echo", contentType: "application/json", body: `{"text":"hi"}`, ready: true, answer: progress, header: sse, status: 200},
		{name: "rest call, get form", method: "GET", path: "/v1/tools/echo?arguments=%7B%22text%22%3A%22hi%22%7D", ready: true, answer: answer(`{"content":[{"type":"text","text":"hi"}]}`), status: 200},
		{name: "rest call, not read-only", method: "GET", path: "/v1/tools/rm", ready: true, status: 405},
		{name: "rest call, unknown tool", method: "POST", path: "/v1/tools/nope", ready: true, status: 404},
		{name: "rest call, invalid arguments", method: "POST", path: "/v1/tools/echo", contentType: "application/json", body: `{"text":1}`, ready: true, status: 400},
		{name: "rest call, not json", method: "POST", path: "/v1/tools/echo", contentType: "text/plain", body: `{}`, ready: true, status: 415},
		{name: "rest call, too big", method: "POST", path: "/v1/tools/echo", contentType: "application/json", body: `{"text":"` + strings.Repeat("y", 4096) + `"}`, ready: true, status: 413},
		{name: "rest call, tool error", method: "POST", path: "/v1/tools/echo", contentType: "application/json", body: `{"text":"hi"}`, ready: true, answer: answer(`{"isError":true,"content":[{"type":"text","text":"no"}]}`), status: 422},
		{name: "rest call, input required", method: "POST", path: "/v1/tools/echo", contentType: "application/json", body: `{"text":"hi"}`, ready: true, answer: answer(`{"resultType":"input_required","inputRequests":{"q":{"method":"elicitation/create","params":{}}}}`), status: 422},
		{name: "rest call, child error", method: "POST", path: "/v1/tools/echo", contentType: "application/json", body: `{"text":"hi"}`, ready: true, answer: func(c *fakeCall) {
			c.finish([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"broken"}}`), nil)
		}, status: 502},
		{name: "rest call, timeout", method: "POST", path: "/v1/tools/echo?timeout=1ms", contentType: "application/json", body: `{"text":"hi"}`, ready: true, answer: func(c *fakeCall) { c.waitEnded(t) }, status: 504},
		{name: "rest call, unavailable", method: "POST", path: "/v1/tools/echo", contentType: "application/json", body: `{"text":"hi"}`, callErr: jsonrpc.GatewayError(jsonrpc.CodeUnavailable, "child_unavailable", "down"), status: 503},
		{name: "rest call without credentials", method: "POST", path: "/v1/tools/echo", contentType: "application/json", body: `{"text":"hi"}`, ready: true, guarded: true, status: 401},
		{name: "rest call outside the policy", method: "POST", path: "/v1/tools/rm", ready: true, guarded: true, header: []string{"Authorization", "Bearer tok-0123456789abcdef"}, status: 403},
		{name: "rest resources", method: "GET", path: "/v1/resources", ready: true, answer: answer(`{"resources":[{"uri":"test://a","name":"a"}]}`), status: 200},
		{name: "rest resource", method: "GET", path: "/v1/resources/read?uri=test://a", ready: true, answer: answer(`{"contents":[{"uri":"test://a","text":"A"}]}`), status: 200},
		{name: "rest resource, unknown", method: "GET", path: "/v1/resources/read?uri=test://b", ready: true, answer: func(c *fakeCall) {
			c.finish([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"no such resource"}}`), nil)
		}, status: 404},
		{name: "rest prompt", method: "GET", path: "/v1/prompts/p?a=1", ready: true, answer: answer(`{"messages":[{"role":"user","content":{"type":"text","text":"1"}}]}`), status: 200},
	}
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"tokens":{"ci":{"tools":["echo"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ex := range exchanges {
		t.Run(ex.name, func(t *testing.T) {
			f := newFake()
			f.ready, f.callErr = ex.ready, ex.callErr
			f.tools = fakeTools(
				`{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},"annotations":{"readOnlyHint":true}}`,
				`{"name":"rm","inputSchema":{"type":"object"}}`)
			m := metrics.New(1)
			opts := Options{MaxBodyBytes: 1024, Meter: m, Metrics: m.Handler(), OpenAPI: gateway.OpenAPI()}
			if ex.guarded {
				a, err := auth.New(auth.Options{Tokens: []string{"ci:tok-0123456789abcdef"}, PolicyFile: policy,
					OAuth: &auth.OAuth{Issuer: "https://issuer.example", Resource: "https://mcp.example.com/mcp"}})
				if err != nil {
					t.Fatal(err)
				}
				opts.Auth, opts.AuthMetrics = a, true
				// One call in a bucket that never refills: the 429 case
				// spends it first.
				lim := clientlimit.New(clientlimit.Options{Rate: 1e-9, Burst: 1})
				if ex.status == 429 {
					lim.Allow("token:ci")
				}
				opts.Limiter = lim
			}
			h := New(f, opts)
			if ex.answer != nil {
				go func() { ex.answer(f.next(t)) }()
			}
			req := httptest.NewRequest(ex.method, ex.path, strings.NewReader(ex.body))
			if ex.contentType != "" {
				req.Header.Set("Content-Type", ex.contentType)
			}
			for i := 0; i+1 < len(ex.header); i += 2 {
				req.Header.Set(ex.header[i], ex.header[i+1])
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != ex.status {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, ex.status, rec.Body)
			}
			route, params, err := router.FindRoute(httptest.NewRequest(ex.method, "http://localhost"+ex.path, nil))
			if err != nil {
				t.Fatalf("openapi.yaml has no %s %s: %v", ex.method, ex.path, err)
			}
			in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
				Options: &openapi3filter.Options{ExcludeRequestBody: true}}
			out := &openapi3filter.ResponseValidationInput{
				RequestValidationInput: in,
				Status:                 rec.Code,
				Header:                 rec.Header(),
				Body:                   io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
				Options:                &openapi3filter.Options{IncludeResponseStatus: true},
			}
			if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
				t.Errorf("response does not match openapi.yaml: %v\nbody: %s", err, rec.Body)
			}
		})
	}
}

// fakeTools is a tool list as the bridge hands it out.
func fakeTools(tools ...string) *bridge.ToolList {
	l := &bridge.ToolList{}
	for _, t := range tools {
		var named struct{ Name string }
		_ = json.Unmarshal([]byte(t), &named)
		l.Tools = append(l.Tools, json.RawMessage(t))
		l.Names = append(l.Names, named.Name)
	}
	l.Digest = sha256.Sum256([]byte(strings.Join(tools, "\n")))
	return l
}
