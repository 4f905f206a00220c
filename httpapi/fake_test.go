package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/detach"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// fakeBackend records what reaches it; the test plays the child's part by
// feeding each fakeCall.
type fakeBackend struct {
	params   map[string][]mcp.ParamHeader // x-mcp-header annotations by tool
	paramErr error                        // ToolHeaders fails with it
	tools    *bridge.ToolList             // what Tools returns; nil: no tools
	mu       sync.Mutex
	ready    bool
	draining bool
	changed  chan struct{} // closed and replaced when ready changes
	awaiting chan struct{} // signalled when an Await is about to wait
	callErr  error
	panics   any // Call panics with it, when set
	calls    chan *fakeCall
	notified chan *jsonrpc.Message
}

func newFake() *fakeBackend {
	return &fakeBackend{ready: true, changed: make(chan struct{}), awaiting: make(chan struct{}, 1), calls: make(chan *fakeCall, 16), notified: make(chan *jsonrpc.Message, 16)}
}

func (f *fakeBackend) Call(ctx context.Context, req *mcp.Request, caller bridge.Caller) (bridge.Call, error) {
	if f.callErr != nil {
		return nil, f.callErr
	}
	if f.panics != nil {
		panic(f.panics)
	}
	c := &fakeCall{req: req, caller: caller, wake: make(chan struct{}, 1), taken: make(chan struct{}, 1), ended: make(chan struct{})}
	tok, found, _ := jsonrpc.Lookup(req.Params, "_meta", "progressToken")
	c.streams = found && tok.End > tok.Start
	// Like the bridge: the call ends by itself when ctx does.
	context.AfterFunc(ctx, func() {
		c.mu.Lock()
		if !c.done {
			c.cause = context.Cause(ctx)
		}
		c.mu.Unlock()
		c.finish(nil, ctx.Err())
	})
	f.calls <- c
	return c, nil
}

func (f *fakeBackend) Notify(ctx context.Context, n *jsonrpc.Message) error {
	f.notified <- n
	return f.callErr
}

func (f *fakeBackend) Status() bridge.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return bridge.Status{Ready: f.ready, Draining: f.draining, Workers: []bridge.WorkerStatus{{Ready: f.ready, Era: bridge.EraLegacy}}}
}

func (f *fakeBackend) Await(ctx context.Context, cond func(bridge.Status) bool) (bridge.Status, error) {
	for {
		f.mu.Lock()
		changed := f.changed
		f.mu.Unlock()
		if st := f.Status(); cond(st) {
			return st, nil
		}
		select {
		case f.awaiting <- struct{}{}: // a test may wait for the wait
		default:
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return f.Status(), ctx.Err()
		}
	}
}

// setReady changes the backend's readiness and wakes those in Await.
func (f *fakeBackend) setReady(v bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ready = v
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeBackend) ToolHeaders(ctx context.Context, tool string) ([]mcp.ParamHeader, error) {
	if f.paramErr != nil {
		return nil, f.paramErr
	}
	return f.params[tool], nil
}

func (f *fakeBackend) Tools(ctx context.Context) (*bridge.ToolList, error) {
	if f.callErr != nil {
		return nil, f.callErr
	}
	if f.tools == nil {
		return &bridge.ToolList{}, nil
	}
	return f.tools, nil
}

func (f *fakeBackend) Respond(ctx context.Context, answer *jsonrpc.Message) error {
	f.notified <- answer
	return nil
}

func (f *fakeBackend) next(t *testing.T) *fakeCall {
	t.Helper()
	select {
	case c := <-f.calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no call reached the backend")
		return nil
	}
}

type fakeCall struct {
	req     *mcp.Request
	caller  bridge.Caller
	code    int // ErrorCode
	streams bool
	mu      sync.Mutex
	notes   [][]byte
	resp    []byte
	err     error
	done    bool
	cause   error
	wake    chan struct{}
	taken   chan struct{} // signalled when Take hands out notes
	panics  any           // Take panics with it, when set (under mu)
	ended   chan struct{}
}

func (c *fakeCall) Wake() <-chan struct{} { return c.wake }
func (c *fakeCall) Streams() bool         { return c.streams }
func (c *fakeCall) Cancel(reason string) {
	c.mu.Lock()
	if !c.done {
		c.cause = errors.New(reason)
	}
	c.mu.Unlock()
	c.finish(nil, jsonrpc.GatewayError(jsonrpc.CodeCancelled, "cancelled", reason))
}
func (c *fakeCall) ErrorCode() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.code
}
func (c *fakeCall) Take() ([][]byte, []byte, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.panics != nil {
		panic(c.panics)
	}
	n := c.notes
	c.notes = nil
	if len(n) > 0 {
		select {
		case c.taken <- struct{}{}:
		default:
		}
	}
	if c.done {
		c.signal()
	}
	return n, c.resp, c.done, c.err
}
func (c *fakeCall) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}
func (c *fakeCall) note(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notes = append(c.notes, []byte(s))
	c.signal()
}
func (c *fakeCall) finish(resp []byte, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	c.resp, c.err, c.done = resp, err, true
	close(c.ended)
	c.signal()
}

// waitEnded returns why the call's context ended.
func (c *fakeCall) waitEnded(t *testing.T) error {
	t.Helper()
	select {
	case <-c.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not end")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cause
}

// newServer serves the handlers as the gateway does: streams leave the
// server (package detach), here as soon as they first wait, so that every
// stream the tests open goes on from where it left.
func newServer(t *testing.T, f *fakeBackend, opts Options) *httptest.Server {
	srv := httptest.NewUnstartedServer(nil)
	ln := detach.NewListener(srv.Listener)
	srv.Listener = ln
	if opts.Streams == nil {
		opts.Streams = detach.New(ln.Reuse, 0)
		opts.LeaveAfter = time.Nanosecond
	}
	srv.Config.Handler = New(f, opts)
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := opts.Streams.Wait(ctx); err != nil {
			t.Errorf("streams that left the server did not end: %v", err)
		}
	})
	return srv
}

// dial opens a raw connection, for clients that misbehave below HTTP.
func dial(t *testing.T, srv *httptest.Server) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func post(t *testing.T, url, contentType, body string, header ...string) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(newPost(url, contentType, body, header...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// newPost is a POST of body with the content type (none if empty) and the
// header's name, value pairs.
func newPost(url, contentType, body string, header ...string) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	return req
}

// postInBackground posts JSON from a goroutine of its own and reads the
// whole answer; the channel then says how that went. The caller must
// receive from it, so that no answer is left unread when the test ends.
func postInBackground(url, body string, header ...string) <-chan error {
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(newPost(url, "application/json", body, header...))
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	return errc
}

func readRPCError(t *testing.T, resp *http.Response) (id string, code int) {
	t.Helper()
	var m struct {
		ID    json.RawMessage    `json:"id"`
		Error struct{ Code int } `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("error body: %v", err)
	}
	return string(m.ID), m.Error.Code
}
