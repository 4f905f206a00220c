package detach

import (
	"errors"
	"net"
	"sync"
)

// Listener is a net.Listener that also gives the server back the
// connections of streams that ended (Reuse), so that a client's next
// request on one is served as net/http would have served it.
type Listener struct {
	net.Listener
	back   chan net.Conn
	in     chan accepted
	done   chan struct{}
	start  sync.Once
	closed sync.Once
}

type accepted struct {
	c   net.Conn
	err error
}

// NewListener wraps l.
func NewListener(l net.Listener) *Listener {
	return &Listener{Listener: l, back: make(chan net.Conn), in: make(chan accepted), done: make(chan struct{})}
}

// Accept returns the next connection: a new one, or one given back.
func (l *Listener) Accept() (net.Conn, error) {
	l.start.Do(func() { go l.pump() })
	select {
	case c := <-l.back:
		return c, nil
	case a := <-l.in:
		return a.c, a.err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// pump accepts new connections for Accept, which also waits for those
// given back.
func (l *Listener) pump() {
	for {
		c, err := l.Listener.Accept()
		select {
		case l.in <- accepted{c, err}:
		case <-l.done:
			if c != nil {
				c.Close()
			}
			return
		}
		if errors.Is(err, net.ErrClosed) {
			return
		}
	}
}

// Reuse gives c back to the server that accepts on l; false once l is
// closed.
func (l *Listener) Reuse(c net.Conn) bool {
	select {
	case l.back <- c:
		return true
	case <-l.done:
		return false
	}
}

// Close stops accepting, as the listener it wraps does.
func (l *Listener) Close() error {
	err := net.ErrClosed
	l.closed.Do(func() {
		close(l.done)
		err = l.Listener.Close()
	})
	return err
}

// prefixConn is a connection the client had already sent prefix on.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite lets net/http end its side of the connection first when it
// closes one, as it does for the connections it accepts.
func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
