package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/stdiomcp/gateway/internal/demo"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// demoExchange runs the demo server in-process, on pipes as the gateway
// runs its child, sends it the requests (one JSON-RPC request each, with
// ids 1, 2...) and returns their results in order. The server speaks both
// eras: a request with 2026-07-28 _meta is served as one.
func demoExchange(t testing.TB, requests ...string) []json.RawMessage {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ran := make(chan error, 1)
	go func() {
		err := demo.Run(context.Background(), []string{"-era", "dual"}, inR, outW, io.Discard)
		outW.Close()
		ran <- err
	}()
	wrote := make(chan error, 1)
	go func() {
		var err error
		for i, r := range requests {
			if _, err = fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,%s}`+"\n", i+1, r); err != nil {
				break
			}
		}
		wrote <- err
	}()
	results := make([]json.RawMessage, len(requests))
	answered := 0
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m struct {
			ID     int
			Result json.RawMessage
			Error  json.RawMessage
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m.ID < 1 || m.ID > len(requests) {
			continue // a notification
		}
		if m.Error != nil {
			t.Errorf("request %d: %s", m.ID, m.Error)
		}
		results[m.ID-1] = m.Result
		if answered++; answered == len(requests) {
			// Every request was read, so closing stdin loses nothing; the
			// server then ends, and closes its stdout.
			if err := <-wrote; err != nil {
				t.Error(err)
			}
			inW.Close()
		}
	}
	if answered < len(requests) {
		inW.Close()
		t.Errorf("%d of %d requests answered", answered, len(requests))
	}
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	return results
}

// demoTools is the demo's tool list in each era, and its answer to add
// 2 and 3.
func demoTools(t testing.TB) (legacy, modern []json.RawMessage, added json.RawMessage) {
	t.Helper()
	results := demoExchange(t,
		`"method":"tools/list","params":{}`,
		`"method":"tools/list","params":{`+modernMeta+`}`,
		`"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}`)
	list := func(result json.RawMessage) []json.RawMessage {
		tools := jsonrpc.Get(result, "tools")
		spans, err := jsonrpc.Elements(tools)
		if err != nil {
			t.Fatalf("tools/list: %v: %s", err, result)
		}
		var out []json.RawMessage
		for _, sp := range spans {
			out = append(out, json.RawMessage(tools[sp.Start:sp.End]))
		}
		return out
	}
	return list(results[0]), list(results[1]), results[2]
}

// loadToolsDocument generates the document and checks that kin-openapi
// loads it and finds it valid OpenAPI 3.1.
func loadToolsDocument(t *testing.T, tools []json.RawMessage) *openapi3.T {
	t.Helper()
	raw, err := toolsDocument(tools, "demo")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatalf("load: %v\n%.2000s", err, raw)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("validate: %v\n%.2000s", err, raw)
	}
	return doc
}

// docClient checks requests and responses against a document, as a client
// (or a test of the server) that trusts it would.
type docClient struct {
	t      *testing.T
	router routers.Router
}

func newDocClient(t *testing.T, doc *openapi3.T) *docClient {
	t.Helper()
	// The gorillamux router matches the path as it is sent, escapes and
	// all; a tool name with a "/" is one segment.
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &docClient{t: t, router: r}
}

// check routes a request and validates it; it returns the operation the
// request reached and what the document says of the request.
func (c *docClient) check(method, target, body string) (*openapi3.Operation, *openapi3filter.RequestValidationInput, error) {
	c.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://gateway.test"+target, r)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		c.t.Fatalf("%s %s: not routed: %v", method, target, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	return route.Operation, in, openapi3filter.ValidateRequest(context.Background(), in)
}

func (c *docClient) accepts(method, target, body string) *openapi3filter.RequestValidationInput {
	c.t.Helper()
	_, in, err := c.check(method, target, body)
	if err != nil {
		c.t.Errorf("%s %s %s: refused: %v", method, target, body, err)
	}
	return in
}

func (c *docClient) refuses(method, target, body string) {
	c.t.Helper()
	if _, _, err := c.check(method, target, body); err == nil {
		c.t.Errorf("%s %s %s: accepted, want refused", method, target, body)
	}
}

