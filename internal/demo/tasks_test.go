package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/mcp"
)

// harness drives a server in-process: each request goes to handle, and
// what the server writes comes back one message per line.
type harness struct {
	t      *testing.T
	s      *server
	ctx    context.Context
	out    chan message
	nextID int
}

// lines is the server's stdout, split into messages.
type lines chan message

func (l lines) Write(b []byte) (int, error) {
	for line := range bytes.Lines(b) {
		var m message
		if err := json.Unmarshal(line, &m); err != nil {
			return 0, err
		}
		l <- m
	}
	return len(b), nil
}

func newHarness(t *testing.T, era string) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan message, 64)
	s, err := newServer(ctx, era, faults{}, lines(out), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// Stopping the server stops every task's work; Wait shows that none
	// is left behind.
	t.Cleanup(func() {
		cancel()
		s.wg.Wait()
	})
	return &harness{t: t, s: s, ctx: ctx, out: out}
}

// fakeClock is the task table's clock, moved by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

var withTasks = map[string]any{"elicitation": map[string]any{}, "extensions": map[string]any{mcp.TasksExtension: map[string]any{}}}

type reply struct {
	Result map[string]any
	Error  *struct {
		Code    int            `json:"code"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data"`
	}
}

// call sends a 2026-07-28 request declaring caps and returns its answer.
func (h *harness) call(method string, caps map[string]any, params map[string]any) reply {
	h.t.Helper()
	h.nextID++
	p := map[string]any{"_meta": map[string]any{mcp.MetaProtocolVersion: mcp.Modern, mcp.MetaClientCapabilities: caps}}
	for k, v := range params {
		p[k] = v
	}
	raw, _ := json.Marshal(p)
	id := json.RawMessage(fmt.Sprint(h.nextID))
	h.s.handle(h.ctx, &message{JSONRPC: "2.0", ID: id, Method: method, Params: raw})
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case m := <-h.out:
			if string(m.ID) != string(id) {
				continue
			}
			var r reply
			if m.Result != nil {
				_ = json.Unmarshal(m.Result, &r.Result)
			} else {
				_ = json.Unmarshal(m.Error, &r.Error)
			}
			return r
		case <-deadline.C:
			h.t.Fatalf("no answer to %s", method)
		}
	}
}

func (h *harness) tool(caps map[string]any, name string, args map[string]any) reply {
	h.t.Helper()
	return h.call("tools/call", caps, map[string]any{"name": name, "arguments": args})
}

// created checks a CreateTaskResult and returns its task from the table.
func (h *harness) created(r reply) *task {
	h.t.Helper()
	if r.Result["resultType"] != "task" || r.Result["status"] != taskWorking {
		h.t.Fatalf("got %+v, want a CreateTaskResult for a working task", r)
	}
	for _, key := range []string{"result", "error", "inputRequests", "requestState", "ttl", "pollInterval"} {
		if _, ok := r.Result[key]; ok {
			h.t.Errorf("CreateTaskResult carries %s: %v", key, r.Result)
		}
	}
	if r.Result["ttlMs"] != float64(h.s.tasks.ttl.Milliseconds()) || r.Result["pollIntervalMs"] != float64(50) {
		h.t.Errorf("ttlMs %v, pollIntervalMs %v", r.Result["ttlMs"], r.Result["pollIntervalMs"])
	}
	t := h.s.tasks.get(r.Result["taskId"].(string))
	if t == nil {
		h.t.Fatalf("task %v is not in the table", r.Result["taskId"])
	}
	return t
}

func (h *harness) get(id string) reply {
	h.t.Helper()
	return h.call("tasks/get", withTasks, map[string]any{"taskId": id})
}

// finished waits for the task's work to return and reads the task.
func (h *harness) finished(t *task) map[string]any {
	h.t.Helper()
	select {
	case <-t.done:
	case <-time.After(10 * time.Second):
		h.t.Fatalf("task %s did not finish", t.id)
	}
	r := h.get(t.id)
	if r.Result["resultType"] != "complete" {
		h.t.Errorf("tasks/get: %+v, want resultType complete", r)
	}
	return r.Result
}

// waitAsking polls tasks/get until the task asks for n answers, as a
// client does.
func (h *harness) waitAsking(t *task, n int) map[string]any {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := h.get(t.id).Result
		if asks, _ := r["inputRequests"].(map[string]any); r["status"] == taskInputRequired && len(asks) == n {
			return asks
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("task %s never asked for %d answers: %v", t.id, n, r)
		}
	}
}

