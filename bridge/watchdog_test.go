package bridge

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stdiomcp/gateway/internal/gatewaytest"
	"github.com/stdiomcp/gateway/jsonrpc"
)

// wedgeWorld is a bridge on the bubble's clock with a short wedge timeout,
// logging to log when it is not nil.
func wedgeWorld(t *testing.T, era Era, auto autoReply, log io.Writer) (*world, *fakeChild) {
	w := &world{t: t, children: make(chan *fakeChild, 8), auto: auto}
	opts := Options{Era: era, WedgeTimeout: time.Minute, ProbeTimeout: 10 * time.Second,
		IdleTimeout: time.Hour, RestartMin: time.Second}
	if log != nil {
		opts.Logger = slog.New(slog.NewTextHandler(log, nil))
	}
	w.b = New(w.start, strict(t, opts))
	return w, <-w.children
}

// A child that has calls pending, writes nothing and does not answer the
// liveness probe is killed: its calls fail with child_unavailable, and a
// new child takes its place.
func TestWedgedChildIsKilled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		era   Era
		auto  autoReply
		probe string
	}{
		{EraLegacy, autoReply{initialize: true, ignorePing: true}, "ping"},
		{EraModern, autoReply{}, "server/discover"},
	} {
		t.Run(string(tc.era), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var log gatewaytest.LockedBuffer
				w, child := wedgeWorld(t, tc.era, tc.auto, &log)
				defer w.b.Close(context.Background())
				defer child.exit()
				c := w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hang"}}`)
				child.expect("tools/call")
				start := time.Now()
				probe := <-child.got
				if probe.Method != tc.probe {
					t.Fatalf("child got %s, want the %s probe", probe.Raw, tc.probe)
				}
				if waited := time.Since(start); waited < time.Minute || waited > time.Minute+15*time.Second {
					t.Errorf("probed after %v of silence, want 1m to 1m15s", waited)
				}
				_, err := c.wait()
				if gatewayCode(t, err) != jsonrpc.CodeUnavailable || !strings.Contains(err.Error(), "stopped responding") {
					t.Errorf("call ended with %v, want child_unavailable saying the child stopped responding", err)
				}
				if waited := time.Since(start); waited > time.Minute+25*time.Second {
					t.Errorf("killed after %v, want within the probe timeout of the probe", waited)
				}
				next := <-w.children
				defer next.exit()
				if err := w.b.WaitReady(context.Background()); err != nil {
					t.Fatal(err)
				}
				if st := w.b.Stats(); st.Restarts != 1 {
					t.Errorf("restarts = %d, want 1", st.Restarts)
				}
				// The kill failed the call before the reader saw the child go;
				// the line saying it stopped still counts it.
				if !strings.Contains(log.String(), `msg="child stopped serving"`) || !strings.Contains(log.String(), "failed_calls=1") {
					t.Errorf("log does not say the child stopped serving with one failed call:\n%s", log.String())
				}
			})
		})
	}
}

// A child that is slow but alive answers the probe and keeps its calls:
// a long silent call is not a reason to kill anything.
func TestSlowChildIsNotKilled(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w, child := wedgeWorld(t, EraLegacy, autoReply{initialize: true}, nil)
		defer w.b.Close(context.Background())
		defer child.exit()
		c := w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`)
		req := child.expect("tools/call")
		for range 3 {
			// The fake child answers pings by itself.
			if ping := <-child.got; ping.Method != "ping" {
				t.Fatalf("child got %s, want a ping", ping.Raw)
			}
		}
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, req.ID)
		if resp, err := c.wait(); err != nil || !contains(resp, `"content":[]`) {
			t.Fatalf("call got %s, %v", resp, err)
		}
		if st := w.b.Stats(); st.Restarts != 0 || st.Pending != 0 {
			t.Errorf("stats = %+v, want no restart and nothing pending", st)
		}
		// With nothing pending, silence is not probed.
		time.Sleep(10 * time.Minute)
		select {
		case m := <-child.got:
			t.Errorf("idle child got %s", m.Raw)
		default:
		}
	})
}

// Silence counts from when the child was handed the call, not from its last
// output: a child idle for longer than the wedge timeout and then busy with
// a call for less than it is left alone, and one that stays silent is probed
// a wedge timeout after the call reached it.
func TestIdleChildIsNotProbedAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w, child := wedgeWorld(t, EraLegacy, autoReply{initialize: true, ignorePing: true}, nil)
		defer w.b.Close(context.Background())
		defer child.exit()
		if err := w.b.WaitReady(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Minute)
		c := w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"busy"}}`)
		req := child.expect("tools/call")
		time.Sleep(50 * time.Second)
		select {
		case m := <-child.got:
			t.Fatalf("child busy for 50s after 10m idle got %s; the wedge timeout is 1m", m.Raw)
		default:
		}
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, req.ID)
		if resp, err := c.wait(); err != nil || !contains(resp, `"content":[]`) {
			t.Fatalf("call got %s, %v", resp, err)
		}

		time.Sleep(10 * time.Minute)
		c = w.call(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hang"}}`)
		child.expect("tools/call")
		start := time.Now()
		if probe := <-child.got; probe.Method != "ping" {
			t.Fatalf("child got %s, want the ping probe", probe.Raw)
		}
		if waited := time.Since(start); waited < time.Minute || waited > time.Minute+15*time.Second {
			t.Errorf("probed %v after the call, want 1m to 1m15s", waited)
		}
		if _, err := c.wait(); gatewayCode(t, err) != jsonrpc.CodeUnavailable {
			t.Errorf("call ended with %v, want child_unavailable", err)
		}
		next := <-w.children
		defer next.exit()
		if st := w.b.Stats(); st.Restarts != 1 {
			t.Errorf("restarts = %d, want 1", st.Restarts)
		}
	})
}