func docToolNames(t *testing.T, tools []json.RawMessage) []string {
	t.Helper()
	var names []string
	for _, raw := range tools {
		name, _ := mcp.String(jsonrpc.Get(raw, "name"))
		names = append(names, name)
	}
	return names
}

// The demo's own tools, in each era, make a valid document with an
// operation for each, that refuses what their schemas refuse.
func TestToolsDocumentDemo(t *testing.T) {
	legacy, modern, added := demoTools(t)
	for era, tools := range map[string][]json.RawMessage{"legacy": legacy, "modern": modern} {
		t.Run(era, func(t *testing.T) {
			doc := loadToolsDocument(t, tools)
			if doc.Paths.Len() != len(tools) {
				t.Errorf("%d paths for %d tools", doc.Paths.Len(), len(tools))
			}
			ids := map[string]string{}
			for i, name := range docToolNames(t, tools) {
				item := doc.Paths.Value("/v1/tools/" + url.PathEscape(name))
				if item == nil || item.Post == nil {
					t.Errorf("no POST operation for %s", name)
					continue
				}
				description, _ := mcp.String(jsonrpc.Get(tools[i], "description"))
				if item.Post.Summary != name || item.Post.Description != description {
					t.Errorf("%s: summary %q, description %q", name, item.Post.Summary, item.Post.Description)
				}
				readOnly := string(jsonrpc.Get(tools[i], "annotations", "readOnlyHint")) == "true"
				if (item.Get != nil) != readOnly {
					t.Errorf("%s: readOnlyHint %v, GET operation %v", name, readOnly, item.Get != nil)
				}
				for _, op := range []*openapi3.Operation{item.Post, item.Get} {
					if op == nil {
						continue
					}
					if other, dup := ids[op.OperationID]; dup {
						t.Errorf("operationId %s for %s and %s", op.OperationID, name, other)
					}
					ids[op.OperationID] = name
				}
			}
			for _, name := range []string{"echo", "add", "slow", "test_simple_text"} {
				if doc.Paths.Value("/v1/tools/"+name).Get == nil {
					t.Errorf("%s is read-only but has no GET operation", name)
				}
			}
			for _, name := range []string{"test_sampling", "test_elicitation", "test_trigger_tool_change"} {
				if doc.Paths.Value("/v1/tools/"+name).Get != nil {
					t.Errorf("%s has a GET operation", name)
				}
			}

			c := newDocClient(t, doc)
			if op, _, err := c.check("POST", "/v1/tools/add", `{"a":2,"b":3}`); err != nil || op.OperationID != "add" {
				t.Errorf("POST add: operation %s, %v", op.OperationID, err)
			}
			c.refuses("POST", "/v1/tools/add", `{"a":2}`)
			c.refuses("POST", "/v1/tools/add", `{"a":2,"b":"3"}`)
			c.accepts("POST", "/v1/tools/add?timeout=1500ms", `{"a":2,"b":3}`)
			c.refuses("POST", "/v1/tools/add?timeout=soon", `{"a":2,"b":3}`)
			c.accepts("GET", "/v1/tools/add?arguments="+url.QueryEscape(`{"a":2,"b":3}`), "")
			c.refuses("GET", "/v1/tools/add?arguments="+url.QueryEscape(`{"a":2}`), "")
			c.accepts("GET", "/v1/tools/test_simple_text", "") // no arguments: {}
			c.accepts("POST", "/v1/tools/echo", `{"text":"hi"}`)
			c.refuses("POST", "/v1/tools/echo", `{"text":5}`)

			// The demo's JSON Schema 2020-12 fixture reaches its address
			// through "#/$defs/address": the reference still leads there.
			const valid = `{"name":"n","contactMethod":"email","email":"e@example.com","address":{"street":"s","city":"c"}}`
			c.accepts("POST", "/v1/tools/json_schema_2020_12_tool", valid)
			c.refuses("POST", "/v1/tools/json_schema_2020_12_tool", strings.Replace(valid, `"street":"s"`, `"street":5`, 1))
			c.refuses("POST", "/v1/tools/json_schema_2020_12_tool", strings.Replace(valid, `"email":"e@example.com"`, `"phone":"1"`, 1))

			// The demo's real answer fits add's result; a sum that is not a
			// number does not.
			in := c.accepts("POST", "/v1/tools/add", `{"a":2,"b":3}`)
			response := func(body []byte) error {
				out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: 200,
					Header: http.Header{"Content-Type": {"application/json"}}}
				return openapi3filter.ValidateResponse(context.Background(), out.SetBodyBytes(body))
			}
			if err := response(added); err != nil {
				t.Errorf("the demo's answer %s does not fit: %v", added, err)
			}
			if err := response([]byte(`{"content":[],"structuredContent":{"sum":"5"}}`)); err == nil {
				t.Error("a sum that is a string fits add's result")
			}
			if err := response([]byte(`{"content":[]}`)); err == nil {
				t.Error("a result without structuredContent fits add's result")
			}
		})
	}
}

