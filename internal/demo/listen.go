package demo

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/stdiomcp/gateway/mcp"
)

// listen is an open subscriptions/listen request and what it asked for.
type listen struct {
	id     json.RawMessage
	filter filter
}

type filter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

func (f filter) wants(key string) bool {
	switch key {
	case "toolsListChanged":
		return f.ToolsListChanged
	case "promptsListChanged":
		return f.PromptsListChanged
	case "resourcesListChanged":
		return f.ResourcesListChanged
	}
	return false
}

// listen serves subscriptions/listen: an acknowledgement first, then the
// requested notifications tagged with the listen id, until the client
// cancels. It never answers by itself.
func (s *server) listen(ctx context.Context, r *request) (any, *rpcError) {
	var p struct {
		Notifications filter `json:"notifications"`
	}
	_ = json.Unmarshal(r.params, &p)
	// Everything asked for is supported, so the honoured set is the request.
	ack, _ := json.Marshal(map[string]any{
		"_meta":         map[string]any{mcp.MetaSubscriptionID: r.id},
		"notifications": p.Notifications,
	})
	s.mu.Lock()
	s.listens[string(r.id)] = listen{id: r.id, filter: p.Notifications}
	s.mu.Unlock()
	s.send(message{Method: mcp.NoteAcknowledged, Params: ack})
	<-ctx.Done()
	s.mu.Lock()
	delete(s.listens, string(r.id))
	s.mu.Unlock()
	return nil, nil
}

func (s *server) subscribe(_ context.Context, r *request) (any, *rpcError) {
	return s.setSubscribed(r, true)
}

func (s *server) unsubscribe(_ context.Context, r *request) (any, *rpcError) {
	return s.setSubscribed(r, false)
}

func (s *server) setSubscribed(r *request, on bool) (any, *rpcError) {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(r.params, &p) != nil || p.URI == "" {
		return nil, invalidParams("uri is required", nil)
	}
	s.mu.Lock()
	if on {
		s.subs[p.URI] = true
	} else {
		delete(s.subs, p.URI)
	}
	s.mu.Unlock()
	return map[string]any{}, nil
}

// listChanged announces a list change: to legacy clients as a plain
// notification, to modern listeners that asked for it, tagged.
func (s *server) listChanged(method, key string) {
	s.mu.Lock()
	legacy := s.era != "modern" && s.initialized
	var targets []json.RawMessage
	for _, l := range s.listens {
		if l.filter.wants(key) {
			targets = append(targets, l.id)
		}
	}
	s.mu.Unlock()
	if legacy {
		s.send(message{Method: method})
	}
	for _, id := range targets {
		params, _ := json.Marshal(map[string]any{"_meta": map[string]any{mcp.MetaSubscriptionID: id}})
		s.send(message{Method: method, Params: params})
	}
}

// resourceUpdated announces a change of one resource to whoever subscribed.
func (s *server) resourceUpdated(uri string) {
	s.mu.Lock()
	legacy := s.subs[uri]
	var targets []json.RawMessage
	for _, l := range s.listens {
		if slices.Contains(l.filter.ResourceSubscriptions, uri) {
			targets = append(targets, l.id)
		}
	}
	s.mu.Unlock()
	if legacy {
		params, _ := json.Marshal(map[string]any{"uri": uri})
		s.send(message{Method: mcp.NoteResourceUpdated, Params: params})
	}
	for _, id := range targets {
		params, _ := json.Marshal(map[string]any{"uri": uri, "_meta": map[string]any{mcp.MetaSubscriptionID: id}})
		s.send(message{Method: mcp.NoteResourceUpdated, Params: params})
	}
}
