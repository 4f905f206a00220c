package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/metrics"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Bad input gets a clear answer and never reaches the backend.
func TestBadInputIsRefused(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{MaxBodyBytes: 1024})
	tests := map[string]struct {
		method, contentType, body string
		status, code              int
		id                        string
	}{
		"malformed JSON":      {"POST", "application/json", `{"jsonrpc":"2.0",`, 400, jsonrpc.CodeParseError, ""},
		"not UTF-8":           {"POST", "application/json", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"name\":\"a\xffb\"}}", 400, jsonrpc.CodeParseError, "1"},
		"trailing garbage":    {"POST", "application/json", `{"jsonrpc":"2.0","id":1,"method":"m"}}`, 400, jsonrpc.CodeParseError, ""},
		"not JSON-RPC":        {"POST", "application/json", `{"id":7,"method":"m"}`, 400, jsonrpc.CodeInvalidRequest, "7"},
		"scalar":              {"POST", "application/json", `"hello"`, 400, jsonrpc.CodeInvalidRequest, ""},
		"too big":             {"POST", "application/json", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":"` + strings.Repeat("a", 2000) + `"}}`, 413, jsonrpc.CodeInvalidRequest, ""},
		"text/plain":          {"POST", "text/plain", `{"jsonrpc":"2.0","id":1,"method":"m"}`, 415, jsonrpc.CodeInvalidRequest, ""},
		"no content type":     {"POST", "", `{"jsonrpc":"2.0","id":1,"method":"m"}`, 415, jsonrpc.CodeInvalidRequest, ""},
		"GET":                 {"GET", "", ``, 405, jsonrpc.CodeInvalidRequest, ""},
		"DELETE":              {"DELETE", "", ``, 405, jsonrpc.CodeInvalidRequest, ""},
		"a fractional id":     {"POST", "application/json", `{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}`, 400, jsonrpc.CodeInvalidRequest, ""}, // not echoed: MCP's ids are strings or integers
		"positional params":   {"POST", "application/json", `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":[]}`, 400, jsonrpc.CodeInvalidParams, "4"},
		"json with a charset": {"POST", "application/json; charset=utf-8", `{"jsonrpc":"2.0","id":1,"method":"m","params":3}`, 400, jsonrpc.CodeInvalidRequest, "1"},
		"content type twice":  {"POST", "application/json|application/json", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 400, jsonrpc.CodeInvalidRequest, ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+"/mcp", strings.NewReader(tt.body))
			if tt.contentType != "" {
				for ct := range strings.SplitSeq(tt.contentType, "|") {
					req.Header.Add("Content-Type", ct)
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.status)
			}
			if tt.status == 405 && resp.Header.Get("Allow") != "POST, DELETE" {
				t.Errorf("Allow = %q, want POST, DELETE", resp.Header.Get("Allow"))
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body = io.NopCloser(bytes.NewReader(body))
			id, code := readRPCError(t, resp)
			if code != tt.code || id != tt.id {
				t.Errorf("error = id %s code %d, want id %s code %d", id, code, tt.id, tt.code)
			}
			// The Allow header names DELETE: its refusal says what it lacks.
			if tt.method == "DELETE" && !bytes.Contains(body, []byte("Mcp-Session-Id")) {
				t.Errorf("DELETE without a session: %s; want it to name the Mcp-Session-Id header", body)
			}
		})
	}
	select {
	case c := <-f.calls:
		t.Errorf("bad input reached the backend: %s", c.req.Raw)
	case n := <-f.notified:
		t.Errorf("bad input reached the backend: %s", n.Raw)
	default:
	}
}

func TestJSONAnswer(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{})
	go func() {
		c := f.next(t)
		c.note(`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`) // has no place in JSON
		c.finish([]byte(`{"jsonrpc":"2.0","id":"x","result":{"ok":true}}`), nil)
	}()
	resp := post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":"x","method":"tools/call"}`)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if string(body) != `{"jsonrpc":"2.0","id":"x","result":{"ok":true}}` {
		t.Errorf("body = %s", body)
	}
}

