package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The fault suite: the demo misbehaves on purpose (-fault), and each test
// asserts what a user of the gateway sees.

// startFaulty runs the gateway with the demo child misbehaving.
func startFaulty(t *testing.T, env []string, demoArgs ...string) *gateway {
	t.Helper()
	return startGateway(t, env, append([]string{"--", gatewayBin, "demo"}, demoArgs...)...)
}

// echoWorks checks that the gateway serves a normal call.
func echoWorks(t *testing.T, g *gateway, method string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":"ok","method":"tools/call","params":{"name":"echo","arguments":{"text":"still here"}}}`
	if method == "tools/list" {
		body = `{"jsonrpc":"2.0","id":"ok","method":"tools/list"}`
	}
	var resp struct {
		Result map[string]any `json:"result"`
	}
	if httpResp := rpcJSON(t, g.URL, body, &resp); httpResp.StatusCode != 200 || resp.Result == nil {
		t.Errorf("%s after the fault: status %d, %+v", method, httpResp.StatusCode, resp)
	}
}

// restartedAndReady waits until the child that failed has been replaced
// and the new one is ready, and checks it was the only restart.
func restartedAndReady(t *testing.T, g *gateway) {
	t.Helper()
	// The failed call's answer came after the gateway saw the child go:
	// from here the gateway is not ready until a new child is.
	if r := g.WaitReady(); r.Restarts != 1 {
		t.Errorf("restarts = %d, want 1", r.Restarts)
	}
}

// A child that crashes mid-call: the call fails at once with 503 and
// -32000, the child is restarted with a fresh handshake, and the gateway
// serves again.
func TestFaultCrash(t *testing.T) {
	t.Parallel()
	g := startFaulty(t, []string{"GATEWAY_RESTART_DELAY_MIN=10ms"}, "-fault", "crash-on-call")
	g.WaitReady()
	var resp rpcError
	httpResp := rpcJSON(t, g.URL, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, &resp)
	if httpResp.StatusCode != 503 || httpResp.Header.Get("Retry-After") == "" || resp.Error.Code != -32000 || !strings.Contains(resp.Error.Message, "exited") || string(resp.ID) != "7" {
		t.Errorf("status %d, answer %+v; want 503 with Retry-After and a child-exited error for id 7", httpResp.StatusCode, resp)
	}
	restartedAndReady(t, g)
	echoWorks(t, g, "tools/list")
}

// A child that hangs (reads and writes nothing more) while a call is
// pending: the liveness probe goes unanswered, the child is killed and
// restarted, and the call fails with 503 and -32000 saying so.
func TestFaultHang(t *testing.T) {
	t.Parallel()
	g := startFaulty(t, []string{"GATEWAY_WEDGE_TIMEOUT=500ms", "GATEWAY_PROBE_TIMEOUT=500ms", "GATEWAY_RESTART_DELAY_MIN=10ms"}, "-fault", "hang-on-call")
	g.WaitReady()
	var resp rpcError
	httpResp := rpcJSON(t, g.URL, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, &resp)
	if httpResp.StatusCode != 503 || resp.Error.Code != -32000 || !strings.Contains(resp.Error.Message, "stopped responding") {
		t.Errorf("status %d, answer %+v; want 503 and child_unavailable saying the child stopped responding", httpResp.StatusCode, resp)
	}
	restartedAndReady(t, g)
	echoWorks(t, g, "tools/list")
}

// A child that ignores cancellation: the client that left is gone, the
// child's late answer is dropped and counted, and the gateway serves on.
func TestFaultIgnoresCancellation(t *testing.T) {
	t.Parallel()
	g := startFaulty(t, []string{"GATEWAY_LOG_LEVEL=debug"}, "-fault", "ignore-cancel")
	stop := slowCallFor(t, g.URL, 1, 1000)
	stop()
	got := demoReceived(t, g.URL, 1)
	c := got.Cancellations[0]
	if !c.Running || !c.Ignored {
		t.Fatalf("cancellation %+v, want one for the running call, ignored", c)
	}
	// Once the demo has answered the call anyway, its answer is in the
	// gateway's hands: it reads the child's lines in order.
	demoReceivedArgs(t, g.URL, `{"wait_answered":`+string(c.RequestID)+`}`)
	if r := g.Readiness(); r.LateResponses != 1 || r.Restarts != 0 {
		t.Errorf("late responses %d, restarts %d; want the late answer dropped, and the child kept", r.LateResponses, r.Restarts)
	}
	// The log line names the request the answer was for.
	g.Logs.Wait(t, func(r logRecord) bool { return r["msg"] == "dropped late response" && r["request_id"] != nil })
	echoWorks(t, g, "tools/call")
}

