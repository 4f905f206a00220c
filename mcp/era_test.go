package mcp

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stdiomcp/gateway/jsonrpc"
)

func parse(t *testing.T, raw string) *jsonrpc.Message {
	t.Helper()
	m, err := jsonrpc.Parse([]byte(raw))
	if err != nil {
		t.Fatalf("parse %s: %v", raw, err)
	}
	return m
}

// A legacy child's answer gets what a modern client requires; nothing
// else changes.
func TestModernResponse(t *testing.T) {
	tests := []struct{ method, in, want string }{
		{"tools/call", `"result":{"content":[]}`, `"result":{"resultType":"complete","content":[]}`},
		{"tools/list", `"result":{"tools":[]}`, `"result":{"resultType":"complete","ttlMs":0,"cacheScope":"private","tools":[]}`},
		{"resources/read", `"result":{}`, `"result":{"resultType":"complete","ttlMs":0,"cacheScope":"private"}`},
		{"resources/read", `"result": { } `, `"result": {"resultType":"complete","ttlMs":0,"cacheScope":"private" } `},
		{"tools/list", `"result":{"ttlMs":5,"tools":[],"resultType":"complete"}`, `"result":{"cacheScope":"private","ttlMs":5,"tools":[],"resultType":"complete"}`},
		{"tools/call", `"result":{"resultType":"task"}`, `"result":{"resultType":"task"}`},
		{"tools/call", `"result":[1]`, `"result":[1]`},
		{"resources/read", `"error":{"code":-32002,"message":"Resource not found","data":{"uri":"x"}}`, `"error":{"code":-32602,"message":"Resource not found","data":{"uri":"x"}}`},
		{"tools/call", `"error":{"code":-32601,"message":"no"}`, `"error":{"code":-32601,"message":"no"}`},
	}
	for _, tt := range tests {
		m := parse(t, `{"jsonrpc":"2.0","id":1,`+tt.in+`}`)
		got := string(jsonrpc.Splice(m.Raw, ModernResponse(tt.method, m)...))
		if want := `{"jsonrpc":"2.0","id":1,` + tt.want + `}`; got != want {
			t.Errorf("%s %s:\n got %s\nwant %s", tt.method, tt.in, got, want)
		}
	}
}

// A legacy client's request to a modern child carries the _meta its
// session knows, added beside what the client sent.
func TestModernRequest(t *testing.T) {
	client := Client{Capabilities: []byte(`{"sampling":{}}`), Info: []byte(`{"name":"c"}`), LogLevel: "info"}
	const all = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"c"},"io.modelcontextprotocol/logLevel":"info"`
	retry := []Member{{ParamInputResponses, []byte(`{"k":{}}`)}, {ParamRequestState, []byte(`"s2"`)}}
	tests := []struct {
		name     string
		in, want string
		client   Client
		set      []Member
	}{
		{"no params", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{` + all + `}}}`, client, nil},
		{"params without _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{` + all + `},"name":"x"}}`, client, nil},
		{"_meta with a token", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":7}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{` + all + `,"progressToken":7}}}`, client, nil},
		{"_meta null", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":null}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{` + all + `}}}`, client, nil},
		{"keys the client sent are kept", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocol/logLevel":"debug"}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"c"},"io.modelcontextprotocol/logLevel":"debug"}}}`, client, nil},
		{"no session", `{"jsonrpc":"2.0","id":1,"method":"m","params":{}}`,
			`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, Client{}, nil},
		{"a 2025 client's tasks are not the extension's", `{"jsonrpc":"2.0","id":1,"method":"m"}`,
			`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{},"extensions":{}}}}}`,
			Client{Capabilities: []byte(`{"tasks":{"requests":{}},"sampling":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`)}, nil},
		{"with a retry's members", `{"jsonrpc":"2.0","id":1,"method":"m"}`,
			`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"inputResponses":{"k":{}},"requestState":"s2"}}`, Client{}, retry},
		{"a retry's members replace the client's", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"requestState":"s1","x":1,"inputResponses":{}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"requestState":"s2","x":1,"inputResponses":{"k":{}}}}`, Client{}, retry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Read(parse(t, tt.in))
			if err != nil {
				t.Fatal(err)
			}
			got := jsonrpc.Splice(r.Raw, ModernRequest(r, tt.client, tt.set...)...)
			if string(got) != tt.want {
				t.Errorf("\n got %s\nwant %s", got, tt.want)
			}
			// What the gateway writes, a child of any decoder reads one way.
			if m, err := jsonrpc.Parse(got); err != nil {
				t.Errorf("not one JSON-RPC message: %v", err)
			} else if _, err := Read(m); err != nil {
				t.Errorf("the line for the child is ambiguous: %v", err)
			}
		})
	}
	// Without translation, set members land the same way.
	r, _ := Read(parse(t, `{"jsonrpc":"2.0","id":1,"method":"m","params":{"requestState":"s1"}}`))
	if got := string(jsonrpc.Splice(r.Raw, SetParams(r, retry)...)); got != `{"jsonrpc":"2.0","id":1,"method":"m","params":{"inputResponses":{"k":{}},"requestState":"s2"}}` {
		t.Errorf("SetParams = %s", got)
	}
}

