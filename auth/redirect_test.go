package auth_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/stdiomcp/gateway/auth"
)

// TestJWKSRedirectToHTTPIsRefused: keys fetched over https must not come
// from a plain http server a redirect points to, whichever client fetches
// them; a redirect that stays on https is followed.
func TestJWKSRedirectToHTTPIsRefused(t *testing.T) {
	is := newIssuer(t) // plain http
	c := newClock()
	var hits atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /downgrade", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, is.JWKS(), http.StatusFound)
	})
	mux.HandleFunc("GET /moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/keys", http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		keys := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: rsaKey.Public(), KeyID: "rsa1", Use: "sig", Algorithm: "RS256"}}}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, string(must(json.Marshal(keys))))
	})
	tlsSrv := httptest.NewTLSServer(mux)
	t.Cleanup(tlsSrv.Close)

	given := tlsSrv.Client()
	withClient := func(path string) func(*auth.Options) {
		return func(o *auth.Options) { o.OAuth.JWKSURL = tlsSrv.URL + path; o.Client = given }
	}
	a := oauthAuth(t, is, c, withClient("/downgrade"))
	if _, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "rsa1", good(is, c))); e == nil || e.Reason != "keys_unavailable" {
		t.Fatalf("keys behind a redirect from https to http: %+v", e)
	}
	if hits.Load() != 1 || is.jwksHits.Load() != 0 {
		t.Fatalf("the https server was asked %d times, the http one %d: the redirect was followed or never made", hits.Load(), is.jwksHits.Load())
	}
	if given.CheckRedirect != nil {
		t.Fatal("the caller's client was changed")
	}

	a = oauthAuth(t, is, c, withClient("/moved"))
	if _, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "rsa1", good(is, c))); e != nil {
		t.Fatalf("keys behind a redirect from https to https: %+v", e)
	}

	// The caller's own redirect policy still applies after the package's.
	strict := tlsSrv.Client()
	strict.CheckRedirect = func(*http.Request, []*http.Request) error { return errors.New("no redirects here") }
	a = oauthAuth(t, is, c, func(o *auth.Options) { o.OAuth.JWKSURL = tlsSrv.URL + "/moved"; o.Client = strict })
	if _, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "rsa1", good(is, c))); e == nil || e.Reason != "keys_unavailable" {
		t.Fatalf("the caller's CheckRedirect was not applied: %+v", e)
	}
}

// TestJWKSFollowsAtMostThreeRedirects, with the client the package builds.
func TestJWKSFollowsAtMostThreeRedirects(t *testing.T) {
	is := newIssuer(t)
	c := newClock()
	hops := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/hop/"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		to := is.JWKS()
		if n > 1 {
			to = "/hop/" + strconv.Itoa(n-1)
		}
		http.Redirect(w, r, to, http.StatusFound)
	}))
	t.Cleanup(hops.Close)
	for _, tc := range []struct {
		redirects int
		ok        bool
	}{{1, true}, {3, true}, {4, false}} {
		a := oauthAuth(t, is, c, func(o *auth.Options) { o.OAuth.JWKSURL = hops.URL + "/hop/" + strconv.Itoa(tc.redirects) })
		_, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "rsa1", good(is, c)))
		if ok := e == nil; ok != tc.ok || !ok && e.Reason != "keys_unavailable" {
			t.Errorf("%d redirects: error %+v, want success %v", tc.redirects, e, tc.ok)
		}
	}
}
