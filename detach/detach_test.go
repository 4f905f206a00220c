package detach

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server serves h through Middleware on a listener that takes
// connections back, as the gateway does.
func server(t testing.TB, h http.HandlerFunc, configure ...func(*http.Server)) (*Streams, string) {
	t.Helper()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := NewListener(tcp)
	srv := &http.Server{}
	for _, c := range configure {
		c(srv)
	}
	s := New(ln.Reuse, srv.IdleTimeout)
	srv.Handler = s.Middleware(h)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := s.Wait(ctx); err != nil {
			t.Errorf("streams left open: %v", err)
		}
		<-served
	})
	return s, tcp.Addr().String()
}

// routes serves /echo with echo, and the rest with stream.
func routes(stream http.Handler, echo http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/echo" {
			echo(w, r)
			return
		}
		stream.ServeHTTP(w, r)
	}
}

// openStream asks for /stream on c and reads its answer's head.
func openStream(t testing.TB, c net.Conn, br *bufio.Reader) *http.Response {
	t.Helper()
	post(t, c, "/stream", "{}")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// post writes one request on c.
func post(t testing.TB, c net.Conn, path, body string) {
	t.Helper()
	_, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
	if err != nil {
		t.Fatal(err)
	}
}

func dial(t testing.TB, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // no test here hangs
	return c, bufio.NewReader(c)
}

// streamHandler answers with an event, leaves, and goes on from another
// goroutine with what next sends it until it is closed. It hands Later
// steps that it records, and tells ctxs the request's context.
type streamHandler struct {
	deadline time.Time     // a write deadline the stream sets once it left; zero: none
	hold     chan struct{} // the last Later step waits for it to close; nil: no wait
	holding  chan struct{} // closed when that step begins to wait
	next     chan string
	ctxs     chan context.Context
	mu       sync.Mutex
	steps    []string
	ended    chan struct{} // closed when the last Later step ran
}

func newStreamHandler() *streamHandler {
	return &streamHandler{next: make(chan string), ctxs: make(chan context.Context, 1), ended: make(chan struct{})}
}

func (s *streamHandler) step(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, name)
}

func (s *streamHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, err := io.ReadAll(r.Body); err != nil {
		return
	}
	defer Later(w, func() {
		if s.hold != nil {
			close(s.holding)
			<-s.hold
		}
		s.step("outer")
		close(s.ended)
	})
	defer Later(w, func() { s.step("inner") })
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, "data: first\n\n")
	if err := Leave(w); err != nil {
		s.step("stayed: " + err.Error())
		return
	}
	s.ctxs <- r.Context()
	go func() {
		defer End(w)
		defer s.step("stream ended")
		if !s.deadline.IsZero() {
			_ = http.NewResponseController(w).SetWriteDeadline(s.deadline)
		}
		for {
			select {
			case msg, ok := <-s.next:
				if !ok {
					return
				}
				fmt.Fprintf(w, "data: %s\n\n", msg)
				if http.NewResponseController(w).Flush() != nil {
					return
				}
			case <-r.Context().Done():
				return
			}
		}
	}()
}

