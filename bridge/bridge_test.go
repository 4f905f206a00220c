package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// The client's id comes back byte for byte, whatever its type or size, and
// the payload around it is untouched.
func TestIDsAreRewrittenAndRestored(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	seen := map[int64]bool{}
	for _, clientID := range []string{`1`, `"abc"`, `123456789012345678901234567890`, `-7`, `"\u00fc\"x"`, `1.5e3`, `0`} {
		c := w.call(context.Background(), `{"jsonrpc":"2.0","id":`+clientID+`,"method":"tools/call","params":{"name":"echo"}}`)
		m := child.expect("tools/call")
		gw, ok := m.IDInt()
		if !ok || gw <= 0 || seen[gw] {
			t.Fatalf("child saw id %s for client id %s; want a fresh positive integer", m.ID, clientID)
		}
		seen[gw] = true
		// An odd but valid payload that must pass through untouched.
		result := `{ "content" : [ {"type":"text","text":"caf\u00e9 \ud83d\ude00"} ] , "n": 1.000 }`
		child.send(`{"jsonrpc":"2.0","id":%d,"result":%s}`, gw, result)
		resp, err := c.wait()
		if err != nil {
			t.Fatal(err)
		}
		want := `{"jsonrpc":"2.0","id":` + clientID + `,"result":` + result + `}`
		if string(resp) != want {
			t.Errorf("response = %s\nwant       %s", resp, want)
		}
	}
}

// A request is written at once when it is the child's only call, and
// through GatherMessage, to go out with others', when calls are pending
// on the child beside it.
func TestRequestsGatherBesideOthers(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	start := func(id int) (*call, int64) {
		c := w.call(context.Background(), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo"}}`, id))
		gw, _ := child.expect("tools/call").IDInt()
		return c, gw
	}
	answer := func(c *call, gw int64) {
		t.Helper()
		child.send(`{"jsonrpc":"2.0","id":%d,"result":{}}`, gw)
		if _, err := c.wait(); err != nil {
			t.Fatal(err)
		}
	}
	first, gw1 := start(1)
	tr := w.currentChild().t.(*pipeTransport)
	if n := tr.gathered.Load(); n != 0 {
		t.Errorf("the child's only call was written through GatherMessage (%d)", n)
	}
	second, gw2 := start(2)
	if n := tr.gathered.Load(); n != 1 {
		t.Errorf("a call beside a pending one: %d writes through GatherMessage, want 1", n)
	}
	answer(first, gw1)
	answer(second, gw2)
	third, gw3 := start(3)
	answer(third, gw3)
	if n := tr.gathered.Load(); n != 1 {
		t.Errorf("a call alone again after the others were answered: %d writes through GatherMessage, want still 1", n)
	}
}

// A listen pending on a modern child, open for as long as its client
// stays, is no sign of calls arriving together: a call beside it alone is
// written at once.
func TestRequestsBesideAListenAreWrittenAtOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Options{Era: EraModern}, autoReply{discover: "result"})
	child := w.child()
	ctx, leave := context.WithCancel(context.Background())
	defer leave()
	listen(t, w, ctx, `"l"`, `{"toolsListChanged":true}`)
	child.expect("subscriptions/listen")
	c, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`), listenCaller)
	if err != nil {
		t.Fatal(err)
	}
	gw, _ := child.expect("tools/call").IDInt()
	if n := w.currentChild().t.(*pipeTransport).gathered.Load(); n != 0 {
		t.Errorf("a call beside a listen alone: %d writes through GatherMessage, want 0", n)
	}
	child.send(`{"jsonrpc":"2.0","id":%d,"result":{}}`, gw)
	if _, err := c.wait(); err != nil {
		t.Fatal(err)
	}
}

// 64 callers at once, with ids that collide across callers, each get their
// own answer even when the child answers out of order; the child sees 64
// distinct ids.
func TestConcurrentCallsWithCollidingIDs(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			clientID := strconv.Itoa(i % 8) // eight clients' worth of "1".."8"
			if i%3 == 0 {
				clientID = `"x"`
			}
			c, err := callOn(w.b, context.Background(), request(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"who":%d}}`, clientID, i)), Caller{})
			if err != nil {
				t.Error(err)
				return
			}
			resp, err := c.wait()
			if err != nil {
				t.Error(err)
				return
			}
			m, _ := jsonrpc.Parse(resp)
			if string(m.ID) != clientID || string(m.Result) != fmt.Sprintf(`{"who":%d}`, i) {
				t.Errorf("caller %d (id %s) got %s", i, clientID, resp)
			}
		})
	}
	var reqs []*jsonrpc.Message
	ids := map[string]bool{}
	for range n {
		m := child.expect("tools/call")
		if ids[string(m.ID)] {
			t.Fatalf("child saw id %s twice", m.ID)
		}
		ids[string(m.ID)] = true
		reqs = append(reqs, m)
	}
	rand.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
	for _, m := range reqs {
		child.send(`{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, m.Params)
	}
	wg.Wait()
	if p := w.b.Stats().Pending; p != 0 {
		t.Errorf("pending = %d after every call ended, want 0", p)
	}
}

// A caller that leaves is retired first; then the child is told, with the
// gateway's id; a late answer is dropped and counted.
func TestCancellationOnCallerLeaving(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	ctx, cancel := context.WithCancel(context.Background())
	c := w.call(ctx, `{"jsonrpc":"2.0","id":"mine","method":"tools/call","params":{"name":"slow"}}`)
	req := child.expect("tools/call")
	cancel()
	if _, err := c.wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	n := child.expect("notifications/cancelled")
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
	}
	json.Unmarshal(n.Params, &p)
	if string(p.RequestID) != string(req.ID) || p.Reason != "client disconnected" {
		t.Errorf("cancellation = %s, want requestId %s and reason \"client disconnected\"", n.Params, req.ID)
	}
	// The late answer, then one for a live call: once the live one arrives,
	// the reader has handled the late one.
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID)
	c2 := w.call(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	m := child.expect("tools/list")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`, m.ID)
	if _, err := c2.wait(); err != nil {
		t.Fatal(err)
	}
	if st := w.b.Stats(); st.LateResponses != 1 || st.Pending != 0 {
		t.Errorf("stats = %+v, want one late response and nothing pending", st)
	}
}

