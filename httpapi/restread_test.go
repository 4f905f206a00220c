package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

func TestRESTResources(t *testing.T) {
	t.Parallel()
	f, srv := restServer(t, Options{}, allTools...)
	type page struct{ cursor, answer string } // the cursor the request carries
	for _, tc := range []struct {
		name, path, method string
		pages              []page
		want               string
	}{
		{"two pages", "/v1/resources", mcp.MethodResourcesList, []page{
			{"", `{"resources":[ {"uri":"demo://a" ,"name":"a"} ], "nextCursor":"p2"}`},
			{`"p2"`, `{"nextCursor":"","resources":[{"name":"b","uri":"demo://b"},{"uri":"demo://c","name":"c"}]}`},
		}, `{"resources":[{"uri":"demo://a" ,"name":"a"},{"name":"b","uri":"demo://b"},{"uri":"demo://c","name":"c"}]}`},
		{"empty", "/v1/resources", mcp.MethodResourcesList, []page{{"", `{"resources":[]}`}}, `{"resources":[]}`},
		// A child that ignores the cursor gives its first page again: the
		// list ends before it, not with every item twice.
		{"a cursor given again", "/v1/resources", mcp.MethodResourcesList, []page{
			{"", `{"resources":[{"uri":"demo://a","name":"a"}],"nextCursor":"0"}`},
			{`"0"`, `{"resources":[{"uri":"demo://a","name":"a"}],"nextCursor":"0"}`},
		}, `{"resources":[{"uri":"demo://a","name":"a"}]}`},
		{"templates", "/v1/resources/templates", mcp.MethodTemplatesList, []page{
			{"", `{"resourceTemplates":[{"uriTemplate":"demo://{x}", "name":"x"}],"nextCursor":"t2"}`},
			{`"t2"`, `{"resourceTemplates":[{"uriTemplate":"demo://y/{z}","name":"y"}]}`},
		}, `{"resourceTemplates":[{"uriTemplate":"demo://{x}", "name":"x"},{"uriTemplate":"demo://y/{z}","name":"y"}]}`},
		{"prompts", "/v1/prompts", mcp.MethodPromptsList, []page{
			{"", `{"prompts":[{"name":"greet", "arguments":[{"name":"who","required":true}]}]}`},
		}, `{"prompts":[{"name":"greet", "arguments":[{"name":"who","required":true}]}]}`},
		{"read", "/v1/resources/read?uri=" + url.QueryEscape("demo://a?q=1&r=2"), mcp.MethodResourcesRead, []page{
			{"", `{"contents":[{"uri":"demo://a?q=1&r=2", "text":"<hello>"}]}`},
		}, `{"contents":[{"uri":"demo://a?q=1&r=2", "text":"<hello>"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := restStart(restReq("GET", srv+tc.path, "", ""))
			for _, p := range tc.pages {
				c := f.next(t)
				if c.req.Method != tc.method {
					t.Errorf("method %q, want %q", c.req.Method, tc.method)
				}
				if got := jsonrpc.Get(c.req.Params, "cursor"); string(got) != p.cursor {
					t.Errorf("cursor %s, want %s", got, p.cursor)
				}
				if tc.method == mcp.MethodResourcesRead {
					if uri, _ := c.req.String(mcp.ParamURI); uri != "demo://a?q=1&r=2" {
						t.Errorf("uri %q", uri)
					}
				}
				c.finish(rpcResult(p.answer), nil)
			}
			r := await(t, answer)
			if r.status != 200 || r.header.Get("Content-Type") != "application/json" || string(r.body) != tc.want {
				t.Errorf("status %d, Content-Type %q\n got %s\nwant %s", r.status, r.header.Get("Content-Type"), r.body, tc.want)
			}
			nothingReached(t, f)
		})
	}
	// A list that is not one is the child's bad answer, not an empty list.
	for _, answer := range []string{`{"prompts":"notalist"}`, `{"prompts":{"name":"greet"}}`} {
		t.Run(answer, func(t *testing.T) {
			a := restStart(restReq("GET", srv+"/v1/prompts", "", ""))
			f.next(t).finish(rpcResult(answer), nil)
			if p := wantProblem(t, await(t, a), 502, kindBadAnswer); p.Code != jsonrpc.CodeBadAnswer {
				t.Errorf("code %d, want -32010", p.Code)
			}
		})
	}
	// A resource the child does not know.
	for _, tc := range []struct {
		name, errObj string
		status       int
		kind         string
	}{
		{"invalid params means not found", `{"code":-32602,"message":"no such resource","data":{"uri":"demo://x"}}`, 404, kindNotFound},
		{"legacy not found", `{"code":-32002,"message":"no such resource"}`, 404, kindNotFound},
		{"another error", `{"code":-32603,"message":"broken"}`, 502, kindChildError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := restStart(restReq("GET", srv+"/v1/resources/read?uri=demo://x", "", ""))
			f.next(t).finish(rpcError(tc.errObj), nil)
			p := wantProblem(t, await(t, answer), tc.status, tc.kind)
			if string(p.Error) != tc.errObj {
				t.Errorf("error\n got %s\nwant %s", p.Error, tc.errObj)
			}
		})
	}
	for _, path := range []string{"/v1/resources/read", "/v1/resources/read?uri=", "/v1/resources/read?uri=a&x=1",
		"/v1/resources/read?uri=a&uri=b", "/v1/resources?cursor=c", "/v1/resources/templates?x=1", "/v1/prompts?x=1"} {
		t.Run(path, func(t *testing.T) {
			wantProblem(t, restRefused(t, f, restReq("GET", srv+path, "", "")), 400, kindBadRequest)
			nothingReached(t, f)
		})
	}
}

func TestRESTPrompts(t *testing.T) {
	t.Parallel()
	f, srv := restServer(t, Options{}, allTools...)
	const (
		list   = `{"prompts":[{"name":"greet","arguments":[{"name":"who"}]},{"name":"a/b"}]}`
		result = `{"messages":[{"role":"user","content":{"type":"text","text":"Hi <Ada>"}}] }`
	)
	for _, tc := range []struct {
		name, method, path, contentType, body string
		prompt                                string
		args                                  map[string]string // decoded, when raw is ""
		raw                                   string
	}{
		{"query arguments", "GET", "/v1/prompts/greet?who=Ada&tone=" + url.QueryEscape(`a&b "c"`) + "&empty=", "", "", "greet",
			map[string]string{"who": "Ada", "tone": `a&b "c"`, "empty": ""}, ""},
		{"no arguments", "GET", "/v1/prompts/greet", "", "", "greet", nil, `{}`},
		{"escaped name", "GET", "/v1/prompts/a%2Fb", "", "", "a/b", nil, `{}`},
		{"POST", "POST", "/v1/prompts/greet", "application/json", `{ "who" : "Ada", "x":"\u00e9" }`, "greet", nil, `{ "who" : "Ada", "x":"\u00e9" }`},
		{"POST, empty body", "POST", "/v1/prompts/greet", "", "", "greet", nil, `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := restStart(restReq(tc.method, srv+tc.path, tc.contentType, tc.body))
			c := f.next(t)
			if c.req.Method != mcp.MethodPromptsGet {
				t.Errorf("method %q", c.req.Method)
			}
			if name, _ := c.req.String(mcp.ParamName); name != tc.prompt {
				t.Errorf("name %q, want %q", name, tc.prompt)
			}
			args, _ := c.req.Param(mcp.ParamArguments)
			if tc.raw != "" {
				if string(args) != tc.raw {
					t.Errorf("arguments %s, want %s", args, tc.raw)
				}
			} else {
				var got map[string]string
				if err := json.Unmarshal(args, &got); err != nil || len(got) != len(tc.args) {
					t.Errorf("arguments %s (%v), want %v", args, err, tc.args)
				}
				for k, v := range tc.args {
					if got[k] != v {
						t.Errorf("argument %s = %q, want %q", k, got[k], v)
					}
				}
			}
			c.finish(rpcResult(result), nil)
			r := await(t, answer)
			if r.status != 200 || string(r.body) != result {
				t.Errorf("status %d\n got %s\nwant %s", r.status, r.body, result)
			}
		})
	}
	for _, tc := range []struct {
		name, method, path, contentType, body string
		status                                int
		kind                                  string
	}{
		{"a number", "POST", "/v1/prompts/greet", "application/json", `{"who":1}`, 400, kindBadRequest},
		{"null", "POST", "/v1/prompts/greet", "application/json", `{"who":null}`, 400, kindBadRequest},
		{"an object", "POST", "/v1/prompts/greet", "application/json", `{"who":{"a":"b"}}`, 400, kindBadRequest},
		{"an array", "POST", "/v1/prompts/greet", "application/json", `{"who":["a"]}`, 400, kindBadRequest},
		{"true", "POST", "/v1/prompts/greet", "application/json", `{"who":"a","loud":true}`, 400, kindBadRequest},
		{"not an object", "POST", "/v1/prompts/greet", "application/json", `["a"]`, 400, kindBadRequest},
		{"duplicate", "POST", "/v1/prompts/greet", "application/json", `{"who":"a","w\u0068o":"b"}`, 400, kindBadRequest},
		{"nested as deep as JSON goes", "POST", "/v1/prompts/greet", "application/json", `{"who":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`, 400, kindBadRequest},
		{"text/plain", "POST", "/v1/prompts/greet", "text/plain", `{"who":"a"}`, 415, kindUnsupportedMedia},
		{"query on a POST", "POST", "/v1/prompts/greet?who=a", "", "", 400, kindBadRequest},
		{"an argument twice", "GET", "/v1/prompts/greet?who=a&who=b", "", "", 400, kindBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantProblem(t, restRefused(t, f, restReq(tc.method, srv+tc.path, tc.contentType, tc.body)), tc.status, tc.kind)
			nothingReached(t, f)
		})
	}
	// -32602 is an unknown prompt, or bad arguments to a known one: the
	// prompt list tells.
	for _, tc := range []struct {
		name, prompt string
		status       int
		kind         string
	}{
		{"unknown prompt", "nope", 404, kindNotFound},
		{"bad arguments", "greet", 400, kindChildError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const errObj = `{"code":-32602,"message":"invalid params"}`
			answer := restStart(restReq("GET", srv+"/v1/prompts/"+tc.prompt, "", ""))
			f.next(t).finish(rpcError(errObj), nil)
			c := f.next(t)
			if c.req.Method != mcp.MethodPromptsList {
				t.Fatalf("then %q, want the prompt list", c.req.Method)
			}
			c.finish(rpcResult(list), nil)
			p := wantProblem(t, await(t, answer), tc.status, tc.kind)
			if p.Code != jsonrpc.CodeInvalidParams || string(p.Error) != errObj {
				t.Errorf("code %d, error %s", p.Code, p.Error)
			}
		})
	}
}

