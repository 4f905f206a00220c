package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// rpcError is a JSON-RPC error answer.
type rpcError struct {
	ID    json.RawMessage `json:"id"`
	Error struct {
		Code    int
		Message string
		Data    struct{ Source, Reason string }
	} `json:"error"`
}

// sseReader reads the data fields of an SSE response, one event at a time.
type sseReader struct{ sc *bufio.Scanner }

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 64<<20)
	return &sseReader{sc}
}

// next returns the next event's data, or "" at the end of the stream.
func (s *sseReader) next() string {
	for s.sc.Scan() {
		if data, ok := strings.CutPrefix(s.sc.Text(), "data: "); ok {
			return data
		}
	}
	return ""
}

func TestCallWithJSONAnswer(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil)
	var resp struct {
		ID     json.RawMessage `json:"id"`
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}
	httpResp := rpcJSON(t, g.URL, `{"jsonrpc":"2.0","id":"req-1","method":"tools/call","params":{"name":"echo","arguments":{"text":"héllo"}}}`, &resp)
	if httpResp.StatusCode != 200 || httpResp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("status %d, Content-Type %q", httpResp.StatusCode, httpResp.Header.Get("Content-Type"))
	}
	if string(resp.ID) != `"req-1"` || len(resp.Result.Content) != 1 || resp.Result.Content[0].Text != "héllo" {
		t.Errorf("answer = %+v", resp)
	}
}

// Progress arrives as SSE events on the call's own response, with the
// client's token, before the final response; then the stream ends.
func TestProgressOverSSE(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil)
	resp := rpc(t, context.Background(), g.URL, `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"slow","arguments":{"duration_ms":250,"interval_ms":50},"_meta":{"progressToken":"my-token"}}}`)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q, want text/event-stream", ct)
	}
	events := newSSEReader(resp.Body)
	for i := 1; i <= 5; i++ {
		var n struct {
			Method string `json:"method"`
			Params struct {
				ProgressToken json.RawMessage `json:"progressToken"`
				Progress      int             `json:"progress"`
				Total         int             `json:"total"`
			} `json:"params"`
		}
		ev := events.next()
		if err := json.Unmarshal([]byte(ev), &n); err != nil {
			t.Fatalf("event %d = %q: %v", i, ev, err)
		}
		if n.Method != "notifications/progress" || string(n.Params.ProgressToken) != `"my-token"` || n.Params.Progress != i || n.Params.Total != 5 {
			t.Errorf("event %d = %s", i, ev)
		}
	}
	final := events.next()
	if !strings.HasPrefix(final, `{"jsonrpc":"2.0","id":42,"result":`) || !strings.Contains(final, "done after 5 steps") {
		t.Errorf("final event = %s", final)
	}
	if ev := events.next(); ev != "" {
		t.Errorf("an event after the response: %s", ev)
	}
}

// A client that closes its stream makes the child receive
// notifications/cancelled naming the id the gateway gave the call.
func TestDisconnectReachesTheChild(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	resp := rpc(t, ctx, g.URL, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"duration_ms":60000,"interval_ms":20},"_meta":{"progressToken":1}}}`)
	if ev := newSSEReader(resp.Body).next(); !strings.Contains(ev, "notifications/progress") {
		t.Fatalf("first event = %q, want progress", ev)
	}
	cancel()
	got := demoReceived(t, g.URL, 1)
	var slowID json.RawMessage
	for _, r := range got.Requests {
		if r.Tool == "slow" {
			slowID = r.ID
		}
	}
	c := got.Cancellations[0]
	if string(c.RequestID) != string(slowID) || c.Reason != "client disconnected" || !c.Running {
		t.Errorf("child got cancellation %+v; want requestId %s (the id it saw), reason \"client disconnected\", while running", c, slowID)
	}
}

// 64 concurrent calls, with ids that collide across clients, each get their
// own answer, and the child sees 64 distinct ids.
func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil)
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			clientID := fmt.Sprint(i % 4)
			if i%2 == 0 {
				clientID = `"same"`
			}
			var resp struct {
				ID     json.RawMessage `json:"id"`
				Result struct {
					Content []struct{ Text string } `json:"content"`
				} `json:"result"`
			}
			rpcJSON(t, g.URL, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"echo","arguments":{"text":"caller %d"}}}`, clientID, i), &resp)
			if string(resp.ID) != clientID || len(resp.Result.Content) != 1 || resp.Result.Content[0].Text != fmt.Sprintf("caller %d", i) {
				t.Errorf("caller %d (id %s) got %+v", i, clientID, resp)
			}
		})
	}
	wg.Wait()
	ids := map[string]bool{}
	for _, r := range demoReceived(t, g.URL, 0).Requests {
		if r.Tool == "echo" {
			if ids[string(r.ID)] {
				t.Errorf("the child saw id %s twice", r.ID)
			}
			ids[string(r.ID)] = true
		}
	}
	if len(ids) != n {
		t.Errorf("the child saw %d distinct echo ids, want %d", len(ids), n)
	}
}

