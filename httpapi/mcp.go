package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/detach"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// mcp serves POST /mcp: one JSON-RPC request or notification per POST.
// Bad input is answered here and never reaches the child.
func (h *handlers) mcp(w http.ResponseWriter, r *http.Request) {
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	msg, err := jsonrpc.Parse(body)
	switch {
	case errors.Is(err, jsonrpc.ErrParse):
		writeError(w, http.StatusBadRequest, nil, &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: err.Error()})
		return
	case err != nil:
		if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
			h.batch(w, r, body)
			return
		}
		writeError(w, http.StatusBadRequest, jsonrpc.BestEffortID(body), &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error()})
		return
	}
	// The client's limits, now that the message says what it costs:
	// before anything is done for it.
	if !h.admitMessage(w, r, costOf(msg.Kind, msg.Method)) {
		return
	}
	if msg.Kind == jsonrpc.KindResponse {
		h.answer(w, r, msg)
		return
	}
	// Every member the gateway acts on is read here, once; a request that
	// another decoder could read otherwise never reaches the child.
	req, err := mcp.Read(msg)
	if err != nil {
		e := asRPCError(err)
		id := msg.ID
		if len(id) > 0 && id[0] != '"' && !jsonrpc.Integral(id) {
			// An id MCP's schema refuses (1.5) is not echoed: an error
			// without one is what it has for an id that cannot be read.
			id = nil
		}
		writeError(w, statusFor(e.Code), id, e)
		return
	}
	if msg.Kind == jsonrpc.KindRequest {
		a := newAudited(w, r)
		defer h.auditAtEnd(r, req, a, len(body), time.Now())
		w = a
	}
	if !h.authorize(w, r, req) {
		return
	}
	if owner := callerOf(r.Context()).owner(); owner != "" && msg.Kind == jsonrpc.KindRequest {
		// Whichever era the request claims: a state bound to one caller
		// must reach the child for no other.
		unbound, f := h.unbindState(owner, req)
		if f != nil {
			writeError(w, f.status, req.ID, f.err)
			return
		}
		req = unbound
	}
	switch {
	case msg.Kind == jsonrpc.KindNotification:
		h.notification(w, r, req)
	case !isModern(r, req):
		h.legacy(w, r, req)
	default:
		h.modern(w, r, req)
	}
}

// bodyPrealloc bounds what readAll sets aside before a body arrives: a
// Content-Length is only a claim (a client may declare much and send
// little, slowly), and a bigger body grows as it comes.
const bodyPrealloc = 16 << 10

// readAll is io.ReadAll with room made for the size the request declares
// (-1 when it declares none), at most limit, so that a body is read into
// one buffer of its size rather than grown from 512 bytes.
func readAll(r io.Reader, size, limit int64) ([]byte, error) {
	if size < 0 {
		size = 512
	}
	b := make([]byte, 0, min(size, limit, bodyPrealloc)+1) // +1: room for the read that finds the end
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// codings are the content codings of a body's Content-Encoding values,
// less identity and empty ones, which code nothing.
func codings(values []string) []string {
	var cs []string
	for _, v := range values {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				cs = append(cs, c)
			}
		}
	}
	return cs
}

