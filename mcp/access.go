package mcp

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// What a request uses, for a per-caller policy: the gateway decides from
// the body, never from the Mcp-Name header that mirrors it (a mirrored
// header is not to be trusted for security decisions).

// Kind is what a policy names: a tool, a resource or a prompt.
type Kind int

const (
	KindTool Kind = iota
	KindResource
	KindPrompt
)

func (k Kind) String() string {
	switch k {
	case KindTool:
		return "tool"
	case KindResource:
		return "resource"
	case KindPrompt:
		return "prompt"
	}
	return "unknown"
}

// Target is one thing a request uses.
type Target struct {
	Kind Kind
	Name string // a tool's or prompt's name, a resource's URI
}

// Access is how a request relates to a policy.
type Access int

const (
	// AccessOpen: the request uses nothing a policy names (the handshake,
	// ping, the log level, a task handle).
	AccessOpen Access = iota
	// AccessTargets: the request uses the targets Targets returns.
	AccessTargets
	// AccessList: the request lists things; its result is filtered (see
	// FilterList).
	AccessList
	// AccessUnknown: a method the gateway does not know; only a caller
	// that may use everything may send it.
	AccessUnknown
)

// AccessOf says how a request of method relates to a policy.
func AccessOf(method string) Access {
	switch method {
	case MethodInitialize, MethodDiscover, MethodPing, MethodSetLevel,
		NoteInitialized, NoteCancelled, NoteProgress, NoteRootsChanged:
		return AccessOpen
	case MethodToolsCall, MethodPromptsGet, MethodResourcesRead, MethodSubscribe, MethodUnsubscribe,
		MethodComplete, MethodListen:
		return AccessTargets
	case MethodToolsList, MethodPromptsList, MethodResourcesList, MethodTemplatesList:
		return AccessList
	}
	switch method {
	case MethodTasksGet, MethodTasksUpdate, MethodTasksCancel, MethodTasksResult:
		// A task id is a handle the child minted for a tools/call the
		// policy already allowed. tasks/list is not among them: it would
		// show the tasks of every caller.
		return AccessOpen
	}
	return AccessUnknown
}

// Targets is what r uses (for a method whose Access is AccessTargets). A
// request that should name something and does not, or names it in a way
// the gateway cannot read, is refused with a *jsonrpc.Error: the child
// must never act on a name the policy did not see. The slice may be r's
// own, read by every caller: it is not to be changed.
func Targets(r *Request) ([]Target, error) {
	switch r.Method {
	case MethodToolsCall, MethodPromptsGet:
		if !r.isName {
			return nil, missing("params.name must be a string")
		}
		return r.target[:], nil // Read set it
	case MethodResourcesRead, MethodSubscribe, MethodUnsubscribe:
		if !r.isURI {
			return nil, missing("params.uri must be a string")
		}
		return r.target[:], nil
	case MethodComplete:
		ref, _ := r.Param(ParamRef)
		t, err := readRef(ref)
		if err != nil {
			return nil, err
		}
		return []Target{t}, nil
	case MethodListen:
		return listenTargets(r)
	}
	return nil, nil
}

// listenTargets are the resources a listen subscribes to, read as the
// bridge reads them (ReadFilter), so that anything the policy could not
// see is refused.
func listenTargets(r *Request) ([]Target, error) {
	notes, _ := r.Param(ParamNotifications)
	f, err := ReadFilter(notes)
	if err != nil {
		return nil, err
	}
	var ts []Target
	for _, uri := range f.ResourceSubscriptions {
		ts = append(ts, Target{KindResource, uri})
	}
	return ts, nil
}

// readRef reads completion/complete's ref: {"type":"ref/prompt","name":..}
// or {"type":"ref/resource","uri":..}.
func readRef(ref []byte) (Target, error) {
	if len(ref) == 0 || ref[0] != '{' {
		return Target{}, missing("params.ref must be an object")
	}
	members, err := jsonrpc.Members(ref)
	if err != nil {
		return Target{}, invalid(err)
	}
	str := func(key string) (string, error) {
		sp, found, err := jsonrpc.Find(members, key)
		if err != nil {
			var amb *jsonrpc.AmbiguousError
			if errors.As(err, &amb) {
				amb.Path = []string{"params", ParamRef}
			}
			return "", invalid(err)
		}
		if !found {
			return "", nil
		}
		s, _ := String(ref[sp.Start:sp.End])
		return s, nil
	}
	typ, err := str("type")
	if err != nil {
		return Target{}, err
	}
	switch typ {
	case "ref/prompt":
		name, err := str("name")
		if err != nil || name == "" {
			return Target{}, orMissing(err, "params.ref.name must be a string")
		}
		return Target{KindPrompt, name}, nil
	case "ref/resource":
		uri, err := str("uri")
		if err != nil || uri == "" {
			return Target{}, orMissing(err, "params.ref.uri must be a string")
		}
		return Target{KindResource, uri}, nil
	}
	return Target{}, missing(`params.ref.type must be "ref/prompt" or "ref/resource"`)
}

