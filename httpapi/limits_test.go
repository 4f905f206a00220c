package httpapi

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/clientlimit"
	"github.com/stdiomcp/gateway/detach"
	"github.com/stdiomcp/gateway/jsonrpc"
)

// placeCount is a Limiter that counts the places held, and the places
// given back more than once.
type placeCount struct {
	Limiter
	held, twice atomic.Int32
	taken       chan struct{} // if not nil, told of each place taken
}

func (l *placeCount) Open(key string) (func(), bool) {
	release, ok := l.Limiter.Open(key)
	if !ok {
		return release, ok
	}
	l.held.Add(1)
	if l.taken != nil {
		l.taken <- struct{}{}
	}
	var given atomic.Bool
	return func() {
		if !given.CompareAndSwap(false, true) {
			l.twice.Add(1)
			return
		}
		l.held.Add(-1)
		release()
	}, true
}

// newPlaceCount counts the places of a limiter of max open requests a
// client; once the test's servers are closed (a cleanup registered before
// theirs), every place must have been given back, each once.
func newPlaceCount(t *testing.T, max int) *placeCount {
	l := &placeCount{Limiter: clientlimit.New(clientlimit.Options{MaxStreams: max})}
	t.Cleanup(func() {
		if held, twice := l.held.Load(), l.twice.Load(); held != 0 || twice != 0 {
			t.Errorf("at the end %d places held, %d given back twice; want none", held, twice)
		}
	})
	return l
}

// auditHold is a Meter that holds the first call's audit until hold is
// closed: an audit comes after the answer is sent and before the request
// ends, so that a place given back only as the request ends is still
// held while it waits.
type auditHold struct {
	noMeter
	first atomic.Bool
	hold  chan struct{}
}

func (m *auditHold) CallAudited(string, string) {
	if m.first.CompareAndSwap(false, true) {
		<-m.hold
	}
}

// startRequest sends req from a goroutine of its own; the channel gives
// its response once the headers are in.
func startRequest(t *testing.T, req *http.Request) <-chan *http.Response {
	t.Helper()
	ch := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			close(ch)
			return
		}
		ch <- resp
	}()
	return ch
}

func awaitResponse(t *testing.T, ch <-chan *http.Response) *http.Response {
	t.Helper()
	select {
	case resp, ok := <-ch:
		if !ok {
			t.FailNow()
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	case <-time.After(10 * time.Second):
		t.Fatal("no response")
		return nil
	}
}

// readAnswer reads an answer as a client that takes the response for the
// end of the call does: a JSON body to its length; on a stream, up to the
// event that is the response (a JSON-RPC response, or the REST API's
// result or error), not to the stream's end. It returns what it read.
func readAnswer(t *testing.T, resp *http.Response, events *bufio.Reader) string {
	t.Helper()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var event string
	for {
		line, err := events.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before its answer: %v", err)
		}
		event += line
		if line != "\n" {
			continue
		}
		if strings.Contains(event, "event: result\n") || strings.Contains(event, "event: error\n") ||
			!strings.Contains(event, "event: ") && (strings.Contains(event, `"result":`) || strings.Contains(event, `"error":`)) {
			return event
		}
		event = ""
	}
}

