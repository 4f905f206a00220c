package gatewaytest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stdiomcp/gateway/internal/demo"
)

// ChildEnv names the child a test binary should run instead of its tests.
const ChildEnv = "_GATEWAY_TEST_CHILD"

var children = map[string]func(){
	"gosdk-server": runGoSDKServer,
	"env-dump":     runEnvDump,
}

// Child runs the fake child ChildEnv names, and exits; it returns when
// none is named. TestMain calls it first: the test binary doubles as the
// children, started as the gateway's command with ChildEnv set.
func Child() {
	name := os.Getenv(ChildEnv)
	if name == "" {
		return
	}
	run, ok := children[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "no fake child %q\n", name)
		os.Exit(2)
	}
	run()
	os.Exit(0)
}

// ChildCommand is the environment and arguments that make the gateway run
// the named fake child: this test binary, with ChildEnv set.
func ChildCommand(t testing.TB, name string) (env []string, args []string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The gateway hands its child only what GATEWAY_CHILD_ENV names.
	return []string{ChildEnv + "=" + name, "GATEWAY_CHILD_ENV=" + ChildEnv}, []string{"--", exe}
}

// runGoSDKServer is a third-party stdio MCP server written with the official
// Go SDK: an echo tool, a slow tool that reports progress and stops when its
// context is cancelled, and a cancelled tool that tells how many slow calls
// were cancelled, after waiting (at most ten seconds) for at least wait of
// them.
func runGoSDKServer() {
	server := mcp.NewServer(&mcp.Implementation{Name: "gosdk-test-server", Version: "1.0.0"}, nil)
	var mu sync.Mutex
	cancelled, changed := 0, make(chan struct{})
	type cancelledIn struct {
		Wait int `json:"wait"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "cancelled", Description: "counts the slow calls cancelled"},
		func(ctx context.Context, req *mcp.CallToolRequest, in cancelledIn) (*mcp.CallToolResult, any, error) {
			timeout := time.After(10 * time.Second)
			for {
				mu.Lock()
				n, wake := cancelled, changed
				mu.Unlock()
				if n >= in.Wait {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(n)}}}, nil, nil
				}
				select {
				case <-wake:
				case <-timeout:
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(n)}}}, nil, nil
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
			}
		})
	type echoIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "echoes text"},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	type slowIn struct {
		Steps int `json:"steps"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "slow", Description: "reports progress every 20ms"},
		func(ctx context.Context, req *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
			tok := req.Params.GetProgressToken()
			for i := 1; i <= in.Steps; i++ {
				select {
				case <-ctx.Done():
					fmt.Fprintf(os.Stderr, "gosdk: slow cancelled at step %d\n", i)
					mu.Lock()
					cancelled++
					close(changed)
					changed = make(chan struct{})
					mu.Unlock()
					return nil, nil, ctx.Err()
				case <-time.After(20 * time.Millisecond):
				}
				if tok != nil {
					req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: float64(in.Steps)})
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%d steps", in.Steps)}}}, nil, nil
		})
	if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "gosdk server:", err)
	}
}

// GoSDKCancelled asks the Go SDK server child how many of its slow calls
// were cancelled, after waiting for at least n.
func GoSDKCancelled(t testing.TB, url string, n int) int {
	t.Helper()
	var resp struct {
		Result struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	RPCJSON(t, url, fmt.Sprintf(`{"jsonrpc":"2.0","id":"cancelled","method":"tools/call","params":{"name":"cancelled","arguments":{"wait":%d}}}`, n), &resp)
	if resp.Result.IsError || len(resp.Result.Content) != 1 {
		t.Fatalf("the Go SDK server saw fewer than %d cancellations: %+v", n, resp.Result)
	}
	got, _ := strconv.Atoi(resp.Result.Content[0].Text)
	return got
}

// DumpFileEnv names the file the env-dump child writes its EnvDump to; the
// gateway hands it over only when GATEWAY_CHILD_ENV names it.
const DumpFileEnv = "DUMP_FILE"

// EnvDump is what the env-dump child runs with, and what it can read of
// its parent's (the gateway's) environment through /proc, as a child that
// looks for the gateway's secrets would.
type EnvDump struct {
	Environ       []string `json:"environ"`
	Dir           string   `json:"dir"`
	ParentEnviron []string `json:"parent_environ"` // nil when unreadable
	ParentErr     string   `json:"parent_err"`
}

// runEnvDump writes an EnvDump to the file DumpFileEnv names, then serves
// as the demo server does, so that the gateway is ready only after the
// dump is written.
func runEnvDump() {
	d := EnvDump{Environ: os.Environ()}
	var err error
	if d.Dir, err = os.Getwd(); err != nil {
		d.Dir = "error: " + err.Error()
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", os.Getppid())); err != nil {
		d.ParentErr = err.Error()
	} else {
		d.ParentEnviron = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	}
	b, err := json.Marshal(d)
	if err == nil {
		err = os.WriteFile(os.Getenv(DumpFileEnv), b, 0o600)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "env-dump:", err)
		os.Exit(1)
	}
	if err := demo.Run(context.Background(), nil, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "env-dump:", err)
		os.Exit(1)
	}
}
