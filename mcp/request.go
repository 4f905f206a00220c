package mcp

import (
	"errors"
	"fmt"

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
)

// readParams and readMeta are the members Read finds, in the order of the
// arrays in Request.
const nParams, nMeta = 15, 7

func readParams() [nParams]string {
	return [nParams]string{ParamName, ParamURI, ParamTaskID, ParamArguments, ParamMeta, ParamRequestState,
		ParamInputResponses, ParamLevel, ParamProtocolVersion, ParamCapabilities, ParamClientInfo,
		ParamRequestID, ParamReason, ParamNotifications, ParamRef}
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
}

// Read reads m, a client's request or notification. It refuses (with a
// *jsonrpc.Error, -32600) a message in which a member the gateway reads
// appears twice, or beside a member whose name differs from it only in
// letter case, or only through escapes ("n\u0061me" is "name"): the child
// may decode with a decoder that keeps the last of two equal keys or
// ignores letter case, as Go's encoding/json does, and must never act on
// another member than the gateway. It also refuses (-32602) a _meta that
// is not an object and a progress token that is neither a string nor a
// number. jsonrpc.Parse has already done the same for the envelope.
func Read(m *jsonrpc.Message) (*Request, error) {
	r := &Request{Message: m}
	ps, ok := m.ParamsSpan()
	if !ok || m.Params[0] != '{' {
		return r, nil // absent, or positional: nothing to read by name
	}
	members, err := jsonrpc.Members(m.Params)
	if err != nil {
		return nil, invalid(err) // cannot happen: Parse validated params
	}
	names := readParams()
	if err := find(members, names[:], ps, r.params[:], "params"); err != nil {
		return nil, err
	}
	meta, ok := r.Param(ParamMeta)
	switch {
	case !ok || string(meta) == "null":
		return r, nil
	case meta[0] != '{':
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params._meta must be an object"}
	}
	members, err = jsonrpc.Members(meta)
	if err != nil {
		return nil, invalid(err)
	}
	keys := readMeta()
	if err := find(members, keys[:], r.params[paramIndex(ParamMeta)], r.meta[:], "params", "_meta"); err != nil {
		return nil, err
	}
	if tok, ok := r.Meta(MetaProgressToken); ok {
		if c := tok[0]; c != '"' && c != '-' && (c < '0' || c > '9') {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params._meta.progressToken must be a string or a number"}
		}
	}
	return r, nil
}

// find records where each of names sits among members, an object whose
// value starts at obj in Raw.
func find(members []jsonrpc.Member, names []string, obj jsonrpc.Span, out []jsonrpc.Span, path ...string) error {
	for i, name := range names {
		v, found, err := jsonrpc.Find(members, name)
		if err != nil {
			var amb *jsonrpc.AmbiguousError
			if errors.As(err, &amb) {
				amb.Path = path
			}
			return invalid(err)
		}
		if found {
			out[i] = jsonrpc.Span{Start: obj.Start + v.Start, End: obj.Start + v.End}
		}
	}
	return nil
}

func invalid(err error) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error()}
}

func paramIndex(name string) int {
	for i, n := range readParams() {
		if n == name {
			return i
		}
	}
	panic(fmt.Sprintf("mcp: params.%s is not a member Read reads", name))
}

func metaIndex(key string) int {
	for i, k := range readMeta() {
		if k == key {
			return i
		}
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
