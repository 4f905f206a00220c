package httpapi

import (
	"net/http"
	"slices"
	"strings"

	"github.com/go-chi/cors"

	"github.com/stdiomcp/gateway/mcp"
)

// corsHeaders are the request headers a web app on an allowed origin may
// send: MCP's own, the credentials, what names a request in the logs and
// traces, and any Mcp-Param-* (the names follow each tool's schema, so
// they cannot be listed).
var corsHeaders = []string{"Authorization", "Content-Type", "Accept", "Last-Event-ID",
	mcp.HeaderSession, mcp.HeaderProtocolVersion, mcp.HeaderMethod, mcp.HeaderName,
	requestIDHeader, "Traceparent", "Tracestate"}

// corsExposed are the response headers its scripts may read.
var corsExposed = []string{mcp.HeaderSession, mcp.HeaderProtocolVersion, "Retry-After", "WWW-Authenticate", "X-Request-Id", "Allow"}

// withCORS answers CORS preflights on /mcp and /v1 and marks their answers
// readable, when origins are configured (AllowedOrigins, "*" for any), for
// those the guard allows; any
// other origin, or path, gets no Access-Control-* header. The Host and
// Origin checks still run on the request itself (see guardOrigin).
func withCORS(origins []string, allowed func(origin, host string) bool) func(http.Handler) http.Handler {
	if len(origins) == 0 {
		return func(next http.Handler) http.Handler { return next }
	}
	opts := cors.Options{
		AllowedMethods: []string{http.MethodGet, http.MethodPost, http.MethodDelete},
		AllowedHeaders: corsHeaders,
		ExposedHeaders: corsExposed,
		MaxAge:         600,
	}
	if slices.Contains(origins, "*") {
		opts.AllowedOrigins = []string{"*"}
	} else {
		// The guard's own test (see originAllowed), not the library's
		// matching, which reads "*" inside an entry as a pattern: the
		// origins a browser may read answers for are exactly those let in.
		opts.AllowOriginFunc = func(r *http.Request, origin string) bool { return allowed(origin, r.Host) }
	}
	strict := cors.Handler(opts)
	// The library matches header names exactly or takes any; a preflight
	// whose headers are all ours, Mcp-Param-* included, goes to one that
	// takes any.
	opts.AllowedHeaders = []string{"*"}
	open := cors.Handler(opts)
	return func(next http.Handler) http.Handler {
		strictNext, openNext := strict(next), open(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.URL.Path != "/mcp" && r.URL.Path != "/v1" && !strings.HasPrefix(r.URL.Path, "/v1/"):
				next.ServeHTTP(w, r)
			case r.Method == http.MethodOptions && headersAllowed(r.Header.Get("Access-Control-Request-Headers")):
				openNext.ServeHTTP(w, r)
			default:
				strictNext.ServeHTTP(w, r)
			}
		})
	}
}

// headersAllowed reports whether a preflight asks only for headers a web
// app may send.
func headersAllowed(list string) bool {
	for _, h := range strings.Split(list, ",") {
		h = http.CanonicalHeaderKey(strings.TrimSpace(h))
		if h == "" || strings.HasPrefix(h, http.CanonicalHeaderKey(mcp.HeaderParamPrefix)) {
			continue
		}
		found := false
		for _, a := range corsHeaders {
			if http.CanonicalHeaderKey(a) == h {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
