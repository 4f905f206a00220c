package mcp

import (
	"fmt"
	"slices"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// Members of params that the gateway reads, in one request kind or
// another. Every other member passes through unread.
const (
	ParamName            = "name"            // tools/call, prompts/get
	ParamURI             = "uri"             // resources/read
	ParamTaskID          = "taskId"          // tasks/*
	ParamArguments       = "arguments"       // tools/call: the members x-mcp-header names
	ParamMeta            = "_meta"           // see the Meta* keys
	ParamRequestState    = "requestState"    // a 2026-07-28 retry
	ParamInputResponses  = "inputResponses"  // a 2026-07-28 retry
	ParamLevel           = "level"           // logging/setLevel
	ParamProtocolVersion = "protocolVersion" // initialize
	ParamCapabilities    = "capabilities"    // initialize
	ParamClientInfo      = "clientInfo"      // initialize
	ParamRequestID       = "requestId"       // notifications/cancelled
	ParamReason          = "reason"          // notifications/cancelled
	ParamNotifications   = "notifications"   // subscriptions/listen
	ParamRef             = "ref"             // completion/complete: the prompt or resource completed
	ParamTask            = "task"            // 2025-11-25: a task-augmented request
)

// readParams and readMeta are the members Read finds, in the order of the
// arrays in Request.
const nParams, nMeta = 16, 7

func readParams() [nParams]string {
	return [nParams]string{ParamName, ParamURI, ParamTaskID, ParamArguments, ParamMeta, ParamRequestState,
		ParamInputResponses, ParamLevel, ParamProtocolVersion, ParamCapabilities, ParamClientInfo,
		ParamRequestID, ParamReason, ParamNotifications, ParamRef, ParamTask}
}

func readMeta() [nMeta]string {
	return [nMeta]string{MetaProgressToken, MetaProtocolVersion, MetaClientCapabilities, MetaClientInfo, MetaLogLevel,
		MetaTraceparent, MetaTracestate}
}

// Request is a client's request or notification as the gateway reads it:
// the envelope, and every member of params and params._meta the gateway
// acts on, each found once by jsonrpc's case-sensitive scanner. The gateway
// reads a request only through it.
type Request struct {
	*jsonrpc.Message
	params [nParams]jsonrpc.Span // where each member's value sits in Raw; zero when absent
	meta   [nMeta]jsonrpc.Span
	// params.name and params.uri decoded, once: the policy, the audit line
	// and the Mcp-Name check each read them.
	name, uri     string
	isName, isURI bool
	target        [1]Target // what Targets returns for a method that names one thing
}

// Read reads m, a client's request or notification. It refuses (with a
// *jsonrpc.Error, -32600) a message in which a member the gateway reads
// appears twice, or beside a member whose name differs from it only in
// letter case, or only through escapes ("n\u0061me" is "name"): the child
// may decode with a decoder that keeps the last of two equal keys or
// ignores letter case, as Go's encoding/json does, and must never act on
// another member than the gateway. It also refuses (-32602) a _meta that
// is not an object, params that are not one (JSON-RPC's positional
// params, which MCP has none of) and a progress token that is neither a
// string nor an integer. jsonrpc.Parse has already done the same for the envelope, but
// for a request id with a fraction, which JSON-RPC allows and MCP does
// not: refused here (-32600), from a client, while a child's pass.
func Read(m *jsonrpc.Message) (*Request, error) {
	r := &Request{Message: m}
	if c := m.ID; m.Kind == jsonrpc.KindRequest && c[0] != '"' && !jsonrpc.Integral(c) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "a request id must be a string or an integer"}
	}
	if err := r.read(); err != nil {
		return nil, err
	}
	name, _ := r.Param(ParamName)
	r.name, r.isName = String(name)
	uri, _ := r.Param(ParamURI)
	r.uri, r.isURI = String(uri)
	switch r.Method {
	case MethodToolsCall:
		r.target[0] = Target{KindTool, r.name}
	case MethodPromptsGet:
		r.target[0] = Target{KindPrompt, r.name}
	case MethodResourcesRead, MethodSubscribe, MethodUnsubscribe:
		r.target[0] = Target{KindResource, r.uri}
	}
	return r, nil
}