// toolJSON is a tool object named name, with the other members rest.
func toolJSON(name string, rest ...string) json.RawMessage {
	members := append([]string{`"name":` + string(jsonrpc.Quote(name))}, rest...)
	return json.RawMessage("{" + strings.Join(members, ",") + "}")
}

const nArgSchema = `"inputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`

// Names a URL cannot hold as they are still get a path that reaches their
// operation, sent as the document spells it.
func TestToolsDocumentOddNames(t *testing.T) {
	names := []string{"a/b", "a b", "{x}", "{", "}", "é", "天気", "a%b", "%2F", "q?r", "h#i", ".", "..", "...", "a;b", "a:b",
		"a+b", "x$y", "a=b", "a&b", "a(b)", "tab\there", "new\nline", `quote"`, "back\\slash", "~tilde", "-", "_", "a-b", "a_b", "a.b"}
	var tools []json.RawMessage
	for _, n := range names {
		tools = append(tools, toolJSON(n, nArgSchema, `"annotations":{"readOnlyHint":true}`))
	}
	doc := loadToolsDocument(t, tools)
	c := newDocClient(t, doc)
	ids := map[string]bool{}
	for _, n := range names {
		path := "/v1/tools/" + toolPathSegment(n)
		for _, method := range []string{"POST", "GET"} {
			target, body := path, `{"n":1}`
			if method == "GET" {
				target, body = path+"?arguments="+url.QueryEscape(body), ""
			}
			op, _, err := c.check(method, target, body)
			if op.Summary != n {
				t.Errorf("%s %s reached the operation of %q, want %q", method, target, op.Summary, n)
			}
			if err != nil {
				t.Errorf("%s %s: refused: %v", method, target, err)
			}
			if ids[op.OperationID] {
				t.Errorf("operationId %s twice", op.OperationID)
			}
			ids[op.OperationID] = true
		}
		c.refuses("POST", path, `{"n":"one"}`)
		c.refuses("GET", path+"?arguments="+url.QueryEscape(`{}`), "")
		// A client removes dot segments (RFC 3986 §5.2.4) before it sends.
		base, _ := url.Parse("http://gateway.test/v1/openapi.json")
		if u, err := url.Parse(path); err != nil || base.ResolveReference(u).Path != "/v1/tools/"+n {
			t.Errorf("%s does not name %q: %v", path, n, err)
		}
	}
}

// Names that share an identifier each get their own, the first tool the
// plain one.
func TestToolsDocumentOperationIDs(t *testing.T) {
	names := []string{"a_b", "a-b", "a_b_2", "a.b", "天気", "-", "echo", "echo_get"}
	var tools []json.RawMessage
	for _, n := range names {
		tools = append(tools, toolJSON(n, `"annotations":{"readOnlyHint":`+fmt.Sprint(n == "echo")+`}`))
	}
	doc := loadToolsDocument(t, tools)
	want := []string{"a_b", "a_b_2", "a_b_2_2", "a_b_3", "tool", "tool_2", "echo", "echo_get_2"}
	for i, n := range names {
		if got := doc.Paths.Value("/v1/tools/" + toolPathSegment(n)).Post.OperationID; got != want[i] {
			t.Errorf("operationId of %q = %s, want %s", n, got, want[i])
		}
	}
	if got := doc.Paths.Value("/v1/tools/echo").Get.OperationID; got != "echo_get" {
		t.Errorf("operationId of GET echo = %s, want echo_get", got)
	}
}

