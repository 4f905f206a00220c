package main

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"strings"
)

// Charts for BENCHMARKS.md: grouped bars and lines, drawn straight to PNG
// so the suite needs no plotting program. Output is a pure function of the
// input: the same results give the same bytes.

// A series is one named line or bar group: a value per x label (NaN: no value).
type series struct {
	name   string
	values []float64
}

// maxSeries is the palette's size: past it colours would repeat and a
// reader could not tell two series apart.
const maxSeries = 8

// seriesColour is the Okabe-Ito palette, which readers with the common
// colour-vision deficiencies can still tell apart. The colours that are
// weakest on white (yellow, black) come last.
func seriesColour(i int) color.RGBA {
	switch i % maxSeries {
	case 0:
		return color.RGBA{0x00, 0x72, 0xb2, 0xff} // blue
	case 1:
		return color.RGBA{0xe6, 0x9f, 0x00, 0xff} // orange
	case 2:
		return color.RGBA{0x00, 0x9e, 0x73, 0xff} // bluish green
	case 3:
		return color.RGBA{0xd5, 0x5e, 0x00, 0xff} // vermillion
	case 4:
		return color.RGBA{0xcc, 0x79, 0xa7, 0xff} // reddish purple
	case 5:
		return color.RGBA{0x56, 0xb4, 0xe9, 0xff} // sky blue
	case 6:
		return color.RGBA{0xf0, 0xe4, 0x42, 0xff} // yellow
	default:
		return color.RGBA{0x00, 0x00, 0x00, 0xff} // black
	}
}

// A chart is a drawn canvas and where its plot area ended up.
type chart struct {
	*canvas
	plot  image.Rectangle // the data area: bars stand on its bottom edge
	y     yScale
	empty bool // nothing to draw: the chart says so
}

// barChart draws grouped bars: one group per label on the x axis, one bar
// per series in each group, each bar's value printed above it. The y axis
// starts at 0 and ends at a rounded value; with logScale, and when the
// values span more than 100x, it is logarithmic instead and its label says
// so. Values that are NaN or infinite are skipped and listed under the
// chart; a negative value is an error (the suite measures times, rates and
// sizes).
func barChart(path, title, unit string, labels []string, ss []series, logScale bool) error {
	c, err := renderBars(title, unit, labels, ss, logScale)
	if err != nil {
		return fmt.Errorf("bar chart %q: %w", title, err)
	}
	return c.writePNG(path)
}

// lineChart draws one line per series over numeric x values, with a
// marker of its own at each point. With logX the x axis is log2 (for
// concurrency 1, 16, 64, 256). A line breaks where a value is missing.
func lineChart(path, title, xLabel, unit string, xs []float64, ss []series, logX bool) error {
	c, err := renderLines(title, xLabel, unit, xs, ss, logX)
	if err != nil {
		return fmt.Errorf("line chart %q: %w", title, err)
	}
	return c.writePNG(path)
}

// check refuses series that cannot be drawn and names the values that
// will be skipped; at names the i-th x position.
func check(n int, ss []series, at func(int) string) ([]string, error) {
	if len(ss) > maxSeries {
		return nil, fmt.Errorf("%d series: at most %d have colours of their own", len(ss), maxSeries)
	}
	var skipped []string
	for _, s := range ss {
		if len(s.values) != n {
			return nil, fmt.Errorf("series %q has %d values for %d x positions", s.name, len(s.values), n)
		}
		for i, v := range s.values {
			switch {
			case math.IsNaN(v):
				skipped = append(skipped, fmt.Sprintf("%s at %s (no value)", s.name, at(i)))
			case math.IsInf(v, 0):
				skipped = append(skipped, fmt.Sprintf("%s at %s (not finite)", s.name, at(i)))
			case v < 0:
				return nil, fmt.Errorf("series %q at %s: negative value %g", s.name, at(i), v)
			}
		}
	}
	return skipped, nil
}

