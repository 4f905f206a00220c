package main

import (
	"context"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// TestOAuthLeeway: GATEWAY_OAUTH_LEEWAY's default of 30 s reaches the
// verifier (a token expired 29 s ago passes), and 0 means no skew at all
// (one expired 1 s ago is refused), not the default.
func TestOAuthLeeway(t *testing.T) {
	is := newIssuer(t)
	t.Setenv("GATEWAY_OAUTH_ISSUER", is.url)
	t.Setenv("GATEWAY_OAUTH_RESOURCE", resource)
	t.Setenv("GATEWAY_OAUTH_JWKS_URL", is.url+"/jwks")
	for _, tc := range []struct {
		leeway string // "": unset
		ago    time.Duration
		ok     bool
	}{
		{"", 29 * time.Second, true},
		{"", 40 * time.Second, false},
		{"0", time.Second, false},
		{"0s", 29 * time.Second, false},
		{"10s", 5 * time.Second, true},
	} {
		if tc.leeway != "" {
			t.Setenv("GATEWAY_OAUTH_LEEWAY", tc.leeway)
		}
		cfg, err := loadConfig()
		if err != nil {
			t.Fatal(err)
		}
		a, err := newAuth(cfg, discardLogger())
		if err != nil {
			t.Fatal(err)
		}
		tok := sign(t, jose.RS256, is.key, "k1", is.claims("alice", "", map[string]any{"exp": time.Now().Add(-tc.ago).Unix()}))
		_, err = a.Authenticate(context.Background(), "Bearer "+tok)
		if ok := err == nil; ok != tc.ok {
			t.Errorf("GATEWAY_OAUTH_LEEWAY=%q, a token expired %v ago: error %v, want accepted %v", tc.leeway, tc.ago, err, tc.ok)
		}
	}
}