// Tool objects the document cannot use are left out; of two tools with
// one name the first is kept, as calls reach the first.
func TestToolsDocumentSkips(t *testing.T) {
	tools := []json.RawMessage{
		json.RawMessage(`1`), json.RawMessage(`"echo"`), json.RawMessage(`null`), json.RawMessage(`[]`), json.RawMessage(`{}`),
		json.RawMessage(`{"name":5}`), json.RawMessage(`{"name":""}`), json.RawMessage(`{"name":null}`),
		json.RawMessage(`{"name":"twice","name":"other"}`), json.RawMessage(`{"name":"cased","Name":"other"}`),
		json.RawMessage(`{"name":"cut`),
		toolJSON("first", `"description":"the first"`),
		toolJSON("first", `"description":"the second"`),
		toolJSON("kept"),
	}
	doc := loadToolsDocument(t, tools)
	var paths []string
	for p := range doc.Paths.Map() {
		paths = append(paths, p)
	}
	if doc.Paths.Len() != 2 || doc.Paths.Value("/v1/tools/first") == nil || doc.Paths.Value("/v1/tools/kept") == nil {
		t.Fatalf("paths %v, want /v1/tools/first and /v1/tools/kept", paths)
	}
	if got := doc.Paths.Value("/v1/tools/first").Post.Description; got != "the first" {
		t.Errorf("description %q, want the first tool's", got)
	}
	if doc.Paths.Value("/v1/tools/kept").Get != nil {
		t.Error("a tool without readOnlyHint has a GET operation")
	}
}

