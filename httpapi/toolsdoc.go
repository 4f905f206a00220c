package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// toolsDocument returns an OpenAPI 3.1 document (JSON) with one operation per tool.
// tools are the child's tool objects, each exactly as the child wrote it.
//
// A tool that is not an object, or has no name, is left out; of two tools
// with one name, the first is kept, as a call reaches the first. The
// tools' schemas are embedded as they are, but for their local
// references, which are made to point where the schema now sits (see
// rebase).
func toolsDocument(tools []json.RawMessage, title string) ([]byte, error) {
	if title == "" {
		title = "Tools"
	}
	digest := sha256.New()
	for _, t := range tools {
		digest.Write(t)
		digest.Write([]byte{0})
	}
	doc := oasDocument{
		OpenAPI: "3.1.0",
		Info: oasInfo{
			Title: title,
			// The version names the tool list: it changes when a tool does.
			Version:     hex.EncodeToString(digest.Sum(nil)[:6]),
			Description: apiDescription,
		},
		Security: json.RawMessage(`[{},{"bearer":[]}]`),
		Paths:    map[string]map[string]*oasOperation{},
		Components: oasComponents{
			Schemas:         map[string]json.RawMessage{"Problem": problemSchema, "CallToolResult": callToolResultSchema},
			Responses:       refusalComponents(),
			Parameters:      sharedParameters,
			Headers:         sharedHeaders,
			SecuritySchemes: json.RawMessage(`{"bearer":{"type":"http","scheme":"bearer","description":"A token the gateway accepts, when it asks for one."}}`),
		},
	}
	ids := operationIDs{used: map[string]bool{}, next: map[string]int{}}
	for _, raw := range tools {
		t, ok := readTool(raw)
		if !ok {
			continue
		}
		path := "/v1/tools/" + toolPathSegment(t.name)
		if doc.Paths[path] != nil {
			continue // a second tool of that name: calls reach the first
		}
		id := ids.unique(operationID(t.name))
		item := map[string]*oasOperation{}
		doc.Paths[path] = item

		args := id + "_arguments"
		doc.Components.Schemas[args] = embed(t.inputSchema, schemaPointer(args))
		if doc.Components.Schemas[args] == nil {
			// Whatever it says, a tool takes an object of arguments.
			doc.Components.Schemas[args] = json.RawMessage(`{"type":"object"}`)
		}
		result := componentRef("CallToolResult")
		if out := embed(t.outputSchema, schemaPointer(id+"_output")); out != nil {
			doc.Components.Schemas[id+"_output"] = out
			doc.Components.Schemas[id+"_result"] = structuredResult(id + "_output")
			result = componentRef(id + "_result")
		}
		post := t.operation(id, responses(result, true))
		post.Parameters = []json.RawMessage{json.RawMessage(`{"$ref":"#/components/parameters/timeout"}`)}
		post.RequestBody = &oasRequestBody{
			Description: "The tool's arguments. An empty body means {}.",
			Content:     map[string]oasMedia{"application/json": {Schema: componentRef(args)}},
		}
		item["post"] = post
		if t.readOnly {
			get := t.operation(ids.unique(id+"_get"), responses(result, false))
			get.Description = strings.TrimSpace("Calls the read-only tool with its arguments in the query (for EventSource). " + t.description)
			get.Parameters = []json.RawMessage{argumentsParameter(args), json.RawMessage(`{"$ref":"#/components/parameters/timeout"}`)}
			item["get"] = get
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // a schema's "<" stays as the child wrote it
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode the tools document: %w", err)
	}
	return buf.Bytes(), nil
}

// docTool is what the document needs of one tool object.
type docTool struct {
	name, summary, description string
	readOnly                   bool
	inputSchema, outputSchema  []byte
}

// readTool reads a tool object with the scanner every other reader of
// the child's messages uses: a member it could read two ways counts as
// absent, so a tool whose name is ambiguous is left out.
func readTool(raw []byte) (docTool, bool) {
	tool := scanObject(raw)
	name, ok := mcp.String(tool.get("name"))
	if !ok || name == "" {
		return docTool{}, false
	}
	annotations := scanObject(tool.get("annotations"))
	t := docTool{name: name, readOnly: string(annotations.get("readOnlyHint")) == "true"}
	// MCP's order for a display name: title, annotations.title, name.
	if s, ok := mcp.String(tool.get("title")); ok && s != "" {
		t.summary = s
	} else if s, ok := mcp.String(annotations.get("title")); ok && s != "" {
		t.summary = s
	} else {
		t.summary = name
	}
	t.description, _ = mcp.String(tool.get("description"))
	t.inputSchema = tool.get("inputSchema")
	t.outputSchema = tool.get("outputSchema")
	return t, true
}

// jsonObject is a JSON object scanned once, for reading several members:
// what jsonrpc.Get reads, without a scan per member.
type jsonObject struct {
	raw     []byte
	members []jsonrpc.Member
}

func scanObject(raw []byte) jsonObject {
	ms, err := jsonrpc.Members(raw)
	if err != nil {
		return jsonObject{}
	}
	return jsonObject{raw, ms}
}

// get is the value of the member key, or nil when it is absent or
// ambiguous.
func (o jsonObject) get(key string) []byte {
	sp, found, err := jsonrpc.Find(o.members, key)
	if !found || err != nil {
		return nil
	}
	return o.raw[sp.Start:sp.End]
}

// embed is a tool's schema, to be placed at the URI fragment at, or nil
// when it is not a schema object.
// A schema that does not compile (a reference that resolves nowhere,
// say) is left out, as the gateway leaves its check to the child: in the
// document, it would make the whole of it unreadable to a generator.
func embed(schema []byte, at string) json.RawMessage {
	if len(schema) == 0 || schema[0] != '{' {
		return nil
	}
	if _, err := compileSchema(schema); err != nil {
		return nil
	}
	return rebase(schema, at)
}

func (t docTool) operation(id string, responses json.RawMessage) *oasOperation {
	return &oasOperation{OperationID: id, Summary: t.summary, Description: t.description, Responses: responses}
}

// responses are an operation's: its result (the schema result) and the
// refusals, those about a body only when it takes one.
func responses(result json.RawMessage, body bool) json.RawMessage {
	b := []byte(`{"200":{"description":"The tool's result: its CallToolResult as JSON, or, with Accept: text/event-stream, ` +
		`the events progress (as often as the tool reports), then result (the CallToolResult) or error (a Problem); see the description of the API.",` +
		`"content":{"application/json":{"schema":`)
	b = append(b, result...)
	b = append(b, `},"text/event-stream":{"schema":{"type":"string"}}}}`...)
	for _, r := range refusals {
		if !r.bodyOnly || body {
			b = append(append(append(append(b, `,"`...), r.status...), `":{"$ref":"#/components/responses/`...), r.name...)
			b = append(b, `"}`...)
		}
	}
	return append(b, '}')
}

// refusal is a problem response of the operations: which of the
// contract's problem kinds come with its status.
type refusal struct {
	status, name, header string
	bodyOnly             bool // only for a request with a body
	description          string
}

var refusals = []refusal{
	{"400", "BadRequest", "", false, "bad-request: the body, a query parameter or the timeout is malformed; invalid-arguments: the arguments fail the input schema (see errors); child-error: the server refused the arguments (-32602)."},
	{"401", "Unauthorized", "WWW-Authenticate", false, "unauthorized: credentials are missing or not valid."},
	{"403", "Forbidden", "", false, "forbidden: the tool is outside the caller's policy, or the Host or Origin is not allowed (reason says which)."},
	{"404", "NotFound", "", false, "unknown-tool: the server has no tool of that name (any more); child-error: the server answered -32601 or -32002."},
	{"413", "TooLarge", "", true, "too-large: the body is over the gateway's limit."},
	{"415", "UnsupportedMediaType", "", true, "unsupported-media-type: a body without Content-Type: application/json, or with a Content-Encoding (send it uncompressed)."},
	{"422", "ToolError", "", false, "tool-error: the tool's result reports an error (in result); input-required: the tool asks for input the REST API cannot give (inputRequests)."},
	{"429", "RateLimited", "Retry-After", false, "rate-limited: over the client's rate or stream limit."},
	{"502", "BadGateway", "", false, "child-error: the server answered with an error (in error); answer-too-large: the server's answer is over the gateway's limit; bad-answer: the server's answer is not valid JSON-RPC."},
	{"503", "Unavailable", "Retry-After", false, "unavailable: no server ready, shutting down, overloaded, or the OAuth issuer's keys cannot be fetched."},
	{"504", "Timeout", "", false, "timeout: the call's timeout passed; the server was told to cancel it, if the call had reached it."},
}

// refusalComponents is the document's components/responses.
func refusalComponents() json.RawMessage {
	b := []byte{'{'}
	for i, r := range refusals {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(append(b, jsonrpc.Quote(r.name)...), `:{"description":`...), jsonrpc.Quote(r.description)...)
		if r.header != "" {
			b = append(b, `,"headers":{"`+r.header+`":{"$ref":"#/components/headers/`+r.header+`"}}`...)
		}
		b = append(b, `,"content":{"application/problem+json":{"schema":{"$ref":"#/components/schemas/Problem"}}}}`...)
	}
	return append(b, '}')
}

