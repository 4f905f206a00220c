package demo

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// The tools that only read say so, in both eras; the others (triggers,
// sampling, elicitation, tasks...) do not.
func TestReadOnlyAnnotations(t *testing.T) {
	readOnly := map[string]bool{
		"echo": true, "add": true, "slow": true, "big": true, "received": true, "meta": true,
		"test_simple_text": true, "test_image_content": true, "test_audio_content": true,
		"test_embedded_resource": true, "test_multiple_content_types": true, "test_error_handling": true,
	}
	for _, era := range []string{"legacy", "modern"} {
		t.Run(era, func(t *testing.T) {
			h := newHarness(t, "dual")
			var tools []struct {
				Name        string
				Annotations map[string]any
			}
			list := h.list(era == "modern")
			if err := json.Unmarshal(list, &tools); err != nil {
				t.Fatal(err)
			}
			seen := 0
			for _, tool := range tools {
				got, present := tool.Annotations["readOnlyHint"]
				switch {
				case readOnly[tool.Name]:
					seen++
					if got != true {
						t.Errorf("%s: annotations %v, want readOnlyHint true", tool.Name, tool.Annotations)
					}
				case present || tool.Annotations != nil:
					t.Errorf("%s: annotations %v, want none", tool.Name, tool.Annotations)
				}
			}
			if seen != len(readOnly) {
				t.Errorf("found %d of the %d read-only tools in %s", seen, len(readOnly), list)
			}
		})
	}
}

// list is the tools/list result's tools, asked in one era or the other.
func (h *harness) list(modern bool) json.RawMessage {
	h.t.Helper()
	var result json.RawMessage
	if modern {
		raw, _ := json.Marshal(h.call("tools/list", nil, nil).Result)
		result = raw
	} else {
		result = h.legacyCall("tools/list", `{}`)
	}
	tools := jsonrpc.Get(result, "tools")
	if tools == nil {
		h.t.Fatalf("tools/list: %s", result)
	}
	return tools
}

// legacyCall sends a request without 2026-07-28 _meta (to a dual server)
// and returns its result, failing on an error.
func (h *harness) legacyCall(method, params string) json.RawMessage {
	h.t.Helper()
	h.nextID++
	id := json.RawMessage(fmt.Sprint(h.nextID))
	h.s.handle(h.ctx, &message{JSONRPC: "2.0", ID: id, Method: method, Params: json.RawMessage(params)})
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case m := <-h.out:
			if string(m.ID) != string(id) {
				continue
			}
			if m.Error != nil {
				h.t.Fatalf("%s: %s", method, m.Error)
			}
			return m.Result
		case <-deadline.C:
			h.t.Fatalf("no answer to %s", method)
		}
	}
}

// add has an outputSchema, and its structured result follows it, with the
// same in text for clients that read only content.
func TestAdd(t *testing.T) {
	h := newHarness(t, "modern")
	var tools []struct {
		Name         string
		OutputSchema map[string]any
	}
	if err := json.Unmarshal(h.list(true), &tools); err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools {
		if tool.Name == "add" {
			if got, _ := json.Marshal(tool.OutputSchema); string(got) != `{"properties":{"sum":{"type":"number"}},"required":["sum"],"type":"object"}` {
				t.Errorf("add's outputSchema = %s", got)
			}
		} else if tool.OutputSchema != nil {
			t.Errorf("%s has an outputSchema: %v", tool.Name, tool.OutputSchema)
		}
	}

	r := h.tool(nil, "add", map[string]any{"a": 1.5, "b": -4})
	if got, _ := json.Marshal(r.Result["structuredContent"]); string(got) != `{"sum":-2.5}` {
		t.Errorf("structuredContent = %s, want {\"sum\":-2.5}", got)
	}
	if got := fmt.Sprint(r.Result["content"]); got != `[map[text:{"sum":-2.5} type:text]]` {
		t.Errorf("content = %s", got)
	}
	if r.Result["isError"] != nil {
		t.Errorf("isError = %v", r.Result["isError"])
	}

	if r := h.tool(nil, "add", map[string]any{"a": 1}); r.Error == nil || r.Error.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("add without b: %+v, want invalid params", r)
	}
	if r := h.tool(nil, "add", map[string]any{"a": "1", "b": 2}); r.Error == nil || r.Error.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("add with a string: %+v, want invalid params", r)
	}
	if r := h.tool(nil, "add", map[string]any{"a": 1e308, "b": 1e308}); r.Result["isError"] != true || r.Result["structuredContent"] != nil {
		t.Errorf("add beyond float64: %+v, want a tool error", r)
	}
}

// A tool's arguments of the wrong type are the caller's error, never read
// as absent; an integer may be written with a zero fraction, as JSON
// Schema's "integer" allows.
func TestArgumentsOfTheWrongType(t *testing.T) {
	h := newHarness(t, "modern")
	for _, tc := range []struct {
		tool string
		args map[string]any
		says string // in the -32602 message; "" for a result
	}{
		{"slow", map[string]any{"duration_ms": "x"}, "argument duration_ms must be an integer, not string"},
		{"slow", map[string]any{"duration_ms": 10.5, "interval_ms": 5}, "argument duration_ms must be an integer, not number 10.5"},
		{"slow", map[string]any{"duration_ms": 10.0, "interval_ms": 5}, ""},
		{"echo", map[string]any{"text": 5}, "argument text must be a string, not number"},
		{"big", map[string]any{"bytes": []int{1}}, "argument bytes must be an integer, not array"},
		{"big", map[string]any{"bytes": 3e9}, "argument bytes must be an integer, not number 3000000000, out of range"},
		{"echo", map[string]any{"text": "fine", "other": 1}, ""},
	} {
		r := h.tool(nil, tc.tool, tc.args)
		switch {
		case tc.says == "" && r.Error != nil:
			t.Errorf("%s %v: %+v, want a result", tc.tool, tc.args, r.Error)
		case tc.says != "" && (r.Error == nil || r.Error.Code != jsonrpc.CodeInvalidParams || r.Error.Message != tc.says):
			t.Errorf("%s %v: %+v, want -32602 saying %q", tc.tool, tc.args, r, tc.says)
		}
	}
	if r := h.tool(nil, "slow", map[string]any{"duration_ms": 10.0, "interval_ms": 5}); fmt.Sprint(r.Result["content"]) != "[map[text:done after 2 steps type:text]]" {
		t.Errorf("slow with duration_ms 10.0: %v, want 2 steps", r.Result)
	}
}

// The demo sends log messages in both eras, so it declares logging in both:
// 2026-07-28 keeps the rule that a server that emits them MUST.
func TestLoggingIsDeclared(t *testing.T) {
	modern := newHarness(t, "modern").call("server/discover", map[string]any{}, nil)
	if caps, _ := modern.Result["capabilities"].(map[string]any); caps["logging"] == nil {
		t.Errorf("server/discover capabilities %v: no logging", modern.Result["capabilities"])
	}
	var legacy struct {
		Capabilities map[string]any `json:"capabilities"`
	}
	json.Unmarshal(newHarness(t, "dual").legacyCall("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`), &legacy)
	if legacy.Capabilities["logging"] == nil {
		t.Errorf("initialize capabilities %v: no logging", legacy.Capabilities)
	}
}
