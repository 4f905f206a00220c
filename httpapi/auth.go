package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"

	"github.com/stdiomcp/gateway/auth"
	"github.com/stdiomcp/gateway/clientlimit"
	"github.com/stdiomcp/gateway/detach"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// Authenticator says who a request comes from and what it may use;
// *auth.Authenticator is one.
type Authenticator interface {
	Authenticate(ctx context.Context, authorization string) (auth.Identity, error)
	// Challenge is the WWW-Authenticate value of a 401, Forbidden that of
	// a 403 for a target outside the caller's policy.
	Challenge(e *auth.Error) string
	Forbidden(k auth.Kind, name string) string
	ForbiddenMethod(method string) string
	// Metadata is the Protected Resource Metadata (RFC 9728) and the
	// paths it is served on; ok is false when OAuth is off.
	Metadata() (paths []string, body []byte, ok bool)
	// Changed is closed when the credentials in force change (a tokens
	// or policy file was reloaded); a new channel is handed out then.
	Changed() <-chan struct{}
}

// errCredentialsEnded is why a request whose caller's credentials stopped
// being valid while it ran was ended: a revoked token, an expired JWT.
var errCredentialsEnded = errors.New("the caller's credentials are no longer valid")

type identityKey struct{}

// caller is who sent a request: authenticated, or anyone when the
// gateway has no authentication.
type caller struct {
	id            auth.Identity
	authenticated bool
}

func callerOf(ctx context.Context) caller {
	c, _ := ctx.Value(identityKey{}).(caller)
	return c
}

// rules is what the caller may use: everything when nobody authenticates.
func (c caller) rules() auth.Rules {
	if !c.authenticated {
		return auth.All()
	}
	return c.id.Rules
}

// who names the caller in logs: never the credential.
func (c caller) who() string {
	if !c.authenticated {
		return "anonymous"
	}
	return c.id.Kind + ":" + c.id.Name
}

// label names the caller in metrics, where names must be few: a static
// token's name, "jwt" for every OAuth caller (subjects are unbounded).
func (c caller) label() string {
	switch {
	case !c.authenticated:
		return "anonymous"
	case c.id.Kind == "token":
		return c.id.Name
	}
	return c.id.Kind
}