// toolPathSegment is the name as the path segment a client sends. Go's
// path escaping leaves "." and ".." alone, which URL clients would take
// for dot segments and remove; escaped, RFC 3986 clients (curl, Go) keep
// them as names, though browsers, which follow the WHATWG URL standard,
// still resolve %2E.
func toolPathSegment(name string) string {
	if name == "." || name == ".." {
		return strings.Repeat("%2E", len(name))
	}
	return url.PathEscape(name)
}

// operationID is the name reduced to what code generators take for an
// identifier: ASCII letters, digits and underscores.
func operationID(name string) string {
	var b strings.Builder
	letters := false
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
			letters = true
		default:
			b.WriteByte('_')
		}
	}
	if !letters {
		return "tool"
	}
	return b.String()
}

// operationIDs hands out operationIds, each once.
type operationIDs struct {
	used map[string]bool
	next map[string]int // the suffix to try next for an id: those below are taken
}

// unique returns id, or id with the first free suffix _2, _3... when
// another operation has it. Remembering where the suffixes stand keeps a
// list of many names that share an identifier from costing its square.
func (ids *operationIDs) unique(id string) string {
	candidate, n := id, max(ids.next[id], 2)
	for ids.used[candidate] {
		candidate = id + "_" + strconv.Itoa(n)
		n++
	}
	ids.next[id] = n
	ids.used[candidate] = true
	return candidate
}

