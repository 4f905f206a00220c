package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The suite re-executes itself as the HTTP floor, the stdio relay floor,
// the probe child and the bare hops' processes; so does its test binary.
func TestMain(m *testing.M) {
	if ok, err := subcommand(os.Args); ok {
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[1], err)
			os.Exit(1)
		}
		return
	}
	// The probe children are this binary: built with -race, each would
	// sleep 1 s as it exits, unless told not to.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}

// A short run of the whole suite against the floors and the gateway: every
// table and ratio is there, and the numbers are real measurements.
func TestSuiteRuns(t *testing.T) {
	testNode(t)
	dir := t.TempDir()
	// Whatever the run puts in the temporary directory, it removes.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	o := options{runs: 1, duration: 300 * time.Millisecond, warm: 100 * time.Millisecond, conc: "1,64",
		only: "floor,relay,gateway", out: filepath.Join(dir, "report.md"), results: filepath.Join(dir, "results.json"), charts: filepath.Join(dir, "charts"),
		streams: true, sizes: streamSizes{Samples: 5, Load: 10, LoadEvery: 20, Steps: 3, Every: 5, RelaySteps: 5, RelayEvery: 2, Idle: 10, Openers: 4},
		scale: true, bigSize: 1 << 20, bigCalls: 1, bigTimeout: time.Minute, workers: "1,2", spin: 2 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	spinning := len(spinnerPids(t))
	if err := run(ctx, o); err != nil {
		t.Fatal(err)
	}
	if n := len(spinnerPids(t)); n != spinning {
		t.Errorf("%d spinners running after the suite, %d before", n, spinning)
	}
	report, err := os.ReadFile(o.out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| gateway | 1 |", "| gateway | 64 |", "| " + floorName + " | 64 |", "| " + relayName + " | 1 |", "## The child alone over stdio",
		"| CPU per call, c=64", "| p50, c=1 | ", "The stdio relay floor (`bench relay`",
		"µs | HTTP floor ", "µs | stdio relay floor ", "| calls/s, c=64 | ", "## Streams", "| 40 of 40 | 0 | 0 | 0 |", "![Stream latencies", "The bare hops (`bench/hops.go`)", "**The same stream with the CPUs kept busy** (`bench/awake.go`), 1 run.",
		"## A 1 MiB result", "## GATEWAY_WORKERS with a CPU-bound child", "## Where the gateway's CPU and allocations go (pprof)", "/big-memory.png)", "/workers.png)",
		"The profiles were not kept (`-pprof DIR` keeps them)."} {
		if !strings.Contains(string(report), want) {
			t.Errorf("the report has no %q:\n%s", want, report)
		}
	}
	var res results
	b, err := os.ReadFile(o.results)
	if err != nil || json.Unmarshal(b, &res) != nil {
		t.Fatalf("results: %v %s", err, b)
	}
	for _, name := range []string{"gateway", floorName, relayName} {
		rs := res.Load[name]
		if len(rs) != 2 || slices.ContainsFunc(rs, func(r loadResult) bool { return r.Calls == 0 || r.P50 <= 0 || r.CPU <= 0 }) {
			t.Errorf("%s: %+v", name, rs)
		}
		if res.RSS[name] <= 0 {
			t.Errorf("%s: no peak RSS", name)
		}
	}
	if res.Streams == nil || len(res.Streams.Runs) != 1 || res.Streams.Runs[0].Concurrent.Events != 40 || res.Streams.Runs[0].Idle.Cancellations != 10 ||
		len(res.Streams.Hops) != 1 || res.Streams.Hops[0].N != 6 ||
		len(res.Streams.Awake) != 1 || res.Streams.Awake[0].Gateway.N != 6 || res.Streams.Awake[0].Floor.N != 6 || res.Streams.Awake[0].Hops.N != 6 ||
		res.Streams.Awake[0].Idle < 0 || res.Streams.Awake[0].Idle >= 1 {
		t.Errorf("streams: %+v", res.Streams)
	}
	// Every chart the suite draws, and so every one drawAll removes first.
	for _, png := range chartFiles() {
		if st, err := os.Stat(filepath.Join(o.charts, png)); err != nil || st.Size() < 1000 {
			t.Errorf("chart %s: %v", png, err)
		}
	}
	if pngs, _ := filepath.Glob(filepath.Join(o.charts, "*")); len(pngs) != len(chartFiles()) {
		t.Errorf("charts drawn: %q; chartFiles: %q", pngs, chartFiles())
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("the run left %v in its temporary directory", left)
	}
	if len(res.Stdio) != 2 || res.Stdio[0].Calls == 0 {
		t.Errorf("stdio: %+v", res.Stdio)
	}
}

