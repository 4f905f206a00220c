// Package detach lets a long HTTP/1.1 response leave net/http while it
// goes on. net/http keeps, for each response in progress, its connection's
// read and write buffers, two goroutines and the handler's whole stack;
// for a stream that is idle most of its life that is most of what it
// costs. A handler that leaves hijacks its connection, writes the rest of
// its chunked body itself from a goroutine with a small stack, and
// returns; when the stream ends, the connection goes back to the server
// for the client's next request, as net/http would have kept it alive.
//
// What the handler and the middleware around it would do on their way
// out (log, count, release a limit) they hand to Later, which runs it at
// once, or, for a response that left, once it has ended.
package detach

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Streams is the responses that left the server, and what a shutdown
// needs of them.
type Streams struct {
	reuse       func(net.Conn) bool
	idleTimeout time.Duration

	mu      sync.Mutex
	live    map[*stream]struct{}
	idle    map[*stream]struct{} // ended, waiting for the client's next request
	closing bool
	ended   chan struct{} // closed and replaced each time one ends

	// bufs lends a stream that left a buffer between a write and its
	// flush: an idle stream holds none.
	bufs sync.Pool
}

func (s *Streams) buf() *[]byte {
	if b, ok := s.bufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 4096)
	return &b
}

// New returns the set of streams a server's handler lets leave. reuse
// hands a connection whose stream ended back to the server (see
// Listener); nil, or false from it, closes the connection instead. Until
// the client's next request on it begins, the connection waits here, at
// most idleTimeout (0: no limit), as the server's IdleTimeout would have
// it wait.
func New(reuse func(net.Conn) bool, idleTimeout time.Duration) *Streams {
	return &Streams{reuse: reuse, idleTimeout: idleTimeout, live: map[*stream]struct{}{}, idle: map[*stream]struct{}{}, ended: make(chan struct{})}
}

// Live is how many streams have left the server and not ended.
func (s *Streams) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}

// Wait refuses new leavers, closes the connections that wait between
// requests, and waits until every stream that left has ended or ctx ends;
// then it closes the connections of those still open.
func (s *Streams) Wait(ctx context.Context) error {
	for {
		s.mu.Lock()
		s.closing = true
		for st := range s.idle {
			st.conn.Close()
		}
		n, ended := len(s.live), s.ended
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ended:
		case <-ctx.Done():
			s.closeAll()
			return context.Cause(ctx)
		}
	}
}

// closeAll closes the connection of every stream still open: its writes
// fail, and so it ends.
func (s *Streams) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st := range s.live {
		st.conn.Close()
	}
}

func (s *Streams) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// add counts a stream that left; false once the server is shutting
// down, when it is counted still, so that Wait waits for what runs at its
// end.
func (s *Streams) add(st *stream) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live[st] = struct{}{}
	return !s.closing
}

func (s *Streams) remove(st *stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, st)
	close(s.ended)
	s.ended = make(chan struct{})
}

// keepIdle notes a connection waiting between requests; false once the
// server is shutting down.
func (s *Streams) keepIdle(st *stream) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.idle[st] = struct{}{}
	return true
}

func (s *Streams) dropIdle(st *stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.idle, st)
}

func (s *Streams) idleDeadline() time.Time {
	if s.idleTimeout <= 0 {
		return time.Time{}
	}
	return time.Now().Add(s.idleTimeout)
}

// Middleware makes the responses of next able to leave: those of HTTP/1.1
// requests that accept an event stream. It gives such a request a context
// of its own, which ends when net/http's would (the client goes) until
// the response leaves, and after that when the client closes the
// connection or a write to it fails.
func (s *Streams) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 1 || r.ProtoMinor < 1 || !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			next.ServeHTTP(w, r)
			return
		}
		// One allocation for the stream, its writer and its body (its
		// context is apart, since it may outlive the stream): most such
		// requests are answered at once, and never leave.
		st := &stream{set: s, w: w, rctx: r.Context(), closeAfter: r.Close, method: r.Method, own: &ownCtx{}}
		st.own.Context, st.own.cancel = context.WithCancelCause(context.WithoutCancel(r.Context()))
		st.link()
		st.body.rc, st.body.eof = r.Body, r.Body == nil || r.Body == http.NoBody
		st.wr = writer{s: st, ResponseWriter: w}
		r = r.WithContext(st.own)
		r.Body = &st.body
		defer st.returned()
		next.ServeHTTP(&st.wr, r)
	})
}

// ErrCannot is why a response could not leave: it is not one Middleware
// let leave, it already did, or it is not a chunked stream.
var ErrCannot = errors.New("this response cannot leave the server")

// Later runs f once w's response has ended: at once, unless it left the
// server, then when its stream ends. Middleware and handlers hand it what
// they would defer; each f runs once, in the order they were handed.
func Later(w http.ResponseWriter, f func()) {
	st := find(w)
	if st == nil {
		f()
		return
	}
	st.mu.Lock()
	if !st.left.Load() {
		st.mu.Unlock()
		f()
		return
	}
	st.later = append(st.later, f)
	st.mu.Unlock()
}

// Left reports whether w's response has left the server: what a handler
// would defer goes to Later then, and runs at once otherwise.
func Left(w http.ResponseWriter) bool {
	st := find(w)
	return st != nil && st.left.Load()
}

// find is the stream under w's wrappers, if Middleware made one.
func find(w http.ResponseWriter) *stream {
	for w != nil {
		if d, ok := w.(*writer); ok {
			return d.s
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
	return nil
}

// body is a request's body, which a response that leaves lets go of:
// net/http's reads from the connection's buffer, which would otherwise
// stay with the stream.
type body struct {
	rc  io.ReadCloser
	eof bool
}

func (b *body) Read(p []byte) (int, error) {
	if b.rc == nil {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *body) Close() error {
	if b.rc == nil {
		return nil
	}
	return b.rc.Close()
}
