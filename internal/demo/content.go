package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// A 1x1 red PNG and a short silent WAV, for the image and audio fixtures.
const (
	redPixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
	silenceWAV  = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA=="
)

func imageContent() map[string]any {
	return map[string]any{"type": "image", "data": redPixelPNG, "mimeType": "image/png"}
}

func audioContent() map[string]any {
	return map[string]any{"type": "audio", "data": silenceWAV, "mimeType": "audio/wav"}
}

type resource struct {
	uri, name, description, mimeType string
	text, blob                       string
}

var staticResources = []resource{
	{uri: "test://static-text", name: "static-text", description: "A static text resource", mimeType: "text/plain",
		text: "This is the content of the static text resource."},
	{uri: "test://static-binary", name: "static-binary", description: "A static binary resource (a PNG)", mimeType: "image/png",
		blob: redPixelPNG},
	{uri: "test://watched-resource", name: "watched-resource", description: "A resource to subscribe to", mimeType: "text/plain",
		text: "Watched resource content."},
}

var templateURI = regexp.MustCompile(`^test://template/([^/]+)/data$`)

func (s *server) resourcesList(_ context.Context, _ *request) (any, *rpcError) {
	var list []map[string]any
	for _, r := range staticResources {
		list = append(list, map[string]any{"uri": r.uri, "name": r.name, "description": r.description, "mimeType": r.mimeType})
	}
	return map[string]any{"resources": list}, nil
}

func (s *server) templatesList(_ context.Context, _ *request) (any, *rpcError) {
	return map[string]any{"resourceTemplates": []map[string]any{{
		"uriTemplate": "test://template/{id}/data", "name": "template-data",
		"description": "Data for an id", "mimeType": "application/json",
	}}}, nil
}

func (s *server) resourcesRead(_ context.Context, r *request) (any, *rpcError) {
	var p struct {
		URI string `json:"uri"`
	}
	_ = json.Unmarshal(r.params, &p)
	for _, res := range staticResources {
		if res.uri != p.URI {
			continue
		}
		c := map[string]any{"uri": res.uri, "mimeType": res.mimeType}
		if res.blob != "" {
			c["blob"] = res.blob
		} else {
			c["text"] = res.text
		}
		return map[string]any{"contents": []map[string]any{c}}, nil
	}
	if m := templateURI.FindStringSubmatch(p.URI); m != nil {
		body, _ := json.Marshal(map[string]any{"id": m[1], "templateTest": true, "data": "Data for ID: " + m[1]})
		return map[string]any{"contents": []map[string]any{{"uri": p.URI, "mimeType": "application/json", "text": string(body)}}}, nil
	}
	// 2025 servers said -32002; 2026-07-28 says -32602.
	code := mcp.CodeLegacyNotFound
	if r.modern {
		code = jsonrpc.CodeInvalidParams
	}
	return nil, &rpcError{Code: code, Message: "Resource not found", Data: map[string]any{"uri": p.URI}}
}

type prompt struct {
	name, description string
	args              []map[string]any
	eras              string
	get               func(ctx context.Context, r *request, args map[string]string) (any, *rpcError)
}

func userText(t string) map[string]any {
	return map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": t}}
}

func messages(ms ...map[string]any) map[string]any { return map[string]any{"messages": ms} }

func required(name, desc string) map[string]any {
	return map[string]any{"name": name, "description": desc, "required": true}
}