// schemaPointer is where the schema component of that name sits; names
// here are made of URI-safe characters only.
func schemaPointer(name string) string { return "#/components/schemas/" + name }

func componentRef(name string) json.RawMessage {
	return json.RawMessage(`{"$ref":"` + schemaPointer(name) + `"}`)
}

func structuredResult(output string) json.RawMessage {
	return json.RawMessage(`{"allOf":[{"$ref":"#/components/schemas/CallToolResult"}],"required":["structuredContent"],` +
		`"properties":{"structuredContent":` + string(componentRef(output)) + `}}`)
}

func argumentsParameter(schema string) json.RawMessage {
	return json.RawMessage(`{"name":"arguments","in":"query","required":false,` +
		`"description":"The tool's arguments: a JSON object, URL-encoded; absent means {}.",` +
		`"content":{"application/json":{"schema":` + string(componentRef(schema)) + `}}}`)
}

// The document's shape, as far as it is generated per tool; the rest is
// constant JSON below.
type oasDocument struct {
	OpenAPI    string                              `json:"openapi"`
	Info       oasInfo                             `json:"info"`
	Security   json.RawMessage                     `json:"security"`
	Paths      map[string]map[string]*oasOperation `json:"paths"`
	Components oasComponents                       `json:"components"`
}

type oasInfo struct {
	Title       string `json:"title"`
	Version     string `json:"version"`
	Description string `json:"description"`
}