func TestTaskOutcomes(t *testing.T) {
	h := newHarness(t, "modern")
	if r := h.tool(withTasks, "greet", map[string]any{"name": "World"}); r.Result["resultType"] != "complete" || !strings.Contains(fmt.Sprint(r.Result["content"]), "Hello, World!") {
		t.Errorf("greet: %+v", r)
	}

	done := h.created(h.tool(withTasks, "slow_compute", map[string]any{"seconds": 0, "label": "x"}))
	if got := h.finished(done); got["status"] != taskCompleted || !strings.Contains(fmt.Sprint(got["result"]), `computed "x"`) {
		t.Errorf("slow_compute task: %v", got)
	}

	failed := h.created(h.tool(withTasks, "protocol_error_job", nil))
	got := h.finished(failed)
	e, _ := got["error"].(map[string]any)
	if _, ok := got["result"]; ok || got["status"] != taskFailed || e["code"] != float64(-32603) || e["message"] == "" {
		t.Errorf("protocol_error_job task: %v", got)
	}

	stopped := h.created(h.tool(withTasks, "slow_compute", map[string]any{"seconds": 60}))
	for range 2 { // the second time, the task has ended already
		if r := h.call("tasks/cancel", withTasks, map[string]any{"taskId": stopped.id}); r.Error != nil || len(r.Result) != 1 || r.Result["resultType"] != "complete" {
			t.Errorf("tasks/cancel: %+v, want an empty ack", r)
		}
	}
	if got := h.finished(stopped); got["status"] != taskCancelled {
		t.Errorf("cancelled task: %v", got)
	}

	if r := h.get("task-nonexistent"); r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("tasks/get of an unknown task: %+v", r)
	}
}

// A task's questions are answered with tasks/update, one at a time if the
// client likes; answers to questions it did not ask change nothing.
func TestTaskQuestions(t *testing.T) {
	h := newHarness(t, "modern")
	tk := h.created(h.tool(withTasks, "multi_input", nil))
	asks := h.waitAsking(tk, 2)
	if q, _ := asks["name"].(map[string]any); q["method"] != "elicitation/create" {
		t.Errorf("inputRequests = %v", asks)
	}
	update := func(answers map[string]any) {
		t.Helper()
		if r := h.call("tasks/update", withTasks, map[string]any{"taskId": tk.id, "inputResponses": answers}); r.Error != nil || len(r.Result) != 1 {
			t.Errorf("tasks/update: %+v, want an empty ack", r)
		}
	}
	update(map[string]any{"unknown": map[string]any{}})
	update(map[string]any{"name": map[string]any{"action": "accept", "content": map[string]any{"name": "Ann"}}})
	if asks := h.waitAsking(tk, 1); asks["confirm"] == nil {
		t.Errorf("after one answer the task asks %v, want confirm only", asks)
	}
	update(map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}})
	if got := h.finished(tk); got["status"] != taskCompleted || !strings.Contains(fmt.Sprint(got["result"]), "name=Ann and confirm=true") {
		t.Errorf("multi_input task: %v", got)
	}
	if r := h.call("tasks/update", withTasks, map[string]any{"taskId": tk.id, "inputResponses": "yes"}); r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("tasks/update with malformed inputResponses: %+v", r)
	}
}

// Without the extension nothing is a task: tasks/* are refused with
// -32021, a tool that can run in the request does, and one that cannot is
// refused.
func TestTasksNeedTheExtension(t *testing.T) {
	h := newHarness(t, "modern")
	plain := map[string]any{"elicitation": map[string]any{}}
	for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		r := h.call(method, plain, map[string]any{"taskId": "t", "inputResponses": map[string]any{}})
		if r.Error == nil || r.Error.Code != -32021 || r.Error.Data["requiredCapabilities"] == nil {
			t.Errorf("%s without the extension: %+v", method, r)
		}
	}
	if r := h.tool(plain, "slow_compute", map[string]any{"seconds": 0}); r.Result["resultType"] != "complete" || r.Result["taskId"] != nil {
		t.Errorf("slow_compute without the extension: %+v", r)
	}
	if r := h.tool(plain, "failing_job", nil); r.Error == nil || r.Error.Code != -32021 {
		t.Errorf("failing_job without the extension: %+v", r)
	}
	// confirm_delete asks in input_required rounds instead.
	if r := h.tool(plain, "confirm_delete", map[string]any{"filename": "f"}); r.Result["resultType"] != "input_required" {
		t.Errorf("confirm_delete without the extension: %+v", r)
	}
}