func (r *Request) read() error {
	ps, ok := r.ParamsSpan()
	switch {
	case !ok:
		return nil
	case r.Params[0] != '{':
		// JSON-RPC allows positional params; MCP's are always an object.
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params must be an object"}
	}
	names := readParams()
	if err := find(r.Params, names[:], ps, r.params[:], "params"); err != nil {
		return err
	}
	meta, ok := r.Param(ParamMeta)
	switch {
	case !ok || string(meta) == "null":
		return nil
	case meta[0] != '{':
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params._meta must be an object"}
	}
	keys := readMeta()
	if err := find(meta, keys[:], r.params[paramIndex(ParamMeta)], r.meta[:], "params", "_meta"); err != nil {
		return err
	}
	if tok, ok := r.Meta(MetaProgressToken); ok {
		if c := tok[0]; c != '"' && (c != '-' && (c < '0' || c > '9') || !jsonrpc.Integral(tok)) {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params._meta.progressToken must be a string or an integer"}
		}
	}
	return nil
}

// find records in out where each of names sits in the object obj, whose
// value is at at in Raw.
func find(obj []byte, names []string, at jsonrpc.Span, out []jsonrpc.Span, path ...string) error {
	if err := jsonrpc.FindMembers(obj, names, out); err != nil {
		if amb, ok := err.(*jsonrpc.AmbiguousError); ok {
			amb.Path = slices.Clone(path) // a copy: path stays on the stack
		}
		// Anything else cannot happen: Parse validated params.
		return invalid(err)
	}
	for i, v := range out {
		if v.End > 0 {
			out[i] = jsonrpc.Span{Start: at.Start + v.Start, End: at.Start + v.End}
		}
	}
	return nil
}

func invalid(err error) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error()}
}

// paramIndex and metaIndex are where readParams and readMeta list a name
// (a switch: the request's members are looked up several times per call).
func paramIndex(name string) int {
	switch name {
	case ParamName:
		return 0
	case ParamURI:
		return 1
	case ParamTaskID:
		return 2
	case ParamArguments:
		return 3
	case ParamMeta:
		return 4
	case ParamRequestState:
		return 5
	case ParamInputResponses:
		return 6
	case ParamLevel:
		return 7
	case ParamProtocolVersion:
		return 8
	case ParamCapabilities:
		return 9
	case ParamClientInfo:
		return 10
	case ParamRequestID:
		return 11
	case ParamReason:
		return 12
	case ParamNotifications:
		return 13
	case ParamRef:
		return 14
	case ParamTask:
		return 15
	}
	panic(fmt.Sprintf("mcp: params.%s is not a member Read reads", name))
}

func metaIndex(key string) int {
	switch key {
	case MetaProgressToken:
		return 0
	case MetaProtocolVersion:
		return 1
	case MetaClientCapabilities:
		return 2
	case MetaClientInfo:
		return 3
	case MetaLogLevel:
		return 4
	case MetaTraceparent:
		return 5
	case MetaTracestate:
		return 6
	}
	panic(fmt.Sprintf("mcp: params._meta[%q] is not a member Read reads", key))
}

// Param is the raw value of a member of params that Read reads (one of the
// Param* names; any other name is a bug and panics).
func (r *Request) Param(name string) ([]byte, bool) {
	return r.value(r.params[paramIndex(name)])
}

// Meta is the raw value of a key of params._meta that Read reads (one of
// the Meta* keys read from requests).
func (r *Request) Meta(key string) ([]byte, bool) {
	return r.value(r.meta[metaIndex(key)])
}

// ParamSpan and MetaSpan are where those values sit in Raw, for edits.
func (r *Request) ParamSpan(name string) (jsonrpc.Span, bool) {
	sp := r.params[paramIndex(name)]
	return sp, sp.End > 0
}

func (r *Request) MetaSpan(key string) (jsonrpc.Span, bool) {
	sp := r.meta[metaIndex(key)]
	return sp, sp.End > 0
}

func (r *Request) value(sp jsonrpc.Span) ([]byte, bool) {
	if sp.End == 0 {
		return nil, false
	}
	return r.Raw[sp.Start:sp.End], true
}

// String is the value of a params member that is a JSON string, decoded;
// ok is false when it is absent or not a string.
func (r *Request) String(name string) (s string, ok bool) {
	switch name {
	case ParamName:
		return r.name, r.isName
	case ParamURI:
		return r.uri, r.isURI
	}
	v, _ := r.Param(name)
	return String(v)
}

// MetaString is String for a key of params._meta.
func (r *Request) MetaString(key string) (s string, ok bool) {
	v, _ := r.Meta(key)
	return String(v)
}

// Modern reports whether the request carries a 2026-07-28 client's
// protocol version in _meta.
func (r *Request) Modern() bool {
	_, ok := r.Meta(MetaProtocolVersion)
	return ok
}