type oasComponents struct {
	Schemas         map[string]json.RawMessage `json:"schemas"`
	Responses       json.RawMessage            `json:"responses"`
	Parameters      json.RawMessage            `json:"parameters"`
	Headers         json.RawMessage            `json:"headers"`
	SecuritySchemes json.RawMessage            `json:"securitySchemes"`
}

type oasOperation struct {
	OperationID string            `json:"operationId"`
	Summary     string            `json:"summary,omitempty"`
	Description string            `json:"description,omitempty"`
	Parameters  []json.RawMessage `json:"parameters,omitempty"`
	RequestBody *oasRequestBody   `json:"requestBody,omitempty"`
	Responses   json.RawMessage   `json:"responses"`
}

type oasRequestBody struct {
	Description string              `json:"description"`
	Content     map[string]oasMedia `json:"content"`
}

type oasMedia struct {
	Schema json.RawMessage `json:"schema"`
}

// apiDescription says what every operation has in common.
const apiDescription = "The server's tools, each a REST operation of the gateway, generated from the server's tools/list: " +
	"the server's own schemas describe each tool's arguments and structured result.\n\n" +
	"A call answers with the tool's CallToolResult as the server wrote it (Accept: application/json, the default), " +
	"or with Accept: text/event-stream a stream of events: `progress` (data: {\"progress\":N,\"total\":N,\"message\":\"...\"}, " +
	"total and message when the server sent them) as often as the tool reports, then exactly one `result` (data: the CallToolResult) " +
	"or `error` (data: a Problem, with its status), and the stream ends; comments keep a quiet stream alive. " +
	"A request refused before the call starts is answered with a Problem, not a stream. Closing the connection cancels the call.\n\n" +
	"A tool whose result reports an error (isError) is a 422 Problem of type urn:stdiomcp:problem:tool-error, with the result in result."

var (
	problemSchema = json.RawMessage(`{"type": "object", "required": ["type", "title", "status"],
	"description": "An RFC 9457 problem. type is urn:stdiomcp:problem:<kind>, a stable name to switch on.",
	"properties": {
		"type": {"type": "string", "examples": ["urn:stdiomcp:problem:invalid-arguments"]},
		"title": {"type": "string"},
		"status": {"type": "integer"},
		"detail": {"type": "string"},
		"code": {"type": "integer", "description": "The JSON-RPC error code behind the problem."},
		"reason": {"type": "string", "description": "The gateway's reason word."},
		"errors": {"type": "array", "description": "Where the arguments fail the tool's input schema (invalid-arguments).",
			"items": {"type": "object", "required": ["path", "message"], "properties": {
				"path": {"type": "string", "description": "A JSON pointer into the arguments."},
				"message": {"type": "string"}}}},
		"result": {"$ref": "#/components/schemas/CallToolResult", "description": "The tool's result, which reports an error (tool-error)."},
		"inputRequests": {"type": "object", "description": "What the tool asks the client for (input-required)."},
		"error": {"type": "object", "description": "The server's JSON-RPC error object (child-error).",
			"properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {}}}
	}
}`)

	callToolResultSchema = json.RawMessage(`{"type": "object", "description": "MCP's CallToolResult, as the server wrote it.", "required": ["content"],
	"properties": {
		"content": {"type": "array", "items": {"type": "object", "required": ["type"], "properties": {"type": {"type": "string"}}}},
		"structuredContent": {"description": "The structured result, when the tool gives one."},
		"isError": {"type": "boolean"},
		"resultType": {"type": "string"},
		"_meta": {"type": "object"}
	}
}`)

	sharedParameters = json.RawMessage(`{
	"timeout": {"name": "timeout", "in": "query", "required": false,
		"description": "How long the call may take, as a Go duration (1500ms, 10s, 2m): more than 0 and at most the gateway's limit. When it passes, the call is cancelled and the answer is 504.",
		"schema": {"type": "string", "pattern": "^(([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$", "examples": ["10s"]}}
}`)

	sharedHeaders = json.RawMessage(`{
	"Retry-After": {"description": "Seconds to wait before trying again.", "schema": {"type": "integer"}},
	"WWW-Authenticate": {"description": "The authentication scheme the gateway asks for.", "schema": {"type": "string"}}
}`)
)
