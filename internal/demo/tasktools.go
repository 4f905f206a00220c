package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// The conformance suite's fixtures for the tasks extension. Each tool's
// work is written once, as a job, and runs as a task for a request that
// declared the extension, or inside the request otherwise.

// askFunc gets the client's answers to questions. When it returns no
// answers, the job returns what it returned instead: an
// InputRequiredResult for a modern request to send back, an error, or
// nothing when the work was stopped.
type askFunc func(ctx context.Context, reqs []inputRequest) (answers map[string]json.RawMessage, instead any, rerr *rpcError)

type job func(ctx context.Context, ask askFunc) (any, *rpcError)

// Whether a tool can run without a task.
const (
	taskOptional = "optional" // runs in the request for a client that takes no tasks
	taskRequired = "required" // refused to such a client, with -32021
)

// runJob serves a task-supporting tool. Inside the request, questions go
// the usual way for the request's era (input_required rounds or the
// demo's own requests); in a task they park it in input_required until
// tasks/update brings the answers.
func (s *server) runJob(ctx context.Context, r *request, support string, j job) (any, *rpcError) {
	if !r.takesTasks() {
		if support == taskRequired {
			return nil, missingExtension()
		}
		return j(ctx, func(ctx context.Context, reqs []inputRequest) (map[string]json.RawMessage, any, *rpcError) {
			return s.gather(ctx, r, reqs, "")
		})
	}
	return s.startTask(func(ctx context.Context, t *task) (any, *rpcError) {
		return j(ctx, func(ctx context.Context, reqs []inputRequest) (map[string]json.RawMessage, any, *rpcError) {
			for _, q := range reqs {
				if !r.has(q.capability) {
					return nil, nil, needsCapability(q.capability)
				}
			}
			return t.ask(ctx, reqs), nil, nil
		})
	})
}

// taskTools are offered to 2026-07-28 requests only: the extension does
// not exist in the 2025 revisions, and a 2025 client's tool list stays as
// it was.
func (s *server) taskTools() []tool {
	mk := func(name, desc string, schema map[string]any, support string, run func(json.RawMessage) (job, *rpcError)) tool {
		return tool{name: name, description: desc, schema: schema, eras: "modern",
			run: func(ctx context.Context, r *request, args json.RawMessage) (any, *rpcError) {
				j, rerr := run(args)
				if rerr != nil {
					return nil, rerr
				}
				return s.runJob(ctx, r, support, j)
			}}
	}
	return []tool{
		{name: "greet", description: "Returns a greeting at once; never a task.", eras: "modern",
			schema: object(map[string]any{"name": str("who to greet")}, "name"), run: greet},
		mk("slow_compute", "Works for the given seconds (0: at once), as a task when the client declares the tasks extension; cancellable.",
			object(map[string]any{
				"seconds": map[string]any{"type": "number", "description": "how long to work, at most 3600"},
				"label":   str("a name for the work, repeated in the result"),
			}, "seconds"), taskOptional, slowCompute),
		mk("failing_job", "Runs only as a task, and after a second reports a tool error (isError), so the task completes.",
			object(map[string]any{}), taskRequired, func(json.RawMessage) (job, *rpcError) { return failingJob, nil }),
		mk("protocol_error_job", "Fails with a protocol error (a JSON-RPC error), so its task fails.",
			object(map[string]any{}), taskOptional, func(json.RawMessage) (job, *rpcError) { return protocolErrorJob, nil }),
		mk("confirm_delete", "Asks the user to confirm before it pretends to delete a file (nothing is deleted); as a task it waits in input_required.",
			object(map[string]any{"filename": str("the file to pretend to delete")}, "filename"), taskOptional, confirmDelete),
		mk("multi_input", "Asks two questions at once, which may be answered one at a time.",
			object(map[string]any{}), taskOptional, func(json.RawMessage) (job, *rpcError) { return multiInput, nil }),
	}
}

