package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// summary is the median of a target's runs at one concurrency.
type summary struct {
	rate, cpuPerCall, ownCPUPerCall float64
	p50, p99                        time.Duration
	errors                          int
}

// median is the middle value of v, or for an even count the mean of the
// two middle ones (the upper one alone made a median of two the slowest);
// 0 for none.
func median[T int64 | float64 | time.Duration](v []T) T {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	// Halved apart, so that two large int64s do not overflow.
	return s[m-1] + (s[m]-s[m-1])/2
}

// summarize takes the medians of each target's runs, by concurrency.
func summarize(res results) map[string]map[int]summary {
	out := map[string]map[int]summary{}
	for name, rs := range res.Load {
		byConc := map[int][]loadResult{}
		for _, r := range rs {
			byConc[r.Conc] = append(byConc[r.Conc], r)
		}
		out[name] = map[int]summary{}
		for c, rs := range byConc {
			var rate, cpu, own []float64
			var p50, p99 []time.Duration
			errs := 0
			for _, r := range rs {
				rate = append(rate, r.rate())
				cpu = append(cpu, r.cpuPerCall())
				own = append(own, r.ownCPUPerCall())
				p50 = append(p50, r.P50)
				p99 = append(p99, r.P99)
				errs += r.Errors
			}
			out[name][c] = summary{rate: median(rate), cpuPerCall: median(cpu), ownCPUPerCall: median(own), p50: median(p50), p99: median(p99), errors: errs}
		}
	}
	return out
}

// drawCharts draws the report's charts into dir, and returns the Markdown
// that shows them, with paths relative to the report (rel: dir as the
// report names it).
func drawCharts(dir, rel string, res results, concs []int, targets []target) (string, error) {
	sum := summarize(res)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var labels []string
	for _, c := range concs {
		labels = append(labels, fmt.Sprintf("concurrency %d", c))
	}
	perConc := func(get func(summary) float64) []series {
		var ss []series
		for _, t := range targets {
			s, ok := sum[t.name]
			if !ok {
				continue
			}
			var vs []float64
			for _, c := range concs {
				if x, ok := s[c]; ok {
					vs = append(vs, get(x))
				} else {
					vs = append(vs, math.NaN())
				}
			}
			ss = append(ss, series{name: t.name, values: vs})
		}
		return ss
	}
	var md strings.Builder
	for _, ch := range []struct {
		file, title, unit string
		get               func(summary) float64
	}{
		{"throughput.png", "Echo calls per second (higher is better)", "calls/s", func(x summary) float64 { return x.rate }},
		{"latency.png", "Echo latency, median (lower is better)", "ms", func(x summary) float64 { return float64(x.p50) / float64(time.Millisecond) }},
		{"cpu.png", "CPU per call of the server's own process (lower is better)", "µs", func(x summary) float64 { return x.ownCPUPerCall }},
	} {
		path := filepath.Join(dir, ch.file)
		if err := barChart(path, ch.title, ch.unit, labels, perConc(ch.get), true); err != nil {
			return "", fmt.Errorf("%s: %w", ch.file, err)
		}
		fmt.Fprintf(&md, "![%s](%s/%s)\n\n", ch.title, rel, ch.file)
	}
	// How much of what the child can do reaches HTTP clients.
	if len(res.Stdio) > 0 {
		xs := make([]float64, len(concs))
		child := series{name: "the child alone over stdio"}
		for i, c := range concs {
			xs[i] = float64(c)
			var rates []float64
			for _, r := range res.Stdio {
				if r.Window == c {
					rates = append(rates, r.rate())
				}
			}
			v := math.NaN()
			if len(rates) > 0 {
				v = median(rates)
			}
			child.values = append(child.values, v)
		}
		ss := append([]series{child}, perConc(func(x summary) float64 { return x.rate })...)
		title := "Calls per second by concurrency: the child alone and behind each server"
		if err := lineChart(filepath.Join(dir, "scaling.png"), title, "calls in flight", "calls/s", xs, ss, true); err != nil {
			return "", fmt.Errorf("scaling.png: %w", err)
		}
		fmt.Fprintf(&md, "![%s](%s/scaling.png)\n\n", title, rel)
	}
	var rss []series
	for _, t := range targets {
		if v, ok := res.RSS[t.name]; ok {
			rss = append(rss, series{name: t.name, values: []float64{float64(v) / (1 << 20)}})
		}
	}
	if len(rss) > 0 {
		title := "Peak resident memory of the server, not its child (lower is better)"
		if err := barChart(filepath.Join(dir, "memory.png"), title, "MiB", []string{"peak RSS under the echo load"}, rss, true); err != nil {
			return "", fmt.Errorf("memory.png: %w", err)
		}
		fmt.Fprintf(&md, "![%s](%s/memory.png)\n\n", title, rel)
	}
	return md.String(), nil
}

// chartSet is the Markdown of the charts drawn, by section.
type chartSet struct{ echo, streams, big, workers string }

