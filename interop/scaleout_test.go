package interop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/internal/gatewaytest"
)

// cluster is three gateway replicas, each with its own demo child, behind
// nginx round robin, as a Kubernetes Service spreads them.
type cluster struct {
	replicas []*gateway
	addrs    []string // host:port, as nginx names them
	proxy    *proxy
}

func (c *cluster) replica(t *testing.T, addr string) *gateway {
	t.Helper()
	i := slices.Index(c.addrs, addr)
	if i < 0 {
		t.Fatalf("nginx names %q, not one of the replicas %v", addr, c.addrs)
	}
	return c.replicas[i]
}

// The scale-out story on loopback: three replicas sharing GATEWAY_SECRET
// behind Debian's nginx, no affinity. 2026 and 2025 clients (the official
// TypeScript client) work whichever replica answers; progress arrives on
// the stream; closing a stream cancels the call on the child that runs it;
// and a replica that gets SIGTERM while calls run loses none of them.
func TestScaleOut(t *testing.T) {
	nginxBin(t)
	node(t)
	secret := make([]byte, 32)
	rand.Read(secret)
	env := []string{
		"GATEWAY_SECRET=" + hex.EncodeToString(secret),
		// Long enough for the short calls of the SIGTERM step, and short
		// enough that the long ones are cut within the test's budget.
		"GATEWAY_SHUTDOWN_GRACE=10s",
	}
	c := &cluster{}
	for range 3 {
		g := startGateway(t, env)
		g.WaitReady()
		c.replicas = append(c.replicas, g)
		c.addrs = append(c.addrs, strings.TrimPrefix(g.URL, "http://"))
	}
	c.proxy = startNginx(t, c.addrs)
	modern := startDriver(t, c.proxy.URL+"/mcp", "modern", "modern")
	legacy := startDriver(t, c.proxy.URL+"/mcp", "legacy", "legacy")
	clients := []*tsDriver{modern, legacy}

	t.Run("clients", func(t *testing.T) { scaleOutClients(t, c, modern, legacy) })
	t.Run("progress", func(t *testing.T) { scaleOutProgress(t, clients) })
	t.Run("close-cancels", func(t *testing.T) {
		scaleOutCloseCancels(t, c, modern)
		scaleOutLegacyCloseCancels(t, c)
	})
	t.Run("sigterm", func(t *testing.T) { scaleOutSIGTERM(t, c, modern, legacy) })
}

// Each client makes calls one after another; round robin sends them to
// different replicas, and every one succeeds. The 2025 client keeps the
// session id one replica minted, and the others accept it.
func scaleOutClients(t *testing.T, c *cluster, modern, legacy *tsDriver) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mark := c.proxy.Log.mark()
	const calls = 6
	for _, d := range []*tsDriver{modern, legacy} {
		for i := range calls {
			l := label("echo-"+d.name, i)
			d.call(t, l, "echo", map[string]any{"text": l}, false)
			echoed(t, d, d.outcome(t, ctx, l))
		}
	}

	wantVersion := map[string]string{"modern": "2026-07-28", "legacy": "2025-11-25"}
	for _, d := range []*tsDriver{modern, legacy} {
		if got := d.find(func(e tsEvent) bool { return e.Event == "connected" })[0].ProtocolVersion; got != wantVersion[d.name] {
			t.Errorf("%s negotiated %q, want %q", d.name, got, wantVersion[d.name])
		}
		// What the client saw: which replica answered each call.
		served := map[string]int{}
		for _, e := range d.find(func(e tsEvent) bool { return e.Event == "http" && strings.HasPrefix(e.Label, "echo-") }) {
			served[e.servedBy()]++
		}
		if len(served) < 2 {
			t.Errorf("%s: the calls were answered by %v, want more than one replica", d.name, served)
		}
		t.Logf("%s: echo calls answered by %v", d.name, served)
	}

	// What nginx saw: each client's calls spread over the replicas.
	entries := c.proxy.Log.wait(t, ctx, mark, "every call of both clients", func(es []accessEntry) bool {
		n := 0
		for _, e := range es {
			if e.Method == "POST" && e.Status == "200" {
				n++
			}
		}
		return n >= 2*calls
	})
	for _, name := range []string{"modern", "legacy"} {
		upstreams := map[string]bool{}
		for _, e := range entries {
			if e.Client == name && e.Status == "200" {
				upstreams[e.servedBy()] = true
			}
		}
		if len(upstreams) < 2 {
			t.Errorf("nginx sent the %s client's requests to %v, want more than one replica:%s", name, upstreams, fmtEntries(entries))
		}
	}

	// The 2025 session: minted by one replica, used on the others.
	inits := legacy.find(func(e tsEvent) bool { return e.Event == "http" && e.RPC == "initialize" })
	if len(inits) != 1 || inits[0].Session == "" {
		t.Fatalf("the legacy client's initialize: %+v, want one answer with a session id", inits)
	}
	minter := inits[0].servedBy()
	elsewhere := 0
	for _, e := range legacy.find(func(e tsEvent) bool { return e.Event == "http" && strings.HasPrefix(e.Label, "echo-") }) {
		if e.servedBy() != minter && e.Status == 200 {
			elsewhere++
		}
	}
	if elsewhere == 0 {
		t.Errorf("no call in the session %s minted by %s was answered by another replica", inits[0].Session, minter)
	}
}

