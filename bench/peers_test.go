package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// peerEnv is the node binary and bench/ with the peers installed in it;
// without them the test is skipped, unless GATEWAY_REQUIRE_INTEROP says
// they must be there.
func peerEnv(tb testing.TB) (node, dir string) {
	tb.Helper()
	node = testNode(tb)
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range []string{
		"node_modules/supergateway/dist/index.js",
		"node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs",
	} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			missing(tb, "the peers are not installed (run bench/setup): "+err.Error())
		}
	}
	return node, dir
}

// testNode is the Node the suite runs the peers with.
func testNode(tb testing.TB) string {
	tb.Helper()
	root, err := repoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	node, err := nodeBinary(root)
	if err != nil {
		missing(tb, err.Error())
	}
	return node
}

func missing(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv("GATEWAY_REQUIRE_INTEROP") != "" {
		tb.Fatal(why)
	}
	tb.Skip(why)
}

// runningPeer is a peer started by its target, waited for by a goroutine
// of the test.
type runningPeer struct {
	cmd     *exec.Cmd
	base    string
	stop    context.CancelFunc // SIGTERM, then a kill after peerStopGrace
	exited  chan struct{}
	waitErr error
}

func launch(tb testing.TB, tg target, child []string) *runningPeer {
	tb.Helper()
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := tg.command(ctx, port, child)
	if err := cmd.Start(); err != nil {
		cancel()
		tb.Fatalf("start %s: %v", tg.name, err)
	}
	p := &runningPeer{cmd: cmd, base: "http://127.0.0.1:" + strconv.Itoa(port), stop: cancel, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	tb.Cleanup(func() {
		cancel()
		<-p.exited
	})
	if err := awaitPort(port, p.exited, 30*time.Second); err != nil {
		tb.Fatalf("%s: %v", tg.name, err)
	}
	return p
}

// awaitPort dials 127.0.0.1:port until it accepts, the server exits, or
// within has passed; each attempt has a short timeout, and attempts are
// paced so as not to take a core from the server while it starts.
func awaitPort(port int, exited <-chan struct{}, within time.Duration) error {
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(within)
	pace := time.NewTicker(10 * time.Millisecond)
	defer pace.Stop()
	for {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s after %v: %w", addr, within, err)
		}
		select {
		case <-exited:
			return fmt.Errorf("exited before listening on %s", addr)
		case <-pace.C:
		}
	}
}

// echoText is the text of call i: quotes, a backslash, control characters
// and non-ASCII, so the quoting is checked too, and a number, so that an
// answer given to the wrong call is caught.
func echoText(i int64) string {
	return fmt.Sprintf("call %d: \"ünï ✓\" \\ \t\n\x01", i)
}

