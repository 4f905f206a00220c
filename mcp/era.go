package mcp

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// The edits in this file carry a message from one era to the other. They
// are pure: they read only what they are given, build new bytes by
// splicing, and leave every member they do not name as it came.

// ModernResponse gives a legacy child's response what a 2026-07-28 client
// requires: resultType on a result, caching hints on the results of
// cacheable methods, and -32602 where 2025 servers said -32002 (resource
// not found). The hints say "do not cache" (ttlMs 0, private): the gateway
// cannot know how long a legacy server's lists stay valid, nor whether they
// depend on who asks. Members already present are left alone.
func ModernResponse(method string, m *jsonrpc.Message) []jsonrpc.Edit {
	if m.Result != nil {
		return modernResult(method, m)
	}
	es, _ := m.ErrorSpan()
	code, ok, _ := jsonrpc.Lookup(m.Error, "code")
	if !ok || string(m.Error[code.Start:code.End]) != strconv.Itoa(CodeLegacyNotFound) {
		return nil
	}
	return []jsonrpc.Edit{{
		Span: jsonrpc.Span{Start: es.Start + code.Start, End: es.Start + code.End},
		New:  jsonrpc.Int(jsonrpc.CodeInvalidParams),
	}}
}

func modernResult(method string, m *jsonrpc.Message) []jsonrpc.Edit {
	members, err := jsonrpc.Members(m.Result)
	if err != nil {
		return nil // not an object: nothing sensible to add
	}
	has := func(key string) bool {
		for _, mem := range members {
			if mem.Key == key {
				return true
			}
		}
		return false
	}
	var add []string
	if !has("resultType") {
		add = append(add, `"resultType":"`+ResultComplete+`"`)
	}
	if Cacheable(method) {
		if !has("ttlMs") {
			add = append(add, `"ttlMs":0`)
		}
		if !has("cacheScope") {
			add = append(add, `"cacheScope":"private"`)
		}
	}
	if len(add) == 0 {
		return nil
	}
	rs, _ := m.ResultSpan()
	return []jsonrpc.Edit{InsertMembers(m.Raw, rs, []byte(strings.Join(add, ",")))}
}

// Client is what a legacy client's session knows of it, which a request
// to a 2026-07-28 child must carry in _meta.
type Client struct {
	Capabilities []byte // a ClientCapabilities object; nil: {}
	Info         []byte // an Implementation object; nil: not sent
	LogLevel     string // "": not sent
}

// Member is a params member the gateway sets on a request it forwards: its
// value replaces the request's own, or is added. Key must be a member Read
// reads, so that the gateway knows where the request's own value is.
type Member struct {
	Key   string
	Value []byte
}

// SetParams sets members of the request's params: values the request has
// are replaced, the others added (params is created when there is none),
// so that no member appears twice.
func SetParams(r *Request, set []Member) []jsonrpc.Edit {
	return setParams(r, set, nil)
}

// setParams is SetParams with more members to add, known absent.
func setParams(r *Request, set []Member, add []byte) []jsonrpc.Edit {
	var edits []jsonrpc.Edit
	for _, m := range set {
		if sp, ok := r.ParamSpan(m.Key); ok {
			edits = append(edits, jsonrpc.Edit{Span: sp, New: m.Value})
			continue
		}
		add = joinMembers(add, member{m.Key, m.Value}.encode())
	}
	if len(add) == 0 {
		return edits
	}
	if ps, ok := r.ParamsSpan(); ok {
		return append(edits, InsertMembers(r.Raw, ps, add))
	}
	end := bytes.LastIndexByte(r.Raw, '}')
	return append(edits, jsonrpc.Edit{Span: jsonrpc.Span{Start: end, End: end}, New: append(append([]byte(`,"params":{`), add...), '}')})
}

// ModernRequest adds the _meta a 2026-07-28 child requires to a legacy
// client's request: the version, and the client's capabilities, identity
// and log level. Keys the request's _meta already has are kept. set are
// more params members to set, as for SetParams.
func ModernRequest(r *Request, c Client, set ...Member) []jsonrpc.Edit {
	return AddMeta(r, ClientMeta(c), set...)
}

