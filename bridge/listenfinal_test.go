package bridge

import (
	"context"
	"testing"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// A modern child that ends a listen with its final response names the
// listen by its own id in the result's _meta too: the client gets its own
// listen id in both places, and the rest of the result as the child wrote
// it.
func TestRelayedListenEndsUnderTheClientsID(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Options{Era: EraModern}, autoReply{})
	child := w.child()
	a := listen(t, w, context.Background(), `"listenA"`, `{"toolsListChanged":true}`)
	req := child.expect("subscriptions/listen")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","_meta":{"note":%s,"io.modelcontextprotocol/subscriptionId":%s},"extra":%s}}`, req.ID, req.ID, req.ID, req.ID)
	resp, err := a.wait()
	if err != nil {
		t.Fatal(err)
	}
	m, _ := jsonrpc.Parse(resp)
	want := `{"resultType":"complete","_meta":{"note":` + string(req.ID) + `,"io.modelcontextprotocol/subscriptionId":"listenA"},"extra":` + string(req.ID) + `}`
	if string(m.ID) != `"listenA"` || string(m.Result) != want {
		t.Errorf("the listen's final response = %s; want id \"listenA\" and result %s", resp, want)
	}
}
