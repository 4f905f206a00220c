package detach

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// afterDoneCase arms AfterDone in a handler, and says how the context it
// armed ends.
type afterDoneCase struct {
	name string
	// ctx is the context f is armed on, made from the request's; cancel,
	// if not nil, ends it while the request goes on.
	ctx          func(r *http.Request) (ctx context.Context, cancel func())
	clientGoes   bool // the client closes its connection once f is armed
	armAfterGone bool // f is armed once the client has gone
	leave        bool // the response leaves the server before the client goes
	stopFirst    bool // stop is called before the context ends
	runs         bool // f runs
	inline       bool // on the goroutine that learnt the client has gone
}

type ctxKey struct{}

func TestAfterDone(t *testing.T) {
	own := func(r *http.Request) (context.Context, func()) { return r.Context(), nil }
	for _, tc := range []afterDoneCase{
		{name: "the client goes", ctx: own, clientGoes: true, runs: true, inline: true},
		{name: "the client goes, with values added", clientGoes: true, runs: true, inline: true,
			ctx: func(r *http.Request) (context.Context, func()) {
				return context.WithValue(r.Context(), ctxKey{}, 1), nil
			}},
		{name: "the client goes after the response left", ctx: own, clientGoes: true, leave: true, runs: true, inline: true},
		{name: "the handler returns first", ctx: own, runs: true},
		{name: "stopped before the client goes", ctx: own, clientGoes: true, stopFirst: true},
		{name: "armed once the client has gone", ctx: own, clientGoes: true, armAfterGone: true, runs: true},
		{name: "a context that may end before the request's", runs: true,
			ctx: func(r *http.Request) (context.Context, func()) {
				return context.WithCancel(context.WithValue(r.Context(), ctxKey{}, 1))
			}},
		{name: "a context of no request", runs: true,
			ctx: func(*http.Request) (context.Context, func()) { return context.WithCancel(context.Background()) }},
	} {
		t.Run(tc.name, func(t *testing.T) { testAfterDone(t, tc) })
	}
}

func testAfterDone(t *testing.T, tc afterDoneCase) {
	var (
		mu      sync.Mutex // held while f is armed, and taken by f
		inline  bool
		ctxErr  error
		fired   = make(chan struct{})
		ranToo  atomic.Int32 // runs of f, and of the one stopped at once
		ready   = make(chan struct{}, 1)
		armed   = make(chan func() bool, 1)
		served  = make(chan struct{})
		waitRun = func(what string) {
			select {
			case <-fired:
			case <-time.After(10 * time.Second):
				t.Errorf("waited 10s for f to run %s", what)
			}
		}
	)
	arm := func(r *http.Request) (stop func() bool, cancel func()) {
		ctx, cancel := tc.ctx(r)
		mu.Lock()
		defer mu.Unlock()
		// One more, first, stopped at once: what it leaves must run. (Armed
		// on an ended context, it would run at once.)
		var other func() bool
		if !tc.armAfterGone {
			other = AfterDone(ctx, func() { ranToo.Add(1) })
		}
		stop = AfterDone(ctx, func() {
			mu.Lock()
			defer mu.Unlock()
			buf := make([]byte, 64<<10)
			inline = strings.Contains(string(buf[:runtime.Stack(buf, false)]), "detach.(*ownCtx).end(")
			ctxErr = ctx.Err()
			// Arming again takes what end takes: end holds nothing while f runs.
			AfterDone(ctx, func() {})
			ranToo.Add(1)
			close(fired)
		})
		if other != nil && (!other() || other()) {
			t.Error("stop before the end did not report once that it stopped f")
		}
		if tc.stopFirst && (!stop() || stop()) {
			t.Error("stop before the end did not report once that it stopped f")
		}
		return stop, cancel
	}
	h := func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			t.Error(err)
		}
		if tc.leave {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: first\n\n")
			stop, _ := arm(r)
			armed <- stop
			if err := Leave(w); err != nil {
				t.Errorf("could not leave: %v", err)
			}
			ready <- struct{}{}
			go func() {
				defer close(served)
				defer End(w)
				waitRun("after the response left") // as a handler waits for its call
			}()
			return
		}
		defer close(served)
		if tc.armAfterGone {
			ready <- struct{}{}
			<-r.Context().Done()
		}
		stop, cancel := arm(r)
		armed <- stop
		if !tc.armAfterGone {
			ready <- struct{}{}
		}
		switch {
		case cancel != nil:
			cancel() // the request goes on, and its client stays
			waitRun("before the request ends")
		case tc.clientGoes && tc.runs:
			waitRun("before the handler returns") // as a handler waits for its call
		case tc.clientGoes:
			<-r.Context().Done()
		}
	}
	_, addr := server(t, h)
	c, br := dial(t, addr)
	post(t, c, "/stream", "{}")
	if tc.leave {
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("answer: %v, %v", resp, err)
		}
	}
	waitFor(t, ready, "the handler")
	if tc.clientGoes {
		c.Close()
	}
	stop := waitFor(t, armed, "f to be armed")
	waitFor(t, served, "the request to end")
	if !tc.runs {
		if ranToo.Load() != 0 {
			t.Fatal("f ran although it was stopped")
		}
		return
	}
	waitFor(t, fired, "f to run")
	mu.Lock()
	defer mu.Unlock()
	if inline != tc.inline {
		t.Errorf("f ran on the goroutine that ended the request: %v, want %v", inline, tc.inline)
	}
	if ctxErr == nil {
		t.Error("f ran before its context ended")
	}
	if stop() {
		t.Error("stop after f ran reported that it stopped it")
	}
	if n := ranToo.Load(); n != 1 {
		t.Errorf("%d runs, of f and of the one stopped at once; want 1", n)
	}
}
