package auth_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/stdiomcp/gateway/auth"
)

// handmade builds a compact JWS with any header, for the attacks go-jose's
// signer would refuse to produce.
func handmade(t *testing.T, header map[string]any, cl claims, sign func(input []byte) []byte) string {
	t.Helper()
	h, _ := json.Marshal(header)
	p, err := json.Marshal(cl)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	input := enc.EncodeToString(h) + "." + enc.EncodeToString(p)
	var sig []byte
	if sign != nil {
		sig = sign([]byte(input))
	}
	return input + "." + enc.EncodeToString(sig)
}

func hs256(key []byte) func([]byte) []byte {
	return func(in []byte) []byte {
		m := hmac.New(sha256.New, key)
		m.Write(in)
		return m.Sum(nil)
	}
}

func TestJWTAttacks(t *testing.T) {
	is := newIssuer(t)
	c := newClock()
	a := oauthAuth(t, is, c, nil)
	now := c.Now()

	der, err := x509.MarshalPKIXPublicKey(rsaKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	otherEC, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)

	mod := func(f func(*claims)) claims {
		cl := good(is, c)
		f(&cl)
		return cl
	}
	rs := func(cl claims) string { return sign(t, rsaKey, jose.RS256, "rsa1", cl) }

	cases := []struct {
		name   string
		header string
		status int
		code   string
		reason string // "" with code "": success
	}{
		{"valid RS256", "Bearer " + rs(good(is, c)), 0, "", ""},
		{"valid ES256", "Bearer " + sign(t, ecKey, jose.ES256, "ec1", good(is, c)), 0, "", ""},
		{"scheme in lower case", "bearer " + rs(good(is, c)), 0, "", ""},
		{"no header", "", 401, "", "missing"},
		{"wrong scheme", "Basic dXNlcjpwYXNz", 401, "", "scheme"},
		{"scheme only", "Bearer", 400, "invalid_request", "malformed"},
		{"two credentials", "Bearer " + rs(good(is, c)) + " extra", 400, "invalid_request", "malformed"},
		// No bound of its own: the server's on headers is the one.
		{"huge token", "Bearer " + strings.Repeat("a", 70<<10), 401, "invalid_token", "not_jwt"},
		{"huge JWT", "Bearer " + rs(mod(func(cl *claims) {
			for i := range 1000 { // 40 KiB, as a token with many groups can be
				cl.Audience = append(cl.Audience, fmt.Sprintf("https://app-%04d.example.com/groups", i))
			}
		})), 0, "", ""},
		{"not a JWT", "Bearer opensesame", 401, "invalid_token", "not_jwt"},
		{"three parts of garbage", "Bearer a.b.c", 401, "invalid_token", "not_jwt"},
		{"expired beyond leeway", "Bearer " + rs(mod(func(cl *claims) { cl.Expiry = jwt.NewNumericDate(now.Add(-31 * time.Second)) })), 401, "invalid_token", "expired"},
		{"expired within leeway", "Bearer " + rs(mod(func(cl *claims) { cl.Expiry = jwt.NewNumericDate(now.Add(-20 * time.Second)) })), 0, "", ""},
		{"not yet valid", "Bearer " + rs(mod(func(cl *claims) { cl.NotBefore = jwt.NewNumericDate(now.Add(time.Minute)) })), 401, "invalid_token", "not_yet_valid"},
		{"nbf within leeway", "Bearer " + rs(mod(func(cl *claims) { cl.NotBefore = jwt.NewNumericDate(now.Add(20 * time.Second)) })), 0, "", ""},
		{"issued in the future", "Bearer " + rs(mod(func(cl *claims) { cl.IssuedAt = jwt.NewNumericDate(now.Add(time.Minute)) })), 401, "invalid_token", "issued_in_future"},
		{"wrong audience", "Bearer " + rs(mod(func(cl *claims) { cl.Audience = jwt.Audience{"https://mcp.example.com"} })), 401, "invalid_token", "audience"},
		{"no audience", "Bearer " + rs(mod(func(cl *claims) { cl.Audience = nil })), 401, "invalid_token", "audience"},
		{"wrong issuer", "Bearer " + rs(mod(func(cl *claims) { cl.Issuer = is.URL() + "/other" })), 401, "invalid_token", "issuer"},
		{"missing sub", "Bearer " + rs(mod(func(cl *claims) { cl.Subject = "" })), 401, "invalid_token", "no_sub"},
		{"missing exp", "Bearer " + rs(mod(func(cl *claims) { cl.Expiry = nil })), 401, "invalid_token", "no_exp"},
		{"alg none", "Bearer " + handmade(t, map[string]any{"alg": "none", "kid": "rsa1"}, good(is, c), nil), 401, "invalid_token", "algorithm"},
		{"HS256 keyed with the RSA public key PEM", "Bearer " + handmade(t, map[string]any{"alg": "HS256", "kid": "rsa1"}, good(is, c), hs256(pemBytes)), 401, "invalid_token", "algorithm"},
		{"HS256 keyed with the RSA public key DER", "Bearer " + handmade(t, map[string]any{"alg": "HS256"}, good(is, c), hs256(der)), 401, "invalid_token", "algorithm"},
		{"RS384 not allowed", "Bearer " + sign(t, rsaKey, jose.RS384, "rsa1", good(is, c)), 401, "invalid_token", "algorithm"},
		{"signed by another key under a known kid", "Bearer " + sign(t, otherEC, jose.ES256, "ec1", good(is, c)), 401, "invalid_token", "signature"},
		{"ES256 naming the RSA key's kid", "Bearer " + sign(t, ecKey, jose.ES256, "rsa1", good(is, c)), 401, "invalid_token", "unknown_key"},
		{"payload altered after signing", "Bearer " + tamper(t, rs(good(is, c))), 401, "invalid_token", "signature"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, e := authErr(t, a, tc.header)
			if tc.reason == "" {
				if e != nil {
					t.Fatalf("refused: %+v", e)
				}
				if id.Name != "alice" || id.Kind != "jwt" || !id.Rules.Unrestricted() {
					t.Fatalf("identity %+v", id)
				}
				return
			}
			if e == nil {
				t.Fatalf("accepted as %+v", id)
			}
			if e.Status != tc.status || e.Code != tc.code || e.Reason != tc.reason {
				t.Fatalf("got status %d code %q reason %q (%s); want %d %q %q", e.Status, e.Code, e.Reason, e.Description, tc.status, tc.code, tc.reason)
			}
			if len(tc.header) > 20 && strings.Contains(e.Description+a.Challenge(e), tc.header[7:20]) {
				t.Fatalf("the error repeats the credential: %q", e.Description)
			}
		})
	}
}