func greet(_ context.Context, _ *request, args json.RawMessage) (any, *rpcError) {
	var a struct {
		Name string `json:"name"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	return text("Hello, " + a.Name + "!"), nil
}

func slowCompute(args json.RawMessage) (job, *rpcError) {
	var a struct {
		Seconds float64 `json:"seconds"`
		Label   string  `json:"label"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	if a.Seconds < 0 || a.Seconds > 3600 {
		return nil, invalidParams("seconds must be between 0 and 3600", nil)
	}
	d := time.Duration(a.Seconds * float64(time.Second))
	return func(ctx context.Context, _ askFunc) (any, *rpcError) {
		if !sleepCtx(ctx, d) {
			return nil, nil
		}
		return text(fmt.Sprintf("computed %q in %v", a.Label, d)), nil
	}, nil
}

func failingJob(ctx context.Context, _ askFunc) (any, *rpcError) {
	if !sleepCtx(ctx, time.Second) {
		return nil, nil
	}
	// A tool that ran and failed: a result, not a protocol error.
	return map[string]any{"isError": true, "content": []map[string]any{{"type": "text", "text": "failing_job failed, as it always does"}}}, nil
}

func protocolErrorJob(context.Context, askFunc) (any, *rpcError) {
	return nil, &rpcError{Code: jsonrpc.CodeInternalError, Message: "protocol_error_job broke inside the server, as it always does"}
}

func confirmDelete(args json.RawMessage) (job, *rpcError) {
	var a struct {
		Filename string `json:"filename"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	if a.Filename == "" {
		return nil, invalidParams("filename is required", nil)
	}
	return func(ctx context.Context, ask askFunc) (any, *rpcError) {
		q := elicitRequest("confirm", "Delete "+a.Filename+"?", object(map[string]any{"confirm": map[string]any{"type": "boolean"}}, "confirm"))
		answers, instead, rerr := ask(ctx, []inputRequest{q})
		if answers == nil {
			return instead, rerr
		}
		if action, got := elicited(answers["confirm"]); action != "accept" || got["confirm"] != true {
			return text("Kept " + a.Filename + "."), nil
		}
		return text("Deleted " + a.Filename + " (not really: this is a fixture)."), nil
	}, nil
}

func multiInput(ctx context.Context, ask askFunc) (any, *rpcError) {
	answers, instead, rerr := ask(ctx, []inputRequest{
		elicitRequest("name", "What is your name?", object(map[string]any{"name": map[string]any{"type": "string"}}, "name")),
		elicitRequest("confirm", "Shall we go on?", object(map[string]any{"confirm": map[string]any{"type": "boolean"}}, "confirm")),
	})
	if answers == nil {
		return instead, rerr
	}
	_, name := elicited(answers["name"])
	_, confirm := elicited(answers["confirm"])
	return text(fmt.Sprintf("Received name=%v and confirm=%v.", name["name"], confirm["confirm"])), nil
}

// taskTool is test_tool_with_task. It works for duration_ms (default 200),
// as a task when the client declares the extension. Called without
// duration_ms by a client that can answer questions, it first asks for
// the user's name in input_required rounds, and only then starts the task,
// whose result greets them: the suite's composition of the two.
func (s *server) taskTool(ctx context.Context, r *request, args json.RawMessage) (any, *rpcError) {
	var a struct {
		DurationMS *intArg `json:"duration_ms"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	d := 200 * time.Millisecond
	if a.DurationMS != nil {
		d = time.Duration(*a.DurationMS) * time.Millisecond
	}
	if !r.takesTasks() {
		if !sleepCtx(ctx, d) {
			return nil, nil
		}
		return text("done without a task"), nil
	}
	greeting := ""
	if a.DurationMS == nil && r.has("elicitation") {
		q := elicitRequest("user_name", "What is your name?", object(map[string]any{"name": map[string]any{"type": "string"}}, "name"))
		answers, result, rerr := s.gather(ctx, r, []inputRequest{q}, "")
		if answers == nil {
			return result, rerr
		}
		if _, got := elicited(answers["user_name"]); got["name"] != nil {
			greeting = fmt.Sprintf("Hello, %v! ", got["name"])
		}
	}
	return s.startTask(func(ctx context.Context, t *task) (any, *rpcError) {
		if !sleepCtx(ctx, d) {
			return nil, nil
		}
		return text(fmt.Sprintf("%stask %s done after %v", greeting, t.id, d)), nil
	})
}
