package interop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stdiomcp/gateway/internal/gatewaytest"
)

// progressLog collects the progress notifications a Go SDK client receives,
// by token (printed, since a numeric token comes back as a float64).
type progressLog struct {
	mu      sync.Mutex
	byTok   map[string][]float64
	changed chan struct{}
}

func newProgressLog() *progressLog {
	return &progressLog{byTok: map[string][]float64{}, changed: make(chan struct{})}
}

func (p *progressLog) handler(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tok := fmt.Sprint(req.Params.ProgressToken)
	p.byTok[tok] = append(p.byTok[tok], req.Params.Progress)
	close(p.changed)
	p.changed = make(chan struct{})
}

// wait returns the progress values for tok once there are at least n; the
// SDK runs notification handlers on their own goroutines, so the last ones
// may land after CallTool has returned.
func (p *progressLog) wait(t *testing.T, tok any, n int) []float64 {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		p.mu.Lock()
		got, changed := append([]float64(nil), p.byTok[fmt.Sprint(tok)]...), p.changed
		p.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("progress for %v = %v, want at least %d notifications", tok, got, n)
		}
	}
}

func connectGoSDK(t *testing.T, url string, progress *progressLog) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "interop-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: progress.handler,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url + "/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect the Go SDK client: %v", err)
	}
	t.Cleanup(func() { session.Close() })
	return session
}

func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("result has %d content items", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("result content is %T", res.Content[0])
	}
	return tc.Text
}

// The official Go SDK client, through POST /mcp, against the demo child:
// list, call, progress on the call's stream, and cancellation by context
// that reaches the child with the gateway's id.
func TestGoSDKClient(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil)
	progress := newProgressLog()
	session := connectGoSDK(t, g.URL, progress)
	ctx := context.Background()

	names := toolNames(t, session)
	if got := strings.Join(names, ","); !strings.Contains(got, "echo") || !strings.Contains(got, "slow") {
		t.Errorf("tools = %s", got)
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "from the SDK"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, res); got != "from the SDK" {
		t.Errorf("echo = %q", got)
	}

	params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"duration_ms": 200, "interval_ms": 40}}
	params.SetProgressToken("sdk-progress")
	res, err = session.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, res); got != "done after 5 steps" {
		t.Errorf("slow = %q", got)
	}
	if got := progress.wait(t, "sdk-progress", 5); len(got) != 5 || got[0] != 1 || got[4] != 5 {
		t.Errorf("progress for sdk-progress = %v, want 1..5", got)
	}

	// Cancel by context once progress shows the call is running.
	callCtx, cancel := context.WithCancel(ctx)
	params = &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"duration_ms": 60000, "interval_ms": 20}}
	params.SetProgressToken("to-cancel")
	errc := make(chan error, 1)
	go func() {
		_, err := session.CallTool(callCtx, params)
		errc <- err
	}()
	progress.wait(t, "to-cancel", 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled CallTool = %v, want context.Canceled", err)
	}
	got := demoReceived(t, g.URL, 1)
	var slowIDs []string
	for _, r := range got.Requests {
		if r.Tool == "slow" {
			slowIDs = append(slowIDs, string(r.ID))
		}
	}
	c := got.Cancellations[0]
	if len(slowIDs) != 2 || string(c.RequestID) != slowIDs[1] || !c.Running {
		t.Errorf("the child got cancellation %+v; want one naming %v[1], the id it saw for the cancelled call", c, slowIDs)
	}
}

// A third-party child: a stdio server written with the Go SDK, behind the
// gateway, driven by the Go SDK client and by plain JSON-RPC.
func TestGoSDKServerChild(t *testing.T) {
	t.Parallel()
	g := startWithChild(t, "gosdk-server")
	progress := newProgressLog()
	session := connectGoSDK(t, g.URL, progress)
	ctx := context.Background()
	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 3 {
		t.Errorf("tools = %d, want 3 (echo, slow, cancelled)", len(tools.Tools))
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "through"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, res); got != "through" {
		t.Errorf("echo = %q", got)
	}
	params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 3}}
	params.SetProgressToken(99)
	res, err = session.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, res); got != "3 steps" {
		t.Errorf("slow = %q", got)
	}
	if got := progress.wait(t, 99, 3); len(got) != 3 {
		t.Errorf("progress for token 99 = %v, want 3 notifications", got)
	}

	// Disconnecting cancels the Go SDK server's handler.
	callCtx, cancel := context.WithCancel(ctx)
	params = &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 100000}}
	params.SetProgressToken("c")
	errc := make(chan error, 1)
	go func() {
		_, err := session.CallTool(callCtx, params)
		errc <- err
	}()
	progress.wait(t, "c", 1)
	cancel()
	<-errc
	if n := gatewaytest.GoSDKCancelled(t, g.URL, 1); n != 1 {
		t.Errorf("the Go SDK server saw %d cancellations, want 1", n)
	}
	// The SDK server speaks 2026-07-28, so the probe finds a modern child.
	if r := g.Readiness(); len(r.Workers) != 1 || r.Workers[0].Era != "modern" || r.Restarts != 0 {
		t.Errorf("readiness %+v, want one modern child, never restarted", r)
	}
}

// toolNames lists the tools through a Go SDK client session.
func toolNames(t *testing.T, session *mcp.ClientSession) []string {
	t.Helper()
	tools, err := session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	return names
}
