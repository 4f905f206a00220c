package main

import (
	"bytes"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// issueTable is the issue's calls/s at c=1 and c=64 (middles of its ranges).
func issueTable() ([]string, []series) {
	return []string{"calls/s at concurrency 1", "calls/s at concurrency 64"}, []series{
		{"HTTP floor (no child)", []float64{8800, 46000}},
		{"gateway", []float64{2200, 12250}},
		{"mcp-proxy 6.7.19", []float64{530, 985}},
		{"supergateway 4.0.0 --stateful", []float64{790, 800}},
	}
}

// decode reads back a chart written to path.
func decode(t *testing.T, path string) *image.RGBA {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	if got, want := img.Bounds(), image.Rect(0, 0, chartW, chartH); got != want {
		t.Fatalf("%s is %v, want %v", path, got, want)
	}
	rgba := image.NewRGBA(img.Bounds())
	draw.Draw(rgba, rgba.Bounds(), img, image.Point{}, draw.Src)
	return rgba
}

// A bar as found in the pixels: the columns and rows of its colour.
type foundBar struct {
	x0, x1 int // columns holding the colour, [x0, x1)
	top    int // first row of the colour in the middle column
	bottom int // row after the last
}

// findBar looks for ink inside the columns [gx0, gx1) of the plot area
// (the legend's swatches, above it, are not looked at);
// ok is false when none of it is there.
func findBar(img *image.RGBA, plot image.Rectangle, gx0, gx1 int, ink color.RGBA) (b foundBar, ok bool) {
	b.x0, b.x1 = math.MaxInt, math.MinInt
	for x := gx0; x < gx1; x++ {
		for y := plot.Min.Y; y < plot.Max.Y+1; y++ {
			if img.RGBAAt(x, y) == ink {
				b.x0, b.x1 = min(b.x0, x), max(b.x1, x+1)
			}
		}
	}
	if b.x0 == math.MaxInt {
		return b, false
	}
	mid := (b.x0 + b.x1) / 2
	b.top = -1
	for y := plot.Min.Y; y < plot.Max.Y+1; y++ {
		if img.RGBAAt(mid, y) == ink {
			if b.top < 0 {
				b.top = y
			}
			b.bottom = y + 1
		}
	}
	return b, true
}

func TestBarChartDrawsTheIssueTable(t *testing.T) {
	labels, ss := issueTable()
	path := filepath.Join(t.TempDir(), "throughput.png")
	if err := barChart(path, "Echo throughput (higher is better)", "calls/s", labels, ss, false); err != nil {
		t.Fatal(err)
	}
	t.Logf("sample: %s", path)
	img := decode(t, path)
	c, err := renderBars("Echo throughput (higher is better)", "calls/s", labels, ss, false)
	if err != nil {
		t.Fatal(err)
	}
	plot := c.plot
	if plot.Dx() < 600 || plot.Dy() < 300 {
		t.Fatalf("plot area %v is too small for two groups of four", plot)
	}

	group := float64(plot.Dx()) / float64(len(labels))
	tallest := 46000.0
	var tallestBar foundBar
	bars := map[[2]int]foundBar{}
	for i := range labels {
		gx0 := plot.Min.X + int(group*float64(i))
		gx1 := plot.Min.X + int(group*float64(i+1))
		prevRight := gx0
		for k, s := range ss {
			b, ok := findBar(img, plot, gx0, gx1, seriesColour(k))
			if !ok {
				t.Fatalf("group %q: no bar of %s's colour", labels[i], s.name)
			}
			if b.x0 < prevRight {
				t.Errorf("group %q: %s's bar starts at x=%d, left of the previous bar's end %d", labels[i], s.name, b.x0, prevRight)
			}
			prevRight = b.x1
			if b.bottom != plot.Max.Y {
				t.Errorf("group %q: %s's bar ends at row %d, want the plot's foot %d", labels[i], s.name, b.bottom, plot.Max.Y)
			}
			bars[[2]int{i, k}] = b
			if s.values[i] == tallest {
				tallestBar = b
			}
		}
	}
	if limit := plot.Min.Y + plot.Dy()/5; tallestBar.top > limit {
		t.Errorf("tallest bar's top at row %d, want within the plot's top fifth (row <= %d; plot %v)", tallestBar.top, limit, plot)
	}
	// Each bar's value stands just above it, in short form.
	for key, b := range bars {
		want := short(ss[key[1]].values[key[0]], 2)
		found := false
		for _, d := range c.texts {
			found = found || d.s == want && d.box.Max.Y <= b.top && d.box.Max.Y >= b.top-6 &&
				d.box.Min.X < b.x1 && d.box.Max.X > b.x0
		}
		if !found {
			t.Errorf("no %q just above %s's bar at %q (bar top %d, columns %d-%d)", want, ss[key[1]].name, labels[key[0]], b.top, b.x0, b.x1)
		}
	}
	for _, want := range []string{"46k", "8.8k", "530", "50k", "calls/s", "calls/s at concurrency 64", "supergateway 4.0.0 --stateful"} {
		if !slices.ContainsFunc(c.texts, func(d drawnText) bool { return d.s == want }) {
			t.Errorf("no text %q on the chart", want)
		}
	}
	hMax := float64(tallestBar.bottom - tallestBar.top)
	for key, b := range bars {
		v := ss[key[1]].values[key[0]]
		want := v / tallest * hMax
		if got := float64(b.bottom - b.top); math.Abs(got-want) > 2 {
			t.Errorf("%s at %q: bar %v px tall, want %.1f (value %g of %g)", ss[key[1]].name, labels[key[0]], got, want, v, tallest)
		}
	}
}

func TestBarChartZeroDrawsNothingAndMissingIsNoted(t *testing.T) {
	labels := []string{"a", "b", "c"}
	ss := []series{
		{"one", []float64{5, 0, 7}},
		{"two", []float64{3, math.NaN(), math.Inf(1)}},
	}
	c, err := renderBars("zero, missing, infinite", "ms", labels, ss, false)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gaps.png")
	if err := c.writePNG(path); err != nil {
		t.Fatal(err)
	}
	t.Logf("sample: %s", path)
	img := decode(t, path)
	group := float64(c.plot.Dx()) / 3
	in := func(i, k int) bool {
		_, ok := findBar(img, c.plot, c.plot.Min.X+int(group*float64(i)), c.plot.Min.X+int(group*float64(i+1)), seriesColour(k))
		return ok
	}
	for _, tc := range []struct {
		i, k int
		want bool
	}{{0, 0, true}, {0, 1, true}, {1, 0, false}, {1, 1, false}, {2, 0, true}, {2, 1, false}} {
		if got := in(tc.i, tc.k); got != tc.want {
			t.Errorf("bar of %q in group %q drawn: %v, want %v", ss[tc.k].name, labels[tc.i], got, tc.want)
		}
	}
	// The note under the chart starts at its left edge, below the y
	// axis's labels and left of the first x label.
	note := image.Rect(0, chartH-16, 50, chartH)
	if !inked(img, note) {
		t.Error("no note under the chart for the skipped values")
	}
	skipped, err := check(len(labels), ss, func(i int) string { return labels[i] })
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(skipped, "; "), "two at b (no value); two at c (not finite)"; got != want {
		t.Errorf("skipped = %q, want %q", got, want)
	}

	// Without skipped values the strip stays white.
	c, err = renderBars("all there", "ms", labels, ss[:1], false)
	if err != nil {
		t.Fatal(err)
	}
	if inked(c.img, note) {
		t.Error("a note under a chart that skipped nothing")
	}
}

// inked reports whether r holds any pixel darker than light grey.
func inked(img *image.RGBA, r image.Rectangle) bool {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if p := img.RGBAAt(x, y); p.R < 0xc0 && p.G < 0xc0 && p.B < 0xc0 {
				return true
			}
		}
	}
	return false
}

