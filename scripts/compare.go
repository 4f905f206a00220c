//go:build ignore

// Compare times sequential echo calls through two gateway binaries that
// serve the same child, in interleaved rounds, and prints the median
// microseconds per call of each: the gateway's own cost, measured in one
// run, whatever the machine's load does to both.
//
//	go build -o /tmp/gw-new ./cmd/gateway
//	git worktree add /tmp/old <commit> && (cd /tmp/old && go build -o /tmp/gw-old ./cmd/gateway)
//	go run scripts/compare.go [-rounds 10] [-calls 3000] [-token T] [-log-level info] /tmp/gw-old /tmp/gw-new /tmp/gw-old
//
// The third binary runs the child (its "demo" subcommand) for both. With
// -token, both gateways are given it in GATEWAY_AUTH_TOKENS and every call
// sends it (a gateway that predates authentication ignores both), which
// measures what checking a token costs.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

func main() {
	rounds := flag.Int("rounds", 10, "interleaved rounds")
	calls := flag.Int("calls", 3000, "calls timed per round")
	token := flag.String("token", "", "a static token to configure and send (at least 16 characters)")
	level := flag.String("log-level", "error", "the gateways' GATEWAY_LOG_LEVEL (info writes an audit line per call)")
	flag.Parse()
	if flag.NArg() != 3 {
		fmt.Fprintln(os.Stderr, "usage: go run scripts/compare.go [-rounds N] [-calls N] OLD_GATEWAY NEW_GATEWAY CHILD_BINARY")
		os.Exit(2)
	}
	older, newer, child := flag.Arg(0), flag.Arg(1), flag.Arg(2)
	var a, b []float64
	for range *rounds {
		a = append(a, timeCalls(older, child, *calls, *token, *level))
		b = append(b, timeCalls(newer, child, *calls, *token, *level))
	}
	ma, mb := median(a), median(b)
	fmt.Printf("old: %.0f µs/call (median of %d rounds)\nnew: %.0f µs/call (%.2fx)\n", ma, *rounds, mb, mb/ma)
}

// timeCalls starts gateway with child's demo, and returns the mean time of
// n sequential echo calls, after a warm-up.
func timeCalls(gateway, child string, n int, token, level string) float64 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(gateway, "--", child, "demo")
	cmd.Env = append(os.Environ(), "GATEWAY_ADDR="+addr, "GATEWAY_LOG_LEVEL="+level)
	if token != "" {
		cmd.Env = append(cmd.Env, "GATEWAY_AUTH_TOKENS=bench:"+token)
	}
	cmd.Stderr = io.Discard
	check(cmd.Start())
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	client := &http.Client{}
	defer client.CloseIdleConnections()
	// Older gateways have no /readyz?wait: ask until ready, a minute at most.
	for deadline := time.Now().Add(time.Minute); ; {
		resp, err := client.Get("http://" + addr + "/readyz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			check(fmt.Errorf("%s did not get ready", gateway))
		}
		time.Sleep(20 * time.Millisecond)
	}
	call := func(i int) {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"compare"}}}`, i)
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		check(err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		check(err)
		if !strings.Contains(string(b), `"compare"`) {
			check(fmt.Errorf("answer %s", b))
		}
	}
	for i := range 200 {
		call(i)
	}
	start := time.Now()
	for i := range n {
		call(i)
	}
	return float64(time.Since(start).Microseconds()) / float64(n)
}

func median(x []float64) float64 {
	slices.Sort(x)
	return (x[len(x)/2] + x[(len(x)-1)/2]) / 2
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