// readBody reads a POST's JSON body within the size and time limits, or
// answers the client itself and reports false.
func (h *handlers) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if f := sentTwice(r, "Content-Type"); f != nil {
		writeError(w, f.status, nil, f.err)
		return nil, false
	}
	if !isJSON(r.Header.Get("Content-Type")) {
		writeError(w, http.StatusUnsupportedMediaType, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: fmt.Sprintf("Content-Type must be application/json, not %q", r.Header.Get("Content-Type"))})
		return nil, false
	}
	if ce := codings(r.Header.Values("Content-Encoding")); len(ce) > 0 {
		// A compressed body would reach the parser as bytes that are not
		// JSON; RFC 7694 says which codings are taken, here none.
		w.Header().Set("Accept-Encoding", "identity")
		writeError(w, http.StatusUnsupportedMediaType, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: fmt.Sprintf("Content-Encoding %q is not accepted; send the body uncompressed", strings.Join(ce, ", "))})
		return nil, false
	}
	// A body that trickles in must not hold a goroutine forever: its
	// deadline (set by BodyDeadline, as the request came) is lifted once
	// the body is in, since the answer may be a stream that lasts as long
	// as the call.
	var err error
	if limit := h.bodyLimit(w); r.ContentLength > limit {
		// Refused as declared: waiting for the bytes would only make a
		// client that sends them slowly wait for the same answer.
		err = &http.MaxBytesError{Limit: limit}
	} else {
		rc := http.NewResponseController(w)
		var body []byte
		body, err = readAll(http.MaxBytesReader(w, r.Body, limit), r.ContentLength, limit)
		if err == nil {
			_ = rc.SetReadDeadline(time.Time{})
			// Read to its end: closed, net/http does not look for more
			// of it before the answer (a copy, with an allocation).
			_ = r.Body.Close()
			if !utf8.Valid(body) {
				// JSON is UTF-8 (RFC 8259). The gateway reads a bad byte
				// as U+FFFD, and a child may drop it or keep it: checks on
				// a name or a URI would be made on another string than
				// the one the child acts on.
				id := jsonrpc.BestEffortID(body)
				if !utf8.Valid(id) {
					id = nil // an answer is UTF-8 too
				}
				writeError(w, http.StatusBadRequest, id, &jsonrpc.Error{Code: jsonrpc.CodeParseError,
					Message: fmt.Sprintf("the body is not UTF-8: the byte at offset %d is no part of a UTF-8 character", notUTF8At(body))})
				return nil, false
			}
			return body, true
		}
	}
	// The rest of the body will not be read: the connection cannot be
	// reused (net/http would otherwise wait to drain it).
	w.Header().Set("Connection", "close")
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig) && tooBig.Limit < h.opts.MaxBodyBytes:
		writeError(w, http.StatusRequestEntityTooLarge, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: fmt.Sprintf("request body over %d bytes from a client at its limits (as many requests open as it may, or over its rate): until it is within them again, it may send answers and notifications up to that size", tooBig.Limit)})
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: fmt.Sprintf("request body over the gateway's %d-byte limit", tooBig.Limit)})
	case errors.Is(err, os.ErrDeadlineExceeded):
		writeError(w, http.StatusRequestTimeout, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: fmt.Sprintf("the request body did not arrive within %v", h.opts.ClientTimeout)})
	default:
		// The client went away mid-body; there is no one to answer.
		h.log.DebugContext(r.Context(), "reading request body", "err", err)
	}
	return nil, false
}

