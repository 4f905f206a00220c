package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/internal/gatewaytest"
)

// tsDriver is one official TypeScript client run by scaleout.mjs: the test
// starts calls and aborts them by writing commands, and reads every event
// (HTTP exchange, progress, result, error) as the client reports it.
type tsDriver struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu      sync.Mutex
	events  []tsEvent
	lines   []string
	changed chan struct{}
	exited  bool
	stderr  gatewaytest.LockedBuffer
}

// tsEvent is one line scaleout.mjs writes.
type tsEvent struct {
	Event string `json:"event"`
	Label string `json:"label"`

	ProtocolVersion string `json:"protocolVersion"`
	SessionID       string `json:"sessionId"`

	HTTPMethod     string `json:"httpMethod"`
	RPC            string `json:"rpc"`
	Status         int    `json:"status"`
	Upstream       string `json:"upstream"`
	UpstreamStatus string `json:"upstreamStatus"`
	Session        string `json:"session"`

	Progress     float64 `json:"progress"`
	Text         string  `json:"text"`
	IsError      bool    `json:"isError"`
	Message      string  `json:"message"`
	Code         any     `json:"code"`
	ProgressSeen int     `json:"progressSeen"`
}

// servedBy is the replica that answered an http event (the last one nginx
// tried).
func (e tsEvent) servedBy() string { return lastTried(e.Upstream) }

// ended reports whether the event is a call's outcome.
func (e tsEvent) ended() bool { return e.Event == "result" || e.Event == "error" }

// startDriver runs scaleout.mjs against url in mode (modern or legacy) and
// waits until its client is connected.
func startDriver(t *testing.T, url, mode, name string) *tsDriver {
	t.Helper()
	d := &tsDriver{name: name, changed: make(chan struct{})}
	d.cmd = exec.Command(node(t), "scaleout.mjs", url, mode, name)
	d.cmd.Stderr = &d.stderr
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if d.stdin, err = d.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go d.read(stdout, exited)
	t.Cleanup(func() {
		d.stdin.Close() // the client closes and the driver exits
		var err error
		select {
		case err = <-exited:
		case <-time.After(30 * time.Second):
			d.cmd.Process.Kill()
			err = <-exited
			t.Errorf("%s: the driver did not exit when its input ended", name)
		}
		if err != nil || t.Failed() {
			t.Logf("%s (%v) wrote:\n%s\nstderr:\n%s", name, err, d.text(), d.stderr.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d.wait(t, ctx, "connected", func(e tsEvent) bool { return e.Event == "connected" })
	return d
}

func (d *tsDriver) read(stdout io.Reader, exited chan<- error) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e tsEvent
		_ = json.Unmarshal(sc.Bytes(), &e)
		d.mu.Lock()
		d.lines = append(d.lines, sc.Text())
		d.events = append(d.events, e)
		close(d.changed)
		d.changed = make(chan struct{})
		d.mu.Unlock()
	}
	err := d.cmd.Wait()
	d.mu.Lock()
	d.exited = true
	close(d.changed)
	d.mu.Unlock()
	exited <- err
}

// send writes one command.
func (d *tsDriver) send(t *testing.T, cmd map[string]any) {
	t.Helper()
	line, _ := json.Marshal(cmd)
	if _, err := d.stdin.Write(append(line, '\n')); err != nil {
		t.Fatalf("%s: %v", d.name, err)
	}
}

// call starts a tools/call labelled label.
func (d *tsDriver) call(t *testing.T, label, tool string, args map[string]any, progress bool) {
	t.Helper()
	d.send(t, map[string]any{"op": "call", "label": label, "name": tool, "arguments": args, "progress": progress})
}

func (d *tsDriver) abort(t *testing.T, label string) {
	t.Helper()
	d.send(t, map[string]any{"op": "abort", "label": label})
}

// wait returns the first event matching pred, waiting for it within ctx.
func (d *tsDriver) wait(t *testing.T, ctx context.Context, what string, pred func(tsEvent) bool) tsEvent {
	t.Helper()
	seen := 0
	for {
		d.mu.Lock()
		events, changed, exited := d.events[seen:], d.changed, d.exited
		d.mu.Unlock()
		for _, e := range events {
			if pred(e) {
				return e
			}
		}
		seen += len(events)
		if exited {
			t.Fatalf("%s exited before %s", d.name, what)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("%s: no %s: %v", d.name, what, ctx.Err())
		}
	}
}

// outcome waits for the call's result or error.
func (d *tsDriver) outcome(t *testing.T, ctx context.Context, label string) tsEvent {
	t.Helper()
	return d.wait(t, ctx, "outcome of "+label, func(e tsEvent) bool { return e.Label == label && e.ended() })
}

// served waits for the HTTP answer to the call (its headers: for a
// stream, when it starts) and returns it.
func (d *tsDriver) served(t *testing.T, ctx context.Context, label string) tsEvent {
	t.Helper()
	return d.wait(t, ctx, "HTTP answer to "+label, func(e tsEvent) bool { return e.Event == "http" && e.Label == label })
}

// find returns every event so far matching pred.
func (d *tsDriver) find(pred func(tsEvent) bool) []tsEvent {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []tsEvent
	for _, e := range d.events {
		if pred(e) {
			out = append(out, e)
		}
	}
	return out
}

func (d *tsDriver) text() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.lines, "\n")
}

// echoed checks an echo call's outcome.
func echoed(t *testing.T, d *tsDriver, e tsEvent) {
	t.Helper()
	if e.Event != "result" || e.IsError || e.Text != e.Label {
		t.Errorf("%s: echo %s ended with %+v, want its text back", d.name, e.Label, e)
	}
}

func label(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }
