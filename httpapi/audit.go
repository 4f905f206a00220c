package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/stdiomcp/gateway/clientlimit"
	"github.com/stdiomcp/gateway/detach"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// audited is the response writer of a call being audited: it counts what
// goes out and keeps how the call ended, for one line in the log. No
// payload is kept.
type audited struct {
	http.ResponseWriter
	status   int
	bytes    int64
	code     int           // the JSON-RPC error code of the answer, 0 for a result
	gateway  bool          // the gateway made that error, not the child
	why      string        // the gateway's message with that error: which limit, which deadline
	answered bool          // the whole answer reached the connection before the client left
	cut      bool          // a write or flush of the answer failed: not all of it reached the connection
	r        *http.Request // whose context ends when the client goes
}

func newAudited(w http.ResponseWriter, r *http.Request) *audited {
	return &audited{ResponseWriter: w, r: r}
}

func (a *audited) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
	a.ResponseWriter.WriteHeader(status)
}

func (a *audited) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	n, err := a.ResponseWriter.Write(b)
	a.bytes += int64(n)
	if err != nil {
		a.cut = true
	}
	return n, err
}

// FlushError is the flush http.ResponseController makes through the
// wrapper. A failed one, as a failed write, is an answer cut off: the
// request's context may not say so yet when the call is audited (under
// package detach it ends on a goroutine of its own once net/http's has).
func (a *audited) FlushError() error {
	err := http.NewResponseController(a.ResponseWriter).Flush()
	if err != nil {
		a.cut = true
	}
	return err
}

// Unwrap lets http.ResponseController reach the connection (deadlines,
// flushes) through the wrapper.
func (a *audited) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// gatewayError and childError note how the call ended, on the writer
// that is audited (any other writer ignores it).
func gatewayError(w http.ResponseWriter, code int, why string) {
	if a, ok := w.(*audited); ok {
		a.code, a.gateway, a.why = code, true, why
	}
}

func childError(w http.ResponseWriter, code int) {
	if a, ok := w.(*audited); ok && code != 0 {
		a.code, a.gateway = code, false
	}
}

// present reports whether the client was still there when its answer
// began to leave: a client that has its whole answer may close at once,
// before the flush that sent it returns, so this is asked before it, not
// after. Credentials that ended also end the request's context, with the
// client still there. A write to a connection the gateway has not yet
// seen close may succeed, so this is as exact as the context is.
func present(w http.ResponseWriter) bool {
	a, ok := w.(*audited)
	if !ok {
		return false
	}
	ctx := a.r.Context()
	return ctx.Err() == nil || errors.Is(context.Cause(ctx), errCredentialsEnded)
}

// markAnswered notes, on the writer that is audited, that the whole answer
// reached the connection while its client was there (see present): one
// that goes once it has its answer did not leave early.
func markAnswered(w http.ResponseWriter, present bool) {
	if a, ok := w.(*audited); ok && present {
		a.answered = true
	}
}

// sendNow flushes an answer written in full, so that what runs after it
// (the audit line, the access log, the metrics) does not hold it back.
func sendNow(w http.ResponseWriter) {
	there := present(w)
	if http.NewResponseController(w).Flush() == nil {
		markAnswered(w, there)
	}
}

// auditAtEnd audits a call when its answer has ended: now, or, for a
// stream that left the server (package detach), at the stream's end. The
// closure is made only for the latter: most calls never leave.
func (h *handlers) auditAtEnd(r *http.Request, req *mcp.Request, a *audited, in int, start time.Time) {
	if detach.Left(a) {
		detach.Later(a, func() { h.audit(r, req, a, in, start) })
		return
	}
	h.audit(r, req, a, in, start)
}

