package mcp

import (
	"bytes"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// maxTaskResult bounds the result CreatedTask looks into: a CreateTaskResult
// is a few hundred bytes, and any tools/call result may be read, so a large
// one is not scanned for a task it cannot be.
const maxTaskResult = 64 << 10

// CreatedTask is the id of the task a tools/call result says the server
// created: a 2026-07-28 CreateTaskResult (resultType "task", taskId beside
// it) or a 2025-11-25 one (the task under "task"). ok is false for any
// other result.
func CreatedTask(result []byte) (id string, ok bool) {
	if len(result) > maxTaskResult || len(result) == 0 || result[0] != '{' {
		return "", false
	}
	if ResultType(result) == ResultTask {
		return String(jsonrpc.Get(result, ParamTaskID))
	}
	if task := jsonrpc.Get(result, "task"); len(task) > 0 && task[0] == '{' {
		return String(jsonrpc.Get(task, ParamTaskID))
	}
	return "", false
}

// ListenTaskIDs is the taskIds a subscriptions/listen's params.notifications
// names (the tasks extension's filter member); nil when it names none or
// is not an array of strings.
func ListenTaskIDs(notifications []byte) []string {
	ids := jsonrpc.Get(notifications, "taskIds")
	if len(ids) == 0 || ids[0] != '[' {
		return nil
	}
	spans, err := jsonrpc.Elements(ids)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(spans))
	for _, sp := range spans {
		if id, ok := String(ids[sp.Start:sp.End]); ok {
			out = append(out, id)
		}
	}
	return out
}

// withoutTasks is the capabilities caps without those that enable the
// other era's tasks: 2025-11-25's tasks member and the tasks extension.
// The two have different methods and shapes, which the gateway does not
// translate, and a server "MUST NOT treat this capability as enabling
// tasks" across them (SEP-2663). caps comes back as it was when it has
// neither.
func withoutTasks(caps []byte) []byte {
	if !bytes.Contains(caps, []byte("tasks")) {
		return caps
	}
	members, err := jsonrpc.Members(caps)
	if err != nil {
		return caps
	}
	kept := make([]member, 0, len(members))
	changed := false
	for _, m := range members {
		v := caps[m.Value.Start:m.Value.End]
		switch m.Key {
		case "tasks":
			changed = true
			continue
		case "extensions":
			if ext, ok := withoutKey(v, TasksExtension); ok {
				v, changed = ext, true
			}
		}
		kept = append(kept, member{m.Key, v})
	}
	if !changed {
		return caps
	}
	return object(kept...)
}

// withoutKey is obj without its member key; ok is false when obj is not an
// object with that member.
func withoutKey(obj []byte, key string) ([]byte, bool) {
	members, err := jsonrpc.Members(obj)
	if err != nil {
		return nil, false
	}
	kept := make([]member, 0, len(members))
	for _, m := range members {
		if m.Key != key {
			kept = append(kept, member{m.Key, obj[m.Value.Start:m.Value.End]})
		}
	}
	if len(kept) == len(members) {
		return nil, false
	}
	return object(kept...), true
}