func (s *server) prompts() []prompt {
	ps := []prompt{
		{name: "test_simple_prompt", description: "A prompt without arguments", get: func(context.Context, *request, map[string]string) (any, *rpcError) {
			return messages(userText("This is a simple prompt for testing.")), nil
		}},
		{name: "test_prompt_with_arguments", description: "A prompt with two arguments",
			args: []map[string]any{required("arg1", "First test argument"), required("arg2", "Second test argument")},
			get: func(_ context.Context, _ *request, a map[string]string) (any, *rpcError) {
				return messages(userText(fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"]))), nil
			}},
		{name: "test_prompt_with_embedded_resource", description: "A prompt that embeds a resource",
			args: []map[string]any{required("resourceUri", "URI of the resource to embed")},
			get: func(_ context.Context, _ *request, a map[string]string) (any, *rpcError) {
				return messages(
					map[string]any{"role": "user", "content": map[string]any{"type": "resource", "resource": map[string]any{
						"uri": a["resourceUri"], "mimeType": "text/plain", "text": "Embedded resource content for testing."}}},
					userText("Please process the embedded resource above."),
				), nil
			}},
		{name: "test_prompt_with_image", description: "A prompt with an image", get: func(context.Context, *request, map[string]string) (any, *rpcError) {
			return messages(map[string]any{"role": "user", "content": imageContent()}, userText("Please analyze the image above.")), nil
		}},
		{name: "test_input_required_result_prompt", description: "A prompt that asks for context first",
			get: func(ctx context.Context, r *request, _ map[string]string) (any, *rpcError) {
				answers, result, rerr := s.gather(ctx, r, []inputRequest{elicitRequest("user_context", "What context should the prompt use?",
					object(map[string]any{"context": map[string]any{"type": "string"}}, "context"))}, "")
				if answers == nil {
					return result, rerr
				}
				_, got := elicited(answers["user_context"])
				return messages(userText(fmt.Sprintf("Use this context: %v", got["context"]))), nil
			}},
	}
	s.mu.Lock()
	added := s.promptAdded
	s.mu.Unlock()
	if added {
		ps = append(ps, prompt{name: "test_dynamic_prompt", description: "Appears and disappears with test_trigger_prompt_change",
			get: func(context.Context, *request, map[string]string) (any, *rpcError) {
				return messages(userText("dynamic")), nil
			}})
	}
	return ps
}

func (s *server) promptsList(_ context.Context, r *request) (any, *rpcError) {
	var list []map[string]any
	for _, p := range s.prompts() {
		if p.eras != "" && (p.eras == "modern") != r.modern {
			continue
		}
		item := map[string]any{"name": p.name, "description": p.description}
		if p.args != nil {
			item["arguments"] = p.args
		}
		list = append(list, item)
	}
	return map[string]any{"prompts": list}, nil
}

func (s *server) promptsGet(ctx context.Context, r *request) (any, *rpcError) {
	var p struct {
		Name      string            `json:"name"`
		Arguments map[string]string `json:"arguments"`
	}
	if err := json.Unmarshal(r.params, &p); err != nil {
		return nil, invalidParams("invalid params: "+err.Error(), nil)
	}
	for _, pr := range s.prompts() {
		if pr.name != p.Name || (pr.eras != "" && (pr.eras == "modern") != r.modern) {
			continue
		}
		for _, a := range pr.args {
			if _, ok := p.Arguments[a["name"].(string)]; !ok {
				return nil, invalidParams(fmt.Sprintf("prompt %s needs argument %s", p.Name, a["name"]), nil)
			}
		}
		return pr.get(ctx, r, p.Arguments)
	}
	return nil, invalidParams(fmt.Sprintf("unknown prompt %q", p.Name), nil)
}

// complete offers completions for the prompt's arguments and the template's
// id, filtered by what has been typed.
func (s *server) complete(_ context.Context, r *request) (any, *rpcError) {
	var p struct {
		Ref struct {
			Type string `json:"type"`
			Name string `json:"name"`
			URI  string `json:"uri"`
		} `json:"ref"`
		Argument struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"argument"`
	}
	if err := json.Unmarshal(r.params, &p); err != nil {
		return nil, invalidParams("invalid params: "+err.Error(), nil)
	}
	var candidates []string
	switch {
	case p.Ref.Type == "ref/prompt" && p.Ref.Name == "test_prompt_with_arguments":
		candidates = []string{"paris", "park", "party", "hello", "world"}
	case p.Ref.Type == "ref/resource" && strings.HasPrefix(p.Ref.URI, "test://template/"):
		candidates = []string{"123", "456", "789"}
	}
	values := []string{}
	for _, c := range candidates {
		if strings.HasPrefix(c, p.Argument.Value) {
			values = append(values, c)
		}
	}
	slices.Sort(values)
	return map[string]any{"completion": map[string]any{"values": values, "total": len(values), "hasMore": false}}, nil
}
