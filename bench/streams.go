package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The stream workloads: what the gateway adds to a call that streams
// (progress relayed as SSE events, the client's disconnection turned into
// notifications/cancelled), timed against the probe child (probe.go) on
// the machine's monotonic clock, and what an open stream costs in memory.

// streamSizes are the workloads' sizes: scripts/bench uses the defaults,
// the tests small ones.
type streamSizes struct {
	Samples    int // cancellations timed per run, alone and under load
	Load       int // streams running meanwhile (cancellation under load), and concurrent progress streams
	LoadEvery  int // ms between the progress events of the streams running meanwhile
	Steps      int // progress events of each concurrent stream, after its first
	Every      int // ms between them
	RelaySteps int // progress events of the stream timed alone
	RelayEvery int // ms between them
	Idle       int // idle streams held open at once
	Openers    int // connections opened at once
	Peers      int // cancellations timed through each peer (at most)
}

func defaultStreamSizes() streamSizes {
	return streamSizes{Samples: 1000, Load: 1000, LoadEvery: 100, Steps: 20, Every: 10, RelaySteps: 300, RelayEvery: 5,
		Idle: 10000, Openers: 32, Peers: 100}
}

// streamResults is what the stream workloads measured, each run.
type streamResults struct {
	Sizes    streamSizes
	Settings []string // the gateway's environment beyond the address
	Runs     []streamRun
	Floor    []streamLatencies          `json:",omitempty"` // the stdio relay floor's, each run
	Hops     []latencySet               `json:",omitempty"` // the bare hops' progress relay (hops.go), each run
	Awake    []awakeRun                 `json:",omitempty"` // the progress relay with no CPU idle (awake.go), each run
	Peers    map[string][]peerStreamRun `json:",omitempty"`
}

type streamRun struct {
	streamLatencies
	Concurrent concurrentResult
	Idle       idleResult
}

// streamLatencies are the workloads timed against the relay floor too.
type streamLatencies struct {
	CancelAlone  latencySet // client closes → the child reads notifications/cancelled
	CancelLoaded latencySet // the same, with Load streams running
	RelayAlone   latencySet // the child's stamp → the client reads the event
}

// latencySet is a workload's samples and their percentiles.
type latencySet struct {
	N        int
	P50, P99 time.Duration
	Samples  []time.Duration `json:",omitempty"`
}

func newLatencySet(s []time.Duration, keep bool) latencySet {
	s = slices.Clone(s)
	slices.Sort(s)
	l := latencySet{N: len(s)}
	if len(s) > 0 {
		l.P50, l.P99 = s[len(s)/2], s[len(s)*99/100]
	}
	if keep {
		l.Samples = s
	}
	return l
}

// concurrentResult is Load calls streaming progress at once.
type concurrentResult struct {
	Streams, StepsEach int
	Events             int // progress events the client read
	Lost               int // steps some stream never received
	Misrouted          int // events or answers that carried another call's tag
	Repeated           int // steps received twice
	// The gateway's count of the workload's progress notifications, from
	// /metrics, by fate.
	Relayed, Coalesced, Dropped int
	Relay                       latencySet    // of every event but the first of each stream
	Elapsed                     time.Duration // from the release to the last answer
}

// idleResult is Idle streams open with nothing on them.
type idleResult struct {
	Streams                        int
	GatewayBefore, GatewayAfter    int64 // VmRSS, bytes
	GatewayPeak                    int64 // VmHWM once they all left the server: the most they cost while opening
	ChildBefore, ChildAfter        int64
	Cancellations                  int           // reports the client got after closing them
	ChildCancelled                 int           // the child's own count
	ServedAfter                    bool          // an echo call answered after they closed
	StreamsOpenBefore, OpenAtPeak  int           // gateway_sse_streams_open
	Detached                       int           // gateway_sse_streams_detached when measured
	Settle                         time.Duration // from the last open to the measure: the streams left the server, the memory settled
	GoroutinesBefore, GoroutinesAt int           // go_goroutines of the gateway
	// Where the gateway's memory is, from its /metrics (Go's own counts):
	// goroutine stacks, and heap spans in use (live and not yet collected).
	StackBefore, StackAt, HeapBefore, HeapAt int64
	// The floor (a bare net/http handler holding as many streams, see
	// idleFloor): its VmRSS before and with them open.
	FloorBefore, FloorAfter int64
}