// CPU time is read for a process and its descendants; a child counts.
func TestProcTree(t *testing.T) {
	cmd := exec.Command("cat")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); _ = cmd.Wait() }()
	me := procTree{pid: os.Getpid()}
	if !slices.Contains(me.pids(), cmd.Process.Pid) {
		t.Errorf("descendants %v lack the child %d", me.pids(), cmd.Process.Pid)
	}
	if alone := (procTree{pid: os.Getpid(), alone: true}).pids(); len(alone) != 1 {
		t.Errorf("alone: %v", alone)
	}
	before, err := me.cpuSeconds()
	if err != nil {
		t.Fatal(err)
	}
	// Burn CPU until the kernel's clock has counted some.
	for x := 0; ; x++ {
		after, err := me.cpuSeconds()
		if err != nil {
			t.Fatal(err)
		}
		if after > before {
			break
		}
		if x > 1e9 {
			t.Fatal("no CPU time counted")
		}
	}
	if peak, err := peakRSS(os.Getpid()); err != nil || peak < 1<<20 {
		t.Errorf("peak RSS %d, %v", peak, err)
	}
}

// A list flag reads as whole numbers of 1 or more, or says which item is
// not one.
func TestCounts(t *testing.T) {
	if got, err := counts("-conc", "1, 16,64"); err != nil || fmt.Sprint(got) != "[1 16 64]" {
		t.Errorf("got %v, %v; want [1 16 64]", got, err)
	}
	for _, bad := range []string{"", "0", "1,,2", "4,x", "-1"} {
		if got, err := counts("-conc", bad); err == nil || !strings.Contains(err.Error(), "-conc") {
			t.Errorf("%q: got %v, %v; want an error naming -conc", bad, got, err)
		}
	}
}

