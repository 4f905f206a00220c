package detach

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// stream is one response that may leave the server.
type stream struct {
	set        *Streams
	rctx       context.Context // net/http's, which ends when the handler returns
	ctx        context.Context // the request's own
	wr         writer
	closeAfter bool // the client asked for the connection to close after this request
	cancel     context.CancelCauseFunc
	unlink     func() bool // stops rctx from ending the request's own context
	body       body

	// Only the goroutine writing the response uses these (the handler's,
	// then the one it hands the stream to).
	w       http.ResponseWriter // net/http's, until the response leaves
	conn    net.Conn            // after it left
	buf     *[]byte             // written and not yet flushed
	werr    error               // the first failed write after it left
	reuse   bool                // the connection may serve another request
	pending []byte              // what the client sent beyond the request, net/http had read

	left atomic.Bool // set under mu, read without it too

	mu          sync.Mutex
	handlerDone bool     // the handler returned
	ended       bool     // the stream that left ended
	later       []func() // what runs once both are true
	reading     chan struct{}
	stopRead    bool
	early       []byte // what the client sent while the stream was open
}

func (st *stream) link() {
	st.unlink = context.AfterFunc(st.rctx, func() { st.cancel(context.Cause(st.rctx)) })
}

// returned is the handler's return. A response that never left ends
// here, as net/http ends it; one that left and has ended runs what was
// handed to Later.
func (st *stream) returned() {
	st.mu.Lock()
	st.handlerDone = true
	left, ended := st.left.Load(), st.ended
	st.mu.Unlock()
	if !left {
		st.unlink()
		st.cancel(nil)
		return
	}
	if ended {
		st.finish()
	}
}

// finish runs what was handed to Later, once the handler has returned and
// the stream has ended, on whichever goroutine came second.
func (st *stream) finish() {
	for _, f := range st.later {
		f()
	}
	st.later = nil
	st.set.remove(st)
}

// Leave takes w's response off the server: what was written goes out, the
// connection is hijacked, and from then on the writes through w go to it
// in chunks, from whichever goroutine the caller hands the stream to,
// which must call End when it is done. The caller returns from its handler
// at once after. It fails, and the response goes on as it was, when it
// cannot leave: see ErrCannot; or the client is gone; or the server is
// shutting down.
func Leave(w http.ResponseWriter) error {
	st := find(w)
	if st == nil || st.w == nil {
		return ErrCannot
	}
	h := st.w.Header()
	if h.Get("Content-Length") != "" || h.Get("Transfer-Encoding") != "" {
		return ErrCannot // not chunked by net/http
	}
	if !st.unlink() {
		return context.Cause(st.rctx) // the client is gone
	}
	rc := http.NewResponseController(st.w)
	if err := rc.Flush(); err != nil {
		st.link()
		return err
	}
	conn, rw, err := rc.Hijack()
	if err != nil {
		st.link()
		return fmt.Errorf("%w: %w", ErrCannot, err)
	}
	if n := rw.Reader.Buffered(); n > 0 {
		st.pending, _ = rw.Reader.Peek(n)
		st.pending = bytes.Clone(st.pending)
	}
	_ = conn.SetDeadline(time.Time{})
	st.reuse = st.set.reuse != nil && st.body.eof && !st.closeAfter && !hasToken(h.Values("Connection"), "close")
	st.body.rc = nil
	st.w, st.wr.ResponseWriter, st.conn = nil, nil, conn
	st.mu.Lock()
	st.left.Store(true)
	st.reading = make(chan struct{})
	st.mu.Unlock()
	if !st.set.add(st) {
		conn.Close()
		st.cancel(errShutdown)
	}
	go st.watch()
	return nil
}

var errShutdown = fmt.Errorf("the server is shutting down")

// watch ends the request's context when the client closes its
// connection; it stops reading when the client sends something (its next
// request, which is kept for the server) or the stream ends.
func (st *stream) watch() {
	defer close(st.reading)
	var b [1]byte
	n, err := st.conn.Read(b[:])
	st.mu.Lock()
	stopped := st.stopRead
	if n > 0 {
		st.early = []byte{b[0]}
	}
	st.mu.Unlock()
	if n == 0 && err != nil && !stopped {
		st.cancel(context.Canceled) // as net/http does when a client goes
	}
}