// hammer makes calls echo calls from workers goroutines at once.
func hammer(ctx context.Context, c caller, calls, workers int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(calls); i = next.Add(1) {
				if err := c.Call(ctx, echoText(i)); err != nil {
					errs[w] = fmt.Errorf("call %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func TestPeers(t *testing.T) {
	node, dir := peerEnv(t)
	child := []string{node, filepath.Join(dir, "echo-server.mjs")}
	for _, tg := range []target{supergatewayTarget(node, dir), mcpProxyTarget(node, dir)} {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			p := launch(t, tg, child)
			ctx := context.Background()
			c, err := tg.dial(ctx, p.base)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			if err := hammer(ctx, c, 200, 16); err != nil {
				t.Fatal(err)
			}
			tree := procTree{pid: p.cmd.Process.Pid}.pids()
			if !runsEcho(tree) {
				t.Errorf("no echo-server.mjs among the processes %v", tree)
			}
			if err := c.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			start := time.Now()
			p.stop()
			<-p.exited
			t.Logf("stopped in %v: %v", time.Since(start).Round(time.Millisecond), p.cmd.ProcessState)
			if err := waitExited(tree, 10*time.Second); err != nil {
				t.Errorf("after stopping: %v", err)
			}
		})
	}
}

// TestPeerErrors checks that a caller says so when the answer is not the
// echo it asked for.
func TestPeerErrors(t *testing.T) {
	const text = "a \"b\""
	quoted := appendJSONString(nil, text)
	for _, tc := range []struct {
		name, contentType, body, err string
	}{
		{"json", "application/json", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a \"b\""}]}}`, ""},
		{"sse", "text/event-stream", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"a \\\"b\\\"\"}]}}\n\n", ""},
		{"other escaping", "application/json", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a \u0022b\u0022"}]}}`, ""},
		{"other text", "application/json", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a"}]}}`, `got "a" back`},
		{"error", "application/json", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"unknown tool"}}`, "error -32602: unknown tool"},
		{"error naming the text", "application/json", `{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m","data":{"text":"a \"b\""}}}`, "error -1"},
		{"not json", "application/json", `<html>`, "not JSON-RPC"},
		{"empty stream", "text/event-stream", ": keep-alive\n\n", "no data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := answerMessage(tc.contentType, []byte(tc.body))
			if err == nil {
				err = checkEcho(msg, quoted, text)
			}
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("got %v, want an error with %q", err, tc.err)
			}
		})
	}
}

func TestAppendJSONString(t *testing.T) {
	// What JSON.stringify writes for each.
	for in, want := range map[string]string{
		"plain":              `"plain"`,
		"q\"b\\":             `"q\"b\\"`,
		"\b\f\n\r\t\x00\x1f": `"\b\f\n\r\t\u0000\u001f"`,
		"ü ✓ <&> \u2028":     "\"ü ✓ <&> \u2028\"",
		"\x7f":               "\"\x7f\"",
	} {
		if got := string(appendJSONString(nil, in)); got != want {
			t.Errorf("appendJSONString(%q) = %s, want %s", in, got, want)
		}
	}
}

// BenchmarkPeerEcho makes sequential echo calls on each peer:
//
//	go test -run '^$' -bench PeerEcho -benchtime 10000x
func BenchmarkPeerEcho(b *testing.B) {
	node, dir := peerEnv(b)
	child := []string{node, filepath.Join(dir, "echo-server.mjs")}
	for _, tc := range []struct {
		name string
		tg   target
	}{
		{"supergateway", supergatewayTarget(node, dir)},
		{"mcp-proxy", mcpProxyTarget(node, dir)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := launch(b, tc.tg, child)
			ctx := context.Background()
			c, err := tc.tg.dial(ctx, p.base)
			if err != nil {
				b.Fatalf("dial: %v", err)
			}
			defer c.Close()
			const text = "hello from the bench"
			before := cpuTime(b)
			for b.Loop() {
				if err := c.Call(ctx, text); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
			// What the client costs: this process, not the peer.
			b.ReportMetric(float64((cpuTime(b)-before).Microseconds())/float64(b.N), "client-µs/call")
			b.Logf("%s: %d sequential calls in %v", tc.tg.name, b.N, b.Elapsed().Round(time.Millisecond))
		})
	}
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func runsEcho(pids []int) bool {
	for _, pid := range pids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(b), "echo-server.mjs") {
			return true
		}
	}
	return false
}

// sysPidfdOpen is pidfd_open(2)'s number, the same on every Linux
// architecture (Linux 5.3 and later).
const sysPidfdOpen = 434

// waitExited waits until every process in pids has exited, at most
// within: a pidfd becomes readable when its process exits, reaped or not.
func waitExited(pids []int, within time.Duration) error {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll: %w", err)
	}
	defer syscall.Close(ep)
	live := map[int32]int{} // pidfd -> pid
	defer func() {
		for fd := range live {
			syscall.Close(int(fd))
		}
	}()
	for _, pid := range pids {
		fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
		if errno == syscall.ESRCH {
			continue // exited and reaped
		}
		if errno != 0 {
			return fmt.Errorf("pidfd_open %d: %w", pid, errno)
		}
		live[int32(fd)] = pid
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}
		if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, int(fd), &ev); err != nil {
			return fmt.Errorf("epoll_ctl: %w", err)
		}
	}
	deadline := time.Now().Add(within)
	events := make([]syscall.EpollEvent, 8)
	for len(live) > 0 {
		ms := time.Until(deadline).Milliseconds()
		if ms <= 0 {
			var left []string
			for _, pid := range live {
				cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				left = append(left, fmt.Sprintf("%d (%s)", pid, strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")))
			}
			return fmt.Errorf("still running after %v: %s", within, strings.Join(left, ", "))
		}
		n, err := syscall.EpollWait(ep, events, int(ms))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("epoll_wait: %w", err)
		}
		for _, ev := range events[:n] {
			_ = syscall.EpollCtl(ep, syscall.EPOLL_CTL_DEL, int(ev.Fd), nil)
			syscall.Close(int(ev.Fd))
			delete(live, ev.Fd)
		}
	}
	return nil
}

// echoChild is echo-server.mjs on pipes.
type echoChild struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Reader
}

type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func startEcho(t *testing.T) *echoChild {
	t.Helper()
	cmd := exec.Command(testNode(t), "echo-server.mjs")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		// At the end of its input the server exits by itself, with 0.
		in.Close()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("echo-server.mjs: %v", err)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Errorf("echo-server.mjs still runs 10 s after its stdin closed")
			<-exited
		}
	})
	return &echoChild{t: t, in: in, out: bufio.NewReader(out)}
}

func (e *echoChild) send(lines ...string) {
	e.t.Helper()
	if _, err := io.WriteString(e.in, strings.Join(lines, "\n")+"\n"); err != nil {
		e.t.Fatal(err)
	}
}

func (e *echoChild) read() rpcAnswer {
	e.t.Helper()
	line, err := e.out.ReadBytes('\n')
	if err != nil {
		e.t.Fatalf("read: %v", err)
	}
	var a rpcAnswer
	if err := json.Unmarshal(line, &a); err != nil {
		e.t.Fatalf("answer %q: %v", line, err)
	}
	return a
}

// ask sends one line and checks the answer: its id, and its result or its
// error code as JSON (compared as values, not bytes).
func (e *echoChild) ask(line, id, result string, code int) rpcAnswer {
	e.t.Helper()
	e.send(line)
	a := e.read()
	if string(a.ID) != id {
		e.t.Errorf("%s: got id %s, want %s", line, a.ID, id)
	}
	switch {
	case code != 0 && (a.Error == nil || a.Error.Code != code):
		e.t.Errorf("%s: got %s %+v, want error %d", line, a.Result, a.Error, code)
	case code == 0 && a.Error != nil:
		e.t.Errorf("%s: got error %+v", line, *a.Error)
	case code == 0 && !sameJSON(a.Result, result):
		e.t.Errorf("%s:\ngot  %s\nwant %s", line, a.Result, result)
	}
	return a
}

func sameJSON(a json.RawMessage, b string) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}

const (
	echoTools  = `[{"name":"echo","description":"Returns its text.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}]`
	echoServer = `{"name":"bench-echo","version":"1.0.0"}`
	modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
)

func TestEchoServerLegacy(t *testing.T) {
	t.Parallel()
	e := startEcho(t)
	for _, v := range []string{"2025-03-26", "2025-06-18", "2025-11-25"} {
		e.ask(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+v+`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
			"1", `{"protocolVersion":"`+v+`","capabilities":{"tools":{}},"serverInfo":`+echoServer+`}`, 0)
	}
	e.ask(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{}}}`,
		"2", `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":`+echoServer+`}`, 0)
	// A notification has no answer: the next answer is the ping's.
	e.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	e.ask(`{"jsonrpc":"2.0","id":"p","method":"ping"}`, `"p"`, `{}`, 0)
	e.ask(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, "3", `{"tools":`+echoTools+`}`, 0)
	e.ask(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a \"b\" ü\n"}}}`,
		"4", `{"content":[{"type":"text","text":"a \"b\" ü\n"}]}`, 0)
	e.ask(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, "5", "", -32602)
	e.ask(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{"text":7}}}`, "6", "", -32602)
	e.ask(`{"jsonrpc":"2.0","id":7,"method":"resources/list"}`, "7", "", -32601)
	e.ask(`{"jsonrpc":"2.0","id":8,"method":"server/discover"`, "null", "", -32700)
	e.ask(`[1]`, "null", "", -32600)
}

