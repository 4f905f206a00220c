package procs

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// crowd runs n goroutines that each wake every millisecond and hold the
// thread for hold, until the func it returns is called (it waits for
// them). On one thread, each waits for the others.
func crowd(n int, hold time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			t := time.NewTicker(time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
				}
				for end := time.Now().Add(hold); time.Now().Before(end); {
				}
			}
		})
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}

// oneThread sets GOMAXPROCS to 1 for the test.
func oneThread(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// The runtime's own latencies tell the waits apart: a crowd on one thread
// is held up, goroutines that hold the thread for milliseconds are waited
// for long, and a goroutine woken alone is neither, as a rule (a busy
// machine may hold the thread itself up now and then).
func TestWaitsCountTheHeldUp(t *testing.T) {
	oneThread(t)
	w, ok := newWaits(200*time.Microsecond, 4*time.Millisecond)
	if !ok {
		t.Fatalf("the runtime has no %s", latencies)
	}
	// Each runs until the runtime has timed enough of it: one wake-up in
	// eight.
	sum := func(enough func(tick) bool) tick {
		var s tick
		for limit := time.Now().Add(10 * time.Second); !enough(s) && time.Now().Before(limit); {
			<-time.After(10 * time.Millisecond)
			t := w.read()
			s.woken, s.held, s.long = s.woken+t.woken, s.held+t.held, s.long+t.long
		}
		return s
	}
	stop := crowd(8, 300*time.Microsecond)
	crowded := sum(func(s tick) bool { return s.held >= 50 })
	stop()
	share := float64(crowded.held) / float64(crowded.woken)
	if crowded.held < 50 || share < 0.5 {
		t.Fatalf("a crowd on one thread: %d of %d wake-ups held up, want 50 or more and half or more", crowded.held, crowded.woken)
	}
	stop = crowd(3, 10*time.Millisecond)
	hogged := sum(func(s tick) bool { return s.long >= 10 })
	stop()
	if hogged.long < 10 {
		t.Fatalf("goroutines holding the thread for 10ms: %d of %d wake-ups waited long, want 10 or more", hogged.long, hogged.woken)
	}
	w.read()
	var alone tick
	for range 400 {
		<-time.After(100 * time.Microsecond)
		t := w.read()
		alone.woken, alone.held, alone.long = alone.woken+t.woken, alone.held+t.held, alone.long+t.long
	}
	if alone.woken == 0 || float64(alone.held)/float64(alone.woken) > share/2 || alone.long > hogged.long/2 {
		t.Errorf("one goroutine at a time: %d of %d wake-ups held up and %d long, want some woken, under half the crowd's share (%.2f) and under half the long waits of the hogs (%d)",
			alone.held, alone.woken, alone.long, share, hogged.long)
	}
	// Goroutines always ready to run are counted as such.
	if n := w.read().runnable; n >= deepQueue {
		t.Errorf("%d goroutines ready to run before any were started", n)
	}
	stop = ready(2 * deepQueue)
	if n := w.read().runnable; n < deepQueue {
		t.Errorf("%d goroutines ready to run with %d started, want %d or more", n, 2*deepQueue, deepQueue)
	}
	stop()
}

// fakeCPU is a machine whose spare CPU the test sets.
type fakeCPU struct{ state atomic.Int32 }

func (f *fakeCPU) read(time.Time, bool) (spareCPU, error) { return spareCPU(f.state.Load()), nil }
func (f *fakeCPU) forget()                                {}
func (f *fakeCPU) set(s spareCPU)                         { f.state.Store(int32(s)) }

// runGoverned runs Run for the test with the machine cpu, and returns
// the moves it makes and the runtime's own GOMAXPROCS.
func runGoverned(t *testing.T, cpu cpuReader) (next func(want move, procs int), many int) {
	prev := runtime.GOMAXPROCS(0)
	runtime.SetDefaultGOMAXPROCS()
	many = runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	if many < 2 {
		t.Skip("one CPU: there is nothing to govern")
	}
	moves := make(chan move, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Options{settle: 200 * time.Millisecond, cpu: cpu, moved: func(m move) {
			if m != kept {
				select {
				case moves <- m:
				case <-ctx.Done():
				}
				return
			}
			select {
			case moves <- m:
			default: // kept, tick after tick: the test has seen enough
			}
		}})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if n := runtime.GOMAXPROCS(0); n != many {
			t.Errorf("GOMAXPROCS %d after Run, want the runtime's %d", n, many)
		}
	})
	return func(want move, procs int) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case m := <-moves:
				if m == kept && want != kept {
					continue
				}
				if m != want || runtime.GOMAXPROCS(0) != procs {
					t.Fatalf("move to %v with GOMAXPROCS %d, want to %v with %d", m, runtime.GOMAXPROCS(0), want, procs)
				}
				return
			case <-deadline:
				t.Fatalf("no move to %v (GOMAXPROCS %d)", want, runtime.GOMAXPROCS(0))
			}
		}
	}, many
}

// Run starts with one thread, takes the runtime's many when a crowd waits
// to run, or goroutines hold the thread for milliseconds, goes back to one
// once they have gone, and gives GOMAXPROCS back to the runtime when it
// ends.
func TestRunFollowsTheLoad(t *testing.T) {
	next, many := runGoverned(t, &fakeCPU{})
	next(toOne, 1)
	for _, load := range []struct {
		n    int
		hold time.Duration
	}{{8, 300 * time.Microsecond}, {3, 10 * time.Millisecond}} {
		stop := crowd(load.n, load.hold)
		t.Cleanup(stop)
		next(toMany, many)
		stop()
		next(toOne, 1)
	}
}

// ready runs n goroutines that are always ready to run, until the func
// it returns is called (it waits for them).
func ready(n int) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for !done.Load() {
				runtime.Gosched()
			}
		})
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			done.Store(true)
			wg.Wait()
		})
	}
}

// While no CPU is spare, a crowd is kept on one thread, unless its run
// queue grows too deep; it gets many once a CPU is spare, and one again
// once none has been for a while, though it still waits.
func TestRunKeepsOneThreadWhileNoCPUIsSpare(t *testing.T) {
	cpu := &fakeCPU{}
	cpu.set(busy)
	next, many := runGoverned(t, cpu)
	next(toOne, 1)
	// A crowd that waits even on many threads (up to 4), so that busy
	// decides before quiet could, and that is far from a deep queue.
	stop := crowd(min(4*many, 16), 300*time.Microsecond)
	defer stop()
	next(kept, 1)
	deep := ready(2 * deepQueue)
	defer deep()
	next(toMany, many)
	deep()
	next(toOneBusy, 1)
	next(kept, 1)
	cpu.set(spare)
	next(toMany, many)
	cpu.set(busy)
	next(toOneBusy, 1)
}

// With one CPU, or a quota of one, there is nothing to govern.
func TestRunLeavesOneCPUAlone(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	moved := false
	Run(t.Context(), Options{moved: func(move) { moved = true }})
	if moved || runtime.GOMAXPROCS(0) != 1 {
		t.Errorf("with one CPU: moved %v, GOMAXPROCS %d", moved, runtime.GOMAXPROCS(0))
	}
}
