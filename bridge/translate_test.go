package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stdiomcp/gateway/mcp"
)

var modernCaller = Caller{Modern: true, Capabilities: json.RawMessage(`{}`)}

// A legacy child's answers get what a modern client requires, and nothing
// else changes; a legacy client gets them untouched.
func TestLegacyChildAnswersForModernClients(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method, answer string
		caller         Caller
		want           string
	}{
		{"tools/call", `"result":{"content":[]}`, modernCaller, `"result":{"resultType":"complete","content":[]}`},
		{"tools/list", `"result":{"tools":[]}`, modernCaller, `"result":{"resultType":"complete","ttlMs":0,"cacheScope":"private","tools":[]}`},
		{"resources/read", `"result":{}`, modernCaller, `"result":{"resultType":"complete","ttlMs":0,"cacheScope":"private"}`},
		{"tools/list", `"result":{"ttlMs":5,"tools":[],"resultType":"complete"}`, modernCaller, `"result":{"cacheScope":"private","ttlMs":5,"tools":[],"resultType":"complete"}`},
		{"resources/read", `"error":{"code":-32002,"message":"Resource not found","data":{"uri":"x"}}`, modernCaller, `"error":{"code":-32602,"message":"Resource not found","data":{"uri":"x"}}`},
		{"tools/call", `"error":{"code":-32601,"message":"no"}`, modernCaller, `"error":{"code":-32601,"message":"no"}`},
		{"tools/list", `"result":{"tools":[]}`, Caller{}, `"result":{"tools":[]}`},
		{"resources/read", `"error":{"code":-32002,"message":"gone"}`, Caller{}, `"error":{"code":-32002,"message":"gone"}`},
	}
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	for _, tt := range tests {
		c, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":"x","method":"`+tt.method+`","params":{}}`), tt.caller)
		if err != nil {
			t.Fatal(err)
		}
		m := child.expect(tt.method)
		child.send(`{"jsonrpc":"2.0","id":%s,%s}`, m.ID, tt.answer)
		resp, err := c.wait()
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"jsonrpc":"2.0","id":"x",` + tt.want + `}`; string(resp) != want {
			t.Errorf("%s for modern=%v: got %s\nwant %s", tt.method, tt.caller.Modern, resp, want)
		}
	}
}

// server/discover for a legacy child is answered by the gateway from the
// child's InitializeResult; for a modern child it is relayed.
func TestDiscover(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	c, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":5,"method":"server/discover","params":{}}`), modernCaller)
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := c.wait()
	var r struct {
		Result struct {
			ResultType        string
			SupportedVersions []string
			Capabilities      json.RawMessage
			Instructions      string
			TTLMs             *int `json:"ttlMs"`
			CacheScope        string
			Meta              map[string]json.RawMessage `json:"_meta"`
		}
	}
	json.Unmarshal(resp, &r)
	got := r.Result
	if got.ResultType != "complete" || fmt.Sprint(got.SupportedVersions) != "[2026-07-28]" || string(got.Capabilities) != `{"tools":{"listChanged":true},"resources":{"subscribe":true},"logging":{}}` ||
		got.Instructions != "be nice" || got.TTLMs == nil || got.CacheScope != "private" || string(got.Meta[mcp.MetaServerInfo]) != `{"name":"fake","version":"1"}` {
		t.Errorf("synthesized discover = %s", resp)
	}
	// The child never saw it.
	c2 := w.call(context.Background(), `{"jsonrpc":"2.0","id":6,"method":"tools/list"}`)
	if m := child.next(); m.Method != "tools/list" {
		t.Fatalf("child got %s", m.Raw)
	} else {
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
	}
	c2.wait()

	mw := newWorld(t, Options{Era: EraAuto}, autoReply{discover: "result"})
	modern := mw.child()
	c, err = callOn(mw.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":5,"method":"server/discover","params":{}}`), modernCaller)
	if err != nil {
		t.Fatal(err)
	}
	<-modern.got // the probe
	if m := <-modern.got; m.Method != "server/discover" {
		t.Fatalf("modern child got %s, want the relayed server/discover", m.Raw)
	}
	// The fake child answers discover by itself; the answer comes back with
	// the client's id and the child's bytes.
	if resp, _ := c.wait(); string(resp) != `{"jsonrpc":"2.0","id":5,"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"fake","version":"1"}}}}` {
		t.Errorf("relayed discover = %s", resp)
	}
}

