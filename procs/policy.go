package procs

import "time"

// move is what a tick decides.
type move int

const (
	stay      move = iota
	toOne          // the load is light: one thread
	toMany         // goroutines waited to run, and a CPU was spare: the runtime's threads
	kept           // goroutines waited to run on one thread, but no CPU was spare for another
	toOneBusy      // with many threads, no CPU has been spare for the settle time: one thread
)

func (m move) String() string { return [...]string{"stay", "one", "many", "kept", "one-busy"}[m] }

// tick is what the runtime's scheduling latencies say of one tick: the
// wake-ups, how many of them were held up (waited Options.slow or
// longer), and how many waited Options.long or longer. The runtime times
// one wake-up in eight: these are that eighth. cpu is whether a CPU was
// spare meanwhile.
type tick struct {
	woken, held, long uint64
	runnable          uint64 // goroutines ready to run as the tick ended
	cpu               spareCPU
}

// minHeld is the fewest goroutines held up in a tick that can make it
// crowded by their share, or keep it from being quiet: on a process woken
// a few times a tick, one late thread is not a load. minLong long waits
// make a tick crowded whatever their share: goroutines that hold a thread
// for milliseconds wake seldom, and those that wait for them, wait long.
const minHeld, minLong = 8, 2

// deepQueue goroutines ready to run take many threads, whether a CPU is
// spare or not. A thread's own run queue holds 256; past that the runtime
// moves half of them to the global queue, which a busy thread looks at
// one turn in 61, so some calls wait tens of milliseconds: echo calls 256
// at a time on one thread had a p90 of 67-112 ms, against 30-45 ms on
// two, with 234 goroutines ready to run at the 90th percentile of ticks
// (61 at 64 at a time, whose latency one thread does not raise).
const deepQueue = 128

// policy decides, tick by tick, between one thread and the runtime's
// many. It starts with one: the load is light until it shows otherwise.
type policy struct {
	opts       Options
	one        bool
	tried      bool          // one thread has been tried since the start
	since      time.Time     // when the last move was made
	quietSince time.Time     // with many, since when the load has been quiet; zero: it is not
	busySince  time.Time     // with many, since when no CPU has been spare; zero: one is
	settle     time.Duration // how long the load must stay quiet, or the CPUs busy, before one thread is tried
}

func newPolicy(opts Options, now time.Time) *policy {
	return &policy{opts: opts, one: true, since: now, settle: opts.settle}
}

// observe takes one tick, and decides.
func (p *policy) observe(now time.Time, t tick) move {
	var share float64
	if t.woken > 0 {
		share = float64(t.held) / float64(t.woken)
	}
	deep := t.runnable >= deepQueue
	if p.one {
		if !deep && t.long < minLong && (t.held < minHeld || share < p.opts.crowded) {
			return stay
		}
		switch {
		case deep:
		case t.cpu == unread:
			return stay // the next ticks say whether a CPU is spare
		case t.cpu == busy:
			return kept
		}
		// One thread is too few. If it was so soon after one was tried,
		// the load comes and goes: the next try waits longer.
		if p.tried && now.Sub(p.since) < p.settle {
			p.settle = min(2*p.settle, p.opts.maxSettle)
		} else {
			p.settle = p.opts.settle
		}
		p.one, p.since, p.quietSince, p.busySince = false, now, time.Time{}, time.Time{}
		return toMany
	}
	if t.cpu != busy || deep {
		// A CPU is spare, or one thread's queue would be too deep.
		p.busySince = time.Time{}
	} else if p.busySince.IsZero() {
		p.busySince = now
	}
	if !p.busySince.IsZero() && now.Sub(p.busySince) >= p.settle {
		// Goroutines may wait still, but for CPUs that the other
		// threads would only take from the child and the neighbours.
		p.one, p.tried, p.since = true, true, now
		return toOneBusy
	}
	if deep || t.long > 0 || share >= p.opts.quiet && t.held >= minHeld {
		p.quietSince = time.Time{}
		return stay
	}
	if p.quietSince.IsZero() {
		p.quietSince = now
	}
	if now.Sub(p.quietSince) < p.settle {
		return stay
	}
	p.one, p.tried, p.since = true, true, now
	return toOne
}