// ClientMeta is the _meta a 2026-07-28 request carries for the 2025 client
// c, whose capabilities to use tasks are left out (see withoutTasks).
func ClientMeta(c Client) []Member {
	m := []Member{
		{MetaProtocolVersion, jsonrpc.Quote(Modern)},
		{MetaClientCapabilities, orEmpty(withoutTasks(c.Capabilities))},
	}
	if c.Info != nil {
		m = append(m, Member{MetaClientInfo, c.Info})
	}
	if c.LogLevel != "" {
		m = append(m, Member{MetaLogLevel, jsonrpc.Quote(c.LogLevel)})
	}
	return m
}

// AddMeta adds the members of meta that the request's _meta lacks (a key
// it has keeps its value), creating _meta when there is none, and sets
// the params members set, as SetParams does: one set of edits, so that
// nothing is created twice. Keys must be ones Read reads.
func AddMeta(r *Request, meta []Member, set ...Member) []jsonrpc.Edit {
	if r.Params != nil && r.Params[0] != '{' {
		return nil // positional params: nowhere to put _meta
	}
	var keys []byte
	for _, m := range meta {
		if _, present := r.Meta(m.Key); m.Value != nil && !present {
			keys = joinMembers(keys, member{m.Key, m.Value}.encode())
		}
	}
	span, hasMeta := r.ParamSpan(ParamMeta)
	var edits []jsonrpc.Edit
	var add []byte
	switch {
	case len(keys) == 0:
	case hasMeta && r.Raw[span.Start] == '{':
		edits = append(edits, InsertMembers(r.Raw, span, keys))
	case hasMeta: // "_meta": null
		edits = append(edits, jsonrpc.Edit{Span: span, New: append(append([]byte{'{'}, keys...), '}')})
	default:
		add = append(append([]byte(`"_meta":{`), keys...), '}')
	}
	return append(edits, setParams(r, set, add)...)
}

// InsertMembers inserts members (a comma-separated run, no braces) at the
// start of the object at obj in raw.
func InsertMembers(raw []byte, obj jsonrpc.Span, members []byte) jsonrpc.Edit {
	at := obj.Start + bytes.IndexByte(raw[obj.Start:obj.End], '{') + 1
	inner := bytes.TrimSpace(raw[at : obj.End-1])
	if len(inner) > 0 {
		members = append(members, ',')
	}
	return jsonrpc.Edit{Span: jsonrpc.Span{Start: at, End: at}, New: members}
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

func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte("{}")
	}
	return b
}

// object builds a JSON object from members whose values are raw JSON;
// those with a nil value are left out. The values are copied as they are.
func object(members ...member) []byte {
	out := []byte{'{'}
	for _, m := range members {
		if m.value == nil {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, m.encode()...)
	}
	return append(out, '}')
}

type member struct {
	key   string
	value []byte
}

// encode is the member as JSON text: "key":value.
func (m member) encode() []byte {
	return append(append(jsonrpc.Quote(m.key), ':'), m.value...)
}

// InitializeResult answers a legacy client's initialize for a child that
// the gateway has already initialized: the child's own InitializeResult
// with the version the client asked for, when the gateway speaks it (the
// newest legacy revision otherwise).
func InitializeResult(childResult []byte, asked string) []byte {
	version := jsonrpc.Quote(Negotiated(asked))
	edits := unheard(childResult, "capabilities")
	if sp, ok, err := jsonrpc.Lookup(childResult, "protocolVersion"); ok && err == nil {
		edits = append(edits, jsonrpc.Edit{Span: sp, New: version})
	} else {
		edits = append(edits, InsertMembers(childResult, jsonrpc.Span{Start: 0, End: len(childResult)}, append([]byte(`"protocolVersion":`), version...)))
	}
	return jsonrpc.Splice(childResult, edits...)
}

