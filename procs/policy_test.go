package procs

import (
	"fmt"
	"testing"
	"time"
)

// tick is one tick's wake-ups, of which held were held up.
type tick struct{ woken, held uint64 }

var (
	idle    = tick{0, 0}
	light   = tick{250, 2}   // one at a time: hardly anyone waits
	crowded = tick{500, 120} // a quarter waited: one thread is too few
	lateOne = tick{4, 4}     // a process woken a few times, late: not a load
	mild    = tick{500, 9}   // with many threads: a few wait, under 2% but not none
)

// run feeds the policy ticks 50ms apart from start and returns the moves
// it made, as "tick:move".
func run(p *policy, start time.Time, ticks ...tick) []string {
	var moves []string
	for i, t := range ticks {
		switch p.observe(start.Add(time.Duration(i+1)*50*time.Millisecond), t.woken, t.held) {
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
