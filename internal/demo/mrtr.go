package demo

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// retry is what a modern retry carries: the answers to the server's input
// requests and the state the server handed out.
type retry struct {
	responses map[string]json.RawMessage
	state     string
	malformed bool // inputResponses present but not an object of objects
}

func (r *request) retry() retry {
	var p struct {
		InputResponses json.RawMessage `json:"inputResponses"`
		RequestState   string          `json:"requestState"`
	}
	_ = json.Unmarshal(r.params, &p)
	out := retry{state: p.RequestState}
	if p.InputResponses == nil || string(p.InputResponses) == "null" {
		return out
	}
	if err := json.Unmarshal(p.InputResponses, &out.responses); err != nil {
		out.malformed = true
		return out
	}
	for _, v := range out.responses {
		if len(v) == 0 || v[0] != '{' {
			out.malformed = true
		}
	}
	return out
}

// inputRequest is one entry of an InputRequiredResult.
type inputRequest struct {
	key, capability, method string
	params                  any
}

func inputRequired(reqs []inputRequest, state string) map[string]any {
	m := map[string]any{}
	for _, q := range reqs {
		m[q.key] = map[string]any{"method": q.method, "params": q.params}
	}
	res := map[string]any{"resultType": mcp.ResultInputRequired, "inputRequests": m}
	if state != "" {
		res["requestState"] = state
	}
	return res
}

// gather gets the answers to reqs. A legacy request asks the client for
// each in turn; a modern one takes them from the retry, or returns an
// InputRequiredResult (as result) asking for those still missing. A client
// that lacks a needed capability is refused.
func (s *server) gather(ctx context.Context, r *request, reqs []inputRequest, state string) (answers map[string]json.RawMessage, result any, rerr *rpcError) {
	for _, q := range reqs {
		if !r.has(q.capability) {
			if r.modern {
				return nil, nil, needsCapability(q.capability)
			}
			return nil, nil, &rpcError{Code: jsonrpc.CodeInternalError, Message: "this tool needs the client's " + q.capability + " capability, which it did not declare"}
		}
	}
	if !r.modern {
		answers, rerr := s.askAll(ctx, reqs)
		return answers, nil, rerr
	}
	answers = map[string]json.RawMessage{}
	rt := r.retry()
	if rt.malformed {
		return nil, nil, invalidParams("inputResponses must be an object whose values are the results of the input requests", nil)
	}
	var missing []inputRequest
	for _, q := range reqs {
		if a, ok := rt.responses[q.key]; ok {
			answers[q.key] = a
		} else {
			missing = append(missing, q)
		}
	}
	if len(missing) > 0 {
		return nil, inputRequired(missing, state), nil
	}
	return answers, nil, nil
}

// needsCapability is the 2026-07-28 error for a client that did not
// declare a capability the tool needs (Missing Required Client Capability).
func needsCapability(capability string) *rpcError {
	return &rpcError{Code: mcp.CodeMissingCapability, Message: "this tool needs the client's " + capability + " capability",
		Data: map[string]any{"requiredCapabilities": map[string]any{capability: map[string]any{}}}}
}

func samplingRequest(key, prompt string, maxTokens int) inputRequest {
	return inputRequest{key, "sampling", mcp.MethodSampling, map[string]any{
		"messages":  []map[string]any{{"role": "user", "content": map[string]any{"type": "text", "text": prompt}}},
		"maxTokens": maxTokens,
	}}
}

func elicitRequest(key, msg string, schema map[string]any) inputRequest {
	return inputRequest{key, "elicitation", mcp.MethodElicit, map[string]any{"message": msg, "requestedSchema": schema}}
}

func rootsRequest(key string) inputRequest {
	return inputRequest{key, "roots", mcp.MethodRootsList, map[string]any{}}
}

