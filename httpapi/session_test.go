package httpapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
)

const initBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"c","version":"1"}}}`

// initialize starts a session: the answer carries a fresh session id, made
// of visible ASCII.
func initialize(t *testing.T, f *fakeBackend, url string) string {
	t.Helper()
	return initializeWith(t, f, url, initBody)
}

func initializeWith(t *testing.T, f *fakeBackend, url, body string) string {
	t.Helper()
	go func() { f.next(t).finish([]byte(`{"jsonrpc":"2.0","id":0,"result":{}}`), nil) }()
	resp := post(t, url+"/mcp", "application/json", body)
	sid := resp.Header.Get("Mcp-Session-Id")
	if !regexp.MustCompile(`^[\x21-\x7e]{32,}$`).MatchString(sid) {
		t.Fatalf("session id %q is not 32+ visible ASCII characters", sid)
	}
	return sid
}

// An initialize whose params are not what the schema says is refused
// before a session is made; a revision header on it leaves the revision
// to its body.
func TestInitializeIsChecked(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{})
	for _, params := range []string{
		``,
		`,"params":[]`,
		`,"params":{"protocolVersion":20250326,"capabilities":{}}`,
		`,"params":{"protocolVersion":"2025-06-18"}`,
		`,"params":{"protocolVersion":"2025-06-18","capabilities":"x","clientInfo":{"name":"c","version":"1"}}`,
		`,"params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":"y"}`,
	} {
		resp := post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":4,"method":"initialize"`+params+`}`)
		id, code := readRPCError(t, resp)
		if resp.StatusCode != 400 || code != -32602 || id != "4" || resp.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("initialize with %s: status %d code %d id %s session %q; want 400 -32602 4 and none",
				params, resp.StatusCode, code, id, resp.Header.Get("Mcp-Session-Id"))
		}
	}
	select {
	case c := <-f.calls:
		t.Errorf("a refused initialize reached the backend: %s", c.req.Raw)
	default:
	}
	go func() { f.next(t).finish([]byte(`{"jsonrpc":"2.0","id":0,"result":{}}`), nil) }()
	resp := post(t, srv.URL+"/mcp", "application/json", initBody, "MCP-Protocol-Version", "garbage")
	if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Errorf("initialize with a revision header the gateway does not know: status %d, session %q; want 200 and a session",
			resp.StatusCode, resp.Header.Get("Mcp-Session-Id"))
	}
}