// Schemas of every legal shape, and some that are not, still make a
// valid document whose schemas mean what the tool's meant.
func TestToolsDocumentSchemas(t *testing.T) {
	tools := []json.RawMessage{
		toolJSON("no_schema"),
		toolJSON("true_schema", `"inputSchema":true`),
		toolJSON("false_schema", `"inputSchema":false`),
		toolJSON("string_schema", `"inputSchema":"object"`),
		toolJSON("null_schema", `"inputSchema":null`),
		toolJSON("defs", `"inputSchema":{"type":"object","$defs":{"n":{"type":"integer"},"pair":{"type":"array","prefixItems":[{"$ref":"#/$defs/n"},{"$ref":"#/$defs/n"}]}},`+
			`"properties":{"p":{"$ref":"#/$defs/pair"},"q":{"allOf":[{"$ref":"#/$defs/n"}]}}}`),
		toolJSON("recursive", `"inputSchema":{"type":"object","properties":{"name":{"type":"string"},"child":{"$ref":"#"}},"required":["name"]}`),
		toolJSON("anchor", `"inputSchema":{"type":"object","$defs":{"n":{"$anchor":"num","type":"integer"}},"properties":{"n":{"$ref":"#num"}}}`),
		toolJSON("escaped_ref", `"inputSchema":{"type":"object","$defs":{"n":{"type":"integer"}},"properties":{"n":{"\u0024ref":"#\/$defs\/n"}}}`),
		toolJSON("booleans", `"inputSchema":{"type":"object","properties":{"anything":true,"nothing":false},"additionalProperties":false}`),
		toolJSON("ref_as_data", `"inputSchema":{"type":"object","properties":{"r":{"enum":[{"$ref":"#/$defs/x"}]}}}`),
		toolJSON("output", nArgSchema, `"outputSchema":{"type":"object","$defs":{"s":{"type":"number"}},"properties":{"sum":{"$ref":"#/$defs/s"}},"required":["sum"]}`),
		toolJSON("bool_output", nArgSchema, `"outputSchema":true`),
		toolJSON("html", `"description":"<b>bold</b> & more","inputSchema":{"type":"object","properties":{"x":{"type":"string","pattern":"^<a>$"}}}`),
		// A reference that resolves nowhere: the schema is left out, not
		// the document made unreadable.
		toolJSON("dangling", `"inputSchema":{"type":"object","properties":{"x":{"$ref":"#/nowhere"}}}`, `"outputSchema":{"type":"object","properties":{"y":{"$ref":"#/nowhere"}}}`),
	}
	for i := range 1000 {
		tools = append(tools, toolJSON(fmt.Sprintf("many_%d", i), nArgSchema))
	}
	doc := loadToolsDocument(t, tools)
	if doc.Paths.Len() != len(tools) {
		t.Errorf("%d paths for %d tools", doc.Paths.Len(), len(tools))
	}
	c := newDocClient(t, doc)
	for _, name := range []string{"no_schema", "true_schema", "false_schema", "string_schema", "null_schema"} {
		c.accepts("POST", "/v1/tools/"+name, `{"x":1}`)
		c.refuses("POST", "/v1/tools/"+name, `[1]`)
	}
	c.accepts("POST", "/v1/tools/defs", `{"p":[1,2],"q":3}`)
	c.refuses("POST", "/v1/tools/defs", `{"p":[1,"2"]}`)
	c.refuses("POST", "/v1/tools/defs", `{"q":"3"}`)
	c.accepts("POST", "/v1/tools/recursive", `{"name":"a","child":{"name":"b","child":{"name":"c"}}}`)
	c.refuses("POST", "/v1/tools/recursive", `{"name":"a","child":{"name":"b","child":{}}}`)
	c.accepts("POST", "/v1/tools/anchor", `{"n":1}`)
	c.refuses("POST", "/v1/tools/anchor", `{"n":"1"}`)
	c.accepts("POST", "/v1/tools/escaped_ref", `{"n":1}`)
	c.refuses("POST", "/v1/tools/escaped_ref", `{"n":"1"}`)
	c.accepts("POST", "/v1/tools/booleans", `{"anything":[1]}`)
	c.refuses("POST", "/v1/tools/booleans", `{"nothing":1}`)
	c.refuses("POST", "/v1/tools/booleans", `{"other":1}`)
	c.accepts("POST", "/v1/tools/ref_as_data", `{"r":{"$ref":"#/$defs/x"}}`)
	c.refuses("POST", "/v1/tools/ref_as_data", `{"r":{"$ref":"#/components/schemas/ref_as_data_arguments/$defs/x"}}`)
	c.accepts("POST", "/v1/tools/html", `{"x":"<a>"}`)
	c.accepts("POST", "/v1/tools/dangling", `{"x":1}`)
	c.refuses("POST", "/v1/tools/dangling", `[1]`)
	if s := doc.Components.Schemas["dangling_result"]; s != nil {
		t.Error("an outputSchema that does not compile got a result schema")
	}
	c.accepts("POST", "/v1/tools/many_999", `{"n":1}`)
	c.refuses("POST", "/v1/tools/many_999", `{"n":1.5}`)

	in := c.accepts("POST", "/v1/tools/output", `{"n":1}`)
	for body, fits := range map[string]bool{`{"content":[],"structuredContent":{"sum":1}}`: true, `{"content":[],"structuredContent":{"sum":"1"}}`: false} {
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: 200, Header: http.Header{"Content-Type": {"application/json"}}}
		if err := openapi3filter.ValidateResponse(context.Background(), out.SetBodyBytes([]byte(body))); (err == nil) != fits {
			t.Errorf("result %s: %v, want fits %v", body, err, fits)
		}
	}
	if s := doc.Components.Schemas["bool_output_result"]; s != nil {
		t.Error("a boolean outputSchema got a result schema")
	}
	if got := doc.Paths.Value("/v1/tools/html").Post.Description; got != "<b>bold</b> & more" {
		t.Errorf("description %q", got)
	}
}

