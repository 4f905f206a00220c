package bridge

import (
	"context"
	"errors"
	"testing"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// A modern child that ends a listen with its final response names the
// listen by its own id in the result's _meta too: the client gets its own
// listen id in both places, and the rest of the result as the child wrote
// it.
func TestRelayedListenEndsUnderTheClientsID(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Options{Era: EraModern}, autoReply{discover: "result"})
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

// A modern child may send every notification type to every listen: the
// client hears only the types its filter asked for, and resources/updated
// only when it subscribed to resources (which of them, the child knows);
// a type the filter does not name (the tasks extension's) passes as the
// child sent it.
func TestRelayedListenCarriesOnlyWhatItAskedFor(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Options{Era: EraModern}, autoReply{discover: "result"})
	child := w.child()
	a := listen(t, w, context.Background(), `"p"`, `{"promptsListChanged":true}`)
	req := child.expect("subscriptions/listen")
	sub := `"_meta":{"io.modelcontextprotocol/subscriptionId":` + string(req.ID) + `}`
	for _, n := range []string{
		`"notifications/subscriptions/acknowledged","params":{` + sub + `,"notifications":{"promptsListChanged":true}}`,
		`"notifications/tools/list_changed","params":{` + sub + `}`,
		`"notifications/resources/list_changed","params":{` + sub + `}`,
		`"notifications/resources/updated","params":{` + sub + `,"uri":"file:///other"}`,
		`"notifications/resources/updated","params":{` + sub + `,"uri":"file:///mine"}`,
		`"notifications/prompts/list_changed","params":{` + sub + `}`,
		`"notifications/tasks","params":{` + sub + `,"taskId":"t1","status":"working"}`,
	} {
		child.send(`{"jsonrpc":"2.0","method":%s}`, n)
	}
	tagged := `"_meta":{"io.modelcontextprotocol/subscriptionId":"p"}`
	for _, want := range []struct{ method, params string }{
		{"notifications/subscriptions/acknowledged", `{` + tagged + `,"notifications":{"promptsListChanged":true}}`},
		{"notifications/prompts/list_changed", `{` + tagged + `}`},
		{"notifications/tasks", `{` + tagged + `,"taskId":"t1","status":"working"}`},
	} {
		if got := nextNote(t, a); got.Method != want.method || string(got.Params) != want.params {
			t.Errorf("the client got %s; want %s with params %s", got.Raw, want.method, want.params)
		}
	}
	a.Cancel("")
	a.wait()
}

// Judging a notification against a relayed listen's filter, read when the
// listen was made, costs no allocation.
func TestRelayedListenFilterCostsNothing(t *testing.T) {
	f, err := mcp.ReadFilter([]byte(`{"promptsListChanged":true}`))
	if err != nil {
		t.Fatal(err)
	}
	c := &call{listen: &f}
	tools, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","method":"` + mcp.NoteToolsChanged + `","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":3}}}`))
	prompts, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","method":"` + mcp.NotePromptsChanged + `","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":3}}}`))
	if c.relays(tools) || !c.relays(prompts) {
		t.Fatal("a listen for prompts only relays tools/list_changed, or not prompts/list_changed")
	}
	if n := testing.AllocsPerRun(100, func() { c.relays(tools); c.relays(prompts) }); n != 0 {
		t.Errorf("judging a notification allocates %v times; want 0", n)
	}
}

// A listen whose filter a child could read otherwise than the gateway is
// refused before it reaches a 2026 child, as it is for a 2025 one.
func TestRelayedListenWithAnUnreadableFilterIsRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Options{Era: EraModern}, autoReply{discover: "result"})
	child := w.child()
	for _, notes := range []string{`{"toolsListChanged":"yes"}`, `{"resourceSubscriptions":"file:///a"}`, `[]`} {
		_, err := w.b.Call(context.Background(), request(t, `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":`+notes+`}}`), Caller{Modern: true})
		if e, ok := errors.AsType[*jsonrpc.Error](err); !ok || e.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("listen with %s: %v, want invalid params", notes, err)
		}
	}
	// None reached the child: the next thing it sees is the next call.
	c := w.call(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	m := child.expect("tools/list")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`, m.ID)
	c.wait()
}
