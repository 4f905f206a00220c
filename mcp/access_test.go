package mcp

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stdiomcp/gateway/jsonrpc"
)

func readRequest(t *testing.T, raw string) *Request {
	t.Helper()
	m, err := jsonrpc.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Read(m)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTargets(t *testing.T) {
	for _, tc := range []struct {
		req  string
		want []Target
		err  string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, []Target{{KindTool, "echo"}}, ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}`, nil, "params.name must be a string"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, nil, "params.name must be a string"},
		{`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"gr\u0065et"}}`, []Target{{KindPrompt, "greet"}}, ""},
		{`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"demo://a"}}`, []Target{{KindResource, "demo://a"}}, ""},
		{`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"demo://b"}}`, []Target{{KindResource, "demo://b"}}, ""},
		{`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"}}}`, []Target{{KindPrompt, "p"}}, ""},
		{`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"demo://{x}"}}}`, []Target{{KindResource, "demo://{x}"}}, ""},
		{`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p","Name":"q"}}}`, nil, "ignore letter case"},
		{`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/tool","name":"p"}}}`, nil, "params.ref.type"},
		{`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{}}`, nil, "params.ref must be an object"},
		{`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["demo://a","demo://b"]}}}`,
			[]Target{{KindResource, "demo://a"}, {KindResource, "demo://b"}}, ""},
		{`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}`, nil, ""},
		{`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{}}`, nil, ""},
		{`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":"demo://b"}}}`, nil, "array of URIs"},
		{`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":[{"uri":"demo://b"}]}}}`, nil, "array of URIs"},
		{`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":["demo://b"]}}`, nil, "must be an object"},
	} {
		got, err := Targets(readRequest(t, tc.req))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: err %v, want one saying %q", tc.req, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.req, err)
		case !slices.Equal(got, tc.want):
			t.Errorf("%s: %v, want %v", tc.req, got, tc.want)
		}
	}
}

// A request that names its target twice is refused before Targets can be
// asked: the child and the policy must read the same name.
func TestTargetsNamedTwiceNeverReachPolicy(t *testing.T) {
	m, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","NAME":"rm"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var e *jsonrpc.Error
	if _, err := Read(m); !errors.As(err, &e) || e.Code != jsonrpc.CodeInvalidRequest {
		t.Fatalf("Read of a case-variant name: %v, want a -32600", err)
	}
}

func TestAccessOf(t *testing.T) {
	for method, want := range map[string]Access{
		MethodToolsCall: AccessTargets, MethodToolsList: AccessList, MethodTemplatesList: AccessList,
		MethodDiscover: AccessOpen, MethodTasksGet: AccessOpen, MethodTasksResult: AccessOpen, MethodTasksList: AccessUnknown, "tasks/run_shell": AccessUnknown, MethodListen: AccessTargets,
		"admin/exec": AccessUnknown, NoteCancelled: AccessOpen, "notifications/custom": AccessUnknown, "tasks/": AccessUnknown,
	} {
		if got := AccessOf(method); got != want {
			t.Errorf("AccessOf(%q) = %v, want %v", method, got, want)
		}
	}
}

func TestFilterList(t *testing.T) {
	allow := func(names ...string) func(Target) bool {
		return func(t Target) bool { return slices.Contains(names, t.Name) }
	}
	for _, tc := range []struct {
		name, method, resp string
		keep               func(Target) bool
		want               string
		removed            int
		err                bool
	}{
		{"tools", MethodToolsList,
			`{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"a","x":1}, {"name":"b"},{"name":"c","inputSchema":{"name":"a"}}],"nextCursor":"n"}}`,
			allow("a", "c"),
			`{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"a","x":1},{"name":"c","inputSchema":{"name":"a"}}],"nextCursor":"n"}}`, 1, false},
		{"nothing removed: the same bytes", MethodToolsList,
			`{"jsonrpc":"2.0","id":7,"result":{"tools":[ {"name":"a"} ]}}`, allow("a"),
			`{"jsonrpc":"2.0","id":7,"result":{"tools":[ {"name":"a"} ]}}`, 0, false},
		{"public becomes private", MethodResourcesList,
			`{"jsonrpc":"2.0","id":"x","result":{"resources":[{"uri":"a"},{"uri":"b"}],"ttlMs":5,"cacheScope":"public"}}`, allow("b"),
			`{"jsonrpc":"2.0","id":"x","result":{"resources":[{"uri":"b"}],"ttlMs":5,"cacheScope":"private"}}`, 1, false},
		{"public becomes private when nothing is removed too", MethodToolsList,
			`{"jsonrpc":"2.0","id":"x","result":{"tools":[{"name":"b"}],"cacheScope":"public"}}`, allow("b"),
			`{"jsonrpc":"2.0","id":"x","result":{"tools":[{"name":"b"}],"cacheScope":"private"}}`, 0, false},
		{"templates by uriTemplate", MethodTemplatesList,
			`{"jsonrpc":"2.0","id":1,"result":{"resourceTemplates":[{"uriTemplate":"a/{x}"},{"uriTemplate":"b/{x}"}]}}`, allow("a/{x}"),
			`{"jsonrpc":"2.0","id":1,"result":{"resourceTemplates":[{"uriTemplate":"a/{x}"}]}}`, 1, false},
		{"an entry without a readable name goes", MethodPromptsList,
			`{"jsonrpc":"2.0","id":1,"result":{"prompts":[{"name":"a"},{"title":"a"},{"name":"a","Name":"b"},7]}}`, allow("a"),
			`{"jsonrpc":"2.0","id":1,"result":{"prompts":[{"name":"a"}]}}`, 3, false},
		{"all removed", MethodToolsList,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}]}}`, allow(),
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`, 1, false},
		{"an error passes", MethodToolsList,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`, allow(),
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`, 0, false},
		{"a list named twice is refused", MethodToolsList,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[],"tools":[{"name":"b"}]}}`, allow(), "", 0, true},
		{"a list that is not an array is refused", MethodToolsList,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":{"name":"b"}}}`, allow(), "", 0, true},
	} {
		got, removed, err := FilterList(tc.method, []byte(tc.resp), tc.keep)
		if (err != nil) != tc.err {
			t.Errorf("%s: err %v", tc.name, err)
			continue
		}
		if !tc.err && (string(got) != tc.want || removed != tc.removed) {
			t.Errorf("%s:\n got %s (removed %d)\nwant %s (removed %d)", tc.name, got, removed, tc.want, tc.removed)
		}
	}
}