// A 20 MiB tool result passes through whole.
func TestLargeResult(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil)
	const size = 20 << 20
	resp := rpc(t, context.Background(), g.URL, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{"bytes":%d}}}`, size))
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("a %d-byte answer that is not JSON: %v", len(body), err)
	}
	if len(r.Result.Content) != 1 || len(r.Result.Content[0].Text) != size {
		t.Errorf("text of %d bytes, want %d", len(r.Result.Content[0].Text), size)
	}
}

// SIGINT: the call in flight ends with an error for its client, the child is
// told to cancel it, the child is stopped and the gateway exits 0.
func TestSignalShutdown(t *testing.T) {
	t.Parallel()
	g := startGateway(t, []string{"GATEWAY_SHUTDOWN_GRACE=5s"})
	open := func(id string, ms int) *sseReader {
		resp := rpc(t, context.Background(), g.URL, fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"slow","arguments":{"duration_ms":%d,"interval_ms":20},"_meta":{"progressToken":1}}}`, id, ms))
		events := newSSEReader(resp.Body)
		if ev := events.next(); !strings.Contains(ev, "notifications/progress") {
			t.Fatalf("first event of %s = %q, want progress", id, ev)
		}
		return events
	}
	long, short := open("long", 60000), open("short", 2000)
	if err := g.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Draining: not ready, new calls refused, calls in flight go on.
	if r := g.Await("not-ready"); !r.Draining {
		t.Errorf("/readyz while draining: %+v, want draining", r)
	}
	var refused rpcError
	if resp := rpcJSON(t, g.URL, `{"jsonrpc":"2.0","id":"new","method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, &refused); resp.StatusCode != 503 || refused.Error.Code != -32005 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("new call while draining: status %d, %+v; want 503 and -32005", resp.StatusCode, refused)
	}
	lastOf := func(events *sseReader) string {
		var last string
		for ev := events.next(); ev != ""; ev = events.next() {
			last = ev
		}
		return last
	}
	if last := lastOf(short); !strings.Contains(last, `"id":"short"`) || !strings.Contains(last, `"result"`) {
		t.Errorf("the call that fits in the grace period ended with %s, want its result", last)
	}
	// After the grace period the rest is cancelled.
	if last := lastOf(long); !strings.Contains(last, `"id":"long"`) || !strings.Contains(last, `"code":-32005`) {
		t.Errorf("last event = %s, want the shutdown error for id \"long\"", last)
	}
	<-g.Done
	if g.Err != nil {
		t.Errorf("gateway exit: %v, want status 0", g.Err)
	}
	cancelled := g.Logs.Find(func(r logRecord) bool {
		line, _ := r["line"].(string)
		return r["stream"] == "stderr" && strings.Contains(line, "demo: cancelled request") && strings.Contains(line, "gateway shutting down")
	})
	if len(cancelled) != 1 {
		t.Errorf("the child logged %d cancellations for the shutdown, want 1", len(cancelled))
	}
	if len(g.Logs.Find(func(r logRecord) bool { return r["status"] == "exit status 0" })) != 1 {
		t.Errorf("no record of the child exiting of itself")
	}
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	run := func(env []string, args ...string) (string, int) {
		cmd := exec.Command(gatewayBin, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	out, code := run(nil, "-h")
	if code != 0 {
		t.Errorf("gateway -h exited %d", code)
	}
	for _, v := range []string{"GATEWAY_ADDR", "GATEWAY_COMMAND", "GATEWAY_ERA", "GATEWAY_CALL_IDLE_TIMEOUT", "GATEWAY_MAX_MESSAGE_BYTES", "GATEWAY_LOG_FORMAT", "127.0.0.1:8080", "67108864"} {
		if !strings.Contains(out, v) {
			t.Errorf("gateway -h does not mention %s", v)
		}
	}
	if out, code := run([]string{"GATEWAY_ERA=sideways"}); code != 1 || !strings.Contains(out, "GATEWAY_ERA must be auto, legacy or modern") {
		t.Errorf("bad GATEWAY_ERA: exit %d, output %q", code, out)
	}
	if out, code := run([]string{"GATEWAY_CALL_IDLE_TIMEOUT=soon"}); code != 1 || !strings.Contains(out, "CALL_IDLE_TIMEOUT") {
		t.Errorf("bad duration: exit %d, output %q", code, out)
	}
	if out, code := run(nil, "node", "server.js"); code != 2 || !strings.Contains(out, "after --") {
		t.Errorf("a command without --: exit %d, output %q", code, out)
	}
	if out, code := run([]string{"GATEWAY_ADDR=256.0.0.1:1"}, "--", "true"); code != 1 || !strings.Contains(out, "listen") {
		t.Errorf("an address that cannot be listened on: exit %d, output %q", code, out)
	}
	if out, code := run(nil, "--", "/nonexistent/mcp-server"); code != 1 || !strings.Contains(out, "/nonexistent/mcp-server") {
		t.Errorf("a missing child program: exit %d, output %q", code, out)
	}
	if _, code := run(nil, "demo", "-era", "nope"); code != 1 {
		t.Errorf("demo with a bad era exited %d, want 1", code)
	}
}

// The demo answers over stdio on its own, in each era.
func TestDemoEras(t *testing.T) {
	t.Parallel()
	tests := map[string]struct{ discover, initialize bool }{
		"legacy": {false, true},
		"modern": {true, false},
		"dual":   {true, true},
	}
	for era, want := range tests {
		t.Run(era, func(t *testing.T) {
			in := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}` + "\n" +
				`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}` + "\n"
			cmd := exec.Command(gatewayBin, "demo", "-era", era)
			cmd.Stdin = strings.NewReader(in)
			out, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
			if len(lines) != 2 {
				t.Fatalf("demo wrote %q", out)
			}
			// Requests are served concurrently: match answers by id.
			answered := map[string]bool{}
			for _, line := range lines {
				var m struct {
					ID            json.RawMessage
					Result, Error json.RawMessage
				}
				json.Unmarshal(line, &m)
				answered[string(m.ID)] = m.Result != nil
			}
			if answered["1"] != want.discover || answered["2"] != want.initialize {
				t.Errorf("discover answered %v, initialize answered %v; want %v, %v\n%s", answered["1"], answered["2"], want.discover, want.initialize, out)
			}
		})
	}
}