// The problem responses describe what the contract says a refusal is.
func TestToolsDocumentProblems(t *testing.T) {
	doc := loadToolsDocument(t, []json.RawMessage{toolJSON("echo", `"annotations":{"readOnlyHint":true}`)})
	post, get := doc.Paths.Value("/v1/tools/echo").Post, doc.Paths.Value("/v1/tools/echo").Get
	for _, status := range []int{400, 401, 403, 404, 413, 415, 422, 429, 502, 503, 504} {
		r := post.Responses.Status(status)
		if r == nil || r.Value == nil || r.Value.Content.Get("application/problem+json") == nil {
			t.Errorf("POST: no problem for %d", status)
			continue
		}
		if s := r.Value.Content.Get("application/problem+json").Schema; s.Ref != "#/components/schemas/Problem" {
			t.Errorf("%d: schema %q, want the Problem component", status, s.Ref)
		}
	}
	if get.Responses.Status(415) != nil || get.RequestBody != nil {
		t.Error("the GET form takes a body")
	}
	for status, header := range map[int]string{401: "WWW-Authenticate", 429: "Retry-After", 503: "Retry-After"} {
		if post.Responses.Status(status).Value.Headers[header] == nil {
			t.Errorf("%d has no %s header", status, header)
		}
	}
	ok := post.Responses.Status(200).Value
	if ok.Content.Get("application/json") == nil || ok.Content.Get("text/event-stream") == nil {
		t.Errorf("200: content %v", ok.Content)
	}
	for _, event := range []string{"progress", "result", "error"} {
		if !strings.Contains(*ok.Description, event) || !strings.Contains(doc.Info.Description, "`"+event+"`") {
			t.Errorf("the 200 response does not describe the %s event", event)
		}
	}
	problem := doc.Components.Schemas["Problem"].Value
	for _, field := range []string{"type", "title", "status", "detail", "code", "reason", "errors", "result", "inputRequests", "error"} {
		if problem.Properties[field] == nil {
			t.Errorf("Problem has no %s", field)
		}
	}
	if err := problem.VisitJSON(map[string]any{"type": "urn:stdiomcp:problem:timeout", "title": "The call timed out", "status": 504.0}); err != nil {
		t.Errorf("a timeout problem does not fit: %v", err)
	}
	if err := problem.VisitJSON(map[string]any{"title": "no type"}); err == nil {
		t.Error("a problem without type and status fits")
	}
	if got := fmt.Sprint(doc.Security); !strings.Contains(got, "bearer") || len(doc.Security) != 2 || len(doc.Security[0]) != 0 {
		t.Errorf("security %v, want optional bearer", got)
	}
	if doc.Components.SecuritySchemes["bearer"].Value.Scheme != "bearer" {
		t.Error("no bearer scheme")
	}
}

