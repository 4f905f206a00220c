// Package auth decides who may call the gateway and what each caller may use.
//
// Callers present a bearer token: either one of the static tokens (from the
// environment or a file that is re-read when it changes), or, with OAuth on, a
// JWT access token from one issuer for this resource (RFC 9068 style), checked
// against the issuer's published keys. A policy file maps token names and JWT
// scopes to the tools, resources and prompts they may use.
//
// Static token entries may hold the token's SHA-256 ("sha256:HEX") instead
// of the token, so the tokens file need not hold anything a reader could
// call the gateway with (HashToken makes such entries). On a reload a tokens
// file that is gone holds no tokens (fail closed), while one that does not
// parse leaves the previous set in force. The keys are fetched following at
// most 3 redirects, never from https to http. A JWT's typ, when present, must
// be one an access token carries, and its exp is the Identity's Expires.
//
// Resource URIs are matched as strings, with '*' spanning '/'. Since the
// child may map URIs to file paths, a caller whose resources are restricted
// is refused any URI with a "." or ".." segment, an encoded '.', '/', '\' or
// NUL, a backslash or a control character, whatever its patterns; scheme and
// host match in any letter case.
//
// Answers follow RFC 6750 §3.1: no credentials get 401 with no error code, a
// malformed Authorization header 400 invalid_request, a bad token 401
// invalid_token. When the issuer's keys cannot be fetched, a JWT gets 503
// with no error code (Status 503, RetryAfter set): the request must not go
// through, but invalid_token would tell the client to discard a token that
// may well be good and start the OAuth flow again over an outage on the
// server's side. Static-token callers are still served. The cause is logged
// at error level for the operator.
//
// Locks: Authenticator.reloadMu serialises reloads and guards the poll
// bookkeeping; jwks.mu guards the key fetch bookkeeping. Neither is held while
// the other is taken, and jwks.mu is never held during network I/O. Requests
// take no lock: they read the current token set, policy and keys through
// atomic pointers, so a reload replaces them all at once.
package auth

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Identity is an authenticated caller.
type Identity struct {
	Name   string   // the static token's name or the JWT's subject: what logs, metrics and rate limits key on; never the credential
	Kind   string   // "token" or "jwt"; "none" when authentication is off
	Scopes []string // a JWT's scopes ("scope" and "scp" claims, merged); nil for tokens
	Rules  Rules    // what it may use, resolved from the policy when it authenticated

	// Expires is when a JWT stops being accepted, its exp plus the
	// leeway: a stream opened with the token should end then, or the token
	// would outlive itself (and a token accepted within the leeway must not
	// be ended before it starts). Zero for static tokens, which end only
	// when they are removed.
	Expires time.Time
}

// Options configure an Authenticator.
type Options struct {
	Tokens     []string      // GATEWAY_AUTH_TOKENS entries ("name:token", "token", "name:sha256:HEX" or "sha256:HEX")
	TokensFile string        // GATEWAY_AUTH_TOKENS_FILE
	PolicyFile string        // GATEWAY_AUTH_POLICY_FILE
	Poll       time.Duration // how often Run checks the files for change (0: 5s)
	OAuth      *OAuth        // nil: no JWTs
	Logger     *slog.Logger  // nil: discard
	Client     *http.Client  // for JWKS and discovery; nil: one with a 10s timeout. Either way, redirects are limited (see checkRedirect)

	// Now is the clock for token times and the JWKS fetch rate limit (nil:
	// time.Now); tests move it instead of sleeping.
	Now func() time.Time
	// OnReload, when set, is called after every reload attempt (Reload, or a
	// change Run's polling found) with its error; tests and metrics use it
	// to learn that a reload happened without watching logs.
	OnReload func(error)
}

// OAuth turns on JWT access tokens.
type OAuth struct {
	Issuer     string        // the iss tokens must carry; https (http only for localhost)
	Resource   string        // this gateway's resource URL; aud must contain it exactly
	JWKSURL    string        // "": discovered from the issuer's metadata
	Algorithms []string      // nil: RS256, ES256
	Leeway     time.Duration // clock skew allowed on exp, nbf, iat; 0 allows none (the gateway's 30s default is its configuration's)
	Scopes     []string      // scopes_supported in the Protected Resource Metadata
}

