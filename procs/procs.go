// Package procs sets how many threads run Go code at once (GOMAXPROCS)
// by the load the process sees: one while its work comes a piece at a
// time, the runtime's own number once goroutines wait for a thread.
//
// A gateway's call is a chain of hand-offs (client, handler, child,
// reader, handler, client), each a goroutine woken by another. With more
// than one thread, each wake-up also wakes an idle thread to look for
// work, which on a lightly loaded machine is most of a call's cost: calls
// one at a time take a fifth to a third less CPU and latency on one
// thread. Under parallel load, one thread is a bottleneck, but only where
// a CPU is free to run a second: when the child, the clients or the
// neighbours keep every CPU busy, more threads add wake-ups and switches
// and take CPU from the child (on 2 CPUs with the load client beside it,
// echo calls 16 or 64 at a time took over a quarter less of the gateway's
// CPU each on one thread, with more calls a second and a lower p99).
// Run watches how long goroutines wait to run (the runtime's scheduling
// latencies), how many are ready to run, and whether a CPU was spare
// (/proc/stat, the cgroup's quota), and moves between the two.
package procs

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"time"
)

// Options tune Run.
type Options struct {
	Logger *slog.Logger // nil: slog.Default()

	// The rest are the tests'; zero values are the gateway's.
	tick time.Duration // how often the load is looked at: 50ms
	slow time.Duration // a wait to run from which a goroutine is held up: 200µs
	// long is a wait that a goroutine ready to run meets only when
	// others hold the threads for long stretches (CPU-bound work, with
	// few wake-ups to count): 4ms.
	long time.Duration
	// crowded is the share of a tick's wake-ups held up from which one
	// thread is too few: 2%.
	crowded float64
	// quiet is the share under which a tick with no long wait shows
	// that the runtime's threads are more than the load needs: 0.5%. So
	// does one with fewer than minHeld held up.
	quiet float64
	// settle is how long the load must stay quiet, or the CPUs busy,
	// before one thread is tried again, 1s; it doubles each time a try
	// fails, up to maxSettle, 30s.
	settle, maxSettle time.Duration
	moved             func(move) // told of each move, the first included, and of each kept
	cpu               cpuReader  // nil: the machine's, from /proc and the cgroup
}

func (o *Options) defaults() {
	if o.tick <= 0 {
		o.tick = 50 * time.Millisecond
	}
	if o.slow <= 0 {
		o.slow = 200 * time.Microsecond
	}
	if o.long <= 0 {
		o.long = 4 * time.Millisecond
	}
	if o.crowded <= 0 {
		o.crowded = 0.02
	}
	if o.quiet <= 0 {
		o.quiet = 0.005
	}
	if o.settle <= 0 {
		o.settle = time.Second
	}
	if o.maxSettle < o.settle {
		o.maxSettle = max(30*time.Second, o.settle)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.moved == nil {
		o.moved = func(move) {}
	}
}

// Run governs GOMAXPROCS until ctx ends, and then gives it back to the
// runtime. It starts with one thread. It does nothing when the runtime
// uses one thread anyway as Run starts (a quota that grows later is not
// followed). It is not for a process whose GOMAXPROCS the operator set in
// the environment: the runtime's number it moves to ignores that.
func Run(ctx context.Context, opts Options) {
	opts.defaults()
	if runtime.GOMAXPROCS(0) < 2 {
		return // a CPU, or a quota of one, at the start: nothing to govern
	}
	w, ok := newWaits(opts.slow, opts.long)
	if !ok {
		// Blind to the load, one thread could be kept under any of it.
		opts.Logger.Warn("the runtime gives no scheduling latencies: threads are left to it", "metric", latencies)
		return
	}
	if opts.cpu == nil {
		opts.cpu = machineCPU(ctx, opts.Logger)
	}
	defer runtime.SetDefaultGOMAXPROCS()
	opts.Logger.Info("one thread runs Go code while the load is light", "up_to", runtime.GOMAXPROCS(1))
	opts.moved(toOne)
	p := newPolicy(opts, time.Now())
	ticker := time.NewTicker(opts.tick)
	defer ticker.Stop()
	saidKept := false  // once per load kept on one thread
	saidBlind := false // once: the log says the CPUs cannot be read
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticker.C:
			t := w.read()
			if p.one && t.woken < minHeld && t.long == 0 {
				opts.cpu.forget() // an idle process: no decision to make
				t.cpu = unread
				saidKept = false
			} else {
				var err error
				// The time now, not the tick's: under the loads that
				// matter here the tick is read late.
				if t.cpu, err = opts.cpu.read(time.Now(), !p.one); err != nil && !saidBlind {
					saidBlind = true
					opts.Logger.Warn(blind, "err", err)
				}
			}
			m := p.observe(now, t)
			switch m {
			case toOne, toOneBusy:
				runtime.GOMAXPROCS(1)
				why := "one thread runs Go code: the load is light"
				if m == toOneBusy {
					why = "one thread runs Go code: no CPU was spare for the others"
				}
				opts.Logger.Debug(why, "next_try_after", p.settle)
				saidKept = false
			case toMany:
				// The runtime's own number, which it keeps up to date with
				// the CPUs and the container's quota from then on.
				runtime.SetDefaultGOMAXPROCS()
				opts.Logger.Debug("threads run Go code in parallel: goroutines waited to run",
					"gomaxprocs", runtime.GOMAXPROCS(0), "woken", t.woken, "held_up", t.held, "held_long", t.long, "runnable", t.runnable)
			case kept:
				if !saidKept {
					saidKept = true
					opts.Logger.Debug("one thread runs Go code still: goroutines wait, but no CPU is spare",
						"woken", t.woken, "held_up", t.held, "held_long", t.long)
				}
			}
			if m != stay && m != kept {
				// Readings taken with the other number of threads say
				// nothing of this one.
				opts.cpu.forget()
			}
			if m != stay {
				opts.moved(m)
			}
		}
	}
}

