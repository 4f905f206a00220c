package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/stdiomcp/gateway/mcp"
)

const maxBigBytes = 128 << 20

// tool is one tool the demo offers. eras limits it to "legacy" or "modern"
// requests; empty means both. A read-only tool says so in its annotations
// (readOnlyHint), which lets a REST client call it with GET.
type tool struct {
	name, description string
	schema            map[string]any
	output            map[string]any // the outputSchema; nil for none
	readOnly          bool
	eras              string
	run               func(ctx context.Context, r *request, args json.RawMessage) (any, *rpcError)
}

func object(props map[string]any, required ...string) map[string]any {
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func integer(desc string) map[string]any {
	return map[string]any{"type": "integer", "description": desc}
}
func number(desc string) map[string]any {
	return map[string]any{"type": "number", "description": desc}
}
func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }

// tools is the tool table, in the order tools/list reports it.
func (s *server) tools() []tool {
	noArgs := object(map[string]any{})
	ts := []tool{
		{name: "echo", description: "Returns its text.", schema: object(map[string]any{"text": str("what to echo")}, "text"), readOnly: true, run: s.echo},
		{name: "add", description: "Adds two numbers a and b.", readOnly: true,
			schema: object(map[string]any{"a": number("the first number"), "b": number("the second number")}, "a", "b"),
			output: object(map[string]any{"sum": map[string]any{"type": "number"}}, "sum"), run: s.add},
		{name: "slow", readOnly: true, description: "Works for duration_ms, sending progress every interval_ms when asked for it; stops at once when cancelled.",
			schema: object(map[string]any{"duration_ms": integer("how long to work (default 2000)"), "interval_ms": integer("how often to report progress (default 100)")}), run: s.slow},
		{name: "big", description: "Returns a text result of the given size in bytes.",
			schema: object(map[string]any{"bytes": integer(fmt.Sprintf("size of the text (at most %d)", maxBigBytes))}, "bytes"), readOnly: true, run: s.big},
		{name: "received", readOnly: true, description: "Lists the requests and cancellations this server has received, the ids of the requests it has answered, and its process id. With wait_cancelled it first waits (at most timeout_ms, default 10000) until that many cancellations have arrived; with wait_answered, until it has answered the request with that id.",
			schema: object(map[string]any{"wait_cancelled": integer("cancellations to wait for"), "wait_answered": map[string]any{"type": []string{"string", "integer"}, "description": "a request id whose answer to wait for"}, "timeout_ms": integer("the most to wait")}), run: s.received},

		// The conformance suite's fixtures.
		{name: "meta", description: "Returns the request's _meta as it arrived, and writes a line naming its traceparent to stderr.", schema: noArgs, readOnly: true, run: s.meta},
		{name: "test_simple_text", description: "Returns simple text.", schema: noArgs, readOnly: true, run: constant(text("This is a simple text response for testing."))},
		{name: "test_image_content", description: "Returns an image.", schema: noArgs, readOnly: true, run: constant(content(imageContent()))},
		{name: "test_audio_content", description: "Returns audio.", schema: noArgs, readOnly: true, run: constant(content(audioContent()))},
		{name: "test_embedded_resource", description: "Returns an embedded resource.", schema: noArgs, readOnly: true, run: constant(content(map[string]any{
			"type": "resource", "resource": map[string]any{"uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."}}))},
		{name: "test_multiple_content_types", description: "Returns text, an image and a resource.", schema: noArgs, readOnly: true, run: constant(content(
			map[string]any{"type": "text", "text": "Multiple content types test:"},
			imageContent(),
			map[string]any{"type": "resource", "resource": map[string]any{"uri": "test://mixed-content-resource", "mimeType": "application/json", "text": `{"test":"data","value":123}`}},
		))},
		{name: "test_tool_with_logging", description: "Logs three messages while it runs.", schema: noArgs, run: s.withLogging},
		{name: "test_logging_tool", description: "Logs three messages while it runs (only at a requested log level).", schema: noArgs, run: s.withLogging},
		{name: "test_tool_with_progress", description: "Reports progress 0, 50 and 100 of 100.", schema: noArgs, run: s.withProgress},
		{name: "test_error_handling", description: "Always fails.", schema: noArgs, readOnly: true, run: constant(map[string]any{
			"isError": true, "content": []map[string]any{{"type": "text", "text": "This tool intentionally returns an error for testing"}}})},
		{name: "test_sampling", description: "Asks the client to sample an LLM.", schema: object(map[string]any{"prompt": str("the prompt to send")}, "prompt"), run: s.sampling},
		{name: "test_elicitation", description: "Asks the user for input.", schema: object(map[string]any{"message": str("the message to show")}, "message"), run: s.elicitation},
		{name: "test_elicitation_sep1034_defaults", description: "Asks for input with defaults for every primitive type.", schema: noArgs, run: s.elicitDefaults},
		{name: "test_elicitation_sep1330_enums", description: "Asks for input with every enum form.", schema: noArgs, run: s.elicitEnums},
		{name: "test_missing_capability", description: "Needs the sampling capability; refuses a client that did not declare it.", schema: noArgs, run: s.missingCapability},
		{name: "test_streaming_elicitation", description: "Asks for input while it runs.", schema: noArgs, run: s.streamingElicitation},
		{name: "test_trigger_tool_change", description: "Adds or removes test_dynamic_tool and announces the change.", schema: noArgs, run: s.triggerToolChange},
		{name: "test_trigger_prompt_change", description: "Adds or removes test_dynamic_prompt and announces the change.", schema: noArgs, run: s.triggerPromptChange},
		{name: "test_trigger_resource_update", description: "Announces that a resource changed.", schema: object(map[string]any{"uri": str("the resource (default test://watched-resource)")}), run: s.triggerResourceUpdate},
		{name: "test_custom_headers", description: "Echoes arguments that a 2026-07-28 client mirrors into Mcp-Param-* headers.",
			schema: object(map[string]any{
				"region":  map[string]any{"type": "string", "description": "mirrored as Mcp-Param-Region", "x-mcp-header": "Region"},
				"count":   map[string]any{"type": "integer", "description": "mirrored as Mcp-Param-Count", "x-mcp-header": "Count"},
				"verbose": map[string]any{"type": "boolean", "description": "mirrored as Mcp-Param-Verbose", "x-mcp-header": "Verbose"},
			}, "region"), run: s.customHeaders},
		{name: "test_tool_with_task", description: "Works for duration_ms (default 200); as a task when the client declares the tasks extension.",
			schema: object(map[string]any{"duration_ms": integer("how long the work takes")}), run: s.taskTool},
		{name: "json_schema_2020_12_tool", description: "Tool with JSON Schema 2020-12 features", schema: schema2020, run: constant(text("ok"))},
	}
	ts = append(ts, s.mrtrTools()...)
	ts = append(ts, s.taskTools()...)
	s.mu.Lock()
	added := s.toolAdded
	s.mu.Unlock()
	if added {
		ts = append(ts, tool{name: "test_dynamic_tool", description: "Appears and disappears with test_trigger_tool_change.", schema: noArgs, run: constant(text("dynamic"))})
	}
	return ts
}

