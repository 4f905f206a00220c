package main

import (
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
