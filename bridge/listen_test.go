package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stdiomcp/gateway/jsonrpc"
)

var listenCaller = Caller{Modern: true, Capabilities: json.RawMessage(`{}`), CanStream: true}

func listen(t *testing.T, w *world, ctx context.Context, id, filter string) *call {
	t.Helper()
	c, err := callOn(w.b, ctx, request(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"subscriptions/listen","params":{"notifications":`+filter+`}}`), listenCaller)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Streams() {
		t.Error("a listen does not stream")
	}
	return c
}

// A listen on a legacy child is built by the gateway: acknowledged first
// with what the child can deliver, fed by the child's list_changed
// notifications, tagged with each listener's own id; resource
// subscriptions on the child are counted across listeners.
func TestListenOnALegacyChild(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	ctxA, leaveA := context.WithCancel(context.Background())
	a := listen(t, w, ctxA, `"a"`, `{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["file:///x"]}`)
	ack := nextNote(t, a)
	if ack.Method != "notifications/subscriptions/acknowledged" ||
		string(ack.Params) != `{"_meta":{"io.modelcontextprotocol/subscriptionId":"a"},"notifications":{"toolsListChanged":true,"resourceSubscriptions":["file:///x"]}}` {
		t.Errorf("ack = %s; want the honoured part (the child has no prompts.listChanged)", ack.Params)
	}
	if sub := child.expect("resources/subscribe"); string(sub.Params) != `{"uri":"file:///x"}` {
		t.Errorf("subscribe params %s", sub.Params)
	} else {
		child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, sub.ID)
	}
	b := listen(t, w, context.Background(), `7`, `{"toolsListChanged":true,"resourceSubscriptions":["file:///x"]}`)
	nextNote(t, b) // its ack; the child is already subscribed to file:///x

	child.send(`{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}`)
	child.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	child.send(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///x"}}`)
	for _, tc := range []struct {
		c  *call
		id string
	}{{a, `"a"`}, {b, `7`}} {
		got := nextNote(t, tc.c)
		if got.Method != "notifications/tools/list_changed" || string(got.Params) != `{"_meta":{"io.modelcontextprotocol/subscriptionId":`+tc.id+`}}` {
			t.Errorf("listener %s got %s", tc.id, got.Raw)
		}
		got = nextNote(t, tc.c)
		if got.Method != "notifications/resources/updated" || string(got.Params) != `{"_meta":{"io.modelcontextprotocol/subscriptionId":`+tc.id+`},"uri":"file:///x"}` {
			t.Errorf("listener %s got %s", tc.id, got.Raw)
		}
	}
	// The first listener leaves: the child stays subscribed for the second.
	leaveA()
	if _, err := a.wait(); err == nil {
		t.Error("a listen whose client left ended without an error")
	}
	b.Cancel("")
	b.wait()
	if unsub := child.expect("resources/unsubscribe"); string(unsub.Params) != `{"uri":"file:///x"}` {
		t.Errorf("unsubscribe params %s", unsub.Params)
	}
	// A filter of other types than the schema's is refused: acknowledged
	// as asking for nothing, its client would wait for what never comes.
	var e *jsonrpc.Error
	if _, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":8,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":"yes"}}}`), listenCaller); !errors.As(err, &e) || e.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("a listen with toolsListChanged \"yes\": %v; want -32602", err)
	}
}

// A listen on a modern child is relayed, with the subscription id
// rewritten both ways; the client leaving cancels it on the child, and the
// child ending it completes the client's.
func TestListenOnAModernChild(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Options{Era: EraModern}, autoReply{discover: "result"})
	child := w.child()
	ctx, leave := context.WithCancel(context.Background())
	a := listen(t, w, ctx, `"mine"`, `{"toolsListChanged":true}`)
	req := child.expect("subscriptions/listen")
	child.send(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":%s},"notifications":{"toolsListChanged":true}}}`, req.ID)
	child.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}`, req.ID)
	child.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":999}}}`)
	for _, want := range []string{"notifications/subscriptions/acknowledged", "notifications/tools/list_changed"} {
		got := nextNote(t, a)
		if got.Method != want || !contains(got.Params, `"io.modelcontextprotocol/subscriptionId":"mine"`) {
			t.Errorf("client got %s, want %s tagged with its own id", got.Raw, want)
		}
	}
	leave()
	a.wait()
	if n := child.expect("notifications/cancelled"); !contains(n.Params, `"requestId":`+string(req.ID)) {
		t.Errorf("cancellation = %s", n.Params)
	}

	b := listen(t, w, context.Background(), `2`, `{"promptsListChanged":true}`)
	req = child.expect("subscriptions/listen")
	child.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s,"reason":"shutting down"}}`, req.ID)
	resp, err := b.wait()
	m, _ := jsonrpc.Parse(resp)
	if err != nil || string(m.ID) != "2" || string(m.Result) != `{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":2}}` {
		t.Errorf("a listen the child ended: %s, %v", resp, err)
	}
}

// A listener that falls MaxNotes notifications behind is ended with an
// error, and stops costing the gateway anything; listeners that keep up
// are not affected.
func TestListenerThatFallsBehindIsEnded(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Options{Era: EraLegacy, MaxNotes: 4}, autoReply{initialize: true})
	child := w.child()
	slow := listen(t, w, context.Background(), `"slow"`, `{"toolsListChanged":true}`)
	keeping := listen(t, w, context.Background(), `"keeping"`, `{"toolsListChanged":true}`)
	nextNote(t, keeping) // its ack
	for i := range 6 {
		child.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
		if got := nextNote(t, keeping); got.Method != "notifications/tools/list_changed" {
			t.Fatalf("notification %d: the listener that keeps up got %s", i, got.Raw)
		}
	}
	_, err := slow.wait()
	if gatewayCode(t, err) != jsonrpc.CodeOverloaded || !strings.Contains(err.Error(), "behind") {
		t.Errorf("the slow listener ended with %v, want -32003 saying it fell behind", err)
	}
	ch := w.currentChild()
	ch.mu.Lock()
	n := len(ch.listeners)
	ch.mu.Unlock()
	if n != 1 {
		t.Errorf("%d listeners left, want only the one that keeps up", n)
	}
}