// Progress notifications reach each client on its call's own stream,
// before the result: nginx passes the stream through unbuffered.
func scaleOutProgress(t *testing.T, clients []*tsDriver) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, d := range clients {
		d.call(t, "progress-"+d.name, "slow", map[string]any{"duration_ms": 400, "interval_ms": 50}, true)
	}
	for _, d := range clients {
		l := "progress-" + d.name
		if end := d.outcome(t, ctx, l); end.Event != "result" || end.Text != "done after 8 steps" {
			t.Errorf("%s: %+v, want the result after 8 steps", d.name, end)
		}
		// The client's events in the order it saw them: the progress, then
		// the result (outcome waited for it).
		var values []float64
		events := d.find(func(e tsEvent) bool { return e.Label == l && (e.Event == "progress" || e.ended()) })
		for _, e := range events[:len(events)-1] {
			values = append(values, e.Progress)
		}
		if !events[len(events)-1].ended() || len(values) < 2 || !slices.IsSorted(values) {
			t.Errorf("%s: progress %v, want several rising values before the result", d.name, values)
		}
	}
}

// demoState is what each replica's child has received so far, asked of
// each replica directly.
func demoState(t *testing.T, c *cluster) []gatewaytest.Received {
	t.Helper()
	var out []gatewaytest.Received
	for _, g := range c.replicas {
		out = append(out, demoReceived(t, g.URL, 0))
	}
	return out
}

// running returns the ids of the slow calls a child has received and not
// answered.
func running(r gatewaytest.Received) []string {
	var ids []string
	for _, q := range r.Requests {
		if q.Tool == "slow" && !slices.ContainsFunc(r.Answered, func(a json.RawMessage) bool { return string(a) == string(q.ID) }) {
			ids = append(ids, string(q.ID))
		}
	}
	return ids
}

// checkCancelledOn checks that, from before to now, the call whose stream
// closed is cancelled on replica runner's child, and that the other
// children got nothing.
func checkCancelledOn(t *testing.T, c *cluster, runner int, before []gatewaytest.Received, callID string) {
	t.Helper()
	got := demoReceived(t, c.replicas[runner].URL, len(before[runner].Cancellations)+1)
	last := got.Cancellations[len(got.Cancellations)-1]
	if string(last.RequestID) != callID || !last.Running {
		t.Errorf("replica %d's child got the cancellation %+v, want one for the running call %s", runner, last, callID)
	}
	after := demoState(t, c)
	for i := range c.replicas {
		if i != runner && len(after[i].Cancellations) != len(before[i].Cancellations) {
			t.Errorf("replica %d's child got cancellations %+v, want none: it does not run the call", i, after[i].Cancellations[len(before[i].Cancellations):])
		}
	}
}