// A client that has read its answer finds its place among its open
// requests free, whichever way the answer came and however the call
// ended: an SDK takes the response (a JSON body, or a stream's response
// event) for the end of the call, and may send its next request at once,
// before the stream's end, while the handler is still on its way out.
func TestPlaceFreeOnceAnswered(t *testing.T) {
	t.Parallel()
	const (
		call     = `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`
		streamed = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"p"}}}`
		progress = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`
	)
	result := func(c *fakeCall) { c.finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`), nil) }
	childError := func(c *fakeCall) {
		c.finish([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no"}}`), nil)
	}
	gatewayError := func(c *fakeCall) {
		c.finish(nil, jsonrpc.GatewayError(jsonrpc.CodeTimeout, "timeout", "the call took too long"))
	}
	progressThen := func(end func(*fakeCall)) func(*fakeCall) {
		return func(c *fakeCall) {
			c.note(progress)
			<-c.taken
			end(c)
		}
	}
	stays := Options{Streams: detach.New(nil, 0), LeaveAfter: time.Hour}
	for _, tc := range []struct {
		name string
		opts Options
		req  func(url string) *http.Request
		end  func(*fakeCall)
	}{
		{"JSON", Options{}, func(u string) *http.Request {
			return newPost(u+"/mcp", "application/json", call, "Accept", "application/json")
		}, result},
		{"JSON, the child's error", Options{}, func(u string) *http.Request {
			return newPost(u+"/mcp", "application/json", call, "Accept", "application/json")
		}, childError},
		{"JSON, the gateway's error", Options{}, func(u string) *http.Request {
			return newPost(u+"/mcp", "application/json", call, "Accept", "application/json")
		}, gatewayError},
		{"one event", Options{}, func(u string) *http.Request {
			return newPost(u+"/mcp", "application/json", call, "Accept", "text/event-stream")
		}, result},
		{"stream that left the server", Options{}, func(u string) *http.Request {
			return newPost(u+"/mcp", "application/json", streamed, "Accept", "application/json, text/event-stream")
		}, progressThen(result)},
		{"stream that left the server, the gateway's error", Options{}, func(u string) *http.Request {
			return newPost(u+"/mcp", "application/json", streamed, "Accept", "application/json, text/event-stream")
		}, progressThen(gatewayError)},
		{"stream that stayed", stays, func(u string) *http.Request {
			return newPost(u+"/mcp", "application/json", streamed, "Accept", "application/json, text/event-stream")
		}, progressThen(result)},
		{"stream that stayed, the child's error", stays, func(u string) *http.Request {
			return newPost(u+"/mcp", "application/json", streamed, "Accept", "application/json, text/event-stream")
		}, progressThen(childError)},
		{"REST, JSON", Options{}, func(u string) *http.Request {
			return restReq("POST", u+"/v1/tools/echo", "application/json", `{"text":"a"}`)
		}, result},
		{"REST, a problem", Options{}, func(u string) *http.Request {
			return restReq("POST", u+"/v1/tools/echo", "application/json", `{"text":"a"}`)
		}, gatewayError},
		{"REST, stream", Options{}, func(u string) *http.Request {
			return restReq("POST", u+"/v1/tools/echo", "application/json", `{"text":"a"}`, "Accept", "text/event-stream")
		}, progressThen(result)},
		{"REST, stream that stayed, an error", stays, func(u string) *http.Request {
			return restReq("POST", u+"/v1/tools/echo", "application/json", `{"text":"a"}`, "Accept", "text/event-stream")
		}, progressThen(childError)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake()
			f.tools = toolList(allTools...)
			lim := newPlaceCount(t, 1)
			audits := &auditHold{hold: make(chan struct{})}
			opts := tc.opts
			opts.Limiter, opts.Meter = lim, audits
			srv := newServer(t, f, opts)
			sent := startRequest(t, tc.req(srv.URL))
			tc.end(f.next(t))
			resp := awaitResponse(t, sent)
			events := bufio.NewReader(resp.Body)
			answer := readAnswer(t, resp, events)
			// The call's audit is held: the request has not ended.
			if held := lim.held.Load(); held != 0 {
				t.Errorf("%d place held once the answer %q was read, want none", held, answer)
			}
			close(audits.hold)
			io.Copy(io.Discard, events)
		})
	}
}

// A batch gives each call's place back before that call's answer goes
// on, and its own (which its first call rides on) before its last answer.
func TestBatchPlaceFreeOnceAnswered(t *testing.T) {
	t.Parallel()
	f := newFake()
	lim := newPlaceCount(t, 2)
	audits := &auditHold{hold: make(chan struct{})}
	srv := newServer(t, f, Options{Limiter: lim, Meter: audits})
	sent := startRequest(t, newPost(srv.URL+"/mcp", "application/json",
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call"},{"jsonrpc":"2.0","id":2,"method":"tools/call"}]`, "Accept", "text/event-stream"))
	rider, second := f.next(t), f.next(t)
	if string(rider.req.ID) == "2" {
		rider, second = second, rider
	}
	resp := awaitResponse(t, sent)
	events := bufio.NewReader(resp.Body)
	second.finish([]byte(`{"jsonrpc":"2.0","id":2,"result":{}}`), nil)
	answer := readAnswer(t, resp, events)
	// The second call's audit is held: its part has not ended.
	if held := lim.held.Load(); held != 1 {
		t.Errorf("%d places held once the answer %q was read, want 1 (the batch's own)", held, answer)
	}
	close(audits.hold)
	rider.finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), nil)
	answer = readAnswer(t, resp, events)
	if held := lim.held.Load(); held != 0 {
		t.Errorf("%d places held once the last answer %q was read, want none", held, answer)
	}
	io.Copy(io.Discard, events)
}

