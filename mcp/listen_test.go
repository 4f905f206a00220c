package mcp

import (
	"testing"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// A relayed listen carries the four types a filter names only when it
// asked for them, and any other type as it is.
func TestFilterPasses(t *testing.T) {
	f := Filter{PromptsListChanged: true, ResourceSubscriptions: []string{"file:///mine"}}
	for _, tc := range []struct {
		note string
		want bool
	}{
		{`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`, false},
		{`{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}`, true},
		{`{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`, false},
		{`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///mine"}}`, true},
		{`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///other"}}`, false},
		{`{"jsonrpc":"2.0","method":"notifications/resources/updated"}`, false},
		{`{"jsonrpc":"2.0","method":"notifications/tasks","params":{"taskId":"t"}}`, true},
		{`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{}}`, true},
	} {
		m, err := jsonrpc.Parse([]byte(tc.note))
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Passes(m); got != tc.want {
			t.Errorf("Passes(%s) = %v, want %v", tc.note, got, tc.want)
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