// findRunner returns which replica's child started one more slow call
// between before and now, and that call's id.
func findRunner(t *testing.T, c *cluster, before []gatewaytest.Received) (int, string) {
	t.Helper()
	runner, callID := -1, ""
	for i, now := range demoState(t, c) {
		fresh := slices.DeleteFunc(running(now), func(id string) bool { return slices.Contains(running(before[i]), id) })
		switch {
		case len(fresh) == 1 && runner < 0:
			runner, callID = i, fresh[0]
		case len(fresh) > 0:
			t.Fatalf("more than one new slow call in the children: replica %d runs %v", i, fresh)
		}
	}
	if runner < 0 {
		t.Fatal("no child runs the slow call")
	}
	return runner, callID
}

// The 2026 client aborts a call, which closes its stream; nginx closes the
// connection to the replica that runs it, and that replica's child (and no
// other) gets notifications/cancelled while the call runs.
func scaleOutCloseCancels(t *testing.T, c *cluster, modern *tsDriver) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := demoState(t, c)
	mark := c.proxy.Log.mark()
	const l = "close-modern"
	modern.call(t, l, "slow", map[string]any{"duration_ms": 60000, "interval_ms": 50}, true)
	upstream := modern.served(t, ctx, l).servedBy()
	modern.wait(t, ctx, "progress of "+l, func(e tsEvent) bool { return e.Label == l && e.Event == "progress" })

	runner, callID := findRunner(t, c, before)
	if c.addrs[runner] != upstream {
		t.Fatalf("nginx says %s answered, but replica %d (%s) runs the call", upstream, runner, c.addrs[runner])
	}
	modern.abort(t, l)
	if end := modern.outcome(t, ctx, l); end.Event != "error" || !strings.Contains(end.Message, "closes the stream") {
		t.Errorf("the aborted call ended with %+v", end)
	}
	checkCancelledOn(t, c, runner, before, callID)
	// nginx saw the client go before the answer was complete, on the
	// connection to that replica.
	c.proxy.Log.wait(t, ctx, mark, "the closed stream", func(es []accessEntry) bool {
		return slices.ContainsFunc(es, func(e accessEntry) bool {
			return e.Client == "modern" && e.Completion == "" && e.servedBy() == upstream
		})
	})
}

// The same for a 2025 session, whose call's stream is closed by the
// client (the TypeScript client of 2025 sends notifications/cancelled
// instead, which reaches only the replica it lands on: see the README).
func scaleOutLegacyCloseCancels(t *testing.T, c *cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := demoState(t, c)
	s := openLegacySession(t, ctx, c.proxy.URL)
	stream := s.callWithProgress(t, ctx, `{"name":"slow","arguments":{"duration_ms":60000,"interval_ms":50}}`)
	runner, callID := findRunner(t, c, before)
	if c.addrs[runner] != stream.upstream {
		t.Fatalf("nginx says %s answered, but replica %d (%s) runs the call", stream.upstream, runner, c.addrs[runner])
	}
	if stream.upstream == s.minter {
		t.Logf("the call landed on the replica that minted the session (%s)", s.minter)
	}
	stream.close()
	checkCancelledOn(t, c, runner, before, callID)
}