func TestRebase(t *testing.T) {
	const at = "#/components/schemas/t"
	for _, tc := range []struct{ name, in, want string }{
		{"no references", `{"type":"object",  "properties":{}}`, `{"type":"object",  "properties":{}}`},
		{"pointer", `{"$defs":{"a":{}},"properties":{"x":{"$ref":"#/$defs/a"}}}`, `{"$defs":{"a":{}},"properties":{"x":{"$ref":"#/components/schemas/t/$defs/a"}}}`},
		{"root", `{"items":{"$ref":"#"}}`, `{"items":{"$ref":"#/components/schemas/t"}}`},
		{"array of schemas", `{"anyOf":[{"type":"null"},{"$ref":"#/$defs/a"}]}`, `{"anyOf":[{"type":"null"},{"$ref":"#/components/schemas/t/$defs/a"}]}`},
		{"escaped key", `{"not":{"\u0024ref":"#/x"}}`, `{"not":{"\u0024ref":"#/components/schemas/t/x"}}`},
		{"anchor", `{"$defs":{"a b":{"$anchor":"A","type":"string"}},"not":{"$ref":"#A"}}`, `{"$defs":{"a b":{"$anchor":"A","type":"string"}},"not":{"$ref":"#/components/schemas/t/$defs/a%20b"}}`},
		{"draft-07 anchor", `{"definitions":{"a/b":{"$id":"#A"}},"not":{"$ref":"#A"}}`, `{"definitions":{"a/b":{"$id":"#A"}},"not":{"$ref":"#/components/schemas/t/definitions/a~1b"}}`},
		{"unknown anchor", `{"not":{"$ref":"#B"}}`, `{"not":{"$ref":"#B"}}`},
		{"other document", `{"not":{"$ref":"https://example.com/s.json#/a"}}`, `{"not":{"$ref":"https://example.com/s.json#/a"}}`},
		{"own $id", `{"$id":"https://example.com/s","not":{"$ref":"#/a"}}`, `{"$id":"https://example.com/s","not":{"$ref":"#/a"}}`},
		{"nested $id", `{"properties":{"x":{"$id":"urn:x","not":{"$ref":"#/a"}},"y":{"$ref":"#/a"}}}`, `{"properties":{"x":{"$id":"urn:x","not":{"$ref":"#/a"}},"y":{"$ref":"#/components/schemas/t/a"}}}`},
		{"data", `{"const":{"$ref":"#/a"},"default":{"$ref":"#/a"},"examples":[{"$ref":"#/a"}],"x-ref":{"$ref":"#/a"}}`, `{"const":{"$ref":"#/a"},"default":{"$ref":"#/a"},"examples":[{"$ref":"#/a"}],"x-ref":{"$ref":"#/a"}}`},
		{"property named $ref", `{"properties":{"$ref":{"type":"string"}}}`, `{"properties":{"$ref":{"type":"string"}}}`},
		{"not a string", `{"$ref":5}`, `{"$ref":5}`},
	} {
		if got := string(rebase([]byte(tc.in), at)); got != tc.want {
			t.Errorf("%s: rebase(%s)\n got %s\nwant %s", tc.name, tc.in, got, tc.want)
		}
	}
}

func FuzzToolsDocument(f *testing.F) {
	legacy, _, _ := demoTools(f)
	list, _ := json.Marshal(legacy)
	f.Add(list)
	f.Add([]byte(`[{"name":"a/b","inputSchema":{"$defs":{"a":true},"properties":{"x":{"$ref":"#/$defs/a"}}}},{"name":"a/b"},1,{"name":".."}]`))
	f.Add([]byte(`[{"name":"x","inputSchema":{"not":{"$ref":"#A"},"$defs":{"y":{"$anchor":"A"}}},"outputSchema":{"$id":"urn:x"}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		spans, err := jsonrpc.Elements(data)
		if err != nil {
			return // not a tools array
		}
		tools := make([]json.RawMessage, len(spans))
		for i, sp := range spans {
			tools[i] = json.RawMessage(data[sp.Start:sp.End])
		}
		out, err := toolsDocument(tools, "fuzz")
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Paths map[string]map[string]struct{ OperationID string }
		}
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		for _, raw := range tools {
			if name, ok := mcp.String(jsonrpc.Get(raw, "name")); ok && name != "" && doc.Paths["/v1/tools/"+toolPathSegment(name)]["post"].OperationID == "" {
				t.Errorf("no operation for %q", name)
			}
		}
	})
}

// BenchmarkToolsDocument generates the document for 100 tools: the demo's,
// renamed as needed, which include schemas with references.
func BenchmarkToolsDocument(b *testing.B) {
	legacy, _, _ := demoTools(b)
	var tools []json.RawMessage
	for i := 0; len(tools) < 100; i++ {
		t := legacy[i%len(legacy)]
		sp, _, err := jsonrpc.Lookup(t, "name")
		if err != nil {
			b.Fatal(err)
		}
		name, _ := mcp.String(t[sp.Start:sp.End])
		tools = append(tools, jsonrpc.Splice(t, jsonrpc.Edit{Span: sp, New: jsonrpc.Quote(fmt.Sprintf("%s_%d", name, i))}))
	}
	size := 0
	for _, t := range tools {
		size += len(t)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	var doc []byte
	for b.Loop() {
		var err error
		if doc, err = toolsDocument(tools, "bench"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(doc)), "doc-bytes")
}
