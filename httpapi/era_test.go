package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/internal/gatewaytest"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

func modernHeaders(method string, extra ...string) []string {
	return append([]string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", method}, extra...)
}

func b64(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }

// Modern requests are checked as 2026-07-28 says before anything reaches the
// child; every refusal keeps the request's id.
func TestModernValidation(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{})
	tests := map[string]struct {
		body    string
		headers []string
		status  int
		code    int
	}{
		"no _meta": {`{"jsonrpc":"2.0","id":9,"method":"server/discover","params":{}}`,
			modernHeaders("server/discover"), 400, -32602},
		"no protocolVersion in _meta": {`{"jsonrpc":"2.0","id":9,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}}`,
			modernHeaders("server/discover"), 400, -32602},
		"no clientCapabilities": {`{"jsonrpc":"2.0","id":9,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			modernHeaders("server/discover"), 400, -32602},
		"no version header": {`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{` + modernMeta + `}}`,
			[]string{"Mcp-Method", "tools/list"}, 400, -32020},
		"version header differs": {`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			modernHeaders("tools/list"), 400, -32020},
		"unsupported version": {`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			[]string{"MCP-Protocol-Version", "v999", "Mcp-Method", "tools/list"}, 400, -32022},
		"unsupported version in the header alone": {`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`,
			[]string{"MCP-Protocol-Version", "2030-01-01"}, 400, -32022},
		"a legacy version in the header, _meta without one": {`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":7}}}`,
			[]string{"MCP-Protocol-Version", "2025-06-18"}, 400, -32602},
		"no Mcp-Method": {`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{` + modernMeta + `}}`,
			[]string{"MCP-Protocol-Version", "2026-07-28"}, 400, -32020},
		"Mcp-Method differs": {`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{` + modernMeta + `}}`,
			modernHeaders("Tools/List"), 400, -32020},
		"no Mcp-Name": {`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo",` + modernMeta + `}}`,
			modernHeaders("tools/call"), 400, -32020},
		"no params.name": {`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{` + modernMeta + `}}`,
			modernHeaders("tools/call", "Mcp-Name", "echo"), 400, -32602},
		"Mcp-Name differs": {`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo",` + modernMeta + `}}`,
			modernHeaders("tools/call", "Mcp-Name", "other"), 400, -32020},
		"Mcp-Name bad base64": {`{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"x",` + modernMeta + `}}`,
			modernHeaders("resources/read", "Mcp-Name", "=?base64?***?="), 400, -32020},
		"removed method": {`{"jsonrpc":"2.0","id":9,"method":"ping","params":{` + modernMeta + `}}`,
			modernHeaders("ping"), 404, -32601},
		"2025-11-25's tasks/list": {`{"jsonrpc":"2.0","id":9,"method":"tasks/list","params":{` + modernMeta + `}}`,
			modernHeaders("tasks/list"), 404, -32601},
		"2025-11-25's tasks/result": {`{"jsonrpc":"2.0","id":9,"method":"tasks/result","params":{"taskId":"t",` + modernMeta + `}}`,
			modernHeaders("tasks/result", "Mcp-Name", "t"), 404, -32601},
		"a name that is not a string": {`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":["echo"],` + modernMeta + `}}`,
			modernHeaders("tools/call", "Mcp-Name", "echo"), 400, -32602},
		"a listen that cannot take a stream": {`{"jsonrpc":"2.0","id":9,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + modernMeta + `}}`,
			modernHeaders("subscriptions/listen", "Accept", "application/json"), 406, -32600},
		"bad log level": {`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"loud"}}}`,
			modernHeaders("tools/list"), 400, -32602},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			resp := post(t, srv.URL+"/mcp", "application/json", tt.body, tt.headers...)
			id, code := readRPCError(t, resp)
			if resp.StatusCode != tt.status || code != tt.code || id != "9" {
				t.Errorf("got status %d code %d id %s; want %d %d 9", resp.StatusCode, code, id, tt.status, tt.code)
			}
		})
	}
	select {
	case c := <-f.calls:
		t.Errorf("a refused request reached the backend: %s", c.req.Raw)
	default:
	}
}

// A valid modern request reaches the bridge as a modern caller, headers
// compared after decoding and trimming.
func TestModernRequestReachesTheBridge(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{})
	got := make(chan *fakeCall, 1)
	go func() {
		c := f.next(t)
		got <- c
		c.mu.Lock()
		c.code = -32601 // the child does not know the tool
		c.mu.Unlock()
		c.finish([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`), nil)
	}()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"héllo wörld","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/logLevel":"info"}}}`
	resp := post(t, srv.URL+"/mcp", "application/json", body,
		"mcp-protocol-version", " 2026-07-28 ", "MCP-METHOD", "tools/call", "Mcp-Name", b64("héllo wörld"))
	c := <-got
	if !c.caller.Modern || string(c.caller.Capabilities) != `{"sampling":{}}` || c.caller.LogLevel != "info" {
		t.Errorf("caller = %+v", c.caller)
	}
	if resp.StatusCode != 404 {
		t.Errorf("the child's method-not-found answered with HTTP %d, want 404", resp.StatusCode)
	}
}

// Legacy requests are not held to 2026-07-28's rules.
func TestLegacyRequestIsNotValidatedAsModern(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{})
	go func() { f.next(t).finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), nil) }()
	resp := post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "MCP-Protocol-Version", "2025-11-25")
	if resp.StatusCode != 200 {
		t.Errorf("status = %d", resp.StatusCode)
	}
}

func TestDNSRebindingProtection(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		opts         Options
		host, origin string
		allowed      bool
		fetch        []string // Sec-Fetch-Site, Sec-Fetch-Mode[, Sec-Fetch-Dest[, Sec-Purpose[, Sec-Fetch-User]]]
	}{
		{"loopback, local host", Options{Loopback: true}, "localhost:8080", "", true, nil},
		{"loopback, ipv6 host", Options{Loopback: true}, "[::1]:8080", "", true, nil},
		{"loopback, foreign host", Options{Loopback: true}, "evil.example:8080", "", false, nil},
		{"loopback, local origin", Options{Loopback: true}, "127.0.0.1:8080", "http://localhost:3000", true, nil},
		{"loopback, foreign origin", Options{Loopback: true}, "127.0.0.1:8080", "http://evil.example", false, nil},
		{"loopback, opaque origin", Options{Loopback: true}, "127.0.0.1:8080", "null", false, nil},
		{"public, any host", Options{}, "gateway.svc.cluster.local", "", true, nil},
		{"public, same origin", Options{}, "mcp.example.com", "https://mcp.example.com", true, nil},
		{"public, cross origin", Options{}, "mcp.example.com", "https://evil.example", false, nil},
		{"allowed hosts", Options{AllowedHosts: []string{"mcp.example.com"}}, "MCP.example.com:443", "", true, nil},
		{"allowed hosts, other", Options{AllowedHosts: []string{"mcp.example.com"}}, "other.example.com", "", false, nil},
		{"allowed origins", Options{Loopback: true, AllowedOrigins: []string{"https://app.example.com"}}, "localhost", "https://app.example.com", true, nil},
		{"allowed origins, other", Options{Loopback: true, AllowedOrigins: []string{"https://app.example.com"}}, "localhost", "https://evil.example", false, nil},
		{"allowed origins, the gateway's own page", Options{Loopback: true, AllowedOrigins: []string{"https://app.example.com"}}, "127.0.0.1:8080", "http://127.0.0.1:8080", true, nil},
		{"allowed origins, same host another port", Options{AllowedOrigins: []string{"https://app.example.com"}}, "mcp.example.com", "https://mcp.example.com:8443", false, nil},
		{"allowed origins, a rebound page on a public listener", Options{AllowedOrigins: []string{"https://app.example.com"}}, "attacker.example:8080", "http://attacker.example:8080", false, nil},
		{"allowed origins and hosts, the gateway's own page", Options{AllowedHosts: []string{"mcp.example.com"}, AllowedOrigins: []string{"https://app.example.com"}}, "mcp.example.com", "https://mcp.example.com", true, nil},
		{"allowed origins, any host, its own page", Options{AllowedHosts: []string{"*"}, AllowedOrigins: []string{"https://app.example.com"}}, "mcp.example.com", "https://mcp.example.com", false, nil},
		{"another site's hidden frame", Options{Loopback: true}, "localhost", "", false, []string{"cross-site", "navigate", "iframe"}},
		{"another site's prefetch", Options{Loopback: true}, "localhost", "", false, []string{"cross-site", "navigate", "document", "prefetch"}},
		{"the gateway's own prefetch", Options{Loopback: true}, "localhost", "", true, []string{"same-origin", "navigate", "document", "prefetch"}},
		{"any origin", Options{Loopback: true, AllowedOrigins: []string{"*"}}, "localhost", "https://anything.example", true, nil},
		{"another site's <img>, no Origin", Options{Loopback: true}, "localhost", "", false, []string{"cross-site", "no-cors"}},
		{"another port's <script>, no Origin", Options{Loopback: true}, "localhost", "", false, []string{"same-site", "no-cors"}},
		{"a link the user follows", Options{Loopback: true}, "localhost", "", true, []string{"cross-site", "navigate", "document", "", "?1"}},
		{"another port's link the user follows", Options{Loopback: true}, "localhost", "", true, []string{"same-site", "navigate", "document", "", "?1"}},
		{"another site's script navigating", Options{Loopback: true}, "localhost", "", false, []string{"cross-site", "navigate", "document"}},
		{"another port's form submitted by script", Options{Loopback: true}, "localhost", "", false, []string{"same-site", "navigate", "document"}},
		{"typed in the address bar", Options{Loopback: true}, "localhost", "", true, []string{"none", "navigate"}},
		{"the gateway's own page", Options{Loopback: true}, "localhost", "", true, []string{"same-origin", "cors"}},
		{"an allowed origin's fetch", Options{Loopback: true, AllowedOrigins: []string{"https://app.example.com"}}, "localhost", "https://app.example.com", true, []string{"cross-site", "cors"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			h := New(f, tt.opts)
			req := httptest.NewRequest("POST", "http://x/mcp", strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/x"}`))
			req.Host = tt.host
			req.Header.Set("Content-Type", "application/json")
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			if tt.fetch != nil {
				req.Header.Set("Sec-Fetch-Site", tt.fetch[0])
				req.Header.Set("Sec-Fetch-Mode", tt.fetch[1])
				if len(tt.fetch) > 2 {
					req.Header.Set("Sec-Fetch-Dest", tt.fetch[2])
				}
				if len(tt.fetch) > 3 && tt.fetch[3] != "" {
					req.Header.Set("Sec-Purpose", tt.fetch[3])
				}
				if len(tt.fetch) > 4 {
					req.Header.Set("Sec-Fetch-User", tt.fetch[4])
				}
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if allowed := rec.Code != http.StatusForbidden; allowed != tt.allowed {
				body, _ := io.ReadAll(rec.Body)
				t.Errorf("status %d (%s), want allowed=%v", rec.Code, body, tt.allowed)
			}
		})
	}
}

