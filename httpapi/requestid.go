package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
)

// requestIDHeader is where a client names its request; the name goes on
// every log line the request causes.
const requestIDHeader = "X-Request-Id"

// naming is what names a request in the logs and toward the child: its
// id, and its trace context when the client sent a valid one. One value
// in the request's context holds both.
type naming struct {
	id     string
	trace  trace
	traced bool
	said   [1]string // the answer's X-Request-Id, held here to save an allocation
	// refusal says why the request was refused before it was served
	// (credentials, limits), for its access line: key/value pairs.
	refusal []any
}

// noteRefusal keeps on r's naming why it was refused, for the access line:
// the one line such a request gets.
func noteRefusal(r *http.Request, args ...any) {
	if n, ok := r.Context().Value(namingKey{}).(*naming); ok {
		n.refusal = args
	}
}

type namingKey struct{}

// requestIDs makes the ids of requests that come without one: this
// process's prefix (host and a random part, so that replicas' ids differ)
// and a counter.
type requestIDs struct {
	prefix []byte
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	host, err := os.Hostname()
	if err != nil || host == "" || len(host) > 64 || !plainToken(host) {
		host = "gateway"
	}
	random := make([]byte, 8)
	_, _ = rand.Read(random)
	return &requestIDs{prefix: []byte(host + "/" + base64.RawURLEncoding.EncodeToString(random) + "-")}
}

func (g *requestIDs) next() string {
	var b [128]byte
	n := g.n.Add(1)
	out := append(b[:0], g.prefix...)
	// Six digits at least, so that the ids of a quiet process sort.
	for d := uint64(100000); d > 1 && n < d; d /= 10 {
		out = append(out, '0')
	}
	return string(strconv.AppendUint(out, n, 10))
}

// named gives each request its naming, and its answer the X-Request-Id:
// the client's X-Request-Id when it is a short plain token (it goes on
// every log line, where a long or odd one does not belong), or a new one;
// and its trace context.
func (g *requestIDs) named(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := &naming{id: r.Header.Get(requestIDHeader)}
		if n.id == "" || !plainToken(n.id) {
			n.id = g.next()
		}
		n.trace, n.traced = readTrace(r.Header)
		// Said back, so that a client can quote the id the logs use.
		n.said[0] = n.id
		w.Header()[requestIDHeader] = n.said[:]
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), namingKey{}, n)))
	})
}

func plainToken(s string) bool {
	if len(s) > 128 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':' || c == '/' || c == '+' || c == '=') {
			return false
		}
	}
	return true
}

// traceOf is the request's trace context, if it came with a valid one.
func traceOf(ctx context.Context) (trace, bool) {
	n, ok := ctx.Value(namingKey{}).(*naming)
	if !ok || !n.traced {
		return trace{}, false
	}
	return n.trace, true
}
