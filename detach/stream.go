package detach

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
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
	own        *ownCtx         // the request's own context
	wr         writer
	closeAfter bool        // the client asked for the connection to close after this request
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
	status  int                 // the status written, 0 for none yet
	method  string
	back    chan struct{} // closed when the handler returned, once the response left

	left  atomic.Bool // set by Leave, on the handler's goroutine; read by Later and Left
	ended bool        // End ran: a second call does nothing

	mu        sync.Mutex
	later     []func() // what runs when the stream ends
	watchDone bool     // watch has returned
	idle      bool     // the stream ended; watch waits for the client's next request
	early     []byte   // what the client sent while the stream was open
}

func (st *stream) link() {
	st.unlink = context.AfterFunc(st.rctx, func() { st.own.end(context.Cause(st.rctx), true) })
}

// returned is the handler's return. A response that never left ends
// here, as net/http ends it; for one that left, End goes on.
func (st *stream) returned() {
	if st.left.Load() {
		close(st.back)
		return
	}
	st.unlink()
	st.own.end(nil, false)
}

// Leave takes w's response off the server: what was written goes out, the
// connection is hijacked, and from then on the writes through w go to it
// in chunks, from whichever goroutine the caller hands the stream to,
// which must call End when it is done. The caller returns from its handler
// at once after. The connection's deadlines are cleared: one set for the
// response before is gone, and is the caller's to set again. It fails,
// and the response goes on as it was, when it cannot leave: see
// ErrCannot; or the client is gone; or the server is shutting down.
func Leave(w http.ResponseWriter) error {
	st := find(w)
	if st == nil || st.w == nil || st.method == http.MethodHead {
		return ErrCannot
	}
	switch status := st.status; {
	case status == http.StatusNoContent, status == http.StatusNotModified, status != 0 && status < 200:
		return ErrCannot // no body
	}
	h := st.w.Header()
	if h.Get("Content-Length") != "" || h.Get("Transfer-Encoding") != "" {
		return ErrCannot // not chunked by net/http
	}
	if st.set.isClosing() {
		return errShutdown
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
	st.back = make(chan struct{})
	st.left.Store(true)
	if !st.set.add(st) {
		// Shutting down since the check above: the stream ends here.
		st.reuse = false
		conn.Close()
		st.own.end(errShutdown, false)
	}
	go st.watch()
	return nil
}

var errShutdown = errors.New("the server is shutting down")

// watch ends the request's context when the client closes its
// connection while the stream is open. When the client sends something
// instead (its next request), it stops reading and keeps what it read for
// the server. Once the stream has ended, it waits, as net/http does
// between requests, for the client's next request and gives the
// connection back to the server with it.
func (st *stream) watch() {
	var b [1]byte
	n, err := st.conn.Read(b[:])
	st.mu.Lock()
	st.watchDone = true
	if n > 0 {
		st.early = []byte{b[0]}
	}
	idle := st.idle
	st.mu.Unlock()
	switch {
	case idle:
		st.giveBack()
	case n == 0 && err != nil:
		st.own.end(context.Canceled, true) // as net/http does when a client goes
	}
}

// End ends a response that left, once its handler has returned: what was
// handed to Later runs, the body's last chunk goes out, the request's
// context ends, and the connection waits for the client's next request,
// or is closed. A panic in what Later was handed goes on once the
// connection is closed.
func End(w http.ResponseWriter) {
	st := find(w)
	if st == nil || st.conn == nil || st.ended {
		return
	}
	st.ended = true
	<-st.back
	// As net/http runs a handler's defers before it ends the body: a
	// client that has the whole answer finds its limits released and its
	// call logged.
	failed := st.runLater()
	if failed != nil {
		st.fail(errBroken)
	}
	if st.werr == nil {
		st.appendRaw([]byte("0\r\n\r\n"))
		_ = st.flushBuf()
	}
	gone := st.own.Err() != nil
	st.own.end(nil, false)
	st.set.remove(st)
	if st.werr != nil || !st.reuse || gone {
		st.conn.Close()
	} else {
		// Decided under mu, which watch takes when its read returns: the
		// connection is watch's to give back only once idle is set, with
		// its deadline.
		st.mu.Lock()
		switch {
		case st.watchDone:
			st.mu.Unlock()
			st.giveBack()
		case !st.set.keepIdle(st):
			st.mu.Unlock()
			st.conn.Close() // watch's read fails, and it does nothing more
		default:
			if len(st.pending) > 0 {
				// The client's next request is here already: watch stops
				// waiting for more of it, and gives it to the server.
				_ = st.conn.SetReadDeadline(time.Unix(1, 0))
			} else {
				_ = st.conn.SetReadDeadline(st.set.idleDeadline())
			}
			st.idle = true
			st.mu.Unlock()
		}
	}
	if failed != nil {
		panic(failed)
	}
}

// runLater runs what was handed to Later, in order, each whatever the
// others do, as deferred calls run; it returns the first panic, with
// where it came from, if one panicked.
func (st *stream) runLater() (failed error) {
	st.mu.Lock()
	later := st.later
	st.later = nil
	st.mu.Unlock()
	for _, f := range later {
		func() {
			defer func() {
				if v := recover(); v != nil && failed == nil {
					failed = fmt.Errorf("%v\n\n%s", v, debug.Stack())
				}
			}()
			f()
		}()
	}
	return failed
}

// giveBack hands the connection, idle between requests, to the server
// with what the client sent on it already; or closes it, if the client
// sent nothing in time or the server no longer takes connections.
func (st *stream) giveBack() {
	st.set.dropIdle(st)
	c, rest := st.conn, append(st.pending, st.early...)
	if pc, ok := c.(*prefixConn); ok {
		// One the server was given back before: not wrapped twice. What
		// it had left to give comes after what was read from it.
		c, rest = pc.Conn, append(rest, pc.prefix...)
	}
	if len(rest) == 0 {
		st.conn.Close() // the client closed, or sent nothing within the idle timeout
		return
	}
	_ = c.SetDeadline(time.Time{}) // the stream's write deadline, the idle wait's read one
	if !st.set.reuse(&prefixConn{Conn: c, prefix: rest}) {
		c.Close()
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
		if w.s.status == 0 || w.s.status < 200 {
			w.s.status = code
		}
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *writer) Write(p []byte) (int, error) {
	st := w.s
	if st.w != nil {
		if st.status < 200 {
			st.status = http.StatusOK // as net/http sends, after any 1xx
		}
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
	if len(p) >= bigChunk {
		head := chunkHead(nil, len(p))
		ahead := len(head) // what goes out before p
		var out net.Buffers
		if st.buf != nil && len(*st.buf) > 0 {
			out = append(out, *st.buf)
			ahead += len(*st.buf)
		}
		out = append(out, head, p, []byte("\r\n"))
		n, err := out.WriteTo(st.conn)
		st.release()
		if err != nil {
			st.fail(err)
			// What of p went out, for a caller that counts it (the
			// audit's bytes_out).
			return min(max(int(n)-ahead, 0), len(p)), err
		}
		return len(p), nil
	}
	if st.buf == nil {
		st.buf = st.set.buf()
	}
	// Straight into the buffer: a chunk's head made apart would be an
	// allocation per write, three per event.
	b := chunkHead(*st.buf, len(p))
	b = append(b, p...)
	*st.buf = append(b, '\r', '\n')
	return len(p), nil
}

// chunkHead appends the head of a chunk of n bytes to b.
func chunkHead(b []byte, n int) []byte {
	return append(strconv.AppendInt(b, int64(n), 16), '\r', '\n')
}

func (st *stream) appendRaw(p []byte) {
	if st.buf == nil {
		st.buf = st.set.buf()
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
		st.set.bufs.Put(st.buf)
	}
	st.buf = nil
}

// fail notes a failed write: the client cannot take the stream, which
// ends the request as net/http would.
func (st *stream) fail(err error) {
	st.werr = err
	st.own.end(context.Canceled, false)
}