// A tool list the Mcp-Param headers cannot be checked against fails the
// call for the reason the list failed: no child serving, or the gateway
// stopping, is told as any call is told it, a list over the size limit is the child's answer's
// fault (502), not a child that comes back in a second.
func TestParamHeadersWithoutTheList(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		err    error
		status int
		code   int
		says   string
		warns  bool // a warning about the list: not for a child away, which any call is told
	}{
		{"no child", jsonrpc.GatewayError(jsonrpc.CodeUnavailable, "child_unavailable", "the child is not serving (it stopped); it is being restarted"),
			503, jsonrpc.CodeUnavailable, `"the child is not serving (it stopped); it is being restarted"`, false},
		{"stopping", jsonrpc.GatewayError(jsonrpc.CodeShutdown, "shutting_down", "the gateway is shutting down"),
			503, jsonrpc.CodeShutdown, `"message":"the gateway is shutting down"`, false},
		{"too large", fmt.Errorf("tools/list: %w", jsonrpc.GatewayError(jsonrpc.CodeTooLarge, "too_large", "the child's response (7843 bytes) exceeded the gateway's message size limit")),
			502, jsonrpc.CodeTooLarge, "the Mcp-Param headers cannot be checked: the child's response (7843 bytes)", true},
		{"the child's error", &bridge.ListError{Method: "tools/list", Raw: []byte(`{"code":-32601,"message":"no tools"}`)},
			503, jsonrpc.CodeUnavailable, "the Mcp-Param headers cannot be checked: tools/list", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake()
			f.paramErr = tt.err
			var log gatewaytest.LockedBuffer
			srv := newServer(t, f, Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
			resp := post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo",`+modernMeta+`}}`,
				modernHeaders("tools/call", "Mcp-Name", "echo")...)
			body, _ := io.ReadAll(resp.Body)
			var m struct {
				Error struct {
					Code    int
					Message string
				}
			}
			json.Unmarshal(body, &m)
			if resp.StatusCode != tt.status || m.Error.Code != tt.code || !strings.Contains(string(body), tt.says) {
				t.Errorf("status %d: %s; want %d, code %d, saying %s", resp.StatusCode, body, tt.status, tt.code, tt.says)
			}
			if warned := strings.Contains(log.String(), "cannot check Mcp-Param headers"); warned != tt.warns {
				t.Errorf("warned %v, want %v: %s", warned, tt.warns, log.String())
			}
		})
	}
}

