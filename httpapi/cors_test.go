package httpapi

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

const appOrigin = "http://app.example"

// corsHeadersOf are the Access-Control-* headers of an answer.
func corsHeadersOf(h http.Header) []string {
	var names []string
	for k := range h {
		if strings.HasPrefix(k, "Access-Control-") {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return names
}

// listHas reports whether a comma-separated header list names each of
// want, in any letter case.
func listHas(list string, want ...string) bool {
	var have []string
	for _, s := range strings.Split(list, ",") {
		have = append(have, strings.ToLower(strings.TrimSpace(s)))
	}
	for _, w := range want {
		if !slices.Contains(have, strings.ToLower(w)) {
			return false
		}
	}
	return true
}

// A web app on an allowed origin may call /mcp and /v1; no other origin,
// and no other path, is told anything.
func TestCORS(t *testing.T) {
	t.Parallel()
	ours := "Authorization, Content-Type, Mcp-Param-Region, MCP-Protocol-Version"
	type exchange struct {
		name                string
		origins             []string
		method, path        string
		origin              string
		preflightMethod     string // Access-Control-Request-Method; "" for an actual request
		preflightHeaders    string
		acao                string   // the Access-Control-Allow-Origin wanted; "" for no Access-Control-* at all
		allowHeaders        []string // wanted in Access-Control-Allow-Headers
		expose              []string // wanted in Access-Control-Expose-Headers
		refusedPreflight    bool     // the preflight is answered, but grants nothing
		wantStatus          int      // of an actual request; 0: not checked
		problemOnActualCall bool
	}
	app := []string{appOrigin}
	exposed := []string{"Mcp-Session-Id", "MCP-Protocol-Version", "Retry-After", "WWW-Authenticate", "X-Request-Id"}
	for _, ex := range []exchange{
		{name: "preflight on /mcp", origins: app, method: "OPTIONS", path: "/mcp", origin: appOrigin, preflightMethod: "POST", preflightHeaders: ours,
			acao: appOrigin, allowHeaders: strings.Split(ours, ", ")},
		{name: "preflight on a tool", origins: app, method: "OPTIONS", path: "/v1/tools/echo", origin: appOrigin, preflightMethod: "POST", preflightHeaders: ours,
			acao: appOrigin, allowHeaders: strings.Split(ours, ", ")},
		{name: "preflight for the GET form", origins: app, method: "OPTIONS", path: "/v1/tools/echo", origin: appOrigin, preflightMethod: "GET", preflightHeaders: "authorization,last-event-id",
			acao: appOrigin, allowHeaders: []string{"Authorization", "Last-Event-ID"}},
		{name: "preflight for DELETE /mcp", origins: app, method: "OPTIONS", path: "/mcp", origin: appOrigin, preflightMethod: "DELETE", preflightHeaders: "Mcp-Session-Id, Mcp-Method, Mcp-Name, Accept",
			acao: appOrigin, allowHeaders: []string{"Mcp-Session-Id", "Mcp-Method", "Mcp-Name", "Accept"}},
		{name: "preflight for the naming headers", origins: app, method: "OPTIONS", path: "/v1/tools/echo", origin: appOrigin, preflightMethod: "POST",
			preflightHeaders: "x-request-id, traceparent, tracestate", acao: appOrigin, allowHeaders: []string{"X-Request-Id", "Traceparent", "Tracestate"}},
		{name: "preflight with no headers", origins: app, method: "OPTIONS", path: "/v1/tools", origin: appOrigin, preflightMethod: "GET", acao: appOrigin},
		{name: "preflight for a header not on the list", origins: app, method: "OPTIONS", path: "/v1/tools/echo", origin: appOrigin, preflightMethod: "POST",
			preflightHeaders: "Authorization, X-Evil", refusedPreflight: true},
		{name: "preflight for a prefix of Mcp-Param-", origins: app, method: "OPTIONS", path: "/mcp", origin: appOrigin, preflightMethod: "POST",
			preflightHeaders: "Mcp-Par", refusedPreflight: true},
		{name: "preflight for PUT", origins: app, method: "OPTIONS", path: "/v1/tools/echo", origin: appOrigin, preflightMethod: "PUT", refusedPreflight: true},
		{name: "preflight from another origin", origins: app, method: "OPTIONS", path: "/mcp", origin: "http://evil.example", preflightMethod: "POST", preflightHeaders: ours},
		{name: "preflight from a look-alike origin", origins: app, method: "OPTIONS", path: "/v1/tools", origin: "http://app.example.evil", preflightMethod: "GET"},
		{name: "preflight outside /mcp and /v1", origins: app, method: "OPTIONS", path: "/healthz", origin: appOrigin, preflightMethod: "GET"},
		{name: "preflight on a path that only starts like /v1", origins: app, method: "OPTIONS", path: "/v1x", origin: appOrigin, preflightMethod: "GET"},
		{name: "actual call", origins: app, method: "GET", path: "/v1/tools", origin: appOrigin, acao: appOrigin, expose: exposed, wantStatus: 200},
		{name: "actual call on /mcp", origins: app, method: "POST", path: "/mcp", origin: appOrigin, acao: appOrigin, expose: exposed, wantStatus: 202},
		{name: "actual refusal", origins: app, method: "POST", path: "/v1/tools/nope", origin: appOrigin, acao: appOrigin, expose: exposed, wantStatus: 404, problemOnActualCall: true},
		{name: "actual call from another origin", origins: app, method: "GET", path: "/v1/tools", origin: "http://evil.example", wantStatus: 403, problemOnActualCall: true},
		{name: "actual call outside /mcp and /v1", origins: app, method: "GET", path: "/healthz", origin: appOrigin, wantStatus: 200},
		{name: "no origins: preflight on /mcp", method: "OPTIONS", path: "/mcp", origin: appOrigin, preflightMethod: "POST", preflightHeaders: ours},
		{name: "no origins: preflight on a tool", method: "OPTIONS", path: "/v1/tools/echo", origin: appOrigin, preflightMethod: "POST"},
		{name: "no origins: actual call", method: "GET", path: "/v1/tools", origin: appOrigin},
		{name: "no origins: actual call, same origin", method: "GET", path: "/v1/tools", origin: "http://localhost", wantStatus: 200},
		// The guard reads a configured origin without letter case or a
		// trailing slash; so must CORS, or the app cannot read answers
		// the guard let through.
		{name: "configured with a trailing slash", origins: []string{"http://App.example/"}, method: "GET", path: "/v1/tools", origin: appOrigin, acao: appOrigin, expose: exposed, wantStatus: 200},
		// An entry that looks like a pattern is a literal origin, as the
		// guard reads it, never a wildcard for CORS.
		{name: "a pattern-like entry: preflight from a match", origins: []string{"http://*.example"}, method: "OPTIONS", path: "/v1/tools", origin: "http://evil.example", preflightMethod: "GET"},
		{name: "a pattern-like entry: call from a match", origins: []string{"http://*.example"}, method: "GET", path: "/v1/tools", origin: "http://evil.example", wantStatus: 403, problemOnActualCall: true},
		{name: "any origin: preflight", origins: []string{"*"}, method: "OPTIONS", path: "/v1/tools/echo", origin: "http://anything.example", preflightMethod: "POST", preflightHeaders: ours,
			acao: "*", allowHeaders: strings.Split(ours, ", ")},
		{name: "any origin: actual call", origins: []string{"*"}, method: "GET", path: "/v1/tools", origin: "http://anything.example", acao: "*", expose: exposed, wantStatus: 200},
	} {
		t.Run(ex.name, func(t *testing.T) {
			f, srv := restServer(t, Options{AllowedOrigins: ex.origins}, allTools...)
			var req *http.Request
			if ex.method == "POST" && ex.path == "/mcp" {
				req = restReq(ex.method, srv+ex.path, "application/json", `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			} else {
				req = restReq(ex.method, srv+ex.path, "", "")
			}
			req.Host = "localhost"
			req.Header.Set("Origin", ex.origin)
			if ex.preflightMethod != "" {
				req.Header.Set("Access-Control-Request-Method", ex.preflightMethod)
			}
			if ex.preflightHeaders != "" {
				req.Header.Set("Access-Control-Request-Headers", ex.preflightHeaders)
			}
			r := restRefused(t, f, req)
			got := r.header.Get("Access-Control-Allow-Origin")
			switch {
			case ex.acao == "" && ex.refusedPreflight:
				if got != "" || r.header.Get("Access-Control-Allow-Headers") != "" || r.header.Get("Access-Control-Allow-Methods") != "" {
					t.Errorf("a refused preflight granted %v", corsHeadersOf(r.header))
				}
			case ex.acao == "":
				if h := corsHeadersOf(r.header); len(h) > 0 {
					t.Errorf("CORS headers %v, want none", h)
				}
			case got != ex.acao:
				t.Errorf("Access-Control-Allow-Origin %q, want %q", got, ex.acao)
			}
			if ex.acao != "" && ex.preflightMethod != "" {
				if m := r.header.Get("Access-Control-Allow-Methods"); !listHas(m, ex.preflightMethod) {
					t.Errorf("Access-Control-Allow-Methods %q, want %s", m, ex.preflightMethod)
				}
				if h := r.header.Get("Access-Control-Allow-Headers"); !listHas(h, ex.allowHeaders...) {
					t.Errorf("Access-Control-Allow-Headers %q, want %q", h, ex.allowHeaders)
				}
				if a := r.header.Get("Access-Control-Max-Age"); a == "" || a == "0" {
					t.Errorf("Access-Control-Max-Age %q", a)
				}
				if r.header.Get("Access-Control-Allow-Credentials") != "" {
					t.Error("credentials mode granted")
				}
			}
			if ex.expose != nil {
				if e := r.header.Get("Access-Control-Expose-Headers"); !listHas(e, ex.expose...) {
					t.Errorf("Access-Control-Expose-Headers %q, want %q", e, ex.expose)
				}
			}
			if ex.wantStatus != 0 && r.status != ex.wantStatus {
				t.Errorf("status %d, want %d: %s", r.status, ex.wantStatus, r.body)
			}
			if ex.problemOnActualCall {
				wantProblem(t, r, ex.wantStatus, "")
			}
			// A preflight is answered by the gateway itself.
			nothingReached(t, f)
		})
	}
}

// A preflight carries no credentials: it is answered before
// authentication, and the 401 of the call itself is readable by the app.
func TestCORSWithCredentials(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.tools = toolList(allTools...)
	srv, _ := guarded(t, f, Options{AllowedOrigins: []string{appOrigin}})
	pre := restReq("OPTIONS", srv+"/v1/tools/echo", "", "", "Origin", appOrigin,
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "Authorization, Content-Type")
	if r := restDo(t, pre); r.status/100 != 2 || r.header.Get("Access-Control-Allow-Origin") != appOrigin {
		t.Errorf("preflight: status %d, Access-Control-Allow-Origin %q", r.status, r.header.Get("Access-Control-Allow-Origin"))
	}
	r := restRefused(t, f, restReq("POST", srv+"/v1/tools/echo", "application/json", `{"text":"a"}`, "Origin", appOrigin))
	wantProblem(t, r, 401, kindUnauthorized)
	if r.header.Get("Access-Control-Allow-Origin") != appOrigin || !listHas(r.header.Get("Access-Control-Expose-Headers"), "WWW-Authenticate") {
		t.Errorf("a 401 the app cannot read: %v", r.header)
	}
	nothingReached(t, f)
}

// The Host and Origin guard refuses with problems on /v1.
func TestRESTHostAndOriginGuard(t *testing.T) {
	t.Parallel()
	f, srv := restServer(t, Options{Loopback: true}, allTools...)
	for _, tc := range []struct {
		name, host, origin string
		status             int
		reason             string
	}{
		{"foreign host", "evil.example", "", 403, "host_not_allowed"},
		{"foreign origin", "localhost", "http://evil.example", 403, "origin_not_allowed"},
		{"opaque origin", "localhost", "null", 403, "origin_not_allowed"},
		{"local", "localhost", "http://localhost:3000", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, req := range []*http.Request{
				restReq("GET", srv+"/v1/tools", "", ""),
				restReq("POST", srv+"/v1/tools/add", "", ""),
				restReq("GET", srv+"/v1/resources/read?uri=demo://a", "", ""),
			} {
				req.Host = tc.host
				if tc.origin != "" {
					req.Header.Set("Origin", tc.origin)
				}
				if tc.status == 200 {
					if req.URL.Path != "/v1/tools" {
						continue
					}
					if r := restRefused(t, f, req); r.status != 200 {
						t.Errorf("%s: status %d", req.URL, r.status)
					}
					continue
				}
				p := wantProblem(t, restRefused(t, f, req), tc.status, kindForbidden)
				if p.Reason != tc.reason {
					t.Errorf("%s: reason %q, want %q", req.URL, p.Reason, tc.reason)
				}
			}
			nothingReached(t, f)
		})
	}
}
