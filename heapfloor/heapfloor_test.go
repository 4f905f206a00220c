package heapfloor

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The collector's percent is the process's: these tests run one at a
// time, and the environment must leave the collector its defaults.

func TestMain(m *testing.M) {
	for _, name := range []string{"GOGC", "GOMEMLIMIT"} {
		if os.Getenv(name) != "" {
			fmt.Printf("skipped: %s is set, and the tests need the collector's defaults\n", name)
			os.Exit(0)
		}
	}
	goleak.VerifyTestMain(m)
}

func read(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func gcPercent() int { return int(int64(read(gogcMetric))) }

// adjustment is a percent the floor set, and the collections that had
// ended when it read what the last one found.
type adjustment struct {
	percent int
	cycles  uint64
}

// probe is what a test sees of a floor it started: each adjustment and
// each cleanup, those after the stop apart from those before it.
type probe struct {
	adjusted, lateAdjusted chan adjustment
	cleanups, lateCleanups chan struct{}
	stop                   func()
}

// start is Start with a probe.
func start(t *testing.T, floor uint64) *probe {
	t.Helper()
	p := &probe{
		adjusted: make(chan adjustment, 64), lateAdjusted: make(chan adjustment, 64),
		cleanups: make(chan struct{}, 64), lateCleanups: make(chan struct{}, 64),
	}
	// The hooks run with the floor's lock held, stopping's too: stopped
	// needs no lock of its own, and each hook sees whether the stop came
	// before it.
	stopped := false
	p.stop = Start(Options{Floor: floor, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		adjusted: func(percent int, cycles uint64) {
			trySend(pick(stopped, p.adjusted, p.lateAdjusted), adjustment{percent, cycles})
		},
		collected: func() { trySend(pick(stopped, p.cleanups, p.lateCleanups), struct{}{}) },
		stopping:  func() { stopped = true },
	})
	t.Cleanup(p.stop)
	return p
}

func pick[T any](late bool, before, after chan T) chan T {
	if late {
		return after
	}
	return before
}

// trySend never blocks: a test that stopped reading does not hold up the
// cleanups.
func trySend[T any](ch chan T, v T) {
	select {
	case ch <- v:
	default:
	}
}

// collect runs a collection and returns the percent the cleanup after it
// set.
func collect(t *testing.T, adjusted <-chan adjustment) int {
	t.Helper()
	before := read(cycleMetric)
	runtime.GC()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case a := <-adjusted:
			if a.cycles > before {
				return a.percent
			}
			// The cleanup of an earlier collection (one the runtime
			// started) ran as this one began. The object it armed may have
			// been made while this one was marking, which keeps it alive
			// through it: collect again, as the runtime would when the
			// heap grows.
			runtime.GC()
		case <-deadline:
			t.Fatal("no adjustment within 10s of a collection")
			return 0
		}
	}
}

func near(got, want uint64) bool {
	slack := want/50 + 64<<10 // integer percents round the goal down
	return got+slack >= want && got <= want+slack
}

// While the live heap is small, the goal is the floor, and it is the floor
// again after each collection.
func TestTheGoalIsTheFloorWhileTheHeapIsSmall(t *testing.T) {
	const floor = 64 << 20
	if live := read(liveMetric); live > floor/4 {
		t.Skipf("the test's heap is %d bytes already", live)
	}
	base := gcPercent()
	fl := start(t, floor)
	for range 3 {
		p := collect(t, fl.adjusted)
		if p <= base {
			t.Fatalf("percent %d with %d bytes live, want more than the runtime's %d", p, read(liveMetric), base)
		}
		if got := gcPercent(); got != p {
			t.Errorf("the runtime's percent is %d, the floor set %d", got, p)
		}
		if goal := read("/gc/heap/goal:bytes"); !near(goal, floor) {
			t.Errorf("the heap goal is %d bytes with %d live, want about the floor, %d", goal, read(liveMetric), floor)
		}
	}
}

// A live heap larger than the floor gets the runtime's own percent, and
// the floor comes back once it is garbage.
func TestALargeHeapGetsTheRuntimesPace(t *testing.T) {
	const floor = 16 << 20
	base := gcPercent()
	fl := start(t, floor)
	big := make([]byte, 4*floor)
	for i := range big {
		big[i] = byte(i) // pages the heap really holds
	}
	if p := collect(t, fl.adjusted); p != base {
		t.Errorf("percent %d with %d bytes live, want the runtime's %d", p, read(liveMetric), base)
	}
	if goal, live := read("/gc/heap/goal:bytes"), read(liveMetric); goal < live+live*uint64(base)/100 {
		t.Errorf("the heap goal is %d bytes with %d live, under the runtime's own", goal, live)
	}
	runtime.KeepAlive(big)
	big = nil
	if p := collect(t, fl.adjusted); p <= base {
		t.Errorf("percent %d once the large heap was garbage, want more than the runtime's %d", p, base)
	}
}