// owner is what binds a 2025 session to the caller that made it, so that
// another caller holding the id cannot use it: a digest, since the id is
// readable by its holder. Empty without authentication.
func (c caller) owner() string {
	if !c.authenticated {
		return ""
	}
	sum := sha256.Sum256([]byte(c.id.Kind + "\x00" + c.id.Name))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// authenticate lets through only requests with valid credentials, and
// tells the handlers who sent them. A missing or bad credential gets 401
// with a challenge that says how to get one; the credential itself is
// never logged nor passed on (only the body reaches the child).
func (h *handlers) authenticate(next http.Handler) http.Handler {
	if h.opts.Auth == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Taken before the credentials are checked, so that a reload
		// between the two is not missed.
		changed := h.opts.Auth.Changed()
		var id auth.Identity
		var err error
		if hs := r.Header.Values("Authorization"); len(hs) > 1 {
			// A proxy or the child's own code may read the other one.
			err = &auth.Error{Status: http.StatusBadRequest, Code: "invalid_request", Description: "the Authorization header is sent more than once", Reason: "malformed"}
		} else {
			id, err = h.opts.Auth.Authenticate(r.Context(), r.Header.Get("Authorization"))
		}
		if err != nil && h.opts.Limiter != nil {
			// Failed attempts count against the address's rate, so that
			// guessing tokens is as slow as calling.
			if ok, wait := h.opts.Limiter.Allow(h.clientKey(r)); !ok {
				h.tooMany(w, r, h.clientKey(r), wait, "credentials", "invalid")
				return
			}
		}
		if err != nil {
			var ae *auth.Error
			if !errors.As(err, &ae) {
				ae = &auth.Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: "the credentials could not be checked"}
			}
			if ae.Status == http.StatusServiceUnavailable {
				h.keysUnavailable(w, r, ae)
				return
			}
			// Said on the request's access line, its one line at info: a
			// flood of bad tokens does not double the log.
			noteRefusal(r, "refused", "unauthorized", "why", ae.Description)
			h.opts.Meter.Refused("unauthorized")
			w.Header().Set("WWW-Authenticate", h.opts.Auth.Challenge(ae))
			msg := "authentication required: send an Authorization header with a Bearer token"
			if ae.Code != "" {
				msg = "unauthorized: " + ae.Description
			}
			if ae.Status == http.StatusBadRequest {
				// A header no token could be read from (RFC 6750's
				// invalid_request).
				writeError(w, http.StatusBadRequest, nil, jsonrpc.GatewayError(jsonrpc.CodeInvalidRequest, "bad_credentials", msg))
				return
			}
			writeError(w, http.StatusUnauthorized, nil, jsonrpc.GatewayError(jsonrpc.CodeUnauthorized, "unauthorized", msg))
			return
		}
		// A request may last as long as a stream does: it ends when its
		// credentials do, not only when its client goes.
		ctx, cancel := context.WithCancelCause(r.Context())
		defer func() {
			if detach.Left(w) {
				detach.Later(w, func() { cancel(nil) })
				return
			}
			cancel(nil)
		}()
		if !id.Expires.IsZero() {
			var stop context.CancelFunc
			ctx, stop = context.WithDeadlineCause(ctx, id.Expires, fmt.Errorf("%w: the token expired", errCredentialsEnded))
			defer detach.Later(w, stop)
		}
		go h.recheck(ctx, cancel, changed, r.Header.Get("Authorization"))
		ctx = context.WithValue(ctx, identityKey{}, caller{id: id, authenticated: true})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// keysUnavailable answers a JWT that could not be checked because the
// issuer's keys could not be fetched: 503 with Retry-After, as for the
// gateway's other outages, and no challenge, since invalid_token would tell
// the client to throw away a token that may be good (RFC 6750 §3.1). The
// Retry-After is when a token may make the gateway fetch the keys again;
// writeError's own would say 1 s, and a retry that soon gets 503 again.
func (h *handlers) keysUnavailable(w http.ResponseWriter, r *http.Request, ae *auth.Error) {
	noteRefusal(r, "refused", "keys_unavailable", "why", ae.Description)
	h.opts.Meter.Refused("keys_unavailable")
	e := jsonrpc.GatewayError(jsonrpc.CodeUnavailable, "keys_unavailable",
		"the token cannot be checked now: "+ae.Description+"; retry later with the same token")
	after := clientlimit.RetryAfterSeconds(ae.RetryAfter)
	if isREST(w) {
		w.Header().Set("Retry-After", after)
		writeProblem(w, problemFor(http.StatusServiceUnavailable, e))
		return
	}
	gatewayError(w, e.Code, e.Message)
	w.Header().Set("Retry-After", after)
	writeJSON(w, http.StatusServiceUnavailable, jsonrpc.NewErrorResponse(nil, e))
}

// recheck ends a request, while it runs, once the credentials it came with
// no longer pass: each time the tokens or policy change, they are checked
// again. It returns when the request ends.
func (h *handlers) recheck(ctx context.Context, end context.CancelCauseFunc, changed <-chan struct{}, header string) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		changed = h.opts.Auth.Changed()
		_, err := h.opts.Auth.Authenticate(ctx, header)
		var ae *auth.Error
		if errors.As(err, &ae) && ae.Reason == "keys_unavailable" {
			continue // the issuer's outage says nothing of the token
		}
		if err != nil && ctx.Err() == nil {
			h.log.InfoContext(ctx, "ended a request whose credentials no longer pass", "err", err)
			end(fmt.Errorf("%w: %w", errCredentialsEnded, err))
			return
		}
	}
}

