package bridge

import (
	"context"
	"fmt"
	"sync"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// toolCache holds the child's tools' x-mcp-header annotations, fetched
// with tools/list on first need and dropped when the child says the list
// changed.
type toolCache struct {
	mu       sync.Mutex
	headers  map[string][]mcp.ParamHeader // by tool name; nil when not fetched
	fetching chan struct{}                // closed when the fetch in flight ends
	err      error                        // the last fetch's failure
	gen      int                          // counts invalidations: a fetch they overtook is not kept
}

// get returns the annotations of tool. The list is fetched once for all
// who need it, detached from any one of them (a client that leaves does not
// fail the others' checks), each page bounded by HandshakeTimeout.
func (tc *toolCache) get(ctx context.Context, ch *child, tool string) ([]mcp.ParamHeader, error) {
	for {
		tc.mu.Lock()
		if tc.headers != nil {
			h := tc.headers[tool]
			tc.mu.Unlock()
			return h, nil
		}
		wait := tc.fetching
		if wait == nil {
			wait = make(chan struct{})
			tc.fetching = wait
			gen := tc.gen
			ch.w.bg.spawn(func() { tc.fetch(ch, gen, wait) })
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
		// Fetched, or overtaken by a change of the list: look again.
	}
}

func (tc *toolCache) fetch(ch *child, gen int, done chan struct{}) {
	headers, err := ch.fetchToolHeaders(context.Background())
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.gen == gen {
		tc.headers = headers
	}
	tc.err = err
	tc.fetching = nil
	close(done)
}

// invalidate drops the cache: the child's tool list changed.
func (tc *toolCache) invalidate() {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.headers = nil
	tc.gen++
}

// fetchToolHeaders lists every page of the child's tools, at most 100.
func (ch *child) fetchToolHeaders(ctx context.Context) (map[string][]mcp.ParamHeader, error) {
	out := map[string][]mcp.ParamHeader{}
	var cursor []byte
	for range 100 {
		var more []byte
		if cursor != nil {
			more = append([]byte(`"cursor":`), cursor...)
		}
		params := []byte("{" + string(more) + "}")
		if ch.eraNow() == EraModern {
			params = mcp.ModernParams(ch.b.clientID, more)
		}
		resp, err := ch.internal(ctx, mcp.MethodToolsList, params, ch.b.opts.HandshakeTimeout)
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		if resp.Error != nil {
			return nil, fmt.Errorf("tools/list: %s", head(resp.Error))
		}
		tools := jsonrpc.Get(resp.Result, "tools")
		if len(tools) == 0 || tools[0] != '[' {
			return out, nil // no tools to annotate
		}
		spans, err := jsonrpc.Elements(tools)
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		for _, sp := range spans {
			t := tools[sp.Start:sp.End]
			name, _ := mcp.String(jsonrpc.Get(t, "name"))
			if hs, ok := mcp.ParamHeaders(jsonrpc.Get(t, "inputSchema")); ok && len(hs) > 0 {
				out[name] = hs
			} else if !ok {
				ch.log.Warn("a tool's x-mcp-header annotations are invalid; not enforced", "tool", name)
			}
		}
		next := jsonrpc.Get(resp.Result, "nextCursor")
		if s, ok := mcp.String(next); !ok || s == "" {
			return out, nil
		}
		cursor = next
	}
	return out, nil
}

// watchTools keeps a modern child's cache fresh: the child announces tool
// list changes only on a listen, so the gateway keeps one open of its own.
// A legacy child announces them unsolicited (see notification).
func (ch *child) watchTools(ctx context.Context) {
	if string(jsonrpc.Get(ch.discoverResult, "capabilities", "tools", "listChanged")) != "true" {
		return
	}
	params := mcp.ModernParams(ch.b.clientID, []byte(`"notifications":{"toolsListChanged":true}`))
	if _, err := ch.startInternal(ctx, mcp.MethodListen, params, 0); err != nil {
		ch.log.Warn("could not listen for tool list changes; Mcp-Param headers are checked against the list as first read", "err", err)
	}
}

// toolsChanged handles a notification on the gateway's own listen.
func (ch *child) toolsChanged(m *jsonrpc.Message) {
	if m.Method == mcp.NoteToolsChanged {
		ch.tools.invalidate()
	}
}