// A response that left goes on in chunks; when it ends, its connection
// serves the client's next request, and what was handed to Later ran
// after the stream ended, innermost first.
func TestLeftStreamGoesOnThenTheConnectionServesAgain(t *testing.T) {
	sh := newStreamHandler()
	sh.hold, sh.holding = make(chan struct{}), make(chan struct{})
	var echoes sync.WaitGroup
	echoes.Add(1)
	s, addr := server(t, routes(sh, func(w http.ResponseWriter, r *http.Request) {
		defer echoes.Done()
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	c, br := dial(t, addr)
	resp := openStream(t, c, br)
	if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Fatalf("transfer encoding %v, want chunked", resp.TransferEncoding)
	}
	ctx := waitFor(t, sh.ctxs, "the stream to leave")
	if n := s.Live(); n != 1 {
		t.Errorf("Live() = %d with one stream out, want 1", n)
	}
	body := bufio.NewReader(resp.Body)
	read := func(want string) {
		t.Helper()
		line, err := body.ReadString('\n')
		if err != nil || line != want {
			t.Fatalf("read %q, %v; want %q", line, err, want)
		}
		body.ReadString('\n')
	}
	read("data: first\n")
	sh.next <- "second"
	read("data: second\n")
	sh.next <- strings.Repeat("x", bigChunk+5) // goes to the connection as it is
	read("data: " + strings.Repeat("x", bigChunk+5) + "\n")
	if ctx.Err() != nil {
		t.Fatal("the request's context ended while its stream went on")
	}
	close(sh.next)
	// What the handler deferred runs before the body's end goes out, as
	// with net/http: a client that has its answer finds its request over.
	rest := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(body)
		rest <- b
	}()
	waitFor(t, sh.holding, "the last Later step")
	select {
	case <-rest:
		t.Error("the body ended while what was handed to Later ran")
	case <-time.After(100 * time.Millisecond): // what must not happen did not, in this long
	}
	close(sh.hold)
	if b := waitFor(t, rest, "the body's end"); len(b) != 0 {
		t.Fatalf("the body's end: %q", b)
	}
	waitFor(t, sh.ended, "the Later steps")
	waitFor(t, ctx.Done(), "the request's context to end")
	sh.mu.Lock()
	got := strings.Join(sh.steps, ", ")
	sh.mu.Unlock()
	if want := "stream ended, inner, outer"; got != want {
		t.Errorf("steps %q, want %q", got, want)
	}
	post(t, c, "/echo", "again")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the connection after the stream: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "again" {
		t.Errorf("the next request's answer: %q", b)
	}
	echoes.Wait()
}

// A client that closes its connection ends the request's context of a
// response that left, as net/http does for one that stayed.
func TestClientThatClosesEndsTheLeftRequest(t *testing.T) {
	sh := newStreamHandler()
	_, addr := server(t, sh.ServeHTTP)
	c, br := dial(t, addr)
	openStream(t, c, br)
	ctx := waitFor(t, sh.ctxs, "the stream to leave")
	c.Close()
	waitFor(t, ctx.Done(), "the request's context to end")
	if !errors.Is(context.Cause(ctx), context.Canceled) {
		t.Errorf("cause %v", context.Cause(ctx))
	}
	waitFor(t, sh.ended, "the Later steps")
}

// What a client sends while its stream is open (a request pipelined
// behind it) is served once the stream ends, not lost.
func TestWhatTheClientSentMeanwhileIsServedAfter(t *testing.T) {
	sh := newStreamHandler()
	answered := make(chan string, 1)
	_, addr := server(t, routes(sh, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		answered <- r.Method + " " + string(b)
		w.Write(b)
	}))
	c, br := dial(t, addr)
	resp := openStream(t, c, br)
	ctx := waitFor(t, sh.ctxs, "the stream to leave")
	post(t, c, "/echo", "pipelined")
	sh.next <- "still here"
	body := bufio.NewReader(resp.Body)
	for range 2 {
		body.ReadString('\n')
		body.ReadString('\n')
	}
	if ctx.Err() != nil {
		t.Fatal("a client that sent more was taken for gone")
	}
	close(sh.next)
	io.ReadAll(body)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the pipelined request: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if got := waitFor(t, answered, "the pipelined request"); string(b) != "pipelined" || got != "POST pipelined" {
		t.Errorf("the pipelined request: %q, answered %q", got, b)
	}
	waitFor(t, sh.ended, "the Later steps")
}

// Wait gives up at its deadline and closes what is still open, which ends
// those streams.
func TestWaitClosesWhatOutlivesIt(t *testing.T) {
	sh := newStreamHandler()
	s, addr := server(t, sh.ServeHTTP)
	c, br := dial(t, addr)
	resp := openStream(t, c, br)
	ctx := waitFor(t, sh.ctxs, "the stream to leave")
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Wait(expired); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with a stream open: %v", err)
	}
	waitFor(t, ctx.Done(), "the request's context to end")
	waitFor(t, sh.ended, "the Later steps")
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("the body of a closed stream ended cleanly")
	}
}