// Log messages go to the one call that asked for them, filtered by level;
// when the gateway cannot tell whose they are, nobody gets them.
func TestLogRouting(t *testing.T) {
	t.Parallel()
	// The child answers no probe, so that a call whose client left counts
	// as long as it can (see cancelled).
	w := newWorld(t, legacy(), autoReply{initialize: true, ignorePing: true})
	child := w.child()
	logs := func(c *call) []string {
		var out []string
		for {
			<-c.Wake()
			notes, _, done, _ := c.Take()
			for _, n := range notes {
				out = append(out, string(n))
			}
			if done {
				return out
			}
		}
	}
	logLine := func(level string) string {
		return `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"` + level + `","data":"x"}}`
	}

	// One call, at info: the child is first set to log at info (its level is
	// child-wide); the debug line is filtered, the warning passes.
	c, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`), Caller{LogLevel: "info"})
	if err != nil {
		t.Fatal(err)
	}
	if set := child.expect("logging/setLevel"); string(set.Params) != `{"level":"info"}` {
		t.Errorf("setLevel params = %s", set.Params)
	} else {
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, set.ID)
	}
	m := child.expect("tools/call")
	child.send(logLine("debug"))
	child.send(logLine("warning"))
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
	if got := logs(c); len(got) != 1 || !strings.Contains(got[0], "warning") {
		t.Errorf("one call at info got %q, want the warning only", got)
	}

	// A less verbose level needs no change to the child. Two calls in flight
	// on a legacy child: a line could be either's, so neither gets it.
	a, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call"}`), Caller{LogLevel: "warning"})
	if err != nil {
		t.Fatal(err)
	}
	ma := child.expect("tools/call")
	b := w.call(context.Background(), `{"jsonrpc":"2.0","id":3,"method":"tools/call"}`)
	mb := child.expect("tools/call")
	child.send(logLine("error"))
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, ma.ID)
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, mb.ID)
	if got := append(logs(a), logs(b)...); len(got) != 0 {
		t.Errorf("an ambiguous log line was delivered: %q", got)
	}

	// A call whose client left may still be running on the child (told to
	// cancel it, the child has not answered): a line could be its, so the
	// one call in flight does not get it.
	gone, leave := context.WithCancel(context.Background())
	g, err := callOn(w.b, gone, request(t, `{"jsonrpc":"2.0","id":4,"method":"tools/call"}`), Caller{})
	if err != nil {
		t.Fatal(err)
	}
	child.expect("tools/call")
	leave()
	g.wait()
	child.expect("notifications/cancelled")
	d, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":5,"method":"tools/call"}`), Caller{LogLevel: "warning"})
	if err != nil {
		t.Fatal(err)
	}
	md := child.expect("tools/call")
	child.send(logLine("error"))
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, md.ID)
	if got := logs(d); len(got) != 0 {
		t.Errorf("a log line that may be a left call's was delivered: %q", got)
	}
}

// A legacy client's request to a modern child gets the modern _meta, from
// what its session knows; keys it already has, and everything else, stay.
func TestModernMetaForLegacyClients(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Options{Era: EraModern}, autoReply{discover: "result"})
	child := w.child()
	caller := Caller{Capabilities: json.RawMessage(`{"sampling":{}}`), ClientInfo: json.RawMessage(`{"name":"c","version":"1"}`), LogLevel: "info"}
	tests := []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			`{"jsonrpc":"2.0","id":%s,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/logLevel":"info"}}}`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`,
			`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/logLevel":"info"}}}`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"t","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/logLevel":"info","progressToken":%s,"io.modelcontextprotocol/clientCapabilities":{}}}}`},
	}
	for _, tt := range tests {
		c, err := callOn(w.b, context.Background(), request(t, tt.in), caller)
		if err != nil {
			t.Fatal(err)
		}
		m := child.next()
		want := fmt.Sprintf(tt.want, m.ID, m.ID)
		if strings.Count(tt.want, "%s") == 1 {
			want = fmt.Sprintf(tt.want, m.ID)
		}
		if string(m.Raw) != want {
			t.Errorf("child got %s\nwant      %s", m.Raw, want)
		}
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
		c.wait()
	}
}

// Cancel ends a call on the client's word and tells the child why.
func TestCancelOnTheClientsWord(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	c := w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
	req := child.expect("tools/call")
	c.Cancel("user pressed stop")
	if _, err := c.wait(); gatewayCode(t, err) != -32006 {
		t.Errorf("Wait = %v, want the cancelled error", err)
	}
	n := child.expect("notifications/cancelled")
	if !contains(n.Params, `"requestId":`+string(req.ID)) || !contains(n.Params, `"reason":"user pressed stop"`) {
		t.Errorf("cancellation = %s", n.Params)
	}
}

