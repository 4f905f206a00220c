package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stdiomcp/gateway/internal/gatewaytest"
)

// childSpec says how to start a child and which of its tools to use: one
// to echo, one that reports progress and ends, one that reports progress
// for long enough to be cancelled.
type childSpec struct {
	start    func(t *testing.T) *gateway
	echo     toolUse
	progress toolUse
	cancel   toolUse
	// seen checks, after the run, that the child received the
	// cancellation.
	seen func(t *testing.T, g *gateway)
}

type toolUse struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
	Expect    string         `json:"expect"` // the echo's text
}

func children(t *testing.T) map[string]childSpec {
	return map[string]childSpec{
		// The everything server from npm: a 2025-11-25 server on the
		// TypeScript SDK 1.x.
		"server-everything": {
			start: func(t *testing.T) *gateway {
				return startGateway(t, nil, "--", node(t), npmPackage(t, "@modelcontextprotocol/server-everything/dist/index.js"), "stdio")
			},
			echo:     toolUse{"echo", map[string]any{"message": "through"}, "Echo: through"},
			progress: toolUse{"trigger-long-running-operation", map[string]any{"duration": 0.3, "steps": 3}, ""},
			cancel:   toolUse{"trigger-long-running-operation", map[string]any{"duration": 60, "steps": 600}, ""},
			seen: func(t *testing.T, g *gateway) {
				// This server keeps no record a client can read, so the
				// evidence is the gateway's record of writing the
				// cancellation to its stdin (read by its fields).
				g.Logs.Wait(t, func(r logRecord) bool {
					return r["level"] == "INFO" && r["method"] == "tools/call" && r["reason"] != nil && r["err"] == nil
				})
			},
		},
		// A stdio server written with the Go SDK, which speaks 2026-07-28.
		"go-sdk-server": {
			start:    func(t *testing.T) *gateway { return startWithChild(t, "gosdk-server") },
			echo:     toolUse{"echo", map[string]any{"text": "through"}, "through"},
			progress: toolUse{"slow", map[string]any{"steps": 3}, ""},
			cancel:   toolUse{"slow", map[string]any{"steps": 100000}, ""},
			seen: func(t *testing.T, g *gateway) {
				if n := gatewaytest.GoSDKCancelled(t, g.URL, 1); n != 1 {
					t.Errorf("the Go SDK server saw %d cancellations, want 1", n)
				}
			},
		},
		// The demo, in the legacy era.
		"demo": {
			start:    func(t *testing.T) *gateway { return startGateway(t, nil) },
			echo:     toolUse{"echo", map[string]any{"text": "through"}, "through"},
			progress: toolUse{"slow", map[string]any{"duration_ms": 150, "interval_ms": 50}, ""},
			cancel:   toolUse{"slow", map[string]any{"duration_ms": 60000, "interval_ms": 20}, ""},
			seen: func(t *testing.T, g *gateway) {
				if got := demoReceived(t, g.URL, 1); !got.Cancellations[0].Running {
					t.Errorf("the demo got the cancellation after the call ended: %+v", got.Cancellations)
				}
			},
		},
	}
}

// Real clients through the gateway to real children: each lists tools,
// calls one, gets progress on a call's own stream, and cancels a call that
// is running; the cancellation must reach the child.
func TestClients(t *testing.T) {
	clients := map[string]func(t *testing.T, url string, c childSpec){
		"typescript-modern": func(t *testing.T, url string, c childSpec) { typescriptClient(t, url, "modern", c) },
		"typescript-legacy": func(t *testing.T, url string, c childSpec) { typescriptClient(t, url, "legacy", c) },
		"go-sdk":            goSDKClient,
	}
	for childName, child := range children(t) {
		for clientName, run := range clients {
			t.Run(clientName+"/"+childName, func(t *testing.T) {
				t.Parallel()
				g := child.start(t)
				run(t, g.URL+"/mcp", child)
				// The cancellation reached the child.
				child.seen(t, g)
			})
		}
	}
}

// typescriptClient runs client.mjs with the official TypeScript client.
func typescriptClient(t *testing.T, url, mode string, c childSpec) {
	spec, _ := json.Marshal(map[string]toolUse{"echo": c.echo, "progress": c.progress, "cancel": c.cancel})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node(t), "client.mjs", url, mode, string(spec))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client.mjs: %v\n%s\n%s", err, out, stderr.Bytes())
	}
	steps := map[string]map[string]any{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var step map[string]any
		if err := json.Unmarshal(sc.Bytes(), &step); err != nil {
			t.Fatalf("client.mjs wrote %q", sc.Text())
		}
		steps[step["step"].(string)] = step
	}
	wantVersion := map[string]string{"modern": "2026-07-28", "legacy": "2025-11-25"}[mode]
	if v := steps["connected"]["protocolVersion"]; v != wantVersion {
		t.Errorf("negotiated %v, want %s", v, wantVersion)
	}
	if names := fmt.Sprint(steps["tools"]["names"]); !strings.Contains(names, c.echo.Name) || !strings.Contains(names, c.progress.Name) {
		t.Errorf("tools = %s", names)
	}
	if text := steps["echo"]["text"]; text != c.echo.Expect {
		t.Errorf("echo = %v, want %q", text, c.echo.Expect)
	}
	if values, _ := steps["progress"]["values"].([]any); len(values) < 2 {
		t.Errorf("progress = %v, want the notifications on the call's stream", steps["progress"])
	}
	if outcome, _ := steps["cancel"]["outcome"].(string); steps["cancel"]["progressSeen"] != 1.0 || !strings.Contains(outcome, "interop test cancels") {
		t.Errorf("cancel = %v, want the call aborted after its first progress", steps["cancel"])
	}
	if _, ok := steps["closed"]; !ok {
		t.Errorf("the client did not close cleanly: %s", stderr.Bytes())
	}
}

// goSDKClient does the same with the official Go SDK's client.
func goSDKClient(t *testing.T, url string, c childSpec) {
	progress := newProgressLog()
	session := connectGoSDK(t, strings.TrimSuffix(url, "/mcp"), progress)
	// Bounded, so that a call that never ends fails the test with the
	// gateway's log instead of hanging it.
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	names := toolNames(t, session)
	if !strings.Contains(fmt.Sprint(names), c.progress.Name) {
		t.Errorf("tools = %v", names)
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: c.echo.Name, Arguments: c.echo.Arguments})
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, res); got != c.echo.Expect {
		t.Errorf("echo = %q, want %q", got, c.echo.Expect)
	}
	params := &mcp.CallToolParams{Name: c.progress.Name, Arguments: c.progress.Arguments}
	params.SetProgressToken("go-progress")
	if _, err := session.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	progress.wait(t, "go-progress", 2)

	callCtx, cancel := context.WithCancel(ctx)
	params = &mcp.CallToolParams{Name: c.cancel.Name, Arguments: c.cancel.Arguments}
	params.SetProgressToken("go-cancel")
	errc := make(chan error, 1)
	go func() {
		_, err := session.CallTool(callCtx, params)
		errc <- err
	}()
	progress.wait(t, "go-cancel", 1)
	cancel()
	if err := <-errc; err == nil {
		t.Error("the cancelled call succeeded")
	}
}