// readEvents reads SSE data fields and comments until the stream ends.
func readEvents(t *testing.T, r io.Reader, onComment func(string)) []string {
	t.Helper()
	var events []string
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data: "):
			events = append(events, strings.TrimPrefix(line, "data: "))
		case strings.HasPrefix(line, ":") && onComment != nil:
			onComment(line)
		}
	}
	return events
}

func TestSSEStream(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{})
	go func() {
		c := f.next(t)
		c.note(`{"n":1}`)
		c.note(`{"n":2}`)
		c.finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), nil)
	}()
	resp := post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"t"}}}`,
		"Accept", "application/json, text/event-stream")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || resp.Header.Get("X-Accel-Buffering") != "no" {
		t.Errorf("Content-Type %q, X-Accel-Buffering %q", ct, resp.Header.Get("X-Accel-Buffering"))
	}
	got := readEvents(t, resp.Body, nil)
	want := []string{`{"n":1}`, `{"n":2}`, `{"jsonrpc":"2.0","id":1,"result":{}}`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events = %q, want %q", got, want)
	}
}

// A client that cannot take SSE gets JSON even when it asked for progress.
func TestAcceptJSONOnly(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{})
	go func() {
		c := f.next(t)
		c.note(`{"n":1}`)
		c.finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), nil)
	}()
	resp := post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"t"}}}`,
		"Accept", "application/json")
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
}

func TestKeepAliveOnQuietStream(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{KeepAlive: 20 * time.Millisecond})
	calls := make(chan *fakeCall, 1)
	go func() { calls <- f.next(t) }()
	resp := post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":1}}}`)
	c := <-calls
	var once sync.Once
	events := readEvents(t, resp.Body, func(line string) {
		// The call ends only after a keep-alive has been seen.
		if line == ": keep-alive" {
			once.Do(func() { c.finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), nil) })
		}
	})
	if len(events) != 1 {
		t.Errorf("events = %q, want just the response after a keep-alive", events)
	}
}

// A client that disconnects cancels its call: during a stream, and while
// waiting for a JSON answer.
func TestDisconnectCancelsTheCall(t *testing.T) {
	t.Parallel()
	for _, streaming := range []bool{true, false} {
		t.Run(fmt.Sprintf("streaming=%v", streaming), func(t *testing.T) {
			t.Parallel()
			f := newFake()
			srv := newServer(t, f, Options{})
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`
			if streaming {
				body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":1}}}`
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			errc := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				errc <- err
			}()
			c := f.next(t)
			if streaming {
				c.note(`{"n":1}`)
			}
			cancel()
			if cause := c.waitEnded(t); !errors.Is(cause, context.Canceled) {
				t.Errorf("call ended with cause %v, want context.Canceled", cause)
			}
			<-errc
		})
	}
}

// A client that stops reading without closing is cut off by the write
// deadline, and its call is cancelled.
func TestClientThatStopsReadingIsCutOff(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{ClientTimeout: 100 * time.Millisecond})
	stopReading(t, f, srv, nil)
}

// A stream that left the server has a write deadline too, though leaving
// cleared the one its response had: a client that stops reading it is
// cut off, and its call cancelled. The client stops before the stream
// leaves, well within the deadline set as it opened (a writer that kept
// counting on that one would wait on for the rest of it, the timeout an
// eighth: 250ms).
func TestClientThatStopsReadingALeftStreamIsCutOff(t *testing.T) {
	t.Parallel()
	f := newFake()
	streams := &streamMeter{left: make(chan struct{})}
	srv := newServer(t, f, Options{ClientTimeout: 2 * time.Second, Meter: streams})
	stopReading(t, f, srv, streams.left)
}