func TestEchoServerModern(t *testing.T) {
	t.Parallel()
	e := startEcho(t)
	e.ask(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+modernMeta+`}}`, "1",
		`{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"resultType":"complete","ttlMs":0,"cacheScope":"public","_meta":{"io.modelcontextprotocol/serverInfo":`+echoServer+`}}`, 0)
	e.ask(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},`+modernMeta+`}}`, "2",
		`{"content":[{"type":"text","text":"hi"}],"resultType":"complete"}`, 0)
	e.ask(`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{`+modernMeta+`}}`, "3",
		`{"tools":`+echoTools+`,"resultType":"complete","ttlMs":0,"cacheScope":"public"}`, 0)
	e.ask(`{"jsonrpc":"2.0","id":4,"method":"ping","params":{`+modernMeta+`}}`, "4", `{"resultType":"complete"}`, 0)
	e.ask(`{"jsonrpc":"2.0","id":5,"method":"prompts/list","params":{`+modernMeta+`}}`, "5", "", -32601)
	a := e.ask(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2030-01-01"}}}`, "6", "", -32022)
	if a.Error != nil && !sameJSON(a.Error.Data, `{"supported":["2026-07-28"],"requested":"2030-01-01"}`) {
		t.Errorf("unsupported version: data %s", a.Error.Data)
	}
}

// TestEchoServerPipelined writes many calls at once and reads the answers
// in order: one line each, nothing lost across reads.
func TestEchoServerPipelined(t *testing.T) {
	t.Parallel()
	e := startEcho(t)
	const n = 5000
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"%d"},%s}}`+"\n", i, i, modernMeta)
	}
	go func() { _, _ = io.WriteString(e.in, b.String()) }()
	for i := range n {
		a := e.read()
		if string(a.ID) != strconv.Itoa(i) || !sameJSON(a.Result, fmt.Sprintf(`{"content":[{"type":"text","text":"%d"}],"resultType":"complete"}`, i)) {
			t.Fatalf("answer %d: id %s, result %s", i, a.ID, a.Result)
		}
	}
}