// tamper changes the subject in a signed token's payload.
func tamper(t *testing.T, tok string) string {
	parts := strings.Split(tok, ".")
	p, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	p = []byte(strings.Replace(string(p), `"alice"`, `"mallory"`, 1))
	parts[1] = base64.RawURLEncoding.EncodeToString(p)
	return strings.Join(parts, ".")
}

func TestUnknownKidRefreshIsRateLimited(t *testing.T) {
	is := newIssuer(t)
	c := newClock()
	a := oauthAuth(t, is, c, nil)

	if _, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "rsa1", good(is, c))); e != nil {
		t.Fatal(e)
	}
	if got := is.jwksHits.Load(); got != 1 {
		t.Fatalf("JWKS fetched %d times for the first token, want 1", got)
	}
	c.Add(31 * time.Second)
	_, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "nope", good(is, c)))
	if e == nil || e.Reason != "unknown_key" {
		t.Fatalf("unknown kid: %+v", e)
	}
	if got := is.jwksHits.Load(); got != 2 {
		t.Fatalf("JWKS fetched %d times after an unknown kid, want 2", got)
	}
	c.Add(29 * time.Second)
	_, e = authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "nope2", good(is, c)))
	if e == nil || e.Reason != "unknown_key" {
		t.Fatalf("second unknown kid: %+v", e)
	}
	if got := is.jwksHits.Load(); got != 2 {
		t.Fatalf("a second unknown kid within 30s fetched the JWKS again (%d fetches)", got)
	}

	// Rotation: the issuer publishes a new key; once 30s have passed, a token
	// signed with it makes the gateway fetch the set again and accept it.
	newKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	is.set(func(is *issuer) {
		is.keys = append(is.keys, jose.JSONWebKey{Key: newKey.Public(), KeyID: "ec2", Use: "sig"})
	})
	c.Add(time.Second)
	if _, e := authErr(t, a, "Bearer "+sign(t, newKey, jose.ES256, "ec2", good(is, c))); e != nil {
		t.Fatalf("rotated key refused: %+v", e)
	}
	if got := is.jwksHits.Load(); got != 3 {
		t.Fatalf("JWKS fetched %d times after rotation, want 3", got)
	}
}

