package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// resource is the gateway's resource URL in the JWT tests: the aud tokens
// must carry. It need not be where the gateway listens.
const resource = "http://127.0.0.1/mcp"

// issuer is a local OAuth authorization server: it publishes one RSA key
// as a JWKS and counts how often the gateway fetches it.
type issuer struct {
	url     string
	key     *rsa.PrivateKey
	fetches atomic.Int64
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	is := &issuer{key: rsaKey(t)}
	set, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &is.key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/jwks" {
			http.NotFound(w, r)
			return
		}
		is.fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write(set)
	}))
	t.Cleanup(srv.Close)
	is.url = srv.URL
	return is
}

func rsaKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// claims are a valid token's, for sub, with the given scope, changed by
// edit (a nil value deletes a claim).
func (is *issuer) claims(sub, scope string, edit map[string]any) map[string]any {
	now := time.Now()
	c := map[string]any{"iss": is.url, "aud": resource, "sub": sub, "scope": scope,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for k, v := range edit {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// sign makes a compact JWS of claims with go-jose.
func sign(t *testing.T, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// unsigned is a token with alg "none", which no library will make.
func unsigned(t *testing.T, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none","typ":"JWT","kid":"k1"}`)) + "." + enc(payload) + "."
}

// oauthEnv sets GATEWAY_OAUTH_<name> for each name/value pair.
func oauthEnv(kv ...string) []string {
	var env []string
	for i := 0; i+1 < len(kv); i += 2 {
		env = append(env, "GATEWAY_OAUTH_"+kv[i]+"="+kv[i+1])
	}
	return env
}

// The GATEWAY_OAUTH_* names are the ones the gateway reads: with only an
// issuer set, no one gets in without a token. (A Go field named OAuthIssuer
// would have been read as GATEWAY_O_AUTH_ISSUER, and everyone served.)
func TestAttackOAuthSettingsAreRead(t *testing.T) {
	t.Parallel()
	watch := secret(t)
	g := startGateway(t, []string{"GATEWAY_OAUTH_ISSUER=http://127.0.0.1:1", "GATEWAY_OAUTH_RESOURCE=" + resource, "GATEWAY_AUTH_TOKENS=watch:" + watch})
	tg := newTarget(t, g, watch)
	tg.run(t, []attack{{name: "no token, OAuth configured", body: call("echo", `{"text":"hi"}`), status: 401, code: -32007, auth: []string{"resource_metadata="}}})
}

// JWT access tokens against a local issuer, every way a token can be
// wrong, and the scopes of a policy.
func TestAttackJWT(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	watch := secret(t)
	policy := filepath.Join(t.TempDir(), "policy.json")
	writeAtomically(t, policy, `{"tokens":{"watch":{"tools":["*"],"resources":["*"],"prompts":["*"]}},"scopes":{"mcp:echo":{"tools":["echo"]}}}`)
	g := startGateway(t, append(oauthEnv("ISSUER", is.url, "RESOURCE", resource, "JWKS_URL", is.url+"/jwks"),
		"GATEWAY_AUTH_TOKENS=watch:"+watch, "GATEWAY_AUTH_POLICY_FILE="+policy))
	tg := newTarget(t, g, watch)
	g.Logs.Wait(t, msgIs("auth: issuer keys loaded"))

	pub, err := x509.MarshalPKIXPublicKey(&is.key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	other := rsaKey(t)
	valid := is.claims("alice", "mcp:echo", nil)
	rs256 := func(claims map[string]any) string { return sign(t, jose.RS256, is.key, "k1", claims) }
	echo := call("echo", `{"text":"hi"}`)
	metadata := `resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/mcp"`
	bad := []string{`error="invalid_token"`, metadata}
	tokens := map[string]string{}
	rows := []attack{
		{name: "no token", body: echo, status: 401, code: -32007, auth: []string{metadata}},
		{name: "valid, scope allows echo", token: rs256(valid), body: echo, status: 200, reached: []string{"echo"}},
		{name: "valid, scope does not allow slow", token: rs256(valid), body: call("slow", `{}`), status: 403, code: -32008, auth: []string{`error="insufficient_scope"`}},
		{name: "valid, no scope", token: rs256(is.claims("alice", "", map[string]any{"scope": nil})), body: echo, status: 403, code: -32008, auth: []string{`error="insufficient_scope"`, `scope="mcp:echo"`}},
		{name: "valid, another scope", token: rs256(is.claims("alice", "mcp:other", nil)), body: echo, status: 403, code: -32008, auth: []string{`scope="mcp:echo"`}},
		{name: "valid, scp array", token: rs256(is.claims("alice", "", map[string]any{"scope": nil, "scp": []string{"mcp:echo"}})), body: echo, status: 200, reached: []string{"echo"}},
		{name: "expired", token: rs256(is.claims("alice", "mcp:echo", map[string]any{"exp": time.Now().Add(-time.Hour).Unix(), "iat": time.Now().Add(-2 * time.Hour).Unix(), "nbf": nil})), body: echo, status: 401, code: -32007, auth: bad},
		{name: "not yet valid", token: rs256(is.claims("alice", "mcp:echo", map[string]any{"nbf": time.Now().Add(time.Hour).Unix()})), body: echo, status: 401, code: -32007, auth: bad},
		{name: "issued in the future", token: rs256(is.claims("alice", "mcp:echo", map[string]any{"iat": time.Now().Add(time.Hour).Unix()})), body: echo, status: 401, code: -32007, auth: bad},
		{name: "no exp", token: rs256(is.claims("alice", "mcp:echo", map[string]any{"exp": nil})), body: echo, status: 401, code: -32007, auth: bad},
		{name: "wrong audience", token: rs256(is.claims("alice", "mcp:echo", map[string]any{"aud": "http://127.0.0.1/other"})), body: echo, status: 401, code: -32007, auth: bad},
		{name: "audience a prefix of the resource", token: rs256(is.claims("alice", "mcp:echo", map[string]any{"aud": "http://127.0.0.1/"})), body: echo, status: 401, code: -32007, auth: bad},
		{name: "wrong issuer", token: rs256(is.claims("alice", "mcp:echo", map[string]any{"iss": "http://127.0.0.1:1"})), body: echo, status: 401, code: -32007, auth: bad},
		{name: "missing sub", token: rs256(is.claims("", "mcp:echo", map[string]any{"sub": nil})), body: echo, status: 401, code: -32007, auth: bad},
		{name: "alg none", token: unsigned(t, valid), body: echo, status: 401, code: -32007, auth: bad},
		{name: "alg none, signature kept", token: unsigned(t, valid) + "c2ln", body: echo, status: 401, code: -32007, auth: bad},
		{name: "HS256 keyed with the public key PEM", token: sign(t, jose.HS256, pubPEM, "k1", valid), body: echo, status: 401, code: -32007, auth: bad},
		{name: "HS256 keyed with the public key DER", token: sign(t, jose.HS256, pub, "k1", valid), body: echo, status: 401, code: -32007, auth: bad},
		{name: "signed by another key under the issuer's kid", token: sign(t, jose.RS256, other, "k1", valid), body: echo, status: 401, code: -32007, auth: bad},
		{name: "a valid token with its payload swapped", token: swapPayload(t, rs256(is.claims("alice", "", map[string]any{"scope": nil})), valid), body: echo, status: 401, code: -32007, auth: bad},
		{name: "unknown kid", token: sign(t, jose.RS256, other, "k2", valid), body: echo, status: 401, code: -32007, auth: bad},
	}
	for _, r := range rows {
		tokens[r.name] = r.token
	}
	tg.run(t, rows)

	// A flood of made-up kids costs the issuer at most one fetch (none
	// within 30s of the last, which the gateway made at start).
	t.Run("unknown kids at once", func(t *testing.T) {
		before := is.fetches.Load()
		var wg sync.WaitGroup
		replies := make([]reply, 10)
		errs := make([]error, 10)
		for i := range replies {
			tok := sign(t, jose.RS256, other, "made-up-"+string(rune('a'+i)), valid)
			wg.Go(func() { replies[i], errs[i] = tg.post(tok, nil, echo, false) })
		}
		wg.Wait()
		for i, r := range replies {
			if errs[i] != nil || r.status != 401 {
				t.Errorf("token %d: %v %v", i, r, errs[i])
			}
		}
		if n := is.fetches.Load() - before; n > 1 {
			t.Errorf("10 unknown kids made the gateway fetch the JWKS %d times; want at most 1", n)
		} else {
			t.Logf("10 unknown kids: %d fetches (%d in all)", n, is.fetches.Load())
		}
		tg.reached(t)
	})

	t.Run("protected resource metadata", func(t *testing.T) {
		for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
			resp, err := http.Get(g.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			var md struct {
				Resource             string   `json:"resource"`
				AuthorizationServers []string `json:"authorization_servers"`
			}
			err = json.NewDecoder(resp.Body).Decode(&md)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || md.Resource != resource || !slices.Equal(md.AuthorizationServers, []string{is.url}) {
				t.Errorf("GET %s: %d %+v %v", path, resp.StatusCode, md, err)
			}
		}
	})

	secrets := []string{watch}
	for _, tok := range tokens {
		if tok != "" {
			secrets = append(secrets, tok)
		}
	}
	neverLogged(t, g, secrets...)
}

// swapPayload puts claims in place of tok's payload, keeping its header
// and signature.
func swapPayload(t *testing.T, tok string, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload) + "." + parts[2]
}
