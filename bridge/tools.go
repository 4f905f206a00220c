package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// ParamHeader is one x-mcp-header annotation in a tool's input schema: a
// 2026-07-28 client mirrors the argument at Path into the HTTP header
// Mcp-Param-{Name}, and the gateway checks the two agree.
type ParamHeader struct {
	Name string   // the header is Mcp-Param-{Name}
	Path []string // property names from the arguments object down
	Type string   // string, integer, number or boolean
}

// toolCache holds the child's tools' annotations, fetched with tools/list
// on first need and dropped when the child says the list changed.
type toolCache struct {
	mu       sync.Mutex
	headers  map[string][]ParamHeader // by tool name; nil when not fetched
	fetching chan struct{}            // closed when the fetch in flight ends
	err      error                    // the last fetch's failure
}

// ToolHeaders returns the x-mcp-header annotations of the child's tool.
func (b *Bridge) ToolHeaders(ctx context.Context, tool string) ([]ParamHeader, error) {
	s, err := b.readySession(ctx)
	if err != nil {
		return nil, err
	}
	return s.tools.get(ctx, s, tool)
}

func (tc *toolCache) get(ctx context.Context, s *session, tool string) ([]ParamHeader, error) {
	for {
		tc.mu.Lock()
		if tc.headers != nil {
			h := tc.headers[tool]
			tc.mu.Unlock()
			return h, nil
		}
		wait := tc.fetching
		if wait == nil {
			tc.fetching = make(chan struct{})
			tc.mu.Unlock()
			headers, err := s.fetchToolHeaders(ctx)
			tc.mu.Lock()
			tc.headers, tc.err = headers, err
			close(tc.fetching)
			tc.fetching = nil
			tc.mu.Unlock()
			if err != nil {
				return nil, err
			}
			continue
		}
		tc.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		tc.mu.Lock()
		err := tc.err
		tc.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
}

// invalidate drops the cache: the child's tool list changed.
func (tc *toolCache) invalidate() {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.headers = nil
}

// fetchToolHeaders lists every page of the child's tools.
func (s *session) fetchToolHeaders(ctx context.Context) (map[string][]ParamHeader, error) {
	out := map[string][]ParamHeader{}
	var cursor *string
	for page := 0; page < 100; page++ {
		p := map[string]any{}
		if s.eraNow() == EraModern {
			p["_meta"] = s.b.modernMeta()
		}
		if cursor != nil {
			p["cursor"] = *cursor
		}
		params, _ := json.Marshal(p)
		resp, err := s.internal(ctx, "tools/list", params, s.b.opts.HandshakeTimeout)
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		if resp.Error != nil {
			return nil, fmt.Errorf("tools/list: %s", head(resp.Error))
		}
		var res struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
			NextCursor *string `json:"nextCursor"`
		}
		if err := json.Unmarshal(resp.Result, &res); err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		for _, t := range res.Tools {
			if hs, ok := paramHeaders(t.InputSchema); ok && len(hs) > 0 {
				out[t.Name] = hs
			} else if !ok {
				s.log.Warn("a tool's x-mcp-header annotations are invalid; not enforced", "tool", t.Name)
			}
		}
		if res.NextCursor == nil || *res.NextCursor == "" {
			return out, nil
		}
		cursor = res.NextCursor
	}
	return out, nil
}

// token is an HTTP field-name token (RFC 9110).
var token = regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$")

type schema struct {
	Type       json.RawMessage    `json:"type"`
	Header     *string            `json:"x-mcp-header"`
	Properties map[string]*schema `json:"properties"`
}

// paramHeaders finds the annotations reachable through properties alone.
// ok is false when an annotation breaks the spec's rules (a name that is
// not a token or repeats, a type other than a primitive), and then none of
// the tool's annotations are enforced.
func paramHeaders(raw json.RawMessage) (out []ParamHeader, ok bool) {
	var root schema
	if json.Unmarshal(raw, &root) != nil {
		return nil, true
	}
	seen := map[string]bool{}
	ok = true
	var walk func(s *schema, path []string)
	walk = func(s *schema, path []string) {
		for name, p := range s.Properties {
			if p == nil {
				continue
			}
			at := append(append([]string{}, path...), name)
			if p.Header != nil {
				var typ string
				_ = json.Unmarshal(p.Type, &typ)
				key := strings.ToLower(*p.Header)
				switch {
				case !token.MatchString(*p.Header), seen[key]:
					ok = false
				case typ != "string" && typ != "integer" && typ != "number" && typ != "boolean":
					ok = false
				default:
					seen[key] = true
					out = append(out, ParamHeader{Name: *p.Header, Path: at, Type: typ})
				}
			}
			walk(p, at)
		}
	}
	walk(&root, nil)
	return out, ok
}

// watchTools keeps a modern child's cache fresh: the child announces tool
// list changes only on a listen, so the gateway keeps one open of its own.
// A legacy child announces them unsolicited (see notification).
func (s *session) watchTools(ctx context.Context) {
	d := s.discovered()
	var caps struct {
		Tools struct {
			ListChanged bool `json:"listChanged"`
		} `json:"tools"`
	}
	_ = json.Unmarshal(d.Capabilities, &caps)
	if !caps.Tools.ListChanged {
		return
	}
	params, _ := json.Marshal(map[string]any{"_meta": s.b.modernMeta(), "notifications": map[string]bool{"toolsListChanged": true}})
	c, err := s.startInternal(ctx, methodListen, params, 0)
	if err != nil {
		s.log.Warn("could not listen for tool list changes; Mcp-Param headers are checked against the list as first read", "err", err)
		return
	}
	s.toolWatch = c
}

// toolsChanged handles a notification on the gateway's own listen.
func (s *session) toolsChanged(m *jsonrpc.Message) {
	if m.Method == "notifications/tools/list_changed" {
		s.tools.invalidate()
	}
}
