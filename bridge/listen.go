package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// subscriptions/listen is 2026-07-28's one long-lived stream. From a modern
// child it is relayed: each client's listen is a listen of its own on the
// child, and the subscription id (which is the listen request's id) is
// rewritten both ways. A legacy child has no such request; the gateway
// builds the stream from the child's list_changed notifications and from
// resources/subscribe, which it reference-counts across listeners since
// the child is shared.

const (
	methodListen   = "subscriptions/listen"
	metaSubscripID = "io.modelcontextprotocol/subscriptionId"
)

// filter is what a listener asks for (SubscriptionFilter).
type filter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// listener is a client's listen on a legacy child.
type listener struct {
	call   *Call
	filter filter
}

// listenLegacy opens a listen on a legacy child: acknowledged at once with
// what the child can deliver, then fed by fanOut until the client leaves.
func (s *session) listenLegacy(ctx context.Context, req *jsonrpc.Message, caller Caller) (*Call, error) {
	var p struct {
		Notifications filter `json:"notifications"`
	}
	_ = json.Unmarshal(req.Params, &p)
	c, err := newCall(s.b, s, req, caller)
	if err != nil {
		return nil, err
	}
	honored := s.honored(p.Notifications)
	l := &listener{call: c, filter: honored}
	s.mu.Lock()
	if s.ended != nil {
		s.mu.Unlock()
		return nil, errUnavailable("the child process is not running")
	}
	s.listeners = append(s.listeners, l)
	s.mu.Unlock()
	params, _ := json.Marshal(map[string]any{
		"_meta":         map[string]json.RawMessage{metaSubscripID: req.ID},
		"notifications": honored,
	})
	c.box.note(jsonrpc.NewNotification("notifications/subscriptions/acknowledged", params), noteAsk)
	for _, uri := range honored.ResourceSubscriptions {
		s.subscribe(uri, +1)
	}
	c.mu.Lock()
	c.onEnd = func() { s.unlisten(l) }
	c.stopCtx = context.AfterFunc(ctx, func() { c.finish(nil, ctx.Err()) })
	c.mu.Unlock()
	return c, nil
}

// honored is the part of a filter the legacy child can deliver, judged by
// the capabilities it declared.
func (s *session) honored(want filter) filter {
	var caps struct {
		Capabilities struct {
			Tools     struct{ ListChanged bool } `json:"tools"`
			Prompts   struct{ ListChanged bool } `json:"prompts"`
			Resources struct {
				ListChanged bool `json:"listChanged"`
				Subscribe   bool `json:"subscribe"`
			} `json:"resources"`
		} `json:"capabilities"`
	}
	_ = json.Unmarshal(s.initResult, &caps)
	c := caps.Capabilities
	out := filter{
		ToolsListChanged:     want.ToolsListChanged && c.Tools.ListChanged,
		PromptsListChanged:   want.PromptsListChanged && c.Prompts.ListChanged,
		ResourcesListChanged: want.ResourcesListChanged && c.Resources.ListChanged,
	}
	if c.Resources.Subscribe {
		out.ResourceSubscriptions = want.ResourceSubscriptions
	}
	return out
}

func (s *session) unlisten(l *listener) {
	s.mu.Lock()
	i := slices.Index(s.listeners, l)
	if i >= 0 {
		s.listeners = slices.Delete(s.listeners, i, i+1)
	}
	s.mu.Unlock()
	if i < 0 {
		return
	}
	for _, uri := range l.filter.ResourceSubscriptions {
		s.subscribe(uri, -1)
	}
}

// subscribe counts the listeners of a resource and subscribes the child on
// the first and unsubscribes it after the last. The child's answer is not
// waited for; a failure is logged.
func (s *session) subscribe(uri string, delta int) {
	if s.endErr() != nil {
		return // the child is gone, and its subscriptions with it
	}
	s.mu.Lock()
	before := s.subscribed[uri]
	s.subscribed[uri] = before + delta
	if s.subscribed[uri] <= 0 {
		delete(s.subscribed, uri)
	}
	after := s.subscribed[uri]
	s.mu.Unlock()
	method := ""
	switch {
	case before == 0 && after > 0:
		method = "resources/subscribe"
	case before > 0 && after == 0:
		method = "resources/unsubscribe"
	default:
		return
	}
	params, _ := json.Marshal(map[string]string{"uri": uri})
	s.b.spawn(func() {
		resp, err := s.internal(context.Background(), method, params, s.b.opts.CancelTimeout)
		switch {
		case err != nil:
			s.log.Warn("resource subscription on the child failed", "method", method, "uri", uri, "err", err)
		case resp.Error != nil:
			s.log.Warn("the child refused a resource subscription", "method", method, "uri", uri, "error", head(resp.Error))
		}
	})
}

