package demo

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// The tasks extension (io.modelcontextprotocol/tasks, SEP-2663), served
// under 2026-07-28 to requests that declare it. A task is work that
// outlives the tools/call that started it: the call answers at once with a
// CreateTaskResult, and the client polls tasks/get (which inlines the
// result, the error or the open questions), answers questions with
// tasks/update and stops the work with tasks/cancel. The fixtures that
// create tasks are in tasktools.go.

const (
	// taskTTL is how long a task is kept from its creation, finished or
	// not; its work is stopped then too, so nothing outlives it.
	taskTTL          = 10 * time.Minute
	taskPollInterval = 50 * time.Millisecond
	// maxTasks bounds the table: a client that creates tasks and never
	// looks at them again cannot make the demo grow without end.
	maxTasks = 1000
)

// Task statuses.
const (
	taskWorking       = "working"
	taskInputRequired = "input_required"
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
)

func (r *request) hasExtension(name string) bool {
	var ext map[string]json.RawMessage
	_ = json.Unmarshal(r.caps["extensions"], &ext)
	_, ok := ext[name]
	return ok
}

// takesTasks says whether the request may be answered with a task: the
// spec forbids a CreateTaskResult to a request that did not declare the
// extension, and the extension exists only in 2026-07-28.
func (r *request) takesTasks() bool {
	return r.modern && r.hasExtension(mcp.TasksExtension)
}

// missingExtension is the error for a client that must declare the tasks
// extension for what it asked (SEP-2575's Missing Required Client
// Capability, naming the extension).
func missingExtension() *rpcError {
	return &rpcError{Code: mcp.CodeMissingCapability, Message: "this needs the client's " + mcp.TasksExtension + " extension",
		Data: map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{mcp.TasksExtension: map[string]any{}}}}}
}

type task struct {
	id      string
	created time.Time
	ttl     time.Duration
	now     func() time.Time
	stop    context.CancelFunc // ends the task's work
	done    chan struct{}      // closed when the work has returned

	mu       sync.Mutex
	status   string
	updated  time.Time
	result   any       // when completed
	err      *rpcError // when failed
	asking   []inputRequest
	answers  map[string]json.RawMessage
	answered chan struct{} // closed when the last open question is answered
}

// taskTable holds the server's tasks. Expired tasks are dropped (and their
// work stopped) whenever the table is used, and a full table makes room by
// forgetting its oldest finished task.
type taskTable struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu   sync.Mutex
	byID map[string]*task
}

func newTaskTable(ttl time.Duration, max int, now func() time.Time) *taskTable {
	return &taskTable{ttl: ttl, max: max, now: now, byID: map[string]*task{}}
}

// add makes a task whose work ends with stop, or reports that the table is
// full of unfinished tasks.
func (tt *taskTable) add(stop context.CancelFunc) (*task, bool) {
	now := tt.now()
	t := &task{id: "task-" + rand.Text(), created: now, updated: now, ttl: tt.ttl, now: tt.now, stop: stop, done: make(chan struct{}), status: taskWorking}
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.expireLocked(now)
	if len(tt.byID) >= tt.max && !tt.evictLocked() {
		return nil, false
	}
	tt.byID[t.id] = t
	return t, true
}

func (tt *taskTable) get(id string) *task {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.expireLocked(tt.now())
	return tt.byID[id]
}

func (tt *taskTable) expireLocked(now time.Time) {
	for id, t := range tt.byID {
		if now.Sub(t.created) >= t.ttl {
			delete(tt.byID, id)
			t.stop()
		}
	}
}

// evictLocked forgets the oldest finished task. Unfinished ones are kept:
// a client may still be polling them.
func (tt *taskTable) evictLocked() bool {
	var oldest *task
	for _, t := range tt.byID {
		if t.finished() && (oldest == nil || t.created.Before(oldest.created)) {
			oldest = t
		}
	}
	if oldest == nil {
		return false
	}
	delete(tt.byID, oldest.id)
	return true
}

func (t *task) finished() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.finishedLocked()
}

func (t *task) finishedLocked() bool {
	return t.status == taskCompleted || t.status == taskFailed || t.status == taskCancelled
}

