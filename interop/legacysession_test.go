package interop

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// legacySession is a 2025 session opened by hand through the proxy, for
// what the TypeScript client of that era does not do: close a call's
// stream to cancel it.
type legacySession struct {
	base   string
	id     string
	minter string // the replica that answered initialize
	client *http.Client
}

const legacyVersion = "2025-11-25"

func openLegacySession(t *testing.T, ctx context.Context, base string) *legacySession {
	t.Helper()
	s := &legacySession{base: base, client: &http.Client{Transport: &http.Transport{}}}
	t.Cleanup(s.client.CloseIdleConnections)
	resp := s.post(t, ctx, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+legacyVersion+
		`","capabilities":{},"clientInfo":{"name":"scaleout-raw","version":"1.0.0"}}}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s.id, s.minter = resp.Header.Get("Mcp-Session-Id"), lastTried(resp.Header.Get("X-Upstream"))
	if resp.StatusCode != http.StatusOK || s.id == "" {
		t.Fatalf("initialize: %s %s (session %q)", resp.Status, body, s.id)
	}
	resp = s.post(t, ctx, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %s", resp.Status)
	}
	return s
}

func (s *legacySession) post(t *testing.T, ctx context.Context, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-Scaleout-Client", "raw-legacy")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("MCP-Protocol-Version", legacyVersion)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// openStream is a call's SSE answer, read up to its first progress event.
type openStream struct {
	upstream string
	close    func()
}

// callWithProgress starts a tools/call with a progress token (params is
// its params without _meta) and returns once the first progress event has
// arrived on its stream.
func (s *legacySession) callWithProgress(t *testing.T, ctx context.Context, params string) openStream {
	t.Helper()
	callCtx, cancel := context.WithCancel(ctx)
	params = strings.TrimSuffix(params, "}") + `,"_meta":{"progressToken":"raw-progress"}}`
	resp := s.post(t, callCtx, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":`+params+`}`)
	closeStream := func() {
		cancel()
		resp.Body.Close()
	}
	t.Cleanup(closeStream)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("tools/call: %s %s %s", resp.Status, ct, body)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "data:") && strings.Contains(line, `"notifications/progress"`) {
			return openStream{upstream: lastTried(resp.Header.Get("X-Upstream")), close: closeStream}
		}
	}
	t.Fatalf("the stream ended before a progress event: %v", sc.Err())
	return openStream{}
}