// A child that answers every request twice: the second answer is dropped,
// with a warning that names the request, and counted among the answers
// nobody waits for, not as a cancellation the child missed.
func TestFaultAnswersTwice(t *testing.T) {
	t.Parallel()
	g := startFaulty(t, nil, "-fault", "answer-twice")
	echoWorks(t, g, "tools/call")
	g.Logs.Wait(t, func(r logRecord) bool {
		return r["level"] == "WARN" && r["msg"] == "child answered a request it had answered already; dropped" && r["request_id"] != nil
	})
	if r := g.Readiness(); r.UnknownResponses == 0 || r.LateResponses != 0 {
		t.Errorf("unknown responses %d, late %d; want the second answers counted as unknown", r.UnknownResponses, r.LateResponses)
	}
}

// A child that writes junk between messages (text, a cut-off message,
// bytes that are not UTF-8, an answer to an id nobody used): each junk line
// is logged and skipped, and calls get their right answers.
func TestFaultGarbage(t *testing.T) {
	t.Parallel()
	g := startFaulty(t, nil, "-fault", "garbage")
	echoWorks(t, g, "tools/call")
	// The junk came before the answer, on the same stdout.
	if r := g.Readiness(); r.UnknownResponses == 0 {
		t.Errorf("unknown responses = %d, want the answer to an id nobody sent counted", r.UnknownResponses)
	}
	for _, junk := range []string{"this is not JSON", `{"jsonrpc":"2.0","id":`, "\uFFFD\uFFFD\uFFFD"} {
		g.Logs.Wait(t, func(r logRecord) bool {
			h, _ := r["head"].(string)
			return r["level"] == "WARN" && strings.HasPrefix(h, junk)
		})
	}
}

// A child that writes 8 MiB to stderr in the middle of a call never blocks:
// the call is answered, and every line is logged or, past the rate, counted
// in a warning that follows.
func TestFaultStderrFlood(t *testing.T) {
	t.Parallel()
	for _, rate := range []string{"0", "200"} {
		t.Run("GATEWAY_STDERR_RATE="+rate, func(t *testing.T) {
			t.Parallel()
			g := startFaulty(t, []string{"GATEWAY_LOG_LEVEL=info", "GATEWAY_STDERR_RATE=" + rate}, "-fault", "stderr-flood")
			echoWorks(t, g, "tools/call")
			logged, dropped := 0, 0
			g.Logs.Wait(t, func(r logRecord) bool {
				if line, _ := r["line"].(string); r["stream"] == "stderr" && strings.HasPrefix(line, "xxxx") {
					logged++
				}
				if n, ok := r["dropped"].(float64); ok && r["level"] == "WARN" {
					dropped += int(n)
				}
				return logged+dropped == 8<<10
			})
			if rate == "0" && dropped != 0 || rate == "200" && (logged < 2000 || dropped == 0) {
				t.Errorf("%d lines logged and %d dropped; want all logged with no rate, and with one the burst of 2000 and what the rate adds logged, the rest dropped", logged, dropped)
			}
		})
	}
}

// A legacy child that exits when probed with server/discover: with era
// auto the gateway starts it again as legacy, and serves.
func TestFaultExitOnProbe(t *testing.T) {
	t.Parallel()
	g := startFaulty(t, []string{"GATEWAY_ERA=auto"}, "-era", "legacy", "-fault", "exit-on-probe")
	if r := g.WaitReady(); r.Workers[0].Era != "legacy" || r.Restarts != 1 {
		t.Errorf("workers %+v after %d restarts; want a legacy child, started twice (the probed one, then the legacy one)", r.Workers, r.Restarts)
	}
	echoWorks(t, g, "tools/call")
}