// valueRange is the smallest positive and the largest finite value; 0
// for either when there is none.
func valueRange(ss []series) (lo, hi float64) {
	for _, s := range ss {
		for _, v := range s.values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			hi = max(hi, v)
			if v > 0 && (lo == 0 || v < lo) {
				lo = v
			}
		}
	}
	return lo, hi
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// startChart checks the series against n x positions (at names one),
// and draws the canvas and title; a chart with nothing to show is done
// then (empty, saying so).
func startChart(title string, n int, ss []series, at func(int) string) (c *chart, top int, skipped []string, err error) {
	if skipped, err = check(n, ss, at); err != nil {
		return nil, 0, nil, err
	}
	cv, err := newCanvas()
	if err != nil {
		return nil, 0, nil, err
	}
	c = &chart{canvas: cv}
	top = c.heading(title)
	if len(ss) == 0 || n == 0 {
		c.noData()
		c.empty = true
	}
	return c, top, skipped, nil
}

func renderBars(title, unit string, labels []string, ss []series, logScale bool) (*chart, error) {
	c, top, skipped, err := startChart(title, len(labels), ss, func(i int) string { return labels[i] })
	if err != nil || c.empty {
		return c, err
	}
	top += c.legend(ss, top, 12, func(i, x, y, h int) {
		c.fill(image.Rect(x, y+(h-11)/2, x+11, y+(h-11)/2+11), seriesColour(i))
	})

	lo, hi := valueRange(ss)
	c.y = linearY(hi)
	axis := unit
	if logScale && lo > 0 && hi/lo > 100 {
		c.y = logY(lo, hi)
		axis += " (log scale)"
	}
	left := c.leftMargin()
	plotW := chartW - 20 - left
	group := float64(plotW) / float64(len(labels))
	inner := min(group*0.8, 90*float64(len(ss)))
	slot := inner / float64(len(ss))

	// Each value goes above its bar, within the bar's slot so it cannot
	// meet its neighbours': level when every value fits the slot, turned
	// up when not, left out when not even that fits.
	values := make([][]string, len(ss))
	widest := 0
	for k, s := range ss {
		for _, v := range s.values {
			t := "n/a"
			if finite(v) {
				t = short(v, 2)
			}
			values[k] = append(values[k], t)
			widest = max(widest, textWidth(c.small, t))
		}
	}
	lh := lineHeight(c.small)
	const gap = 3
	headroom := 0
	up := widest > int(slot)-2
	switch {
	case !up:
		headroom = lh + gap
	case lh <= int(slot)-1:
		headroom = widest + gap
	default:
		values = nil
	}

	xLines := make([][]string, len(labels))
	nLines := 0
	for i, l := range labels {
		xLines[i] = wrap(c.body, l, int(group)-6, 3)
		nLines = max(nLines, len(xLines[i]))
	}
	bottom := 10 + 6 + nLines*lineHeight(c.body)
	if len(skipped) > 0 {
		bottom += lh + 4
	}
	c.plot = image.Rect(left, top+headroom+4, chartW-20, chartH-bottom)

	c.yAxis(axis)
	for i := range labels {
		gx := float64(c.plot.Min.X) + group*float64(i)
		for k, s := range ss {
			x0 := gx + (group-inner)/2 + slot*float64(k) + slot*0.07
			x1 := x0 + slot*0.86
			bx0, bx1 := int(math.Round(x0)), max(int(math.Round(x1)), int(math.Round(x0))+1)
			barTop := c.plot.Max.Y - c.height(s.values[i])
			c.fill(image.Rect(bx0, barTop, bx1, c.plot.Max.Y), seriesColour(k))
			if values == nil {
				continue
			}
			cx := (bx0 + bx1) / 2
			if t := values[k][i]; up {
				c.textUp(c.small, t, cx-lh/2, barTop-gap-textWidth(c.small, t), inkText)
			} else {
				c.textCentered(c.small, t, cx, barTop-gap-lh, inkText)
			}
		}
		for j, line := range xLines[i] {
			c.textCentered(c.body, line, int(gx+group/2), c.plot.Max.Y+6+j*lineHeight(c.body), inkText)
		}
	}
	c.axes()
	c.footnote(skipped)
	return c, nil
}