// A call that goes quiet past the idle timeout gets a timeout error, and the
// child is told to cancel it.
func TestIdleTimeout(t *testing.T) {
	t.Parallel()
	g := startGateway(t, []string{"GATEWAY_CALL_IDLE_TIMEOUT=300ms"})
	var resp rpcError
	httpResp := rpcJSON(t, g.URL, `{"jsonrpc":"2.0","id":"quiet","method":"tools/call","params":{"name":"slow","arguments":{"duration_ms":60000,"interval_ms":30000}}}`, &resp)
	if httpResp.StatusCode != 504 || resp.Error.Code != -32001 || resp.Error.Data.Source != "gateway" || !strings.Contains(resp.Error.Message, "300ms") {
		t.Errorf("status %d, answer %+v; want 504 and a gateway timeout error", httpResp.StatusCode, resp)
	}
	got := demoReceived(t, g.URL, 1)
	if c := got.Cancellations[0]; c.Reason != "timeout" || !c.Running {
		t.Errorf("the child got cancellation %+v, want reason timeout while running", c)
	}
}

// The tasks extension passes through: a task created by tools/call is
// polled with tasks/get (Mcp-Name checked), and outlives the requests
// around it; the child is never told to cancel it.
func TestTasksPassThrough(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil, "--", gatewayBin, "demo", "-era", "modern")
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	post := func(method, name, params string) (int, map[string]any) {
		req, _ := http.NewRequest("POST", g.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{`+params+`,`+meta+`}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", method)
		req.Header.Set("Mcp-Name", name)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	_, created := post("tools/call", "test_tool_with_task", `"name":"test_tool_with_task","arguments":{"duration_ms":300}`)
	result, _ := created["result"].(map[string]any)
	taskID, _ := result["taskId"].(string)
	if result["resultType"] != "task" || taskID == "" {
		t.Fatalf("tools/call answered %v, want a CreateTaskResult", created)
	}
	if status, m := post("tasks/get", "not-"+taskID, `"taskId":"`+taskID+`"`); status != 400 || fmt.Sprint(m["error"]) == "<nil>" {
		t.Errorf("tasks/get with the wrong Mcp-Name: status %d %v, want 400", status, m)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, m := post("tasks/get", taskID, `"taskId":"`+taskID+`"`)
		r, _ := m["result"].(map[string]any)
		if r["status"] == "completed" {
			if !strings.Contains(fmt.Sprint(r["result"]), "done after") {
				t.Errorf("completed task = %v", r)
			}
			break
		}
		if r["status"] != "working" || time.Now().After(deadline) {
			t.Fatalf("tasks/get = %v", m)
		}
		// Poll at the interval the task asked for.
		<-time.After(time.Duration(r["pollIntervalMs"].(float64)) * time.Millisecond)
	}
	if got := demoReceived(t, g.URL, 0); len(got.Cancellations) != 0 {
		t.Errorf("the child was told to cancel: %+v", got.Cancellations)
	}
}

// A request whose members a child could read otherwise than the gateway
// (twice, by letter case, through escapes) is refused at once with 400 and
// -32600 naming the member, and never reaches the child: the demo decodes
// with encoding/json, which ignores case and keeps the last duplicate.
func TestAmbiguousRequestsNeverReachTheChild(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil)
	modern := []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "echo"}
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	tests := []struct {
		name, body, says string
		header           []string
	}{
		{"ID beside id", `{"jsonrpc":"2.0","id":1,"ID":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, `"ID"`, nil},
		{"NAME beside name", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","NAME":"slow"}}`, `"NAME"`, nil},
		{"name twice", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","name":"slow"}}`, `"name" twice`, nil},
		{"name through an escape", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","n\u0061me":"slow"}}`, `"name" twice`, nil},
		{"method twice", `{"jsonrpc":"2.0","id":5,"method":"tools/list","method":"tools/call","params":{"name":"slow"}}`, `"method" twice`, nil},
		{"Method beside method", `{"jsonrpc":"2.0","id":6,"method":"tools/list","Method":"tools/call","params":{"name":"slow"}}`, `"Method"`, nil},
		{"a modern request, NAME beside name", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","NAME":"slow",` + meta + `}}`, `"NAME"`, modern},
		{"progress token by case", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"slow","_meta":{"progressToken":1,"ProgressToken":2}}}`, `"ProgressToken"`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/mcp", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			for i := 0; i+1 < len(tt.header); i += 2 {
				req.Header.Set(tt.header[i], tt.header[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			defer resp.Body.Close()
			var e rpcError
			body, _ := io.ReadAll(resp.Body)
			json.Unmarshal(body, &e)
			if resp.StatusCode != 400 || e.Error.Code != -32600 || !strings.Contains(e.Error.Message, tt.says) {
				t.Errorf("status %d, body %s; want 400 and -32600 naming %s", resp.StatusCode, body, tt.says)
			}
		})
	}
	for _, r := range demoReceived(t, g.URL, 0).Requests {
		if r.Method == "tools/call" && r.Tool != "received" || r.Method == "tools/list" {
			t.Errorf("the child got %s %s", r.Method, r.Tool)
		}
	}
}

// A relative child command is found in GATEWAY_CHILD_DIR, where the child
// runs, not in the gateway's own directory.
func TestRelativeCommandInChildDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := "#!/bin/sh\nexec " + gatewayBin + " demo\n"
	if err := os.WriteFile(filepath.Join(dir, "child.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, []string{"GATEWAY_CHILD_DIR=" + dir}, "--", "./child.sh")
	if r := g.WaitReady(); r.Status != "ready" {
		t.Fatalf("not ready: %+v", r)
	}
}

// A 2025 child's question parks a 2026 client's call; the retry must be
// the request again, arguments included (however the client spells them
// this time): one with other arguments is refused as one for another tool
// is, never reaching the child, and the call still waits for the right
// one.
func TestRetryIsBoundToItsArguments(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil, "--", gatewayBin, "demo", "-era", "legacy")
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	post := func(tool, params string) (int, []byte) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `",` + params + `,` + meta + `}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", tool)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	status, first := post("test_elicitation", `"arguments":{"message":"who?"}`)
	var irr struct {
		Result struct {
			ResultType    string                     `json:"resultType"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  string                     `json:"requestState"`
		} `json:"result"`
	}
	if json.Unmarshal(first, &irr); status != 200 || irr.Result.ResultType != "input_required" || len(irr.Result.InputRequests) != 1 {
		t.Fatalf("the first answer: %d %s, want input_required", status, first)
	}
	var key string
	for k := range irr.Result.InputRequests {
		key = k
	}
	keyJSON, _ := json.Marshal(key)
	retry := func(tool, args, username string) (int, []byte) {
		return post(tool, `"arguments":`+args+`,"requestState":"`+irr.Result.RequestState+`","inputResponses":{`+string(keyJSON)+
			`:{"action":"accept","content":{"username":"`+username+`","email":"e@x"}}}`)
	}
	refused := func(status int, body []byte) rpcError {
		t.Helper()
		var e rpcError
		if json.Unmarshal(body, &e); status != 400 || e.Error.Code != -32602 {
			t.Errorf("%d %s, want 400 and -32602", status, body)
		}
		return e
	}
	otherTool := refused(retry("echo", `{"message":"who?"}`, "mallory"))
	otherArgs := refused(retry("test_elicitation", `{"message":"who else?"}`, "mallory"))
	if !strings.Contains(otherArgs.Error.Message, "with other arguments") || otherArgs.Error.Data != otherTool.Error.Data {
		t.Errorf("the retry with other arguments: %+v; the one for another tool: %+v", otherArgs.Error, otherTool.Error)
	}
	// The same arguments, spelt otherwise.
	status, final := retry("test_elicitation", "{ \"message\" : \"who\\u003f\" }", "ada")
	if status != 200 || !strings.Contains(string(final), `\"username\":\"ada\"`) || strings.Contains(string(final), "mallory") {
		t.Errorf("the right retry: %d %s, want ada's answer", status, final)
	}
	calls := 0
	for _, r := range demoReceived(t, g.URL, 0).Requests {
		if r.Method == "tools/call" && r.Tool != "received" {
			calls++
		}
	}
	if calls != 1 {
		t.Errorf("the child got %d calls, want the one parked", calls)
	}
}

// A 2025 client whose one open request (GATEWAY_MAX_STREAMS_PER_CLIENT=1)
// is a call waiting for its answer to the child's question answers it,
// and the call ends with that answer; it cancels its next call, with a
// rate that leaves it a call for each: only requests take a place or a
// token, and what the client owes its calls or its session (the answer,
// notifications/initialized, the cancellation) is let through.
func TestAnswersAndCancellationsWithinLimits(t *testing.T) {
	t.Parallel()
	// Four calls, for good: initialize and three tools/call.
	g := startGateway(t, []string{"GATEWAY_MAX_STREAMS_PER_CLIENT=1", "GATEWAY_RATE_LIMIT=0.001", "GATEWAY_RATE_BURST=4"})
	ctx := context.Background()
	send := func(sid, body string) *http.Response {
		t.Helper()
		return postInSession(t, ctx, g.URL, sid, body)
	}
	accepted := func(what string, resp *http.Response) {
		t.Helper()
		if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s: %d %s, want 202", what, resp.StatusCode, b)
		}
	}
	init := send("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"e","version":"1"}}}`)
	io.Copy(io.Discard, init.Body)
	sid := init.Header.Get("Mcp-Session-Id")
	accepted("notifications/initialized", send(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`))

	call := newSSEReader(send(sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_elicitation","arguments":{"message":"who?"}}}`).Body)
	var question struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if ev := call.next(); json.Unmarshal([]byte(ev), &question) != nil || question.Method != "elicitation/create" {
		t.Fatalf("the call's first event: %q, want the child's question", ev)
	}
	accepted("the answer", send(sid, `{"jsonrpc":"2.0","id":`+string(question.ID)+`,"result":{"action":"accept","content":{"username":"ada","email":"ada@example.com"}}}`))
	if final := call.next(); !strings.Contains(final, `"id":1,"result"`) || !strings.Contains(final, `\"username\":\"ada\"`) {
		t.Errorf("the call's answer: %s, want ada's", final)
	}
	// Its place is free once its answer is read.
	if resp := send(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`); resp.StatusCode != http.StatusOK {
		t.Errorf("the next call: %d, want 200", resp.StatusCode)
	} else {
		io.Copy(io.Discard, resp.Body)
	}

	slow := newSSEReader(send(sid, fmt.Sprintf(demoSlowWith, "slow", 60000, 20)).Body)
	if ev := slow.next(); !strings.Contains(ev, "notifications/progress") {
		t.Fatalf("the slow call's first event: %q, want progress", ev)
	}
	accepted("the cancellation", send(sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow","reason":"stop"}}`))
	for ev := slow.next(); ev != ""; ev = slow.next() {
		if strings.Contains(ev, `"result"`) {
			t.Errorf("the cancelled call's stream: %s, want no result", ev)
		}
	}
	// The rate still counts calls.
	var e rpcError
	resp := send(sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
	if json.NewDecoder(resp.Body).Decode(&e); resp.StatusCode != http.StatusTooManyRequests || e.Error.Data.Reason != "rate_limited" {
		t.Errorf("a fourth call: %d %+v, want 429, rate_limited", resp.StatusCode, e.Error)
	}
}
