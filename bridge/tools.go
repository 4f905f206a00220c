package bridge

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash"
	"sync"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// ToolList is the child's tools as it listed them: each object byte for
// byte, in its order, all pages. It is shared and never changed.
type ToolList struct {
	Tools []json.RawMessage
	// Digest identifies the list's content: lists that the workers'
	// children wrote alike share it, so that what is built from a list
	// (compiled schemas, documents) is built once, not once per worker.
	Digest [sha256.Size]byte
	// Names are the tools' names, in the same order ("" for a tool with
	// no string name).
	Names []string
}

// Find returns the tool of that name, or nil.
func (l *ToolList) Find(name string) json.RawMessage {
	for i, n := range l.Names {
		if n == name {
			return l.Tools[i]
		}
	}
	return nil
}

// ListError is the child's error answer to a list the bridge reads for
// itself: Raw is its JSON-RPC error object, as it wrote it.
type ListError struct {
	Method string
	Raw    []byte
}

func (e *ListError) Error() string { return e.Method + ": " + head(e.Raw) }

// toolCache holds the child's tools, and their x-mcp-header annotations,
// fetched with tools/list on first need and dropped when the child says
// the list changed.
type toolCache struct {
	mu       sync.Mutex
	list     *ToolList                    // nil when not fetched
	headers  map[string][]mcp.ParamHeader // by tool name
	fetching *toolFetch                   // the fetch in flight, or nil
	gen      int                          // counts invalidations: a fetch they overtook is not kept
}

// toolFetch is one fetch of the list, shared by all who wait for it. Its
// result is kept for them even when a change of the list overtook it.
type toolFetch struct {
	done    chan struct{} // closed when the fetch ends; the fields below are set then
	list    *ToolList
	headers map[string][]mcp.ParamHeader
	err     error
}

// maxOvertaken is how many fetches overtaken by a change of the list a
// caller waits for before it takes the last one's list: a child that
// announces a change with every answer must not keep a caller (and
// itself) busy forever. That list was the child's answer while the caller
// waited, as good as any in a storm of changes; it is not cached.
const maxOvertaken = 3

// get returns the list. It is fetched once for all who need it, detached
// from any one of them (a client that leaves does not fail the others'
// checks), each page bounded by HandshakeTimeout.
func (tc *toolCache) get(ctx context.Context, ch *child) (*ToolList, map[string][]mcp.ParamHeader, error) {
	for overtaken := 0; ; overtaken++ {
		tc.mu.Lock()
		if tc.list != nil {
			l, h := tc.list, tc.headers
			tc.mu.Unlock()
			return l, h, nil
		}
		f := tc.fetching
		if f == nil {
			f = &toolFetch{done: make(chan struct{})}
			tc.fetching = f
			gen := tc.gen
			ch.w.bg.spawn(func() { tc.fetch(ch, gen, f) })
		}
		tc.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		if f.err != nil || overtaken+1 >= maxOvertaken {
			return f.list, f.headers, f.err
		}
		// Fetched, or overtaken by a change of the list: look again.
	}
}

func (tc *toolCache) fetch(ch *child, gen int, f *toolFetch) {
	f.list, f.headers, f.err = ch.fetchTools(context.Background())
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.gen == gen && f.err == nil {
		tc.list, tc.headers = f.list, f.headers
	}
	tc.fetching = nil
	close(f.done)
}

// invalidate drops the cache: the child's tool list changed.
func (tc *toolCache) invalidate() {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.list, tc.headers = nil, nil
	tc.gen++
}

// maxToolPages bounds the pages of tools/list read: a child whose cursor
// never ends must not hold the fetch forever; maxToolListBytes, the list
// kept.
const (
	maxToolPages     = 100
	maxToolListBytes = 32 << 20
)

// fetchTools lists every page of the child's tools, at most maxToolPages
// and up to a cursor the child gives again, and reads their x-mcp-header
// annotations.
func (ch *child) fetchTools(ctx context.Context) (*ToolList, map[string][]mcp.ParamHeader, error) {
	tb := &toolsBuilder{list: &ToolList{}, headers: map[string][]mcp.ParamHeader{}, digest: sha256.New()}
	var cursor []byte
	cursors := map[string]bool{}
	for page := 1; ; page++ {
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
			return nil, nil, fmt.Errorf("tools/list: %w", err)
		}
		if resp.Error != nil {
			return nil, nil, &ListError{Method: mcp.MethodToolsList, Raw: resp.Error}
		}
		tools := jsonrpc.Get(resp.Result, "tools")
		if len(tools) == 0 || string(tools) == "null" {
			break // no tools on this page
		}
		spans, err := jsonrpc.Elements(tools)
		if err != nil {
			// Not a list: reading it as none would tell clients the
			// child has no tools, which it did not say.
			return nil, nil, jsonrpc.GatewayError(jsonrpc.CodeBadAnswer, "bad_answer",
				fmt.Sprintf("the child's tools/list result has tools that is not an array: %v", err))
		}
		// The tools read so far are kept when the list ends early: a
		// partial list checks the headers of the tools it has, where none
		// would check any.
		next := jsonrpc.Get(resp.Result, "nextCursor")
		s, ok := mcp.String(next)
		if ok && cursors[s] {
			// A child that gives a cursor again is going round: most
			// often it ignored the cursor and answered a page already
			// read, so this page is not kept either.
			ch.log.Warn("the child's tools/list gave a cursor it had given before; the list is cut before that page", "pages", page-1, "tools", len(tb.list.Tools))
			break
		}
		if err := tb.add(ch, tools, spans); err != nil {
			return nil, nil, err
		}
		if !ok || s == "" {
			break
		}
		if page == maxToolPages {
			ch.log.Warn("the child's tools/list has more pages than the gateway reads; the list is cut after them", "pages", maxToolPages, "tools", len(tb.list.Tools))
			break
		}
		cursors[s] = true
		cursor = next
	}
	tb.digest.Sum(tb.list.Digest[:0])
	return tb.list, tb.headers, nil
}

// toolsBuilder gathers the pages of a tool list.
type toolsBuilder struct {
	list    *ToolList
	headers map[string][]mcp.ParamHeader
	digest  hash.Hash
	size    int // bytes of the tools kept
}

// add keeps a page's tools, each the child's bytes: tools is the page's
// array, spans its elements.
func (tb *toolsBuilder) add(ch *child, tools []byte, spans []jsonrpc.Span) error {
	for _, sp := range spans {
		// A copy: the page it came in (which may carry much else) is not
		// kept for it.
		t := bytes.Clone(tools[sp.Start:sp.End])
		if tb.size += len(t); tb.size > maxToolListBytes {
			return jsonrpc.GatewayError(jsonrpc.CodeTooLarge, "tools_too_large",
				fmt.Sprintf("the child's tools add up to more than %d bytes", maxToolListBytes))
		}
		name, _ := mcp.String(jsonrpc.Get(t, "name"))
		tb.list.Tools = append(tb.list.Tools, json.RawMessage(t))
		tb.list.Names = append(tb.list.Names, name)
		tb.digest.Write(t)
		tb.digest.Write([]byte{'\n'})
		if hs, ok := mcp.ParamHeaders(jsonrpc.Get(t, "inputSchema")); ok && len(hs) > 0 {
			tb.headers[name] = hs
		} else if !ok {
			ch.log.Warn("a tool's x-mcp-header annotations are invalid; not enforced", "tool", name)
		}
	}
	return nil
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