// fanOut delivers a legacy child's list_changed or resources/updated
// notification to every listener that asked for it, tagged with each one's
// subscription id.
func (s *session) fanOut(m *jsonrpc.Message) {
	var uri string
	if m.Method == "notifications/resources/updated" {
		var p struct {
			URI string `json:"uri"`
		}
		_ = json.Unmarshal(m.Params, &p)
		uri = p.URI
	}
	s.mu.Lock()
	targets := make([]*listener, 0, len(s.listeners))
	for _, l := range s.listeners {
		f := l.filter
		if (m.Method == "notifications/tools/list_changed" && f.ToolsListChanged) ||
			(m.Method == "notifications/prompts/list_changed" && f.PromptsListChanged) ||
			(m.Method == "notifications/resources/list_changed" && f.ResourcesListChanged) ||
			(uri != "" && slices.Contains(f.ResourceSubscriptions, uri)) {
			targets = append(targets, l)
		}
	}
	s.mu.Unlock()
	for _, l := range targets {
		l.call.event(tagged(m, l.call.clientID))
	}
}

// tagged is the notification with _meta.subscriptionId set to id.
func tagged(m *jsonrpc.Message, id []byte) []byte {
	member := append([]byte(`"`+metaSubscripID+`":`), id...)
	if m.Params == nil {
		return jsonrpc.NewNotification(m.Method, append(append([]byte(`{"_meta":{`), member...), "}}"...))
	}
	ps, _ := m.ParamsSpan()
	if sp, ok, _ := jsonrpc.Lookup(m.Params, "_meta"); ok && m.Params[sp.Start] == '{' {
		if old, ok, _ := jsonrpc.Lookup(m.Params, "_meta", metaSubscripID); ok {
			return jsonrpc.Splice(m.Raw, jsonrpc.Edit{Span: jsonrpc.Span{Start: ps.Start + old.Start, End: ps.Start + old.End}, New: id})
		}
		return jsonrpc.Splice(m.Raw, insertMembers(m.Raw, jsonrpc.Span{Start: ps.Start + sp.Start, End: ps.Start + sp.End}, member))
	}
	return jsonrpc.Splice(m.Raw, insertMembers(m.Raw, ps, append(append([]byte(`"_meta":{`), member...), '}')))
}

// relayTagged routes a modern child's notification for one of its listen
// streams to the client of that listen, with the client's own listen id.
// It reports false when the notification carries no subscription id.
func (s *session) relayTagged(m *jsonrpc.Message) bool {
	sp, ok, _ := jsonrpc.Lookup(m.Params, "_meta", metaSubscripID)
	if !ok {
		return false
	}
	id, err := strconv.ParseInt(string(m.Params[sp.Start:sp.End]), 10, 64)
	var c *Call
	if err == nil {
		if ex := s.lookup(id); ex != nil && ex.method == methodListen {
			if ex.internal {
				s.toolsChanged(m) // the gateway's own listen
				return true
			}
			c = ex.current()
		}
	}
	if c == nil {
		s.log.Debug("a notification for no open listen; dropped", "method", m.Method, "subscription", string(m.Params[sp.Start:sp.End]))
		return true
	}
	c.event(tagged(m, c.clientID))
	return true
}

// event queues a notification for a listen's client. One that has fallen
// MaxNotes notifications behind is not waited for: its listen ends with an
// error, so that it listens again and refetches what it missed, rather
// than the gateway holding an ever longer backlog for it.
func (c *Call) event(b []byte) {
	if c.box.note(b, noteEvent) {
		return
	}
	if _, _, _, done := c.box.peek(); done {
		return
	}
	c.b.log.Warn("a listener fell too far behind; ending its stream", "client_id", string(c.clientID), "behind", c.b.opts.MaxNotes)
	c.abort(jsonrpc.GatewayError(jsonrpc.CodeOverloaded, "listener_behind",
		fmt.Sprintf("the client fell %d notifications behind; listen again", c.b.opts.MaxNotes)), "the client fell too far behind")
}

// endListen ends a modern child's listen that the child tore down with
// notifications/cancelled: the client gets the listen's completion.
func (s *session) endListen(requestID []byte) {
	id, err := strconv.ParseInt(string(requestID), 10, 64)
	if err != nil {
		return
	}
	ex := s.lookup(id)
	if ex == nil || ex.method != methodListen || !s.claim(ex) {
		return
	}
	c := ex.current()
	if c == nil {
		return
	}
	result, _ := json.Marshal(map[string]any{"resultType": "complete", "_meta": map[string]json.RawMessage{metaSubscripID: c.clientID}})
	c.finish(jsonrpc.NewResult(c.clientID, result), nil)
}

// endListeners ends a legacy child's listens when the child goes away, so
// their clients listen again once it is back.
func (s *session) endListeners(err error) {
	s.mu.Lock()
	ls := s.listeners
	s.listeners = nil
	s.mu.Unlock()
	for _, l := range ls {
		l.call.finish(nil, err)
	}
}