func TestLegacySession(t *testing.T) {
	t.Parallel()
	f := newFake()
	key := []byte("a key for the session tests, 32+")
	srv := newServer(t, f, Options{SessionKey: key})
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
	// The answer to setLevel carries an id that holds the level, for a
	// client that takes it to another replica.
	if nsid := resp.Header.Get("Mcp-Session-Id"); nsid == "" || nsid == sid {
		t.Errorf("setLevel answered with session id %q", nsid)
	} else if cl, err := open(key, nsid); err != nil || cl.logLevel != "debug" {
		t.Errorf("the new id holds %+v, %v; want level debug", cl, err)
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

// A session's ping is answered while every session record is busy: it
// keeps nothing of the session's, which a full table would refuse.
func TestPingWhileSessionsAreFull(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{MaxSessions: 2})
	var held []*fakeCall
	var done []<-chan error
	for range 2 {
		sid := initialize(t, f, srv.URL)
		done = append(done, postInBackground(srv.URL+"/mcp", `{"jsonrpc":"2.0","id":"slow","method":"tools/call"}`, "Mcp-Session-Id", sid))
		held = append(held, f.next(t))
	}
	third := initialize(t, f, srv.URL)
	if resp := post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":7,"method":"ping"}`, "Mcp-Session-Id", third); resp.StatusCode != 200 {
		t.Errorf("a ping while every session record is busy: %d, want 200", resp.StatusCode)
	}
	for i, c := range held {
		c.finish([]byte(`{"jsonrpc":"2.0","id":"slow","result":{}}`), nil)
		if err := <-done[i]; err != nil {
			t.Error(err)
		}
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
	// A DELETE that speaks another revision than the session's is refused
	// like any of its requests.
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-03-26")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 400 {
		t.Fatalf("DELETE in another revision: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	req, _ = http.NewRequest(http.MethodDelete, srv.URL+"/mcp", nil)
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

// A session id holds the session: a replica with the same key serves it,
// one with another key does not, and neither does anyone for an id that
// was altered. A DELETE ends it on the replica that gets it.
func TestSessionsAcrossReplicas(t *testing.T) {
	t.Parallel()
	key := []byte("the key that replicas share, 32+")
	fa, fb, fc := newFake(), newFake(), newFake()
	a := newServer(t, fa, Options{SessionKey: key})
	b := newServer(t, fb, Options{SessionKey: key})
	c := newServer(t, fc, Options{SessionKey: []byte("another key, that replicas share")})
	body := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{ "elicitation" : {"x":"<\u00e9>"} },"clientInfo":{"name":"c","version":"1"}}}`
	sid := initializeWith(t, fa, a.URL, body)

	calls := make(chan *fakeCall, 1)
	go func() {
		c := fb.next(t)
		calls <- c
		c.finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), nil)
	}()
	resp := post(t, b.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-06-18")
	if resp.StatusCode != 200 {
		t.Fatalf("the other replica answered %d", resp.StatusCode)
	}
	// The client's capabilities reach the other replica byte for byte.
	if got := (<-calls).caller; string(got.Capabilities) != `{ "elicitation" : {"x":"<\u00e9>"} }` || string(got.ClientInfo) != `{"name":"c","version":"1"}` {
		t.Errorf("the other replica's caller = %s %s", got.Capabilities, got.ClientInfo)
	}

	// Another revision than the session's is refused.
	resp = post(t, b.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, "Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-11-25")
	if id, code := readRPCError(t, resp); resp.StatusCode != 400 || id != "2" || code != -32600 {
		t.Errorf("another revision: status %d id %s code %d", resp.StatusCode, id, code)
	}

	// Another key, or any change to the id, is an unknown session.
	flipped := []byte(sid)
	flipped[len(sessionPrefix)+3] ^= 1
	for name, try := range map[string]struct {
		url, sid string
	}{
		"another key":   {c.URL, sid},
		"altered":       {b.URL, string(flipped)},
		"cut":           {b.URL, sid[:len(sid)-1]},
		"no signature":  {b.URL, sid[:strings.LastIndexByte(sid, '.')]},
		"another shape": {b.URL, "s2" + sid[2:]},
	} {
		resp := post(t, try.url+"/mcp", "application/json", `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, "Mcp-Session-Id", try.sid)
		if id, code := readRPCError(t, resp); resp.StatusCode != 404 || id != "3" || code != -32600 {
			t.Errorf("%s: status %d id %s code %d", name, resp.StatusCode, id, code)
		}
	}

	// DELETE ends the session where it lands; the other replica, which
	// cannot be told, serves it until it expires.
	req, _ := http.NewRequest(http.MethodDelete, a.URL+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", sid)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 204 {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	if resp := post(t, a.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`, "Mcp-Session-Id", sid); resp.StatusCode != 404 {
		t.Errorf("the replica that ended the session answered %d", resp.StatusCode)
	}
	go func() { fb.next(t).finish([]byte(`{"jsonrpc":"2.0","id":5,"result":{}}`), nil) }()
	if resp := post(t, b.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`, "Mcp-Session-Id", sid); resp.StatusCode != 200 {
		t.Errorf("the other replica answered %d", resp.StatusCode)
	}
}

// A session id expires; what does not fit in one is cut down or refused.
// A session lasts its whole lifetime, though its id counts expiry in
// whole seconds and it began within one.
func TestSessionLastsItsWholeTTL(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ss := newSessions([]byte("a key for the session tests, 32+"), time.Second, 10)
		time.Sleep(999 * time.Millisecond) // the bubble's clock, off a whole second
		sid, f := ss.create("2025-11-25", "", []byte(`{}`), []byte(`{"name":"c"}`))
		if f != nil {
			t.Fatal(f.err)
		}
		time.Sleep(time.Second - time.Nanosecond)
		if _, err := ss.open(sid); err != nil {
			t.Fatalf("a session a nanosecond short of its lifetime: %v", err)
		}
		time.Sleep(time.Second)
		if _, err := ss.open(sid); err == nil || !strings.Contains(err.Error(), "expired") {
			t.Errorf("a session past its lifetime and the second it began in: %v", err)
		}
	})
}

func TestSessionIDs(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		key := []byte("a key for the session tests, 32+")
		ss := newSessions(key, time.Hour, 10)
		sid, f := ss.create("2025-11-25", "", []byte(`{}`), []byte(`{"name":"c"}`))
		if f != nil {
			t.Fatal(f.err)
		}
		if !regexp.MustCompile(`^[\x21-\x7e]+$`).MatchString(sid) || len(sid) > maxSessionID {
			t.Fatalf("session id %q", sid)
		}
		time.Sleep(time.Hour - time.Second)
		if _, err := ss.open(sid); err != nil {
			t.Fatalf("a session id within its lifetime: %v", err)
		}
		time.Sleep(time.Second)
		if _, err := ss.open(sid); err == nil || !strings.Contains(err.Error(), "expired") {
			t.Errorf("a session id past its lifetime: %v", err)
		}
	})

	ss := newSessions([]byte("a key for the session tests, 32+"), time.Hour, 10)
	icon := `"data:image/png;base64,` + strings.Repeat("A", 2*maxSessionID) + `"`
	sid, f := ss.create("2025-11-25", "", []byte(`{}`), []byte(`{"name":"c","version":"1.0","icons":[{"src":`+icon+`}]}`))
	if f != nil {
		t.Fatalf("a large clientInfo: %v", f.err)
	}
	s, err := ss.open(sid)
	if err != nil || string(s.claims.info) != `{"name":"c","version":"1.0"}` {
		t.Errorf("a large clientInfo was kept as %s (%v), want its name and version", s.claims.info, err)
	}
	_, f = ss.create("2025-11-25", "", []byte(`{"experimental":{"x":`+icon+`}}`), nil)
	if f == nil || f.status != http.StatusBadRequest || f.err.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("capabilities too large for an id: %+v", f)
	}
}

// newSession makes a 2025 session and opens it.
func newSession(t *testing.T, ss *sessions) (*session, string) {
	t.Helper()
	sid, f := ss.create("2025-11-25", "", nil, nil)
	if f != nil {
		t.Fatal(f.err)
	}
	s, err := ss.open(sid)
	if err != nil {
		t.Fatal(err)
	}
	return s, sid
}

// A replica holds records only for sessions that need one here, and at
// most max of them: a session whose calls would need one more is refused
// (503) while every record has a call in flight, and served once one ends.
func TestSessionRecordsAreBounded(t *testing.T) {
	t.Parallel()
	ss := newSessions([]byte("a key for the session tests, 32+"), time.Hour, 2)
	open := func() *session {
		s, _ := newSession(t, ss)
		return s
	}
	a, b, c := open(), open(), open()
	if n := ss.live(); n != 0 {
		t.Fatalf("%d records before any call", n)
	}
	ta, f := a.hold()
	if f != nil {
		t.Fatal(f.err)
	}
	ta.track([]byte("1"), &fakeCall{wake: make(chan struct{}, 1), ended: make(chan struct{})})
	tb, f := b.hold()
	if f != nil {
		t.Fatal(f.err)
	}
	if _, f := c.hold(); f == nil || f.status != http.StatusServiceUnavailable || f.err.Code != jsonrpc.CodeOverloaded {
		t.Fatalf("a full table of busy records took another: %+v", f)
	}
	// A second call of a session that has a record needs no more room.
	ta2, f := a.hold()
	if f != nil {
		t.Fatalf("a session with a record: %v", f.err)
	}
	ta2.release()
	tb.release()
	tc, f := c.hold()
	if f != nil {
		t.Fatalf("a record was freed, yet: %v", f.err)
	}
	tc.release()
	ta.release()
	if n := ss.live(); n != 0 {
		t.Errorf("%d records left once no call is in flight", n)
	}
	// A log level set here is kept, yet gives way to a session that needs
	// room for a call.
	if _, f := a.setLogLevel("debug"); f != nil {
		t.Fatal(f.err)
	}
	if _, f := b.setLogLevel("info"); f != nil {
		t.Fatal(f.err)
	}
	if n := ss.live(); n != 2 {
		t.Fatalf("%d records, want the 2 log levels", n)
	}
	tc, f = c.hold()
	if f != nil {
		t.Fatalf("a log level did not give way to a call: %v", f.err)
	}
	tc.release()
	if a.caller(httptest.NewRequest("POST", "/mcp", nil)).LogLevel != "" {
		t.Error("the record used longest ago was not the one that gave way")
	}
	if got := b.caller(httptest.NewRequest("POST", "/mcp", nil)).LogLevel; got != "info" {
		t.Errorf("level %q, want the one set here", got)
	}
}

// No other spelling of an id passes: base64's last character has unused
// bits, and they count.
func TestSessionIDHasOneSpelling(t *testing.T) {
	t.Parallel()
	key := []byte("a key for the session tests, 32+")
	ss := newSessions(key, time.Hour, 10)
	sid, f := ss.create("2025-11-25", "", []byte(`{}`), nil)
	if f != nil {
		t.Fatal(f.err)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	body := strings.LastIndexByte(sid, '.') - 1
	for _, at := range []int{len(sid) - 1, body} {
		for _, c := range alphabet {
			other := sid[:at] + string(c) + sid[at+1:]
			if other == sid {
				continue
			}
			if _, err := ss.open(other); err == nil {
				t.Errorf("%q opened as well as %q", other, sid)
			}
		}
	}
}

// An end is never forgotten to make room, and an id that carries a log
// level (one a setLevel answered with) holds the client's latest.
func TestSessionEndsAreKept(t *testing.T) {
	t.Parallel()
	key := []byte("a key for the session tests, 32+")
	ss := newSessions(key, time.Hour, 2)
	mint := func() (string, *session) {
		s, sid := newSession(t, ss)
		return sid, s
	}
	a, _ := mint()
	if err := ss.end(a, ""); err != nil {
		t.Fatal(err)
	}
	_, b := mint()
	_, c := mint()
	for _, s := range []*session{b, c} {
		if _, f := s.setLogLevel("debug"); f != nil {
			t.Fatal(f.err)
		}
		tr, f := s.hold()
		if f != nil {
			t.Fatal(f.err)
		}
		tr.release()
	}
	if _, err := ss.open(a); err == nil {
		t.Fatal("an ended session was served again once others needed room")
	}
	d, _ := mint()
	if err := ss.end(d, ""); err != nil {
		t.Fatal(err)
	}
	e, _ := mint()
	if full, ok := errors.AsType[*endsFull](ss.end(e, "")); !ok {
		t.Errorf("a full table of ends took another")
	} else if n, _ := strconv.Atoi(full.retryAfter(time.Now())); n < 3599 || n > 3601 {
		// The first end kept expires with its session, an hour from now.
		t.Errorf("Retry-After %d s, want the hour until the first end kept expires", n)
	}

	// Levels: the id's beats the one a replica keeps.
	_, s := mint()
	debugID, _ := s.setLogLevel("debug")
	s2, err := ss.open(debugID)
	if err != nil {
		t.Fatal(err)
	}
	errorID, _ := s2.setLogLevel("error") // on another replica, say
	s3, _ := ss.open(errorID)
	req := httptest.NewRequest("POST", "/mcp", nil)
	if got := s3.caller(req).LogLevel; got != "error" {
		t.Errorf("the id's level lost to the replica's: %q", got)
	}
	if got := s.caller(req).LogLevel; got != "error" {
		t.Errorf("an id without a level takes the replica's latest: got %q", got)
	}
}

// Changing the secret: a replica that accepts the other key opens the ids
// signed with it, and signs with its own; one that does not refuses them.
func TestSessionKeyBeingChanged(t *testing.T) {
	t.Parallel()
	oldKey, newKey := []byte("the key being retired, 32+ bytes"), []byte("the key taking over, 32+ bytes!!")
	before := newSessions(oldKey, time.Hour, 10)
	during := newSessions(newKey, time.Hour, 10)
	during.accepted = oldKey
	after := newSessions(newKey, time.Hour, 10)
	oldID, _ := before.create("2025-11-25", "", nil, nil)
	newID, _ := during.create("2025-11-25", "", nil, nil)
	if _, err := during.open(oldID); err != nil {
		t.Errorf("a replica accepting the old key refused its id: %v", err)
	}
	if _, err := open(oldKey, newID); err == nil {
		t.Error("a replica signed with the key it only accepts")
	}
	if _, err := after.open(newID); err != nil {
		t.Errorf("the new key's id: %v", err)
	}
	if _, err := after.open(oldID); !errors.Is(err, errForeignSession) {
		t.Errorf("a replica that no longer accepts the old key opened its id: %v", err)
	}
}

// What has expired is forgotten without the table filling up first: a
// record that only held a log level, and the end of a session, once their
// ids are refused anyway (seen in gateway_sessions_live at the next
// scrape, and at the latest a minute later by a replica making records).
func TestExpiredSessionRecordsAreForgotten(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ss := newSessions([]byte("a key for the session tests, 32+"), time.Hour, 100)
		var sids []string
		for range 10 {
			s, sid := newSession(t, ss)
			if _, f := s.setLogLevel("debug"); f != nil {
				t.Fatal(f.err)
			}
			sids = append(sids, sid)
		}
		if err := ss.end(sids[0], ""); err != nil {
			t.Fatal(err)
		}
		if n := ss.live(); n != 9 {
			t.Fatalf("%d records live, want 9 (one session ended)", n)
		}
		time.Sleep(time.Hour)
		if n := ss.live(); n != 0 {
			t.Errorf("%d records live once every session expired, want 0", n)
		}
		// A replica making records forgets them too, without a scrape.
		for range 3 {
			sid, _ := ss.create("2025-11-25", "", nil, nil)
			s, _ := ss.open(sid)
			s.setLogLevel("info")
		}
		time.Sleep(time.Hour + time.Minute)
		sid, _ := ss.create("2025-11-25", "", nil, nil)
		s, _ := ss.open(sid)
		s.setLogLevel("info")
		ss.mu.Lock()
		records, ended := len(ss.records), len(ss.ended)
		ss.mu.Unlock()
		if records != 1 || ended != 0 {
			t.Errorf("after the others expired, a new record found %d records and %d ends kept, want 1 and 0", records, ended)
		}
	})
}