// A task is gone after its ttl, and its work is stopped.
func TestTasksExpire(t *testing.T) {
	h := newHarness(t, "modern")
	clock := &fakeClock{now: time.Now()}
	h.s.tasks = newTaskTable(time.Minute, maxTasks, clock.Now)
	running := h.created(h.tool(withTasks, "slow_compute", map[string]any{"seconds": 600}))
	ended := h.created(h.tool(withTasks, "slow_compute", map[string]any{"seconds": 0}))
	h.finished(ended)
	clock.advance(time.Minute - time.Millisecond)
	if r := h.get(running.id); r.Result["status"] != taskWorking {
		t.Fatalf("before its ttl the task is %+v", r)
	}
	clock.advance(time.Millisecond)
	for _, tk := range []*task{running, ended} {
		if r := h.get(tk.id); r.Error == nil || r.Error.Code != -32602 {
			t.Errorf("after its ttl, tasks/get %s = %+v, want -32602", tk.id, r)
		}
	}
	select {
	case <-running.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the expired task's work goes on")
	}
}

// A full table forgets its oldest finished task to make room, and refuses
// a new task when every task it holds is unfinished.
func TestTaskTableIsBounded(t *testing.T) {
	h := newHarness(t, "modern")
	h.s.tasks = newTaskTable(time.Minute, 2, time.Now)
	first := h.created(h.tool(withTasks, "slow_compute", map[string]any{"seconds": 600}))
	h.created(h.tool(withTasks, "slow_compute", map[string]any{"seconds": 600}))
	if r := h.tool(withTasks, "slow_compute", map[string]any{"seconds": 600}); r.Error == nil || r.Error.Code != -32603 {
		t.Fatalf("a third task in a table of two: %+v", r)
	}
	h.call("tasks/cancel", withTasks, map[string]any{"taskId": first.id})
	h.created(h.tool(withTasks, "slow_compute", map[string]any{"seconds": 600}))
	if r := h.get(first.id); r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("the finished task was kept: %+v", r)
	}
}

// test_tool_with_task without duration_ms asks for a name in input_required
// rounds, then starts a task that greets; with duration_ms, or for a client
// that cannot answer, it starts its task at once, as it always did.
func TestToolWithTask(t *testing.T) {
	h := newHarness(t, "modern")
	r := h.tool(withTasks, "test_tool_with_task", map[string]any{})
	asks, _ := r.Result["inputRequests"].(map[string]any)
	if r.Result["resultType"] != "input_required" || asks["user_name"] == nil || r.Result["taskId"] != nil {
		t.Fatalf("round 1: %+v", r)
	}
	r = h.call("tools/call", withTasks, map[string]any{"name": "test_tool_with_task", "arguments": map[string]any{},
		"inputResponses": map[string]any{"user_name": map[string]any{"action": "accept", "content": map[string]any{"name": "Alice"}}}})
	if got := h.finished(h.created(r)); !strings.Contains(fmt.Sprint(got["result"]), "Hello, Alice! task") {
		t.Errorf("the task's result: %v", got)
	}

	tasksOnly := map[string]any{"extensions": map[string]any{mcp.TasksExtension: map[string]any{}}}
	for _, caps := range []map[string]any{tasksOnly, withTasks} {
		args := map[string]any{"duration_ms": 1}
		if caps["elicitation"] == nil {
			args = map[string]any{}
		}
		if got := h.finished(h.created(h.tool(caps, "test_tool_with_task", args))); !strings.Contains(fmt.Sprint(got["result"]), "done after") {
			t.Errorf("a timed task: %v", got)
		}
	}
	if r := h.tool(map[string]any{}, "test_tool_with_task", map[string]any{"duration_ms": 1}); !strings.Contains(fmt.Sprint(r.Result["content"]), "done without a task") {
		t.Errorf("without the extension: %+v", r)
	}
}

// The fixtures are 2026-07-28 only: a 2025 client's tools are unchanged.
func TestTaskToolsAreModernOnly(t *testing.T) {
	s, err := newServer(context.Background(), "dual", faults{}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	list := func(modern bool) string {
		res, _ := s.toolsList(context.Background(), &request{modern: modern})
		b, _ := json.Marshal(res)
		return string(b)
	}
	for _, name := range []string{"greet", "slow_compute", "failing_job", "protocol_error_job", "confirm_delete", "multi_input"} {
		if q := `"name":"` + name + `"`; !strings.Contains(list(true), q) || strings.Contains(list(false), q) {
			t.Errorf("%s: listed modern %v, legacy %v; want modern only", name, strings.Contains(list(true), q), strings.Contains(list(false), q))
		}
	}
}
