// Package gatewaytest runs the built gateway for end-to-end tests: it
// builds the binary, starts it with a child, watches its JSON log, and
// talks to it. The test binary that imports it doubles as third-party
// children (see Child).
package gatewaytest

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

// Main is TestMain for a package that drives the built gateway: it runs
// the test binary as a child when asked to (see Child), builds the gateway
// once into *bin, runs the tests, then checks for leaked goroutines, and
// exits.
func Main(m *testing.M, bin *string) {
	Child()
	dir, err := os.MkdirTemp("", "gateway-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if *bin, err = Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
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

// Build builds the gateway into dir, with the race detector when the tests
// run with it, and returns the binary's path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "gateway")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "github.com/stdiomcp/gateway/cmd/gateway")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build the gateway: %w", err)
	}
	return bin, nil
}

// gateway is a running gateway binary with its log.
type Gateway struct {
	t    testing.TB
	Cmd  *exec.Cmd
	URL  string
	Logs *LogWatch
	Done chan struct{} // closed when the process has exited
	Err  error         // exit status, after Done
}

// Start runs the gateway binary bin with the given environment (added to the
// test's) and arguments, and waits until it listens.
func Start(t testing.TB, bin string, env []string, args ...string) *Gateway {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "GATEWAY_ADDR=127.0.0.1:0", "GATEWAY_LOG_FORMAT=json", "GATEWAY_LOG_LEVEL=debug")
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &Gateway{t: t, Cmd: cmd, Logs: newLogWatch(), Done: make(chan struct{})}
	go g.Logs.read(stderr, func() {
		g.Err = cmd.Wait()
		close(g.Done)
	})
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.Done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-g.Done
			t.Errorf("the gateway did not stop on SIGTERM")
		}
		if t.Failed() || os.Getenv("GATEWAY_TEST_LOGS") != "" {
			t.Logf("gateway log:\n%s", g.Logs.Text())
		}
	})
	// The one record with the address the gateway listens on.
	rec := g.Logs.Wait(t, func(r Record) bool { _, ok := r["addr"].(string); return ok })
	g.URL = "http://" + rec["addr"].(string)
	return g
}

// Readiness is the body of GET /readyz.
type Readiness struct {
	Status   string `json:"status"`
	Reason   string `json:"reason"`
	Draining bool   `json:"draining"`
	Workers  []struct {
		Ready    bool   `json:"ready"`
		Era      string `json:"era"`
		InFlight int    `json:"in_flight"`
	} `json:"workers"`
	Restarts         int `json:"restarts"`
	InFlight         int `json:"in_flight"`
	Queued           int `json:"queued"`
	Pending          int `json:"pending"`
	LateResponses    int `json:"late_responses"`
	UnknownResponses int `json:"unknown_responses"`
}

// Await waits, at most a minute, until the gateway's state is until
// (ready, not-ready or all-ready), and returns it; the gateway holds the
// request until then (GET /readyz?wait=), so nothing polls.
func (g *Gateway) Await(until string) Readiness {
	g.t.Helper()
	r, ok := g.readiness("?wait=1m&until=" + until)
	reached := ok
	switch until {
	case "not-ready":
		reached = !ok
	case "all-ready":
		for _, w := range r.Workers {
			reached = reached && w.Ready
		}
	}
	if !reached {
		g.t.Fatalf("the gateway did not become %s: %+v", until, r)
	}
	return r
}

// Readiness is the gateway's state now.
func (g *Gateway) Readiness() Readiness {
	g.t.Helper()
	r, _ := g.readiness("")
	return r
}

func (g *Gateway) readiness(query string) (Readiness, bool) {
	g.t.Helper()
	resp, err := http.Get(g.URL + "/readyz" + query)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	var r Readiness
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		g.t.Fatalf("/readyz%s: %v", query, err)
	}
	return r, resp.StatusCode == http.StatusOK
}

// WaitReady waits until every child's handshake is done.
func (g *Gateway) WaitReady() Readiness {
	g.t.Helper()
	return g.Await("all-ready")
}

type Record map[string]any

// LogWatch collects the gateway's JSON log lines and lets tests wait for one.
type LogWatch struct {
	mu      sync.Mutex
	lines   []string
	records []Record
	changed chan struct{}
	closed  bool
}

func newLogWatch() *LogWatch { return &LogWatch{changed: make(chan struct{})} }

func (l *LogWatch) read(r io.Reader, atEOF func()) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec Record
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

// Wait returns the first record matching pred, waiting for it to be logged.
func (l *LogWatch) Wait(t testing.TB, pred func(Record) bool) Record {
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

// Find returns every record matching pred so far.
func (l *LogWatch) Find(pred func(Record) bool) []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Record
	for _, r := range l.records {
		if pred(r) {
			out = append(out, r)
		}
	}
	return out
}

func (l *LogWatch) Text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// RPC posts one JSON-RPC message and returns the response.
func RPC(t testing.TB, ctx context.Context, url, body string) *http.Response {
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

// RPCJSON posts a request and decodes its JSON answer.
func RPCJSON(t testing.TB, url, body string, into any) *http.Response {
	t.Helper()
	resp := RPC(t, context.Background(), url, body)
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	return resp
}

// Received is the demo's record of what reached it.
type Received struct {
	PID      int               `json:"pid"`
	Answered []json.RawMessage `json:"answered"`
	Requests []struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Tool   string          `json:"tool"`
	} `json:"requests"`
	Cancellations []struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
		Running   bool            `json:"running"`
		Ignored   bool            `json:"ignored"`
	} `json:"cancellations"`
}

// DemoReceived asks the demo child what it has received, after waiting for
// at least n cancellations.
func DemoReceived(t testing.TB, url string, n int) Received {
	t.Helper()
	return DemoReceivedArgs(t, url, fmt.Sprintf(`{"wait_cancelled":%d}`, n))
}

// DemoReceivedArgs is DemoReceived with the received tool's arguments
// (wait_cancelled, wait_answered).
func DemoReceivedArgs(t testing.TB, url, args string) Received {
	t.Helper()
	var resp struct {
		Result struct {
			IsError           bool     `json:"isError"`
			StructuredContent Received `json:"structuredContent"`
		} `json:"result"`
	}
	RPCJSON(t, url, `{"jsonrpc":"2.0","id":"rcv","method":"tools/call","params":{"name":"received","arguments":`+args+`}}`, &resp)
	if resp.Result.IsError {
		t.Fatalf("the demo did not see what the test waits for (%s): %+v", args, resp.Result.StructuredContent)
	}
	return resp.Result.StructuredContent
}
