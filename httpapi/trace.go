package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// W3C trace context (https://www.w3.org/TR/trace-context/): a client's
// traceparent header goes to the child in the request's
// _meta.traceparent, where MCP carries it, with tracestate beside it; a
// request whose _meta has its own keeps it. The trace id goes into the
// gateway's log lines for the request.

// maxTracestate is the most of tracestate passed on; W3C asks vendors to
// pass at least 512 characters.
const maxTracestate = 512

// trace is a request's valid trace context.
type trace struct {
	parent string
	state  string
}

// traceID is the trace-id field of a valid traceparent.
func (t trace) traceID() string { return t.parent[3:35] }

// readTrace reads the request's trace context; a missing, repeated or
// malformed traceparent means none (W3C: start a new trace, which is the
// child's business).
func readTrace(h http.Header) (trace, bool) {
	parents := h.Values("Traceparent") // the canonical names: no copy to look them up
	if len(parents) != 1 || !validTraceparent(parents[0]) {
		return trace{}, false
	}
	t := trace{parent: parents[0]}
	if state := strings.Join(h.Values("Tracestate"), ","); len(state) <= maxTracestate && printable(state) {
		t.state = state
	}
	return t, true
}

// validTraceparent checks version-traceid-parentid-flags: lowercase hex
// of 2, 32, 16 and 2 digits, ids not all zeros, version not ff. A later
// version may append fields after another dash.
func validTraceparent(s string) bool {
	if len(s) < 55 || (len(s) > 55 && (s[:2] == "00" || s[55] != '-')) || s[:2] == "ff" {
		return false
	}
	if s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return false
	}
	return lowerHex(s[:2]) && lowerHex(s[3:35]) && lowerHex(s[36:52]) && lowerHex(s[53:55]) &&
		strings.Trim(s[3:35], "0") != "" && strings.Trim(s[36:52], "0") != ""
}

func lowerHex(s string) bool {
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func printable(s string) bool {
	for i := range len(s) {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// meta is the trace context as _meta members for the child.
func (t trace) meta() []mcp.Member {
	m := []mcp.Member{{Key: mcp.MetaTraceparent, Value: jsonrpc.Quote(t.parent)}}
	if t.state != "" {
		m = append(m, mcp.Member{Key: mcp.MetaTracestate, Value: jsonrpc.Quote(t.state)})
	}
	return m
}

// LogContext wraps a log handler so that a line logged with a request's
// context (the gateway's, and the bridge's for the request's call) says
// which request: its request_id, and its trace_id when it has a trace.
func LogContext(h slog.Handler) slog.Handler {
	if _, ok := h.(requestLog); ok {
		return h
	}
	return requestLog{h}
}

type requestLog struct{ slog.Handler }

func (l requestLog) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		var buf [2]slog.Attr
		if attrs := requestAttrs(ctx, buf[:0]); len(attrs) > 0 {
			r.AddAttrs(attrs...)
		}
	}
	return l.Handler.Handle(ctx, r)
}

// requestAttrs appends to attrs what says which request ctx is for.
func requestAttrs(ctx context.Context, attrs []slog.Attr) []slog.Attr {
	if n, ok := ctx.Value(namingKey{}).(*naming); ok {
		attrs = append(attrs, slog.String("request_id", n.id))
		if n.traced {
			attrs = append(attrs, slog.String("trace_id", n.trace.traceID()))
		}
	}
	return attrs
}

func (l requestLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestLog{l.Handler.WithAttrs(attrs)}
}

func (l requestLog) WithGroup(name string) slog.Handler {
	return requestLog{l.Handler.WithGroup(name)}
}