// Responses that cannot leave stay with net/http, whole.
func TestWhatCannotLeave(t *testing.T) {
	for _, tc := range []struct {
		name, accept string
		header       []string
		want         error
	}{
		{"no event stream accepted", "application/json", nil, ErrCannot},
		{"a Content-Length", "text/event-stream", []string{"Content-Length", "14"}, ErrCannot},
		{"no content", "text/event-stream", []string{":status", "204"}, ErrCannot},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := make(chan error, 1)
			_, addr := server(t, func(w http.ResponseWriter, r *http.Request) {
				status := http.StatusOK
				for i := 0; i < len(tc.header); i += 2 {
					if tc.header[i] == ":status" {
						status = http.StatusNoContent
						continue
					}
					w.Header().Set(tc.header[i], tc.header[i+1])
				}
				w.WriteHeader(status)
				if status == http.StatusOK {
					fmt.Fprint(w, "data: first\n\n")
				}
				errs <- Leave(w)
			})
			req, _ := http.NewRequest("POST", "http://"+addr+"/", strings.NewReader("{}"))
			req.Header.Set("Accept", tc.accept)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err := <-errs; !errors.Is(err, tc.want) {
				t.Errorf("Leave: %v, want %v", err, tc.want)
			}
			if want := map[bool]string{true: "data: first\n\n"}[resp.StatusCode == http.StatusOK]; string(b) != want {
				t.Errorf("body %q, want %q", b, want)
			}
			http.DefaultClient.CloseIdleConnections()
		})
	}
}

// waitFor takes from ch, or fails the test after a while: no test here
// hangs.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("waited 10s for %s", what)
		panic("unreachable")
	}
}

// A panic in what was handed to Later does not keep the rest from
// running, and goes on from End once the connection is closed.
func TestAPanicAtTheEndSparesTheRest(t *testing.T) {
	ran, panicked := make(chan string, 2), make(chan any, 1)
	_, addr := server(t, func(w http.ResponseWriter, r *http.Request) {
		defer Later(w, func() { ran <- "released" })
		defer Later(w, func() { panic("in the audit") })
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		if err := Leave(w); err != nil {
			t.Errorf("Leave: %v", err)
			return
		}
		go func() {
			defer func() { panicked <- recover() }()
			End(w)
		}()
	})
	c, br := dial(t, addr)
	resp := openStream(t, c, br)
	if got := waitFor(t, ran, "the Later func after the one that panicked"); got != "released" {
		t.Errorf("ran %q", got)
	}
	if v := waitFor(t, panicked, "End's panic"); v == nil || !strings.Contains(fmt.Sprint(v), "in the audit") {
		t.Errorf("End panicked with %v", v)
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("the body of a stream whose end panicked ended cleanly")
	}
}

// A large write to a stream that left, cut off part way (here by its
// write deadline, the client reading nothing), says how much of it went
// out, as net/http's does: a caller counts the bytes it sent by it.
func TestACutWriteSaysWhatWentOut(t *testing.T) {
	p := []byte(strings.Repeat("x", 16<<20)) // far more than the connection's buffers hold
	wrote := make(chan int, 1)
	_, addr := server(t, func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		if err := Leave(w); err != nil {
			t.Error(err)
			wrote <- 0
			return
		}
		go func() {
			defer End(w)
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			n, err := w.Write(p)
			if err == nil {
				t.Error("a write the client did not take succeeded")
			}
			wrote <- n
		}()
	})
	c, br := dial(t, addr)
	resp := openStream(t, c, br)
	n := waitFor(t, wrote, "the write to fail")
	body, _ := io.ReadAll(resp.Body) // cut off: the connection is closed
	if got := strings.Count(string(body), "x"); n <= 0 || n > got {
		t.Errorf("the write said %d bytes went out, and the client had %d of them", n, got)
	}
}
