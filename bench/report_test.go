package main

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// A median of an even count is the mean of the two middle values, not the
// upper one; of an odd count, the middle one.
func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{1, 9}, 5},
		{[]float64{9, 1, 5}, 5},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if got := median([]time.Duration{time.Second, 3 * time.Second}); got != 2*time.Second {
		t.Errorf("median of 1s and 3s = %v, want 2s", got)
	}
	if got, want := median([]int64{1<<62 + 2, 1<<62 + 4}), int64(1<<62+3); got != want {
		t.Errorf("median near the int64 limit = %d, want %d", got, want)
	}
}

// The report's header gives the run's flags, and marks those not at
// their defaults.
func TestFlagsInReport(t *testing.T) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	defineFlags(fs, &o)
	if err := fs.Parse([]string{"-runs", "1", "-duration", "2s", "-targets", "gateway", "-out", "x.md"}); err != nil {
		t.Fatal(err)
	}
	head := string(render(results{Flags: flagSettings(o)}, nil, nil, chartSet{}))
	head, _, _ = strings.Cut(head, "\n\n\n")
	for _, want := range []string{"**`-runs=1`** (default 3)", "**`-duration=2s`** (default 5s)", "**`-targets=gateway`** (default \"\")",
		"`-warm=1s`,", "`-conc=1,16,64,256`,", "`-streams=true`,", "`-scale=true`,", "`-big-calls=5`,", "(in bold, those not at their defaults)"} {
		if !strings.Contains(head, want) {
			t.Errorf("the report's header lacks %q:\n%s", want, head)
		}
	}
	if strings.Contains(head, "-out") {
		t.Errorf("the header names where the report went:\n%s", head)
	}
	var d options
	defineFlags(flag.NewFlagSet("bench", flag.ContinueOnError), &d)
	if got := renderFlags(flagSettings(d)); !strings.HasSuffix(got, "(all at their defaults)") || strings.Contains(got, "**") {
		t.Errorf("defaults: %s", got)
	}
}

// The charts an earlier run drew, and this one does not, are removed from
// the directory; files the suite does not draw stay.
func TestDrawAllRemovesStaleCharts(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"workers.png", "big-time.png", "streams.png", "mine.png"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res := results{Load: map[string][]loadResult{"gateway": {{Conc: 1, Calls: 100, Elapsed: time.Second, P50: time.Millisecond, P99: 2 * time.Millisecond, CPU: 0.01, OwnCPU: 0.005}}},
		RSS: map[string]int64{"gateway": 20 << 20}}
	ch, err := drawAll(dir, "charts", res, []int{1}, []target{{name: "gateway"}})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"cpu.png", "latency.png", "memory.png", "mine.png", "throughput.png"}; !slices.Equal(left, want) {
		t.Errorf("the directory holds %q, want %q", left, want)
	}
	if ch.streams != "" || ch.big != "" || ch.workers != "" || !strings.Contains(ch.echo, "charts/throughput.png") {
		t.Errorf("charts: %+v", ch)
	}
}
