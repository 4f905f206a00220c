package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

const (
	// maxJWKSBytes bounds a JWKS or metadata document (a real one is a few KiB).
	maxJWKSBytes = 1 << 20
	// minRefresh is the least time between two fetches that a token can
	// cause: tokens with made-up kids must not turn the gateway into an
	// amplifier against the issuer.
	minRefresh = 30 * time.Second
	// keysMaxAge is how often Run refreshes keys that are in use, so a key
	// the issuer withdrew stops being accepted within the hour.
	keysMaxAge = time.Hour
	// fetchTimeout bounds one fetch even when the caller's client has none.
	fetchTimeout = 10 * time.Second
)

// maxRedirects is how many redirects one fetch of keys or metadata follows.
// Issuers redirect once or twice at most (a new path, a CDN); a longer chain
// is a loop or someone else's idea.
const maxRedirects = 3

// checkRedirect is the redirect policy of key and metadata fetches. The keys
// decide which tokens are genuine, so they must come over a channel at least
// as safe as the configured URL: a redirect from https to plain http would let
// anyone on the path serve keys of their own. For the same reason a redirect
// may lead to plain http only from plain http and only to a loopback host,
// which is all the configuration itself allows (checkURL).
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	switch to, from := req.URL, via[len(via)-1].URL; {
	case to.Scheme == "https":
	case to.Scheme == "http" && from.Scheme == "https":
		return errors.New("refused a redirect from https to http")
	case to.Scheme == "http" && loopback(to.Hostname()):
	default:
		return fmt.Errorf("refused a redirect to %s://%s: only https, or http on a loopback host", to.Scheme, to.Host)
	}
	return nil
}

var (
	errKeysUnavailable = errors.New("the issuer's keys are unavailable")
	errRateLimited     = errors.New("keys were fetched less than 30s ago")
	errNoKeys          = errors.New("the JWKS holds no public signing key")
)

// keySet is one fetched JWKS: only public, typed keys that may sign.
type keySet struct {
	keys []jose.JSONWebKey
}

// jwks fetches and caches the issuer's keys. mu guards inflight, last and
// jwksURL and is never held during a fetch; concurrent callers that need keys
// wait on the one fetch in flight instead of starting their own.
type jwks struct {
	issuer  string
	client  *http.Client
	log     *slog.Logger
	now     func() time.Time
	cur     atomic.Pointer[keySet]
	fetches atomic.Int64 // attempts, for tests and logs

	mu       sync.Mutex
	inflight *flight
	last     time.Time // when the last fetch started
	failed   bool      // the last fetch that ended failed: the keys in force may be stale
	jwksURL  string    // configured or discovered; "" until discovered
}

type flight struct {
	done chan struct{}
	err  error
}