// credentialsEnded answers a request that recheck or the token's expiry
// ended, if nothing was written yet; it reports whether that was the end.
func (h *handlers) credentialsEnded(w http.ResponseWriter, r *http.Request, id []byte) bool {
	cause := context.Cause(r.Context())
	if !errors.Is(cause, errCredentialsEnded) {
		return false
	}
	w.Header().Set("WWW-Authenticate", h.opts.Auth.Challenge(&auth.Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: "the credentials stopped being valid during the request"}))
	writeError(w, http.StatusUnauthorized, id, jsonrpc.GatewayError(jsonrpc.CodeUnauthorized, "credentials_ended", cause.Error()))
	return true
}

// authorize refuses, with 403, a request for something outside the
// caller's policy; it reports whether the request may go on. The policy
// reads the body (never the Mcp-Name header, which only mirrors it).
func (h *handlers) authorize(w http.ResponseWriter, r *http.Request, req *mcp.Request) bool {
	c := callerOf(r.Context())
	rules := c.rules()
	if rules.Unrestricted() {
		return true
	}
	deny := func(challenge, msg string) bool {
		if h.opts.Auth != nil {
			w.Header().Set("WWW-Authenticate", challenge)
		}
		writeError(w, http.StatusForbidden, req.ID, jsonrpc.GatewayError(jsonrpc.CodeForbidden, "forbidden", msg))
		return false
	}
	switch mcp.AccessOf(req.Method) {
	case mcp.AccessOpen, mcp.AccessList:
		return true
	case mcp.AccessTargets:
		targets, err := mcp.Targets(req)
		if err != nil {
			e := asRPCError(err)
			writeError(w, statusFor(e.Code), req.ID, e)
			return false
		}
		for _, t := range targets {
			k := authKind(t.Kind)
			if !rules.Allows(k, t.Name) {
				return deny(h.opts.Auth.Forbidden(k, t.Name), "this caller may not use the "+t.Kind.String()+" "+quote(t.Name))
			}
		}
		return true
	}
	return deny(h.opts.Auth.ForbiddenMethod(req.Method), "this caller may not send "+quote(clip(req.Method))+": its policy names tools, resources and prompts, not other methods")
}

// answerFilter is what the answer to a request is passed through for its
// caller, or nil when nobody authenticates: a list shows only what the
// caller may use (a caller that may see everything gets the whole list,
// marked private all the same; see mcp.FilterList), and a 2026-07-28
// caller's requestState is bound to it (see statebind.go).
func (h *handlers) answerFilter(r *http.Request, method string, modern bool) func([]byte) ([]byte, error) {
	c := callerOf(r.Context())
	switch {
	case !c.authenticated:
		return nil
	case mcp.AccessOf(method) == mcp.AccessList:
		return h.listFilter(c.rules(), method)
	case modern:
		owner := c.owner()
		return func(resp []byte) ([]byte, error) { return h.bindState(owner, resp), nil }
	}
	return nil
}

func (h *handlers) listFilter(rules auth.Rules, method string) func([]byte) ([]byte, error) {
	return func(resp []byte) ([]byte, error) {
		out, _, err := mcp.FilterList(method, resp, func(t mcp.Target) bool { return rules.Allows(authKind(t.Kind), t.Name) })
		if err != nil {
			return nil, jsonrpc.GatewayError(jsonrpc.CodeInternalError, "unreadable_list",
				"the server's list could not be read to show only what this caller may use: "+err.Error())
		}
		return out, nil
	}
}

func authKind(k mcp.Kind) auth.Kind {
	switch k {
	case mcp.KindResource:
		return auth.Resource
	case mcp.KindPrompt:
		return auth.Prompt
	}
	return auth.Tool
}

func quote(s string) string { return string(jsonrpc.Quote(s)) }

// metadata serves the Protected Resource Metadata; it needs no
// credentials, since it says how to get them.
// metadataPreflight answers a browser's CORS preflight for the metadata,
// which anyone may read: a client that sends MCP-Protocol-Version with its
// GET (the TypeScript SDK does) needs one.
func metadataPreflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", http.MethodGet)
	h.Set("Access-Control-Allow-Headers", mcp.HeaderProtocolVersion)
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

func (h *handlers) metadata(body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		writeJSON(w, http.StatusOK, body)
	}
}