// legacyUnheard are the capabilities whose notifications a 2025 client of
// the gateway never receives: they would come on the GET stream, which
// the gateway does not offer (the child is shared; a 2026-07-28 client
// hears them on subscriptions/listen).
func legacyUnheard() [4][2]string {
	return [4][2]string{{"tools", "listChanged"}, {"prompts", "listChanged"}, {"resources", "listChanged"}, {"resources", "subscribe"}}
}

// unheard are the edits that make the server capabilities at path in obj
// say false where a 2025 client would wait in vain (legacyUnheard).
func unheard(obj []byte, path ...string) []jsonrpc.Edit {
	var edits []jsonrpc.Edit
	for _, c := range legacyUnheard() {
		sp, ok, err := jsonrpc.Lookup(obj, append(path[:len(path):len(path)], c[0], c[1])...)
		if ok && err == nil && string(obj[sp.Start:sp.End]) != "false" {
			edits = append(edits, jsonrpc.Edit{Span: sp, New: []byte("false")})
		}
	}
	return edits
}

// InitializeFromDiscover answers a legacy client's initialize for a
// 2026-07-28 child, from its DiscoverResult: the same capabilities,
// instructions and server identity (gatewayInfo when the child gave
// none).
func InitializeFromDiscover(discover []byte, asked string, gatewayInfo []byte) []byte {
	info := jsonrpc.Get(discover, "_meta", MetaServerInfo)
	if info == nil {
		info = gatewayInfo
	}
	return object(
		member{"protocolVersion", jsonrpc.Quote(Negotiated(asked))},
		member{"capabilities", legacyCapabilities(jsonrpc.Get(discover, "capabilities"))},
		member{"serverInfo", info},
		member{"instructions", jsonrpc.Get(discover, "instructions")},
	)
}

// legacyCapabilities are caps as a 2025 client of the gateway is told
// them: without what it would wait for in vain (see legacyUnheard), and
// without the tasks extension (see withoutTasks).
func legacyCapabilities(caps []byte) []byte {
	if caps == nil {
		return []byte("{}")
	}
	caps = withoutTasks(caps)
	return jsonrpc.Splice(caps, unheard(caps)...)
}

// Negotiated is the legacy revision the gateway answers a client that
// asked for asked.
func Negotiated(asked string) string {
	if IsLegacy(asked) {
		return asked
	}
	return LatestLegacy
}

// DiscoverFromInitialize answers a 2026-07-28 client's server/discover for
// a legacy child, from its InitializeResult: the same facts in the
// 2026-07-28 shape, with the caching hint "do not cache", as for every
// translated result.
func DiscoverFromInitialize(initResult []byte) []byte {
	var meta []byte
	if info := jsonrpc.Get(initResult, "serverInfo"); info != nil {
		meta = object(member{MetaServerInfo, info})
	}
	return object(
		member{"resultType", jsonrpc.Quote(ResultComplete)},
		member{"supportedVersions", []byte(`["` + Modern + `"]`)},
		member{"capabilities", modernCapabilities(jsonrpc.Get(initResult, "capabilities"))},
		member{"instructions", jsonrpc.Get(initResult, "instructions")},
		member{"ttlMs", []byte("0")},
		member{"cacheScope", []byte(`"private"`)},
		member{"_meta", meta},
	)
}

// modernCapabilities are a legacy child's capabilities as a 2026-07-28
// client is told them: all but 2025-11-25's tasks, which 2026-07-28 moved
// to an extension with other methods and shapes (a server "MUST NOT treat
// this capability as enabling tasks" across the two, SEP-2663), and which
// the gateway does not translate.
func modernCapabilities(caps []byte) []byte {
	if caps == nil {
		return []byte("{}")
	}
	members, err := jsonrpc.Members(caps)
	if err != nil {
		return caps
	}
	var kept []member
	for _, m := range members {
		if m.Key == "tasks" {
			continue
		}
		kept = append(kept, member{m.Key, caps[m.Value.Start:m.Value.End]})
	}
	if len(kept) == len(members) {
		return caps // as the child wrote it
	}
	return object(kept...)
}