// sampledText is the text of a CreateMessageResult.
func sampledText(raw json.RawMessage) string {
	var res struct {
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal(raw, &res)
	return res.Content.Text
}

// elicited reads an ElicitResult.
func elicited(raw json.RawMessage) (action string, content map[string]any) {
	var res struct {
		Action  string         `json:"action"`
		Content map[string]any `json:"content"`
	}
	_ = json.Unmarshal(raw, &res)
	return res.Action, res.Content
}

func (s *server) sampling(ctx context.Context, r *request, args json.RawMessage) (any, *rpcError) {
	var a struct {
		Prompt string `json:"prompt"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	answers, result, rerr := s.gather(ctx, r, []inputRequest{samplingRequest("sampling", a.Prompt, 100)}, "")
	if answers == nil {
		return result, rerr
	}
	return text("LLM response: " + sampledText(answers["sampling"])), nil
}

func (s *server) elicitation(ctx context.Context, r *request, args json.RawMessage) (any, *rpcError) {
	var a struct {
		Message string `json:"message"`
	}
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	schema := object(map[string]any{
		"username": str("User's response"),
		"email":    str("User's email address"),
	}, "username", "email")
	answers, result, rerr := s.gather(ctx, r, []inputRequest{elicitRequest("elicitation", a.Message, schema)}, "")
	if answers == nil {
		return result, rerr
	}
	action, got := elicited(answers["elicitation"])
	body, _ := json.Marshal(got)
	return text(fmt.Sprintf("User response: <action: %s, content: %s>", action, body)), nil
}

func (s *server) elicitWith(ctx context.Context, r *request, msg string, schema map[string]any) (any, *rpcError) {
	answers, result, rerr := s.gather(ctx, r, []inputRequest{elicitRequest("elicitation", msg, schema)}, "")
	if answers == nil {
		return result, rerr
	}
	action, got := elicited(answers["elicitation"])
	body, _ := json.Marshal(got)
	return text(fmt.Sprintf("Elicitation completed: action=%s, content=%s", action, body)), nil
}

func (s *server) elicitDefaults(ctx context.Context, r *request, _ json.RawMessage) (any, *rpcError) {
	return s.elicitWith(ctx, r, "Please review and update the form fields with defaults", object(map[string]any{
		"name":     map[string]any{"type": "string", "description": "User name", "default": "John Doe"},
		"age":      map[string]any{"type": "integer", "description": "User age", "default": 30},
		"score":    map[string]any{"type": "number", "description": "User score", "default": 95.5},
		"status":   map[string]any{"type": "string", "description": "User status", "enum": []string{"active", "inactive", "pending"}, "default": "active"},
		"verified": map[string]any{"type": "boolean", "description": "Verification status", "default": true},
	}))
}

func (s *server) elicitEnums(ctx context.Context, r *request, _ json.RawMessage) (any, *rpcError) {
	titled := func(pairs ...string) []map[string]any {
		var out []map[string]any
		for i := 0; i+1 < len(pairs); i += 2 {
			out = append(out, map[string]any{"const": pairs[i], "title": pairs[i+1]})
		}
		return out
	}
	return s.elicitWith(ctx, r, "Please select options from the enum fields", object(map[string]any{
		"untitledSingle": map[string]any{"type": "string", "description": "Select one option", "enum": []string{"option1", "option2", "option3"}},
		"titledSingle": map[string]any{"type": "string", "description": "Select one option with titles",
			"oneOf": titled("value1", "First Option", "value2", "Second Option", "value3", "Third Option")},
		"legacyEnum": map[string]any{"type": "string", "description": "Select one option (legacy)",
			"enum": []string{"opt1", "opt2", "opt3"}, "enumNames": []string{"Option One", "Option Two", "Option Three"}},
		"untitledMulti": map[string]any{"type": "array", "description": "Select multiple options",
			"items": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}}},
		"titledMulti": map[string]any{"type": "array", "description": "Select multiple options with titles",
			"items": map[string]any{"anyOf": titled("value1", "First Choice", "value2", "Second Choice", "value3", "Third Choice")}},
	}))
}

func (s *server) streamingElicitation(ctx context.Context, r *request, _ json.RawMessage) (any, *rpcError) {
	return s.elicitWith(ctx, r, "Please confirm to continue", object(map[string]any{"ok": map[string]any{"type": "boolean"}}, "ok"))
}

// sign makes a requestState that the demo can later tell it issued: the
// spec says to treat requestState as attacker-controlled.
func (s *server) sign(v any) string {
	body, _ := json.Marshal(v)
	mac := hmac.New(sha256.New, s.key[:])
	mac.Write(body)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(body) + "." + enc.EncodeToString(mac.Sum(nil))
}

// verify checks a requestState made by sign and decodes it into v.
func (s *server) verify(state string, v any) *rpcError {
	fail := invalidParams("requestState failed its integrity check", nil)
	body64, mac64, ok := strings.Cut(state, ".")
	if !ok {
		return fail
	}
	enc := base64.RawURLEncoding
	body, err1 := enc.DecodeString(body64)
	sum, err2 := enc.DecodeString(mac64)
	if err1 != nil || err2 != nil {
		return fail
	}
	mac := hmac.New(sha256.New, s.key[:])
	mac.Write(body)
	if !hmac.Equal(sum, mac.Sum(nil)) || json.Unmarshal(body, v) != nil {
		return fail
	}
	return nil
}

type roundState struct {
	Tool  string `json:"tool"`
	Round int    `json:"round"`
	Name  string `json:"name,omitempty"`
}

// mrtrTools are the conformance suite's input-required fixtures, served
// only under 2026-07-28.
func (s *server) mrtrTools() []tool {
	noArgs := object(map[string]any{})
	nameSchema := object(map[string]any{"name": map[string]any{"type": "string"}}, "name")
	// Served in both eras: a legacy request asks with requests of its own,
	// which a gateway turns into the same rounds for a modern client.
	mk := func(name, desc string, run func(context.Context, *request, json.RawMessage) (any, *rpcError)) tool {
		return tool{name: name, description: desc, schema: noArgs, run: run}
	}
	return []tool{
		mk("test_input_required_result_elicitation", "Asks for the user's name, then greets them.", func(ctx context.Context, r *request, _ json.RawMessage) (any, *rpcError) {
			answers, result, rerr := s.gather(ctx, r, []inputRequest{elicitRequest("user_name", "What is your name?", nameSchema)}, "")
			if answers == nil {
				return result, rerr
			}
			_, got := elicited(answers["user_name"])
			return text(fmt.Sprintf("Hello, %v!", got["name"])), nil
		}),
		mk("test_input_required_result_sampling", "Asks the client's LLM a question.", func(ctx context.Context, r *request, _ json.RawMessage) (any, *rpcError) {
			answers, result, rerr := s.gather(ctx, r, []inputRequest{samplingRequest("capital_question", "What is the capital of France?", 100)}, "")
			if answers == nil {
				return result, rerr
			}
			return text("The LLM said: " + sampledText(answers["capital_question"])), nil
		}),
		mk("test_input_required_result_list_roots", "Asks for the client's roots.", func(ctx context.Context, r *request, _ json.RawMessage) (any, *rpcError) {
			answers, result, rerr := s.gather(ctx, r, []inputRequest{rootsRequest("client_roots")}, "")
			if answers == nil {
				return result, rerr
			}
			var roots struct {
				Roots []struct {
					URI string `json:"uri"`
				} `json:"roots"`
			}
			_ = json.Unmarshal(answers["client_roots"], &roots)
			var uris []string
			for _, root := range roots.Roots {
				uris = append(uris, root.URI)
			}
			return text("Roots: " + strings.Join(uris, ", ")), nil
		}),
		mk("test_input_required_result_request_state", "Asks for confirmation and checks the state it handed out.", func(ctx context.Context, r *request, _ json.RawMessage) (any, *rpcError) {
			return s.stateful(ctx, r, "test_input_required_result_request_state", []inputRequest{
				elicitRequest("confirm", "Please confirm", object(map[string]any{"ok": map[string]any{"type": "boolean"}}, "ok"))},
				func(map[string]json.RawMessage) (any, *rpcError) { return text("state-ok: confirmed"), nil })
		}),
		mk("test_input_required_result_multiple_inputs", "Asks for a name, a greeting and the roots at once.", func(ctx context.Context, r *request, _ json.RawMessage) (any, *rpcError) {
			return s.stateful(ctx, r, "test_input_required_result_multiple_inputs", []inputRequest{
				elicitRequest("user_name", "What is your name?", nameSchema),
				samplingRequest("greeting", "Generate a greeting", 50),
				rootsRequest("client_roots"),
			}, func(answers map[string]json.RawMessage) (any, *rpcError) {
				_, got := elicited(answers["user_name"])
				return text(fmt.Sprintf("All inputs received: name=%v, greeting=%s", got["name"], sampledText(answers["greeting"]))), nil
			})
		}),
		mk("test_input_required_result_multi_round", "Asks two questions, one round each.", s.multiRound),
		mk("test_input_required_result_tampered_state", "Hands out signed state and refuses it if changed.", func(ctx context.Context, r *request, _ json.RawMessage) (any, *rpcError) {
			return s.stateful(ctx, r, "test_input_required_result_tampered_state", []inputRequest{
				elicitRequest("confirm", "Please confirm", object(map[string]any{"ok": map[string]any{"type": "boolean"}}, "ok"))},
				func(map[string]json.RawMessage) (any, *rpcError) { return text("state verified"), nil })
		}),
		mk("test_input_required_result_capabilities", "Asks only for inputs whose capability the client declared.", func(ctx context.Context, r *request, _ json.RawMessage) (any, *rpcError) {
			var reqs []inputRequest
			if r.has("elicitation") {
				reqs = append(reqs, elicitRequest("user_name", "What is your name?", nameSchema))
			}
			if r.has("sampling") {
				reqs = append(reqs, samplingRequest("greeting", "Generate a greeting", 50))
			}
			if len(reqs) == 0 {
				return text("The client declared neither elicitation nor sampling."), nil
			}
			answers, result, rerr := s.gather(ctx, r, reqs, "")
			if answers == nil {
				return result, rerr
			}
			return text(fmt.Sprintf("Received %d inputs.", len(answers))), nil
		}),
	}
}

// stateful is a one-round input-required tool whose requestState must come
// back unchanged. A legacy request has no state to check: the round trip
// is the client's answer to the demo's own request.
func (s *server) stateful(ctx context.Context, r *request, name string, reqs []inputRequest, done func(map[string]json.RawMessage) (any, *rpcError)) (any, *rpcError) {
	if !r.modern {
		answers, rerr := s.askAll(ctx, reqs)
		if rerr != nil {
			return nil, rerr
		}
		return done(answers)
	}
	rt := r.retry()
	if rt.state != "" {
		var st roundState
		if rerr := s.verify(rt.state, &st); rerr != nil {
			return nil, rerr
		}
		if st.Tool != name {
			return nil, invalidParams("requestState belongs to another request", nil)
		}
	}
	answers, result, rerr := s.gather(ctx, r, reqs, s.sign(roundState{Tool: name, Round: 1}))
	if answers == nil {
		return result, rerr
	}
	if rt.state == "" {
		return nil, invalidParams("the retry carries no requestState", nil)
	}
	return done(answers)
}

func (s *server) multiRound(ctx context.Context, r *request, _ json.RawMessage) (any, *rpcError) {
	const name = "test_input_required_result_multi_round"
	step1 := elicitRequest("step1", "Step 1: What is your name?", object(map[string]any{"name": map[string]any{"type": "string"}}, "name"))
	step2 := elicitRequest("step2", "Step 2: What is your favorite color?", object(map[string]any{"color": map[string]any{"type": "string"}}, "color"))
	if !r.modern {
		first, rerr := s.askAll(ctx, []inputRequest{step1})
		if rerr != nil {
			return nil, rerr
		}
		second, rerr := s.askAll(ctx, []inputRequest{step2})
		if rerr != nil {
			return nil, rerr
		}
		_, got1 := elicited(first["step1"])
		_, got2 := elicited(second["step2"])
		return text(fmt.Sprintf("%v likes %v.", got1["name"], got2["color"])), nil
	}
	rt := r.retry()
	st := roundState{Tool: name, Round: 1}
	if rt.state != "" {
		if rerr := s.verify(rt.state, &st); rerr != nil {
			return nil, rerr
		}
	}
	if st.Round == 1 {
		answers, result, rerr := s.gather(ctx, r, []inputRequest{step1}, s.sign(st))
		if answers == nil {
			return result, rerr
		}
		_, got := elicited(answers["step1"])
		name, _ := got["name"].(string)
		next := roundState{Tool: st.Tool, Round: 2, Name: name}
		return inputRequired([]inputRequest{step2}, s.sign(next)), nil
	}
	answers, result, rerr := s.gather(ctx, r, []inputRequest{step2}, s.sign(st))
	if answers == nil {
		return result, rerr
	}
	_, got := elicited(answers["step2"])
	return text(fmt.Sprintf("%s likes %v.", st.Name, got["color"])), nil
}