// A caller gone before the request was written never reaches the child, and
// so is never cancelled toward it.
func TestCallerGoneBeforeWriteNeverReachesChild(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := callOn(w.b, ctx, request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`), Caller{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Call with a done ctx = %v, want context.Canceled", err)
	}
	if st := w.b.Stats(); st.InFlight != 0 {
		t.Errorf("%d slots in use after a call that never reached the child, want 0", st.InFlight)
	}
	c := w.call(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	m := child.next()
	if m.Method != "tools/list" {
		t.Fatalf("child got %s first, want tools/list (the abandoned call must not reach it)", m.Raw)
	}
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
	c.wait()
}

// A caller that leaves while its request is being written: the request goes
// out whole and the cancellation follows it.
func TestCancellationFollowsAWriteInFlight(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := &world{t: t, children: make(chan *fakeChild, 8), gated: true, auto: autoReply{discover: "result"}}
		w.b = New(w.start, strict(t, Options{Era: EraModern}))
		child := <-w.children
		synctest.Wait() // the bridge is ready (its server/discover answered)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan *call)
		go func() {
			c, _ := callOn(w.b, ctx, request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`), Caller{})
			done <- c
		}()
		synctest.Wait() // the write is blocked: the child is not reading yet
		cancel()
		synctest.Wait()
		close(child.gate)
		c := <-done
		if c == nil {
			t.Fatal("Call failed although its request went out")
		}
		if _, err := c.wait(); !errors.Is(err, context.Canceled) {
			t.Errorf("Wait = %v, want context.Canceled", err)
		}
		req := child.expect("tools/call")
		n := child.expect("notifications/cancelled")
		if !contains(n.Params, `"requestId":`+string(req.ID)) {
			t.Errorf("cancellation %s does not name request %s", n.Params, req.ID)
		}
		w.b.Close(context.Background())
		child.exit()
	})
}