// InputRequest is one question in an InputRequiredResult, under its key.
type InputRequest struct {
	Key    string
	Method string
	Params []byte // nil: {}
}

// InputRequired is the InputRequiredResult asking reqs, with the state the
// client must send back on its retry.
func InputRequired(reqs []InputRequest, state string) []byte {
	var inner []member
	for _, q := range reqs {
		inner = append(inner, member{q.Key, object(member{"method", jsonrpc.Quote(q.Method)}, member{"params", orEmpty(q.Params)})})
	}
	return object(
		member{"resultType", jsonrpc.Quote(ResultInputRequired)},
		member{"inputRequests", object(inner...)},
		member{"requestState", jsonrpc.Quote(state)},
	)
}

// ReadInputRequired reads an InputRequiredResult: its questions, in the
// order they are listed, and its requestState (raw; nil when absent).
func ReadInputRequired(result []byte) (reqs []InputRequest, state []byte, err error) {
	sp, ok, err := jsonrpc.Lookup(result, "inputRequests")
	if err != nil {
		return nil, nil, err
	}
	if ok {
		members, err := jsonrpc.Members(result[sp.Start:sp.End])
		if err != nil {
			return nil, nil, err
		}
		for _, m := range members {
			v := result[sp.Start+m.Value.Start : sp.Start+m.Value.End]
			method, _ := String(jsonrpc.Get(v, "method"))
			reqs = append(reqs, InputRequest{Key: m.Key, Method: method, Params: jsonrpc.Get(v, "params")})
		}
	}
	return reqs, jsonrpc.Get(result, "requestState"), nil
}

// ResultType is a result's resultType; "" when it has none.
func ResultType(result []byte) string {
	s, _ := String(jsonrpc.Get(result, "resultType"))
	return s
}

// MissingCapabilities is 2026-07-28's error for a request that needs
// client capabilities the client did not declare.
// A name may be a capability and one of its members, "elicitation.url":
// {"elicitation":{"url":{}}}.
func MissingCapabilities(names []string) *jsonrpc.Error {
	var order []string
	subs := map[string][]member{}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		top, sub, _ := strings.Cut(n, ".")
		if _, ok := subs[top]; !ok {
			order = append(order, top)
			subs[top] = nil
		}
		if sub != "" {
			subs[top] = append(subs[top], member{sub, []byte("{}")})
		}
	}
	caps := make([]member, 0, len(order))
	for _, top := range order {
		caps = append(caps, member{top, object(subs[top]...)})
	}
	return &jsonrpc.Error{Code: CodeMissingCapability,
		Message: "the request needs client capabilities the client did not declare: " + strings.Join(names, ", "),
		Data:    object(member{"requiredCapabilities", object(caps...)})}
}

// Cancelled is the params of notifications/cancelled for a request.
func Cancelled(requestID int64, reason string) []byte {
	return object(member{"requestId", jsonrpc.Int(requestID)}, member{"reason", jsonrpc.Quote(reason)})
}

// ErrorCode is the code of an error object; ok is false when it has none
// that is an integer.
func ErrorCode(errObj []byte) (code int, ok bool) {
	n, err := strconv.Atoi(string(jsonrpc.Get(errObj, "code")))
	return n, err == nil
}

