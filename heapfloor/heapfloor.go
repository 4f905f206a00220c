// Package heapfloor keeps the garbage collector from running more often
// than a heap of a given size needs.
//
// The gateway's live heap is small, a few MiB with dozens of calls in
// flight, next to what its calls allocate, about 10 KiB each. At the
// runtime's own pace (GOGC=100: a collection each time the heap doubles,
// and none before 4 MiB) that is dozens of collections a second under
// load, and each costs the marking, write barriers on every goroutine
// while it marks, and pages handed back to the system only to be faulted
// in again. A floor under the heap's goal spaces them out. Once the live
// heap is large beside the floor (thousands of streams open, a large
// result) the runtime's own goal is above it, and the runtime's pace
// holds.
//
// Once a collection's sweep is done, a cleanup (runtime.AddCleanup) on an
// object made for it reads what the collection found live and sets the
// collector's percent (debug.SetGCPercent) that puts the next goal at the
// floor, never below the percent the runtime had. Until then the percent
// the last cleanup set holds: a live heap that grows fast from small may
// get one goal up to five times itself rather than twice (the percent is
// at most 400 with the floor at 16 MiB), and the next cleanup brings the
// runtime's pace back. A memory limit (GOMEMLIMIT) still holds: near it
// the collector runs, floor or not.
package heapfloor

import (
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Options tune Start.
type Options struct {
	Floor  uint64       // the least heap goal, in bytes
	Logger *slog.Logger // nil: slog.Default()

	// The tests': adjusted is told of each percent set, at each
	// collection, with the count of collections ended when the heap was
	// read for it; collected, of each cleanup once it is done, the floor
	// stopped or not; stopping, as the floor stops. All three are called
	// with the floor's lock held, so a test can tell what came after the
	// stop from what came before it.
	adjusted  func(percent int, cycles uint64)
	collected func()
	stopping  func()
}

// runtimeHeapMinimum is the runtime's least goal at GOGC=100, which it
// scales with the percent (runtime/mgcpacer.go, defaultHeapMinimum; 512
// KiB with GOEXPERIMENT=heapminimum512kib, where the goal then falls
// short of the floor while the heap is very small): a percent above
// floor/runtimeHeapMinimum×100 would raise the goal past the floor on its
// own.
const runtimeHeapMinimum = 4 << 20

// maxFloor bounds the floor (1 TiB), so that the arithmetic of percentFor
// cannot overflow.
const maxFloor = 1 << 40

// The runtime's metrics read after each collection, in the order of
// floor.samples.
const (
	gogcMetric  = "/gc/gogc:percent"
	liveMetric  = "/gc/heap/live:bytes"    // what the last collection marked
	stackMetric = "/gc/scan/stack:bytes"   // the stacks it scanned
	globMetric  = "/gc/scan/globals:bytes" // the globals it scans
	cycleMetric = "/gc/cycles/total:gc-cycles"
)

type floor struct {
	bytes     uint64
	base      int // the runtime's percent when Start began (GOGC, or 100)
	adjusted  func(int, uint64)
	collected func()
	stopping  func()

	mu      sync.Mutex // a cleanup runs on a goroutine of the runtime's, beside stop
	stopped bool
	set     int // the percent set last
	samples []metrics.Sample
}

// Start keeps the collector's heap goal at opts.Floor or above, until the
// func it returns is called, which gives the runtime its own percent back.
// It does nothing when the collector is off or always on (GOGC=off, 0),
// or when the runtime's own least goal is as high as the floor.
func Start(opts Options) (stop func()) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.adjusted == nil {
		opts.adjusted = func(int, uint64) {}
	}
	if opts.collected == nil {
		opts.collected = func() {}
	}
	if opts.stopping == nil {
		opts.stopping = func() {}
	}
	f := &floor{bytes: opts.Floor, adjusted: opts.adjusted, collected: opts.collected, stopping: opts.stopping, samples: []metrics.Sample{
		{Name: gogcMetric}, {Name: liveMetric}, {Name: stackMetric}, {Name: globMetric}, {Name: cycleMetric},
	}}
	metrics.Read(f.samples)
	f.base = int(int64(f.samples[0].Value.Uint64()))
	switch {
	case f.base <= 0:
		// Off, or collecting all the time: the operator's choice.
		opts.Logger.Info("the heap floor is not kept: the collector's percent is the operator's", "gc_percent", f.base)
		return func() {}
	case f.bytes <= runtimeHeapMinimum*uint64(f.base)/100:
		opts.Logger.Info("the heap floor is not kept: the runtime's own least goal is as high", "floor_bytes", f.bytes,
			"least_goal_bytes", runtimeHeapMinimum*f.base/100)
		return func() {}
	}
	f.set = f.base
	f.mu.Lock()
	f.adjust()
	f.mu.Unlock()
	f.arm()
	opts.Logger.Info("the collector's heap goal is kept at the floor or above", "floor_bytes", f.bytes, "gc_percent", f.base)
	return f.stop
}

// sentinel is the object whose cleanup runs after a collection. It holds
// a pointer so that it is never one of the tiny allocator's blocks, whose
// cleanups may never run.
type sentinel struct{ _ *sentinel }

// arm makes an object that the next collection finds unreachable: its
// cleanup adjusts the percent and arms the next.
func (f *floor) arm() {
	runtime.AddCleanup(new(sentinel), (*floor).cleanup, f)
}

func (f *floor) cleanup() {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.collected()
	if f.stopped {
		return
	}
	// Armed first: a collection that begins once the percent is set then
	// finds the next object already made, and unreachable. One made while
	// a collection marks lives through it.
	f.arm()
	f.adjust()
}

// adjust sets the percent for what the last collection found. f.mu is held.
func (f *floor) adjust() {
	metrics.Read(f.samples)
	marked := f.samples[1].Value.Uint64()
	roots := marked + f.samples[2].Value.Uint64() + f.samples[3].Value.Uint64()
	p := percentFor(f.bytes, f.base, marked, roots)
	if p != f.set {
		debug.SetGCPercent(p)
		f.set = p
	}
	f.adjusted(p, f.samples[4].Value.Uint64())
}

// percentFor is the percent that puts the runtime's next goal, marked +
// roots×percent/100 and no less than runtimeHeapMinimum×percent/100, at
// floor, or base where that reaches further. roots is what the percent
// applies to: the heap marked, the stacks and the globals.
func percentFor(floor uint64, base int, marked, roots uint64) int {
	floor = min(floor, maxFloor)
	p := floor * 100 / runtimeHeapMinimum
	if roots > 0 {
		if floor <= marked {
			return base
		}
		p = min(p, (floor-marked)*100/roots)
	}
	return max(int(p), base)
}

func (f *floor) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	f.stopped = true
	f.stopping()
	debug.SetGCPercent(f.base)
	f.set = f.base
}
