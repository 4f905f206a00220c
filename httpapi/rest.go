package httpapi

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// restRoutes mounts the REST API: plain HTTP over the same bridge as
// /mcp (the same ids, cancellation, progress, policy and limits), with
// problem+json errors, for curl, browsers and web apps.
func (h *handlers) restRoutes(r chi.Router) {
	r.Route("/v1", func(v chi.Router) {
		v.Use(restAnswers)
		v.NotFound(func(w http.ResponseWriter, r *http.Request) {
			unrouted(r)
			writeProblem(w, newProblem(kindNotFound, http.StatusNotFound, "no such route: the REST API is described at /openapi.yaml"))
		})
		v.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
			defer unrouted(r) // its routing context is read first
			// RFC 9110 §15.5.6: a 405 lists what the route takes.
			var allow []string
			for _, m := range []string{http.MethodGet, http.MethodPost} {
				if v.Match(chi.NewRouteContext(), m, chi.RouteContext(r.Context()).RoutePath) {
					allow = append(allow, m)
				}
			}
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeProblem(w, newProblem(kindMethodNotAllowed, http.StatusMethodNotAllowed, r.Method+" is not served on "+clip(r.URL.Path)))
		})
		g := v.With(h.guardOrigin, h.authenticate, h.limit(costCall))
		g.Get("/tools", h.restTools)
		g.Post("/tools/{name}", h.restToolCall)
		g.Get("/tools/{name}", h.restToolCall)
		g.Get("/resources", h.restList(mcp.MethodResourcesList, "resources"))
		g.Get("/resources/templates", h.restList(mcp.MethodTemplatesList, "resourceTemplates"))
		g.Get("/resources/read", h.restRead)
		g.Get("/prompts", h.restList(mcp.MethodPromptsList, "prompts"))
		g.Get("/prompts/{name}", h.restPrompt)
		g.Post("/prompts/{name}", h.restPrompt)
		g.Get("/openapi.json", h.restDocument)
	})
}

// restClientInfo is the clientInfo the child sees on REST calls.
var restClientInfo = []byte(`{"name":"stdiomcp-gateway-rest","version":"1"}`)

// restRequest builds the MCP request a REST call becomes, as a 2026-07-28
// client would send it, and reads it back with the same reader as /mcp:
// nothing reaches the child that the gateway read otherwise. more is the
// params' members past _meta (a comma-separated run; may be nil).
// unrouted drops the pattern of the mount a request no route of it serves
// was routed through ("/v1", "/v1/*"), so that it is counted as no route's.
func unrouted(r *http.Request) {
	if rc := chi.RouteContext(r.Context()); rc != nil {
		rc.RoutePatterns = nil
	}
}

func restRequest(method string, more []byte) (*mcp.Request, error) {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":1,"method":`)
	b.Write(jsonrpc.Quote(method))
	// Progress asked for always, a JSON answer's too (which drops it): a
	// child's progress is what keeps a long call within
	// GATEWAY_CALL_IDLE_TIMEOUT.
	b.WriteString(`,"params":{"_meta":{"progressToken":1,`)
	b.Write(jsonrpc.Quote(mcp.MetaProtocolVersion))
	b.WriteByte(':')
	b.Write(jsonrpc.Quote(mcp.Modern))
	b.WriteByte(',')
	b.Write(jsonrpc.Quote(mcp.MetaClientCapabilities))
	b.WriteString(`:{},`)
	b.Write(jsonrpc.Quote(mcp.MetaClientInfo))
	b.WriteByte(':')
	b.Write(restClientInfo)
	b.WriteByte('}')
	if len(more) > 0 {
		b.WriteByte(',')
		b.Write(more)
	}
	b.WriteString(`}}`)
	msg, err := jsonrpc.Parse(b.Bytes())
	if err != nil {
		return nil, err
	}
	return mcp.Read(msg)
}

// restCaller is the bridge's view of a REST client: 2026-07-28, with no
// capabilities (it cannot be asked questions mid-call), as the front door
// authenticated it.
func (h *handlers) restCaller(r *http.Request) bridge.Caller {
	c := bridge.Caller{Modern: true, Capabilities: []byte("{}"), ClientInfo: restClientInfo, Principal: callerOf(r.Context()).owner()}
	if tr, ok := traceOf(r.Context()); ok {
		c.Meta = tr.meta()
	}
	return c
}

// pathParam is a route parameter, unescaped: chi matches on the escaped
// path when the request has one, so that /v1/tools/a%2Fb names "a/b".
func pathParam(r *http.Request, key string) (string, bool) {
	v := chi.URLParam(r, key)
	if r.URL.RawPath != "" {
		var err error
		if v, err = url.PathUnescape(v); err != nil {
			return "", false
		}
	}
	// JSON would carry a name that is not UTF-8 as U+FFFD: another name
	// than the one sent, and the same as another's.
	return v, utf8.ValidString(v)
}