// Error is an authentication failure. Its text is safe to show the client: it
// says what was wrong and never repeats the credential.
type Error struct {
	Status      int    // 401, 400 for invalid_request (RFC 6750 §3.1), or 503 when the issuer's keys are unavailable
	Code        string // "" when no credentials were sent (RFC 6750 §3.1) or with 503, "invalid_token", or "invalid_request"
	Description string // for error_description and the response body
	Reason      string // a short stable word (expired, audience, unknown_key...) for metrics labels and logs

	// RetryAfter, with 503, is how long until a token may make the
	// gateway fetch the keys again: asking sooner gets 503 again.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return "auth: " + e.Description }

func invalid(reason, desc string) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: desc, Reason: reason}
}

// Authenticator checks credentials. It is safe for concurrent use.
type Authenticator struct {
	opts     Options
	log      *slog.Logger
	enabled  bool
	verifier *verifier // nil when OAuth is off
	meta     metadata

	state atomic.Pointer[state]

	reloadMu sync.Mutex
	seenTok  stamp // what polling last saw of each file, under reloadMu
	seenPol  stamp
}

// state is one consistent reading of the tokens and the policy; a reload
// replaces it whole, so a request never sees new tokens with an old policy.
type state struct {
	changed            chan struct{} // closed when another state replaces this one
	tokens             *tokenSet
	policy             *policy
	tokStamp, polStamp stamp
	tokFileGone        bool // the tokens file was missing when this state was read
}

// New checks the configuration and reads the files once. It makes no network
// request: the issuer's keys are fetched on the first JWT and by Run, so the
// gateway can start while the issuer is unreachable.
func New(opts Options) (*Authenticator, error) {
	a := &Authenticator{opts: opts, log: opts.Logger}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.opts.Poll == 0 {
		a.opts.Poll = 5 * time.Second
	}
	if a.opts.Poll < 0 {
		return nil, errors.New("auth: the poll interval is negative")
	}
	if a.opts.Now == nil {
		a.opts.Now = time.Now
	}
	if a.opts.Client == nil {
		a.opts.Client = &http.Client{Timeout: fetchTimeout, CheckRedirect: checkRedirect}
	} else {
		// A copy, so the caller's client keeps its own behaviour
		// elsewhere; its own redirect policy still applies after ours.
		c := *a.opts.Client
		theirs := c.CheckRedirect
		c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			if err := checkRedirect(req, via); err != nil {
				return err
			}
			if theirs != nil {
				return theirs(req, via)
			}
			return nil
		}
		a.opts.Client = &c
	}
	a.enabled = len(opts.Tokens) > 0 || opts.TokensFile != "" || opts.OAuth != nil
	if !a.enabled && opts.PolicyFile != "" {
		// A policy nobody is authenticated against would protect nothing
		// while looking as if it did.
		return nil, errors.New("auth: GATEWAY_AUTH_POLICY_FILE needs callers to apply to: set GATEWAY_AUTH_TOKENS, GATEWAY_AUTH_TOKENS_FILE or GATEWAY_OAUTH_ISSUER")
	}
	if opts.OAuth != nil {
		v, m, err := newOAuth(*opts.OAuth, a.opts.Client, a.log, a.opts.Now)
		if err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
		a.verifier, a.meta = v, m
	}
	st, err := a.load(false)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	st.changed = make(chan struct{})
	a.state.Store(st)
	a.seenTok, a.seenPol = st.tokStamp, st.polStamp
	st.policy.warnUnknownTokens(a.log, st.tokens.names())
	return a, nil
}

