package mcp

import (
	"testing"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// A relayed listen carries the list_changed types only when it asked for
// them, resources/updated when it subscribed to anything (the child
// knows what is under which subscription), and any other type as it is.
func TestFilterPasses(t *testing.T) {
	f := Filter{PromptsListChanged: true, ResourceSubscriptions: []string{"file:///mine"}}
	none := Filter{ToolsListChanged: true}
	for _, tc := range []struct {
		f    Filter
		note string
		want bool
	}{
		{f, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`, false},
		{f, `{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}`, true},
		{f, `{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`, false},
		{f, `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///mine"}}`, true},
		{f, `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///mine/sub.txt"}}`, true},
		{none, `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///mine"}}`, false},
		{none, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`, true},
		{f, `{"jsonrpc":"2.0","method":"notifications/tasks","params":{"taskId":"t"}}`, true},
		{f, `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{}}`, true},
	} {
		m, err := jsonrpc.Parse([]byte(tc.note))
		if err != nil {
			t.Fatal(err)
		}
		if got := tc.f.Passes(m); got != tc.want {
			t.Errorf("%+v.Passes(%s) = %v, want %v", tc.f, tc.note, got, tc.want)
		}
	}
}

// A 2025 child's resources/updated reaches a listener that subscribed to
// the resource or to one it is under.
func TestFilterWantsSubResources(t *testing.T) {
	f := Filter{ResourceSubscriptions: []string{"file:///dir/", "file:///a", "test://x?y"}}
	for uri, want := range map[string]bool{
		"file:///dir/":      true,
		"file:///dir/a.txt": true,
		"file:///a":         true,
		"file:///a/b":       true,
		"file:///a#frag":    true,
		"file:///ab":        false,
		"file:///b":         false,
		"test://x?y":        true,
		"test://x":          false,
		"file:///dir":       false,
	} {
		m, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"` + uri + `"}}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Wants(m); got != want {
			t.Errorf("Wants(%s) = %v, want %v", uri, got, want)
		}
	}
}

// A listen's final response names its subscription in result._meta; the
// span is of the whole message, for an edit.
func TestResultSubscriptionID(t *testing.T) {
	for _, tc := range []struct{ resp, want string }{
		{`{"jsonrpc":"2.0","id":10,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":10}}}`, `10`},
		{`{"jsonrpc":"2.0","id":10,"result":{"resultType":"complete"}}`, ``},
		{`{"jsonrpc":"2.0","id":10,"error":{"code":-32603,"message":"x"}}`, ``},
	} {
		m, err := jsonrpc.Parse([]byte(tc.resp))
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if sp, ok := ResultSubscriptionID(m); ok {
			got = string(m.Raw[sp.Start:sp.End])
		}
		if got != tc.want {
			t.Errorf("ResultSubscriptionID(%s) = %q, want %q", tc.resp, got, tc.want)
		}
	}
}