// End ends the body of a response that left and gives its connection
// back to the server, or closes it. The request's context ends, and what
// was handed to Later runs once the handler has returned too.
func End(w http.ResponseWriter) {
	st := find(w)
	if st == nil || st.conn == nil {
		return
	}
	if st.werr == nil {
		st.appendRaw([]byte("0\r\n\r\n"))
		st.flushBuf()
	}
	st.mu.Lock()
	st.stopRead = true
	st.mu.Unlock()
	_ = st.conn.SetReadDeadline(time.Unix(1, 0))
	<-st.reading
	_ = st.conn.SetReadDeadline(time.Time{})
	if st.werr == nil && st.reuse && st.ctx.Err() == nil {
		c := st.conn
		if rest := append(st.pending, st.early...); len(rest) > 0 {
			c = &prefixConn{Conn: c, prefix: rest}
		}
		if !st.set.reuse(c) {
			st.conn.Close()
		}
	} else {
		st.conn.Close()
	}
	st.cancel(nil)
	st.mu.Lock()
	st.ended = true
	returned := st.handlerDone
	st.mu.Unlock()
	if returned {
		st.finish()
	}
}

// Break ends a response that left as a failed one: End closes its
// connection, whose body may stop mid-event, and its request's context
// ends as for a client that went.
func Break(w http.ResponseWriter) {
	if st := find(w); st != nil && st.conn != nil && st.werr == nil {
		st.fail(errBroken)
	}
}

var errBroken = errors.New("the stream broke off")

// hasToken reports whether a comma-separated header lists token.
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), token) {
				return true
			}
		}
	}
	return false
}

// writer is the bottom of a response's writers: net/http's, until it
// leaves, then the connection, in chunks.
type writer struct {
	http.ResponseWriter
	s *stream
}

func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *writer) Header() http.Header {
	if w.s.w == nil {
		return http.Header{} // the headers went out long ago
	}
	return w.ResponseWriter.Header()
}

func (w *writer) WriteHeader(code int) {
	if w.s.w != nil {
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *writer) Write(p []byte) (int, error) {
	st := w.s
	if st.w != nil {
		return w.ResponseWriter.Write(p)
	}
	return st.write(p)
}

// FlushError and SetWriteDeadline reach net/http's response without a
// ResponseController, which would cost an allocation on every call.
func (w *writer) FlushError() error {
	st := w.s
	if st.w == nil {
		return st.flushBuf()
	}
	if f, ok := st.w.(interface{ FlushError() error }); ok {
		return f.FlushError()
	}
	return http.NewResponseController(st.w).Flush()
}

func (w *writer) Flush() { _ = w.FlushError() }

func (w *writer) SetWriteDeadline(t time.Time) error {
	st := w.s
	if st.w == nil {
		return st.conn.SetWriteDeadline(t)
	}
	if d, ok := st.w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		return d.SetWriteDeadline(t)
	}
	return http.NewResponseController(st.w).SetWriteDeadline(t)
}

// bufs lends a stream that left a buffer between a write and its flush:
// an idle stream holds none.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// bigChunk is the size from which a write goes to the connection as it is,
// not copied into the buffer.
const bigChunk = 16 << 10

// write sends p as one chunk.
func (st *stream) write(p []byte) (int, error) {
	if st.werr != nil {
		return 0, st.werr
	}
	if len(p) == 0 {
		return 0, nil
	}
	var head [20]byte
	h := append(strconv.AppendInt(head[:0], int64(len(p)), 16), '\r', '\n')
	if len(p) >= bigChunk {
		var out net.Buffers
		if st.buf != nil && len(*st.buf) > 0 {
			out = append(out, *st.buf)
		}
		out = append(out, h, p, []byte("\r\n"))
		_, err := out.WriteTo(st.conn)
		st.release()
		if err != nil {
			st.fail(err)
			return 0, err
		}
		return len(p), nil
	}
	st.appendRaw(h)
	st.appendRaw(p)
	st.appendRaw([]byte("\r\n"))
	return len(p), nil
}

func (st *stream) appendRaw(p []byte) {
	if st.buf == nil {
		st.buf = bufs.Get().(*[]byte)
	}
	*st.buf = append(*st.buf, p...)
}

// flushBuf writes what is buffered; the buffer goes back to the pool.
func (st *stream) flushBuf() error {
	if st.werr != nil {
		return st.werr
	}
	if st.buf == nil || len(*st.buf) == 0 {
		return nil
	}
	_, err := st.conn.Write(*st.buf)
	st.release()
	if err != nil {
		st.fail(err)
	}
	return err
}

func (st *stream) release() {
	if st.buf == nil {
		return
	}
	if cap(*st.buf) <= 64<<10 {
		*st.buf = (*st.buf)[:0]
		bufs.Put(st.buf)
	}
	st.buf = nil
}

// fail notes a failed write: the client cannot take the stream, which
// ends the request as net/http would.
func (st *stream) fail(err error) {
	st.werr = err
	st.cancel(context.Canceled)
}
