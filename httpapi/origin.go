package httpapi

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// localNames are the host names that mean this machine.
var localNames = []string{"localhost", "127.0.0.1", "::1"}

// guardOrigin refuses a request whose Host or Origin names a site the
// gateway does not serve, which is how a DNS-rebinding page in a browser
// would reach a gateway on localhost. The spec requires Origin validation;
// Host is checked too, because a rebound page's requests carry the
// attacker's host name.
func (h *handlers) guardOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.hostAllowed(r.Host) {
			writeError(w, http.StatusForbidden, nil, jsonrpc.GatewayError(jsonrpc.CodeInvalidRequest, "host_not_allowed",
				"Host "+r.Host+" is not served here (set GATEWAY_ALLOWED_HOSTS to allow it)"))
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && !h.originAllowed(origin, r.Host) {
			writeError(w, http.StatusForbidden, nil, jsonrpc.GatewayError(jsonrpc.CodeInvalidRequest, "origin_not_allowed",
				"Origin "+origin+" is not allowed (set GATEWAY_ALLOWED_ORIGINS to allow it)"))
			return
		}
		if crossSiteWithoutOrigin(r) {
			writeError(w, http.StatusForbidden, nil, jsonrpc.GatewayError(jsonrpc.CodeInvalidRequest, "cross_site",
				"a request another site's page made without CORS (an image, a script, a frame, a navigation its script began) is not served; use fetch() from an allowed origin"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// crossSiteWithoutOrigin reports a browser request that another site's
// page made with no Origin header: a GET by an <img> or <script> tag, say,
// or a navigation its script made, which would otherwise call a read-only
// tool unseen or unasked. Browsers mark such requests with Sec-Fetch-Site;
// a top-level navigation the user made (a link followed: Sec-Fetch-User)
// and requests from tools other than browsers are let through.
func crossSiteWithoutOrigin(r *http.Request) bool {
	if r.Header.Get("Origin") != "" {
		return false
	}
	if strings.Contains(r.Header.Get("Sec-Purpose"), "prefetch") {
		// Another site's speculation rules fetch a page the user has not
		// opened.
		site := r.Header.Get("Sec-Fetch-Site")
		return site == "cross-site" || site == "same-site"
	}
	if r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Sec-Fetch-User") == "?1" {
		// A page the user opens, not one framed unseen in another, nor
		// one another site's script opens on its own (a location set, a
		// form submitted, on a timer or at load), which browsers send
		// without Sec-Fetch-User; one it opens as the user clicks there
		// carries it, as a link the user follows does.
		if dest := r.Header.Get("Sec-Fetch-Dest"); dest == "" || dest == "document" {
			return false
		}
	}
	site := r.Header.Get("Sec-Fetch-Site")
	return site == "cross-site" || site == "same-site"
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return strings.ToLower(h)
	}
	return strings.ToLower(strings.Trim(hostport, "[]"))
}

// hostAllowed: the configured list when there is one ("*" allows any);
// otherwise only local names on a loopback listener, and anything on
// another listener (a Service in a cluster is reached by many names).
func (h *handlers) hostAllowed(host string) bool {
	name := hostOnly(host)
	if len(h.opts.AllowedHosts) > 0 {
		return slices.ContainsFunc(h.opts.AllowedHosts, func(a string) bool { return a == "*" || strings.EqualFold(a, name) })
	}
	return !h.opts.Loopback || slices.Contains(localNames, name)
}

// originAllowed: the configured list when there is one ("*" allows any,
// entries are scheme://host[:port]), and besides it the gateway's own page
// where the Host is one the gateway trusts; with no list, local origins on
// a loopback listener and same-origin requests on another.
func (h *handlers) originAllowed(origin, host string) bool {
	u, err := url.Parse(origin)
	sameOrigin := err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
	if len(h.opts.AllowedOrigins) > 0 {
		norm := strings.ToLower(strings.TrimSuffix(origin, "/"))
		listed := slices.ContainsFunc(h.opts.AllowedOrigins, func(a string) bool {
			return a == "*" || strings.ToLower(strings.TrimSuffix(a, "/")) == norm
		})
		// A rebound page sends an Origin that matches its Host: same
		// origin proves nothing unless that Host is one the gateway knows.
		return listed || (sameOrigin && h.hostsTrusted())
	}
	if err != nil || u.Host == "" {
		return false // "null" and other opaque origins
	}
	if h.opts.Loopback {
		return slices.Contains(localNames, strings.ToLower(u.Hostname()))
	}
	return sameOrigin
}

// hostsTrusted reports whether a request's Host must be one the gateway
// knows: a list without "*", or local names on a loopback listener.
func (h *handlers) hostsTrusted() bool {
	if len(h.opts.AllowedHosts) > 0 {
		return !slices.Contains(h.opts.AllowedHosts, "*")
	}
	return h.opts.Loopback
}