func TestBarChartLogScale(t *testing.T) {
	labels := []string{"p50 c=1", "p99 c=1", "p50 c=256", "p99 c=256"}
	ss := []series{
		{"floor", []float64{0.11, 0.2, 5.5, 9}},
		{"gateway", []float64{0.4, 0.9, 15, 30}},
		{"mcp-proxy", []float64{1.7, 3, 280, 900}},
	}
	c, err := renderBars("Echo latency", "ms", labels, ss, true)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "latency-log.png")
	if err := c.writePNG(path); err != nil {
		t.Fatal(err)
	}
	t.Logf("sample: %s", path)
	if !c.y.log || c.y.lo != 0.1 || c.y.hi != 1000 {
		t.Fatalf("scale = %+v, want log from 0.1 to 1000", c.y)
	}
	if !slices.ContainsFunc(c.texts, func(d drawnText) bool { return d.s == "ms (log scale)" }) {
		t.Error(`the y axis is not labelled "ms (log scale)"`)
	}
	// On a log axis equal ratios are equal heights: 0.11 -> 1.7 and
	// 5.5 -> 85 (not drawn) differ by the same factor; check the drawn
	// heights follow log10(v / 0.1) / 4 of the plot.
	img := decode(t, path)
	group := float64(c.plot.Dx()) / float64(len(labels))
	for i := range labels {
		for k, s := range ss {
			b, ok := findBar(img, c.plot, c.plot.Min.X+int(group*float64(i)), c.plot.Min.X+int(group*float64(i+1)), seriesColour(k))
			if !ok {
				t.Fatalf("no bar for %s at %s", s.name, labels[i])
			}
			want := math.Log10(s.values[i]/0.1) / 4 * float64(c.plot.Dy())
			if got := float64(b.bottom - b.top); math.Abs(got-want) > 1.5 {
				t.Errorf("%s at %s: %v px, want %.1f", s.name, labels[i], got, want)
			}
		}
	}

	// Under 100x a log axis would only hide differences: linear it stays.
	_, narrow := issueTable()
	c, err = renderBars("narrow", "calls/s", []string{"a", "b"}, narrow, true)
	if err != nil {
		t.Fatal(err)
	}
	if c.y.log {
		t.Errorf("values spanning %.0fx drawn on a log axis", 46000/530.0)
	}
}

