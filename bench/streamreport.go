package main

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The stream workloads' part of the report: medians of the runs, as for
// the echo load.

// streamSummary is the median, over the runs, of each figure.
type streamSummary struct {
	latencySummary
	relayLoaded                                   [2]time.Duration // p50, p99
	samples, relaySamples                         int
	conc                                          concurrentResult // the run with the median elapsed time, counts summed over every run
	lost, misrouted, repeated, coalesced, dropped int              // summed over the runs
	idleGateway, idleChild, idleStack, idleHeap   float64          // KiB per idle stream
	idleFloor                                     float64          // KiB per stream a bare net/http handler holds
	idle                                          idleResult       // the run with the median gateway figure
	runs                                          int
}

func medianPair[T any](rs []T, get func(T) latencySet) [2]time.Duration {
	var p50, p99 []time.Duration
	for _, r := range rs {
		l := get(r)
		p50, p99 = append(p50, l.P50), append(p99, l.P99)
	}
	return [2]time.Duration{median(p50), median(p99)}
}

func summarizeStreams(s *streamResults) streamSummary {
	rs := s.Runs
	out := streamSummary{runs: len(rs)}
	if len(rs) == 0 {
		return out
	}
	ls := make([]streamLatencies, len(rs))
	for i, r := range rs {
		ls[i] = r.streamLatencies
	}
	out.latencySummary = summarizeLatencies(ls)
	out.relayLoaded = medianPair(rs, func(r streamRun) latencySet { return r.Concurrent.Relay })
	out.samples, out.relaySamples = rs[0].CancelAlone.N, rs[0].RelayAlone.N
	var gw, ch, st, hp, fl []float64
	byElapsed := slices.Clone(rs)
	slices.SortFunc(byElapsed, func(a, b streamRun) int { return int(a.Concurrent.Elapsed - b.Concurrent.Elapsed) })
	out.conc = byElapsed[len(byElapsed)/2].Concurrent
	for _, r := range rs {
		c := r.Concurrent
		out.lost += c.Lost
		out.misrouted += c.Misrouted
		out.repeated += c.Repeated
		out.coalesced += c.Coalesced
		out.dropped += c.Dropped
		i := r.Idle
		gw = append(gw, i.perStream(i.GatewayBefore, i.GatewayAfter))
		ch = append(ch, i.perStream(i.ChildBefore, i.ChildAfter))
		st = append(st, i.perStream(i.StackBefore, i.StackAt))
		hp = append(hp, i.perStream(i.HeapBefore, i.HeapAt))
		fl = append(fl, i.perStream(i.FloorBefore, i.FloorAfter))
	}
	out.idleFloor = median(fl)
	out.idleGateway, out.idleChild, out.idleStack, out.idleHeap = median(gw), median(ch), median(st), median(hp)
	byGateway := slices.Clone(rs)
	slices.SortFunc(byGateway, func(a, b streamRun) int {
		return int(a.Idle.GatewayAfter - a.Idle.GatewayBefore - (b.Idle.GatewayAfter - b.Idle.GatewayBefore))
	})
	out.idle = byGateway[len(byGateway)/2].Idle
	return out
}

// latencySummary is the median, over the runs, of each timed workload's
// p50 and p99.
type latencySummary struct {
	cancelAlone, cancelLoaded, relayAlone [2]time.Duration
}

func summarizeLatencies(ls []streamLatencies) latencySummary {
	return latencySummary{
		cancelAlone:  medianPair(ls, func(l streamLatencies) latencySet { return l.CancelAlone }),
		cancelLoaded: medianPair(ls, func(l streamLatencies) latencySet { return l.CancelLoaded }),
		relayAlone:   medianPair(ls, func(l streamLatencies) latencySet { return l.RelayAlone }),
	}
}

// floorSummary is the relay floor's latencySummary.
type floorSummary struct {
	latencySummary
	runs int
}

func summarizeFloor(ls []streamLatencies) floorSummary {
	if len(ls) == 0 {
		return floorSummary{}
	}
	return floorSummary{summarizeLatencies(ls), len(ls)}
}

// cells is a p50 and a p99 of the floor as two table cells, or dashes
// when the floor was not measured.
func (f floorSummary) cells(v [2]time.Duration) string {
	if f.runs == 0 {
		return "– | –"
	}
	return round(v[0]) + " | " + round(v[1])
}