// Progress goes to the call whose token the child names, with the caller's
// own token (and its JSON type) restored; stray progress is dropped.
func TestProgressIsRoutedAndRestored(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	a := w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"tok-a"},"name":"slow"}}`)
	ra := child.expect("tools/call")
	b := w.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","_meta":{"progressToken":7}}}`)
	rb := child.expect("tools/call")
	quiet := w.call(context.Background(), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow"}}`)
	rq := child.expect("tools/call")
	if !a.Streams() || !b.Streams() || quiet.Streams() {
		t.Fatalf("Streams = %v %v %v, want true true false", a.Streams(), b.Streams(), quiet.Streams())
	}
	for _, r := range []*jsonrpc.Message{ra, rb} {
		tok, _, _ := jsonrpc.Lookup(r.Params, "_meta", "progressToken")
		if got := string(r.Params[tok.Start:tok.End]); got != string(r.ID) {
			t.Errorf("child saw progress token %s, want the gateway's %s", got, r.ID)
		}
	}
	progress := func(tok string, n int) {
		child.send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d,"total":3}}`, tok, n)
	}
	progress(string(ra.ID), 1)
	progress(string(rb.ID), 1)
	progress(string(rq.ID), 1) // the quiet call asked for none
	progress("999999", 1)      // nobody's
	progress(string(ra.ID), 2)
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, ra.ID)
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, rb.ID)
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, rq.ID)
	progress(string(ra.ID), 3) // after the end

	collect := func(c *call) []string {
		var notes []string
		for {
			<-c.Wake()
			ns, _, done, err := c.Take()
			for _, n := range ns {
				notes = append(notes, string(n))
			}
			if done {
				if err != nil {
					t.Error(err)
				}
				return notes
			}
		}
	}
	wantA := []string{
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok-a","progress":1,"total":3}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok-a","progress":2,"total":3}}`,
	}
	wantB := []string{`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1,"total":3}}`}
	if got := collect(a); fmt.Sprint(got) != fmt.Sprint(wantA) {
		t.Errorf("call a got %q\nwant %q", got, wantA)
	}
	if got := collect(b); fmt.Sprint(got) != fmt.Sprint(wantB) {
		t.Errorf("call b got %q\nwant %q", got, wantB)
	}
	if got := collect(quiet); len(got) != 0 {
		t.Errorf("the call without a token got progress %q", got)
	}
}

// Progress that the caller is slow to take is coalesced, never reordered and
// never blocks the reader; the final response always gets through.
func TestSlowConsumerProgressIsCoalesced(t *testing.T) {
	t.Parallel()
	opts := legacy()
	opts.MaxNotes = 4
	w := newWorld(t, opts, autoReply{initialize: true})
	child := w.child()
	c3 := w.call(context.Background(), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"progressToken":3}}}`)
	r3 := child.expect("tools/call")
	for i := 1; i <= 100; i++ {
		child.send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d}}`, r3.ID, i)
	}
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, r3.ID)
	// Nobody takes anything until the call has ended.
	for {
		<-c3.Wake()
		c3.box.mu.Lock()
		done := c3.box.done
		c3.box.mu.Unlock()
		if done {
			break
		}
	}
	notes, resp, done, err := c3.Take()
	if !done || err != nil || resp == nil {
		t.Fatalf("Take = done %v, %v", done, err)
	}
	if len(notes) != 4 {
		t.Fatalf("kept %d notes, want the limit of 4", len(notes))
	}
	last := -1
	for _, n := range notes {
		var p struct {
			Params struct{ Progress int } `json:"params"`
		}
		json.Unmarshal(n, &p)
		if p.Params.Progress <= last {
			t.Errorf("progress went from %d to %d: reordered", last, p.Params.Progress)
		}
		last = p.Params.Progress
	}
	if last != 100 {
		t.Errorf("last progress kept = %d, want the latest, 100", last)
	}
}

// A client that leaves while it updates or cancels a task does not cancel
// that request on the child: the update or the cancellation must still
// take effect. A look at a task (tasks/get) is cancelled as any request:
// the poll ends, the task runs on.
func TestTaskRequestsWhenTheClientLeaves(t *testing.T) {
	t.Parallel()
	for method, cancelled := range map[string]bool{"tasks/update": false, "tasks/cancel": false, "tasks/get": true} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, Options{Era: EraAuto}, autoReply{discover: "result"})
			child := w.child()
			ctx, leave := context.WithCancel(context.Background())
			c, err := callOn(w.b, ctx, request(t, `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{"taskId":"t1"}}`), Caller{Modern: true})
			if err != nil {
				t.Fatal(err)
			}
			sent := child.expect(method)
			leave()
			c.wait()
			// Until the next call reaches the child, it sees the
			// cancellation or nothing (the cancellation may go out after
			// the call, when the pipe does not take it at once).
			c2 := w.call(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
			gotCancel := false
			for {
				m := child.next()
				if m.Method == "tools/list" {
					child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
					break
				}
				if m.Method != "notifications/cancelled" || !contains(m.Params, `"requestId":`+string(sent.ID)) {
					t.Fatalf("child got %s", m.Raw)
				}
				gotCancel = true
			}
			c2.wait()
			if cancelled && !gotCancel {
				m := child.next()
				if m.Method != "notifications/cancelled" || !contains(m.Params, `"requestId":`+string(sent.ID)) {
					t.Fatalf("child got %s, want the cancellation of %s", m.Raw, method)
				}
			}
			// Whatever else the child gets before its input closes.
			w.b.Close(context.Background())
			for m := range child.got {
				gotCancel = gotCancel || (m.Method == "notifications/cancelled" && contains(m.Params, `"requestId":`+string(sent.ID)))
			}
			if !cancelled && gotCancel {
				t.Errorf("the child was told to cancel %s", method)
			}
		})
	}
}
