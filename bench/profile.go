package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Profiles of the gateway under the echo load: the CPU profile and the
// allocations made over the same window, fetched from net/http/pprof on
// GATEWAY_ADMIN_ADDR while the load runs, saved, and summarised with
// `go tool pprof -top`.

// profileResult is the profiles taken, at each concurrency.
type profileResult struct {
	Dir  string // where the profiles are; "": not kept
	Runs []profileRun
}

// profileRun is one window of load with its profiles.
type profileRun struct {
	Conc       int
	Window     time.Duration // each profile's length
	Load       loadResult    // the load meanwhile (the profiler's cost included)
	CPUFile    string        // the profiles, in Dir
	AllocsFile string        // "" when only the CPU was profiled
	CPU        profileTop    // by flat CPU
	CPUCum     profileTop    // by cumulative CPU
	AllocBytes profileTop    // allocated bytes (alloc_space), flat
	AllocCount profileTop    // allocations (alloc_objects), flat
}

// profileTop is what `go tool pprof -top` says of one sample type.
type profileTop struct {
	Total   float64 // in Unit, over the whole profile
	Unit    string  // ms, B or count
	Entries []profileEntry
}

// profileEntry is one function's line.
type profileEntry struct {
	Name    string
	Flat    float64 // in the top's Unit
	FlatPct float64
	Cum     float64
	CumPct  float64
}

// profileNodes is how many functions each summary lists.
const profileNodes = 12

// runProfiles starts the gateway gw in front of child with
// GATEWAY_ADMIN_ADDR on a second port and, at each concurrency, runs the
// echo load (after warm) while it takes a CPU profile and, with allocs, the
// allocations of the same window, each window long; the profiles are
// saved into dir and summarised. The load is the suite's echo load, and
// the gateway logs at its default level.
func runProfiles(ctx context.Context, gw string, child []string, concs []int, warm, window time.Duration, allocs bool, dir string) (profileResult, error) {
	res := profileResult{Dir: dir}
	if window < time.Second || window%time.Second != 0 {
		return res, fmt.Errorf("a profile window of %v: whole seconds only (pprof's seconds=)", window)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	adminPort, err := freePort()
	if err != nil {
		return res, err
	}
	admin := "http://127.0.0.1:" + strconv.Itoa(adminPort)
	t := gatewayTarget("gateway", gw, "GATEWAY_ADMIN_ADDR=127.0.0.1:"+strconv.Itoa(adminPort))
	r, err := startGateway(ctx, t, child)
	if err != nil {
		return res, err
	}
	defer r.stop()
	c, err := t.dial(ctx, r.base)
	if err != nil {
		return res, err
	}
	defer c.Close()
	tree := &procTree{pid: r.cmd.Process.Pid}
	for _, conc := range concs {
		run, err := profileOnce(ctx, c, tree, admin, conc, warm, window, allocs, dir)
		if err != nil {
			return res, fmt.Errorf("concurrency %d: %w", conc, err)
		}
		run.Window = window
		if err := summarizeProfiles(ctx, gw, dir, &run); err != nil {
			return res, fmt.Errorf("concurrency %d: %w", conc, err)
		}
		res.Runs = append(res.Runs, run)
	}
	return res, nil
}

// profileOnce runs the load and the profiles over the same window: the
// load starts, the profiles are asked for at once, and the load ends when
// they have come.
func profileOnce(ctx context.Context, c caller, tree *procTree, admin string, conc int, warm, window time.Duration, allocs bool, dir string) (profileRun, error) {
	run := profileRun{Conc: conc, CPUFile: fmt.Sprintf("cpu-c%d.pb.gz", conc)}
	if allocs {
		run.AllocsFile = fmt.Sprintf("allocs-c%d.pb.gz", conc)
	}
	if err := loop(ctx, c, conc, warm, nil); err != nil {
		return run, fmt.Errorf("warm-up: %w", err)
	}
	loadCtx, stop := context.WithCancel(ctx)
	defer stop()
	type outcome struct {
		r   loadResult
		err error
	}
	load := make(chan outcome, 1)
	go func() {
		// Bounded: the profiles end it long before.
		r, err := runLoad(loadCtx, c, conc, 0, 2*window+time.Minute, tree)
		load <- outcome{r, err}
	}()
	secs := strconv.Itoa(int(window / time.Second))
	fetches := map[string]string{run.CPUFile: admin + "/debug/pprof/profile?seconds=" + secs}
	if allocs {
		fetches[run.AllocsFile] = admin + "/debug/pprof/allocs?seconds=" + secs
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(fetches))
	for file, url := range fetches {
		wg.Go(func() { errs <- fetchProfile(ctx, url, filepath.Join(dir, file), window) })
	}
	wg.Wait()
	close(errs)
	stop()
	o := <-load
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	if o.err != nil && !errors.Is(o.err, context.Canceled) {
		all = append(all, fmt.Errorf("the load: %w", o.err))
	}
	if o.r.Calls == 0 {
		all = append(all, errors.New("no call was answered while profiling"))
	}
	run.Load = o.r
	return run, errors.Join(all...)
}

// fetchProfile saves what url answers into path.
func fetchProfile(ctx context.Context, url, path string, window time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, window+30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d: %.200s", url, resp.StatusCode, b)
	}
	return os.WriteFile(path, b, 0o644)
}