// stopReading asks srv for a stream it never reads, waits for left to
// close (if not nil), then has the call send large notes until it ends,
// which it must, since nobody reads: cancelled.
func stopReading(t *testing.T, f *fakeBackend, srv *httptest.Server, left <-chan struct{}) {
	t.Helper()
	conn := dial(t, srv)
	conn.(*net.TCPConn).SetReadBuffer(4096)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":1}}}`
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	c := f.next(t)
	if left != nil {
		select {
		case <-left:
		case <-time.After(10 * time.Second):
			t.Fatal("the stream did not leave the server")
		}
	}
	big := `{"pad":"` + strings.Repeat("p", 1<<20) + `"}`
	// A note each time the handler takes the last one.
	go func() {
		for {
			c.note(big)
			select {
			case <-c.taken:
			case <-c.ended:
				return
			}
		}
	}()
	if cause := c.waitEnded(t); !errors.Is(cause, context.Canceled) {
		t.Errorf("call ended with cause %v, want context.Canceled", cause)
	}
}

func TestGatewayErrorsMapToStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code, status int
		retryAfter   bool
	}{
		{jsonrpc.CodeUnavailable, 503, true},
		{jsonrpc.CodeShutdown, 503, true},
		{jsonrpc.CodeTimeout, 504, false},
		{jsonrpc.CodeTooLarge, 502, false},
		{jsonrpc.CodeBadAnswer, 502, false},
		{jsonrpc.CodeOverloaded, 503, true},
		{jsonrpc.CodeCancelled, 200, false},
		{jsonrpc.CodeInvalidParams, 400, false},
		{jsonrpc.CodeInternalError, 500, false},
	}
	for _, tt := range tests {
		f := newFake()
		f.callErr = jsonrpc.GatewayError(tt.code, "r", "m")
		srv := newServer(t, f, Options{})
		resp := post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":"k","method":"tools/call"}`)
		id, code := readRPCError(t, resp)
		if resp.StatusCode != tt.status || code != tt.code || id != `"k"` {
			t.Errorf("code %d: status %d, body code %d id %s; want status %d", tt.code, resp.StatusCode, code, id, tt.status)
		}
		if got := resp.Header.Get("Retry-After") != ""; got != tt.retryAfter {
			t.Errorf("code %d: Retry-After present = %v, want %v", tt.code, got, tt.retryAfter)
		}
	}
	// An error that arrives once the stream is open goes out as the last event.
	f := newFake()
	srv := newServer(t, f, Options{})
	go func() {
		c := f.next(t)
		c.note(`{"n":1}`)
		c.finish(nil, jsonrpc.GatewayError(jsonrpc.CodeTimeout, "timeout", "too slow"))
	}()
	resp := post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"progressToken":1}}}`)
	events := readEvents(t, resp.Body, nil)
	if len(events) != 2 || !strings.Contains(events[1], `"id":3`) || !strings.Contains(events[1], `"code":-32001`) {
		t.Errorf("events = %q, want a progress event and a timeout error for id 3", events)
	}
}

func TestNotificationsAreAccepted(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{})
	resp := post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	if resp.StatusCode != 202 {
		t.Errorf("status = %d, want 202", resp.StatusCode)
	}
	if body, _ := io.ReadAll(resp.Body); len(body) != 0 {
		t.Errorf("202 with a body: %s", body)
	}
	if n := <-f.notified; n.Method != "notifications/cancelled" {
		t.Errorf("backend got %s", n.Raw)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{})
	get := func(path string) (int, readiness) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body readiness
		if path != "/healthz" && path != "/nope" {
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
		return resp.StatusCode, body
	}
	if s, _ := get("/healthz"); s != 200 {
		t.Errorf("/healthz = %d", s)
	}
	if s, body := get("/readyz"); s != 200 || body.Status != "ready" || len(body.Workers) != 1 || body.Workers[0].Era != "legacy" {
		t.Errorf("/readyz when ready = %d %+v", s, body)
	}
	f.setReady(false)
	if s, body := get("/readyz"); s != 503 || body.Reason == "" {
		t.Errorf("/readyz when not ready = %d %+v, want 503 with a reason", s, body)
	}
	if s, _ := get("/healthz"); s != 200 {
		t.Errorf("/healthz when not ready = %d, want 200", s)
	}
	if s, _ := get("/nope"); s != 404 {
		t.Errorf("/nope = %d, want 404", s)
	}

	// ?wait holds the request until the state comes, or the wait is over.
	got := make(chan int, 1)
	go func() {
		s, _ := get("/readyz?wait=30s")
		got <- s
	}()
	<-f.awaiting // held
	f.setReady(true)
	if s := <-got; s != 200 {
		t.Errorf("/readyz?wait=30s once ready = %d, want 200", s)
	}
	if s, _ := get("/readyz?wait=0s&until=not-ready"); s != 200 {
		t.Errorf("/readyz?until=not-ready with no time to wait = %d, want the 200 of now", s)
	}
	<-f.awaiting // that one did not wait long
	go func() {
		s, _ := get("/readyz?wait=30s&until=not-ready")
		got <- s
	}()
	<-f.awaiting
	f.setReady(false)
	if s := <-got; s != 503 {
		t.Errorf("/readyz?until=not-ready = %d, want 503", s)
	}
	for _, q := range []string{"wait=soon", "wait=2h", "wait=-1s", "wait=1s&until=later", "until=ready"} {
		if s, body := get("/readyz?" + q); s != 400 || body.Reason == "" {
			t.Errorf("/readyz?%s = %d %+v, want 400 saying why", q, s, body)
		}
	}
}

// A body that never finishes arriving gets 408 instead of holding the
// handler, and never reaches the backend.
func TestTricklingBodyTimesOut(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{ClientTimeout: 100 * time.Millisecond})
	conn := dial(t, srv)
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("status = %d, want 408", resp.StatusCode)
	}
	select {
	case c := <-f.calls:
		t.Errorf("a partial body reached the backend: %s", c.req.Raw)
	default:
	}
}

// A request that declares a body it never sends, on a route that does not
// read it (or one refused before it is read), is answered within the
// client timeout and its connection closed: net/http reads what is left
// of a body before it answers, and would otherwise wait forever.
func TestUnreadBodyThatNeverArrives(t *testing.T) {
	t.Parallel()
	srv := newServer(t, newFake(), Options{ClientTimeout: 100 * time.Millisecond})
	for _, req := range []string{
		"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n",
		"GET /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nab",
		"POST /mcp HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{",
		"GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
	} {
		conn := dial(t, srv)
		fmt.Fprint(conn, req)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Errorf("%q: no answer: %v", req, err)
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		// Then the connection ends: what follows the answer would be the
		// rest of the body, not a request.
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
			t.Errorf("%q: after the answer (%d) the connection is still open: %v", req, resp.StatusCode, err)
		}
	}
}

// A legacy client's response answers a question the gateway relayed; a
// 2026-07-28 client sends none.
func TestResponsesFromClients(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{})
	resp := post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":"gw-1","result":{"action":"accept"}}`)
	if resp.StatusCode != 202 {
		t.Errorf("legacy response: status %d, want 202", resp.StatusCode)
	}
	if got := <-f.notified; string(got.ID) != `"gw-1"` {
		t.Errorf("backend got %s", got.Raw)
	}
	resp = post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":"r","result":{}}`, "MCP-Protocol-Version", "2026-07-28")
	if id, code := readRPCError(t, resp); resp.StatusCode != 400 || code != jsonrpc.CodeInvalidRequest || id != `"r"` {
		t.Errorf("modern response: status %d code %d id %s", resp.StatusCode, code, id)
	}
}

