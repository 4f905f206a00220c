package main

import (
	"math"
	"strconv"
	"strings"
)

// Axes' ranges and ticks, and the short numbers written on charts.

// A yScale maps values to the fraction of the plot's height they reach.
type yScale struct {
	log    bool
	lo, hi float64
	ticks  []float64 // labelled gridlines
	minor  []float64 // unlabelled gridlines between decades
}

func (s yScale) frac(v float64) float64 {
	if s.log {
		return (math.Log10(v) - math.Log10(s.lo)) / (math.Log10(s.hi) - math.Log10(s.lo))
	}
	return v / s.hi
}

// linearY runs from 0 to the first multiple of a round step at or above
// max, in at most five steps.
func linearY(max float64) yScale {
	if !(max > 1e-300) {
		max = 1 // nothing to show but zeros: any range will do
	}
	step := niceStep(max / 5)
	n := int(math.Ceil(max/step - 1e-9))
	s := yScale{hi: float64(n) * step}
	for i := range n + 1 {
		s.ticks = append(s.ticks, float64(i)*step)
	}
	return s
}

// niceStep is the smallest of 1, 2, 2.5 and 5 times a power of ten that
// is at least x.
func niceStep(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 2.5, 5} {
		if x <= m*p*(1+1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// logY runs from the power of ten below lo to the first of 1, 2 and 5
// times a power of ten at or above hi, labelled at each power of ten.
func logY(lo, hi float64) yScale {
	e0 := int(math.Floor(math.Log10(lo)))
	if math.Pow10(e0) >= lo*(1-1e-9) {
		e0-- // the smallest bar must still stand above the foot
	}
	s := yScale{log: true, lo: math.Pow10(e0)}
	e1 := int(math.Floor(math.Log10(hi)))
	s.hi = math.Pow10(e1 + 1)
	for _, m := range []float64{1, 2, 5} {
		if hi <= m*math.Pow10(e1)*(1+1e-9) {
			s.hi = m * math.Pow10(e1)
			break
		}
	}
	for e := e0; math.Pow10(e) <= s.hi*(1+1e-9); e++ {
		s.ticks = append(s.ticks, math.Pow10(e))
		for _, m := range []float64{2, 5} {
			if v := m * math.Pow10(e); v < s.hi*(1-1e-9) {
				s.minor = append(s.minor, v)
			}
		}
	}
	if last := s.ticks[len(s.ticks)-1]; last < s.hi*(1-1e-9) {
		s.ticks = append(s.ticks, s.hi)
	}
	return s
}

// short writes v in few characters: sig significant digits, but never
// fewer than the whole units (350, 0.42, 1.2k, 46k, 3.1M, 4.2e-5).
func short(v float64, sig int) string {
	switch {
	case v == 0:
		return "0"
	case v < 1e-3 || v >= 1e15:
		m, e, _ := strings.Cut(strconv.FormatFloat(v, 'e', sig-1, 64), "e")
		if strings.Contains(m, ".") {
			m = strings.TrimSuffix(strings.TrimRight(m, "0"), ".")
		}
		exp, _ := strconv.Atoi(e)
		return m + "e" + strconv.Itoa(exp)
	}
	const prefixes = " kMGT"
	i := 0
	for i+1 < len(prefixes) && v >= math.Pow10(3*(i+1)) {
		i++
	}
	for {
		x := v / math.Pow10(3*i)
		d := max(0, sig-1-int(math.Floor(math.Log10(x))))
		t := strconv.FormatFloat(x, 'f', d, 64)
		if r, _ := strconv.ParseFloat(t, 64); r >= 1000 && i+1 < len(prefixes) {
			i++ // rounding carried into the next prefix: 999.7 is 1k
			continue
		}
		if strings.Contains(t, ".") {
			t = strings.TrimSuffix(strings.TrimRight(t, "0"), ".")
		}
		return t + strings.TrimSpace(prefixes[i:i+1])
	}
}

// xTick writes an x value whole when it is a modest integer (a
// concurrency of 1024 reads better than 1.02k).
func xTick(x float64) string {
	if x == math.Trunc(x) && math.Abs(x) < 1e5 {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return short(x, 3)
}