func TestChartsAreDeterministic(t *testing.T) {
	dir := t.TempDir()
	labels, ss := issueTable()
	render := func(name string, ss []series) []byte {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := barChart(path, "throughput", "calls/s", labels, ss, false); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := render("a.png", ss), render("b.png", ss)
	if !bytes.Equal(a, b) {
		t.Error("two renders of the same bars differ")
	}
	changed := append([]series(nil), ss...)
	changed[1] = series{"gateway", []float64{2200, 13000}}
	if bytes.Equal(a, render("c.png", changed)) {
		t.Error("a different value drew the same bytes")
	}

	xs, ls := latencies()
	line := func(name string) []byte {
		path := filepath.Join(dir, name)
		if err := lineChart(path, "latency", "concurrency", "ms", xs, ls, true); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if !bytes.Equal(line("l1.png"), line("l2.png")) {
		t.Error("two renders of the same lines differ")
	}
}

// latencies is p50 in ms over concurrency, with one point missing.
func latencies() ([]float64, []series) {
	return []float64{1, 16, 64, 256}, []series{
		{"floor", []float64{0.11, 0.9, 2.5, 9}},
		{"gateway", []float64{0.42, 2.4, 8, 30}},
		{"mcp-proxy", []float64{1.7, 17, 70, 280}},
		{"supergateway", []float64{1.1, math.NaN(), 80, 240}},
	}
}

func TestLineChartPutsPointsOnTheirValues(t *testing.T) {
	xs, ss := latencies()
	path := filepath.Join(t.TempDir(), "latency.png")
	if err := lineChart(path, "Echo latency p50 by concurrency", "concurrency", "latency (ms)", xs, ss, true); err != nil {
		t.Fatal(err)
	}
	t.Logf("sample: %s", path)
	img := decode(t, path)
	c, err := renderLines("Echo latency p50 by concurrency", "concurrency", "latency (ms)", xs, ss, true)
	if err != nil {
		t.Fatal(err)
	}
	p := c.plot
	// x: log2, 18 px in from each side; y: 0 at the foot, 300 (the max
	// 280 rounded up to a step of 100) at the top.
	at := func(x, v float64) (int, int) {
		fx := math.Log2(x) / math.Log2(256)
		px := float64(p.Min.X+18) + fx*float64(p.Dx()-36)
		py := float64(p.Max.Y) - v/300*float64(p.Dy())
		return int(px), int(py)
	}
	// covered: a later series' marker, drawn over this one, is near.
	covered := func(k int, x, y int) bool {
		for _, later := range ss[k+1:] {
			for i, v := range later.values {
				if lx, ly := at(xs[i], v); !math.IsNaN(v) && math.Hypot(float64(lx-x), float64(ly-y)) < 14 {
					return true
				}
			}
		}
		return false
	}
	checked := 0
	for k, s := range ss {
		for i, v := range s.values {
			x, y := at(xs[i], v)
			if !math.IsNaN(v) && covered(k, x, y) {
				continue
			}
			checked++
			near := false
			for dy := -1; dy <= 1; dy++ {
				for dx := -1; dx <= 1; dx++ {
					near = near || img.RGBAAt(x+dx, y+dy) == seriesColour(k)
				}
			}
			if math.IsNaN(v) {
				// No marker and no line through the gap: nothing of the
				// colour in a column around the missing point.
				for y := p.Min.Y; y < p.Max.Y; y++ {
					for dx := -3; dx <= 3; dx++ {
						if img.RGBAAt(x+dx, y) == seriesColour(k) {
							t.Fatalf("%s drawn at x=%g where it has no value (pixel %d,%d)", s.name, xs[i], x+dx, y)
						}
					}
				}
				continue
			}
			if !near {
				t.Errorf("%s at x=%g, v=%g: no marker of its colour around pixel (%d,%d)", s.name, xs[i], v, x, y)
			}
		}
	}
	if checked < 10 {
		t.Errorf("only %d of the points could be checked", checked)
	}
}

func TestTextNeverOverlaps(t *testing.T) {
	names := []string{"HTTP floor (bare net/http, no child)", "gateway", "mcp-proxy 6.7.19 from npm", "supergateway 4.0.0 --stateful", "the child alone over stdio, no HTTP", "a sixth series with a name far too long to fit in any legend at all"}
	labels := []string{"echo c=1", "echo at concurrency 16 with a label that is much too long to fit", "c=64", "c=256", "cancel p99 with 1000 streams open", "Supercalifragilisticexpialidocious-and-then-some"}
	var ss []series
	for k, n := range names {
		v := make([]float64, len(labels))
		for i := range v {
			v[i] = float64((k+2)*(i+3)*(k+i+1)*997%98765) + 0.25
		}
		ss = append(ss, series{n, v})
	}
	ss[3].values[2] = 0
	ss[4].values[5] = math.NaN()
	xs := []float64{1, 2, 4, 16, 64, 256}
	dir := t.TempDir()
	charts := map[string]func() (*chart, error){
		"bars": func() (*chart, error) {
			return renderBars("Six series by six labels with a title long enough to need shortening before it reaches the edges of the image", "calls per second", labels, ss, false)
		},
		"bars-log": func() (*chart, error) {
			s := append([]series(nil), ss...)
			s[0] = series{names[0], []float64{0.001, 2, 3, 4, 5, 6e6}}
			return renderBars("log", "ms", labels, s, true)
		},
		"lines": func() (*chart, error) {
			return renderLines("Latency", "concurrency (parallel clients)", "ms", xs, ss, true)
		},
		"lines-crowded": func() (*chart, error) {
			return renderLines("crowded x", "n", "ms", []float64{1000, 1001, 1002, 1003, 1004, 1005}, ss, false)
		},
	}
	for name, render := range charts {
		t.Run(name, func(t *testing.T) {
			c, err := render()
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, name+".png")
			if err := c.writePNG(path); err != nil {
				t.Fatal(err)
			}
			t.Logf("sample: %s", path)
			if len(c.texts) < 20 {
				t.Fatalf("only %d texts drawn", len(c.texts))
			}
			for i, a := range c.texts {
				if !a.box.In(c.img.Bounds()) {
					t.Errorf("%q at %v leaves the image", a.s, a.box)
				}
				for _, b := range c.texts[i+1:] {
					if a.box.Overlaps(b.box) {
						t.Errorf("%q at %v and %q at %v overlap", a.s, a.box, b.s, b.box)
					}
				}
			}
		})
	}
}

func TestEdgeCasesDrawOrRefuse(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tooMany := make([]series, maxSeries+1)
	for i := range tooMany {
		tooMany[i] = series{"s", []float64{1}}
	}
	for _, tc := range []struct {
		name    string
		labels  []string
		ss      []series
		log     bool
		wantErr string
		inked   bool // some bar drawn
	}{
		{name: "no series", labels: []string{"a"}},
		{name: "no labels"},
		{name: "all zeros", labels: []string{"a", "b"}, ss: []series{{"x", []float64{0, 0}}, {"y", []float64{0, 0}}}},
		{name: "all missing", labels: []string{"a", "b"}, ss: []series{{"x", []float64{nan, inf}}}},
		{name: "one value", labels: []string{"only"}, ss: []series{{"x", []float64{42}}}, inked: true},
		{name: "huge range", labels: []string{"a", "b", "c"}, ss: []series{{"x", []float64{1e-9, 1, 1e12}}}, inked: true},
		{name: "huge range log", labels: []string{"a", "b", "c"}, ss: []series{{"x", []float64{1e-9, 1, 1e12}}}, log: true, inked: true},
		{name: "tiny", labels: []string{"a"}, ss: []series{{"x", []float64{1e-310}}}, log: true, inked: true},
		{name: "negative", labels: []string{"a"}, ss: []series{{"x", []float64{-1}}}, wantErr: "negative"},
		{name: "short series", labels: []string{"a", "b"}, ss: []series{{"x", []float64{1}}}, wantErr: "1 values for 2"},
		{name: "too many series", labels: []string{"a"}, ss: tooMany, wantErr: "at most 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "edge.png")
			err := barChart(path, tc.name, "unit", tc.labels, tc.ss, tc.log)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
				if _, statErr := os.Stat(path); statErr == nil {
					t.Error("a refused chart was written")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			img := decode(t, path)
			drawn := false
			for k := range tc.ss {
				for y := range chartH {
					for x := range chartW {
						// Skip the legend's swatches: bars stand below it.
						if y > 70 && img.RGBAAt(x, y) == seriesColour(k) {
							drawn = true
						}
					}
				}
			}
			if drawn != tc.inked {
				t.Errorf("bars drawn: %v, want %v", drawn, tc.inked)
			}
		})
	}
}

func TestLineChartRefuses(t *testing.T) {
	one := []series{{"x", []float64{1, 2}}}
	for _, tc := range []struct {
		name string
		xs   []float64
		ss   []series
		logX bool
		want string
	}{
		{"x not increasing", []float64{2, 1}, one, false, "must increase"},
		{"x repeated", []float64{2, 2}, one, false, "must increase"},
		{"zero on a log axis", []float64{0, 1}, one, true, "log axis"},
		{"x not finite", []float64{1, math.Inf(1)}, one, false, "not finite"},
		{"negative value", []float64{1, 2}, []series{{"x", []float64{1, -2}}}, false, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := lineChart(filepath.Join(t.TempDir(), "l.png"), "t", "x", "y", tc.xs, tc.ss, tc.logX)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
	// What it can draw, it draws: one point, no series, all missing.
	for name, ss := range map[string][]series{
		"one point":   {{"x", []float64{3}}},
		"no series":   nil,
		"all missing": {{"x", []float64{math.NaN()}}},
	} {
		path := filepath.Join(t.TempDir(), "l.png")
		if err := lineChart(path, name, "x", "y", []float64{8}, ss, true); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		decode(t, path)
	}
}
