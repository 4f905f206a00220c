package httpapi

import (
	"net/http"
	"strings"

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
		caps, _ := req.Param(mcp.ParamCapabilities)
		info, _ := req.Param(mcp.ParamClientInfo)
		sess, f := h.sessions.create(caps, info)
		if f != nil {
			writeError(w, f.status, req.ID, f.err)
			return
		}
		w.Header().Set(mcp.HeaderSession, sess.id)
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
			sess.setLogLevel(level)
		}
		writeJSON(w, http.StatusOK, jsonrpc.NewResult(req.ID, []byte("{}")))
		return
	case mcp.MethodSubscribe, mcp.MethodUnsubscribe:
		// Updates would arrive on the GET stream, which the gateway does not
		// offer; forwarding would let one client unsubscribe another's
		// subscription on the shared child. Accepted, with no effect.
		writeJSON(w, http.StatusOK, jsonrpc.NewResult(req.ID, []byte("{}")))
		return
	}
	h.call(w, r, req, caller, sess)
}

// legacySession looks up the session a legacy request names. A request
// without one is served without one; an unknown or ended session gets 404,
// which tells the client to initialize again.
func (h *handlers) legacySession(w http.ResponseWriter, r *http.Request, id []byte) (*session, bool) {
	sid := r.Header.Get(mcp.HeaderSession)
	if sid == "" {
		return nil, true
	}
	s := h.sessions.get(sid)
	if s == nil {
		writeError(w, http.StatusNotFound, id, jsonrpc.GatewayError(jsonrpc.CodeInvalidRequest, "session_not_found",
			"session "+sid+" is unknown or has ended; send initialize again"))
		return nil, false
	}
	return s, true
}

// endSession serves DELETE /mcp: a legacy client ending its session. Its
// calls in flight are cancelled.
func (h *handlers) endSession(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get(mcp.HeaderSession)
	if sid == "" {
		h.methodNotAllowed(w, r)
		return
	}
	if !h.sessions.remove(sid) {
		writeError(w, http.StatusNotFound, nil, jsonrpc.GatewayError(jsonrpc.CodeInvalidRequest, "session_not_found",
			"session "+sid+" is unknown or has ended"))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
