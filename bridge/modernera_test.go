package bridge

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stdiomcp/gateway/internal/gatewaytest"
	"github.com/stdiomcp/gateway/jsonrpc"
)

// With the era set to modern, a 2025 client's initialize is answered from
// the child's DiscoverResult, as with auto: the setting only spares the
// probe's fallback, not the discover.
func TestModernEraInitializeIsAnsweredFromDiscover(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Options{Era: EraModern}, autoReply{discover: "result"})
	child := w.child()
	c := w.call(context.Background(), `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"0"}}}`)
	resp, err := c.wait()
	if err != nil {
		t.Fatal(err)
	}
	m, err := jsonrpc.Parse(resp)
	if err != nil {
		t.Fatalf("response %s: %v", resp, err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(m.Result, &got); err != nil {
		t.Fatalf("result %s: %v", m.Result, err)
	}
	for k, v := range map[string]string{"protocolVersion": `"2025-06-18"`, "capabilities": `{"tools":{}}`, "serverInfo": `{"name":"fake","version":"1"}`} {
		if string(got[k]) != v {
			t.Errorf("result.%s = %s, want %s", k, got[k], v)
		}
	}
	if first := firstOf(t, child); first.Method != "server/discover" {
		t.Errorf("the child's first message is %s, want server/discover", first.Raw)
	}
	if era := w.currentChild().eraNow(); era != EraModern {
		t.Errorf("era = %s, want modern", era)
	}
}

// With the era set to modern, a child that announces tool list changes
// gets the gateway's own listen, and a change drops the cached list.
func TestModernEraListensForToolChanges(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Options{Era: EraModern}, autoReply{discover: "result", listChanged: true})
	child := w.child()
	if m := firstOf(t, child); m.Method != "server/discover" {
		t.Fatalf("child got %s first, want server/discover", m.Raw)
	}
	watch := firstOf(t, child)
	if watch.Method != "subscriptions/listen" || !contains(watch.Params, `"toolsListChanged":true`) {
		t.Fatalf("child got %s, want the gateway's own listen", watch.Raw)
	}
	lookup := func() <-chan int {
		got := make(chan int, 1)
		go func() {
			h, _ := w.b.ToolHeaders(context.Background(), "t")
			got <- len(h)
		}()
		return got
	}
	got := lookup()
	list := child.expect("tools/list")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"t","inputSchema":{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}}]}}`, list.ID)
	if n := <-got; n != 1 {
		t.Fatalf("%d headers, want 1", n)
	}
	child.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}`, watch.ID)
	// A call after the notification: the reader has handled it by then.
	c := w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"x","params":{}}`)
	m := child.expect("x")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
	c.wait()
	got = lookup()
	list = child.expect("tools/list")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`, list.ID)
	if n := <-got; n != 0 {
		t.Errorf("%d headers after the change, want none: the cache was not dropped", n)
	}
}

// With the era set to modern, a child that refuses server/discover, or
// does not answer it within the handshake timeout, fails to start: it is
// never taken for a legacy one and sent initialize.
func TestModernEraChildWithoutDiscoverFailsToStart(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		auto    autoReply
		why     string // what the waiting call is told
		log     string // what the log says
		timeout bool
	}{
		"refused":          {auto: autoReply{discover: "error", initialize: true}, why: "failed to start", log: "refused server/discover"},
		"not an object":    {auto: autoReply{discover: "array", initialize: true}, why: "failed to start", log: "DiscoverResult is not an object"},
		"another revision": {auto: autoReply{discover: "unsupported", initialize: true}, why: "failed to start", log: "refused server/discover"},
		"silent":           {auto: autoReply{initialize: true}, why: "handshake timed out", log: "did not answer server/discover within 3s", timeout: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				var log gatewaytest.LockedBuffer
				w := &world{t: t, children: make(chan *fakeChild, 8), auto: tc.auto}
				w.b = New(w.start, strict(t, Options{Era: EraModern, HandshakeTimeout: 3 * time.Second, RestartMin: time.Hour, RestartMax: time.Hour,
					Logger: slog.New(slog.NewTextHandler(&log, nil))}))
				defer w.b.Close(context.Background())
				child := <-w.children
				defer child.exit()
				start := time.Now()
				_, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`), Caller{})
				if code := gatewayCode(t, err); code != jsonrpc.CodeUnavailable || !strings.Contains(err.Error(), tc.why) {
					t.Errorf("the waiting call ended with %v, want child_unavailable saying %q", err, tc.why)
				}
				if waited := time.Since(start); tc.timeout && waited != 3*time.Second {
					t.Errorf("the call waited %v, want the handshake timeout", waited)
				}
				var seen []string
				for m := range child.got { // closed when the bridge closes the child's input
					seen = append(seen, m.Method)
				}
				if strings.Join(seen, ",") != "server/discover" {
					t.Errorf("the child saw %q, want only server/discover", seen)
				}
				synctest.Wait()
				if !strings.Contains(log.String(), tc.log) {
					t.Errorf("the log does not say %q:\n%s", tc.log, log.String())
				}
				if w.b.Ready() {
					t.Error("the bridge is ready with a child that failed its handshake")
				}
			})
		})
	}
}

// firstOf is the next message the bridge wrote to the child, handshake
// included, failing the test if none comes in 10s.
func firstOf(t *testing.T, c *fakeChild) *jsonrpc.Message {
	t.Helper()
	select {
	case m, ok := <-c.got:
		if !ok {
			t.Fatal("the bridge closed the child's input")
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message from the bridge")
		return nil
	}
}