// A SIGTERM to one replica while calls run on all three: the calls it runs
// finish (or, past its grace period, end with a clear error), new calls go
// to the other two (nginx retries the draining replica's 503), and it
// exits cleanly. Every call has one outcome.
func scaleOutSIGTERM(t *testing.T, c *cluster, modern, legacy *tsDriver) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	s := &sigtermStep{t: t, ctx: ctx, c: c, runner: map[string]string{}, owner: map[string]*tsDriver{}}
	s.startInFlight(modern, legacy)
	victim := c.replica(t, s.target)
	childPID := demoReceived(t, victim.URL, 0).PID
	t.Logf("calls by replica: %v; stopping %s", s.runner, s.target)

	mark := c.proxy.Log.mark()
	if err := victim.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	state := victim.Await("not-ready")
	if !state.Draining || state.InFlight < 2 {
		t.Fatalf("after SIGTERM the replica reports %+v, want draining with its calls in flight", state)
	}
	// The 2025 client's call there was still running when the drain began.
	if ends := legacy.find(func(e tsEvent) bool { return e.Label == "short-legacy-2" && e.ended() }); len(ends) > 0 {
		t.Fatalf("short-legacy-2 ended before the SIGTERM: %+v", ends)
	}

	s.newCallsUntilExit(victim, modern, legacy)
	if victim.Err != nil {
		t.Errorf("the stopped replica exited with %v, want a clean exit", victim.Err)
	}
	if err := syscall.Kill(childPID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the stopped replica's child (pid %d) is still there: %v", childPID, err)
	}
	s.checkInFlight()
	s.closeLongs(modern)

	// One outcome each.
	for l, d := range s.owner {
		if ends := d.find(func(e tsEvent) bool { return e.Label == l && e.ended() }); len(ends) != 1 {
			t.Errorf("%s has %d outcomes: %+v", l, len(ends), ends)
		}
	}
	s.checkProxyLog(mark)
}

// sigtermStep keeps the SIGTERM step's calls: who started each (owner),
// which replica answered it (runner), and the replica to stop (target).
type sigtermStep struct {
	t            *testing.T
	ctx          context.Context
	c            *cluster
	runner       map[string]string
	owner        map[string]*tsDriver
	longs, fresh []string
	target       string
}

// start starts a slow call and waits until it runs (its first progress).
func (s *sigtermStep) start(d *tsDriver, l string, args map[string]any) {
	s.t.Helper()
	d.call(s.t, l, "slow", args, true)
	served := d.served(s.t, s.ctx, l)
	if served.Status != 200 {
		s.t.Fatalf("%s: %s was answered %d", d.name, l, served.Status)
	}
	d.wait(s.t, s.ctx, "progress of "+l, func(e tsEvent) bool { return e.Label == l && e.Event == "progress" })
	s.runner[l], s.owner[l] = served.servedBy(), d
}

// startInFlight starts short calls (6 s, well within the grace period,
// and long enough to be still running once the long ones have started on
// a loaded machine)
// from both clients, spread by round robin, and picks the replica that
// runs the last 2025 one; then long calls (2 min) from the 2026 client
// until one lands there too (round robin: within three).
func (s *sigtermStep) startInFlight(modern, legacy *tsDriver) {
	short := map[string]any{"duration_ms": 6000, "interval_ms": 200}
	long := map[string]any{"duration_ms": 120000, "interval_ms": 100}
	for i := range 3 {
		s.start(modern, label("short-modern", i), short)
		s.start(legacy, label("short-legacy", i), short)
	}
	s.target = s.runner["short-legacy-2"]
	for i := range 6 {
		l := label("long-modern", i)
		s.start(modern, l, long)
		s.longs = append(s.longs, l)
		if s.runner[l] == s.target {
			return
		}
	}
	s.t.Fatalf("no long call landed on %s: %v", s.target, s.runner)
}

// newCallsUntilExit makes brief calls (which pace the loop), one client
// after the other, until the stopped replica has exited: every one
// succeeds, and none on that replica.
func (s *sigtermStep) newCallsUntilExit(victim *gateway, modern, legacy *tsDriver) {
	brief := map[string]any{"duration_ms": 100, "interval_ms": 50}
	for i := 0; ; i++ {
		select {
		case <-victim.Done:
			return
		default:
		}
		if i >= 1000 {
			s.t.Fatal("the replica did not exit within 1000 calls")
		}
		d := []*tsDriver{modern, legacy}[i%2]
		l := label("after-"+d.name, i)
		d.call(s.t, l, "slow", brief, true)
		if end := d.outcome(s.t, s.ctx, l); end.Event != "result" || end.Text != "done after 2 steps" {
			s.t.Errorf("%s: %s ended with %+v, want it done", d.name, l, end)
		}
		if e := d.served(s.t, s.ctx, l); e.servedBy() == s.target {
			s.t.Errorf("%s was answered by the stopped replica: %+v", l, e)
		}
		s.owner[l] = d
		s.fresh = append(s.fresh, l)
	}
}

