package mcp

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// Filter is what a subscriptions/listen asks for (a SubscriptionFilter).
type Filter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// ReadFilter reads a listen request's params.notifications, an object
// whose members the schema types: the three list_changed flags booleans,
// resourceSubscriptions an array of URIs (null is taken for absent). A
// member of another type is refused (-32602), since acknowledging it as
// asking for nothing would leave its client waiting for what never comes;
// one that is ambiguous (see jsonrpc.Find) is refused as Read refuses one.
func ReadFilter(notifications []byte) (Filter, error) {
	var f Filter
	if len(notifications) == 0 || string(notifications) == "null" {
		return f, nil
	}
	if notifications[0] != '{' {
		return f, missing("params.notifications must be an object")
	}
	names := [...]string{"toolsListChanged", "promptsListChanged", "resourcesListChanged", "resourceSubscriptions"}
	var at [len(names)]jsonrpc.Span
	if err := jsonrpc.FindMembers(notifications, names[:], at[:]); err != nil {
		if amb, ok := err.(*jsonrpc.AmbiguousError); ok {
			amb.Path = []string{"params", ParamNotifications}
		}
		return Filter{}, invalid(err)
	}
	value := func(i int) []byte { return notifications[at[i].Start:at[i].End] } // empty when absent
	flags := [...]*bool{&f.ToolsListChanged, &f.PromptsListChanged, &f.ResourcesListChanged}
	for i, flag := range flags {
		switch string(value(i)) {
		case "", "null", "false":
		case "true":
			*flag = true
		default:
			return Filter{}, missing("params.notifications." + names[i] + " must be a boolean")
		}
	}
	subs := value(3)
	if len(subs) == 0 || string(subs) == "null" {
		return f, nil
	}
	spans, err := jsonrpc.Elements(subs)
	if err != nil {
		return Filter{}, missing("params.notifications.resourceSubscriptions must be an array of URIs")
	}
	for _, sp := range spans {
		uri, ok := String(subs[sp.Start:sp.End])
		if !ok {
			return Filter{}, missing("params.notifications.resourceSubscriptions must be an array of URIs")
		}
		if !slices.Contains(f.ResourceSubscriptions, uri) {
			f.ResourceSubscriptions = append(f.ResourceSubscriptions, uri)
		}
	}
	return f, nil
}

// Honored is the part of f that a legacy child can deliver, judged by the
// capabilities in its InitializeResult.
func (f Filter) Honored(initResult []byte) Filter {
	has := func(path ...string) bool {
		return string(jsonrpc.Get(initResult, append([]string{"capabilities"}, path...)...)) == "true"
	}
	out := Filter{
		ToolsListChanged:     f.ToolsListChanged && has("tools", "listChanged"),
		PromptsListChanged:   f.PromptsListChanged && has("prompts", "listChanged"),
		ResourcesListChanged: f.ResourcesListChanged && has("resources", "listChanged"),
	}
	if has("resources", "subscribe") {
		out.ResourceSubscriptions = f.ResourceSubscriptions
	}
	return out
}

// Wants reports whether a listener with this filter asked for a legacy
// child's notification m.
func (f Filter) Wants(m *jsonrpc.Message) bool {
	switch m.Method {
	case NoteToolsChanged:
		return f.ToolsListChanged
	case NotePromptsChanged:
		return f.PromptsListChanged
	case NoteResourcesChanged:
		return f.ResourcesListChanged
	case NoteResourceUpdated:
		uri, ok := String(jsonrpc.Get(m.Params, "uri"))
		return ok && slices.ContainsFunc(f.ResourceSubscriptions, func(sub string) bool { return within(uri, sub) })
	}
	return false
}