// Stopping gives the runtime its own percent back, and the cleanup after
// it changes nothing and arms no other.
func TestStopGivesThePercentBack(t *testing.T) {
	base := gcPercent()
	fl := start(t, 64<<20)
	if p := collect(t, fl.adjusted); p == base {
		t.Fatalf("the floor did not move the percent from %d", base)
	}
	fl.stop()
	fl.stop() // twice is harmless
	if got := gcPercent(); got != base {
		t.Fatalf("percent %d after stop, want the runtime's %d", got, base)
	}
	// One sentinel is armed at a time: its cleanup, the first after the
	// stop, is the last.
	runtime.GC()
	select {
	case <-fl.lateCleanups:
	case <-time.After(10 * time.Second):
		t.Fatal("the floor's cleanup did not run within 10s of a collection")
	}
	if got := gcPercent(); got != base {
		t.Errorf("percent %d after the cleanup that followed stop, want %d", got, base)
	}
	runtime.GC()
	runtime.GC()
	// A cleanup armed after these collections runs after any the floor
	// would have armed before them.
	done := make(chan struct{})
	runtime.AddCleanup(new(sentinel), func(ch chan struct{}) { close(ch) }, done)
	runtime.GC()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a cleanup did not run within 10s of a collection")
	}
	if len(fl.lateAdjusted) > 0 {
		t.Errorf("adjusted to %d after stop", (<-fl.lateAdjusted).percent)
	}
	if len(fl.lateCleanups) > 0 {
		t.Error("the floor armed another cleanup after stop")
	}
}

// With the collector off, or a floor the runtime's own least goal covers,
// Start leaves the percent alone.
func TestNothingToDo(t *testing.T) {
	base := gcPercent()
	for _, tc := range []struct {
		name    string
		percent int
		floor   uint64
	}{
		{"GOGC=off", -1, 64 << 20},
		{"GOGC=0", 0, 64 << 20},
		{"a floor under 4 MiB at GOGC=100", 100, 4 << 20},
		{"a floor under 8 MiB at GOGC=200", 200, 8 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(tc.percent)
			defer debug.SetGCPercent(base)
			fl := start(t, tc.floor)
			fl.stop()
			if got := gcPercent(); got != tc.percent {
				t.Errorf("percent %d, want %d", got, tc.percent)
			}
			if n := len(fl.adjusted) + len(fl.lateAdjusted); n > 0 {
				t.Errorf("adjusted %d times", n)
			}
		})
	}
}

func TestPercentFor(t *testing.T) {
	for _, tc := range []struct {
		name          string
		floor         uint64
		base          int
		marked, roots uint64
		want          int
		atFloor       bool // the runtime's goal at want is the floor
	}{
		{"no collection yet: the runtime's least goal at the floor", 16 << 20, 100, 0, 0, 400, true},
		{"a small heap: its goal at the floor", 64 << 20, 100, 8 << 20, 10 << 20, 560, true},
		{"the runtime's least goal would pass the floor", 16 << 20, 100, 2 << 20, 3 << 20, 400, true},
		{"GOGC=300 reaches no further", 16 << 20, 300, 3 << 20, 4 << 20, 325, true},
		{"live beyond the floor", 16 << 20, 100, 20 << 20, 21 << 20, 100, false},
		{"live at the floor", 16 << 20, 100, 16 << 20, 17 << 20, 100, false},
		{"the runtime's own goal is further", 16 << 20, 100, 9 << 20, 10 << 20, 100, false},
		{"GOGC=500 reaches further", 16 << 20, 500, 2 << 20, 3 << 20, 500, false},
		{"a floor beyond 1 TiB is 1 TiB", 1 << 62, 100, 1, 1, 26214400, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := percentFor(tc.floor, tc.base, tc.marked, tc.roots)
			if got != tc.want {
				t.Fatalf("percentFor(%d, %d, %d, %d) = %d, want %d", tc.floor, tc.base, tc.marked, tc.roots, got, tc.want)
			}
			// The runtime's goal (runtime/mgcpacer.go, commit).
			goal := max(tc.marked+tc.roots*uint64(got)/100, runtimeHeapMinimum*uint64(got)/100)
			if floor := min(tc.floor, maxFloor); tc.atFloor && !near(goal, floor) {
				t.Errorf("the goal at %d%% is %d, want about the floor, %d", got, goal, floor)
			} else if !tc.atFloor && goal < floor {
				t.Errorf("the goal at %d%% is %d, under the floor, %d", got, goal, floor)
			}
		})
	}
}