// A question for the client turns a JSON answer into a stream: the
// question first, then the response.
func TestQuestionTurnsTheAnswerIntoAStream(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{})
	go func() {
		c := f.next(t)
		if !c.caller.CanStream {
			t.Error("caller cannot stream although it accepts SSE")
		}
		c.note(`{"jsonrpc":"2.0","id":"gw-1","method":"sampling/createMessage","params":{}}`)
		c.finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), nil)
	}()
	resp := post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, "Accept", "application/json, text/event-stream")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	if events := readEvents(t, resp.Body, nil); len(events) != 2 || !strings.Contains(events[0], "sampling/createMessage") {
		t.Errorf("events = %q", events)
	}
}

// readAll reads what io.ReadAll reads, whatever size the request declared
// and however the reader hands it over.
func TestReadAll(t *testing.T) {
	big := strings.Repeat("0123456789", bodyPrealloc/5) // past the preallocation
	for _, body := range []string{"", "x", `{"jsonrpc":"2.0"}`, big} {
		for _, declared := range []int64{-1, 0, 1, int64(len(body)), int64(len(body)) + 7} {
			for name, wrap := range map[string]func(io.Reader) io.Reader{
				"plain": func(r io.Reader) io.Reader { return r }, "one byte": iotest.OneByteReader,
				"data with EOF": iotest.DataErrReader, "half": iotest.HalfReader,
			} {
				got, err := readAll(wrap(strings.NewReader(body)), declared, 1<<20)
				if err != nil || string(got) != body {
					t.Errorf("%s, %d bytes declared %d: %d bytes, %v", name, len(body), declared, len(got), err)
				}
			}
		}
	}
	failing := io.MultiReader(strings.NewReader("part"), iotest.ErrReader(io.ErrUnexpectedEOF))
	if got, err := readAll(failing, 100, 1<<20); err != io.ErrUnexpectedEOF || string(got) != "part" {
		t.Errorf("a failing read: %q, %v", got, err)
	}
}

