package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Scaling with GATEWAY_WORKERS: the child's spin tool keeps a core busy
// for each call (spin of CPU time), so one Node child serves at most
// 1/spin calls a second however many calls are in flight; more children
// can use more cores.

// workersResult is the workers workload: each worker count, each run.
type workersResult struct {
	Spin  time.Duration // CPU each call costs the child
	Conc  int           // calls in flight
	Cores int           // runtime.NumCPU where it ran
	Runs  []workersRun
}

// workersRun is one closed-loop run of spin calls against a gateway with
// that many children.
type workersRun struct {
	Workers int
	Load    loadResult
	// Others is the CPU that processes other than the gateway, its
	// children and this one used meanwhile (warm-up included), in cores:
	// on a shared machine, what the run had to share the cores with.
	Others float64
}

// runWorkers measures spin calls of spin each at concurrency conc (after
// warm) for d against the gateway gw with each of workers children, runs
// times; each run starts a gateway of its own per worker count, the
// counts taking turns so that noise spreads over all of them.
func runWorkers(ctx context.Context, gw string, child []string, workers []int, conc int, spin, warm, d time.Duration, runs int) (workersResult, error) {
	res := workersResult{Spin: spin, Conc: conc, Cores: runtime.NumCPU()}
	for range runs {
		for _, n := range workers {
			r, err := workersRunOnce(ctx, gw, child, n, conc, spin, warm, d)
			if err != nil {
				return res, fmt.Errorf("GATEWAY_WORKERS=%d: %w", n, err)
			}
			r.Workers = n
			res.Runs = append(res.Runs, r)
		}
	}
	return res, nil
}

func workersRunOnce(ctx context.Context, gw string, child []string, workers, conc int, spin, warm, d time.Duration) (workersRun, error) {
	t := gatewayTarget("gateway", gw, "GATEWAY_WORKERS="+strconv.Itoa(workers))
	r, err := startGateway(ctx, t, child)
	if err != nil {
		return workersRun{}, err
	}
	defer r.stop()
	tools, err := dialTools(ctx, t, r.base, &rawTransport{})
	if err != nil {
		return workersRun{}, err
	}
	c := newSpinCaller(tools, spin)
	defer c.Close()
	tree := &procTree{pid: r.cmd.Process.Pid}
	before, err := ownedCPU(tree)
	if err != nil {
		return workersRun{}, err
	}
	start := time.Now()
	load, err := runLoad(ctx, c, conc, warm, d, tree)
	if err != nil {
		return workersRun{}, err
	}
	wall := time.Since(start)
	after, err := ownedCPU(tree)
	if err != nil {
		return workersRun{}, err
	}
	others := (after.machine - before.machine) - (after.tree - before.tree) - (after.self - before.self)
	return workersRun{Load: load, Others: max(others, 0) / wall.Seconds()}, nil
}

// cpuReading is CPU seconds used so far: by the whole machine, by a
// server's process tree, and by this process.
type cpuReading struct{ machine, tree, self float64 }

func ownedCPU(tree *procTree) (cpuReading, error) {
	var r cpuReading
	var err error
	if r.machine, err = machineBusy(); err != nil {
		return r, err
	}
	if r.tree, err = tree.cpuSeconds(); err != nil {
		return r, err
	}
	r.self, err = procTree{pid: os.Getpid(), alone: true}.cpuSeconds()
	return r, err
}

// machineBusy is the CPU seconds all cores have spent not idle since boot.
func machineBusy() (float64, error) {
	idle, total, err := cpuTicks()
	return float64(total-idle) / clockTicks, err
}

// cpuTicks reads the time all CPUs spent idle (iowait included), and in
// all, since boot, in clock ticks: /proc/stat's first line.
func cpuTicks() (idle, total uint64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat begins %q", line)
	}
	// user nice system idle iowait irq softirq steal; guest time is in
	// user's already.
	for i, s := range f[1:9] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat begins %q: %w", line, err)
		}
		total += n
		if i == 3 || i == 4 {
			idle += n
		}
	}
	return idle, total, nil
}

// workersSummary is the median of the runs with one worker count.
type workersSummary struct {
	workers            int
	rate               float64
	p50, p99           time.Duration
	cpuPerCall, ownCPU float64 // µs: the gateway and its children; the gateway alone
	others             float64 // cores other processes used meanwhile
}