func TestNoKidUsesTheOnlyUsableKey(t *testing.T) {
	is := newIssuer(t)
	c := newClock()
	a := oauthAuth(t, is, c, nil)
	// One RSA and one P-256 key: each algorithm has exactly one candidate.
	if _, e := authErr(t, a, "Bearer "+sign(t, ecKey, jose.ES256, "", good(is, c))); e != nil {
		t.Fatalf("ES256 without kid: %+v", e)
	}
	// Two P-256 keys: without a kid the choice would be a guess.
	second, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	is2 := newIssuer(t)
	is2.set(func(is *issuer) {
		is.keys = append(is.keys, jose.JSONWebKey{Key: second.Public(), KeyID: "ec2", Use: "sig"})
	})
	a2 := oauthAuth(t, is2, c, nil)
	if _, e := authErr(t, a2, "Bearer "+sign(t, ecKey, jose.ES256, "", good(is2, c))); e == nil || e.Reason != "unknown_key" {
		t.Fatalf("ES256 without kid and two keys: %+v", e)
	}
}

func TestConcurrentFirstTokensShareOneFetch(t *testing.T) {
	is := newIssuer(t)
	hold := make(chan struct{})
	is.set(func(is *issuer) { is.hold = hold })
	c := newClock()
	a := oauthAuth(t, is, c, nil)
	tok := "Bearer " + sign(t, rsaKey, jose.RS256, "rsa1", good(is, c))

	const n = 32
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			_, err := a.Authenticate(context.Background(), tok)
			errs <- err
		})
	}
	<-is.hit // the one fetch is in flight; every caller now waits for it
	close(hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("caller refused: %v", err)
		}
	}
	if got := is.jwksHits.Load(); got != 1 {
		t.Fatalf("%d concurrent first tokens made %d JWKS fetches, want 1", n, got)
	}
}

