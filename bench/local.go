package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// modernCall is a 2026-07-28 tools/call of echo, as the gateway and the
// floor are sent it.
func modernCall(text string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":` +
		strconv.Quote(text) + `},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
}

// httpCaller posts one body per call and checks the answer echoes, under
// the client's id (every call sends id 1).
type httpCaller struct {
	client *http.Client
	url    string
	header http.Header
}

func newHTTPClient() *http.Client {
	return &http.Client{Transport: &rawTransport{}}
}

func (c *httpCaller) Call(ctx context.Context, text string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(modernCall(text)))
	if err != nil {
		return err
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(strconv.Quote(text))) || !bytes.Contains(b, []byte(`"id":1,`)) {
		return fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
	}
	return nil
}

func (c *httpCaller) Close() error {
	c.client.CloseIdleConnections()
	return nil
}

// gatewayTarget is the gateway binary at bin, spoken to as a 2026-07-28
// client, configured as a user would run it (env adds to that).
func gatewayTarget(name, bin string, env ...string) target {
	return target{
		name: name,
		command: func(ctx context.Context, port int, child []string) *exec.Cmd {
			cmd := exec.CommandContext(ctx, bin, append([]string{"--"}, child...)...)
			cmd.Env = append(serverEnv(), append([]string{"GATEWAY_ADDR=127.0.0.1:" + strconv.Itoa(port)}, env...)...)
			// Its log is not shown; the end of its stderr is kept (see
			// startServer) to say why it stopped.
			cmd.Stdout = io.Discard
			return cmd
		},
		dial: dialGateway,
	}
}

// serverEnv is the suite's environment less what would change the servers
// measured behind the report's back: every GATEWAY_* setting, and the Go
// runtime's (the gateway reads GOGC and GOMAXPROCS to turn its heap floor
// and its thread adapting off; the floors are Go programs too). The
// gateway runs with its defaults and the settings the report names.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "GATEWAY_") || slices.Contains([]string{"GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GODEBUG"}, name) {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// dialGateway makes a caller that sends the gateway 2026-07-28 echo calls,
// headers and all.
func dialGateway(_ context.Context, base string) (caller, error) {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("MCP-Protocol-Version", "2026-07-28")
	h.Set("Mcp-Method", "tools/call")
	h.Set("Mcp-Name", "echo")
	return &httpCaller{client: newHTTPClient(), url: base + "/mcp", header: h}, nil
}

// floorTarget is a bare net/http handler that reads the request and
// answers as an echo would, with no child: what HTTP alone costs. It runs
// as a process of its own (this program, as "bench floor"), like the
// servers it is the floor of.
func floorTarget(self string) target {
	return target{
		name: floorName,
		command: func(ctx context.Context, port int, _ []string) *exec.Cmd {
			cmd := exec.CommandContext(ctx, self, "floor", strconv.Itoa(port))
			cmd.Env = serverEnv()
			cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
			return cmd
		},
		dial: func(ctx context.Context, base string) (caller, error) {
			h := http.Header{}
			h.Set("Content-Type", "application/json")
			return &httpCaller{client: newHTTPClient(), url: base + "/", header: h}, nil
		},
	}
}

// serveFloor is "bench floor PORT".
func serveFloor(port string) error {
	answer := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":` + strconv.Quote(benchText) + `}]}}`)
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		return err
	}
	return http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		if r.URL.Path == "/hold" {
			serveHold(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.Write(answer)
	}))
}

// benchText is what every call echoes.
const benchText = "hello from the bench"
