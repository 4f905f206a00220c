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

// on is t in a tick whose spare CPU was as given.
func on(t tick, cpu spareCPU) tick {
	t.cpu = cpu
	return t
}

// run feeds the policy ticks 50ms apart from start and returns the moves
// it made, as "tick:move".
func run(p *policy, start time.Time, ticks ...tick) []string {
	var moves []string
	for i, t := range ticks {
		if m := p.observe(start.Add(time.Duration(i+1)*50*time.Millisecond), t); m != stay {
			moves = append(moves, fmt.Sprintf("%d:%v", i, m))
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

// While no CPU is spare, goroutines that wait on one thread are kept
// there: a second thread would find no CPU to run on. Unread, the CPUs
// are read over the next ticks before anything moves.
func TestPolicyKeepsOneThreadWhenNoCPUIsSpare(t *testing.T) {
	t.Parallel()
	p := newTestPolicy()
	ticks := append(repeat(on(crowded, busy), 3), on(hogged, busy), on(crowded, unread), on(light, busy))
	ticks = append(ticks, on(crowded, spare)) // 6: many
	if got, want := fmt.Sprint(run(p, time.Unix(0, 0), ticks...)), "[0:kept 1:kept 2:kept 3:kept 6:many]"; got != want {
		t.Errorf("moves %s, want %s", got, want)
	}
}

// With many threads, once no CPU has been spare for the settle time, one
// thread is tried even though goroutines still wait; if a CPU is spare
// again at once, many come back and the next try waits twice as long.
func TestPolicyLeavesManyWhenNoCPUIsSpare(t *testing.T) {
	t.Parallel()
	p := newTestPolicy()
	ticks := []tick{crowded}                                // 0: many
	ticks = append(ticks, repeat(on(crowded, busy), 5)...)  // 1-5
	ticks = append(ticks, crowded)                          // a CPU spare: the count starts again
	ticks = append(ticks, repeat(on(crowded, busy), 11)...) // 7-17: busy from 7, 500ms later is 17
	ticks = append(ticks, on(crowded, busy), crowded)       // 18 kept, 19: many, too soon
	ticks = append(ticks, repeat(on(crowded, busy), 21)...) // 20-40: the next try after 1s, at 40
	if got, want := fmt.Sprint(run(p, time.Unix(0, 0), ticks...)), "[0:many 17:one-busy 18:kept 19:many 40:one-busy]"; got != want {
		t.Errorf("moves %s, want %s", got, want)
	}
}

// Goroutines ready to run by the hundred take many threads, spare CPU or
// not, and keep them.
func TestPolicyTakesManyForADeepQueue(t *testing.T) {
	t.Parallel()
	p := newTestPolicy()
	deep := on(tick{woken: 100, held: 1, runnable: deepQueue}, busy)
	ticks := []tick{on(crowded, busy), deep}                                              // 1: many
	ticks = append(ticks, repeat(on(crowded, busy), 9)...)                                // 2-10
	ticks = append(ticks, deep)                                                           // 11: the count starts again
	ticks = append(ticks, repeat(on(crowded, busy), 11)...)                               // 12-22: one at 22
	ticks = append(ticks, on(tick{woken: 500, held: 120, runnable: deepQueue - 1}, busy)) // shallower: kept at one
	if got, want := fmt.Sprint(run(p, time.Unix(0, 0), ticks...)), "[0:kept 1:many 22:one-busy 23:kept]"; got != want {
		t.Errorf("moves %s, want %s", got, want)
	}
}
