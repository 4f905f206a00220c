package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
)

// slowCall starts a minute-long demo call with progress and returns once
// its first progress event arrived; cancel ends it.
func slowCall(t *testing.T, url string, id int) (cancel func()) {
	t.Helper()
	return slowCallFor(t, url, id, 60000)
}

// slowCallFor is slowCall for a call of ms milliseconds.
func slowCallFor(t *testing.T, url string, id, ms int) (cancel func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	resp := rpc(t, ctx, url, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"slow","arguments":{"duration_ms":%d,"interval_ms":20},"_meta":{"progressToken":%d}}}`, id, ms, id))
	if ev := newSSEReader(resp.Body).next(); !strings.Contains(ev, "notifications/progress") {
		cancel()
		t.Fatalf("first event = %q, want progress", ev)
	}
	return cancel
}

// With two workers, two calls in flight run on two children, and each
// call's cancellation reaches the child that has it.
func TestWorkersShareTheLoad(t *testing.T) {
	t.Parallel()
	g := startGateway(t, []string{"GATEWAY_WORKERS=2"})
	for _, w := range []float64{0, 1} {
		g.Logs.Wait(t, func(r logRecord) bool { return r["msg"] == "child ready" && r["worker"] == w })
	}
	stop1 := slowCall(t, g.URL, 1)
	stop2 := slowCall(t, g.URL, 2)
	started := g.Logs.Find(func(r logRecord) bool { return r["msg"] == "to child" && r["method"] == "tools/call" })
	if len(started) != 2 || started[0]["worker"] == started[1]["worker"] {
		t.Fatalf("the calls went to workers %v, want one each", started)
	}
	stop1()
	stop2()
	for _, rec := range started {
		g.Logs.Wait(t, func(r logRecord) bool {
			return r["msg"] == "cancelled call" && r["worker"] == rec["worker"] && r["id"] == rec["id"]
		})
	}
}

// Past the cap and the queue, a call is refused at once with 503,
// Retry-After and -32003, and never reaches the child.
func TestOverloadIsRefused(t *testing.T) {
	t.Parallel()
	g := startGateway(t, []string{"GATEWAY_MAX_IN_FLIGHT=1", "GATEWAY_QUEUE_SIZE=0"})
	stop := slowCall(t, g.URL, 1)
	defer stop()
	resp := rpc(t, context.Background(), g.URL, `{"jsonrpc":"2.0","id":"more","method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
	body, _ := io.ReadAll(resp.Body)
	var e rpcError
	json.Unmarshal(body, &e)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || e.Error.Code != -32003 || e.Error.Data.Reason != "overloaded" || string(e.ID) != `"more"` {
		t.Errorf("status %d, Retry-After %q, body %s; want 503, Retry-After and -32003", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if n := len(g.Logs.Find(func(r logRecord) bool { return r["msg"] == "to child" && r["method"] == "tools/call" })); n != 1 {
		t.Errorf("the child got %d calls, want only the first", n)
	}
}
