package procs

import "time"

// move is what a tick decides.
type move int

const (
	stay   move = iota
	toOne       // the load is light: one thread
	toMany      // goroutines waited to run: the runtime's threads
)

func (m move) String() string { return [...]string{"stay", "one", "many"}[m] }

// tick is what the runtime's scheduling latencies say of one tick: the
// wake-ups, how many of them were held up (waited Options.slow or
// longer), and how many waited Options.long or longer. The runtime times
// one wake-up in eight: these are that eighth.
type tick struct{ woken, held, long uint64 }

// minHeld is the fewest goroutines held up in a tick that can make it
// crowded by their share, or keep it from being quiet: on a process woken
// a few times a tick, one late thread is not a load. minLong long waits
// make a tick crowded whatever their share: goroutines that hold a thread
// for milliseconds wake seldom, and those that wait for them, wait long.
const minHeld, minLong = 8, 2

// policy decides, tick by tick, between one thread and the runtime's
// many. It starts with one: the load is light until it shows otherwise.
type policy struct {
	opts       Options
	one        bool
	tried      bool          // one thread has been tried since the start
	since      time.Time     // when the last move was made
	quietSince time.Time     // with many, since when the load has been quiet; zero: it is not
	settle     time.Duration // how long the load must stay quiet before one thread is tried
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
	if p.one {
		if t.long < minLong && (t.held < minHeld || share < p.opts.crowded) {
			return stay
		}
		// One thread is too few. If it was so soon after the load went
		// quiet, the load comes and goes: the next try waits longer.
		if p.tried && now.Sub(p.since) < p.settle {
			p.settle = min(2*p.settle, p.opts.maxSettle)
		} else {
			p.settle = p.opts.settle
		}
		p.one, p.since, p.quietSince = false, now, time.Time{}
		return toMany
	}
	if t.long > 0 || share >= p.opts.quiet && t.held >= minHeld {
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
