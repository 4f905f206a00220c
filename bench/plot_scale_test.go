package main

import (
	"strings"
	"testing"
)

func TestShort(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		sig  int
		want string
	}{
		{0, 2, "0"},
		{350, 2, "350"},
		{0.42, 2, "0.42"},
		{0.4234, 2, "0.42"},
		{8800, 2, "8.8k"},
		{46000, 2, "46k"},
		{1234, 2, "1.2k"},
		{123456, 2, "123k"},
		{999.7, 2, "1k"},
		{9999, 2, "10k"},
		{1234567, 2, "1.2M"},
		{3e9, 2, "3G"},
		{4.2e-5, 2, "4.2e-5"},
		{2e15, 2, "2e15"},
		{12500, 3, "12.5k"},
		{0.25, 3, "0.25"},
		{1000, 3, "1k"},
	} {
		if got := short(tc.v, tc.sig); got != tc.want {
			t.Errorf("short(%g, %d) = %q, want %q", tc.v, tc.sig, got, tc.want)
		}
	}
}

func TestScales(t *testing.T) {
	for _, tc := range []struct {
		max, hi float64
		ticks   int
	}{
		{46000, 50000, 6},
		{280, 300, 4},
		{1.01, 1.25, 6},
		{10001, 12500, 6},
		{0, 1, 6},
	} {
		s := linearY(tc.max)
		if s.hi != tc.hi || len(s.ticks) != tc.ticks || s.ticks[0] != 0 || s.ticks[len(s.ticks)-1] != s.hi {
			t.Errorf("linearY(%g) = %v to %v, ticks %v; want to %v in %d ticks", tc.max, s.lo, s.hi, s.ticks, tc.hi, tc.ticks)
		}
		if tc.max > 0 && tc.max/s.hi < 0.8 {
			t.Errorf("linearY(%g) ends at %v: the tallest bar would fill under 80%%", tc.max, s.hi)
		}
	}
	s := logY(100, 4000)
	if s.lo != 10 || s.hi != 5000 || len(s.ticks) != 4 || s.ticks[3] != 5000 {
		t.Errorf("logY(100, 4000) = %+v, want 10 to 5000 with ticks 10, 100, 1000, 5000", s)
	}
}

func TestWrapAndShorten(t *testing.T) {
	c, err := newCanvas()
	if err != nil {
		t.Fatal(err)
	}
	lines := wrap(c.body, "cancel p99 with 1000 streams open while the others run", 100, 3)
	if len(lines) != 3 || !strings.HasSuffix(lines[2], "…") {
		t.Errorf("wrap gave %q, want three lines, the last shortened", lines)
	}
	for _, l := range lines {
		if w := textWidth(c.body, l); w > 100 {
			t.Errorf("line %q is %d px, over 100", l, w)
		}
	}
	if got := wrap(c.body, "c=64", 100, 3); len(got) != 1 || got[0] != "c=64" {
		t.Errorf("wrap of a short label = %q", got)
	}
	if got := shorten(c.body, "anything", 2); got != "" {
		t.Errorf("shorten to 2 px = %q, want nothing", got)
	}
}
