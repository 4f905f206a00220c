package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"go.uber.org/goleak"

	"github.com/stdiomcp/gateway/auth"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Keys are generated once: RSA generation is slow under -race, and every test
// that needs a fresh key pair makes its own.
var (
	rsaKey = mustRSA()
	ecKey  = mustEC()
)

func mustRSA() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
}

func mustEC() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}

// clock is a settable time source for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_800_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// issuer is a real authorization server's public side: a JWKS endpoint and
// RFC 8414 / OpenID metadata, served over HTTP.
type issuer struct {
	srv      *httptest.Server
	jwksHits atomic.Int64
	hit      chan struct{} // receives (without blocking) on every JWKS request

	mu       sync.Mutex
	keys     []jose.JSONWebKey
	rawJWKS  []byte // when set, served instead of keys
	status   int    // when set, the JWKS answers with it
	hold     chan struct{}
	oauthMD  bool   // serve RFC 8414 metadata
	oidcMD   bool   // serve OpenID metadata
	mdIssuer string // "": the server's own URL
}

func newIssuer(t testing.TB) *issuer {
	is := &issuer{hit: make(chan struct{}, 100)}
	is.keys = []jose.JSONWebKey{
		{Key: rsaKey.Public(), KeyID: "rsa1", Use: "sig", Algorithm: "RS256"},
		{Key: ecKey.Public(), KeyID: "ec1", Use: "sig", Algorithm: "ES256"},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jwks", is.serveJWKS)
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) { is.serveMD(w, is.oauthMD) })
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) { is.serveMD(w, is.oidcMD) })
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

func (is *issuer) URL() string  { return is.srv.URL }
func (is *issuer) JWKS() string { return is.srv.URL + "/jwks" }

func (is *issuer) serveJWKS(w http.ResponseWriter, r *http.Request) {
	is.jwksHits.Add(1)
	select {
	case is.hit <- struct{}{}:
	default:
	}
	is.mu.Lock()
	hold, status, raw := is.hold, is.status, is.rawJWKS
	body, err := json.Marshal(jose.JSONWebKeySet{Keys: is.keys})
	is.mu.Unlock()
	if hold != nil {
		<-hold
	}
	if status != 0 {
		w.WriteHeader(status)
		return
	}
	if raw != nil {
		body = raw
	}
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

func (is *issuer) serveMD(w http.ResponseWriter, on bool) {
	is.mu.Lock()
	iss := is.mdIssuer
	is.mu.Unlock()
	if !on {
		http.NotFound(w, nil)
		return
	}
	if iss == "" {
		iss = is.srv.URL
	}
	json.NewEncoder(w).Encode(map[string]string{"issuer": iss, "jwks_uri": is.JWKS()})
}

func (is *issuer) set(f func(is *issuer)) {
	is.mu.Lock()
	defer is.mu.Unlock()
	f(is)
}

const resource = "https://mcp.example.com/mcp"

// oauthAuth builds an Authenticator that trusts is, on the given clock.
func oauthAuth(t *testing.T, is *issuer, c *clock, edit func(*auth.Options)) *auth.Authenticator {
	t.Helper()
	opts := auth.Options{
		OAuth: &auth.OAuth{Issuer: is.URL(), Resource: resource, JWKSURL: is.JWKS(), Leeway: 30 * time.Second},
		Now:   c.Now,
	}
	if edit != nil {
		edit(&opts)
	}
	a, err := auth.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

// claims are a token's claims; the zero fields are left out of the token.
type claims struct {
	jwt.Claims
	Scope string   `json:"scope,omitempty"`
	Scp   []string `json:"scp,omitempty"`
}

// good returns valid claims for is at the clock's time.
func good(is *issuer, c *clock) claims {
	now := c.Now()
	return claims{Claims: jwt.Claims{
		Issuer:   is.URL(),
		Subject:  "alice",
		Audience: jwt.Audience{"https://other.example.com", resource},
		Expiry:   jwt.NewNumericDate(now.Add(time.Hour)),
		IssuedAt: jwt.NewNumericDate(now),
	}}
}

func sign(t testing.TB, key any, alg jose.SignatureAlgorithm, kid string, cl claims) string {
	t.Helper()
	jwk := jose.JSONWebKey{Key: key, KeyID: kid}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jwk}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(cl).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// authErr runs Authenticate and returns its *Error (nil on success).
func authErr(t *testing.T, a *auth.Authenticator, header string) (auth.Identity, *auth.Error) {
	t.Helper()
	id, err := a.Authenticate(context.Background(), header)
	if err == nil {
		return id, nil
	}
	var e *auth.Error
	if !errors.As(err, &e) {
		t.Fatalf("Authenticate error %T %v is not *auth.Error", err, err)
	}
	return id, e
}

// writeFile replaces path atomically (write then rename), as a deployment
// tool or a Secret mount does, so a poll never reads half a file.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