func TestIssuerUnreachable(t *testing.T) {
	is := newIssuer(t)
	c := newClock()
	is.set(func(is *issuer) { is.status = http.StatusBadGateway })
	a := oauthAuth(t, is, c, nil) // New must not need the issuer
	_, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "rsa1", good(is, c)))
	// 503, not invalid_token: the token may be good, the outage is ours.
	if e == nil || e.Status != http.StatusServiceUnavailable || e.Code != "" || e.Reason != "keys_unavailable" || e.RetryAfter != 30*time.Second {
		t.Fatalf("non-200 JWKS: %+v", e)
	}
	c.Add(10 * time.Second) // within the fetch rate limit: 20 s to go
	if _, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "rsa1", good(is, c))); e == nil || e.Status != http.StatusServiceUnavailable || e.RetryAfter != 20*time.Second {
		t.Fatalf("non-200 JWKS, 10 s later: %+v", e)
	}
	// A key the issuer may have added while it was down cannot be known
	// either, after keys were fetched before: 503 until a fetch works.
	is.set(func(is *issuer) { is.status = 0 })
	c.Add(21 * time.Second)
	if _, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "rsa1", good(is, c))); e != nil {
		t.Fatalf("after recovery: %+v", e)
	}
	is.set(func(is *issuer) { is.status = http.StatusBadGateway })
	c.Add(31 * time.Second)
	if _, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "rotated", good(is, c))); e == nil || e.Status != http.StatusServiceUnavailable || e.Reason != "keys_unavailable" {
		t.Fatalf("an unknown kid while the issuer is down: %+v", e)
	}
	if _, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "rsa1", good(is, c))); e != nil {
		t.Fatalf("a known kid while the issuer is down: %+v", e)
	}
	c.Add(31 * time.Second)
	// Recovers once the issuer does and the rate limit allows a new fetch.
	is.set(func(is *issuer) { is.status = 0 })
	c.Add(21 * time.Second)
	if _, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "rsa1", good(is, c))); e != nil {
		t.Fatalf("after recovery: %+v", e)
	}

	big := newIssuer(t)
	big.set(func(is *issuer) {
		is.rawJWKS = []byte(`{"keys":[],"pad":"` + strings.Repeat("x", 1<<20) + `"}`)
	})
	a = oauthAuth(t, big, c, nil)
	if _, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "rsa1", good(big, c))); e == nil || e.Reason != "keys_unavailable" {
		t.Fatalf("oversized JWKS: %+v", e)
	}
}

func TestJWKSSkipsKeysThatCannotVerify(t *testing.T) {
	is := newIssuer(t)
	c := newClock()
	secret := []byte("0123456789abcdef0123456789abcdef")
	// A symmetric key and a private key published by mistake must never be
	// used, and a key type this package does not know must not spoil the set.
	priv := jose.JSONWebKey{Key: ecKey, KeyID: "priv", Use: "sig"}
	privJSON, _ := priv.MarshalJSON()
	sym := jose.JSONWebKey{Key: secret, KeyID: "sym"}
	symJSON, _ := sym.MarshalJSON()
	pub := jose.JSONWebKey{Key: ecKey.Public(), KeyID: "ec1", Use: "sig"}
	pubJSON, _ := pub.MarshalJSON()
	is.set(func(is *issuer) {
		is.rawJWKS = []byte(`{"keys":[{"kty":"XYZ","kid":"odd"},` + string(symJSON) + `,` + string(privJSON) + `,` + string(pubJSON) + `]}`)
	})
	a := oauthAuth(t, is, c, func(o *auth.Options) { o.OAuth.Algorithms = []string{"ES256"} })
	if _, e := authErr(t, a, "Bearer "+sign(t, ecKey, jose.ES256, "ec1", good(is, c))); e != nil {
		t.Fatalf("the good key was lost: %+v", e)
	}
	if _, e := authErr(t, a, "Bearer "+sign(t, ecKey, jose.ES256, "priv", good(is, c))); e == nil || e.Reason != "unknown_key" {
		t.Fatalf("a private key in the JWKS was used: %+v", e)
	}
	tok := handmade(t, map[string]any{"alg": "HS256", "kid": "sym"}, good(is, c), hs256(secret))
	if _, e := authErr(t, a, "Bearer "+tok); e == nil || e.Reason != "algorithm" {
		t.Fatalf("HS256 with a published symmetric key: %+v", e)
	}
}

func TestDiscovery(t *testing.T) {
	c := newClock()
	for _, tc := range []struct {
		name        string
		oauth, oidc bool
		mdIssuer    string
		ok          bool
	}{
		{"RFC 8414", true, false, "", true},
		{"OpenID only", false, true, "", true},
		{"metadata names another issuer", true, true, "https://evil.example.com", false},
		{"no metadata", false, false, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := newIssuer(t)
			is.set(func(is *issuer) { is.oauthMD, is.oidcMD, is.mdIssuer = tc.oauth, tc.oidc, tc.mdIssuer })
			a := oauthAuth(t, is, c, func(o *auth.Options) { o.OAuth.JWKSURL = "" })
			_, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "rsa1", good(is, c)))
			if tc.ok && e != nil {
				t.Fatalf("refused: %+v", e)
			}
			if !tc.ok && (e == nil || e.Reason != "keys_unavailable") {
				t.Fatalf("got %+v, want keys_unavailable", e)
			}
			if tc.ok != (is.jwksHits.Load() == 1) {
				t.Fatalf("JWKS fetched %d times", is.jwksHits.Load())
			}
		})
	}
}