func renderLines(title, xLabel, unit string, xs []float64, ss []series, logX bool) (*chart, error) {
	for i, x := range xs {
		switch {
		case !finite(x):
			return nil, fmt.Errorf("x value %g is not finite", x)
		case logX && x <= 0:
			return nil, fmt.Errorf("x value %g cannot go on a log axis", x)
		case i > 0 && x <= xs[i-1]:
			return nil, fmt.Errorf("x values must increase: %g after %g", x, xs[i-1])
		}
	}
	c, top, skipped, err := startChart(title, len(xs), ss, func(i int) string {
		return strings.TrimSpace(xLabel + " " + xTick(xs[i]))
	})
	if err != nil || c.empty {
		return c, err
	}
	top += c.legend(ss, top, 26, func(i, x, y, h int) {
		mid := float64(y) + float64(h)/2
		c.polyline([]point{{float64(x), mid}, {float64(x + 26), mid}}, 2.5, seriesColour(i))
		c.drawMarker(i, point{float64(x) + 13, mid}, seriesColour(i))
	})
	_, hi := valueRange(ss)
	c.y = linearY(hi)
	left := c.leftMargin()
	lh := lineHeight(c.body)
	bottom := 10 + 6 + lh
	if xLabel != "" {
		bottom += lh + 4
	}
	if len(skipped) > 0 {
		bottom += lineHeight(c.small) + 4
	}
	c.plot = image.Rect(left, top+10, chartW-20, chartH-bottom)
	c.yAxis(unit)

	px := c.xMap(xs, logX)
	lastRight := math.MinInt
	for _, x := range xs {
		t := xTick(x)
		w := textWidth(c.body, t)
		cx := int(math.Round(px(x)))
		if cx-w/2 < lastRight+8 {
			continue // its neighbour's label took the place
		}
		c.fill(image.Rect(cx, c.plot.Min.Y, cx+1, c.plot.Max.Y), inkMinor)
		c.fill(image.Rect(cx, c.plot.Max.Y, cx+1, c.plot.Max.Y+4), inkAxis)
		c.textCentered(c.body, t, cx, c.plot.Max.Y+6, inkText)
		lastRight = cx - w/2 + w
	}
	c.axes()

	py := func(v float64) float64 { return float64(c.plot.Max.Y) - c.y.frac(v)*float64(c.plot.Dy()) }
	for k, s := range ss {
		var run []point
		for i := range len(s.values) + 1 {
			if i < len(s.values) && finite(s.values[i]) {
				run = append(run, point{px(xs[i]), py(s.values[i])})
				continue
			}
			if len(run) > 1 {
				c.polyline(run, 2.5, seriesColour(k))
			}
			run = run[:0]
		}
	}
	for k, s := range ss {
		for i, v := range s.values {
			if finite(v) {
				c.drawMarker(k, point{px(xs[i]), py(v)}, seriesColour(k))
			}
		}
	}
	c.textCentered(c.body, shorten(c.body, xLabel, c.plot.Dx()), (c.plot.Min.X+c.plot.Max.X)/2, c.plot.Max.Y+6+lh+4, inkText)
	c.footnote(skipped)
	return c, nil
}

// xMap places x values across the plot, inset so the end markers and
// tick labels stay inside it.
func (c *chart) xMap(xs []float64, logX bool) func(float64) float64 {
	const inset = 18
	f := func(x float64) float64 { return x }
	if logX {
		f = math.Log2
	}
	lo, hi := f(xs[0]), f(xs[len(xs)-1])
	w := float64(c.plot.Dx() - 2*inset)
	return func(x float64) float64 {
		t := 0.5
		if hi > lo {
			t = (f(x) - lo) / (hi - lo)
		}
		return float64(c.plot.Min.X+inset) + t*w
	}
}

