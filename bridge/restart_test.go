package bridge

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// A child that keeps failing is started again after delays that double up
// to the cap, never in a hot loop; one that served for a while (10 s from
// the end of its handshake) is started again after the shortest delay.
func TestRestartsBackOff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := &world{t: t, children: make(chan *fakeChild, 8), auto: autoReply{initialize: true}}
		starts := make(chan time.Time, 16)
		failures := 6 // only the bridge's run loop touches it
		start := func(ctx context.Context) (Transport, error) {
			starts <- time.Now()
			if failures > 0 {
				failures--
				return nil, errors.New("exec: no such program")
			}
			return w.start(ctx)
		}
		w.b = New(start, strict(t, Options{Era: EraLegacy, RestartMin: time.Second, RestartMax: 8 * time.Second}))
		defer w.b.Close(context.Background())

		prev := <-starts
		for i, want := range []time.Duration{1, 2, 4, 8, 8, 8} {
			at := <-starts
			if gap := at.Sub(prev); gap != want*time.Second {
				t.Errorf("start %d came %v after the one before, want %v", i+2, gap, want*time.Second)
			}
			prev = at
		}
		// The seventh start worked. That child serves a while, then exits.
		child := <-w.children
		if err := w.b.WaitReady(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute) // the bubble's clock: longer than 4× the cap
		exited := time.Now()
		child.exit()
		if gap := (<-starts).Sub(exited); gap != time.Second {
			t.Errorf("a child that served a minute was started again after %v, want 1s", gap)
		}
		// Each child serves a while, then exits: 15 s is a while, and so is
		// 60 s after a long delay; 5 s and 9 s are not, and the delay
		// doubles.
		for _, tt := range []struct{ served, want time.Duration }{{15, 1}, {5, 2}, {9, 4}, {9, 8}, {9, 8}, {60, 1}} {
			child = <-w.children
			if err := w.b.WaitReady(context.Background()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(tt.served * time.Second)
			exited = time.Now()
			child.exit()
			if gap := (<-starts).Sub(exited); gap != tt.want*time.Second {
				t.Errorf("a child that served %v was started again after %v, want %v", tt.served*time.Second, gap, tt.want*time.Second)
			}
		}
		defer (<-w.children).exit()
		if err := w.b.WaitReady(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// A child whose handshake times out, however long the timeout, failed to
// start: its restarts back off to the cap (its handshake is not service).
func TestRestartsAfterHandshakeTimeoutsBackOff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := &world{t: t, children: make(chan *fakeChild, 8), auto: autoReply{}} // initialize goes unanswered
		starts := make(chan time.Time, 16)
		start := func(ctx context.Context) (Transport, error) {
			starts <- time.Now()
			return w.start(ctx)
		}
		w.b = New(start, strict(t, Options{Era: EraLegacy, HandshakeTimeout: 20 * time.Second, RestartMin: time.Second, RestartMax: 8 * time.Second}))
		defer w.b.Close(context.Background())
		prev := <-starts
		for i, want := range []time.Duration{1, 2, 4, 8, 8} {
			at := <-starts
			// Each start waits out the handshake timeout, then the delay.
			if gap := at.Sub(prev) - 20*time.Second; gap != want*time.Second {
				t.Errorf("start %d came %v after the handshake before timed out, want %v", i+2, gap, want*time.Second)
			}
			prev = at
		}
		for len(w.children) > 0 {
			(<-w.children).exit()
		}
	})
}

// A worker whose child ended speaks no era while it waits to start the
// next: no child is there to speak one.
func TestEndedChildHasNoEra(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := &world{t: t, children: make(chan *fakeChild, 2), auto: autoReply{initialize: true}}
		w.b = New(w.start, strict(t, Options{Era: EraLegacy, RestartMin: time.Hour, RestartMax: time.Hour}))
		defer w.b.Close(context.Background())
		child := <-w.children
		if err := w.b.WaitReady(context.Background()); err != nil {
			t.Fatal(err)
		}
		if era := w.b.Status().Workers[0].Era; era != EraLegacy {
			t.Fatalf("era %q while the child serves, want legacy", era)
		}
		child.exit()
		synctest.Wait()
		if st := w.b.Status().Workers[0]; st.Ready || st.Era != "" {
			t.Errorf("worker %+v while its next child is awaited, want neither ready nor an era", st)
		}
	})
}