func (r idleResult) perStream(before, after int64) float64 {
	if r.Streams == 0 {
		return 0
	}
	return float64(after-before) / float64(r.Streams) / 1024
}

// probeGateway is a server fronting the probe, with its report socket:
// the gateway, or the stdio relay floor (which has no admin address, and
// runs only the workloads that need none: latencySteps).
type probeGateway struct {
	proc  *server
	srv   streamServer
	admin string // host:port of the gateway's /metrics; empty for the relay floor
	rep   *reports
}

// startProbeGateway runs the gateway binary gw in front of the probe (this
// program, self); the report socket is made in dir.
func startProbeGateway(ctx context.Context, gw, self, dir string, env []string) (*probeGateway, error) {
	rep, err := listenReports(dir)
	if err != nil {
		return nil, err
	}
	adminPort, err := freePort()
	if err != nil {
		rep.Close()
		return nil, err
	}
	admin := "127.0.0.1:" + strconv.Itoa(adminPort)
	env = append(slices.Clone(env), "GATEWAY_ADMIN_ADDR="+admin)
	if os.Getenv("GORACE") != "" {
		// A race-built probe (the tests') reads it: by default it sleeps
		// 1 s as it exits.
		env = append(env, "GATEWAY_CHILD_ENV=GORACE")
	}
	t := gatewayTarget("gateway", gw, env...)
	proc, err := startServer(ctx, t, []string{self, "probe", "-report", rep.path})
	if err != nil {
		rep.Close()
		return nil, err
	}
	g := &probeGateway{proc: proc, srv: modernStreamServer("127.0.0.1:" + strconv.Itoa(proc.port)), admin: admin, rep: rep}
	if err := g.ready(ctx); err != nil {
		g.stop()
		return nil, err
	}
	return g, nil
}

// ready waits for /readyz (a long poll), then checks an echo call.
func (g *probeGateway) ready(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+g.srv.addr+"/readyz?wait=30s&until=ready", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz: HTTP %d", resp.StatusCode)
	}
	return g.srv.echo(ctx)
}

func (g *probeGateway) stop() {
	g.proc.stop()
	g.rep.Close()
}

// childPid is the gateway's child, the probe.
func (g *probeGateway) childPid() (int, error) {
	pids := procTree{pid: g.proc.pid()}.pids()
	if len(pids) != 2 {
		return 0, fmt.Errorf("the gateway has %d descendants, not one probe", len(pids)-1)
	}
	return pids[1], nil
}

// echo checks that the server answers an echo call.
func (s streamServer) echo(ctx context.Context) error {
	text, err := s.jsonCall(ctx, "echo", []byte(`{"text":"`+benchText+`"}`))
	if err == nil && text != benchText {
		err = fmt.Errorf("echo answered %q", text)
	}
	return err
}

// gatewayMetrics reads the series of /metrics named by prefix (label sets
// included in the key).
func gatewayMetrics(ctx context.Context, admin string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: HTTP %d", resp.StatusCode)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, nil
}

func fateKey(f string) string { return `gateway_progress_events_total{fate="` + f + `"}` }

// tags makes the workloads' tags, unique in a suite run.
type tags struct{ n atomic.Int64 }

func (t *tags) next(prefix string) (string, int64) {
	n := t.n.Add(1)
	return prefix + strconv.FormatInt(n, 10), n
}