// A child that ignores both stdin closing and SIGTERM is killed on
// shutdown, and the gateway still exits 0.
func TestFaultIgnoresTerm(t *testing.T) {
	t.Parallel()
	g := startFaulty(t, []string{"GATEWAY_STDIN_GRACE=300ms", "GATEWAY_TERM_GRACE=300ms"}, "-fault", "ignore-term")
	g.WaitReady()
	g.Cmd.Process.Signal(syscall.SIGTERM)
	<-g.Done
	if g.Err != nil {
		t.Errorf("gateway exit: %v, want status 0", g.Err)
	}
	if len(g.Logs.Find(func(r logRecord) bool { return r["status"] == "signal: killed" })) != 1 {
		t.Error("the child's exit was not logged as a SIGKILL")
	}
}

// A child whose grandchild holds its stdout: on shutdown the gateway exits
// 0 and the grandchild is gone too.
func TestFaultGrandchild(t *testing.T) {
	t.Parallel()
	g := startFaulty(t, nil, "-fault", "grandchild")
	rec := g.Logs.Wait(t, func(r logRecord) bool {
		line, _ := r["line"].(string)
		return strings.Contains(line, "grandchild pid")
	})
	var pid int
	fmt.Sscanf(rec["line"].(string), "demo: grandchild pid %d", &pid)
	if pid <= 0 {
		t.Fatalf("no pid in %v", rec)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	g.WaitReady()
	echoWorks(t, g, "tools/call")
	g.Cmd.Process.Signal(syscall.SIGTERM)
	<-g.Done
	if g.Err != nil {
		t.Errorf("gateway exit: %v, want status 0", g.Err)
	}
	if alive(pid) {
		t.Errorf("the grandchild %d outlived the gateway", pid)
	}
}

// alive reports whether a process runs; a zombie (dead, not yet reaped by
// whoever inherited it) does not.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// A line over the size limit fails the call it answers with an error that
// names the limit, and the gateway keeps serving.
func TestFaultLineOverTheLimit(t *testing.T) {
	t.Parallel()
	g := startGateway(t, []string{"GATEWAY_MAX_MESSAGE_BYTES=1000000"})
	var resp rpcError
	httpResp := rpcJSON(t, g.URL, `{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"big","arguments":{"bytes":3000000}}}`, &resp)
	if httpResp.StatusCode != 502 || resp.Error.Code != -32004 || !strings.Contains(resp.Error.Message, "1000000") || string(resp.ID) != `"big"` {
		t.Errorf("status %d, answer %+v; want 502 and a too-large error naming the limit", httpResp.StatusCode, resp)
	}
	echoWorks(t, g, "tools/call")
	g.Logs.Wait(t, func(r logRecord) bool { // logged with its head as it passed the limit
		h, _ := r["head"].(string)
		return r["level"] == "WARN" && strings.HasPrefix(h, `{"jsonrpc":"2.0"`)
	})
	g.Logs.Wait(t, func(r logRecord) bool { // and with its size at its end
		n, _ := r["size"].(float64)
		return r["msg"] == "the child's message over the size limit ended; all of it was skipped" && n > 3000000
	})
}

// /readyz follows the child: 503 while none is ready, 200 again after the
// restart's handshake.
func TestFaultReadiness(t *testing.T) {
	t.Parallel()
	// A long restart delay keeps the gateway without a child long enough
	// to look.
	g := startFaulty(t, []string{"GATEWAY_RESTART_DELAY_MIN=2s", "GATEWAY_RESTART_DELAY_MAX=2s"}, "-fault", "crash-on-call")
	g.WaitReady()
	status := func() int {
		resp, err := http.Get(g.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := status(); s != 200 {
		t.Fatalf("/readyz = %d with a child ready", s)
	}
	// The call fails as the child crashes; its answer comes after the
	// gateway saw the child go.
	rpc(t, context.Background(), g.URL, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`).Body.Close()
	if s := status(); s != 503 {
		t.Errorf("/readyz = %d while the child is down, want 503", s)
	}
	g.WaitReady()
	if s := status(); s != 200 {
		t.Errorf("/readyz = %d after the restart, want 200", s)
	}
}