// -targets names a target by its whole name or its first words, and the
// floors by one word each.
func TestSelected(t *testing.T) {
	names := []string{floorName, relayName, "gateway", "mcp-proxy 6.7.19 (2026-07-28)", "supergateway 4.0.0 --stateful (2025-11-25)"}
	for _, c := range []struct {
		only string
		want []string
	}{
		{"", names},
		{"floor", names[:1]},
		{"HTTP Floor, relay", names[:2]},
		{"gateway,stdio relay floor", names[1:3]},
		{"mcp-proxy,supergateway", names[3:]},
		{"GATEWAY,", names[2:3]},
		{"gate,proxy,relay floor,floors,stdio relay", names[1:2]},
	} {
		var got []string
		for _, n := range names {
			if selected(c.only, n) {
				got = append(got, n)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%q: got %q, want %q", c.only, got, c.want)
		}
	}
}

// A -targets item that names no target is refused, with the names that
// would do, before anything runs.
func TestCheckTargets(t *testing.T) {
	for _, ok := range []string{"", "gateway", "floor, relay", "GATEWAY,", "mcp-proxy,supergateway", "stdio relay floor", "supergateway 4.0.0 --stateful (2025-11-25)"} {
		if err := checkTargets(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"gatway", "gateway,mcp", ",", " "} {
		err := checkTargets(bad)
		if err == nil || !strings.Contains(err.Error(), "-targets") || !strings.Contains(err.Error(), "mcp-proxy, supergateway") {
			t.Errorf("%q: %v; want an error naming -targets and the targets", bad, err)
		}
	}
	// run refuses it before it builds or starts anything.
	if err := run(context.Background(), options{runs: 1, conc: "1", workers: "1", only: "gatway"}); err == nil || !strings.Contains(err.Error(), `"gatway"`) {
		t.Errorf("run with -targets gatway: %v", err)
	}
}

// The version is dirty for a changed tracked file, not for what the suite
// writes (the report, its charts and profiles) nor for an untracked file.
func TestGitVersion(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed:", err)
	}
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"BENCHMARKS.md", "bench/charts/a.png", "bench/profiles/cpu.pb.gz", "bench/main.go", "main.go"} {
		write(f, "1")
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-qm", "one")
	ctx := context.Background()
	clean := gitVersion(ctx, filepath.Join(dir, "bench"))
	if clean == "" || strings.HasSuffix(clean, "-dirty") {
		t.Fatalf("a clean checkout: %q", clean)
	}
	for _, f := range []string{"BENCHMARKS.md", "bench/charts/a.png", "bench/profiles/cpu.pb.gz", "bench/charts/new.png", "untracked.go"} {
		write(f, "2")
	}
	if v := gitVersion(ctx, filepath.Join(dir, "bench")); v != clean {
		t.Errorf("with the suite's outputs changed: %q, want %q", v, clean)
	}
	for _, f := range []string{"bench/main.go", "main.go"} {
		write(f, "2")
		if v := gitVersion(ctx, filepath.Join(dir, "bench")); v != clean+"-dirty" {
			t.Errorf("with %s changed: %q, want %q", f, v, clean+"-dirty")
		}
		git("checkout", "-q", "--", f)
	}
	if v := gitVersion(ctx, t.TempDir()); v != "" {
		t.Errorf("outside a checkout: %q", v)
	}
}

// The servers do not inherit the suite's GATEWAY_* settings nor the Go
// runtime's: what the report calls the gateway's defaults is what runs.
func TestServerEnv(t *testing.T) {
	t.Setenv("GATEWAY_WORKERS", "9")
	t.Setenv("GATEWAY_LOG_LEVEL", "debug")
	t.Setenv("GOGC", "off")
	t.Setenv("GOMAXPROCS", "1")
	t.Setenv("BENCH_TEST_KEPT", "yes")
	dump := filepath.Join(t.TempDir(), "env")
	// The gateway's command line is BIN -- CHILD...: env(1) runs the
	// child with the environment the gateway would have had.
	tg := gatewayTarget("gateway", "env", "GATEWAY_MAX_IN_FLIGHT=7")
	if err := tg.command(context.Background(), 1, []string{"sh", "-c", "env > " + dump}).Run(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(string(b), "\n")
	for _, want := range []string{"GATEWAY_ADDR=127.0.0.1:1", "GATEWAY_MAX_IN_FLIGHT=7", "BENCH_TEST_KEPT=yes", "PATH=" + os.Getenv("PATH")} {
		if !slices.Contains(got, want) {
			t.Errorf("the gateway's environment lacks %s", want)
		}
	}
	for _, kv := range got {
		if strings.HasPrefix(kv, "GATEWAY_WORKERS=") || strings.HasPrefix(kv, "GATEWAY_LOG_LEVEL=") || strings.HasPrefix(kv, "GOGC=") || strings.HasPrefix(kv, "GOMAXPROCS=") {
			t.Errorf("the gateway inherited %s", kv)
		}
	}
	for _, kv := range serverEnv() {
		if strings.HasPrefix(kv, "GATEWAY_") || strings.HasPrefix(kv, "GOGC=") {
			t.Errorf("the floors would inherit %s", kv)
		}
	}
}

// SIGTERM ends the suite as Ctrl-C does: the servers it runs are stopped,
// one line says it was interrupted, it fails, and it writes nothing.
func TestTerminated(t *testing.T) {
	testNode(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "bench")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, results, charts := filepath.Join(dir, "report.md"), filepath.Join(dir, "results.json"), filepath.Join(dir, "charts")
	// One load run long enough to be cut.
	cmd := exec.Command(bin, "-runs", "1", "-conc", "1", "-warm", "10ms", "-duration", "2m", "-targets", "relay",
		"-streams=false", "-scale=false", "-out", out, "-json", results, "-charts", charts)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	defer func() {
		if !done {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	lines := bufio.NewScanner(stderr)
	var logged []string
	for lines.Scan() {
		logged = append(logged, lines.Text())
		if strings.Contains(lines.Text(), relayName+", run 1 of 1") {
			break
		}
	}
	// The relay floor (and its child) running under the suite, not only
	// announced.
	var tree []int
	pace := time.NewTicker(5 * time.Millisecond)
	defer pace.Stop()
	for deadline := time.Now().Add(30 * time.Second); len(tree) < 3; <-pace.C {
		if time.Now().After(deadline) {
			t.Fatalf("no relay floor running: %v\n%s", tree, strings.Join(logged, "\n"))
		}
		tree = procTree{pid: cmd.Process.Pid}.pids()
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
		logged = append(logged, lines.Text())
	}
	err = cmd.Wait()
	done = true
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit code %d (%v), want 1", code, err)
	}
	if n := len(logged); n < 2 || !strings.Contains(logged[n-1], "interrupted (terminated signal received)") || !strings.Contains(logged[n-2], "run 1 of 1") {
		t.Errorf("the log does not end with one line saying it was interrupted:\n%s", strings.Join(logged, "\n"))
	}
	for _, f := range []string{out, results, charts} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s was written", f)
		}
	}
	for _, pid := range tree[1:] {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			t.Errorf("a process of the suite's outlived it: %s", b)
		}
	}
}