// summarizeProfiles fills run's tops from its saved profiles.
func summarizeProfiles(ctx context.Context, gw, dir string, run *profileRun) error {
	var err error
	cpu := filepath.Join(dir, run.CPUFile)
	if run.CPU, err = pprofTop(ctx, gw, cpu, "", "ms", false); err != nil {
		return err
	}
	if run.CPUCum, err = pprofTop(ctx, gw, cpu, "", "ms", true); err != nil {
		return err
	}
	if run.AllocsFile == "" {
		return nil
	}
	allocs := filepath.Join(dir, run.AllocsFile)
	if run.AllocBytes, err = pprofTop(ctx, gw, allocs, "alloc_space", "B", false); err != nil {
		return err
	}
	run.AllocCount, err = pprofTop(ctx, gw, allocs, "alloc_objects", "", false)
	return err
}

// pprofTop runs `go tool pprof -top` on a profile (of the binary bin) and
// reads its table: index is the sample type ("" for the profile's
// default), unit the unit values are printed in ("" for a count), cum
// sorts by cumulative value.
func pprofTop(ctx context.Context, bin, profile, index, unit string, cum bool) (profileTop, error) {
	args := []string{"tool", "pprof", "-top", "-nodecount=" + strconv.Itoa(profileNodes)}
	if index != "" {
		args = append(args, "-sample_index="+index)
	}
	if unit != "" {
		args = append(args, "-unit="+unit)
	}
	if cum {
		args = append(args, "-cum")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, bin, profile)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return profileTop{}, fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, stderr.Bytes())
	}
	top, err := parseTop(out, unit)
	if err != nil {
		return top, fmt.Errorf("go tool pprof -top of %s: %w", filepath.Base(profile), err)
	}
	return top, nil
}

// The lines of `go tool pprof -top` that are read: the total, the
// table's heading, and its rows (flat flat% sum% cum cum% name).
var (
	topTotal   = regexp.MustCompile(`(?m)^Showing nodes accounting for \S+, \S+ of (\S+) total`)
	topHeading = regexp.MustCompile(`(?m)^\s*flat\s+flat%\s+sum%\s+cum\s+cum%\s*$`)
	topRow     = regexp.MustCompile(`^\s*(\S+)\s+([\d.]+)%\s+[\d.]+%\s+(\S+)\s+([\d.]+)%\s+(.+?)\s*$`)
)

// parseTop reads pprof's top table, its values in unit ("" for a count).
func parseTop(out []byte, unit string) (profileTop, error) {
	top := profileTop{Unit: unit}
	if unit == "" {
		top.Unit = "count"
	}
	m := topTotal.FindSubmatch(out)
	if m == nil {
		return top, fmt.Errorf("no total in %.300s", out)
	}
	var err error
	if top.Total, err = parseValue(string(m[1]), unit); err != nil {
		return top, err
	}
	loc := topHeading.FindIndex(out)
	if loc == nil {
		return top, fmt.Errorf("no table in %.300s", out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out[loc[1]:])), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		m := topRow.FindStringSubmatch(line)
		if m == nil {
			return top, fmt.Errorf("a row that is not one: %q", line)
		}
		e := profileEntry{Name: m[5]}
		var errs [4]error
		e.Flat, errs[0] = parseValue(m[1], unit)
		e.FlatPct, errs[1] = strconv.ParseFloat(m[2], 64)
		e.Cum, errs[2] = parseValue(m[3], unit)
		e.CumPct, errs[3] = strconv.ParseFloat(m[4], 64)
		if err := errors.Join(errs[:]...); err != nil {
			return top, fmt.Errorf("row %q: %w", line, err)
		}
		top.Entries = append(top.Entries, e)
	}
	return top, nil
}

