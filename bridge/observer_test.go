package bridge

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// recorder is an Observer that remembers what it was told.
type recorder struct {
	mu      sync.Mutex
	endings map[Ending]int
	fates   map[ProgressFate]int
	sizes   map[int][]int // by worker
}

func newRecorder() *recorder {
	return &recorder{endings: map[Ending]int{}, fates: map[ProgressFate]int{}, sizes: map[int][]int{}}
}

func (r *recorder) CallEnded(e Ending) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.endings[e]++
}

func (r *recorder) Progress(f ProgressFate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fates[f]++
}

func (r *recorder) MessageRead(worker, size int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sizes[worker] = append(r.sizes[worker], size)
}

func (r *recorder) ended() map[Ending]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.endings)
}

// expectEndings checks every ending told so far against want.
func (r *recorder) expectEndings(t *testing.T, step string, want map[Ending]int) {
	t.Helper()
	if got := r.ended(); !maps.Equal(got, want) {
		t.Errorf("after %s the observer was told %v, want %v", step, got, want)
	}
}

// Each request a client gives the bridge is told to the observer once, with
// the ending its client saw; listens and the gateway's own requests are
// not told.
func TestObserverIsToldHowEachCallEnds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		w := &world{t: t, children: make(chan *fakeChild, 8), auto: autoReply{discover: "result"}}
		w.b = New(w.start, strict(t, Options{Era: EraModern, IdleTimeout: time.Minute, MaxInFlight: 1, QueueSize: -1, Observer: rec}))
		child := <-w.children
		defer child.exit()
		defer w.b.Close(context.Background())
		want := map[Ending]int{}
		step := func(name string, e Ending) {
			t.Helper()
			want[e]++
			rec.expectEndings(t, name, want)
		}
		ctx := context.Background()

		c := w.call(ctx, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, child.expect("tools/call").ID)
		c.wait()
		step("a result", Ending{Outcome: OutcomeOK})

		c = w.call(ctx, `{"jsonrpc":"2.0","id":2,"method":"tools/call"}`)
		child.send(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"no such tool"}}`, child.expect("tools/call").ID)
		c.wait()
		step("an error response", Ending{Outcome: OutcomeChildError})

		w.call(ctx, `{"jsonrpc":"2.0","id":3,"method":"ping"}`).wait()
		step("a ping the gateway answers", Ending{Outcome: OutcomeOK})

		leaving, leave := context.WithCancel(ctx)
		c = w.call(leaving, `{"jsonrpc":"2.0","id":4,"method":"tools/call"}`)
		child.expect("tools/call")
		leave()
		c.wait()
		child.expect("notifications/cancelled")
		step("the client leaving", Ending{Outcome: OutcomeCancelled, Reason: ReasonClientDisconnected})
		synctest.Wait() // the probe after the cancellation, answered: the slot is back

		c = w.call(ctx, `{"jsonrpc":"2.0","id":5,"method":"tools/call"}`)
		child.expect("tools/call")
		c.Cancel("")
		c.wait()
		child.expect("notifications/cancelled")
		step("the client cancelling", Ending{Outcome: OutcomeCancelled, Reason: ReasonClientCancelled})
		synctest.Wait()

		c = w.call(ctx, `{"jsonrpc":"2.0","id":6,"method":"tools/call"}`)
		req := child.expect("tools/call")
		if _, err := callOn(w.b, ctx, request(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call"}`), Caller{}); err == nil {
			t.Fatal("a call past the only slot was taken")
		}
		step("a refusal for want of a slot", Ending{Outcome: OutcomeOverloaded})
		c.wait() // a minute of silence
		child.expect("notifications/cancelled")
		step("a timeout", Ending{Outcome: OutcomeTimeout})
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID) // too late: dropped, not told

		listening, stop := context.WithCancel(ctx)
		lc, err := w.b.Call(listening, request(t, `{"jsonrpc":"2.0","id":8,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}`), Caller{Modern: true})
		if err != nil {
			t.Fatal(err)
		}
		child.expect("subscriptions/listen")
		if st := w.b.Stats(); st.Listens != 1 {
			t.Errorf("listens = %d with one open, want 1", st.Listens)
		}
		stop()
		for _, _, done, _ := lc.Take(); !done; _, _, done, _ = lc.Take() {
			<-lc.Wake()
		}
		if st := w.b.Stats(); st.Listens != 0 {
			t.Errorf("listens = %d after the only one ended, want 0", st.Listens)
		}
		child.expect("notifications/cancelled")
		rec.expectEndings(t, "a listen", want)

		c = w.call(ctx, `{"jsonrpc":"2.0","id":9,"method":"tools/call"}`)
		child.expect("tools/call")
		child.exit()
		c.wait()
		step("the child exiting", Ending{Outcome: OutcomeUnavailable})
		st, err := w.b.Await(ctx, func(s Status) bool { return s.Ready })
		if err != nil {
			t.Fatal(err)
		}
		if st.Workers[0].Restarts != 1 || st.Restarts != 1 {
			t.Errorf("restarts = %d (worker), %d (bridge); want 1 and 1", st.Workers[0].Restarts, st.Restarts)
		}
		(<-w.children).exit()

		w.b.Refuse()
		if _, err := callOn(w.b, ctx, request(t, `{"jsonrpc":"2.0","id":10,"method":"tools/call"}`), Caller{}); err == nil {
			t.Fatal("a call was taken while draining")
		}
		step("a refusal while draining", Ending{Outcome: OutcomeShutdown})
	})
}