// Mcp-Param-* headers must agree with the arguments they mirror.
func TestParamHeaders(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.params = map[string][]mcp.ParamHeader{"deploy": {
		{Name: "Region", Path: []string{"region"}, Type: "string"},
		{Name: "Replicas", Path: []string{"spec", "replicas"}, Type: "integer"},
	}}
	srv := newServer(t, f, Options{})
	call := func(args string, headers ...string) *http.Response {
		body := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"deploy","arguments":` + args + `,` + modernMeta + `}}`
		return post(t, srv.URL+"/mcp", "application/json", body, modernHeaders("tools/call", append([]string{"Mcp-Name", "deploy"}, headers...)...)...)
	}
	refused := map[string]*http.Response{
		"missing":        call(`{"region":"eu"}`),
		"mismatch":       call(`{"region":"eu"}`, "Mcp-Param-Region", "us"),
		"bad padding":    call(`{"region":"Hello"}`, "Mcp-Param-Region", "=?base64?SGVsbG8?="),
		"bad alphabet":   call(`{"region":"Hello"}`, "Mcp-Param-Region", "=?base64?SGVs!!!bG8=?="),
		"not in body":    call(`{}`, "Mcp-Param-Region", "eu"),
		"number differs": call(`{"region":"eu","spec":{"replicas":3}}`, "Mcp-Param-Region", "eu", "Mcp-Param-Replicas", "4"),
		"beyond float64": call(`{"region":"eu","spec":{"replicas":9007199254740993}}`, "Mcp-Param-Region", "eu", "Mcp-Param-Replicas", "9007199254740992"),
		"raw non-ascii":  call(`{"region":"é"}`, "Mcp-Param-Region", "é"),
	}
	for name, resp := range refused {
		if id, code := readRPCError(t, resp); resp.StatusCode != 400 || code != -32020 || id != "5" {
			t.Errorf("%s: status %d code %d id %s, want 400 -32020 5", name, resp.StatusCode, code, id)
		}
	}
	// An argument a header mirrors must be one the child reads the same way.
	for name, args := range map[string]string{
		"twice":           `{"region":"eu","region":"us"}`,
		"by letter case":  `{"region":"eu","Region":"us"}`,
		"nested, by case": `{"region":"eu","spec":{"replicas":3,"Replicas":4}}`,
	} {
		resp := call(args, "Mcp-Param-Region", "eu", "Mcp-Param-Replicas", "3")
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 400 || !strings.Contains(string(body), `"code":-32600`) || !strings.Contains(string(body), "params.arguments") {
			t.Errorf("an ambiguous argument %s: status %d %s, want 400 -32600 naming it", name, resp.StatusCode, body)
		}
	}
	accepted := []*http.Response{}
	go func() {
		for range 4 {
			f.next(t).finish([]byte(`{"jsonrpc":"2.0","id":5,"result":{}}`), nil)
		}
	}()
	accepted = append(accepted,
		call(`{"region":"Hello"}`, "Mcp-Param-Region", "=?base64?SGVsbG8=?="),
		call(`{"region":"=?base64?SGVsbG8="}`, "Mcp-Param-Region", "=?base64?SGVsbG8="),
		call(`{"region":"eu","spec":{"replicas":3}}`, "mcp-param-region", " eu ", "Mcp-Param-Replicas", "3.0"),
		call(`{"region":null}`),
	)
	for i, resp := range accepted {
		if resp.StatusCode != 200 {
			body, _ := io.ReadAll(resp.Body)
			t.Errorf("case %d: status %d %s, want 200", i, resp.StatusCode, body)
		}
	}
}

// A 2025 request that sends its session id or its protocol version twice is
// refused: the gateway and a proxy before it might each read another one.
func TestLegacyHeaderSentTwice(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{})
	for _, name := range []string{"Mcp-Session-Id", "MCP-Protocol-Version"} {
		req := newPost(srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, "Accept", "application/json, text/event-stream")
		req.Header.Add(name, "2025-11-25")
		req.Header.Add(name, "2025-06-18")
		// A request that got through waits on the backend, which does not
		// answer: bounded, so that it fails instead of hanging.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			cancel()
			t.Errorf("%s twice: %v (the request was not refused)", name, err)
			<-f.calls
			continue
		}
		id, code := readRPCError(t, resp)
		resp.Body.Close()
		cancel()
		if resp.StatusCode != 400 || code != -32600 || id != "9" {
			t.Errorf("%s twice: status %d code %d id %s; want 400 -32600 9", name, resp.StatusCode, code, id)
		}
	}
	// A notification and the end of a session name their session too.
	for _, req := range []*http.Request{
		newPost(srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`),
		func() *http.Request { r, _ := http.NewRequest(http.MethodDelete, srv.URL+"/mcp", nil); return r }(),
	} {
		req.Header.Add("Mcp-Session-Id", "a")
		req.Header.Add("Mcp-Session-Id", "b")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, code := readRPCError(t, resp)
		resp.Body.Close()
		if resp.StatusCode != 400 || code != -32600 {
			t.Errorf("%s with Mcp-Session-Id twice: status %d code %d; want 400 -32600", req.Method, resp.StatusCode, code)
		}
	}
	select {
	case c := <-f.calls:
		t.Errorf("a refused request reached the backend: %s", c.req.Raw)
	default:
	}
}