// verdict says whether a figure meets the target.
func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// renderStreams writes the stream workloads' section, with chart (the
// Markdown that shows their chart) under its heading.
func renderStreams(b *bytes.Buffer, s *streamResults, chart string) {
	if s == nil || (len(s.Runs) == 0 && len(s.Peers) == 0) {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	sz := s.Sizes
	p("## Streams: progress relay, cancellation, open streams\n\n")
	b.WriteString(chart)
	p("The child is `bench probe` (`bench/probe.go`, Go, 2026-07-28 and 2025): its `hold` tool sends progress stamped with\n")
	p("the machine's monotonic clock (`CLOCK_MONOTONIC`, the client reads the same one) just before each write, and it\n")
	p("reports on a Unix datagram socket the monotonic time it read each `notifications/cancelled`. Each call is an SSE\n")
	p("stream (it carries a `progressToken`) on a connection of its own, read as it comes. Each workload runs on a\n")
	p("gateway of its own, started with %s (everything else default: the queue 256, keep-alive comments every 15 s).\n\n",
		"`"+strings.Join(s.Settings, "`, `")+"`")
	if len(s.Runs) > 0 {
		x := summarizeStreams(s)
		p("Each figure is the median of %d runs' figures.\n\n", x.runs)
		f := summarizeFloor(s.Floor)
		p("| measure | p50 | p99 | samples per run | target | | the stdio relay floor: p50 | p99 |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
		p("| cancellation: the client closes → the child reads `notifications/cancelled` | %s | %s | %d | p50 ≤ 0.5 ms | %s | %s |\n",
			round(x.cancelAlone[0]), round(x.cancelAlone[1]), x.samples, verdict(x.cancelAlone[0] <= 500*time.Microsecond), f.cells(f.cancelAlone))
		p("| the same, %d other streams sending progress every %d ms | %s | %s | %d | p99 ≤ 2 ms | %s | %s |\n",
			sz.Load, sz.LoadEvery, round(x.cancelLoaded[0]), round(x.cancelLoaded[1]), x.samples, verdict(x.cancelLoaded[1] <= 2*time.Millisecond), f.cells(f.cancelLoaded))
		p("| progress relay: the child's stamp → the client reads the event (one stream, every %d ms) | %s | %s | %d | p50 ≤ 0.3 ms | %s | %s |\n",
			sz.RelayEvery, round(x.relayAlone[0]), round(x.relayAlone[1]), x.relaySamples, verdict(x.relayAlone[0] <= 300*time.Microsecond), f.cells(f.relayAlone))
		p("| progress relay, %d streams at once (%d events each, every %d ms) | %s | %s | %d | | | | |\n\n",
			sz.Load, sz.Steps, sz.Every, round(x.relayLoaded[0]), round(x.relayLoaded[1]), x.conc.Relay.N)
		if f.runs > 0 {
			p("The stdio relay floor (`bench relay`, the same as in the echo tables) fronts the same probe, %s, each workload on a relay\n", runsOf(f.runs))
			p("of its own: it answers a call that carries a `progressToken` with an SSE stream, each of the child's progress notifications for it\n")
			p("an event flushed at once, and writes `notifications/cancelled` when a client leaves; nothing else. Its figures are what\n")
			p("these stream latencies come to on this machine with no gateway work at all: two processes woken one after the other.\n\n")
		}
		if len(s.Hops) > 0 {
			h := medianPair(s.Hops, func(l latencySet) latencySet { return l })
			p("The bare hops (`bench/hops.go`), %s, %d events each: a Go child writes its stamp to its stdout every %d ms, a Go\n", runsOf(len(s.Hops)), s.Hops[0].N, sz.RelayEvery)
			p("process copies what the pipe gives to a TCP connection at once (no HTTP, nothing parsed, one goroutine), and the\n")
			p("client stamps each line as it reads it: p50 %s, p99 %s. That is what the progress relay's two wake-ups alone cost on\n", round(h[0]), round(h[1]))
			p("this machine; the gateway and the relay floor also hand each event from the goroutine that reads the child to the stream's own.\n")
			if h[0] > 0 {
				p("The gateway's progress relay p50 is %.2f× the bare hops' p50", float64(x.relayAlone[0])/float64(h[0]))
				if f.runs > 0 {
					p("; the stdio relay floor's is %.2f×", float64(f.relayAlone[0])/float64(h[0]))
				}
				p(".\n")
			}
			p("\n")
		}
		if len(s.Awake) > 0 && f.runs > 0 && len(s.Hops) > 0 {
			// Measured with the floor and the hops, each run.
			renderAwake(p, s, x, f)
		}

		c := x.conc
		p("**%d concurrent progress streams.** Each call is held after its first event until all %d are open, then released at\n", c.Streams, c.Streams)
		p("once: %d progress events each (%d in all with the first), every %d ms, then its answer. The client checks that every\n", c.StepsEach, c.Streams*(c.StepsEach+1), sz.Every)
		p("event carries its own call's tag and token, and counts the steps that never came; the gateway's `/metrics` counts\n")
		p("what it coalesced (a newer progress taking the place of one its client had not taken) and dropped. Lost, misrouted, repeated, coalesced and dropped are summed over the runs (%d):\n\n", x.runs)
		p("| events read (a run) | lost | misrouted | repeated | coalesced by the gateway | dropped | last answer after (the median run) | target | |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
		p("| %d of %d | %d | %d | %d | %d | %d | %s | none lost or misrouted | %s |\n\n", c.Events, c.Streams*(c.StepsEach+1), x.lost, x.misrouted, x.repeated, x.coalesced, x.dropped,
			round(c.Elapsed), verdict(x.lost == 0 && x.misrouted == 0))
		if ideal := time.Duration(c.StepsEach*sz.Every) * time.Millisecond; c.Elapsed > 2*ideal {
			p("The streams ask for %.0f events a second together; the last answer came after %s, against the %s the child's\n", float64(c.Streams)*1000/float64(sz.Every), round(c.Elapsed), round(ideal))
			p("pacing alone takes: on this machine's two cores (client, gateway and child together) that rate is beyond what\n")
			p("it serves (%.0f events a second went through), and the relay latency under it is mostly queueing.\n\n", float64(c.Events)/c.Elapsed.Seconds())
		}

		i := x.idle
		p("**%d idle streams.** Opened %d at a time, each a `hold` that sends one progress event (read: it reached the child)\n", i.Streams, sz.Openers)
		p("and then nothing but keep-alive comments; the child holds each (its `stats` tool counts them). Resident memory\n")
		p("(`VmRSS`) with them all open, less before they opened. Each stream leaves the gateway's HTTP server once it has\n")
		p("been open 100 ms (package `detach`: the connection is hijacked, and a goroutine with a small stack writes the rest):\n")
		p("once %d of them had left, the suite had the gateway collect its garbage (`/debug/pprof/heap?gc=1` on its admin\n", i.Detached)
		p("address: what the streams dropped as they left the server is garbage, not what they cost; the runtime would collect it\n")
		p("by itself within two minutes on an idle process), then read its `VmRSS` every half second until it stopped falling\n")
		p("(three readings within 1%% of the lowest, or 30 s) and took the lowest reading, %s after the last stream opened.\n\n", round(i.Settle))
		p("| | before | with %d streams open | per stream | target | |\n| --- | --- | --- | --- | --- | --- |\n", i.Streams)
		p("| the gateway's process | %.1f MiB | %.1f MiB | %.1f KiB | < 20 KiB | %s |\n", mib(i.GatewayBefore), mib(i.GatewayAfter), x.idleGateway, verdict(x.idleGateway < 20))
		p("| the gateway's process at its peak, while they opened (`VmHWM`) | %.1f MiB | %.1f MiB | %.1f KiB | | |\n", mib(i.GatewayBefore), mib(i.GatewayPeak), i.perStream(i.GatewayBefore, i.GatewayPeak))
		p("| of which goroutine stacks (`go_memstats_stack_inuse_bytes`; %d goroutines with them open, %d before) | %.1f MiB | %.1f MiB | %.1f KiB | | |\n",
			i.GoroutinesAt, i.GoroutinesBefore, mib(i.StackBefore), mib(i.StackAt), x.idleStack)
		p("| of which heap spans in use (`go_memstats_heap_inuse_bytes`, garbage not yet collected included) | %.1f MiB | %.1f MiB | %.1f KiB | | |\n",
			mib(i.HeapBefore), mib(i.HeapAt), x.idleHeap)
		p("| the child (the probe, for comparison) | %.1f MiB | %.1f MiB | %.1f KiB | | |\n", mib(i.ChildBefore), mib(i.ChildAfter), x.idleChild)
		p("| the floor: a bare net/http handler holding as many SSE answers open (`bench floor`, `/hold`) | %.1f MiB | %.1f MiB | %.1f KiB | | |\n\n", mib(i.FloorBefore), mib(i.FloorAfter), x.idleFloor)
		if x.idleFloor > 0 {
			p("The gateway's memory per idle stream is %.2f× the floor's. The floor's streams stay with net/http, which keeps\n", x.idleGateway/x.idleFloor)
			p("for each its connection's buffers and two goroutines (the handler's and its background reader) whatever the\n")
			p("handler does.\n\n")
		}
		p("Closing them all: the child read %d cancellations (it counted %d), and the gateway answered an echo call afterwards: %s.\n\n",
			i.Cancellations, i.ChildCancelled, map[bool]string{true: "yes", false: "no"}[i.ServedAfter])
	}
	if len(s.Peers) > 0 {
		p("### The same child behind the peers\n\n")
		p("One stream of %d progress events every %d ms, and up to %d cancellations (the client closes once the probe\n", sz.RelaySteps+1, sz.RelayEvery, sz.Peers)
		p("reported the call; the tries stop at the first close the child hears nothing of within %s). Medians of the runs.\n\n", peerCancelWait)
		p("| server | progress events relayed | relay p50 | relay p99 | cancellation p50 | cancellation p99 |\n| --- | --- | --- | --- | --- | --- |\n")
		if len(s.Runs) > 0 {
			x := summarizeStreams(s)
			p("| gateway | all | %s | %s | %s | %s |\n", round(x.relayAlone[0]), round(x.relayAlone[1]), round(x.cancelAlone[0]), round(x.cancelAlone[1]))
		}
		for _, name := range sortedKeys(s.Peers) {
			ps := peerSummary(s.Peers[name], sz)
			p("| %s | %s | %s | %s | %s | %s |\n", name, ps.relayed, ps.relay[0], ps.relay[1], ps.cancel[0], ps.cancel[1])
		}
		p("\n")
	}
}

// peerSum is a peer's figures as the report shows them.
type peerSum struct {
	relayed        string
	relay, cancel  [2]string
	relayP50       time.Duration // 0: not relayed
	cancelP50      time.Duration // 0: not cancelled
	relayOK, cancd bool
}

func peerSummary(rs []peerStreamRun, sz streamSizes) peerSum {
	var out peerSum
	var events []float64
	var r50, r99, c50, c99 []time.Duration
	cancelled := true
	for _, r := range rs {
		events = append(events, float64(r.ProgressEvents))
		if r.Relay.N > 0 {
			r50, r99 = append(r50, r.Relay.P50), append(r99, r.Relay.P99)
		}
		if r.NotCancelled > 0 {
			cancelled = false
		} else {
			c50, c99 = append(c50, r.Cancel.P50), append(c99, r.Cancel.P99)
		}
	}
	ev := int(median(events))
	switch {
	case ev == 0:
		out.relayed = "not relayed"
		out.relay = [2]string{"–", "–"}
	default:
		out.relayed = fmt.Sprintf("%d of %d", ev, sz.RelaySteps+1)
		var notes []string
		for i, r := range rs {
			if len(r.Missing) > 0 {
				notes = append(notes, fmt.Sprintf("run %d lacked step %s", i+1, strings.Trim(fmt.Sprint(r.Missing), "[]")))
			}
			if r.AfterAnswer > 0 {
				notes = append(notes, fmt.Sprintf("run %d had %d after the answer", i+1, r.AfterAnswer))
			}
		}
		if len(notes) > 0 {
			out.relayed += " (" + strings.Join(notes, "; ") + ")"
		}
		out.relayP50 = median(r50)
		out.relay = [2]string{round(median(r50)), round(median(r99))}
		out.relayOK = true
	}
	if cancelled && len(c50) > 0 {
		out.cancelP50 = median(c50)
		out.cancel = [2]string{round(median(c50)), round(median(c99))}
		out.cancd = true
	} else {
		out.cancel = [2]string{fmt.Sprintf("no cancellation within %s", peerCancelWait), "–"}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// drawStreamChart draws the stream latencies (p50 and p99 of the gateway,
// the peers' p50 where they do it) and returns the Markdown that shows it.
func drawStreamChart(dir, rel string, s *streamResults) (string, error) {
	if s == nil || len(s.Runs) == 0 {
		return "", nil
	}
	x := summarizeStreams(s)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	labels := []string{"cancellation, alone", fmt.Sprintf("cancellation, %d streams running", s.Sizes.Load),
		"progress relay, one stream", fmt.Sprintf("progress relay, %d streams at once", s.Sizes.Load)}
	ss := []series{
		{name: "gateway p50", values: []float64{ms(x.cancelAlone[0]), ms(x.cancelLoaded[0]), ms(x.relayAlone[0]), ms(x.relayLoaded[0])}},
		{name: "gateway p99", values: []float64{ms(x.cancelAlone[1]), ms(x.cancelLoaded[1]), ms(x.relayAlone[1]), ms(x.relayLoaded[1])}},
	}
	if f := summarizeFloor(s.Floor); f.runs > 0 {
		ss = append(ss, series{name: "stdio relay floor p50", values: []float64{ms(f.cancelAlone[0]), ms(f.cancelLoaded[0]), ms(f.relayAlone[0]), math.NaN()}})
	}
	for _, name := range sortedKeys(s.Peers) {
		ps := peerSummary(s.Peers[name], s.Sizes)
		v := []float64{math.NaN(), math.NaN(), math.NaN(), math.NaN()}
		if ps.cancd {
			v[0] = ms(ps.cancelP50)
		}
		if ps.relayOK {
			v[2] = ms(ps.relayP50)
		}
		short, _, _ := strings.Cut(name, " (")
		ss = append(ss, series{name: short + " p50", values: v})
	}
	title := "Stream latencies: cancellation and progress relay (lower is better)"
	if err := barChart(filepath.Join(dir, "streams.png"), title, "ms", labels, ss, true); err != nil {
		return "", fmt.Errorf("streams.png: %w", err)
	}
	return fmt.Sprintf("![%s](%s/streams.png)\n\n", title, rel), nil
}

// renderAwake says what the progress relay came to with the CPUs kept
// busy (awake.go), beside the figures with idle CPUs.
func renderAwake(p func(string, ...any), s *streamResults, x streamSummary, f floorSummary) {
	g := medianPair(s.Awake, func(a awakeRun) latencySet { return a.Gateway })
	fl := medianPair(s.Awake, func(a awakeRun) latencySet { return a.Floor })
	h := medianPair(s.Awake, func(a awakeRun) latencySet { return a.Hops })
	idle := make([]float64, len(s.Awake))
	for i, a := range s.Awake {
		idle[i] = a.Idle
	}
	p("**The same stream with the CPUs kept busy** (`bench/awake.go`), %s. Between two events every process on the path sleeps,\n", runsOf(len(s.Awake)))
	p("and the CPUs with them: an idle CPU halts, and on a virtual machine waking it takes the guest and the host a while. Here\n")
	p("each CPU gets a process of its own spinning at `SCHED_IDLE` (the kernel's least fair-share policy: it gives way at once to\n")
	p("any other process that wakes there); the CPUs were idle %.1f %% of the time meanwhile (`/proc/stat`, the median run).\n\n", 100*median(idle))
	p("| through | p50 | p99 | p50 with idle CPUs (the table above) |\n| --- | --- | --- | --- |\n")
	p("| the gateway | %s | %s | %s |\n", round(g[0]), round(g[1]), round(x.relayAlone[0]))
	p("| %s | %s | %s | %s |\n", relayName, round(fl[0]), round(fl[1]), round(f.relayAlone[0]))
	p("| the bare hops | %s | %s | %s |\n\n", round(h[0]), round(h[1]), round(medianPair(s.Hops, func(l latencySet) latencySet { return l })[0]))
	p("The difference between the two p50s is roughly what idle CPUs cost the relay here, less what preempting a spinner costs.\n")
	p("Both were measured in the same runs, at different moments of them: a difference within their spread tells nothing.\n\n")
}

// runsOf is "1 run" or "N runs".
func runsOf(n int) string {
	if n == 1 {
		return "1 run"
	}
	return strconv.Itoa(n) + " runs"
}
