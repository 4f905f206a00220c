package main

import (
	"context"
	"fmt"
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

// TestLargeJWT: a JWT as large as one with many groups (Entra ID's pass
// 8 KiB) is read whole, within GATEWAY_MAX_HEADER_BYTES' default; only
// that setting bounds the Authorization header.
func TestLargeJWT(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	watch := secret(t)
	g := startGateway(t, append(oauthEnv("ISSUER", is.url, "RESOURCE", resource, "JWKS_URL", is.url+"/jwks"), "GATEWAY_AUTH_TOKENS=watch:"+watch))
	tg := newTarget(t, g, watch)
	g.Logs.Wait(t, msgIs("auth: issuer keys loaded"))
	groups := make([]string, 500)
	for i := range groups {
		groups[i] = fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i) // 36 bytes, as Entra's object ids
	}
	tok := sign(t, jose.RS256, is.key, "k1", is.claims("alice", "", map[string]any{"groups": groups}))
	if len(tok) < 20<<10 {
		t.Fatalf("the token is only %d bytes", len(tok))
	}
	tg.run(t, []attack{{name: "a 20 KiB JWT", token: tok, body: call("echo", `{"text":"hi"}`), status: 200, reached: []string{"echo"}}})
}
