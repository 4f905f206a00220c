package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// rawTransport is the load client's HTTP/1.1: each call takes an idle
// connection (or dials one), writes the request, reads the whole answer
// and gives the connection back, all on the caller's goroutine. net/http's
// Transport runs two goroutines per connection and hands every request
// and answer between them; on a 2-core machine that the servers share,
// the client's own CPU per call is what bounds the floor (see
// BENCHMARKS.md), so it is kept to this.
type rawTransport struct {
	mu   sync.Mutex
	idle map[string][]*rawConn
}

type rawConn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

// maxRawBody bounds an answer the client reads.
const maxRawBody = 64 << 20

func (t *rawTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		// A watch on a ctx that is over fires on a goroutine of its own,
		// which a quick exchange can beat: refuse before starting one.
		return nil, err
	}
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
	}
	resp, err := t.try(req, body, false)
	if errors.Is(err, errStale) {
		// The server closed an idle connection (Node does after 5 s):
		// the call goes again on a new one.
		resp, err = t.try(req, body, true)
	}
	return resp, err
}

// errStale is a connection taken from the idle ones that failed before
// any answer came: the server had closed it.
var errStale = errors.New("a stale connection")

func (t *rawTransport) try(req *http.Request, body []byte, fresh bool) (*http.Response, error) {
	addr := req.URL.Host
	rc, reused, err := t.get(req.Context(), addr, fresh)
	if err != nil {
		return nil, err
	}
	// A call cut off by the end of a run unblocks at once.
	stop := context.AfterFunc(req.Context(), func() { _ = rc.c.SetDeadline(time.Unix(1, 0)) })
	resp, reusable, err := rc.exchange(req, body)
	if !stop() || err != nil || !reusable {
		rc.c.Close()
	} else {
		t.put(addr, rc)
	}
	switch {
	case err != nil && req.Context().Err() != nil:
		return nil, req.Context().Err()
	case err != nil && reused && resp == nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)):
		return nil, fmt.Errorf("%w: %v", errStale, err)
	}
	return resp, err
}

func (t *rawTransport) get(ctx context.Context, addr string, fresh bool) (*rawConn, bool, error) {
	t.mu.Lock()
	if n := len(t.idle[addr]); n > 0 && !fresh {
		rc := t.idle[addr][n-1]
		t.idle[addr] = t.idle[addr][:n-1]
		t.mu.Unlock()
		return rc, true, nil
	}
	t.mu.Unlock()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	return &rawConn{c: c, r: bufio.NewReaderSize(c, 32<<10), w: bufio.NewWriterSize(c, 8<<10)}, false, nil
}

func (t *rawTransport) put(addr string, rc *rawConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.idle == nil {
		t.idle = map[string][]*rawConn{}
	}
	t.idle[addr] = append(t.idle[addr], rc)
}

// CloseIdleConnections closes the connections no call holds.
func (t *rawTransport) CloseIdleConnections() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, cs := range t.idle {
		for _, rc := range cs {
			rc.c.Close()
		}
	}
	t.idle = nil
}

// exchange writes req and reads its answer whole.
func (rc *rawConn) exchange(req *http.Request, body []byte) (*http.Response, bool, error) {
	w := rc.w
	w.WriteString(req.Method)
	w.WriteByte(' ')
	w.WriteString(req.URL.RequestURI())
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(req.URL.Host)
	w.WriteString("\r\nContent-Length: ")
	w.WriteString(strconv.Itoa(len(body)))
	w.WriteString("\r\n")
	for k, vs := range req.Header {
		for _, v := range vs {
			w.WriteString(k)
			w.WriteString(": ")
			w.WriteString(v)
			w.WriteString("\r\n")
		}
	}
	w.WriteString("\r\n")
	w.Write(body)
	if err := w.Flush(); err != nil {
		return nil, false, err
	}
	resp, err := http.ReadResponse(rc.r, req)
	if err != nil {
		return nil, false, err
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxRawBody+1))
	resp.Body.Close()
	if err != nil {
		return nil, false, err
	}
	if len(b) > maxRawBody {
		return nil, false, fmt.Errorf("an answer over %d bytes", maxRawBody)
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, !resp.Close, nil
}