// The gateway answers a legacy client's initialize, and a modern client's
// server/discover, from what the child told it in its own era.
func TestSynthesizedHandshakes(t *testing.T) {
	tests := []struct{ name, got, want string }{
		{"initialize from a legacy child, a version the gateway speaks",
			string(InitializeResult([]byte(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s"}}`), "2025-06-18")),
			`{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"s"}}`},
		{"initialize from a legacy child, an unknown version",
			string(InitializeResult([]byte(`{"capabilities":{},"protocolVersion":"2025-11-25"}`), "1999-01-01")),
			`{"capabilities":{},"protocolVersion":"2025-11-25"}`},
		{"initialize from a modern child",
			string(InitializeFromDiscover([]byte(`{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},"instructions":"hi","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"m"}}}`), "2025-03-26", []byte(`{"name":"gw"}`))),
			`{"protocolVersion":"2025-03-26","capabilities":{"tools":{"listChanged":false}},"serverInfo":{"name":"m"},"instructions":"hi"}`},
		// A 2025 client would wait for these notifications on the GET
		// stream, which the gateway does not offer.
		{"initialize from a legacy child that offers notifications",
			string(InitializeResult([]byte(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"prompts":{"listChanged":true},`+
				`"resources":{"subscribe":true,"listChanged":1},"logging":{"listChanged":true}},"serverInfo":{"name":"s"}}`), "2025-06-18")),
			`{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":false},"prompts":{"listChanged":false},` +
				`"resources":{"subscribe":false,"listChanged":false},"logging":{"listChanged":true}},"serverInfo":{"name":"s"}}`},
		{"initialize from a modern child that offers notifications",
			string(InitializeFromDiscover([]byte(`{"capabilities":{"resources":{"subscribe":true,"listChanged":false},"prompts":{}}}`), "2025-11-25", []byte(`{"name":"gw"}`))),
			`{"protocolVersion":"2025-11-25","capabilities":{"resources":{"subscribe":false,"listChanged":false},"prompts":{}},"serverInfo":{"name":"gw"}}`},
		// 2025-11-25's tasks are not the extension's (SEP-2663).
		{"initialize from a modern child that offers the tasks extension",
			string(InitializeFromDiscover([]byte(`{"capabilities":{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{},"x.example/other":{"a":1}}}}`), "2025-11-25", []byte(`{"name":"gw"}`))),
			`{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"extensions":{"x.example/other":{"a":1}}},"serverInfo":{"name":"gw"}}`},
		{"initialize from a modern child that names no server",
			string(InitializeFromDiscover([]byte(`{}`), "", []byte(`{"name":"gw"}`))),
			`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"gw"}}`},
		{"discover from a legacy child",
			string(DiscoverFromInitialize([]byte(`{"protocolVersion":"2025-11-25","capabilities":{"logging":{}},"serverInfo":{"name":"s","version":"1"},"instructions":"be nice"}`))),
			`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"logging":{}},"instructions":"be nice","ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}`},
		{"discover from a legacy child with 2025-11-25 tasks",
			string(DiscoverFromInitialize([]byte(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"tasks":{"list":{},"cancel":{}},"logging":{}}}`))),
			`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true},"logging":{}},"ttlMs":0,"cacheScope":"private"}`},
		{"discover from a legacy child that says little",
			string(DiscoverFromInitialize([]byte(`{"protocolVersion":"2025-11-25"}`))),
			`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{},"ttlMs":0,"cacheScope":"private"}`},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, tt.got, tt.want)
		}
	}
}

func TestInputRequired(t *testing.T) {
	reqs := []InputRequest{
		{Key: "user_name", Method: MethodElicit, Params: []byte(`{"message":"name?"}`)},
		{Key: "roots", Method: MethodRootsList},
	}
	irr := InputRequired(reqs, "gw1.state")
	want := `{"resultType":"input_required","inputRequests":{"user_name":{"method":"elicitation/create","params":{"message":"name?"}},"roots":{"method":"roots/list","params":{}}},"requestState":"gw1.state"}`
	if string(irr) != want {
		t.Errorf("InputRequired:\n got %s\nwant %s", irr, want)
	}
	got, state, err := ReadInputRequired(irr)
	reqs[1].Params = []byte("{}")
	if err != nil || string(state) != `"gw1.state"` || !reflect.DeepEqual(got, reqs) {
		t.Errorf("ReadInputRequired = %+v, %s, %v", got, state, err)
	}
	if ResultType(irr) != ResultInputRequired {
		t.Errorf("ResultType = %q", ResultType(irr))
	}
	e := MissingCapabilities([]string{"sampling", "roots", "sampling"})
	if e.Code != CodeMissingCapability || string(e.Data) != `{"requiredCapabilities":{"sampling":{},"roots":{}}}` {
		t.Errorf("MissingCapabilities = %d %s", e.Code, e.Data)
	}
	e = MissingCapabilities([]string{"elicitation.url", "sampling", "elicitation", "elicitation.form"})
	if string(e.Data) != `{"requiredCapabilities":{"elicitation":{"url":{},"form":{}},"sampling":{}}}` {
		t.Errorf("MissingCapabilities with modes = %s", e.Data)
	}
}

func TestListenVocabulary(t *testing.T) {
	f, err := ReadFilter([]byte(`{"toolsListChanged":true,"promptsListChanged":false,"resourcesListChanged":null,"resourceSubscriptions":["a","b","a"]}`))
	if want := (Filter{ToolsListChanged: true, ResourceSubscriptions: []string{"a", "b"}}); err != nil || !reflect.DeepEqual(f, want) {
		t.Errorf("ReadFilter = %+v, %v; want %+v", f, err, want)
	}
	// What the schema types otherwise is refused: acknowledged as asking
	// for nothing, its client would wait for what never comes.
	for in, says := range map[string]string{
		`{"promptsListChanged":"yes"}`:         "promptsListChanged must be a boolean",
		`{"toolsListChanged":1}`:               "toolsListChanged must be a boolean",
		`{"resourceSubscriptions":["a",1]}`:    "array of URIs",
		`{"resourceSubscriptions":"a"}`:        "array of URIs",
		`["a"]`:                                "must be an object",
		`{"resourcesListChanged":{"on":true}}`: "resourcesListChanged must be a boolean",
	} {
		var e *jsonrpc.Error
		if _, err := ReadFilter([]byte(in)); !errors.As(err, &e) || e.Code != jsonrpc.CodeInvalidParams || !strings.Contains(e.Message, says) {
			t.Errorf("ReadFilter(%s) = %v; want -32602 saying %q", in, err, says)
		}
	}
	if _, err := ReadFilter([]byte(`{"toolsListChanged":false,"ToolsListChanged":true}`)); err == nil || !strings.Contains(err.Error(), `params.notifications has a member "ToolsListChanged"`) {
		t.Errorf("an ambiguous filter: %v", err)
	}
	h := Filter{ToolsListChanged: true, PromptsListChanged: true, ResourceSubscriptions: []string{"a"}}.
		Honored([]byte(`{"capabilities":{"tools":{"listChanged":true},"prompts":{},"resources":{"subscribe":true}}}`))
	if want := (Filter{ToolsListChanged: true, ResourceSubscriptions: []string{"a"}}); !reflect.DeepEqual(h, want) {
		t.Errorf("Honored = %+v, want %+v", h, want)
	}
	for raw, want := range map[string]bool{
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`:                     true,
		`{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}`:                   false,
		`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"a"}}`: true,
		`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"c"}}`: false,
	} {
		if got := h.Wants(parse(t, raw)); got != want {
			t.Errorf("Wants(%s) = %v", raw, got)
		}
	}
	const id = `"L1"`
	for in, want := range map[string]string{
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`:                                         `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L1"}}}`,
		`{"jsonrpc":"2.0","method":"n","params":{"uri":"a"}}`:                                                   `{"jsonrpc":"2.0","method":"n","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L1"},"uri":"a"}}`,
		`{"jsonrpc":"2.0","method":"n","params":{"_meta":{"x":1}}}`:                                             `{"jsonrpc":"2.0","method":"n","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L1","x":1}}}`,
		`{"jsonrpc":"2.0","method":"n","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":17,"x":1}}}`: `{"jsonrpc":"2.0","method":"n","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L1","x":1}}}`,
	} {
		if got := string(Tagged(parse(t, in), []byte(id))); got != want {
			t.Errorf("Tagged(%s):\n got %s\nwant %s", in, got, want)
		}
	}
	if got := string(Acknowledged([]byte(id), h)); got != `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L1"},"notifications":{"toolsListChanged":true,"resourceSubscriptions":["a"]}}}` {
		t.Errorf("Acknowledged = %s", got)
	}
}

func TestParamHeaders(t *testing.T) {
	tests := []struct {
		schema string
		want   []ParamHeader
		ok     bool
	}{
		{`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"spec":{"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N"}}}}}`,
			[]ParamHeader{{"Region", []string{"region"}, "string"}, {"N", []string{"spec", "n"}, "integer"}}, true},
		{`{"properties":{"a":{"type":"string","x-mcp-header":"A"},"b":{"type":"string","x-mcp-header":"a"}}}`, []ParamHeader{{"A", []string{"a"}, "string"}}, false},
		{`{"properties":{"a":{"type":"object","x-mcp-header":"A"}}}`, nil, false},
		{`{"properties":{"a":{"type":"string","x-mcp-header":"A B"}}}`, nil, false},
		{`{"properties":{"a":{"type":"string","x-mcp-header":7}}}`, nil, false},
		{`{"properties":{"a":{"type":"string","X-MCP-HEADER":"A"}}}`, nil, true},
		{`{"properties":null}`, nil, true},
		{`not json`, nil, true},
	}
	for _, tt := range tests {
		got, ok := ParamHeaders([]byte(tt.schema))
		if ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParamHeaders(%s) = %v, %v; want %v, %v", tt.schema, got, ok, tt.want, tt.ok)
		}
	}
}

func TestVocabulary(t *testing.T) {
	for method, field := range map[string]string{"tools/call": "name", "prompts/get": "name", "resources/read": "uri", "tasks/cancel": "taskId", "tools/list": ""} {
		if got := NameField(method); got != field {
			t.Errorf("NameField(%s) = %q, want %q", method, got, field)
		}
	}
	if LogRank("debug") != 0 || LogRank("emergency") != 7 || LogRank("verbose") != -1 || len(LogLevels()) != 8 {
		t.Error("log levels out of order")
	}
	if !IsTaskMethod("tasks/get") || IsTaskMethod("tasks/") || IsTaskMethod("tools/call") {
		t.Error("IsTaskMethod")
	}
	if !IsLegacy(LatestLegacy) || IsLegacy(Modern) {
		t.Error("IsLegacy")
	}
}

// String reads what encoding/json reads, whichever way it takes.
func FuzzString(f *testing.F) {
	for _, s := range []string{`"tools/call"`, `"a\"b"`, `"caf\u00e9"`, "\"caf\xc3\xa9\"", "\"\xff\"", `"tab	in"`, `"`, `""`, `"x" `, `"a"b"`, `1`, `"\ud800"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		got, ok := String(v)
		var want string
		wantOK := len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &want) == nil
		if ok != wantOK || got != want {
			t.Fatalf("String(%q) = %q, %v; encoding/json: %q, %v", v, got, ok, want, wantOK)
		}
	})
}

// An elicitation's mode is taken only by a client that declared it; an
// empty elicitation capability is form alone (2025-11-25).
func TestCanElicit(t *testing.T) {
	for _, tc := range []struct {
		caps, params string
		want         bool
	}{
		{`{"elicitation":{}}`, `{"message":"m","requestedSchema":{}}`, true},
		{`{"elicitation":{}}`, `{"mode":"form","message":"m"}`, true},
		{`{"elicitation":{}}`, `{"mode":"url","message":"m","url":"https://x"}`, false},
		{`{"elicitation":{"form":{}}}`, `{"mode":"url"}`, false},
		{`{"elicitation":{"url":{}}}`, `{"mode":"url"}`, true},
		{`{"elicitation":{"url":{}}}`, `{"message":"m"}`, false},
		{`{"elicitation":{"form":{},"url":{}}}`, `{"mode":"url"}`, true},
		{`{"elicitation":{"future":{}}}`, `{}`, true},
		{`{"sampling":{}}`, `{}`, false},
		{`{"elicitation":{}}`, `{"mode":"telepathy"}`, false},
	} {
		if got := CanElicit([]byte(tc.caps), ElicitationMode([]byte(tc.params))); got != tc.want {
			t.Errorf("CanElicit(%s, mode of %s) = %v, want %v", tc.caps, tc.params, got, tc.want)
		}
	}
}