// parseValue reads a value pprof printed in unit: "12.50ms", "1024B", or
// a count ("" unit), as its measurement package writes them.
func parseValue(s, unit string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, unit), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a value in %q", s, unit)
	}
	return v, nil
}

// perCall is a profile's total spread over the calls its window saw.
func (r profileRun) perCall(total float64) float64 {
	calls := r.Load.rate() * r.Window.Seconds()
	if calls <= 0 {
		return 0
	}
	return total / calls
}

// renderProfiles is the workload's section of the report.
func renderProfiles(r profileResult) []byte {
	var b bytes.Buffer
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("## Where the gateway's CPU and allocations go (pprof)\n\n")
	p("The gateway with `GATEWAY_ADMIN_ADDR` on a second port and its logging at the default level, under the\n")
	p("echo load above, profiled over one window at each concurrency: `/debug/pprof/profile?seconds=N` (CPU)\n")
	p("and `/debug/pprof/allocs?seconds=N` (the allocations made in the same window; sampled, so estimates).\n")
	if r.Dir != "" {
		p("The profiles are in `%s` (`go tool pprof -http=: FILE`). Percentages are of the profile's total;\n", r.Dir)
	} else {
		p("The profiles were not kept (`-pprof DIR` keeps them). Percentages are of the profile's total;\n")
	}
	p("\"flat\" is in the function itself, \"cumulative\" with what it calls. Per call: the total divided by\n")
	p("the calls answered in the window (the profiler's own cost included).\n\n")
	for _, run := range r.Runs {
		secs := run.Window.Seconds()
		p("### Concurrency %d, %.0f s\n\n", run.Conc, secs)
		p("%.0f calls/s while profiled (p50 %s); CPU sampled: %s in %.0f s, about %.0f µs per call",
			run.Load.rate(), round(run.Load.P50), fmtValue(run.CPU.Total, run.CPU.Unit), secs, run.perCall(run.CPU.Total)*1000)
		if run.AllocsFile != "" {
			p("; allocated: %s, about %.0f bytes and %.1f allocations per call", fmtValue(run.AllocBytes.Total, run.AllocBytes.Unit),
				run.perCall(run.AllocBytes.Total), run.perCall(run.AllocCount.Total))
		}
		p(".\n\n")
		topTable(&b, "CPU, by time in the function itself", run.CPU, false)
		topTable(&b, "CPU, by time with what the function calls", run.CPUCum, true)
		if run.AllocsFile != "" {
			topTable(&b, "Allocated bytes, by the function that allocated them", run.AllocBytes, false)
			topTable(&b, "Allocations, by the function that made them", run.AllocCount, false)
		}
	}
	return b.Bytes()
}

// topTable writes one top as a table, its sort key first.
func topTable(b *bytes.Buffer, title string, t profileTop, cum bool) {
	fmt.Fprintf(b, "%s (of %s):\n\n", title, fmtValue(t.Total, t.Unit))
	if cum {
		b.WriteString("| function | cumulative | % | flat | % |\n| --- | --- | --- | --- | --- |\n")
	} else {
		b.WriteString("| function | flat | % | cumulative | % |\n| --- | --- | --- | --- | --- |\n")
	}
	for _, e := range t.Entries {
		first, firstPct, second, secondPct := e.Flat, e.FlatPct, e.Cum, e.CumPct
		if cum {
			first, firstPct, second, secondPct = e.Cum, e.CumPct, e.Flat, e.FlatPct
		}
		fmt.Fprintf(b, "| `%s` | %s | %.1f%% | %s | %.1f%% |\n", cell(e.Name), fmtValue(first, t.Unit), firstPct, fmtValue(second, t.Unit), secondPct)
	}
	b.WriteString("\n")
}

// fmtValue writes a value of a top in its unit, bytes in binary units.
func fmtValue(v float64, unit string) string {
	switch unit {
	case "ms":
		if v >= 1000 {
			return fmt.Sprintf("%.2f s", v/1000)
		}
		return fmt.Sprintf("%.0f ms", v)
	case "B":
		switch {
		case v >= 1<<30:
			return fmt.Sprintf("%.2f GiB", v/(1<<30))
		case v >= 1<<20:
			return fmt.Sprintf("%.1f MiB", v/(1<<20))
		case v >= 1<<10:
			return fmt.Sprintf("%.0f KiB", v/(1<<10))
		}
		return fmt.Sprintf("%.0f B", v)
	}
	return thousands(int64(v))
}