// A body declared over the limit is refused as soon as its headers are in,
// not after waiting for bytes that a slow client may never finish sending.
func TestABodyDeclaredTooBigIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{MaxBodyBytes: 1024, ClientTimeout: time.Hour})
	conn := dial(t, srv)
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{\"jsonrpc\"",
		srv.Listener.Addr()); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // the hour would be the old answer
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close {
		t.Errorf("status %d, close %v; want 413 and the connection closed", resp.StatusCode, resp.Close)
	}
	if n := len(f.calls); n != 0 {
		t.Errorf("the backend saw %d calls", n)
	}
}

// A compressed body is refused as such (415, with the codings taken), not
// parsed as JSON that it is not; identity is no coding at all.
func TestContentEncoding(t *testing.T) {
	t.Parallel()
	srv := newServer(t, newFake(), Options{})
	for _, tc := range []struct {
		encoding []string
		status   int
	}{
		{[]string{"gzip"}, 415},
		{[]string{"identity", "gzip"}, 415},
		{[]string{"identity, gzip"}, 415},
		{[]string{""}, 400},
		{[]string{"br"}, 415},
		{[]string{" Identity "}, 400}, // read, and the body is not JSON
	} {
		req := newPost(srv.URL+"/mcp", "application/json", `{"jsonrpc":`)
		for _, e := range tc.encoding {
			req.Header.Add("Content-Encoding", e)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, code := readRPCError(t, resp)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("Content-Encoding %q: status %d (code %d), want %d", tc.encoding, resp.StatusCode, code, tc.status)
		}
		if tc.status == 415 && resp.Header.Get("Accept-Encoding") != "identity" {
			t.Errorf("Content-Encoding %q: Accept-Encoding %q, want identity", tc.encoding, resp.Header.Get("Accept-Encoding"))
		}
	}
}

// A 405 lists the methods its route takes, HEAD where it is served.
func TestMethodNotAllowedSaysWhatIs(t *testing.T) {
	t.Parallel()
	m := metrics.New(1)
	srv := newServer(t, newFake(), Options{Meter: m, Metrics: m.Handler(), OpenAPI: []byte("openapi: 3.1.0")})
	for path, want := range map[string]string{"/healthz": "GET, HEAD", "/readyz": "GET, HEAD", "/openapi.yaml": "GET, HEAD", "/ui/app.js": "GET, HEAD", "/metrics": "GET"} {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != want {
			t.Errorf("PUT %s: %d, Allow %q; want 405, Allow %q", path, resp.StatusCode, resp.Header.Get("Allow"), want)
		}
	}
}