func (s *server) toolsList(_ context.Context, r *request) (any, *rpcError) {
	var list []map[string]any
	for _, t := range s.tools() {
		if t.eras != "" && (t.eras == "modern") != r.modern {
			continue
		}
		entry := map[string]any{"name": t.name, "description": t.description, "inputSchema": t.schema}
		if t.output != nil {
			entry["outputSchema"] = t.output
		}
		if t.readOnly {
			entry["annotations"] = map[string]any{"readOnlyHint": true}
		}
		list = append(list, entry)
	}
	return map[string]any{"tools": list}, nil
}

func (s *server) toolsCall(ctx context.Context, r *request) (any, *rpcError) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(r.params, &p); err != nil {
		return nil, invalidParams("invalid params: "+err.Error(), nil)
	}
	for _, t := range s.tools() {
		if t.name == p.Name && (t.eras == "" || (t.eras == "modern") == r.modern) {
			return t.run(ctx, r, p.Arguments)
		}
	}
	return nil, invalidParams(fmt.Sprintf("unknown tool %q", p.Name), nil)
}

func constant(v any) func(context.Context, *request, json.RawMessage) (any, *rpcError) {
	return func(context.Context, *request, json.RawMessage) (any, *rpcError) { return v, nil }
}

func text(s string) map[string]any {
	return content(map[string]any{"type": "text", "text": s})
}