// When the child exits, every listen ends with child_unavailable, built
// and relayed alike, so that clients listen again on the next child.
func TestListensEndWhenTheChildExits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		era  Era
		auto autoReply
	}{{EraLegacy, autoReply{initialize: true}}, {EraModern, autoReply{discover: "result"}}} {
		t.Run(string(tc.era), func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, Options{Era: tc.era}, tc.auto)
			child := w.child()
			l := listen(t, w, context.Background(), `"l"`, `{"toolsListChanged":true}`)
			if tc.era == EraModern {
				child.expect("subscriptions/listen")
			}
			child.exit()
			_, err := l.wait()
			if gatewayCode(t, err) != jsonrpc.CodeUnavailable || !strings.Contains(err.Error(), "listen again") {
				t.Errorf("the listen ended with %v, want child_unavailable asking to listen again", err)
			}
		})
	}
}

// A legacy child's subscription to a resource follows its listeners, one
// change at a time: a listener that comes and goes before the child was
// told costs nothing, and one that goes while the child is being told is
// followed by an unsubscribe.
func TestSubscriptionFollowsItsListeners(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	if err := w.b.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	ch := w.currentChild()
	count := func(delta int) int {
		ch.mu.Lock()
		defer ch.mu.Unlock()
		return ch.countLocked([]string{"r"}, delta)
	}
	state := func() (listeners int, onChild, syncing bool) {
		ch.mu.Lock()
		defer ch.mu.Unlock()
		return ch.subscribed["r"], ch.onChild["r"], ch.syncing["r"]
	}
	// Comes and goes before the sync runs: nothing is sent.
	if more := count(+1); more != 1 {
		t.Fatalf("the first listener started %d syncers, want 1", more)
	}
	if more := count(-1); more != 0 {
		t.Fatalf("a second syncer started beside the first: %d", more)
	}
	ch.syncQueued()
	if n, on, syncing := state(); n != 0 || on || syncing {
		t.Errorf("after a listener came and went: %d listeners, on the child %v, syncing %v", n, on, syncing)
	}
	// Goes while the child is being told: the sync follows with an
	// unsubscribe.
	count(+1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ch.syncQueued()
	}()
	sub := child.expect("resources/subscribe")
	count(-1)
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, sub.ID)
	unsub := child.expect("resources/unsubscribe")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, unsub.ID)
	<-done
	if n, on, syncing := state(); n != 0 || on || syncing {
		t.Errorf("after a listener left while the child was told: %d listeners, on the child %v, syncing %v", n, on, syncing)
	}
}

// Listens that come and go faster than a legacy child answers keep at
// most maxSyncers of the gateway's own requests waiting on the child,
// however many resources they name: the rest wait in a queue, each once,
// and a resource whose listener left before its turn costs the child
// nothing. Once the child answers, the queue drains and the child is left
// subscribed to nothing.
func TestSubscriptionChurnIsBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := &world{t: t, children: make(chan *fakeChild, 8), auto: autoReply{initialize: true}}
		w.b = New(w.start, strict(t, legacy()))
		defer w.b.Close(context.Background())
		child := <-w.children
		defer child.exit()
		if err := w.b.WaitReady(context.Background()); err != nil {
			t.Fatal(err)
		}
		// What the child has been sent and not answered.
		unanswered := func() []*jsonrpc.Message {
			synctest.Wait()
			var batch []*jsonrpc.Message
			for len(child.got) > 0 {
				if m := <-child.got; m.Method != "initialize" && m.Method != "notifications/initialized" {
					batch = append(batch, m)
				}
			}
			if len(batch) > maxSyncers {
				t.Fatalf("%d requests waited on the child at once, want at most %d", len(batch), maxSyncers)
			}
			return batch
		}
		const listens = 40
		var leave []context.CancelFunc
		var ls []*call
		for i := range listens {
			ctx, cancel := context.WithCancel(context.Background())
			l := listen(t, w, ctx, strconv.Itoa(i+1), fmt.Sprintf(`{"resourceSubscriptions":["file:///r%d"]}`, i))
			nextNote(t, l) // its acknowledgement
			leave, ls = append(leave, cancel), append(ls, l)
		}
		first := unanswered()
		for i, l := range ls {
			leave[i]()
			l.wait()
		}
		asked := map[string]int{}
		for batch := first; len(batch) > 0; batch = unanswered() {
			for _, m := range batch {
				asked[m.Method]++
				child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
			}
		}
		// The first syncers had taken a resource each when the listeners
		// left: subscribed, then unsubscribed. The others cost nothing.
		if want := map[string]int{"resources/subscribe": maxSyncers, "resources/unsubscribe": maxSyncers}; !maps.Equal(asked, want) {
			t.Errorf("the child was asked %v, want %v", asked, want)
		}
		ch := w.currentChild()
		ch.mu.Lock()
		defer ch.mu.Unlock()
		if len(ch.subscribed) != 0 || len(ch.onChild) != 0 || len(ch.syncing) != 0 || len(ch.toSync) != 0 || ch.syncers != 0 {
			t.Errorf("after the churn: %d resources listened to, %d subscribed on the child, %d syncing, %d queued, %d syncers",
				len(ch.subscribed), len(ch.onChild), len(ch.syncing), len(ch.toSync), ch.syncers)
		}
	})
}
