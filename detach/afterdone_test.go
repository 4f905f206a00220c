package detach

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// afterDoneCase arms AfterDone in a handler, and says how the request's
// context ends.
type afterDoneCase struct {
	name string
	// arm hands f to AfterDone for r, holding mu, which f takes: f must
	// never run on the goroutine that arms it. It returns stop, or nil
	// when the case has stopped f itself.
	arm func(t *testing.T, w http.ResponseWriter, r *http.Request, mu *sync.Mutex, f func(), ran chan struct{}) (stop func() bool)
	// clientGoes closes the client's connection once f is armed; otherwise
	// the handler returns at once, or the case ends ctx itself.
	clientGoes bool
	// leave takes the response off the server before the client goes.
	leave bool
	// armAfterGone lets the client go first: arm waits for it.
	armAfterGone bool
	runs         bool // f runs
	inline       bool // on the goroutine that learnt the client has gone
}

func TestAfterDone(t *testing.T) {
	plain := func(t *testing.T, _ http.ResponseWriter, r *http.Request, mu *sync.Mutex, f func(), _ chan struct{}) func() bool {
		mu.Lock()
		defer mu.Unlock()
		return AfterDone(r.Context(), f)
	}
	for _, tc := range []afterDoneCase{
		{name: "the client goes", arm: plain, clientGoes: true, runs: true, inline: true},
		{name: "the client goes after the response left", arm: plain, clientGoes: true, leave: true, runs: true, inline: true},
		{name: "the handler returns first", arm: plain, runs: true},
		{name: "stopped before the client goes", clientGoes: true, arm: func(t *testing.T, w http.ResponseWriter, r *http.Request, mu *sync.Mutex, f func(), ran chan struct{}) func() bool {
			stop := plain(t, w, r, mu, f, ran)
			if !stop() {
				t.Error("stop before the end reported that f ran")
			}
			if stop() {
				t.Error("a second stop reported that it stopped f")
			}
			return nil
		}},
		{name: "armed once the client has gone", runs: true, arm: func(t *testing.T, w http.ResponseWriter, r *http.Request, mu *sync.Mutex, f func(), ran chan struct{}) func() bool {
			<-r.Context().Done()
			return plain(t, w, r, mu, f, ran)
		}, clientGoes: true, armAfterGone: true},
		{name: "a context that may end before the request's", runs: true, arm: func(t *testing.T, w http.ResponseWriter, r *http.Request, mu *sync.Mutex, f func(), ran chan struct{}) func() bool {
			ctx, cancel := context.WithCancel(context.WithValue(r.Context(), t, nil))
			mu.Lock()
			stop := AfterDone(ctx, f)
			mu.Unlock()
			cancel()
			// The request goes on, and its client stays.
			waitFor(t, ran, "f to run before the request ends")
			ran <- struct{}{}
			return stop
		}},
		{name: "a context of no request", runs: true, arm: func(t *testing.T, w http.ResponseWriter, r *http.Request, mu *sync.Mutex, f func(), ran chan struct{}) func() bool {
			ctx, cancel := context.WithCancel(context.Background())
			mu.Lock()
			stop := AfterDone(ctx, f)
			mu.Unlock()
			cancel()
			return stop
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { testAfterDone(t, tc) })
	}
}

func testAfterDone(t *testing.T, tc afterDoneCase) {
	var mu sync.Mutex
	ran := make(chan struct{}, 2)
	ready := make(chan struct{}, 1)    // the client may go
	armed := make(chan func() bool, 1) // stop, once f is armed
	served := make(chan struct{})
	var inline bool
	f := func() {
		mu.Lock()
		defer mu.Unlock()
		buf := make([]byte, 64<<10)
		inline = strings.Contains(string(buf[:runtime.Stack(buf, false)]), "detach.(*stream).end(")
		ran <- struct{}{}
	}
	h := func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			t.Error(err)
		}
		if tc.leave {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: first\n\n")
			armed <- tc.arm(t, w, r, &mu, f, ran)
			if err := Leave(w); err != nil {
				t.Errorf("could not leave: %v", err)
			}
			ready <- struct{}{}
			go func() {
				defer close(served)
				defer End(w)
				<-r.Context().Done()
			}()
			return
		}
		defer close(served)
		if tc.armAfterGone {
			ready <- struct{}{}
		}
		armed <- tc.arm(t, w, r, &mu, f, ran)
		if !tc.armAfterGone {
			ready <- struct{}{}
		}
		if tc.clientGoes {
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
		if len(ran) > 0 {
			t.Fatal("f ran although it was stopped")
		}
		return
	}
	waitFor(t, ran, "f to run")
	if inline != tc.inline {
		t.Errorf("f ran on the goroutine that ended the request: %v, want %v", inline, tc.inline)
	}
	if stop != nil && stop() {
		t.Error("stop after f ran reported that it stopped it")
	}
	if len(ran) > 0 {
		t.Error("f ran twice")
	}
}