func content(items ...map[string]any) map[string]any {
	return map[string]any{"content": items}
}

func (s *server) echo(_ context.Context, _ *request, args json.RawMessage) (any, *rpcError) {
	var a struct {
		Text string `json:"text"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	return text(a.Text), nil
}

// add is the tool with a structured result: what an outputSchema
// describes, next to the same as text for clients that read only content.
func (s *server) add(_ context.Context, _ *request, args json.RawMessage) (any, *rpcError) {
	var a struct {
		A *float64 `json:"a"`
		B *float64 `json:"b"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.A == nil || a.B == nil {
		return nil, invalidParams("a and b must be numbers", nil)
	}
	sum := *a.A + *a.B
	if math.IsInf(sum, 0) {
		return map[string]any{"isError": true, "content": []map[string]any{{"type": "text", "text": "the sum is too large for a number"}}}, nil
	}
	structured := map[string]any{"sum": sum}
	body, _ := json.Marshal(structured)
	res := text(string(body))
	res["structuredContent"] = structured
	return res, nil
}

// meta shows what reached the server beside the arguments: trace context
// and the rest of _meta, on the result and on stderr.
func (s *server) meta(_ context.Context, r *request, _ json.RawMessage) (any, *rpcError) {
	var p struct {
		Meta json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(r.params, &p)
	var trace struct {
		Traceparent string `json:"traceparent"`
	}
	_ = json.Unmarshal(p.Meta, &trace)
	fmt.Fprintf(s.errOut, "demo: meta traceparent=%q\n", trace.Traceparent)
	if p.Meta == nil {
		p.Meta = json.RawMessage("null")
	}
	res := text(string(p.Meta))
	res["structuredContent"] = map[string]any{"_meta": p.Meta}
	return res, nil
}

func (s *server) big(_ context.Context, _ *request, args json.RawMessage) (any, *rpcError) {
	var a struct {
		Bytes intArg `json:"bytes"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	if a.Bytes < 0 || a.Bytes > maxBigBytes {
		return nil, invalidParams(fmt.Sprintf("bytes must be between 0 and %d", maxBigBytes), nil)
	}
	return text(strings.Repeat("x", int(a.Bytes))), nil
}

func (s *server) slow(ctx context.Context, r *request, args json.RawMessage) (any, *rpcError) {
	a := struct {
		DurationMS intArg `json:"duration_ms"`
		IntervalMS intArg `json:"interval_ms"`
	}{2000, 100}
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	if a.IntervalMS <= 0 || a.DurationMS < 0 {
		return nil, invalidParams("interval_ms must be positive and duration_ms not negative", nil)
	}
	steps := max(1, int(a.DurationMS/a.IntervalMS))
	for i := 1; i <= steps; i++ {
		if !sleepCtx(ctx, time.Duration(a.IntervalMS)*time.Millisecond) {
			return nil, nil
		}
		s.progress(r, i, steps, fmt.Sprintf("step %d of %d", i, steps))
	}
	return text(fmt.Sprintf("done after %d steps", steps)), nil
}

func (s *server) received(ctx context.Context, _ *request, args json.RawMessage) (any, *rpcError) {
	a := struct {
		WaitCancelled intArg          `json:"wait_cancelled"`
		WaitAnswered  json.RawMessage `json:"wait_answered"`
		TimeoutMS     intArg          `json:"timeout_ms"`
	}{0, nil, 10000}
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	deadline := time.NewTimer(time.Duration(a.TimeoutMS) * time.Millisecond)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		enough := len(s.cancellations) >= int(a.WaitCancelled) &&
			(a.WaitAnswered == nil || slices.ContainsFunc(s.answeredIDs, func(id json.RawMessage) bool { return string(id) == string(a.WaitAnswered) }))
		changed := s.changed
		snapshot := map[string]any{
			"requests":      append([]seenRequest{}, s.requests...),
			"cancellations": append([]seenCancel{}, s.cancellations...),
			"answered":      append([]json.RawMessage{}, s.answeredIDs...),
			"pid":           os.Getpid(),
		}
		s.mu.Unlock()
		waited := false
		if !enough {
			select {
			case <-changed:
				continue
			case <-deadline.C:
				waited = true
			case <-ctx.Done():
				return nil, nil
			}
		}
		body, _ := json.Marshal(snapshot)
		res := text(string(body))
		res["structuredContent"] = snapshot
		if waited {
			res["isError"] = true
			res["content"] = []map[string]any{{"type": "text", "text": fmt.Sprintf("gave up waiting for %d cancellations and the answer to %s: %s", a.WaitCancelled, a.WaitAnswered, body)}}
		}
		return res, nil
	}
}

func (s *server) withLogging(ctx context.Context, r *request, _ json.RawMessage) (any, *rpcError) {
	for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
		if i > 0 && !sleepCtx(ctx, 50*time.Millisecond) {
			return nil, nil
		}
		s.log(r, "info", msg)
	}
	return text("Logging tool completed"), nil
}

func (s *server) withProgress(ctx context.Context, r *request, _ json.RawMessage) (any, *rpcError) {
	for i, p := range []int{0, 50, 100} {
		if i > 0 && !sleepCtx(ctx, 50*time.Millisecond) {
			return nil, nil
		}
		s.progress(r, p, 100, fmt.Sprintf("%d%%", p))
	}
	return text("Progress tool completed"), nil
}

func (s *server) missingCapability(ctx context.Context, r *request, _ json.RawMessage) (any, *rpcError) {
	if !r.modern {
		// A legacy server that needs sampling asks for it.
		answers, rerr := s.askAll(ctx, []inputRequest{samplingRequest("sampling", "Say yes.", 5)})
		if rerr != nil {
			return nil, rerr
		}
		return text("The client can sample: " + sampledText(answers["sampling"])), nil
	}
	if !r.has("sampling") {
		return nil, needsCapability("sampling")
	}
	return text("The client declared sampling."), nil
}

func (s *server) triggerToolChange(_ context.Context, _ *request, _ json.RawMessage) (any, *rpcError) {
	s.mu.Lock()
	s.toolAdded = !s.toolAdded
	s.mu.Unlock()
	s.listChanged(mcp.NoteToolsChanged, "toolsListChanged")
	return text("The tool list changed."), nil
}

func (s *server) triggerPromptChange(_ context.Context, _ *request, _ json.RawMessage) (any, *rpcError) {
	s.mu.Lock()
	s.promptAdded = !s.promptAdded
	s.mu.Unlock()
	s.listChanged(mcp.NotePromptsChanged, "promptsListChanged")
	return text("The prompt list changed."), nil
}

func (s *server) triggerResourceUpdate(_ context.Context, _ *request, args json.RawMessage) (any, *rpcError) {
	a := struct {
		URI string `json:"uri"`
	}{"test://watched-resource"}
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	s.resourceUpdated(a.URI)
	return text("Announced an update of " + a.URI), nil
}

func (s *server) customHeaders(_ context.Context, _ *request, args json.RawMessage) (any, *rpcError) {
	return text("arguments: " + string(args)), nil
}

// schema2020 uses the JSON Schema 2020-12 vocabulary a tool may carry.
var schema2020 = map[string]any{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"type":    "object",
	"$defs": map[string]any{"address": map[string]any{
		"$anchor": "addressDef", "type": "object",
		"properties": map[string]any{"street": map[string]any{"type": "string"}, "city": map[string]any{"type": "string"}},
	}},
	"properties": map[string]any{
		"name":          map[string]any{"type": "string"},
		"address":       map[string]any{"$ref": "#/$defs/address"},
		"contactMethod": map[string]any{"type": "string", "enum": []string{"phone", "email"}},
		"phone":         map[string]any{"type": "string"},
		"email":         map[string]any{"type": "string"},
	},
	"allOf":                []any{map[string]any{"anyOf": []any{map[string]any{"required": []string{"phone"}}, map[string]any{"required": []string{"email"}}}}},
	"if":                   map[string]any{"properties": map[string]any{"contactMethod": map[string]any{"const": "phone"}}, "required": []string{"contactMethod"}},
	"then":                 map[string]any{"required": []string{"phone"}},
	"else":                 map[string]any{"required": []string{"email"}},
	"additionalProperties": false,
}