// summarize is one summary per worker count, in the order they ran.
func (r workersResult) summarize() []workersSummary {
	var out []workersSummary
	seen := map[int]bool{}
	for _, run := range r.Runs {
		if seen[run.Workers] {
			continue
		}
		seen[run.Workers] = true
		var rate, cpu, own, others []float64
		var p50, p99 []time.Duration
		for _, x := range r.Runs {
			if x.Workers != run.Workers {
				continue
			}
			rate = append(rate, x.Load.rate())
			cpu = append(cpu, x.Load.cpuPerCall())
			own = append(own, x.Load.ownCPUPerCall())
			p50 = append(p50, x.Load.P50)
			p99 = append(p99, x.Load.P99)
			others = append(others, x.Others)
		}
		out = append(out, workersSummary{workers: run.Workers, rate: median(rate), p50: median(p50), p99: median(p99), cpuPerCall: median(cpu), ownCPU: median(own), others: median(others)})
	}
	return out
}

// ceiling is the most calls a second n children can serve when each call
// takes spin of a core and there are cores of them: what the CPU allows,
// with nothing left for the gateway or the client.
func (r workersResult) ceiling(n int) float64 {
	if r.Spin <= 0 {
		return 0
	}
	return float64(min(n, r.Cores)) / r.Spin.Seconds()
}

// renderWorkers is the workload's section of the report.
func renderWorkers(r workersResult) []byte {
	var b bytes.Buffer
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("## GATEWAY_WORKERS with a CPU-bound child\n\n")
	p("Each call is the child's `spin` tool: a busy loop until the child has used %s of CPU, then the answer.\n", round(r.Spin))
	p("One Node child runs one call at a time, so it serves at most %.0f calls/s whatever the concurrency;\n", r.ceiling(1))
	p("more children can use more cores (this machine has %d). Closed loop at concurrency %d, `GATEWAY_MAX_IN_FLIGHT`\n", r.Cores, r.Conc)
	p("at its default; medians of %d runs. The ceiling is min(workers, cores) / spin time, with no CPU left\n", runsPer(r))
	p("for the gateway or the load client (which share the cores). The last column is the CPU other processes\n")
	p("on the machine used meanwhile, in cores: what the run had to share them with.\n\n")
	p("| GATEWAY_WORKERS | calls/s | of the ceiling | against 1 worker | p50 | p99 | CPU per call (gateway and children) | of which the gateway's | others' CPU |\n")
	p("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	sum := r.summarize()
	var one float64
	for _, s := range sum {
		if s.workers == 1 {
			one = s.rate
		}
	}
	for _, s := range sum {
		against := ""
		if one > 0 {
			against = fmt.Sprintf("%.2f×", s.rate/one)
		}
		p("| %d | %.0f | %.0f%% of %.0f | %s | %s | %s | %.0f µs | %.0f µs | %.2f |\n", s.workers, s.rate, 100*s.rate/r.ceiling(s.workers), r.ceiling(s.workers),
			against, round(s.p50), round(s.p99), s.cpuPerCall, s.ownCPU, s.others)
	}
	p("\n")
	return b.Bytes()
}

func runsPer(r workersResult) int {
	if len(r.Runs) == 0 {
		return 0
	}
	n := 0
	for _, x := range r.Runs {
		if x.Workers == r.Runs[0].Workers {
			n++
		}
	}
	return n
}

// drawWorkers draws calls/s by worker count beside the ceiling into dir
// and returns the Markdown that shows it (rel: dir as the report names
// it).
func drawWorkers(dir, rel string, r workersResult) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var labels []string
	measured := series{name: "gateway"}
	ceiling := series{name: "ceiling: min(workers, cores) / spin time"}
	for _, s := range r.summarize() {
		labels = append(labels, fmt.Sprintf("GATEWAY_WORKERS=%d", s.workers))
		measured.values = append(measured.values, s.rate)
		ceiling.values = append(ceiling.values, r.ceiling(s.workers))
	}
	title := fmt.Sprintf("Calls per second with a child that spins %s of CPU a call, concurrency %d (higher is better)", round(r.Spin), r.Conc)
	if err := barChart(filepath.Join(dir, "workers.png"), title, "calls/s", labels, []series{measured, ceiling}, false); err != nil {
		return "", fmt.Errorf("workers.png: %w", err)
	}
	return fmt.Sprintf("![%s](%s/workers.png)\n\n", title, rel), nil
}