func TestRunFetchesKeysAndStops(t *testing.T) {
	is := newIssuer(t)
	c := newClock()
	a := oauthAuth(t, is, c, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		a.Run(ctx)
		close(done)
	}()
	<-is.hit // Run fetches the keys without any token asking
	// The first token uses (or waits for) Run's fetch instead of making one.
	tok := "Bearer " + sign(t, rsaKey, jose.RS256, "rsa1", good(is, c))
	if _, e := authErr(t, a, tok); e != nil {
		t.Fatal(e)
	}
	if got := is.jwksHits.Load(); got != 1 {
		t.Fatalf("JWKS fetched %d times, want 1 (by Run)", got)
	}
	cancel()
	<-done
}

func TestScopesFromClaims(t *testing.T) {
	is := newIssuer(t)
	c := newClock()
	a := oauthAuth(t, is, c, nil)
	cl := good(is, c)
	cl.Scope = "mcp:read  mcp:tools"
	cl.Scp = []string{"mcp:tools", "extra"}
	id, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "rsa1", cl))
	if e != nil {
		t.Fatal(e)
	}
	if want := []string{"extra", "mcp:read", "mcp:tools"}; !slices.Equal(id.Scopes, want) {
		t.Fatalf("scopes %q, want %q", id.Scopes, want)
	}
}

func BenchmarkAuthenticate(b *testing.B) {
	is := newIssuer(b)
	c := newClock()
	var tokens []string
	for i := range 100 {
		tokens = append(tokens, fmt.Sprintf("n%d:tok-0123456789ab-%032d", i, i))
	}
	a, err := auth.New(auth.Options{Tokens: tokens, Now: c.Now,
		OAuth: &auth.OAuth{Issuer: is.URL(), Resource: resource, JWKSURL: is.JWKS(), Leeway: 30 * time.Second}})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, header string }{
		{"static of 100", "Bearer tok-0123456789ab-" + fmt.Sprintf("%032d", 99)},
		{"RS256", "Bearer " + sign(b, rsaKey, jose.RS256, "rsa1", good(is, c))},
		{"ES256", "Bearer " + sign(b, ecKey, jose.ES256, "ec1", good(is, c))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := a.Authenticate(context.Background(), bc.header); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestJWTExpires: the identity carries when the token stops being
// accepted (exp plus the 30 s leeway), so a stream can end with its token;
// a static token's never expires.
func TestJWTExpires(t *testing.T) {
	is := newIssuer(t)
	c := newClock()
	a := oauthAuth(t, is, c, func(o *auth.Options) { o.Tokens = []string{"ci:tok-0123456789ab-ci"} })
	cl := good(is, c)
	exp := c.Now().Add(17 * time.Minute)
	cl.Expiry = jwt.NewNumericDate(exp)
	id, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "rsa1", cl))
	if e != nil {
		t.Fatal(e)
	}
	if want := exp.Add(30 * time.Second); !id.Expires.Equal(want) {
		t.Fatalf("Expires %v, want %v", id.Expires, want)
	}
	if id, e := authErr(t, a, "Bearer tok-0123456789ab-ci"); e != nil || !id.Expires.IsZero() {
		t.Fatalf("static token: identity %+v, error %v", id, e)
	}
}

func rs256(in []byte) []byte {
	d := sha256.Sum256(in)
	sig, err := rsa.SignPKCS1v15(rand.Reader, rsaKey, crypto.SHA256, d[:])
	if err != nil {
		panic(err)
	}
	return sig
}

