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
	g.WaitReady()
	stop1 := slowCall(t, g.URL, 1)
	stop2 := slowCall(t, g.URL, 2)
	if r := g.Readiness(); len(r.Workers) != 2 || r.Workers[0].InFlight != 1 || r.Workers[1].InFlight != 1 {
		t.Fatalf("workers %+v, want one call on each", r.Workers)
	}
	stop1()
	stop2()
	// Each child records the cancellation it got, and whether it had that
	// request in flight; ties go to the workers in turn, so the children
	// answer in turn.
	seen := map[int]received{}
	for range 10 {
		if len(seen) == 2 {
			break
		}
		got := demoReceived(t, g.URL, 1)
		seen[got.PID] = got
	}
	if len(seen) != 2 {
		t.Fatalf("heard from %d children, want 2", len(seen))
	}
	for pid, got := range seen {
		if len(got.Cancellations) != 1 || !got.Cancellations[0].Running {
			t.Errorf("child %d got cancellations %+v, want one for the call it had", pid, got.Cancellations)
		}
	}
}

// Past the cap and the queue, a call is refused at once with 503,
// Retry-After and -32003, and never reaches the child.
func TestOverloadIsRefused(t *testing.T) {
	t.Parallel()
	g := startGateway(t, []string{"GATEWAY_MAX_IN_FLIGHT=1", "GATEWAY_QUEUE_SIZE=0"})
	slow := rpc(t, context.Background(), g.URL, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"duration_ms":400,"interval_ms":20},"_meta":{"progressToken":1}}}`)
	events := newSSEReader(slow.Body)
	if ev := events.next(); !strings.Contains(ev, "notifications/progress") {
		t.Fatalf("first event = %q, want progress", ev)
	}
	resp := rpc(t, context.Background(), g.URL, `{"jsonrpc":"2.0","id":"more","method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
	body, _ := io.ReadAll(resp.Body)
	var e rpcError
	json.Unmarshal(body, &e)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || e.Error.Code != -32003 || e.Error.Data.Reason != "overloaded" || string(e.ID) != `"more"` {
		t.Errorf("status %d, Retry-After %q, body %s; want 503, Retry-After and -32003", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	// Once the slow call's answer is in, its slot is free again.
	var last string
	for ev := events.next(); ev != ""; ev = events.next() {
		last = ev
	}
	if !strings.Contains(last, `"result"`) {
		t.Fatalf("the slow call ended with %q", last)
	}
	var calls []string
	for _, r := range demoReceived(t, g.URL, 0).Requests {
		if r.Method == "tools/call" && r.Tool != "received" {
			calls = append(calls, r.Tool)
		}
	}
	if len(calls) != 1 || calls[0] != "slow" {
		t.Errorf("the child got calls %v, want only the slow one", calls)
	}
}
