package bridge

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// Caller describes the client behind one request: what the bridge needs to
// serve it in its own protocol era, whatever the child speaks.
type Caller struct {
	// Modern is true for a 2026-07-28 client: every request carries its
	// version and capabilities in _meta.
	Modern bool
	// Capabilities are the client's (a ClientCapabilities object): from the
	// request's _meta, or from a legacy client's initialize.
	Capabilities json.RawMessage
	// LogLevel is the lowest notifications/message level the client wants;
	// "" means none.
	LogLevel string
	// ClientInfo is the client's Implementation object, if known.
	ClientInfo json.RawMessage
}

// Meta keys of 2026-07-28.
const (
	metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	metaCapabilities    = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo      = "io.modelcontextprotocol/clientInfo"
	metaServerInfo      = "io.modelcontextprotocol/serverInfo"
)

// cacheable are the methods whose 2026-07-28 results must carry ttlMs and
// cacheScope.
var cacheable = []string{"server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"}

// modernEdits are the changes that give a legacy child's response what a
// 2026-07-28 client requires: resultType on results, caching hints on
// cacheable ones, and -32602 where 2025 servers said -32002 (resource not
// found). The hints say "do not cache" (ttlMs 0, private): the gateway
// cannot know how long a legacy server's lists stay valid, nor whether they
// depend on who asks. Fields already present are left alone, and nothing
// else is touched.
func modernEdits(method string, m *jsonrpc.Message) []jsonrpc.Edit {
	if m.Result != nil {
		return resultEdits(method, m)
	}
	es, _ := m.ErrorSpan()
	code, ok, _ := jsonrpc.Lookup(m.Error, "code")
	if !ok || string(m.Error[code.Start:code.End]) != "-32002" {
		return nil
	}
	return []jsonrpc.Edit{{
		Span: jsonrpc.Span{Start: es.Start + code.Start, End: es.Start + code.End},
		New:  jsonrpc.Int(jsonrpc.CodeInvalidParams),
	}}
}

func resultEdits(method string, m *jsonrpc.Message) []jsonrpc.Edit {
	members, err := jsonrpc.Members(m.Result)
	if err != nil {
		return nil // not an object: nothing sensible to add
	}
	has := map[string]bool{}
	for _, mem := range members {
		has[mem.Key] = true
	}
	var add []byte
	if !has["resultType"] {
		add = append(add, `"resultType":"complete",`...)
	}
	if slices.Contains(cacheable, method) {
		if !has["ttlMs"] {
			add = append(add, `"ttlMs":0,`...)
		}
		if !has["cacheScope"] {
			add = append(add, `"cacheScope":"private",`...)
		}
	}
	if len(add) == 0 {
		return nil
	}
	if len(members) == 0 {
		add = add[:len(add)-1] // no member follows: drop the last comma
	}
	rs, _ := m.ResultSpan()
	at := rs.Start + bytes.IndexByte(m.Result, '{') + 1
	return []jsonrpc.Edit{{Span: jsonrpc.Span{Start: at, End: at}, New: add}}
}