// TestJWTType: a token whose typ says it is something other than an
// access token is refused; the types access tokens carry in practice pass.
func TestJWTType(t *testing.T) {
	is := newIssuer(t)
	c := newClock()
	a := oauthAuth(t, is, c, nil)
	for _, tc := range []struct {
		typ any // nil: no typ header
		ok  bool
	}{
		{nil, true},
		{"JWT", true},
		{"jwt", true},
		{"at+jwt", true},
		{"application/at+jwt", true},
		{"AT+JWT", true},
		{"id_token+jwt", false},
		{"logout+jwt", false},
		{"dpop+jwt", false},
		{"secevent+jwt", false},
		{"application/jose", false},
		{"", false},
		{5, false},
	} {
		h := map[string]any{"alg": "RS256", "kid": "rsa1"}
		if tc.typ != nil {
			h["typ"] = tc.typ
		}
		_, e := authErr(t, a, "Bearer "+handmade(t, h, good(is, c), rs256))
		if ok := e == nil; ok != tc.ok || !ok && e.Reason != "type" {
			t.Errorf("typ %v: error %+v, want success %v", tc.typ, e, tc.ok)
		}
	}
}

// TestJWTNoLeeway: a leeway of 0, which an operator may set, allows no
// skew at all: a token expired a second ago is refused, and one expiring
// now still passes.
func TestJWTNoLeeway(t *testing.T) {
	is := newIssuer(t)
	c := newClock()
	a := oauthAuth(t, is, c, func(o *auth.Options) { o.OAuth.Leeway = 0 })
	cl := good(is, c)
	cl.Expiry = jwt.NewNumericDate(c.Now().Add(-time.Second))
	if _, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "rsa1", cl)); e == nil || e.Reason != "expired" {
		t.Fatalf("a token expired 1 s ago with leeway 0: got %+v, want expired", e)
	}
	cl.Expiry = jwt.NewNumericDate(c.Now())
	id, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "rsa1", cl))
	if e != nil {
		t.Fatalf("a token expiring now: %v", e)
	}
	if !id.Expires.Equal(c.Now()) {
		t.Fatalf("Expires %v, want exp itself %v", id.Expires, c.Now())
	}
}

// TestEmptyJWKSKeepsKeys: a fetch that yields no usable key (an empty
// set, or only keys that cannot verify) fails as a junk document does: the
// keys in force stay, and it is logged above info.
func TestEmptyJWKSKeepsKeys(t *testing.T) {
	for name, raw := range map[string]string{
		"empty":           `{"keys":[]}`,
		"no signing keys": `{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"rsa1"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			is := newIssuer(t)
			c := newClock()
			logs := &records{}
			a := oauthAuth(t, is, c, func(o *auth.Options) { o.Logger = slog.New(logs) })
			token := "Bearer " + sign(t, rsaKey, jose.RS256, "rsa1", good(is, c))
			if _, e := authErr(t, a, token); e != nil {
				t.Fatal(e)
			}
			is.set(func(is *issuer) { is.rawJWKS = []byte(raw) })
			c.Add(31 * time.Second)
			// An unknown kid makes the gateway fetch the set again; that
			// fetch failing, the key cannot be known: 503, not
			// invalid_token.
			if _, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "new", good(is, c))); e == nil || e.Reason != "keys_unavailable" || e.Status != http.StatusServiceUnavailable {
				t.Fatalf("unknown kid: %+v", e)
			}
			if got := is.jwksHits.Load(); got != 2 {
				t.Fatalf("%d fetches, want 2", got)
			}
			if _, e := authErr(t, a, "Bearer "+sign(t, rsaKey, jose.RS256, "rsa1", good(is, c))); e != nil {
				t.Fatalf("after a fetch with no usable key, the previous keys are gone: %+v", e)
			}
			if !logs.above(slog.LevelWarn, "no public signing key") {
				t.Error("the fetch with no usable key was not logged at warning level or above")
			}
		})
	}
}
