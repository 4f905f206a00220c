package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/stdiomcp/gateway/detach"
)

// other stands for a route or method outside the known few: labels take
// only values from a fixed set, whatever clients send.
const other = "other"

// Instrument counts and times the requests next serves, by route pattern,
// method and status code. Put it on a chi router: the pattern is read
// once the router has matched the request, so a path of the client's
// never becomes a label; a request that matched no route (404, or 405
// with a method the path does not take) is "other".
func (m *Metrics) Instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := &statusWriter{ResponseWriter: w}
		// Deferred, so that a handler that aborts its response (a client
		// gone mid-stream) is counted too.
		// A response that left the server (package detach) is counted
		// when it ends; its route is read now, while the router's
		// context is the request's.
		defer func() {
			route, method := routeOf(r), methodOf(r.Method)
			if detach.Left(ww) {
				detach.Later(ww, func() { m.observe(route, method, ww.status, start) })
				return
			}
			m.observe(route, method, ww.status, start)
		}()
		next.ServeHTTP(ww, r)
	})
}

func (m *Metrics) observe(route, method string, status int, start time.Time) {
	m.requests.WithLabelValues(route, method, codeOf(status)).Inc()
	m.durations.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
}

// statusWriter keeps the status a handler sends. Flushes and deadlines
// reach the connection through Unwrap (http.ResponseController), so that
// a flush that fails says so.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader passes on interim (1xx) answers and the first final status;
// another after that (Recoverer's 500 after a stream began) would only
// make net/http complain of a superfluous call.
func (s *statusWriter) WriteHeader(code int) {
	switch {
	case code < 200:
	case s.status != 0:
		return
	default:
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func routeOf(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil {
		if p := rc.RoutePattern(); p != "" {
			return p
		}
	}
	return other
}

func methodOf(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return other
}

// codeOf is the status the client got: a handler that wrote nothing is
// answered 200 by net/http.
func codeOf(status int) string {
	if status == 0 {
		status = http.StatusOK
	}
	return strconv.Itoa(status)
}