// refresh fetches the keys unless another fetch is in flight (then it waits
// for that one) or, unless forced, one started less than minRefresh ago.
func (j *jwks) refresh(ctx context.Context, force bool) error {
	j.mu.Lock()
	if f := j.inflight; f != nil {
		j.mu.Unlock()
		select {
		case <-f.done:
			return f.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	now := j.now()
	if !force && !j.last.IsZero() && now.Sub(j.last) < minRefresh {
		j.mu.Unlock()
		return errRateLimited
	}
	f := &flight{done: make(chan struct{})}
	j.inflight, j.last = f, now
	j.mu.Unlock()

	// A fetch for a request is shared by every request waiting on it, so
	// the first one's client going away must not cancel it; Run's fetches
	// (forced) end with Run.
	fetchCtx := ctx
	if !force {
		fetchCtx = context.WithoutCancel(ctx)
	}
	f.err = j.fetch(fetchCtx)
	j.mu.Lock()
	j.inflight, j.failed = nil, f.err != nil
	j.mu.Unlock()
	close(f.done)
	if f.err != nil {
		j.log.Error("auth: fetching the issuer's keys failed", "issuer", j.issuer, "error", f.err)
	}
	return f.err
}

// stale reports whether the last fetch failed, so that a key the issuer
// added since the keys in force were fetched cannot be known.
func (j *jwks) stale() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.failed
}

// retryIn is how long until a token may make the keys be fetched again
// (at least a second, as Retry-After counts in seconds).
func (j *jwks) retryIn() time.Duration {
	j.mu.Lock()
	defer j.mu.Unlock()
	return max(j.last.Add(minRefresh).Sub(j.now()), time.Second)
}

func (j *jwks) fetch(ctx context.Context) error {
	j.fetches.Add(1)
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	j.mu.Lock()
	u := j.jwksURL
	j.mu.Unlock()
	if u == "" {
		var err error
		if u, err = j.discover(ctx); err != nil {
			return err
		}
		j.mu.Lock()
		j.jwksURL = u
		j.mu.Unlock()
	}
	body, err := j.get(ctx, u)
	if err != nil {
		return err
	}
	set, err := parseJWKS(body, j.log)
	if err != nil {
		return fmt.Errorf("%s: %w", u, err)
	}
	if len(set.keys) == 0 {
		// Storing it would refuse every token until the next good
		// fetch, an hour away: a set with nothing to verify with is
		// an issuer's mishap (a deploy, a CDN's error page as JSON),
		// not a revocation, so it fails as a document that is no
		// JWKS does, and the keys in force stay.
		return fmt.Errorf("%s: %w", u, errNoKeys)
	}
	j.cur.Store(set)
	j.log.Info("auth: issuer keys loaded", "issuer", j.issuer, "keys", len(set.keys))
	return nil
}

// discover finds jwks_uri in the issuer's metadata: RFC 8414 first (the
// well-known segment goes before the issuer's path), then OpenID Connect
// Discovery (appended after it). The document must name the configured
// issuer, so a redirect or a shared host cannot substitute another one's keys.
func (j *jwks) discover(ctx context.Context) (string, error) {
	base, path := splitIssuer(j.issuer)
	candidates := []string{
		base + "/.well-known/oauth-authorization-server" + path,
		strings.TrimSuffix(j.issuer, "/") + "/.well-known/openid-configuration",
	}
	var errs []error
	for _, u := range candidates {
		body, err := j.get(ctx, u)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var md struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := json.Unmarshal(body, &md); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u, err))
			continue
		}
		if md.Issuer != j.issuer {
			errs = append(errs, fmt.Errorf("%s: the metadata names issuer %q", u, md.Issuer))
			continue
		}
		if err := checkURL(md.JWKSURI, "jwks_uri"); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u, err))
			continue
		}
		return md.JWKSURI, nil
	}
	return "", fmt.Errorf("discovering the issuer's jwks_uri: %w", errors.Join(errs...))
}

// splitIssuer returns scheme://host and the path of an issuer URL (already
// validated by New), without a trailing slash on the path.
func splitIssuer(issuer string) (string, string) {
	rest := issuer[strings.Index(issuer, "://")+3:]
	i := strings.IndexByte(rest, '/')
	if i < 0 {
		return issuer, ""
	}
	cut := len(issuer) - len(rest) + i
	return issuer[:cut], strings.TrimSuffix(issuer[cut:], "/")
}

func (j *jwks) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := j.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: status %d", u, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", u, maxJWKSBytes)
	}
	return body, nil
}

// parseJWKS keeps the keys that can verify a signature. Each key is parsed on
// its own so that one key of a type this package does not know (an issuer may
// publish encryption or post-quantum keys next to its signing keys) does not
// take the whole set down; such keys are skipped. Symmetric and private keys
// are never used: a JWKS is public, so either would be a forgery waiting to
// happen.
func parseJWKS(body []byte, log *slog.Logger) (*keySet, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("not a JWKS: %w", err)
	}
	set := &keySet{}
	for i, raw := range doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil {
			log.Warn("auth: skipping a key of the issuer's JWKS", "index", i, "error", err)
			continue
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		switch k.Key.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
			set.keys = append(set.keys, k)
		default:
			log.Warn("auth: skipping a key of the issuer's JWKS that is not a public signing key", "index", i, "kid", k.KeyID)
		}
	}
	return set, nil
}

// usable reports whether k may verify a signature made with alg. The key's
// type must fit the algorithm, so no key is ever fed to a verifier of another
// family.
func usable(k jose.JSONWebKey, alg string) bool {
	if k.Algorithm != "" && k.Algorithm != alg {
		return false
	}
	switch key := k.Key.(type) {
	case *rsa.PublicKey:
		// 2048 bits is the floor of current guidance (NIST SP 800-131A).
		return (strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")) && key.N.BitLen() >= 2048
	case *ecdsa.PublicKey:
		switch alg {
		case "ES256":
			return key.Curve == elliptic.P256()
		case "ES384":
			return key.Curve == elliptic.P384()
		case "ES512":
			return key.Curve == elliptic.P521()
		}
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

// pick chooses the key for a token: by kid when it has one; without a kid,
// the only key usable for alg, if there is exactly one.
func (s *keySet) pick(kid, alg string) (jose.JSONWebKey, bool) {
	var found []jose.JSONWebKey
	for _, k := range s.keys {
		if (kid == "" || k.KeyID == kid) && usable(k, alg) {
			found = append(found, k)
		}
	}
	if len(found) != 1 {
		return jose.JSONWebKey{}, false
	}
	return found[0], true
}