// chartFiles are the names of the charts the suite draws.
func chartFiles() []string {
	return []string{"throughput.png", "latency.png", "cpu.png", "scaling.png", "memory.png", "streams.png",
		"big-memory.png", "big-time.png", "workers.png"}
}

// drawAll draws every chart the results have data for into dir, named rel
// from the report. The charts an earlier run drew there are removed
// first: those this run does not draw (a run with -scale=false has no
// workers.png) would sit beside its report as if they were its own. Other
// files in dir are left alone.
func drawAll(dir, rel string, res results, concs []int, targets []target) (chartSet, error) {
	var ch chartSet
	for _, f := range chartFiles() {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return ch, err
		}
	}
	var err error
	if ch.echo, err = drawCharts(dir, rel, res, concs, targets); err != nil {
		return ch, err
	}
	if ch.streams, err = drawStreamChart(dir, rel, res.Streams); err != nil {
		return ch, err
	}
	if res.Big != nil {
		if ch.big, err = drawBig(dir, rel, *res.Big); err != nil {
			return ch, err
		}
	}
	if res.Workers != nil {
		if ch.workers, err = drawWorkers(dir, rel, *res.Workers); err != nil {
			return ch, err
		}
	}
	return ch, nil
}

// render writes the report: what was measured and how, the charts, the
// tables, and the ratios the targets are judged by; then the stream
// workloads, with their chart.
func render(res results, concs []int, targets []target, ch chartSet) []byte {
	sum := summarize(res)
	var b bytes.Buffer
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# Benchmarks\n\n")
	p("Generated by the suite (`bench/`, which `scripts/bench` runs) on %s: %s, %d cores (`nproc`), %s.\n", res.Started.Format("2006-01-02 15:04 MST"), cpuModel(), runtime.NumCPU(), runtime.GOOS+"/"+runtime.GOARCH)
	if len(res.Flags) > 0 {
		p("Flags: %s.\n", renderFlags(res.Flags))
	}
	var vs []string
	for _, k := range []string{"gateway", "go", "node"} {
		if v := res.Versions[k]; v != "" {
			vs = append(vs, k+" "+v)
		}
	}
	p("Versions: %s; supergateway 4.0.0 and mcp-proxy 6.7.19 from npm (`bench/package-lock.json`).\n\n", strings.Join(vs, ", "))
	p("Every server fronts the same child, `bench/echo-server.mjs` (Node, one `echo` tool), and is driven\n")
	p("by the same Go client (`bench/load.go`, over `bench/transport.go`: HTTP/1.1 written and read on the\n")
	p("caller's goroutine, which costs far less CPU than net/http's client on cores the servers share):\n")
	p("closed loop, keep-alive, each of N clients calling as soon as its last call returned. Each figure is the median of the runs; CPU is the server's whole process\n")
	p("tree (a gateway and its child) from `/proc`, divided by the calls, and the server's own process alone.\n")
	p("The servers run with the suite's environment less every `GATEWAY_*` variable and the Go runtime's `GOGC`,\n")
	p("`GOMEMLIMIT`, `GOMAXPROCS` and `GODEBUG`: the gateway runs with its defaults, but for the settings named where they are used.\n\n")

	b.WriteString(ch.echo)
	p("## Echo: throughput, latency, CPU per call\n\n")
	p("| server | concurrency | calls/s | p50 | p99 | CPU per call | of which the server's own |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, t := range targets {
		s, ok := sum[t.name]
		if !ok {
			continue
		}
		for _, c := range concs {
			x, ok := s[c]
			if !ok {
				continue
			}
			p("| %s | %d | %.0f | %s | %s | %.0f µs | %.0f µs |\n", t.name, c, x.rate, round(x.p50), round(x.p99), x.cpuPerCall, x.ownCPUPerCall)
		}
	}
	p("\n")
	if _, ok := sum[relayName]; ok {
		p("The stdio relay floor (`bench relay`, `bench/relay.go`) is the least any stdio-to-HTTP gateway must do for a call, done the\n")
		p("plainest way, on net/http in front of the same child and sent exactly what the gateway is sent: one write to the child's stdin\n")
		p("per call (the gateway gathers the lines of calls that arrive together into one write, which wakes the child once for all),\n")
		p("one read of its stdout shared by all calls, a goroutine woken with the answer, and the JSON-RPC id rewritten both ways\n")
		p("(one child serves every client, so each call gets an id of the relay's own and the client's is put back); no logging,\n")
		p("metrics, auth or limits. (A call that asks for progress gets an SSE stream, and a client that leaves a `notifications/cancelled`:\n")
		p("the stream section measures those through it too; the echo calls here need neither.) What the gateway costs beyond it is\n")
		p("the gateway's own; the HTTP floor leaves out the child. Both floors collect garbage at the Go runtime's own pace; the gateway,\n")
		p("as it runs by default, not before its heap reaches 16 MiB (`GATEWAY_HEAP_FLOOR_BYTES`).\n\n")
	}

	if len(res.Stdio) > 0 {
		p("## The child alone over stdio (no HTTP)\n\n")
		p("Calls written straight to the child's stdin, that many in flight: the most any gateway in front of it could do.\n\n")
		p("| in flight | calls/s |\n| --- | --- |\n")
		for _, c := range concs {
			var rates []float64
			for _, r := range res.Stdio {
				if r.Window == c {
					rates = append(rates, r.rate())
				}
			}
			if len(rates) > 0 {
				p("| %d | %.0f |\n", c, median(rates))
			}
		}
		p("\n")
	}

	if len(res.RSS) > 0 {
		p("## Peak resident memory of the server (not its child)\n\n")
		p("The highest over the runs (VmHWM, from `/proc`), not their median.\n\n| server | peak RSS |\n| --- | --- |\n")
		for _, t := range targets {
			if v, ok := res.RSS[t.name]; ok {
				p("| %s | %.1f MiB |\n", t.name, float64(v)/(1<<20))
			}
		}
		p("\n")
	}
	ratios(&b, sum, targets)
	renderStreams(&b, res.Streams, ch.streams)
	if res.Big != nil {
		b.Write(renderBig(*res.Big))
		b.WriteString(ch.big)
	}
	if res.Workers != nil {
		b.Write(renderWorkers(*res.Workers))
		b.WriteString(ch.workers)
	}
	if res.Profiles != nil {
		b.Write(renderProfiles(*res.Profiles))
	}
	return b.Bytes()
}

