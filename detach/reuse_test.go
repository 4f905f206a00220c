package detach

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// What becomes of the connection once a stream that left has ended.

// readStream reads a response that leaves to its end; End must have run.
func readStream(t *testing.T, c net.Conn, br *bufio.Reader, sh *streamHandler) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, sh.ctxs, "the stream to leave")
	close(sh.next)
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	waitFor(t, sh.ended, "the Later steps")
}

// echo answers a request with its body, once after is past.
func echo(after time.Time) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		<-time.After(time.Until(after))
		w.Write(b)
	}
}

// The connection a stream gave back keeps none of its deadlines: a write
// deadline the stream set does not cut the next answer, and it waits for
// the next request as long as the server's IdleTimeout says, not its
// ReadHeaderTimeout.
func TestTheConnectionGivenBackHasTheServersTimeouts(t *testing.T) {
	const short = 100 * time.Millisecond
	sh := newStreamHandler()
	sh.deadline = time.Now().Add(short)
	var late time.Time
	_, addr := server(t, routes(sh, func(w http.ResponseWriter, r *http.Request) { echo(late)(w, r) }), func(srv *http.Server) {
		srv.ReadHeaderTimeout = short
		srv.IdleTimeout = time.Minute
	})
	c, br := dial(t, addr)
	post(t, c, "/stream", "{}")
	readStream(t, c, br, sh)
	// Past the stream's write deadline, and past ReadHeaderTimeout after
	// the stream ended: the time is what is tested.
	late = time.Now().Add(2 * short)
	<-time.After(time.Until(late))
	post(t, c, "/echo", "after a while")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the next request on the connection: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "after a while" {
		t.Errorf("the next answer: %q, %v", b, err)
	}
}

// A request the client sent at once behind the one that streams, which
// net/http had already read when the stream left, is served when the
// stream ends, with nothing more from the client.
func TestARequestReadAheadIsServedAfterTheStream(t *testing.T) {
	sh := newStreamHandler()
	_, addr := server(t, routes(sh, echo(time.Time{})))
	c, br := dial(t, addr)
	both := "POST /stream HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nContent-Length: 2\r\n\r\n{}" +
		"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nahead"
	if _, err := io.WriteString(c, both); err != nil {
		t.Fatal(err)
	}
	readStream(t, c, br, sh)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the request read ahead: %v", err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "ahead" {
		t.Errorf("its answer: %q", b)
	}
}

// A client that asked for the connection to be closed has it closed at
// the stream's end.
func TestConnectionCloseIsKept(t *testing.T) {
	sh := newStreamHandler()
	_, addr := server(t, sh.ServeHTTP)
	c, br := dial(t, addr)
	if _, err := fmt.Fprintf(c, "POST /stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAccept: text/event-stream\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
		t.Fatal(err)
	}
	readStream(t, c, br, sh)
	if n, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the stream: %v, %v; want the connection closed", n, err)
	}
}

// Two streams, one after the other, on one connection: the second leaves
// from a connection the server was given back, and the third request is
// served after it.
func TestAConnectionGivenBackLeavesAgain(t *testing.T) {
	handlers := make(chan *streamHandler, 2)
	_, addr := server(t, routes(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (<-handlers).ServeHTTP(w, r) }), echo(time.Time{})))
	c, br := dial(t, addr)
	for range 2 {
		sh := newStreamHandler()
		handlers <- sh
		post(t, c, "/stream", "{}")
		readStream(t, c, br, sh)
	}
	post(t, c, "/echo", "third")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "third" {
		t.Errorf("the third answer: %q", b)
	}
}

// A connection waiting for the client's next request is closed when the
// server's IdleTimeout passes, and by Wait.
func TestAnIdleConnectionIsClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		idle time.Duration
	}{{"by the idle timeout", 50 * time.Millisecond}, {"by Wait", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			sh := newStreamHandler()
			s, addr := server(t, sh.ServeHTTP, func(srv *http.Server) { srv.IdleTimeout = tc.idle })
			c, br := dial(t, addr)
			post(t, c, "/stream", "{}")
			readStream(t, c, br, sh)
			if tc.idle == 0 {
				if err := s.Wait(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if b, err := br.ReadByte(); err != io.EOF {
				t.Errorf("the idle connection: %v, %v; want it closed", b, err)
			}
		})
	}
}