// The child's x-mcp-header annotations are read once from tools/list (every
// page) and read again after the child says its tool list changed.
func TestToolHeadersCache(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	got := make(chan []mcp.ParamHeader, 1)
	lookup := func(tool string) {
		go func() {
			h, err := w.b.ToolHeaders(context.Background(), tool)
			if err != nil {
				t.Error(err)
			}
			got <- h
		}()
	}
	lookup("deploy")
	page1 := child.expect("tools/list")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"deploy","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"spec":{"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N"}}}}}}],"nextCursor":"2"}}`, page1.ID)
	page2 := child.expect("tools/list")
	if !contains(page2.Params, `"cursor":"2"`) {
		t.Errorf("second page params %s", page2.Params)
	}
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"bad","inputSchema":{"type":"object","properties":{"a":{"type":"object","x-mcp-header":"A"}}}}]}}`, page2.ID)
	h := <-got
	if want := []mcp.ParamHeader{{Name: "Region", Path: []string{"region"}, Type: "string"}, {Name: "N", Path: []string{"spec", "n"}, Type: "integer"}}; fmt.Sprint(h) != fmt.Sprint(want) {
		t.Errorf("deploy headers = %v", h)
	}
	lookup("bad") // cached: no tools/list; an invalid annotation is not enforced
	if h := <-got; h != nil {
		t.Errorf("bad headers = %v, want none", h)
	}
	child.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	// Once the change is seen, the next lookup lists again. Send a call
	// after the notification so that its handling is known to be done.
	c := w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"ping2"}`)
	m := child.expect("ping2")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
	c.wait()
	lookup("deploy")
	again := child.expect("tools/list")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`, again.ID)
	if h := <-got; h != nil {
		t.Errorf("after the change deploy headers = %v, want none", h)
	}
}

// The tool list is fetched for all who need it: a client that leaves while
// it is fetched does not fail the others' lookups, and a list the child
// changed while it was fetched is not kept.
func TestToolHeadersFetchIsShared(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	type result struct {
		h   []mcp.ParamHeader
		err error
	}
	lookup := func(ctx context.Context) <-chan result {
		out := make(chan result, 1)
		go func() {
			h, err := w.b.ToolHeaders(ctx, "deploy")
			out <- result{h, err}
		}()
		return out
	}
	leaving, leave := context.WithCancel(context.Background())
	first := lookup(leaving)
	list := child.expect("tools/list")
	second := lookup(context.Background())
	leave()
	if r := <-first; !errors.Is(r.err, context.Canceled) {
		t.Errorf("the client that left got %v, %v", r.h, r.err)
	}
	// The list changes before the answer to the fetch comes: that answer
	// is stale, and the list is fetched again.
	child.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"deploy","inputSchema":{"properties":{"old":{"type":"string","x-mcp-header":"Old"}}}}]}}`, list.ID)
	list = child.expect("tools/list")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"deploy","inputSchema":{"properties":{"new":{"type":"string","x-mcp-header":"New"}}}}]}}`, list.ID)
	if r := <-second; r.err != nil || len(r.h) != 1 || r.h[0].Name != "New" {
		t.Errorf("the client that stayed got %v, %v; want the new list's header", r.h, r.err)
	}
}

// A modern child announces tool list changes only on a listen: the gateway
// keeps one open of its own, and drops its cache when a change comes.
func TestToolHeadersCacheOnAModernChild(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Options{Era: EraAuto}, autoReply{discover: "result", listChanged: true})
	child := w.child()
	<-child.got // the probe
	watch := <-child.got
	if watch.Method != "subscriptions/listen" || !contains(watch.Params, `"toolsListChanged":true`) {
		t.Fatalf("child got %s, want the gateway's own listen", watch.Raw)
	}
	got := make(chan []mcp.ParamHeader, 1)
	lookup := func() {
		go func() {
			h, _ := w.b.ToolHeaders(context.Background(), "t")
			got <- h
		}()
	}
	lookup()
	list := child.expect("tools/list")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"t","inputSchema":{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}}]}}`, list.ID)
	if h := <-got; len(h) != 1 {
		t.Fatalf("headers = %v", h)
	}
	child.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}`, watch.ID)
	c := w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"x","params":{}}`)
	m := child.expect("x")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
	c.wait()
	lookup()
	list = child.expect("tools/list")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`, list.ID)
	if h := <-got; len(h) != 0 {
		t.Errorf("headers after the change = %v, want none", h)
	}
}