// renderFlags lists the run's flags, those not at their defaults in bold
// with the default beside them, so that a short run does not read as a
// default one.
func renderFlags(fs []flagSetting) string {
	var items []string
	changed := false
	for _, f := range fs {
		v := f.Value
		if v == "" {
			v = `""`
		}
		item := "`-" + f.Name + "=" + v + "`"
		if f.Value != f.Default {
			changed = true
			d := f.Default
			if d == "" {
				d = `""`
			}
			item = "**" + item + "** (default " + d + ")"
		}
		items = append(items, item)
	}
	note := "all at their defaults"
	if changed {
		note = "in bold, those not at their defaults"
	}
	return strings.Join(items, ", ") + " (" + note + ")"
}

// ratios compares the gateway with the floors and the peers: the issue's
// targets are stated against the HTTP floor; the stdio relay floor's lines
// say what the gateway costs beyond relaying.
func ratios(b *bytes.Buffer, sum map[string]map[int]summary, targets []target) {
	gw, ok := sum["gateway"]
	if !ok {
		return
	}
	floor, relay := sum[floorName], sum[relayName]
	fmt.Fprintf(b, "## Ratios\n\n| measure | gateway | against | ratio |\n| --- | --- | --- | --- |\n")
	if f, ok := floor[64]; ok && f.ownCPUPerCall > 0 {
		// The gateway's own process against the floor's: the child's CPU
		// is the same whoever fronts it.
		fmt.Fprintf(b, "| CPU per call, c=64 (the gateway's process) | %.0f µs | HTTP floor %.0f µs | %.2f× |\n", gw[64].ownCPUPerCall, f.ownCPUPerCall, gw[64].ownCPUPerCall/f.ownCPUPerCall)
	}
	if f, ok := relay[64]; ok && f.ownCPUPerCall > 0 {
		fmt.Fprintf(b, "| CPU per call, c=64 (the gateway's process) | %.0f µs | stdio relay floor %.0f µs | %.2f× |\n", gw[64].ownCPUPerCall, f.ownCPUPerCall, gw[64].ownCPUPerCall/f.ownCPUPerCall)
	}
	if f, ok := floor[1]; ok && gw[1].p50 > 0 {
		fmt.Fprintf(b, "| p50, c=1 | %s | HTTP floor %s | %.2f× |\n", round(gw[1].p50), round(f.p50), float64(gw[1].p50)/float64(f.p50))
	}
	if f, ok := relay[1]; ok && gw[1].p50 > 0 && f.p50 > 0 {
		fmt.Fprintf(b, "| p50, c=1 | %s | stdio relay floor %s | %.2f× |\n", round(gw[1].p50), round(f.p50), float64(gw[1].p50)/float64(f.p50))
	}
	if f, ok := relay[64]; ok && f.rate > 0 {
		fmt.Fprintf(b, "| calls/s, c=64 | %.0f | stdio relay floor %.0f | %.2f× |\n", gw[64].rate, f.rate, gw[64].rate/f.rate)
	}
	for _, t := range targets {
		if t.name == "gateway" || t.name == floorName || t.name == relayName {
			continue
		}
		if x, ok := sum[t.name][64]; ok && x.rate > 0 {
			fmt.Fprintf(b, "| calls/s, c=64 | %.0f | %s %.0f | %.1f× |\n", gw[64].rate, t.name, x.rate, gw[64].rate/x.rate)
		}
	}
	b.WriteString("\n")
}

// floorName is the HTTP floor's target name.
const floorName = "HTTP floor (net/http, no child)"

func round(d time.Duration) string {
	switch {
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%d µs", d.Microseconds())
	}
}

// cpuModel is the CPU's name from /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "an unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return "an unknown CPU"
}
