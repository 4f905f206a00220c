package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// asymmetric lists the algorithms that may be configured. HMAC is absent on
// purpose: the gateway holds only the issuer's public keys, and a verifier
// that accepts HS* can be tricked into using a public key as the HMAC secret.
// "none" is absent for the obvious reason.
var asymmetric = map[string]bool{
	"RS256": true, "RS384": true, "RS512": true,
	"PS256": true, "PS384": true, "PS512": true,
	"ES256": true, "ES384": true, "ES512": true,
	"EdDSA": true,
}

// verifier checks JWT access tokens from one issuer for one resource.
type verifier struct {
	issuer   string
	resource string
	algs     []jose.SignatureAlgorithm
	leeway   time.Duration
	keys     *jwks
	now      func() time.Time
}

// scopeList reads a scope claim either as RFC 8693's space-separated string
// or as an array, since issuers differ ("scp" is an array at some and a
// string at others).
type scopeList []string

func (s *scopeList) UnmarshalJSON(b []byte) error {
	var str string
	if err := json.Unmarshal(b, &str); err == nil {
		*s = strings.Fields(str)
		return nil
	}
	var arr []string
	if err := json.Unmarshal(b, &arr); err != nil {
		return errors.New("a scope claim is neither a string nor an array of strings")
	}
	*s = arr
	return nil
}

type scopeClaims struct {
	Scope scopeList `json:"scope"`
	Scp   scopeList `json:"scp"`
}

// verified is what a valid token says about its bearer.
type verified struct {
	subject string
	scopes  []string
	expires time.Time
}

// verify returns what the token says, or an *Error saying what was wrong
// with it.
func (v *verifier) verify(ctx context.Context, raw string) (verified, *Error) {
	alg, ok := peekAlg(raw)
	if !ok {
		return verified{}, invalid("not_jwt", "the token is not valid")
	}
	if !slices.Contains(v.algs, jose.SignatureAlgorithm(alg)) {
		return verified{}, invalid("algorithm", "the token's signing algorithm is not accepted")
	}
	// The allowed list, not the token's header, decides which verifiers
	// can run: that is what keeps "none" and HMAC out.
	tok, err := jwt.ParseSigned(raw, v.algs)
	if err != nil || len(tok.Headers) != 1 {
		return verified{}, invalid("malformed_jwt", "the token is not a well-formed JWT")
	}
	h := tok.Headers[0]
	if !accessTokenType(h.ExtraHeaders[jose.HeaderType]) {
		return verified{}, invalid("type", "the token is not an access token (typ)")
	}
	key, e := v.key(ctx, h.KeyID, h.Algorithm)
	if e != nil {
		return verified{}, e
	}
	// Claims with no destination only checks the signature; the payload is
	// then decoded separately so that a bad signature and a claim of the
	// wrong type get different answers.
	if err := tok.Claims(key.Key); err != nil {
		return verified{}, invalid("signature", "the token's signature is invalid")
	}
	var c jwt.Claims
	var sc scopeClaims
	if err := tok.UnsafeClaimsWithoutVerification(&c, &sc); err != nil {
		return verified{}, invalid("claims", "the token's claims are malformed")
	}
	if c.Expiry == nil {
		return verified{}, invalid("no_exp", "the token has no expiry (exp)")
	}
	err = c.ValidateWithLeeway(jwt.Expected{
		Issuer:      v.issuer,
		AnyAudience: jwt.Audience{v.resource},
		Time:        v.now(),
	}, v.leeway)
	switch {
	case err == nil:
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return verified{}, invalid("issuer", "the token is from another issuer")
	case errors.Is(err, jwt.ErrInvalidAudience):
		return verified{}, invalid("audience", "the token is not for this resource (aud)")
	case errors.Is(err, jwt.ErrExpired):
		return verified{}, invalid("expired", "the token has expired")
	case errors.Is(err, jwt.ErrNotValidYet):
		return verified{}, invalid("not_yet_valid", "the token is not valid yet (nbf)")
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return verified{}, invalid("issued_in_future", "the token was issued in the future (iat)")
	default:
		return verified{}, invalid("claims", "the token's claims are not valid")
	}
	if c.Subject == "" {
		return verified{}, invalid("no_sub", "the token has no subject (sub)")
	}
	scopes := slices.Concat([]string(sc.Scope), []string(sc.Scp))
	slices.Sort(scopes)
	return verified{subject: c.Subject, scopes: slices.Compact(scopes), expires: c.Expiry.Time()}, nil
}

// accessTokenType reports whether a JWS "typ" header allows the token to be
// an access token. RFC 9068 §4 asks for "at+jwt", yet most issuers still
// send "JWT" or nothing, and refusing those would refuse them all. What
// explicit typing (RFC 8725 §3.11) can still do here is keep out tokens that
// say they are something else: an ID token or logout token typed by its
// issuer, a DPoP proof, a security event. So a missing typ, "JWT" and
// "at+jwt" pass (with or without "application/", in any letter case, as
// RFC 7515 §4.1.9 allows), and every other value is refused.
func accessTokenType(typ any) bool {
	if typ == nil {
		return true
	}
	s, ok := typ.(string)
	if !ok {
		return false
	}
	s = strings.ToLower(s)
	s = strings.TrimPrefix(s, "application/")
	return s == "jwt" || s == "at+jwt"
}

// key finds the verification key, fetching the JWKS when none is cached yet
// or when the kid is unknown (the issuer may have rotated). Fetches are
// rate-limited in jwks.refresh, so a stream of tokens with made-up kids costs
// the issuer one request per 30s.
func (v *verifier) key(ctx context.Context, kid, alg string) (jose.JSONWebKey, *Error) {
	set := v.keys.cur.Load()
	if set != nil {
		if k, ok := set.pick(kid, alg); ok {
			return k, nil
		}
	}
	// The result does not matter here: success stores a new set, and a
	// failure was logged by refresh; what the caller gets depends only on
	// whether the key is now known.
	_ = v.keys.refresh(ctx, false)
	if set = v.keys.cur.Load(); set == nil {
		return jose.JSONWebKey{}, &Error{Status: http.StatusServiceUnavailable, Description: errKeysUnavailable.Error(), Reason: "keys_unavailable", RetryAfter: v.keys.retryIn()}
	}
	if k, ok := set.pick(kid, alg); ok {
		return k, nil
	}
	if v.keys.stale() {
		// The issuer may have added the key while it could not be
		// reached: the token may be good, and the outage is ours.
		return jose.JSONWebKey{}, &Error{Status: http.StatusServiceUnavailable, Description: errKeysUnavailable.Error(), Reason: "keys_unavailable", RetryAfter: v.keys.retryIn()}
	}
	return jose.JSONWebKey{}, invalid("unknown_key", "the token's signing key is unknown")
}

// peekAlg reads the alg of a compact JWS header without trusting it, only to
// say why a token was refused; go-jose makes the actual decision.
func peekAlg(raw string) (string, bool) {
	if strings.Count(raw, ".") != 2 {
		return "", false
	}
	head, _, _ := strings.Cut(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return "", false
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return "", false
	}
	return h.Alg, true
}
