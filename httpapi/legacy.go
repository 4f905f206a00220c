package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// legacy serves a request from a 2025 client. initialize starts a session
// (a session id is minted); later requests carry it. A request with no
// session id is served too, without one (curl needs no handshake). What
// only makes sense between one client and one server is answered here,
// since the child is shared.
func (h *handlers) legacy(w http.ResponseWriter, r *http.Request, req *mcp.Request) {
	if req.Method == mcp.MethodInitialize {
		asked, isString := req.String(mcp.ParamProtocolVersion)
		caps, _ := req.Param(mcp.ParamCapabilities)
		info, hasInfo := req.Param(mcp.ParamClientInfo)
		// The session carries its capabilities and client info to every
		// call, and to a 2026-07-28 child in each call's _meta: they must
		// be what the schema says, or the child is sent what no client
		// could have sent it.
		if !isString || len(caps) == 0 || caps[0] != '{' || (hasInfo && info[0] != '{') {
			writeError(w, http.StatusBadRequest, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: "initialize needs params.protocolVersion (a string) and params.capabilities (an object); params.clientInfo, when sent, is an object"})
			return
		}
		sid, f := h.sessions.create(mcp.Negotiated(asked), callerOf(r.Context()).owner(), caps, info)
		if f != nil {
			writeError(w, f.status, req.ID, f.err)
			return
		}
		sess, err := h.sessions.open(sid)
		if err != nil {
			writeError(w, http.StatusInternalServerError, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "a fresh session id does not open: " + err.Error()})
			return
		}
		w.Header().Set(mcp.HeaderSession, sid)
		h.call(w, r, req, sess.caller(r), sess)
		return
	}
	sess, ok := h.legacySession(w, r, req.ID)
	if !ok {
		return
	}
	caller := bridge.Caller{CanStream: accepts(r.Header.Get("Accept"), "text/event-stream")}
	if sess != nil {
		caller = sess.caller(r)
	}
	switch req.Method {
	case mcp.MethodSetLevel:
		// The child's level is shared; the gateway keeps one per session and
		// filters what each client sees.
		level, _ := req.String(mcp.ParamLevel)
		if mcp.LogRank(level) < 0 {
			writeError(w, http.StatusBadRequest, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: "level must be one of " + strings.Join(mcp.LogLevels(), ", ")})
			return
		}
		if sess != nil {
			sid, f := sess.setLogLevel(level)
			if f != nil {
				writeError(w, f.status, req.ID, f.err)
				return
			}
			if sid != "" {
				w.Header().Set(mcp.HeaderSession, sid)
			}
		}
		h.writeOK(w, r, caller, jsonrpc.NewResult(req.ID, []byte("{}")))
		return
	case mcp.MethodSubscribe, mcp.MethodUnsubscribe:
		// Updates would arrive on the GET stream, which the gateway does not
		// offer; forwarding would let one client unsubscribe another's
		// subscription on the shared child. Accepted, with no effect.
		h.writeOK(w, r, caller, jsonrpc.NewResult(req.ID, []byte("{}")))
		return
	}
	h.call(w, r, req, caller, sess)
}

// legacySession opens the session a legacy request names. A request
// without one is served without one. An id that does not open (another
// key signed it, it expired, or its client ended it here) gets 404, which
// tells the client to initialize again; a request of another revision than
// the session's gets 400.
func (h *handlers) legacySession(w http.ResponseWriter, r *http.Request, id []byte) (*session, bool) {
	if f := sentTwice(r, mcp.HeaderSession, mcp.HeaderProtocolVersionKey); f != nil {
		writeError(w, f.status, id, f.err)
		return nil, false
	}
	sid := r.Header.Get(mcp.HeaderSession)
	if sid == "" {
		return nil, true
	}
	s, err := h.sessions.open(sid)
	if err == nil && s.claims.owner != callerOf(r.Context()).owner() {
		// A session is its caller's: another caller holding its id learns
		// nothing from it, not even that it exists.
		err = errOtherCaller
	}
	if err != nil {
		if errors.Is(err, errForeignSession) && h.sessions.shouldWarn(time.Now()) {
			// Replicas whose secrets differ refuse each other's sessions:
			// say so where an operator looks, once a minute at most.
			h.log.WarnContext(r.Context(), "refused a session id this gateway did not sign; if replicas serve the same clients, check that they share GATEWAY_SECRET (logged once a minute)", "err", err)
		} else {
			h.log.DebugContext(r.Context(), "refused a session id", "err", err)
		}
		writeError(w, http.StatusNotFound, id, jsonrpc.GatewayError(jsonrpc.CodeInvalidRequest, "session_not_found",
			"unknown session: "+err.Error()+"; send initialize again"))
		return nil, false
	}
	if v := strings.TrimSpace(r.Header.Get(mcp.HeaderProtocolVersionKey)); v != "" && v != s.claims.revision {
		writeError(w, http.StatusBadRequest, id, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: "the " + mcp.HeaderProtocolVersion + " header (" + v + ") is not the session's revision (" + s.claims.revision + ")"})
		return nil, false
	}
	return s, true
}

// endSession serves DELETE /mcp: a legacy client ending its session. Its
// calls in flight on this replica are cancelled, and this replica refuses
// the id from now on (see sessions.end for the others).
func (h *handlers) endSession(w http.ResponseWriter, r *http.Request) {
	// Read as any request of the session is: its owner, and the revision
	// the client says it speaks.
	sess, ok := h.legacySession(w, r, nil)
	if !ok {
		return
	}
	if sess == nil {
		h.mcpMethodNotAllowed(w, r)
		return
	}
	if err := h.sessions.end(r.Header.Get(mcp.HeaderSession), callerOf(r.Context()).owner()); err != nil {
		if full, ok := errors.AsType[*endsFull](err); ok {
			// Not in a second, as for a busy gateway: when the first of
			// the sessions ended here expires (up to GATEWAY_SESSION_TTL).
			gatewayError(w, errTooManyEnded.err.Code, errTooManyEnded.err.Message)
			w.Header().Set("Retry-After", full.retryAfter(time.Now()))
			writeJSON(w, errTooManyEnded.status, jsonrpc.NewErrorResponse(nil, errTooManyEnded.err))
			return
		}
		writeError(w, http.StatusNotFound, nil, jsonrpc.GatewayError(jsonrpc.CodeInvalidRequest, "session_not_found",
			"unknown session: "+err.Error()))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// sentTwice refuses a request that sends one of the named headers more
// than once: the gateway and a proxy before it might each read another
// value.
func sentTwice(r *http.Request, names ...string) *rpcFailure {
	for _, name := range names {
		if n := len(r.Header[http.CanonicalHeaderKey(name)]); n > 1 {
			return refuse(http.StatusBadRequest, jsonrpc.CodeInvalidRequest, fmt.Sprintf("the %s header was sent %d times; send it once", name, n), nil)
		}
	}
	return nil
}
