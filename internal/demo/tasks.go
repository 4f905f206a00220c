package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// The tasks extension (io.modelcontextprotocol/tasks), served under
// 2026-07-28 to clients that declare it: test_tool_with_task runs as a task
// that outlives the request that created it, polled with tasks/get.

const tasksExtension = "io.modelcontextprotocol/tasks"

type task struct {
	id      string
	created time.Time
	mu      sync.Mutex
	status  string // working, completed, cancelled
	updated time.Time
	result  any
	stop    context.CancelFunc
}

func (r *request) hasExtension(name string) bool {
	var ext map[string]json.RawMessage
	_ = json.Unmarshal(r.caps["extensions"], &ext)
	_, ok := ext[name]
	return ok
}

// taskTool runs for duration_ms; as a task when the client can take one.
func (s *server) taskTool(ctx context.Context, r *request, args json.RawMessage) (any, *rpcError) {
	a := struct {
		DurationMS int `json:"duration_ms"`
	}{200}
	_ = json.Unmarshal(args, &a)
	d := time.Duration(a.DurationMS) * time.Millisecond
	if !r.modern || !r.hasExtension(tasksExtension) {
		if !sleepCtx(ctx, d) {
			return nil, nil
		}
		return text("done without a task"), nil
	}
	// The task's work is tied to the server, not to the request: the
	// request ends as soon as the task exists.
	work, stop := context.WithCancel(s.life)
	s.mu.Lock()
	s.nextTask++
	t := &task{id: "task-" + strconv.Itoa(s.nextTask), created: time.Now(), status: "working", stop: stop}
	t.updated = t.created
	s.tasks[t.id] = t
	s.mu.Unlock()
	s.wg.Go(func() {
		defer stop()
		ok := sleepCtx(work, d)
		t.mu.Lock()
		defer t.mu.Unlock()
		if ok && t.status == "working" {
			t.status, t.updated = "completed", time.Now()
			t.result = text(fmt.Sprintf("task %s done after %v", t.id, d))
		}
	})
	out := t.view()
	out["resultType"] = "task"
	return out, nil
}

// view is the task as tasks/get shows it.
func (t *task) view() map[string]any {
	t.mu.Lock()
	defer t.mu.Unlock()
	v := map[string]any{
		"taskId": t.id, "status": t.status, "ttlMs": 600000, "pollIntervalMs": 50,
		"createdAt": t.created.UTC().Format(time.RFC3339Nano), "lastUpdatedAt": t.updated.UTC().Format(time.RFC3339Nano),
	}
	if t.result != nil {
		v["result"] = t.result
	}
	return v
}

func (s *server) taskByParams(r *request) (*task, *rpcError) {
	var p struct {
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal(r.params, &p)
	s.mu.Lock()
	t := s.tasks[p.TaskID]
	s.mu.Unlock()
	if t == nil {
		return nil, invalidParams("unknown task "+strconv.Quote(p.TaskID), nil)
	}
	return t, nil
}

func (s *server) tasksGet(_ context.Context, r *request) (any, *rpcError) {
	t, rerr := s.taskByParams(r)
	if rerr != nil {
		return nil, rerr
	}
	return t.view(), nil
}

func (s *server) tasksCancel(_ context.Context, r *request) (any, *rpcError) {
	t, rerr := s.taskByParams(r)
	if rerr != nil {
		return nil, rerr
	}
	t.mu.Lock()
	if t.status == "working" {
		t.status, t.updated = "cancelled", time.Now()
	}
	t.mu.Unlock()
	t.stop()
	return map[string]any{}, nil
}

func (s *server) tasksUpdate(_ context.Context, r *request) (any, *rpcError) {
	if _, rerr := s.taskByParams(r); rerr != nil {
		return nil, rerr
	}
	return map[string]any{}, nil
}