func missing(msg string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
}

func orMissing(err error, msg string) error {
	if err != nil {
		return err
	}
	return missing(msg)
}

// listOf names, for a list method, the result member that holds the list
// and the member of each entry that names it.
func listOf(method string) (list, key string, kind Kind, ok bool) {
	switch method {
	case MethodToolsList:
		return "tools", "name", KindTool, true
	case MethodPromptsList:
		return "prompts", "name", KindPrompt, true
	case MethodResourcesList:
		return "resources", "uri", KindResource, true
	case MethodTemplatesList:
		return "resourceTemplates", "uriTemplate", KindResource, true
	}
	return "", "", 0, false
}

// FilterList takes out of resp, a response to the list method, the entries
// keep refuses, and reports how many went. This is the one edit the
// gateway makes to a payload: a caller sees only what it may use. Kept
// entries are copied byte for byte and every other member stays as it
// came; an entry whose name cannot be read is taken out. A result that
// says cacheScope "public" says "private" instead, even when nothing was
// taken out: with a policy in force a list depends on who asks, and a
// shared cache must not hand one caller's list to another. An error response passes as it
// is; a result whose list cannot be read (not an array, or named twice) is
// an error, so that nothing unfiltered slips through.
func FilterList(method string, resp []byte, keep func(Target) bool) ([]byte, int, error) {
	listKey, nameKey, kind, ok := listOf(method)
	if !ok {
		return resp, 0, nil
	}
	m, err := jsonrpc.Parse(resp)
	if err != nil {
		return nil, 0, fmt.Errorf("read the %s response: %w", method, err)
	}
	if m.Result == nil {
		return resp, 0, nil
	}
	rs, _ := m.ResultSpan()
	members, err := jsonrpc.Members(m.Result)
	if err != nil {
		return nil, 0, fmt.Errorf("read the %s result: %w", method, err)
	}
	listSpan, found, err := jsonrpc.Find(members, listKey)
	if err != nil {
		return nil, 0, fmt.Errorf("read the %s result: %w", method, err)
	}
	if !found {
		return resp, 0, nil
	}
	list := m.Result[listSpan.Start:listSpan.End]
	entries, err := jsonrpc.Elements(list)
	if err != nil {
		return nil, 0, fmt.Errorf("read result.%s of %s: %w", listKey, method, err)
	}
	var kept bytes.Buffer
	kept.WriteByte('[')
	removed := 0
	for _, sp := range entries {
		entry := list[sp.Start:sp.End]
		name, ok := entryName(entry, nameKey)
		if !ok || !keep(Target{kind, name}) {
			removed++
			continue
		}
		if kept.Len() > 1 {
			kept.WriteByte(',')
		}
		kept.Write(entry)
	}
	kept.WriteByte(']')
	var edits []jsonrpc.Edit
	if removed > 0 {
		edits = append(edits, jsonrpc.Edit{Span: shift(listSpan, rs.Start), New: kept.Bytes()})
	}
	if sp, found, err := jsonrpc.Find(members, "cacheScope"); err == nil && found {
		if s, _ := String(m.Result[sp.Start:sp.End]); s == "public" {
			edits = append(edits, jsonrpc.Edit{Span: shift(sp, rs.Start), New: []byte(`"private"`)})
		}
	}
	if len(edits) == 0 {
		return resp, 0, nil
	}
	return jsonrpc.Splice(resp, edits...), removed, nil
}

func entryName(entry []byte, key string) (string, bool) {
	sp, found, err := jsonrpc.Lookup(entry, key)
	if err != nil || !found {
		return "", false // not an object, or the name is absent or ambiguous
	}
	return String(entry[sp.Start:sp.End])
}

func shift(sp jsonrpc.Span, by int) jsonrpc.Span {
	return jsonrpc.Span{Start: sp.Start + by, End: sp.End + by}
}