func newOAuth(o OAuth, client *http.Client, log *slog.Logger, now func() time.Time) (*verifier, metadata, error) {
	if err := checkURL(o.Issuer, "the issuer"); err != nil {
		return nil, metadata{}, err
	}
	if o.Resource == "" {
		return nil, metadata{}, errors.New("OAuth needs the resource URL (GATEWAY_OAUTH_RESOURCE)")
	}
	if err := checkURL(o.Resource, "the resource URL"); err != nil {
		return nil, metadata{}, err
	}
	if o.JWKSURL != "" {
		if err := checkURL(o.JWKSURL, "the JWKS URL"); err != nil {
			return nil, metadata{}, err
		}
	}
	if o.Leeway < 0 {
		return nil, metadata{}, errors.New("the OAuth leeway is negative")
	}
	names := o.Algorithms
	if names == nil {
		names = []string{"RS256", "ES256"}
	}
	var algs []jose.SignatureAlgorithm
	for _, n := range names {
		n = strings.TrimSpace(n)
		switch {
		case strings.EqualFold(n, "none"):
			return nil, metadata{}, errors.New(`the algorithm "none" is refused: tokens must be signed`)
		case strings.HasPrefix(strings.ToUpper(n), "HS"):
			return nil, metadata{}, fmt.Errorf("the algorithm %q is refused: HMAC needs a shared secret, and would let a public key be used as one", n)
		case !asymmetric[n]:
			return nil, metadata{}, fmt.Errorf("the algorithm %q is not supported", n)
		}
		algs = append(algs, jose.SignatureAlgorithm(n))
	}
	if len(algs) == 0 {
		return nil, metadata{}, errors.New("no OAuth algorithm is allowed")
	}
	for _, s := range o.Scopes {
		if !validScope(s) {
			return nil, metadata{}, fmt.Errorf("%q is not a scope (RFC 6749 §3.3)", s)
		}
	}
	keys := &jwks{issuer: o.Issuer, client: client, log: log, now: now, jwksURL: o.JWKSURL}
	v := &verifier{issuer: o.Issuer, resource: o.Resource, algs: algs, leeway: o.Leeway, keys: keys, now: now}
	m, err := newMetadata(o)
	return v, m, err
}

// Enabled reports whether any credential source is configured. When it is
// not, Authenticate lets everyone in with every right, as the gateway did
// before authentication existed.
func (a *Authenticator) Enabled() bool { return a.enabled }

// Tokens returns how many static tokens are loaded.
func (a *Authenticator) Tokens() int { return a.state.Load().tokens.len() }

// Authenticate checks the raw Authorization header value. Errors are *Error.
func (a *Authenticator) Authenticate(ctx context.Context, authorization string) (Identity, error) {
	if !a.enabled {
		return Identity{Kind: "none", Rules: All()}, nil
	}
	if strings.TrimSpace(authorization) == "" {
		return Identity{}, &Error{Status: http.StatusUnauthorized, Description: "no credentials were sent", Reason: "missing"}
	}
	// Another scheme is a client that does not know Bearer is wanted: a
	// plain challenge, with no error code (RFC 6750 §3.1).
	if scheme, _, _ := strings.Cut(authorization, " "); !strings.EqualFold(scheme, "Bearer") {
		return Identity{}, &Error{Status: http.StatusUnauthorized, Description: "only Bearer credentials are accepted", Reason: "scheme"}
	}
	token, err := bearer(authorization)
	if err != nil {
		desc := strings.TrimPrefix(err.Error(), errMalformed.Error()+": ")
		return Identity{}, &Error{Status: http.StatusBadRequest, Code: "invalid_request", Description: desc, Reason: "malformed"}
	}
	st := a.state.Load()
	if name, ok := st.tokens.lookup(token); ok {
		return Identity{Name: name, Kind: "token", Rules: st.policy.forToken(name)}, nil
	}
	if a.verifier == nil {
		return Identity{}, invalid("unknown_token", "the token is not valid")
	}
	v, e := a.verifier.verify(ctx, token)
	if e != nil {
		return Identity{}, e
	}
	return Identity{Name: v.subject, Kind: "jwt", Scopes: v.scopes, Expires: v.expires.Add(a.verifier.leeway), Rules: st.policy.forScopes(v.scopes)}, nil
}