// notUTF8At is the offset of the first byte of b that is not UTF-8.
func notUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// answer takes a legacy client's answer to a question the gateway relayed
// to it. 2026-07-28 clients never send responses.
func (h *handlers) answer(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message) {
	if isModern(r, nil) {
		writeError(w, http.StatusBadRequest, msg.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: "a " + mcp.Modern + " client sends no responses"})
		return
	}
	if _, ok := h.legacySession(w, r, msg.ID); !ok {
		return
	}
	if err := h.b.Respond(r.Context(), msg); err != nil {
		e := asRPCError(err)
		writeError(w, statusFor(e.Code), nil, e)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// notification forwards a client's notification; a legacy client's
// notifications/cancelled also ends the call of its session it names.
func (h *handlers) notification(w http.ResponseWriter, r *http.Request, n *mcp.Request) {
	if !isModern(r, n) {
		sess, ok := h.legacySession(w, r, nil)
		if !ok {
			return
		}
		if sess != nil && n.Method == mcp.NoteCancelled {
			sess.cancel(n)
		}
	}
	if err := h.b.Notify(r.Context(), n.Message); err != nil {
		h.fail(w, r, nil, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// modern serves a 2026-07-28 client's request, once it passes the
// revision's checks.
func (h *handlers) modern(w http.ResponseWriter, r *http.Request, req *mcp.Request) {
	caller, f := modernCaller(r, req)
	if f == nil && req.Method == mcp.MethodToolsCall {
		f = h.checkParamHeaders(r, req)
	}
	if f != nil {
		writeError(w, f.status, req.ID, f.err)
		return
	}
	caller.CanStream = accepts(r.Header.Get("Accept"), "text/event-stream")
	if req.Method == mcp.MethodListen && !caller.CanStream {
		// A listen answers with nothing but its stream.
		writeError(w, http.StatusNotAcceptable, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: mcp.MethodListen + " is answered with an event stream: send Accept: text/event-stream"})
		return
	}
	h.call(w, r, req, caller, nil)
}

func (h *handlers) call(w http.ResponseWriter, r *http.Request, req *mcp.Request, caller bridge.Caller, sess *session) {
	// The call lives as long as this request: when the client goes, or a
	// write to it fails (net/http then cancels the request's context), the
	// bridge cancels toward the child.
	// A request that carries a trace context of its own keeps it whole:
	// a tracestate belongs to its traceparent.
	if tr, ok := traceOf(r.Context()); ok {
		_, ownParent := req.Meta(mcp.MetaTraceparent)
		_, ownState := req.Meta(mcp.MetaTracestate)
		if !ownParent && !ownState {
			caller.Meta = tr.meta()
		}
	}
	caller.Principal = callerOf(r.Context()).owner()
	var t *tracker
	if sess != nil && req.Method != mcp.MethodPing {
		// A ping is answered by the gateway at once: nothing of the
		// session's to keep (a table full of busy sessions refuses
		// what it would keep).
		var f *rpcFailure
		if t, f = sess.hold(); f != nil {
			writeError(w, f.status, req.ID, f.err)
			return
		}
		defer func() {
			if detach.Left(w) {
				detach.Later(w, t.release)
				return
			}
			t.release()
		}()
	}
	c, err := h.b.Call(r.Context(), req, caller)
	if err != nil {
		h.fail(w, r, req.ID, err)
		return
	}
	if t != nil {
		t.track(req.ID, c)
	}
	filter := h.answerFilter(r, req.Method, caller.Modern)
	if c.Streams() && caller.CanStream {
		h.stream(w, r, c, req.ID, nil, filter)
		return
	}
	for {
		<-c.Wake()
		notes, resp, done, err := c.Take()
		if caller.CanStream && slices.ContainsFunc(notes, isRequest) {
			// Something must reach the client before the answer (a question
			// it is asked): nothing is written yet, so the answer can still
			// become a stream.
			h.stream(w, r, c, req.ID, notes, filter)
			return
		}
		if !done {
			continue // progress nobody asked a stream for has no place in JSON
		}
		if err != nil {
			h.fail(w, r, req.ID, err)
			return
		}
		if filter != nil {
			if resp, err = filter(resp); err != nil {
				h.fail(w, r, req.ID, err)
				return
			}
		}
		status := http.StatusOK
		if caller.Modern {
			status = childErrorStatus(c.ErrorCode())
		}
		childError(w, c.ErrorCode())
		if status == http.StatusOK {
			h.writeOK(w, r, caller, resp)
			return
		}
		writeAnswer(w, status, resp, h.opts.ClientTimeout)
		return
	}
}

// fail answers a request that ended in a gateway error; a client that went
// away gets nothing.
func (h *handlers) fail(w http.ResponseWriter, r *http.Request, id []byte, err error) {
	if h.credentialsEnded(w, r, id) {
		return
	}
	if r.Context().Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	e := asRPCError(err)
	writeError(w, statusFor(e.Code), id, e)
}

func asRPCError(err error) *jsonrpc.Error {
	var e *jsonrpc.Error
	if errors.As(err, &e) {
		return e
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
}

// statusFor is the one mapping from a gateway error code to an HTTP status.
func statusFor(code int) int {
	switch code {
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeInvalidParams,
		mcp.CodeHeaderMismatch, mcp.CodeMissingCapability, mcp.CodeUnsupportedVersion:
		return http.StatusBadRequest
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeUnavailable, jsonrpc.CodeShutdown, jsonrpc.CodeOverloaded:
		return http.StatusServiceUnavailable
	case jsonrpc.CodeTimeout:
		return http.StatusGatewayTimeout
	case jsonrpc.CodeTooLarge, jsonrpc.CodeBadAnswer:
		return http.StatusBadGateway
	case jsonrpc.CodeUnauthorized:
		return http.StatusUnauthorized
	case jsonrpc.CodeForbidden:
		return http.StatusForbidden
	case jsonrpc.CodeRateLimited:
		return http.StatusTooManyRequests
	case jsonrpc.CodeCancelled:
		// The client asked for this ending with its own
		// notifications/cancelled: an outcome, not a failure.
		return http.StatusOK
	}
	return http.StatusInternalServerError
}

func writeError(w http.ResponseWriter, status int, id []byte, e *jsonrpc.Error) {
	if isREST(w) {
		writeProblem(w, problemFor(status, e))
		return
	}
	gatewayError(w, e.Code, e.Message)
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, jsonrpc.NewErrorResponse(id, e))
}

// writeOK sends a 200 answer, as JSON or, to a client that takes no JSON,
// as a stream of one event (see streamOnly).
func (h *handlers) writeOK(w http.ResponseWriter, r *http.Request, caller bridge.Caller, resp []byte) {
	if streamOnly(r, caller) {
		writeOneEvent(w, h.opts.ClientTimeout, resp)
		return
	}
	writeAnswer(w, http.StatusOK, resp, h.opts.ClientTimeout)
}

// streamOnly reports whether the client takes an answer as a stream and
// not as JSON (Accept: text/event-stream alone). Both eras say a client
// lists both types; one that names only the stream is taken at its word
// rather than sent a media type it refused. Asked once an answer is ready,
// of clients that take a stream, it allocates nothing.
func streamOnly(r *http.Request, caller bridge.Caller) bool {
	return caller.CanStream && !accepts(r.Header.Get("Accept"), "application/json")
}

// zeroQ reports whether a q parameter refuses the type: "0", or "0."
// followed by zeros alone (RFC 9110 §12.4.2: qvalue = "0" [ "." 0*3DIGIT ]).
func zeroQ(q string) bool {
	if q == "0" {
		return true
	}
	rest, ok := strings.CutPrefix(q, "0.")
	return ok && strings.Trim(rest, "0") == ""
}

// isRequest tells a question for the client from a notification.
func isRequest(msg []byte) bool {
	m, err := jsonrpc.Parse(msg)
	return err == nil && m.Kind == jsonrpc.KindRequest
}

func isJSON(contentType string) bool {
	if contentType == "application/json" {
		return true // as nearly every client sends it; parsing it costs a map
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// accepts reports whether an Accept header allows the media type. No header
// means anything goes, as for curl.
func accepts(accept, mediaType string) bool {
	if strings.TrimSpace(accept) == "" {
		return true
	}
	major, _, _ := strings.Cut(mediaType, "/")
	for part := range strings.SplitSeq(accept, ",") {
		part = strings.TrimSpace(part)
		if !strings.ContainsAny(part, ";\"") {
			// No parameters (no q=0): only the type to compare, which
			// ParseMediaType would lower-case, at the cost of a map.
			mt := strings.ToLower(part)
			if mt == mediaType || mt == "*/*" || mt == major+"/*" {
				return true
			}
			continue
		}
		mt, params, err := mime.ParseMediaType(part)
		if err != nil || zeroQ(params["q"]) {
			continue
		}
		if mt == mediaType || mt == "*/*" || mt == major+"/*" {
			return true
		}
	}
	return false
}
