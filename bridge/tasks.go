package bridge

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// maxTaskHomes bounds the tasks whose worker the bridge remembers; past it
// the oldest is forgotten.
const maxTaskHomes = 16384

// maxTaskID bounds a task id the bridge remembers: ids are the child's, and
// a longer one is not worth its memory (its requests go to any worker).
const maxTaskID = 256

// taskHomes remembers which worker's child created each task, so that the
// task's requests (tasks/get, tasks/update, tasks/cancel, 2025-11-25's
// tasks/result) and a listen for its notifications reach the child that
// holds it: a task lives in one child, and with several workers the least
// loaded one would otherwise answer that it knows no such task. (Between
// replicas, Mcp-Name carries the task id for a balancer to route on.) A
// task it does not know, or no longer, goes to any worker; so does every
// task with one worker, where nothing is recorded.
type taskHomes struct {
	mu     sync.Mutex
	homes  map[string]*worker
	order  []string  // ids in the order they were recorded, oldest first
	warned time.Time // when a clash of ids was last logged at warn
}

// clashWarnEvery bounds the warnings about task ids two children minted
// alike: a server that counts its tasks clashes on every task.
const clashWarnEvery = time.Minute

// record notes that w's child created the task a tools/call answer names.
func (t *taskHomes) record(w *worker, m *jsonrpc.Message) {
	id, ok := mcp.CreatedTask(m.Result)
	if !ok || id == "" || len(id) > maxTaskID {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.homes == nil {
		t.homes = make(map[string]*worker)
	}
	home, known := t.homes[id]
	if !known {
		t.order = append(t.order, id)
	}
	if known && home != w {
		// Two children minted the same id: the older task can no longer
		// be told apart, and its requests go to the newer one's child.
		level := slog.LevelDebug
		if now := time.Now(); now.Sub(t.warned) >= clashWarnEvery {
			t.warned, level = now, slog.LevelWarn
		}
		w.log.Log(context.Background(), level, "two children created tasks with the same id; requests for it go to the newer one's: a server whose task ids are not unique across processes needs GATEWAY_WORKERS=1 (logged at warn once a minute)",
			"task_id", clipped(id), "worker_before", home.index)
	}
	t.homes[id] = w
	for len(t.order) > maxTaskHomes {
		delete(t.homes, t.order[0])
		t.order[0] = ""
		t.order = t.order[1:]
	}
}

// home is the worker whose child holds task id; nil when unknown.
func (t *taskHomes) home(id string) *worker {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.homes[id]
}

// homeOf is the worker whose child holds the task req is about: a tasks/*
// request's taskId, or the first known of a listen's taskIds. nil when
// there is only one worker, or req names no task the bridge knows.
func (b *Bridge) homeOf(req *mcp.Request) *worker {
	if len(b.workers) < 2 {
		return nil
	}
	if mcp.IsTaskMethod(req.Method) {
		id, _ := req.String(mcp.ParamTaskID)
		return b.tasks.home(id)
	}
	if req.Method == mcp.MethodListen {
		notes, _ := req.Param(mcp.ParamNotifications)
		for _, id := range mcp.ListenTaskIDs(notes) {
			if w := b.tasks.home(id); w != nil {
				return w
			}
		}
	}
	return nil
}
