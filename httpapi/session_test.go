package httpapi

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/jsonrpc"
)

const initBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"c","version":"1"}}}`

// initialize starts a session: the answer carries a fresh session id, made
// of visible ASCII.
func initialize(t *testing.T, f *fakeBackend, url string) string {
	t.Helper()
	go func() { f.next(t).finish([]byte(`{"jsonrpc":"2.0","id":0,"result":{}}`), nil) }()
	resp := post(t, url+"/mcp", "application/json", initBody)
	sid := resp.Header.Get("Mcp-Session-Id")
	if !regexp.MustCompile(`^[\x21-\x7e]{32,}$`).MatchString(sid) {
		t.Fatalf("session id %q is not 32+ visible ASCII characters", sid)
	}
	return sid
}

func TestLegacySession(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{})
	sid := initialize(t, f, srv.URL)
	if other := initialize(t, f, srv.URL); other == sid {
		t.Fatal("two initializes got the same session id")
	}

	// The session's log level and capabilities travel with its requests;
	// logging/setLevel is answered by the gateway.
	resp := post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`, "Mcp-Session-Id", sid)
	if resp.StatusCode != 200 {
		t.Fatalf("setLevel status %d", resp.StatusCode)
	}
	calls := make(chan *fakeCall, 1)
	go func() {
		c := f.next(t)
		calls <- c
		c.finish([]byte(`{"jsonrpc":"2.0","id":2,"result":{}}`), nil)
	}()
	post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, "Mcp-Session-Id", sid)
	c := <-calls
	if c.caller.Modern || string(c.caller.Capabilities) != `{"sampling":{}}` || c.caller.LogLevel != "debug" || string(c.caller.ClientInfo) != `{"name":"c","version":"1"}` {
		t.Errorf("caller = %+v", c.caller)
	}

	// An unknown session is 404, and so is one the client ended.
	resp = post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, "Mcp-Session-Id", "nope")
	if id, code := readRPCError(t, resp); resp.StatusCode != 404 || id != "3" || code != -32600 {
		t.Errorf("unknown session: status %d id %s code %d", resp.StatusCode, id, code)
	}
	del := func(sid string) int {
		req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/mcp", nil)
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := del(sid); s != 204 {
		t.Errorf("DELETE = %d, want 204", s)
	}
	if s := del(sid); s != 404 {
		t.Errorf("DELETE of an ended session = %d, want 404", s)
	}
	if s := del(""); s != 405 {
		t.Errorf("DELETE without a session = %d, want 405", s)
	}
	resp = post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`, "Mcp-Session-Id", sid)
	if resp.StatusCode != 404 {
		t.Errorf("request in an ended session = %d, want 404", resp.StatusCode)
	}
}

// A legacy client's notifications/cancelled names its own id; the gateway
// finds the call in the session and cancels it, with the client's reason.
// Ending the session cancels what is still in flight.
func TestLegacyCancellation(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{})
	sid := initialize(t, f, srv.URL)
	done := postInBackground(srv.URL+"/mcp", `{"jsonrpc":"2.0","id":"slow-1","method":"tools/call"}`, "Mcp-Session-Id", sid)
	c := f.next(t)
	// Another session cannot cancel it, and an unknown id is ignored.
	other := initialize(t, f, srv.URL)
	for _, n := range []struct{ sid, id string }{{other, `"slow-1"`}, {sid, `"nope"`}} {
		resp := post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+n.id+`}}`, "Mcp-Session-Id", n.sid)
		if resp.StatusCode != 202 {
			t.Errorf("cancel status %d", resp.StatusCode)
		}
	}
	if _, _, ended, _ := c.Take(); ended {
		t.Fatal("a cancellation from another session, or for another id, ended the call")
	}
	resp := post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow-1","reason":"user pressed stop"}}`, "Mcp-Session-Id", sid)
	if resp.StatusCode != 202 {
		t.Errorf("cancel status %d", resp.StatusCode)
	}
	if cause := c.waitEnded(t); cause == nil || cause.Error() != "user pressed stop" {
		t.Errorf("call ended with %v, want the client's reason", cause)
	}
	if err := <-done; err != nil {
		t.Error(err)
	}

	done = postInBackground(srv.URL+"/mcp", `{"jsonrpc":"2.0","id":"slow-2","method":"tools/call"}`, "Mcp-Session-Id", sid)
	c = f.next(t)
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", sid)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 204 {
		t.Fatalf("DELETE: %v", err)
	} else {
		resp.Body.Close()
	}
	if cause := c.waitEnded(t); cause == nil || !strings.Contains(cause.Error(), "session ended") {
		t.Errorf("call ended with %v, want the session's end", cause)
	}
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// Sessions are bounded: the one idle longest makes room, a busy one does
// not; and an idle session expires.
func TestSessionLimits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ss := newSessions(2, time.Hour)
		a, _ := ss.create(nil, nil)
		time.Sleep(time.Minute)
		b, _ := ss.create(nil, nil)
		time.Sleep(time.Minute)
		c, f := ss.create(nil, nil)
		if f != nil || ss.get(a.id) != nil || ss.get(b.id) == nil || ss.get(c.id) == nil {
			t.Fatalf("a full table did not evict the session idle longest")
		}
		busy := &fakeCall{wake: make(chan struct{}, 1), ended: make(chan struct{})}
		b.track([]byte("1"), busy)
		c.track([]byte("1"), &fakeCall{wake: make(chan struct{}, 1), ended: make(chan struct{})})
		if _, f := ss.create(nil, nil); f == nil || f.status != http.StatusServiceUnavailable || f.err.Code != jsonrpc.CodeOverloaded {
			t.Errorf("a full table of busy sessions took another: %+v", f)
		}
		time.Sleep(2 * time.Hour)
		if ss.get(b.id) == nil {
			t.Error("a session with a call in flight expired")
		}
		d := &session{id: "d", lastSeen: time.Now(), calls: map[string]bridge.Call{}}
		ss.mu.Lock()
		ss.byID["d"] = d
		ss.mu.Unlock()
		time.Sleep(time.Hour + time.Second)
		if ss.get("d") != nil {
			t.Error("an idle session did not expire")
		}
	})
}