// within reports whether uri is the resource sub or one of its
// sub-resources: the schema says an updated uri "might be a sub-resource
// of the one that the client actually subscribed to" (file:///dir/a.txt
// for file:///dir/).
func within(uri, sub string) bool {
	if !strings.HasPrefix(uri, sub) {
		return false
	}
	if len(uri) == len(sub) || strings.HasSuffix(sub, "/") {
		return true
	}
	switch uri[len(sub)] {
	case '/', '?', '#':
		return true
	}
	return false
}

// Passes reports whether a relayed listen with this filter may carry a
// modern child's notification m: the list_changed types only when it asked
// for them (the spec forbids sending a type not asked for, whatever the
// child does), resources/updated when it subscribed to any resource (the
// child knows which of its resources are under which subscription: the
// gateway does not second-guess it), any other type as it is (the tasks
// extension's notifications/tasks, which the child filters on taskIds).
func (f Filter) Passes(m *jsonrpc.Message) bool {
	switch m.Method {
	case NoteToolsChanged, NotePromptsChanged, NoteResourcesChanged:
		return f.Wants(m)
	case NoteResourceUpdated:
		return len(f.ResourceSubscriptions) > 0
	}
	return true
}

// Acknowledged is the notification that opens a listen's stream: what the
// listen gets, under the client's listen id.
func Acknowledged(listenID []byte, honored Filter) []byte {
	notifications, _ := json.Marshal(honored) // a struct of bools and strings
	return jsonrpc.NewNotification(NoteAcknowledged, object(
		member{"_meta", object(member{MetaSubscriptionID, listenID})},
		member{"notifications", notifications},
	))
}

// ListenEnded is the result that ends a listen the server tore down.
func ListenEnded(listenID []byte) []byte {
	return object(
		member{"resultType", []byte(`"` + ResultComplete + `"`)},
		member{"_meta", object(member{MetaSubscriptionID, listenID})},
	)
}

// ResultSubscriptionID is where a listen's final response names the
// listen it ends: its result's _meta's subscriptionId, as a span of m.Raw.
func ResultSubscriptionID(m *jsonrpc.Message) (jsonrpc.Span, bool) {
	rs, ok := m.ResultSpan()
	if !ok {
		return jsonrpc.Span{}, false
	}
	sp, ok, err := jsonrpc.Lookup(m.Result, "_meta", MetaSubscriptionID)
	if !ok || err != nil {
		return jsonrpc.Span{}, false
	}
	return jsonrpc.Span{Start: rs.Start + sp.Start, End: rs.Start + sp.End}, true
}

// SubscriptionID is where a notification names the listen it belongs to:
// its _meta's subscriptionId, as a span of m.Params.
func SubscriptionID(m *jsonrpc.Message) (jsonrpc.Span, bool) {
	sp, ok, err := jsonrpc.Lookup(m.Params, "_meta", MetaSubscriptionID)
	return sp, ok && err == nil
}

// Tagged is notification m with _meta.subscriptionId set to id, the
// listen's id as its client knows it.
func Tagged(m *jsonrpc.Message, id []byte) []byte {
	member := append([]byte(`"`+MetaSubscriptionID+`":`), id...)
	if m.Params == nil {
		return jsonrpc.NewNotification(m.Method, append(append([]byte(`{"_meta":{`), member...), "}}"...))
	}
	ps, _ := m.ParamsSpan()
	if old, ok := SubscriptionID(m); ok {
		return jsonrpc.Splice(m.Raw, jsonrpc.Edit{Span: jsonrpc.Span{Start: ps.Start + old.Start, End: ps.Start + old.End}, New: id})
	}
	if sp, ok, err := jsonrpc.Lookup(m.Params, "_meta"); ok && err == nil && m.Params[sp.Start] == '{' {
		return jsonrpc.Splice(m.Raw, InsertMembers(m.Raw, jsonrpc.Span{Start: ps.Start + sp.Start, End: ps.Start + sp.End}, member))
	}
	return jsonrpc.Splice(m.Raw, InsertMembers(m.Raw, ps, append(append([]byte(`"_meta":{`), member...), '}')))
}
