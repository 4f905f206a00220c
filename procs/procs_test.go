package procs

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// crowd runs goroutines that each wake up and hold the thread for a
// while, n at a time, until stop closes: on one thread, most of them wait
// to run far longer than Options.slow.
func crowd(n int, stop <-chan struct{}) (wait func()) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			t := time.NewTicker(time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				for end := time.Now().Add(300 * time.Microsecond); time.Now().Before(end); {
				}
			}
		})
	}
	return wg.Wait
}

// The runtime's own latencies tell the waits apart: a crowd on one thread
// is held up, and a goroutine woken alone is not.
func TestWaitsCountTheHeldUp(t *testing.T) {
	defer runtime.SetDefaultGOMAXPROCS()
	runtime.GOMAXPROCS(1)
	w := newWaits(200 * time.Microsecond)
	stop := make(chan struct{})
	wait := crowd(8, stop)
	// The crowd runs until the runtime has seen enough of it (its
	// latencies are sampled: one wake-up in eight).
	var woken, held uint64
	for limit := time.Now().Add(10 * time.Second); held < 50 && time.Now().Before(limit); {
		<-time.After(10 * time.Millisecond)
		wn, h := w.read()
		woken, held = woken+wn, held+h
	}
	close(stop)
	wait()
	crowded := float64(held) / float64(woken)
	if held < 50 || crowded < 0.5 {
		t.Fatalf("a crowd on one thread: %d of %d wake-ups held up, want 50 or more and half or more", held, woken)
	}
	// Alone, a goroutine woken from sleep finds the thread free, as a
	// rule (a busy machine may hold the thread itself up now and then).
	w.read()
	woken, held = 0, 0
	for range 400 {
		<-time.After(100 * time.Microsecond)
		wn, h := w.read()
		woken, held = woken+wn, held+h
	}
	if woken == 0 || float64(held)/float64(woken) > crowded/2 {
		t.Errorf("one goroutine at a time: %d of %d wake-ups held up, want some woken and under half the crowd's share (%.2f)", held, woken, crowded)
	}
}

// Run starts with one thread, takes the runtime's many when a crowd
// waits to run, goes back to one once the crowd has gone, and gives
// GOMAXPROCS back to the runtime when it ends.
func TestRunFollowsTheLoad(t *testing.T) {
	many := runtime.GOMAXPROCS(0)
	moves := make(chan move, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Options{settle: 200 * time.Millisecond, moved: func(m move) { moves <- m }})
	}()
	next := func(want move, procs int) {
		t.Helper()
		select {
		case m := <-moves:
			if m != want || runtime.GOMAXPROCS(0) != procs {
				t.Fatalf("move %v with GOMAXPROCS %d, want move %v with %d", m, runtime.GOMAXPROCS(0), want, procs)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("no move to %v (GOMAXPROCS %d)", want, runtime.GOMAXPROCS(0))
		}
	}
	if many < 2 {
		// One CPU: there is nothing to govern.
		cancel()
		<-done
		if len(moves) != 0 || runtime.GOMAXPROCS(0) != many {
			t.Errorf("with one CPU: %d moves, GOMAXPROCS %d", len(moves), runtime.GOMAXPROCS(0))
		}
		return
	}
	next(toOne, 1)
	stop := make(chan struct{})
	wait := crowd(8, stop)
	next(toMany, many)
	close(stop)
	wait()
	next(toOne, 1)
	cancel()
	<-done
	if n := runtime.GOMAXPROCS(0); n != many {
		t.Errorf("GOMAXPROCS %d after Run, want the runtime's %d", n, many)
	}
}

// With GOMAXPROCS set, the operator chose: Run changes nothing.
func TestRunLeavesAChosenGOMAXPROCS(t *testing.T) {
	t.Setenv("GOMAXPROCS", "2")
	before := runtime.GOMAXPROCS(0)
	moved := false
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a Run that took over would still have moved first
	Run(ctx, Options{moved: func(move) { moved = true }})
	if moved || runtime.GOMAXPROCS(0) != before {
		t.Errorf("Run moved (%v) GOMAXPROCS from %d to %d", moved, before, runtime.GOMAXPROCS(0))
	}
}