// Routes under /v1 that do not exist answer with problems too.
func TestRESTUnknownRoutes(t *testing.T) {
	t.Parallel()
	f, srv := restServer(t, Options{}, allTools...)
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/v1/nope", 404},
		{"GET", "/v1", 404},
		{"GET", "/v1/tools/echo/more", 404},
		{"DELETE", "/v1/tools", 405},
		{"POST", "/v1/resources", 405},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := restRefused(t, f, restReq(tc.method, srv+tc.path, "", ""))
			wantProblem(t, r, tc.status, "")
			if tc.status == 405 && r.header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
		})
	}
	nothingReached(t, f)
}

// A child that cannot list its tools makes REST tool routes answer with
// its error (502), not a gateway bug; a list that does not come in time
// is a timeout.
func TestRESTToolListFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		err    error
		status int
		kind   string
	}{
		{"the child's error", &bridge.ListError{Method: "tools/list", Raw: []byte(`{"code":-32603,"message":"db down"}`)}, 502, kindChildError},
		{"no list in time", fmt.Errorf("tools/list: %w", context.DeadlineExceeded), 504, kindTimeout},
		{"a list over the bound", jsonrpc.GatewayError(jsonrpc.CodeTooLarge, "tools_too_large", "too many"), 502, kindAnswerTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.callErr = tc.err
			srv := newServer(t, f, Options{}).URL
			for _, path := range []string{"/v1/tools", "/v1/tools/echo", "/v1/openapi.json"} {
				method := "GET"
				if path == "/v1/tools/echo" {
					method = "POST"
				}
				r := restDo(t, restReq(method, srv+path, "", ""))
				p := wantProblem(t, r, tc.status, tc.kind)
				if tc.kind == kindChildError && !strings.Contains(string(p.Error), "db down") {
					t.Errorf("%s: error %s", path, p.Error)
				}
			}
		})
	}
}
