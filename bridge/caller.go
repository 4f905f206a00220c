package bridge

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

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
	// CanStream is true when the client takes an SSE answer, so it can be
	// asked questions (sampling, elicitation, roots) in the middle of a call.
	CanStream bool
}

// Meta keys of 2026-07-28.
const (
	metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	metaCapabilities    = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo      = "io.modelcontextprotocol/clientInfo"
	metaServerInfo      = "io.modelcontextprotocol/serverInfo"
	metaLogLevel        = "io.modelcontextprotocol/logLevel"
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
	var add []string
	if !has["resultType"] {
		add = append(add, `"resultType":"complete"`)
	}
	if slices.Contains(cacheable, method) {
		if !has["ttlMs"] {
			add = append(add, `"ttlMs":0`)
		}
		if !has["cacheScope"] {
			add = append(add, `"cacheScope":"private"`)
		}
	}
	if len(add) == 0 {
		return nil
	}
	rs, _ := m.ResultSpan()
	return []jsonrpc.Edit{insertMembers(m.Raw, rs, []byte(strings.Join(add, ",")))}
}

// modernMetaEdit adds the _meta a 2026-07-28 child requires to a legacy
// client's request: the version, and the client's capabilities, identity
// and log level as its session knows them. Keys the request already has
// are kept. extra are more params members, as for paramsEdit.
func (s *session) modernMetaEdit(req *jsonrpc.Message, caller Caller, extra []byte) []jsonrpc.Edit {
	want := []struct {
		key   string
		value []byte
	}{
		{metaProtocolVersion, []byte(`"` + ModernVersion + `"`)},
		{metaCapabilities, orEmpty(caller.Capabilities)},
		{metaClientInfo, caller.ClientInfo},
	}
	if caller.LogLevel != "" {
		want = append(want, struct {
			key   string
			value []byte
		}{metaLogLevel, []byte(`"` + caller.LogLevel + `"`)})
	}
	if req.Params != nil && req.Params[0] != '{' {
		return nil // positional params: nowhere to put _meta
	}
	ps, _ := req.ParamsSpan()
	var meta jsonrpc.Span
	hasMeta := false
	if req.Params != nil {
		if sp, ok, _ := jsonrpc.Lookup(req.Params, "_meta"); ok && req.Params[sp.Start] == '{' {
			meta, hasMeta = jsonrpc.Span{Start: ps.Start + sp.Start, End: ps.Start + sp.End}, true
		}
	}
	present := map[string]bool{}
	if hasMeta {
		members, _ := jsonrpc.Members(req.Raw[meta.Start:meta.End])
		for _, m := range members {
			present[m.Key] = true
		}
	}
	var add []byte
	for _, w := range want {
		if w.value == nil || present[w.key] {
			continue
		}
		if len(add) > 0 {
			add = append(add, ',')
		}
		add = append(add, '"')
		add = append(add, w.key...)
		add = append(add, `":`...)
		add = append(add, w.value...)
	}
	var edits []jsonrpc.Edit
	switch {
	case len(add) == 0:
	case hasMeta:
		edits = append(edits, insertMembers(req.Raw, meta, add))
	default:
		extra = joinMembers(append(append([]byte(`"_meta":{`), add...), '}'), extra)
	}
	if extra != nil {
		edits = append(edits, paramsEdit(req, extra))
	}
	return edits
}

// paramsEdit adds members (a comma-separated run) to the request's params,
// creating params when there are none.
func paramsEdit(req *jsonrpc.Message, members []byte) jsonrpc.Edit {
	if ps, ok := req.ParamsSpan(); ok {
		return insertMembers(req.Raw, ps, members)
	}
	end := bytes.LastIndexByte(req.Raw, '}')
	return jsonrpc.Edit{Span: jsonrpc.Span{Start: end, End: end}, New: append(append([]byte(`,"params":{`), members...), '}')}
}

func joinMembers(a, b []byte) []byte {
	switch {
	case len(a) == 0:
		return b
	case len(b) == 0:
		return a
	}
	return append(append(append([]byte{}, a...), ','), b...)
}

// insertMembers inserts members (a comma-separated run, no braces) at the
// start of the object at obj in raw.
func insertMembers(raw []byte, obj jsonrpc.Span, members []byte) jsonrpc.Edit {
	at := obj.Start + bytes.IndexByte(raw[obj.Start:obj.End], '{') + 1
	inner := bytes.TrimSpace(raw[at : obj.End-1])
	if len(inner) > 0 {
		members = append(members, ',')
	}
	return jsonrpc.Edit{Span: jsonrpc.Span{Start: at, End: at}, New: members}
}