// String decodes a JSON string value; ok is false when v is not one.
func String(v []byte) (string, bool) {
	if len(v) == 0 || v[0] != '"' {
		return "", false
	}
	if len(v) >= 2 && v[len(v)-1] == '"' && plainString(v[1:len(v)-1]) {
		if s, ok := vocabulary(v[1 : len(v)-1]); ok {
			return s, true
		}
		return string(v[1 : len(v)-1]), true // nothing to decode: most names
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// vocabulary is the package's own copy of b when b is a word of the
// protocol that requests carry often (a revision, a log level, a result
// type), so that reading one allocates nothing.
func vocabulary(b []byte) (string, bool) {
	switch string(b) {
	case Modern:
		return Modern, true
	case ResultComplete:
		return ResultComplete, true
	case ResultInputRequired:
		return ResultInputRequired, true
	case ResultTask:
		return ResultTask, true
	}
	for _, v := range legacyRevisions() {
		if string(b) == v {
			return v, true
		}
	}
	for _, l := range logLevels() {
		if string(b) == l {
			return l, true
		}
	}
	return "", false
}

// plainString reports whether b is the inside of a JSON string that decodes
// to itself: valid UTF-8 with no escape, quote or control character.
func plainString(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return utf8.Valid(b)
}

// HasCapability reports whether a capabilities object declares name.
func HasCapability(caps []byte, name string) bool {
	return jsonrpc.Get(caps, name) != nil
}

// ElicitationMode is the mode an elicitation/create's params ask in:
// "form" when they name none, as before modes were.
func ElicitationMode(params []byte) string {
	if mode, ok := String(jsonrpc.Get(params, "mode")); ok {
		return mode
	}
	return "form"
}

// CanElicit reports whether a client whose capabilities are caps takes an
// elicitation in mode: its elicitation capability names the mode, or, an
// empty object (or one that names neither mode), means form alone
// (2025-11-25: "Servers MUST NOT send elicitation requests with modes that
// are not supported by the client").
func CanElicit(caps []byte, mode string) bool {
	el := jsonrpc.Get(caps, CapElicitation)
	if el == nil {
		return false
	}
	form, url := jsonrpc.Get(el, "form") != nil, jsonrpc.Get(el, "url") != nil
	if !form && !url {
		return mode == "form"
	}
	return mode == "form" && form || mode == "url" && url
}

// The gateway's own requests to a child.

// Implementation is an Implementation object (clientInfo, serverInfo).
func Implementation(name, version string) []byte {
	return object(member{"name", jsonrpc.Quote(name)}, member{"version", jsonrpc.Quote(version)})
}

// RelayedCapabilities are the client capabilities the gateway declares to
// a legacy child: the questions it can relay to the client of the call in
// flight, with no list-change notifications.
const RelayedCapabilities = `{"sampling":{},"elicitation":{},"roots":{}}`

// InitializeParams are the params of the gateway's initialize to a legacy
// child.
func InitializeParams(clientInfo []byte) []byte {
	return object(
		member{"protocolVersion", jsonrpc.Quote(LatestLegacy)},
		member{"capabilities", []byte(RelayedCapabilities)},
		member{"clientInfo", clientInfo},
	)
}

// ModernParams are the params of a request of the gateway's own to a
// 2026-07-28 child: its _meta, declaring no client capabilities, and more
// members (a comma-separated run; nil for none).
func ModernParams(clientInfo []byte, more []byte) []byte {
	meta := object(
		member{MetaProtocolVersion, jsonrpc.Quote(Modern)},
		member{MetaClientCapabilities, []byte("{}")},
		member{MetaClientInfo, clientInfo},
	)
	out := append([]byte(`{"_meta":`), meta...)
	if len(more) > 0 {
		out = append(append(out, ','), more...)
	}
	return append(out, '}')
}

// Initialized is what the gateway learns from a legacy child's
// InitializeResult.
type Initialized struct {
	ProtocolVersion string
	Logging         bool // the child declared the logging capability
	ServerName      string
	ServerVersion   string
}

// ReadInitialize reads an InitializeResult.
func ReadInitialize(result []byte) Initialized {
	var in Initialized
	in.ProtocolVersion, _ = String(jsonrpc.Get(result, "protocolVersion"))
	in.Logging = jsonrpc.Get(result, "capabilities", CapLogging) != nil
	in.ServerName, _ = String(jsonrpc.Get(result, "serverInfo", "name"))
	in.ServerVersion, _ = String(jsonrpc.Get(result, "serverInfo", "version"))
	return in
}
