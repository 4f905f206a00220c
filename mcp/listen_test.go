package mcp

import (
	"testing"

	"github.com/stdiomcp/gateway/jsonrpc"
)

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
