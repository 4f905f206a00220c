package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// smallStreams are sizes a test runs in seconds.
var smallStreams = streamSizes{Samples: 20, Load: 50, LoadEvery: 20, Steps: 5, Every: 5, RelaySteps: 20, RelayEvery: 2,
	Idle: 50, Openers: 8, Peers: 5}

// buildGateway builds the gateway of this repository into a test's
// directory, as the suite does.
func buildGateway(t *testing.T) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	gw := filepath.Join(t.TempDir(), "gateway")
	build := exec.Command("go", "build", "-o", gw, "./cmd/gateway")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the gateway: %v\n%s", err, out)
	}
	return gw
}

func testSelf(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self
}

// Every stream workload against the real gateway and the probe, small:
// each count adds up to what was sent.
func TestStreamWorkloads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sz := smallStreams
	var ids tags
	run, err := runStreams(ctx, buildGateway(t), testSelf(t), sz, &ids)
	if err != nil {
		t.Fatal(err)
	}
	checkLatencies(t, run.streamLatencies, sz)
	c := run.Concurrent
	sent := sz.Load * (sz.Steps + 1)
	if c.Events != sent || c.Lost != 0 || c.Misrouted != 0 || c.Repeated != 0 {
		t.Errorf("concurrent: %+v, want %d events, none lost or misrouted", c, sent)
	}
	// Each notification the probe sent has one fate at the gateway.
	if c.Relayed+c.Coalesced+c.Dropped != sent || c.Relay.N != sz.Load*sz.Steps || c.Elapsed <= 0 {
		t.Errorf("concurrent: the gateway counted %d relayed, %d coalesced, %d dropped of %d; %d latencies", c.Relayed, c.Coalesced, c.Dropped, sent, c.Relay.N)
	}
	i := run.Idle
	if i.Cancellations != sz.Idle || i.ChildCancelled != sz.Idle || !i.ServedAfter || i.OpenAtPeak-i.StreamsOpenBefore != sz.Idle ||
		i.GatewayBefore <= 0 || i.GatewayAfter <= 0 || i.ChildAfter <= 0 || i.GoroutinesAt <= i.GoroutinesBefore || i.FloorBefore <= 0 || i.FloorAfter <= 0 {
		t.Errorf("idle: %+v", i)
	}
}

// checkLatencies checks that each timed workload has a sample for each
// event or cancellation, and sane percentiles.
func checkLatencies(t *testing.T, ls streamLatencies, sz streamSizes) {
	t.Helper()
	for name, l := range map[string]latencySet{"cancel alone": ls.CancelAlone, "cancel loaded": ls.CancelLoaded, "relay alone": ls.RelayAlone} {
		want := sz.Samples
		if name == "relay alone" {
			want = sz.RelaySteps + 1
		}
		if l.N != want || len(l.Samples) != want || l.P50 <= 0 || l.P99 < l.P50 || l.Samples[0] < 0 {
			t.Errorf("%s: %d samples (want %d), p50 %v, p99 %v", name, l.N, want, l.P50, l.P99)
		}
	}
}

