package procs

import (
	"fmt"
	"testing"
	"time"
)

var (
	idle    = tick{}
	light   = tick{woken: 250, held: 2}          // one at a time: hardly anyone waits
	crowded = tick{woken: 500, held: 120}        // a quarter waited: one thread is too few
	lateOne = tick{woken: 4, held: 4, long: 1}   // a process woken a few times, late: not a load
	mild    = tick{woken: 500, held: 9}          // with many threads: a few wait, under 2% but not none
	hogged  = tick{woken: 3, held: 3, long: 3}   // goroutines holding the thread for milliseconds: few wake, all wait long
	oneLong = tick{woken: 250, held: 1, long: 1} // with many threads, one long wait: not quiet
)

// run feeds the policy ticks 50ms apart from start and returns the moves
// it made, as "tick:move".
func run(p *policy, start time.Time, ticks ...tick) []string {
	var moves []string
	for i, t := range ticks {
		switch p.observe(start.Add(time.Duration(i+1)*50*time.Millisecond), t) {
		case toOne:
			moves = append(moves, fmt.Sprintf("%d:one", i))
		case toMany:
			moves = append(moves, fmt.Sprintf("%d:many", i))
		}
	}
	return moves
}

func repeat(t tick, n int) []tick {
	ts := make([]tick, n)
	for i := range ts {
		ts[i] = t
	}
	return ts
}

func newTestPolicy() *policy {
	opts := Options{settle: 500 * time.Millisecond, maxSettle: 2 * time.Second}
	opts.defaults()
	return newPolicy(opts, time.Unix(0, 0))
}

// One thread while the load is light; many as soon as goroutines wait
// to run; one again once the load has stayed quiet for the settle time.
func TestPolicyFollowsTheLoad(t *testing.T) {
	t.Parallel()
	p := newTestPolicy()
	ticks := append(repeat(light, 20), repeat(idle, 3)...)
	ticks = append(ticks, lateOne)
	ticks = append(ticks, repeat(crowded, 30)...) // from tick 24
	ticks = append(ticks, repeat(mild, 5)...)     // not quiet with many either
	ticks = append(ticks, repeat(light, 12)...)   // quiet from tick 59: 500ms later is tick 69
	got := fmt.Sprint(run(p, time.Unix(0, 0), ticks...))
	if want := "[24:many 69:one]"; got != want {
		t.Errorf("moves %s, want %s", got, want)
	}
}

// A load that comes back as soon as one thread is tried makes the next
// try wait twice as long, up to MaxSettle; a try that holds resets it.
func TestPolicyBacksOffFromALoadThatComesAndGoes(t *testing.T) {
	t.Parallel()
	p := newTestPolicy()
	var ticks []tick
	var want []string
	at := 0
	add := func(t tick, n int) {
		ticks = append(ticks, repeat(t, n)...)
		at += n
	}
	add(crowded, 1)
	want = append(want, "0:many")
	for _, settle := range []int{10, 20, 40, 40} { // in ticks: 0.5s, 1s, 2s, and the cap
		add(light, settle+1) // quiet for settle: one is tried on the last tick
		want = append(want, fmt.Sprintf("%d:one", at-1))
		add(crowded, 1) // at once too few again
		want = append(want, fmt.Sprintf("%d:many", at-1))
	}
	// A try that holds past the settle time: the next load starts afresh.
	add(light, 41)
	want = append(want, fmt.Sprintf("%d:one", at-1))
	add(light, 60)
	add(crowded, 1)
	want = append(want, fmt.Sprintf("%d:many", at-1))
	add(light, 11)
	want = append(want, fmt.Sprintf("%d:one", at-1))
	if got := fmt.Sprint(run(p, time.Unix(0, 0), ticks...)); got != fmt.Sprint(want) {
		t.Errorf("moves %s\nwant  %s", got, want)
	}
}

// Many threads stay while the load keeps goroutines waiting even with
// them: one is not tried at all.
func TestPolicyKeepsManyUnderParallelLoad(t *testing.T) {
	t.Parallel()
	p := newTestPolicy()
	if got := fmt.Sprint(run(p, time.Unix(0, 0), repeat(crowded, 400)...)); got != "[0:many]" {
		t.Errorf("moves %s, want [0:many]", got)
	}
}

// Goroutines that hold the thread for milliseconds wake too seldom to
// count, but those that wait for them wait long: that is a load too, at
// one thread and at many; a single long wait at one thread is not.
func TestPolicySeesGoroutinesThatHoldTheThread(t *testing.T) {
	t.Parallel()
	p := newTestPolicy()
	ticks := append(repeat(light, 5), lateOne, hogged) // 6: many
	for range 30 {
		ticks = append(ticks, light, light, oneLong) // never quiet for long with many
	}
	ticks = append(ticks, repeat(light, 11)...) // quiet from tick 97: one at 107
	if got, want := fmt.Sprint(run(p, time.Unix(0, 0), ticks...)), "[6:many 107:one]"; got != want {
		t.Errorf("moves %s, want %s", got, want)
	}
}