// blind is what the log says when the CPUs cannot be read.
const blind = "the CPUs' idle time cannot be read: threads are taken whenever goroutines wait"

// machineCPU reads this machine's CPUs, or, where they cannot be read,
// none: threads are then taken whenever goroutines wait, as if a CPU
// were always spare.
func machineCPU(ctx context.Context, log *slog.Logger) cpuReader {
	c, err := newCPUTime("/")
	if err == nil {
		return c
	}
	level := slog.LevelWarn
	if runtime.GOOS != "linux" {
		level = slog.LevelInfo // no /proc to read
	}
	log.Log(ctx, level, blind, "err", err)
	return blindCPU{}
}

// blindCPU is a machine that does not say whether a CPU is spare.
type blindCPU struct{}

func (blindCPU) read(time.Time, bool) (spareCPU, error) { return spare, nil }
func (blindCPU) forget()                                {}

// waits reads, from the runtime's scheduling latencies, how goroutines
// waited to run since the last read.
type waits struct {
	sample     []metrics.Sample
	slow, long float64 // seconds
	last       []uint64
}

const (
	latencies = "/sched/latencies:seconds"
	runnable  = "/sched/goroutines/runnable:goroutines"
)

// newWaits starts reading; ok is false when the runtime has no such
// metric.
func newWaits(slow, long time.Duration) (w *waits, ok bool) {
	w = &waits{sample: []metrics.Sample{{Name: latencies}, {Name: runnable}}, slow: slow.Seconds(), long: long.Seconds()}
	metrics.Read(w.sample)
	if w.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil, false
	}
	w.read()
	return w, true
}

func (w *waits) read() tick {
	metrics.Read(w.sample)
	h := w.sample[0].Value.Float64Histogram()
	if len(w.last) != len(h.Counts) {
		w.last = make([]uint64, len(h.Counts))
	}
	var t tick
	if r := w.sample[1].Value; r.Kind() == metrics.KindUint64 {
		t.runnable = r.Uint64()
	}
	for i, n := range h.Counts {
		d := n - w.last[i]
		w.last[i] = n
		t.woken += d
		// Bucket i holds waits from Buckets[i] up to Buckets[i+1].
		if h.Buckets[i] >= w.slow {
			t.held += d
		}
		if h.Buckets[i] >= w.long {
			t.long += d
		}
	}
	return t
}
