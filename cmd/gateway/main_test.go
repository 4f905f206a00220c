package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The test binary doubles as third-party children for the gateway under
// test: TestMain runs one of these instead of the tests when childEnv names it.
const childEnv = "_GATEWAY_TEST_CHILD"

var testChildren = map[string]func(){
	"gosdk-server":  runGoSDKServer,
	"crash-on-call": runCrashOnCall,
}

// gatewayBin is the gateway built once for the whole run.
var gatewayBin string

func TestMain(m *testing.M) {
	if name := os.Getenv(childEnv); name != "" {
		testChildren[name]()
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "gateway-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gatewayBin = filepath.Join(dir, "gateway")
	args := []string{"build", "-o", gatewayBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the gateway:", err)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		// Idle keep-alive connections of the shared client are not leaks.
		http.DefaultClient.CloseIdleConnections()
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// gateway is a running gateway binary with its log.
type gateway struct {
	t    testing.TB
	cmd  *exec.Cmd
	URL  string
	logs *logWatch
	done chan struct{} // closed when the process has exited
	err  error         // exit status, after done
}

// startGateway runs the gateway with the given environment (added to the
// test's) and arguments, and waits until it listens.
func startGateway(t testing.TB, env []string, args ...string) *gateway {
	t.Helper()
	cmd := exec.Command(gatewayBin, args...)
	cmd.Env = append(os.Environ(), "GATEWAY_ADDR=127.0.0.1:0", "GATEWAY_LOG_FORMAT=json", "GATEWAY_LOG_LEVEL=debug")
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &gateway{t: t, cmd: cmd, logs: newLogWatch(), done: make(chan struct{})}
	go g.logs.read(stderr, func() {
		g.err = cmd.Wait()
		close(g.done)
	})
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-g.done
			t.Errorf("the gateway did not stop on SIGTERM")
		}
		if t.Failed() || os.Getenv("GATEWAY_TEST_LOGS") != "" {
			t.Logf("gateway log:\n%s", g.logs.text())
		}
	})
	rec := g.logs.wait(t, func(r logRecord) bool { return r["msg"] == "listening" })
	g.URL = "http://" + rec["addr"].(string)
	return g
}

// waitReady waits for the child's handshake to be done.
func (g *gateway) waitReady() {
	g.t.Helper()
	g.logs.wait(g.t, func(r logRecord) bool { return r["msg"] == "child ready" })
}

type logRecord map[string]any

// logWatch collects the gateway's JSON log lines and lets tests wait for one.
type logWatch struct {
	mu      sync.Mutex
	lines   []string
	records []logRecord
	changed chan struct{}
	closed  bool
}

func newLogWatch() *logWatch { return &logWatch{changed: make(chan struct{})} }

func (l *logWatch) read(r io.Reader, atEOF func()) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec logRecord
		_ = json.Unmarshal(sc.Bytes(), &rec)
		l.mu.Lock()
		l.lines = append(l.lines, sc.Text())
		if rec != nil {
			l.records = append(l.records, rec)
		}
		close(l.changed)
		l.changed = make(chan struct{})
		l.mu.Unlock()
	}
	atEOF()
	l.mu.Lock()
	l.closed = true
	close(l.changed)
	l.mu.Unlock()
}

// wait returns the first record matching pred, waiting for it to be logged.
func (l *logWatch) wait(t testing.TB, pred func(logRecord) bool) logRecord {
	t.Helper()
	timeout := time.After(30 * time.Second)
	seen := 0
	for {
		l.mu.Lock()
		recs, changed, closed := l.records[seen:], l.changed, l.closed
		l.mu.Unlock()
		for _, r := range recs {
			if pred(r) {
				return r
			}
		}
		seen += len(recs)
		if closed {
			t.Fatalf("the gateway exited without logging what the test waits for")
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("the gateway did not log what the test waits for")
		}
	}
}

// find returns every record matching pred so far.
func (l *logWatch) find(pred func(logRecord) bool) []logRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logRecord
	for _, r := range l.records {
		if pred(r) {
			out = append(out, r)
		}
	}
	return out
}

func (l *logWatch) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// rpc posts one JSON-RPC message and returns the response.
func rpc(t testing.TB, ctx context.Context, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// rpcJSON posts a request and decodes its JSON answer.
func rpcJSON(t testing.TB, url, body string, into any) *http.Response {
	t.Helper()
	resp := rpc(t, context.Background(), url, body)
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	return resp
}

// received is the demo's record of what reached it.
type received struct {
	Requests []struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Tool   string          `json:"tool"`
	} `json:"requests"`
	Cancellations []struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
		Running   bool            `json:"running"`
	} `json:"cancellations"`
}

// demoReceived asks the demo child what it has received, after waiting for
// at least n cancellations.
func demoReceived(t testing.TB, url string, n int) received {
	t.Helper()
	var resp struct {
		Result struct {
			IsError           bool     `json:"isError"`
			StructuredContent received `json:"structuredContent"`
		} `json:"result"`
	}
	rpcJSON(t, url, fmt.Sprintf(`{"jsonrpc":"2.0","id":"rcv","method":"tools/call","params":{"name":"received","arguments":{"wait_cancelled":%d}}}`, n), &resp)
	if resp.Result.IsError {
		t.Fatalf("the demo saw fewer than %d cancellations: %+v", n, resp.Result.StructuredContent)
	}
	return resp.Result.StructuredContent
}