// streamEnv returns the gateway's settings for the stream workloads: room
// for every stream in flight on the one child.
func streamEnv(sz streamSizes) []string {
	return []string{"GATEWAY_MAX_IN_FLIGHT=" + strconv.Itoa(max(sz.Idle, 2*sz.Load)+64)}
}

// streamStep is one stream workload, run on a server of its own.
type streamStep struct {
	name string
	do   func(g *probeGateway) error
}

// latencySteps are the timed workloads, which fill l.
func latencySteps(ctx context.Context, sz streamSizes, ids *tags, l *streamLatencies) []streamStep {
	return []streamStep{
		{"progress relay, one stream", func(g *probeGateway) (err error) {
			l.RelayAlone, err = relayAlone(ctx, g.srv, sz, ids)
			return err
		}},
		{"cancellation, alone", func(g *probeGateway) (err error) {
			l.CancelAlone, err = cancelSamples(ctx, g, sz.Samples, ids)
			return err
		}},
		{"cancellation, streams running", func(g *probeGateway) (err error) {
			l.CancelLoaded, err = cancelLoaded(ctx, g, sz, ids)
			return err
		}},
	}
}

// runSteps runs each step on a server start makes for it (so that memory
// one leaves does not count for the next).
func runSteps(start func() (*probeGateway, error), steps []streamStep) error {
	for _, s := range steps {
		g, err := start()
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		err = s.do(g)
		g.stop()
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}

// runStreams runs every stream workload against the gateway once, each on
// a gateway of its own.
func runStreams(ctx context.Context, gw, self string, sz streamSizes, ids *tags) (streamRun, error) {
	dir, err := os.MkdirTemp("", "gwstream")
	if err != nil {
		return streamRun{}, err
	}
	defer os.RemoveAll(dir)
	env := streamEnv(sz)
	var run streamRun
	steps := append(latencySteps(ctx, sz, ids, &run.streamLatencies),
		streamStep{"concurrent progress streams", func(g *probeGateway) (err error) {
			run.Concurrent, err = concurrentStreams(ctx, g, sz, ids)
			return err
		}},
		streamStep{"idle streams", func(g *probeGateway) (err error) {
			if run.Idle, err = idleStreams(ctx, g, sz, ids); err != nil {
				return err
			}
			run.Idle.FloorBefore, run.Idle.FloorAfter, err = idleFloor(ctx, self, sz.Idle, sz.Openers)
			return err
		}},
	)
	err = runSteps(func() (*probeGateway, error) { return startProbeGateway(ctx, gw, self, dir, env) }, steps)
	return run, err
}

// floorStreams runs the timed workloads against the stdio relay floor (see
// relay.go) in front of the probe, each on a relay of its own: how fast a
// gateway that does nothing else relays progress and cancellations on
// this machine.
func floorStreams(ctx context.Context, self string, sz streamSizes, ids *tags) (streamLatencies, error) {
	dir, err := os.MkdirTemp("", "gwstream")
	if err != nil {
		return streamLatencies{}, err
	}
	defer os.RemoveAll(dir)
	var l streamLatencies
	err = runSteps(func() (*probeGateway, error) { return startProbeRelay(ctx, self, dir) }, latencySteps(ctx, sz, ids, &l))
	return l, err
}

// startProbeRelay runs the relay floor in front of the probe (both this
// program, self); the report socket is made in dir. It has no admin
// address.
func startProbeRelay(ctx context.Context, self, dir string) (*probeGateway, error) {
	rep, err := listenReports(dir)
	if err != nil {
		return nil, err
	}
	proc, err := startServer(ctx, relayTarget(self), []string{self, "probe", "-report", rep.path})
	if err != nil {
		rep.Close()
		return nil, err
	}
	g := &probeGateway{proc: proc, srv: modernStreamServer("127.0.0.1:" + strconv.Itoa(proc.port)), rep: rep}
	if err := g.srv.echo(ctx); err != nil {
		g.stop()
		return nil, err
	}
	return g, nil
}