// load reads every source into a new state; nothing is kept from a failed
// read. On a reload, a tokens file that no longer exists counts as empty:
// deleting the file (or unmounting its Secret) is how an operator may well
// try to revoke every token in it, and keeping them would make that
// attempt fail open. A file that exists but does not parse is different:
// it is most likely being edited, so the reload fails and the previous set
// stays. At start a missing file is an error, since it is more likely a
// wrong path than a revocation.
func (a *Authenticator) load(reload bool) (*state, error) {
	b := newTokenBuilder()
	for i, t := range a.opts.Tokens {
		if err := b.add(t, fmt.Sprintf("GATEWAY_AUTH_TOKENS entry %d", i+1)); err != nil {
			return nil, err
		}
	}
	st := &state{}
	if p := a.opts.TokensFile; p != "" {
		data, s, err := readFile(p)
		switch {
		case reload && errors.Is(err, fs.ErrNotExist):
			st.tokStamp, st.tokFileGone = missingStamp(), true
		case err != nil:
			return nil, fmt.Errorf("the tokens file: %w", err)
		default:
			if err := b.addFile(data, p); err != nil {
				return nil, err
			}
			st.tokStamp = s
		}
	}
	st.tokens = &b.set
	if p := a.opts.PolicyFile; p != "" {
		data, s, err := readFile(p)
		if err != nil {
			return nil, fmt.Errorf("the policy file: %w", err)
		}
		pol, err := parsePolicy(data)
		if err != nil {
			return nil, fmt.Errorf("the policy file %s: %w", p, err)
		}
		st.policy, st.polStamp = pol, s
	}
	return st, nil
}

// Changed is closed when a reload puts other tokens or another policy in
// force; call it again for the next change. A request that outlives a
// reload checks its credentials again then (a revoked token must not keep
// a stream open).
func (a *Authenticator) Changed() <-chan struct{} { return a.state.Load().changed }

// Reload re-reads both files now (on SIGHUP). On error the previous tokens
// and policy stay in force and the error is returned. When Reload returns
// nil, the very next Authenticate sees the new set: a revoked token fails.
// A tokens file that is gone is no error: it holds no tokens any more (the
// environment's stay), and a warning says so.
func (a *Authenticator) Reload() error {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	return a.reloadLocked()
}

func (a *Authenticator) reloadLocked() error {
	st, err := a.load(true)
	if err != nil {
		err = fmt.Errorf("auth: reload: %w", err)
		a.log.Error("auth: reload failed; the previous tokens and policy stay in force", "error", err)
	} else {
		st.changed = make(chan struct{})
		close(a.state.Swap(st).changed)
		a.seenTok, a.seenPol = st.tokStamp, st.polStamp
		if st.tokFileGone {
			a.log.Warn("auth: the tokens file is gone: none of its tokens is accepted until it is back", "path", a.opts.TokensFile)
		}
		a.log.Info("auth: tokens and policy reloaded", "tokens", st.tokens.len(), "policy", st.policy != nil)
		st.policy.warnUnknownTokens(a.log, st.tokens.names())
	}
	if a.opts.OnReload != nil {
		a.opts.OnReload(err)
	}
	return err
}

// poll reloads when a watched file changed since it was last seen.
func (a *Authenticator) poll() {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	tok := a.opts.TokensFile != "" && changed(a.opts.TokensFile, &a.seenTok)
	pol := a.opts.PolicyFile != "" && changed(a.opts.PolicyFile, &a.seenPol)
	if tok || pol {
		_ = a.reloadLocked() // logged, and reported to OnReload
	}
}

// changed reports whether the file differs from seen, and records what it
// saw, so a file that stays broken (or missing) is reported once, not on
// every poll. A stat that differs with the same content (touch, or a
// Secret remount of identical data) is not a change.
func changed(path string, seen *stamp) bool {
	missing := missingStamp()
	st, err := statFile(path)
	if err != nil {
		was := *seen
		*seen = missing
		return was != missing
	}
	if st.sameStat(*seen) {
		return false
	}
	_, full, err := readFile(path)
	if err != nil {
		*seen = missing
		return true
	}
	same := full.sum == seen.sum
	*seen = full
	return !same
}

// Run polls the files and refreshes the issuer's keys (every hour, or every
// 30s while none could be fetched) until ctx ends. It returns when ctx is
// done and leaves no goroutine behind.
func (a *Authenticator) Run(ctx context.Context) {
	var fileTick <-chan time.Time
	if a.opts.TokensFile != "" || a.opts.PolicyFile != "" {
		t := time.NewTicker(a.opts.Poll)
		defer t.Stop()
		fileTick = t.C
	}
	var keyTick <-chan time.Time
	var keyTimer *time.Timer
	if a.verifier != nil {
		keyTimer = time.NewTimer(0)
		defer keyTimer.Stop()
		keyTick = keyTimer.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-fileTick:
			a.poll()
		case <-keyTick:
			next := keysMaxAge
			if err := a.verifier.keys.refresh(ctx, true); err != nil {
				next = minRefresh
			}
			keyTimer.Reset(next)
		}
	}
}