// checkInFlight checks the calls that ran at the SIGTERM: on the stopped
// replica the short ones finished and the long one ended with the
// gateway's shutdown error; elsewhere the short ones finished and the long
// ones still run.
func (s *sigtermStep) checkInFlight() {
	for l, runner := range s.runner {
		d := s.owner[l]
		if strings.HasPrefix(l, "long-") && runner != s.target {
			if ends := d.find(func(e tsEvent) bool { return e.Label == l && e.ended() }); len(ends) != 0 {
				s.t.Errorf("%s on %s ended with %+v; it should still run", l, runner, ends)
			}
			continue
		}
		end := d.outcome(s.t, s.ctx, l)
		switch {
		case strings.HasPrefix(l, "short-") && (end.Event != "result" || end.Text != "done after 30 steps"):
			s.t.Errorf("%s on %s ended with %+v, want it finished", l, runner, end)
		case strings.HasPrefix(l, "long-") && (end.Event != "error" || end.Code != -32005.0 || !strings.Contains(end.Message, "shutting down")):
			s.t.Errorf("%s on the stopped replica ended with %+v, want the shutdown error", l, end)
		}
	}
}

// closeLongs closes the streams of the long calls still running, and
// checks that each reached its child as a cancellation.
func (s *sigtermStep) closeLongs(modern *tsDriver) {
	rest := s.c.without(s.target)
	before := demoState(s.t, rest)
	for _, l := range s.longs {
		if s.runner[l] == s.target {
			continue
		}
		modern.abort(s.t, l)
		if end := modern.outcome(s.t, s.ctx, l); end.Event != "error" || !strings.Contains(end.Message, "closes the stream") {
			s.t.Errorf("%s ended with %+v after the test closed it", l, end)
		}
	}
	for i, g := range rest.replicas {
		want := len(before[i].Cancellations)
		for _, l := range s.longs {
			if s.runner[l] == rest.addrs[i] {
				want++
			}
		}
		demoReceived(s.t, g.URL, want)
	}
}

// checkProxyLog checks nginx's record of every request since mark (the
// new calls, and the long ones, which all ended after the SIGTERM): none
// answered with an error of nginx's own, and the draining replica met at
// least once, its 503 refusal followed by the next replica's answer.
func (s *sigtermStep) checkProxyLog(mark int) {
	entries := s.c.proxy.Log.wait(s.t, s.ctx, mark, "every request since the SIGTERM", func(es []accessEntry) bool {
		return len(es) >= len(s.fresh)+len(s.longs)
	})
	retried := 0
	for _, e := range entries {
		if status, _ := strconv.Atoi(e.Status); status >= 500 {
			s.t.Errorf("nginx answered a client %s: %+v", e.Status, e)
		}
		if strings.HasPrefix(e.Upstream, s.target+", ") && strings.HasPrefix(e.UpstreamStatus, "503, ") {
			retried++
		}
	}
	if len(s.fresh) < 3 || retried == 0 {
		s.t.Errorf("%d calls after SIGTERM, %d refused by the draining replica and retried; want at least 3, and a retry", len(s.fresh), retried)
	}
	s.t.Logf("%d new calls while the replica drained; nginx met it %d times and retried elsewhere", len(s.fresh), retried)
}

// without is the cluster less one replica.
func (c *cluster) without(addr string) *cluster {
	out := &cluster{proxy: c.proxy}
	for i, a := range c.addrs {
		if a != addr {
			out.replicas = append(out.replicas, c.replicas[i])
			out.addrs = append(out.addrs, a)
		}
	}
	return out
}