// audit logs one line for a call once it has ended: who made it (never
// their credential), what it used, how it ended, how long it took and the
// bytes each way.
func (h *handlers) audit(r *http.Request, req *mcp.Request, a *audited, in int, start time.Time) {
	outcome := "ok"
	switch {
	case a.code == jsonrpc.CodeForbidden && a.gateway:
		outcome = "denied"
	case a.code == jsonrpc.CodeCancelled && a.gateway:
		outcome = "cancelled"
	case a.gateway:
		// By what the error means, not the status sent: a stream that
		// began with 200 may end with the gateway's error.
		status := a.status
		if a.code != 0 {
			status = statusFor(a.code)
		}
		outcome = "refused"
		if status >= 500 {
			outcome = "failed"
		}
	case a.code != 0:
		outcome = "error"
	case a.cut || r.Context().Err() != nil && !a.answered:
		// It left, or was cut off (GATEWAY_CLIENT_TIMEOUT), before its
		// whole answer reached the connection.
		outcome = "client_gone"
	}
	h.opts.Meter.CallAudited(callerOf(r.Context()).label(), outcome)
	markAudited(a.ResponseWriter)
	if !h.log.Enabled(r.Context(), slog.LevelInfo) {
		return
	}
	attrs := make([]slog.Attr, 0, 16)
	attrs = append(attrs, slog.String("who", callerOf(r.Context()).who()), slog.String("method", clip(req.Method)))
	if targets, err := mcp.Targets(req); err == nil && len(targets) > 0 {
		// One key per kind: a listen may name several resources.
		for _, k := range []mcp.Kind{mcp.KindTool, mcp.KindResource, mcp.KindPrompt} {
			var names []string
			for _, t := range targets {
				if t.Kind == k {
					names = append(names, clip(t.Name))
				}
			}
			switch len(names) {
			case 0:
			case 1:
				attrs = append(attrs, slog.String(k.String(), names[0]))
			default:
				attrs = append(attrs, slog.Any(k.String(), names))
			}
		}
	}
	attrs = append(attrs, slog.String("outcome", outcome), slog.Int("status", a.status))
	if a.code != 0 {
		attrs = append(attrs, slog.Int("code", a.code))
		if r := gatewayReason(a.code); r != "" && a.gateway {
			attrs = append(attrs, slog.String("reason", r))
		}
		if a.gateway && a.why != "" {
			// The reason is a kind (overloaded: a queue, the listens, the
			// sessions); the message says which, as the client was told.
			attrs = append(attrs, slog.String("why", clip(a.why)))
		}
	}
	attrs = append(attrs, slog.Duration("dur", time.Since(start).Round(time.Microsecond)), slog.Int("bytes_in", in),
		slog.Int64("bytes_out", a.bytes), slog.String("path", clip(r.URL.Path)),
		slog.String("remote", clientlimit.Addr(r, h.opts.TrustedProxies)))
	handler := h.log.Handler()
	if l, ok := handler.(requestLog); ok {
		// Added here rather than by l, so that the record's attributes
		// are set aside once.
		attrs, handler = requestAttrs(r.Context(), attrs), l.Handler
	}
	// A record of its own: Logger.LogAttrs would also walk the stack for
	// the caller's position, which no handler here prints, on every call.
	rec := slog.NewRecord(time.Now(), slog.LevelInfo, "audit", 0)
	rec.AddAttrs(attrs...)
	_ = handler.Handle(r.Context(), rec)
}

// gatewayReason names an error of the gateway's own as the metrics do, so
// that an audit line and a metric can be matched: gateway_calls_total's
// outcome for what befell a call (a timeout, a child unavailable, ...),
// gateway_requests_refused_total's reason for credentials and limits; ""
// for a code that is not one of the gateway's.
func gatewayReason(code int) string {
	switch code {
	case jsonrpc.CodeUnavailable:
		return "child_unavailable"
	case jsonrpc.CodeTimeout:
		return "timeout"
	case jsonrpc.CodeOverloaded:
		return "overloaded"
	case jsonrpc.CodeTooLarge:
		return "too_large"
	case jsonrpc.CodeShutdown:
		return "shutting_down"
	case jsonrpc.CodeCancelled:
		return "cancelled"
	case jsonrpc.CodeUnauthorized:
		return "unauthorized"
	case jsonrpc.CodeForbidden:
		return "forbidden"
	case jsonrpc.CodeRateLimited:
		return "rate_limited"
	case jsonrpc.CodeBadAnswer:
		return "bad_answer"
	}
	return ""
}

// maxLogged bounds a name the audit line repeats from the request: a name
// may be as long as the body.
const maxLogged = 256

func clip(s string) string {
	if len(s) <= maxLogged {
		return s
	}
	cut := maxLogged
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
