package bridge

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"regexp"
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
		{EraModern, autoReply{discover: "result", ignorePing: true}, "server/discover"},
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
				if !strings.Contains(log.String(), `msg="child stopped serving"`) || !regexp.MustCompile(`failed_calls=1\b`).MatchString(log.String()) {
					t.Errorf("log does not say the child stopped serving with one failed call:\n%s", log.String())
				}
			})
		})
	}
}

// A liveness probe answered with a message that is not valid JSON-RPC is
// still unanswered: the gateway's own exchanges keep their timeouts, and
// the child is killed.
func TestProbeAnsweredInvalidlyIsUnanswered(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w, child := wedgeWorld(t, EraLegacy, autoReply{initialize: true, ignorePing: true}, nil)
		defer w.b.Close(context.Background())
		defer child.exit()
		c := w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hang"}}`)
		child.expect("tools/call")
		probe := <-child.got
		if probe.Method != "ping" {
			t.Fatalf("child got %s, want the ping probe", probe.Raw)
		}
		probed := time.Now()
		child.send(`{"jsonrpc":"2.0","id":%s,"error":null}`, probe.ID)
		if _, err := c.wait(); gatewayCode(t, err) != jsonrpc.CodeUnavailable || !strings.Contains(err.Error(), "stopped responding") {
			t.Errorf("call ended with %v, want child_unavailable saying the child stopped responding", err)
		}
		if took := time.Since(probed); took > 10*time.Second {
			t.Errorf("killed %v after the probe, want at its timeout (10s): the invalid line passed for its answer", took)
		}
		(<-w.children).exit()
	})
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

// Calls that each end unanswered before the wedge timeout (their clients
// gave up) still add up: a child that never writes while one call or
// another is pending is probed once it has owed answers for the wedge
// timeout in all, and killed.
func TestWedgedChildWithCallsThatGiveUp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		gap    time.Duration // between one call's start and the next's
		giveUp time.Duration // each call's own timeout
	}{
		{"overlapping", 20 * time.Second, 40 * time.Second},
		{"one after another", 40 * time.Second, 40 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w, child := wedgeWorld(t, EraLegacy, autoReply{initialize: true, ignorePing: true}, nil)
				defer w.b.Close(context.Background())
				if err := w.b.WaitReady(context.Background()); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				killed := make(chan error, 1)
				for time.Since(start) < 5*time.Minute {
					go func() {
						ctx, cancel := context.WithTimeout(context.Background(), tc.giveUp)
						defer cancel()
						c, err := callOn(w.b, ctx, request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hang"}}`), Caller{})
						if err == nil {
							_, err = c.wait()
						}
						if e, ok := errors.AsType[*jsonrpc.Error](err); ok && e.Code == jsonrpc.CodeUnavailable {
							select {
							case killed <- err:
							default:
							}
						}
					}()
					time.Sleep(tc.gap)
					select {
					case <-killed:
						// Probed at 1m to 1m15s of silence, killed 10s later.
						if took := time.Since(start); took > 2*time.Minute {
							t.Errorf("killed after %v, want within 2m", took)
						}
						synctest.Wait()
						child.exit()
						(<-w.children).exit()
						return
					default:
					}
				}
				child.exit()
				t.Fatalf("a child that wrote nothing for %v with calls pending was never killed", time.Since(start))
			})
		})
	}
}