// A call that ends before Call returns (its client left before its request
// went out) is told once, not also as a refusal, and Call returns its
// error as it is.
func TestObserverIsToldOnceOfACallEndedBeforeCallReturns(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	opts := legacy()
	opts.Observer = rec
	w := newWorld(t, opts, autoReply{initialize: true})
	w.child()
	if err := w.b.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := w.b.Call(ctx, request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`), Caller{})
	if err != context.Canceled {
		t.Errorf("Call = %#v, want context.Canceled itself", err)
	}
	rec.expectEndings(t, "a client gone before its request went out", map[Ending]int{{Outcome: OutcomeCancelled, Reason: ReasonClientDisconnected}: 1})
}

// Progress is told as relayed when queued for the client, coalesced when it
// took the place of one the client had not taken, and dropped when no call
// asked for it.
func TestObserverIsToldWhatBecomesOfProgress(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	opts := legacy()
	opts.MaxNotes, opts.Observer = 4, rec
	w := newWorld(t, opts, autoReply{initialize: true})
	child := w.child()
	c := w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"p"}}}`)
	r := child.expect("tools/call")
	quiet := w.call(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/call"}`)
	rq := child.expect("tools/call")
	for i := 1; i <= 100; i++ {
		child.send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d}}`, r.ID, i)
	}
	child.send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":1}}`, rq.ID) // asked for none
	child.send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":999999,"progress":1}}`)    // nobody's
	child.send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`)                           // no token
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, r.ID)
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, rq.ID)
	c.wait()
	quiet.wait()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := map[ProgressFate]int{ProgressRelayed: 4, ProgressCoalesced: 96, ProgressDropped: 3}
	if !maps.Equal(rec.fates, want) {
		t.Errorf("progress fates = %v, want %v", rec.fates, want)
	}
}

// Every line the child writes is told with its length, a line over the
// size limit too.
func TestObserverIsToldEachLineRead(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	opts := legacy()
	opts.Observer = rec
	w := &world{t: t, children: make(chan *fakeChild, 8), auto: autoReply{initialize: true}, maxLine: 1000}
	w.b = New(w.start, strict(t, opts))
	t.Cleanup(func() { w.b.Close(context.Background()) })
	child := w.child()
	c := w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
	req := child.expect("tools/call")
	long := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":%q}}`, strings.Repeat("x", 2000))
	answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID)
	child.send("%s", long)
	child.send("%s", answer)
	c.wait()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	sizes := rec.sizes[0]
	if n := len(sizes); n < 3 || sizes[n-2] != len(long) || sizes[n-1] != len(answer) {
		t.Errorf("sizes told = %v, want the handshake's answer, then %d (over the limit) and %d", sizes, len(long), len(answer))
	}
}

// A progress notification for a client too far behind, whose last queued
// note is a log message, is dropped, and told as dropped.
func TestProgressBehindALogIsDropped(t *testing.T) {
	var m mailbox
	m.init(2)
	m.note([]byte("log 1"), noteLog)
	m.note([]byte("log 2"), noteLog)
	if kept, coalesced, dropped := m.put([]byte("progress"), noteProgress); !kept || coalesced || !dropped {
		t.Errorf("put = kept %v, coalesced %v, dropped %v; want it dropped", kept, coalesced, dropped)
	}
	if notes, _, _, _ := m.take(); len(notes) != 2 || string(notes[1]) != "log 2" {
		t.Errorf("queued %q", notes)
	}
}

// A tools/call whose Mcp-Param headers cannot be checked for want of the
// tool list is refused before it is made: the lookup's error is its
// ending, told once; a lookup that succeeds tells nothing (the call it
// precedes is told when it ends).
func TestObserverIsToldOfAToolHeadersFailure(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	opts := legacy()
	opts.Observer = rec
	w := newWorld(t, opts, autoReply{initialize: true})
	child := w.child()
	got := make(chan error, 1)
	lookup := func() {
		go func() {
			_, err := w.b.ToolHeaders(context.Background(), "deploy")
			got <- err
		}()
	}
	lookup()
	list := child.expect("tools/list")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`, list.ID)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	rec.expectEndings(t, "a lookup that succeeded", map[Ending]int{})

	child.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	c := w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"ping2"}`) // the change is seen once this is
	m := child.expect("ping2")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
	c.wait()
	lookup()
	list = child.expect("tools/list")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":"not a list"}}`, list.ID)
	err := <-got
	if err == nil {
		t.Fatal("a lookup on a list that is not one succeeded")
	}
	rec.expectEndings(t, "a lookup on a list that is not one", map[Ending]int{{Outcome: OutcomeOK}: 1, {Outcome: OutcomeBadAnswer}: 1})
}
