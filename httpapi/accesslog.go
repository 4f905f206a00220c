package httpapi

import (
	"log/slog"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/stdiomcp/gateway/clientlimit"
	"github.com/stdiomcp/gateway/detach"
)

// accessLog logs one line per request after it ends. Probes and scrapes
// log at Debug so that a kubelet polling every few seconds, or Prometheus
// scraping, does not drown the log; so does a call whose audit line was
// logged, which already says all the access line would (one line per call
// at Info: logging is a good part of what a call costs).
func accessLog(log *slog.Logger, trusted []netip.Prefix) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			aw := &accessWriter{ResponseWriter: w}
			start := time.Now()
			// A stream that left the server is logged when it ends.
			defer func() {
				if detach.Left(aw) {
					detach.Later(aw, func() { logAccess(log, trusted, r, aw, start) })
					return
				}
				logAccess(log, trusted, r, aw, start)
			}()
			next.ServeHTTP(aw, r)
		})
	}
}

func logAccess(log *slog.Logger, trusted []netip.Prefix, r *http.Request, aw *accessWriter, start time.Time) {
	level := slog.LevelInfo
	if aw.audited || r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || r.URL.Path == "/metrics" {
		level = slog.LevelDebug
	}
	if !log.Enabled(r.Context(), level) {
		return
	}
	attrs := []any{"method", r.Method, "path", r.URL.Path, "status", aw.status,
		"bytes", aw.bytes, "dur", time.Since(start).Round(time.Microsecond),
		"remote", r.RemoteAddr}
	if len(trusted) > 0 {
		// Behind a trusted proxy the connection is the proxy's: the client
		// is the one the limits and the audit line go by.
		peer := r.RemoteAddr
		if ap, err := netip.ParseAddrPort(peer); err == nil {
			peer = ap.Addr().Unmap().WithZone("").String()
		}
		if client := clientlimit.Addr(r, trusted); client != peer {
			attrs = append(attrs, "client", client)
		}
	}
	if n, ok := r.Context().Value(namingKey{}).(*naming); ok {
		attrs = append(attrs, n.refusal...)
	}
	log.Log(r.Context(), level, "http request", attrs...)
}

// accessWriter counts what a response sends, for the access line: status
// 0 when nothing was written (a client that left first, or an aborted
// handler). Every route's requests have one, the outermost of their
// writers, so that it also holds what a request gives back as its answer
// leaves (see answering), at no cost of its own.
type accessWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	// place gives back the request's place among its client's open
	// requests (see handlers.limit); nil: it holds none. Set before the
	// handler runs, or by it once it has read the request's message
	// (admitMessage, while limitsDue), before any answer is written;
	// placeGiven makes it run once, from the handler or from the
	// goroutine of a stream that left the server.
	place     func()
	limitsDue bool
	// What the limits found as the request came, when its body is to say
	// what it owes (see limit and admitMessage).
	limitKey   string        // the client, as the limits know it
	atLimit    bool          // no place was free
	overRate   bool          // no token was left; one comes in rateWait
	rateWait   time.Duration // (see overRate)
	tookToken  bool          // a token was taken, to give back if it owes none
	audited    bool          // the request's audit line is logged
	placeGiven atomic.Bool
}

// givePlaceBack gives the request's place back, the first time only.
func (a *accessWriter) givePlaceBack() {
	if a.place != nil && a.placeGiven.CompareAndSwap(false, true) {
		a.place()
	}
}

// accessWriterOf is the accessWriter among w's wrappers; nil when there
// is none.
func accessWriterOf(w http.ResponseWriter) *accessWriter {
	for {
		switch x := w.(type) {
		case *accessWriter:
			return x
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return nil
		}
	}
}

func (a *accessWriter) WriteHeader(status int) {
	// 1xx answers are interim: the final status comes after them.
	if a.status == 0 && status >= 200 {
		a.status = status
	}
	a.ResponseWriter.WriteHeader(status)
}

func (a *accessWriter) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	n, err := a.ResponseWriter.Write(b)
	a.bytes += int64(n)
	return n, err
}

// FlushError is the flush http.ResponseController makes through the
// wrapper: a failed one says so.
func (a *accessWriter) FlushError() error {
	return http.NewResponseController(a.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection through the
// wrapper.
func (a *accessWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// markAudited tells the access log, wherever it sits among w's wrappers,
// that the request's audit line is written.
func markAudited(w http.ResponseWriter) {
	if a := accessWriterOf(w); a != nil {
		a.audited = true
	}
}