// heading draws the title and returns where the rest may start.
func (c *chart) heading(title string) int {
	const top = 10
	title = shorten(c.big, title, chartW-20)
	if title == "" {
		return top
	}
	c.textCentered(c.big, title, chartW/2, top, inkTitle)
	return top + lineHeight(c.big) + 8
}

func (c *chart) noData() {
	c.textCentered(c.body, "no data", chartW/2, chartH/2, inkNote)
}

// legend lays the series' names out in centred rows under the title,
// each after a swatch sw pixels wide drawn by swatch, and returns the
// rows' height.
func (c *chart) legend(ss []series, top, sw int, swatch func(i, x, y, h int)) int {
	const gap, pad = 22, 6
	lh := lineHeight(c.body)
	type item struct {
		name string
		w    int
	}
	var rows [][]item
	rowW := []int{}
	for _, s := range ss {
		name := shorten(c.body, s.name, 260)
		it := item{name, sw + pad + textWidth(c.body, name)}
		if n := len(rows); n == 0 || rowW[n-1]+gap+it.w > chartW-40 {
			rows = append(rows, nil)
			rowW = append(rowW, -gap)
		}
		rows[len(rows)-1] = append(rows[len(rows)-1], it)
		rowW[len(rows)-1] += gap + it.w
	}
	i := 0
	for r, row := range rows {
		x := (chartW - rowW[r]) / 2
		y := top + r*(lh+4)
		for _, it := range row {
			swatch(i, x, y, lh)
			c.text(c.body, it.name, x+sw+pad, y, inkText)
			x += it.w + gap
			i++
		}
	}
	return len(rows)*(lh+4) + 8
}

// leftMargin is the room the y axis's label and tick labels need.
func (c *chart) leftMargin() int {
	w := 0
	for _, t := range c.y.ticks {
		w = max(w, textWidth(c.body, short(t, 3)))
	}
	return 12 + lineHeight(c.body) + 10 + w + 8
}

// yAxis draws the gridlines, the tick labels and the axis's label.
func (c *chart) yAxis(label string) {
	p := c.plot
	for _, v := range c.y.minor {
		c.fill(image.Rect(p.Min.X, p.Max.Y-c.height(v), p.Max.X, p.Max.Y-c.height(v)+1), inkMinor)
	}
	lh := lineHeight(c.body)
	lastTop := math.MaxInt
	for _, v := range c.y.ticks {
		y := p.Max.Y - c.height(v)
		c.fill(image.Rect(p.Min.X, y, p.Max.X, y+1), inkGrid)
		t := short(v, 3)
		if y+lh/2 > lastTop {
			continue // too close to the one below
		}
		c.text(c.body, t, p.Min.X-8-textWidth(c.body, t), y-lh/2, inkText)
		lastTop = y - lh/2
	}
	label = shorten(c.body, label, p.Dy())
	c.textUp(c.body, label, 12, p.Min.Y+(p.Dy()-textWidth(c.body, label))/2, inkText)
}

// axes draws the x axis at the plot's foot and the y axis at its left.
func (c *chart) axes() {
	p := c.plot
	c.fill(image.Rect(p.Min.X-1, p.Max.Y, p.Max.X, p.Max.Y+1), inkAxis)
	c.fill(image.Rect(p.Min.X-1, p.Min.Y, p.Min.X, p.Max.Y+1), inkAxis)
}

// footnote lists the values that were not drawn.
func (c *chart) footnote(skipped []string) {
	if len(skipped) == 0 {
		return
	}
	note := shorten(c.small, "Not drawn: "+strings.Join(skipped, "; "), chartW-20)
	c.text(c.small, note, 10, chartH-6-lineHeight(c.small), inkNote)
}

// height is how many pixels above the plot's foot v reaches: 0 for no
// value or zero, at least 1 for any positive value however small.
func (c *chart) height(v float64) int {
	if !finite(v) || v <= 0 {
		return 0
	}
	h := int(math.Round(c.y.frac(v) * float64(c.plot.Dy())))
	return max(h, 1)
}