// startTask runs work as a new task and answers with the CreateTaskResult.
// The task is in the table before the answer is sent, so a tasks/get that
// follows it at once finds the task. The work runs under the server's
// lifetime, not the request's, and at most for the task's ttl.
func (s *server) startTask(work func(ctx context.Context, t *task) (any, *rpcError)) (any, *rpcError) {
	ctx, stop := context.WithTimeout(s.life, s.tasks.ttl)
	t, ok := s.tasks.add(stop)
	if !ok {
		stop()
		return nil, &rpcError{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the server already holds %d unfinished tasks; try again when one has ended", s.tasks.max)}
	}
	created := t.view(false)
	created["resultType"] = mcp.ResultTask
	s.wg.Go(func() {
		defer stop()
		defer close(t.done)
		res, rerr := work(ctx, t)
		t.finish(ctx, res, rerr)
	})
	return created, nil
}

// finish records how the work ended, unless the task ended already.
func (t *task) finish(ctx context.Context, res any, rerr *rpcError) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.finishedLocked() {
		return
	}
	switch {
	case ctx.Err() != nil: // stopped: expired, or the server is stopping
		t.status = taskCancelled
	case rerr != nil:
		t.status, t.err = taskFailed, rerr
	default:
		t.status, t.result = taskCompleted, res
	}
	t.asking, t.answers = nil, nil
	t.updated = t.now()
}

// ask parks the task in input_required until every question is answered
// through tasks/update. It returns nil if the work is stopped first.
func (t *task) ask(ctx context.Context, reqs []inputRequest) map[string]json.RawMessage {
	answered := make(chan struct{})
	t.mu.Lock()
	if t.finishedLocked() {
		t.mu.Unlock()
		return nil
	}
	t.status, t.updated = taskInputRequired, t.now()
	t.asking, t.answers, t.answered = reqs, map[string]json.RawMessage{}, answered
	t.mu.Unlock()
	select {
	case <-answered:
	case <-ctx.Done():
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.answers
}

// update takes answers to the task's open questions. Answers to questions
// it did not ask, or that are already answered, are ignored: tasks/update
// is acknowledged either way and its effect shows on the next tasks/get.
func (t *task) update(responses map[string]json.RawMessage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status != taskInputRequired {
		return
	}
	var open []inputRequest
	for _, q := range t.asking {
		if a, ok := responses[q.key]; ok {
			t.answers[q.key] = a
		} else {
			open = append(open, q)
		}
	}
	t.asking, t.updated = open, t.now()
	if len(open) == 0 {
		t.status = taskWorking
		close(t.answered)
	}
}

func (t *task) cancel() {
	t.mu.Lock()
	if !t.finishedLocked() {
		t.status, t.updated = taskCancelled, t.now()
		t.asking, t.answers = nil, nil
	}
	t.mu.Unlock()
	t.stop()
}

// view is the task's wire form: the Task fields for a CreateTaskResult,
// and with detailed (tasks/get's DetailedTask) the result, error or open
// questions its status calls for.
func (t *task) view(detailed bool) map[string]any {
	t.mu.Lock()
	defer t.mu.Unlock()
	v := map[string]any{
		"taskId": t.id, "status": t.status,
		"ttlMs": t.ttl.Milliseconds(), "pollIntervalMs": taskPollInterval.Milliseconds(),
		"createdAt": t.created.UTC().Format(time.RFC3339Nano), "lastUpdatedAt": t.updated.UTC().Format(time.RFC3339Nano),
	}
	if !detailed {
		return v
	}
	switch t.status {
	case taskCompleted:
		v["result"] = t.result
	case taskFailed:
		e := map[string]any{"code": t.err.Code, "message": t.err.Message}
		if t.err.Data != nil {
			e["data"] = t.err.Data
		}
		v["error"] = e
	case taskInputRequired:
		v["inputRequests"] = inputRequired(t.asking, "")["inputRequests"]
	}
	return v
}

// taskByParams finds the task a tasks/* request names. A client that did
// not declare the extension is refused before anything else.
func (s *server) taskByParams(r *request) (*task, *rpcError) {
	if !r.hasExtension(mcp.TasksExtension) {
		return nil, missingExtension()
	}
	var p struct {
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal(r.params, &p)
	t := s.tasks.get(p.TaskID)
	if t == nil {
		return nil, invalidParams("unknown or expired task "+strconv.Quote(p.TaskID), nil)
	}
	return t, nil
}

func (s *server) tasksGet(_ context.Context, r *request) (any, *rpcError) {
	t, rerr := s.taskByParams(r)
	if rerr != nil {
		return nil, rerr
	}
	return t.view(true), nil
}

// tasksCancel acknowledges with an empty result, for a finished task too:
// cancelling is idempotent, and the outcome shows on the next tasks/get.
func (s *server) tasksCancel(_ context.Context, r *request) (any, *rpcError) {
	t, rerr := s.taskByParams(r)
	if rerr != nil {
		return nil, rerr
	}
	t.cancel()
	return map[string]any{}, nil
}

func (s *server) tasksUpdate(_ context.Context, r *request) (any, *rpcError) {
	t, rerr := s.taskByParams(r)
	if rerr != nil {
		return nil, rerr
	}
	rt := r.retry()
	if rt.malformed || rt.responses == nil {
		return nil, invalidParams("inputResponses must be an object whose values are the results of the input requests", nil)
	}
	t.update(rt.responses)
	return map[string]any{}, nil
}