// A client slow to take a large answer holds its place while the answer
// is sent: only its last byte waits for the place to be given back.
func TestPlaceHeldWhileAnswerIsSent(t *testing.T) {
	t.Parallel()
	big := `{"jsonrpc":"2.0","id":1,"result":{"text":"` + strings.Repeat("x", 32<<20) + `"}}`
	for _, c := range []struct{ name, accept, body string }{
		{"json", "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`},
		{"stream", "text/event-stream", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`},
		{"batch, json", "application/json", `[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]`},
		{"batch, stream", "text/event-stream", `[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFake()
			lim := newPlaceCount(t, 1)
			srv := newServer(t, f, Options{Limiter: lim})
			sent := startRequest(t, newPost(srv.URL+"/mcp", "application/json", c.body, "Accept", c.accept))
			f.next(t).finish([]byte(big), nil)
			resp := awaitResponse(t, sent)
			// Bytes of the answer are in, and more of it than the
			// connection's buffers hold is still to come: it is being
			// written.
			if _, err := io.ReadFull(resp.Body, make([]byte, 1<<20)); err != nil {
				t.Fatal(err)
			}
			if held := lim.held.Load(); held != 1 {
				t.Errorf("%d places held while the answer is sent, want 1", held)
			}
			if n, err := io.Copy(io.Discard, resp.Body); err != nil || n < 31<<20 {
				t.Errorf("read %d more bytes: %v", n, err)
			}
		})
	}
}

// notifiedWith waits for the message the backend is sent (a notification
// or an answer), and fails unless it holds want.
func notifiedWith(t *testing.T, f *fakeBackend, want string) {
	t.Helper()
	select {
	case m := <-f.notified:
		if !strings.Contains(string(m.Raw), want) {
			t.Errorf("the backend was sent %s, want %s", m.Raw, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not reach the backend", want)
	}
}

// Only a request takes a place among its client's open requests: with
// its one place held by a call whose question waits for the client's
// answer, the answer passes, as does whatever else the client owes the
// call or its session (a notification, a batch of them, a cancellation,
// the session's end); another request is still refused.
func TestOnlyRequestsTakeAPlace(t *testing.T) {
	t.Parallel()
	f := newFake()
	lim := newPlaceCount(t, 1)
	srv := newServer(t, f, Options{Limiter: lim})
	sid := initializeWith(t, f, srv.URL, init0326)
	inSession := func(body string) *http.Response {
		t.Helper()
		return post(t, srv.URL+"/mcp", "application/json", body, "Mcp-Session-Id", sid)
	}
	// A call held until the test ends it, or ends itself.
	held := func() *fakeCall {
		t.Helper()
		c := f.next(t)
		t.Cleanup(func() { c.finish(nil, context.Canceled) })
		return c
	}
	done := postInBackground(srv.URL+"/mcp", `{"jsonrpc":"2.0","id":"c1","method":"tools/call"}`, "Mcp-Session-Id", sid)
	c := held()
	for _, m := range []struct{ name, body, reaches string }{
		{"an answer", `{"jsonrpc":"2.0","id":"q1","result":{"action":"accept","content":{"name":"ada"}}}`, `"q1"`},
		{"an error for an answer", `{"jsonrpc":"2.0","id":"q2","error":{"code":-1,"message":"no"}}`, `"q2"`},
		{"a notification the child is sent", `{"jsonrpc":"2.0","method":"notifications/custom"}`, "notifications/custom"},
		{"a notification the gateway keeps", `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`, "roots/list_changed"},
		{"a batch of them", `[{"jsonrpc":"2.0","id":"q3","result":{}}]`, `"q3"`},
	} {
		if resp := inSession(m.body); resp.StatusCode != http.StatusAccepted {
			body, _ := io.ReadAll(resp.Body)
			t.Errorf("%s while the call holds the place: %d %s, want 202", m.name, resp.StatusCode, body)
			continue
		}
		notifiedWith(t, f, m.reaches)
	}
	if resp := inSession(`{"jsonrpc":"2.0","id":"c2","method":"tools/call"}`); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a second call: %d, want 429", resp.StatusCode)
	}
	// With no place free, a body is read only up to atLimitBodyBytes:
	// the client cannot have more large bodies read at once than places.
	big := `{"jsonrpc":"2.0","id":"q4","result":{"text":"` + strings.Repeat("x", atLimitBodyBytes) + `"}}`
	if resp := inSession(big); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a large answer while the call holds the place: %d, want 413", resp.StatusCode)
	}
	nothingReached(t, f)
	if resp := inSession(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1","reason":"stop"}}`); resp.StatusCode != http.StatusAccepted {
		t.Errorf("the call's cancellation: %d, want 202", resp.StatusCode)
	}
	if cause := c.waitEnded(t); cause == nil || cause.Error() != "stop" {
		t.Errorf("the call ended with %v, want the client's cancellation", cause)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	notifiedWith(t, f, "notifications/cancelled")

	done = postInBackground(srv.URL+"/mcp", `{"jsonrpc":"2.0","id":"c3","method":"tools/call"}`, "Mcp-Session-Id", sid)
	c = held()
	req := newPost(srv.URL+"/mcp", "", "", "Mcp-Session-Id", sid)
	req.Method = http.MethodDelete
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("the session's end while its call holds the place: %v %v, want 204", resp, err)
	} else {
		resp.Body.Close()
	}
	c.waitEnded(t)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// The rate counts calls: the client's answers and the notifications the
// gateway keeps from the child cost nothing, even from a client whose
// bucket is empty; a notification the child is sent costs what a call
// does.
func TestRateCountsCalls(t *testing.T) {
	t.Parallel()
	f := newFake()
	// Three calls, for good: the bucket never refills.
	srv := newServer(t, f, Options{Limiter: clientlimit.New(clientlimit.Options{Rate: 1e-9, Burst: 3})})
	sid := initializeWith(t, f, srv.URL, init0326) // the first
	// send plays the child for a call that reaches it.
	send := func(body string) int {
		t.Helper()
		status := make(chan int, 1)
		go func() {
			resp, err := http.DefaultClient.Do(newPost(srv.URL+"/mcp", "application/json", body, "Mcp-Session-Id", sid))
			if err != nil {
				t.Error(err)
				status <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status <- resp.StatusCode
		}()
		select {
		case c := <-f.calls:
			c.finish([]byte(`{"jsonrpc":"2.0","id":`+string(c.req.ID)+`,"result":{}}`), nil)
			return <-status
		case got := <-status:
			return got
		}
	}
	free := []string{
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"gone"}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`,
		`{"jsonrpc":"2.0","id":"q1","result":{"action":"accept","content":{}}}`,
		`[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","id":"q2","error":{"code":-1,"message":"no"}}]`,
	}
	for _, body := range free {
		if got := send(body); got != http.StatusAccepted {
			t.Errorf("%s: %d, want 202", body, got)
		}
	}
	if got := send(`{"jsonrpc":"2.0","id":1,"method":"tools/call"`); got != http.StatusBadRequest { // costs nothing
		t.Errorf("a body that is no JSON: %d, want 400", got)
	}
	if got := send(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`); got != http.StatusOK { // the second
		t.Errorf("the first call after the handshake: %d, want 200", got)
	}
	if got := send(`{"jsonrpc":"2.0","method":"notifications/custom"}`); got != http.StatusAccepted { // the third
		t.Errorf("a notification the child is sent: %d, want 202", got)
	}
	for _, body := range []string{`{"jsonrpc":"2.0","id":2,"method":"tools/call"}`, `{"jsonrpc":"2.0","method":"notifications/custom"}`,
		`[{"jsonrpc":"2.0","method":"notifications/custom"}]`} {
		if got := send(body); got != http.StatusTooManyRequests {
			t.Errorf("%s once the bucket is empty: %d, want 429", body, got)
		}
	}
	for _, body := range free {
		if got := send(body); got != http.StatusAccepted {
			t.Errorf("%s once the bucket is empty: %d, want 202", body, got)
		}
	}
	// Over its rate, a client has bodies read only up to atLimitBodyBytes:
	// what it may still send is small.
	big := `{"jsonrpc":"2.0","id":"q3","result":{"text":"` + strings.Repeat("x", atLimitBodyBytes) + `"}}`
	if got := send(big); got != http.StatusRequestEntityTooLarge {
		t.Errorf("a large answer once the bucket is empty: %d, want 413", got)
	}
}

// A body being read holds a place, if its client has one free: a client
// has no more bodies read at once than it may have requests open. The
// place goes back once the body turns out to be a notification.
func TestBodyBeingReadHoldsAPlace(t *testing.T) {
	t.Parallel()
	f := newFake()
	lim := newPlaceCount(t, 1)
	srv := newServer(t, f, Options{Limiter: lim})
	sid := initializeWith(t, f, srv.URL, init0326)
	lim.taken = make(chan struct{}, 8)
	body, feed := io.Pipe()
	req := newPost(srv.URL+"/mcp", "application/json", "", "Mcp-Session-Id", sid)
	req.Body, req.ContentLength = body, -1
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
		}
		answered <- resp
	}()
	if _, err := feed.Write([]byte(`{"jsonrpc":"2.0",`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lim.taken: // by the body being read
	case <-time.After(10 * time.Second):
		t.Fatal("no place was taken while the body was read")
	}
	if resp := post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":"c","method":"tools/call"}`, "Mcp-Session-Id", sid); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a call while another body is read: %d, want 429", resp.StatusCode)
	}
	feed.Write([]byte(`"method":"notifications/custom"}`))
	feed.Close()
	if resp := <-answered; resp == nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the notification: %v, want 202", resp)
	}
	notifiedWith(t, f, "notifications/custom")
	if held := lim.held.Load(); held != 0 {
		t.Errorf("%d places held once the notification was served, want none", held)
	}
}