// The tally counts an event of another call, on real events: a stream's
// own tally finds none misrouted, one keyed to another tag finds every
// event and the answer misrouted.
func TestTallyCountsMisrouted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := startProbeGateway(ctx, buildGateway(t), testSelf(t), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.stop()
	const steps = 3
	h, err := g.srv.open(ctx, 1, holdArgs{tag: "mine", every: 1, steps: steps}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	own, other := newTally("mine", steps), newTally("theirs", steps)
	for !own.answered {
		data, _, err := h.next(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range []*tally{own, other} {
			if _, _, err := tl.add(data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if own.misrouted != 0 || own.lost() != 0 || own.events != steps+1 {
		t.Errorf("own tally: %+v", own)
	}
	if other.misrouted != steps+2 || other.lost() != steps+1 || !other.answered {
		t.Errorf("the other tag's tally: %+v, want %d misrouted and every step lost", other, steps+2)
	}
	// A token that is not the call's, with the right tag in the message,
	// is misrouted too; a step seen twice is counted.
	tl := newTally("t", 2)
	for _, ev := range []string{
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":0,"message":"t 0 5"}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"u","progress":1,"message":"t 1 6"}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":0,"message":"t 0 7"}}`,
	} {
		if _, _, err := tl.add([]byte(ev)); err != nil {
			t.Fatal(err)
		}
	}
	if tl.misrouted != 1 || tl.repeated != 1 || tl.lost() != 2 {
		t.Errorf("tally: %+v", tl)
	}
	if _, _, err := tl.add([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"x"}}`)); err == nil {
		t.Error("an error answer was taken")
	}
}

// The probe over pipes: both eras' handshakes, a hold's stamped progress
// and answer, and a cancellation reported on the socket with the time it
// was read.
func TestProbe(t *testing.T) {
	rep, err := listenReports(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Close()
	cmd := exec.Command(testSelf(t), "probe", "-report", rep.path)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); _ = cmd.Wait() }()
	lines := bufio.NewReader(out)
	var mu sync.Mutex
	ask := func(line string) map[string]any {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if line != "" {
			if _, err := io.WriteString(in, line+"\n"); err != nil {
				t.Fatal(err)
			}
		}
		b, err := lines.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return m
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	if m := ask(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`); fmt.Sprint(m["result"].(map[string]any)["protocolVersion"]) != "2025-03-26" {
		t.Errorf("initialize: %v", m)
	}
	if m := ask(`{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{` + meta + `}}`); !strings.Contains(fmt.Sprint(m["result"]), "2026-07-28") {
		t.Errorf("server/discover: %v", m)
	}
	if m := ask(`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{` + meta + `}}`); len(m["result"].(map[string]any)["tools"].([]any)) != 4 {
		t.Errorf("tools/list: %v", m)
	}
	if m := ask(`{"jsonrpc":"2.0","id":4,"method":"ping","params":{` + meta + `}}`); m["result"].(map[string]any)["resultType"] != "complete" {
		t.Errorf("ping: %v", m)
	}
	// A hold of two steps: three progress events, in order, stamped with
	// a clock that moves forward, then the answer.
	before := monoNow()
	started := rep.expect("started", "h1")
	hold := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"hold","arguments":{"tag":"h1","every_ms":1,"steps":2},"_meta":{"progressToken":"tok"}}}`
	last := before
	for step := range 3 {
		line := ""
		if step == 0 {
			line = hold
		}
		m := ask(line)
		p := m["params"].(map[string]any)
		st, err := parseStamp(p["message"].(string))
		if err != nil || p["progressToken"] != "tok" || st.tag != "h1" || st.step != step || st.ns < last || p["progress"] != float64(step) {
			t.Fatalf("step %d: %v (%v)", step, m, err)
		}
		last = st.ns
	}
	if m := ask(""); fmt.Sprint(m["id"]) != "5" || !strings.Contains(fmt.Sprint(m["result"]), "h1 done 2") {
		t.Errorf("the hold's answer: %v", m)
	}
	if ns := <-started; ns < before || ns > last {
		t.Errorf("started at %d, outside [%d, %d]", ns, before, last)
	}
	// An idle hold, cancelled: the report carries its tag.
	ask(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"hold","arguments":{"tag":"h2"},"_meta":{"progressToken":7}}}`)
	got := rep.expect("cancelled", "h2")
	t0 := monoNow()
	mu.Lock()
	_, err = io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":6,"reason":"gone"}}`+"\n")
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if ns := <-got; ns < t0 {
		t.Errorf("cancelled at %d, before it was sent (%d)", ns, t0)
	}
	m := ask(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"stats","arguments":{}}}`)
	text := m["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"].(string)
	var st probeStats
	if err := json.Unmarshal([]byte(text), &st); err != nil || st != (probeStats{Held: 0, Started: 2, Cancelled: 1}) {
		t.Errorf("stats: %s", text)
	}
	if n := rep.count("cancelled"); n != 1 {
		t.Errorf("%d cancellations reported", n)
	}
	if m := ask(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"hold","arguments":{"tag":"a b"}}}`); m["error"] == nil {
		t.Errorf("a tag with a space: %v", m)
	}
}

// The peers, with the probe behind them, small: each relays or not, and
// cancels or not, as measured; whatever they do, the counts are
// consistent.
func TestPeerStreams(t *testing.T) {
	node := testNode(t)
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var ids tags
	for _, tg := range peerTargets(node, filepath.Join(root, "bench")) {
		r, err := peerStreams(ctx, tg, testSelf(t), smallStreams, &ids)
		if err != nil {
			t.Fatalf("%s: %v", tg.name, err)
		}
		if r.ProgressEvents > smallStreams.RelaySteps+1 || r.Relay.N != r.ProgressEvents ||
			r.Cancels != r.Cancel.N+r.NotCancelled || r.NotCancelled > 1 || r.Cancels == 0 {
			t.Errorf("%s: %+v", tg.name, r)
		}
		t.Logf("%s: %d progress events relayed, %d of %d closes cancelled", tg.name, r.ProgressEvents, r.Cancel.N, r.Cancels)
	}
}

// The section reads the figures and judges them against the targets.
func TestStreamReport(t *testing.T) {
	s := &streamResults{Sizes: smallStreams, Settings: streamEnv(smallStreams), Runs: []streamRun{{
		streamLatencies: streamLatencies{
			CancelAlone: latencySet{N: 3, P50: 400 * time.Microsecond, P99: 3 * time.Millisecond},
			RelayAlone:  latencySet{N: 3, P50: 310 * time.Microsecond},
		},
		Concurrent: concurrentResult{Streams: 50, StepsEach: 5, Events: 299, Lost: 1, Coalesced: 1},
		Idle:       idleResult{Streams: 50, GatewayBefore: 1 << 20, GatewayAfter: 1<<20 + 50*30*1024},
	}}, Floor: []streamLatencies{
		{CancelAlone: latencySet{N: 3, P50: 90 * time.Microsecond, P99: 300 * time.Microsecond}, RelayAlone: latencySet{N: 3, P50: 250 * time.Microsecond, P99: time.Millisecond}},
		{CancelAlone: latencySet{N: 3, P50: 70 * time.Microsecond, P99: 100 * time.Microsecond}, RelayAlone: latencySet{N: 3, P50: 270 * time.Microsecond, P99: 2 * time.Millisecond}},
		{CancelAlone: latencySet{N: 3, P50: 80 * time.Microsecond, P99: 200 * time.Microsecond}, RelayAlone: latencySet{N: 3, P50: 230 * time.Microsecond, P99: 3 * time.Millisecond}},
	}, Peers: map[string][]peerStreamRun{"p": {{Cancels: 1, NotCancelled: 1}}},
		Hops: []latencySet{{N: 3, P50: 200 * time.Microsecond, P99: 900 * time.Microsecond}},
		Awake: []awakeRun{
			{Gateway: latencySet{P50: 150 * time.Microsecond, P99: time.Millisecond}, Floor: latencySet{P50: 140 * time.Microsecond, P99: 2 * time.Millisecond}, Hops: latencySet{P50: 120 * time.Microsecond, P99: 700 * time.Microsecond}, Idle: 0.02},
			{Gateway: latencySet{P50: 160 * time.Microsecond, P99: time.Millisecond}, Floor: latencySet{P50: 130 * time.Microsecond, P99: 2 * time.Millisecond}, Hops: latencySet{P50: 110 * time.Microsecond, P99: 700 * time.Microsecond}, Idle: 0.01},
			{Gateway: latencySet{P50: 170 * time.Microsecond, P99: time.Millisecond}, Floor: latencySet{P50: 135 * time.Microsecond, P99: 2 * time.Millisecond}, Hops: latencySet{P50: 115 * time.Microsecond, P99: 700 * time.Microsecond}, Idle: 0.03},
		}}
	var b bytes.Buffer
	renderStreams(&b, s, "CHART\n\n")
	out := b.String()
	for _, want := range []string{"CHART", "| 400 µs | 3.00 ms | 3 | p50 ≤ 0.5 ms | met | 80 µs | 200 µs |", "| p50 ≤ 0.3 ms | **missed** | 250 µs | 2.00 ms |",
		"| 299 of 300 | 1 | 0 | 0 | 1 |", "| 30.0 KiB | < 20 KiB | **missed** |", "| p | not relayed | – | – | no cancellation within 1s |",
		"`GATEWAY_MAX_IN_FLIGHT=" + strconv.Itoa(100+64) + "`", "The bare hops (`bench/hops.go`), 1 run, 3 events each",
		"(`bench/awake.go`), 3 runs.", "the CPUs were idle 2.0 % of the time meanwhile",
		"the suite had the gateway collect its garbage (`/debug/pprof/heap?gc=1`", "and took the lowest reading",
		"| the gateway | 160 µs | 1.00 ms | 310 µs |\n| " + relayName + " | 135 µs | 2.00 ms | 250 µs |\n| the bare hops | 115 µs | 700 µs | 200 µs |\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report has no %q:\n%s", want, out)
		}
	}
}
