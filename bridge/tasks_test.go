package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stdiomcp/gateway/internal/gatewaytest"
	"github.com/stdiomcp/gateway/jsonrpc"
)

// gotBy waits for the next request one of the children gets (handshakes
// and probes aside) and says whose it was.
func gotBy(t *testing.T, children []*fakeChild) (*fakeChild, *jsonrpc.Message) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m := <-children[0].got:
			if !isHandshake(m) {
				return children[0], m
			}
		case m := <-children[1].got:
			if !isHandshake(m) {
				return children[1], m
			}
		case <-timeout:
			t.Fatal("no child got a request")
		}
	}
}

func isHandshake(m *jsonrpc.Message) bool {
	switch m.Method {
	case "server/discover", "initialize", "notifications/initialized", "ping":
		return true
	}
	return false
}

// A task lives in the child that created it: with two workers, every
// request about it goes to that child, though the other is as idle (ties
// between workers alternate, so without this half would go astray).
func TestTaskRequestsReachTheChildThatHoldsTheTask(t *testing.T) {
	t.Parallel()
	for name, created := range map[string]string{
		"2025-11-25": `{"task":{"taskId":"T-1","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000}}`,
		"2026-07-28": `{"resultType":"task","taskId":"T-1","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttlMs":null}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, children := newPoolWorld(t, Options{Era: EraLegacy, Workers: 2}, autoReply{initialize: true})
			c := poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job","task":{}}}`)
			home, m := gotBy(t, children)
			home.send(`{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, created)
			if resp, err := c.wait(); err != nil || !contains(resp, `"T-1"`) {
				t.Fatalf("tools/call: %s, %v", resp, err)
			}
			for i, method := range []string{"tasks/get", "tasks/get", "tasks/result", "tasks/update", "tasks/cancel", "tasks/get"} {
				c := poolCall(t, p, context.Background(), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"taskId":"T-1"}}`, 10+i, method))
				ch, m := gotBy(t, children)
				if ch != home {
					t.Errorf("%s %d reached the child that does not hold the task", method, i)
				}
				ch.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
				if _, err := c.wait(); err != nil {
					t.Fatalf("%s: %v", method, err)
				}
			}
			// A task nobody recorded goes to either, as any request does.
			seen := map[*fakeChild]bool{}
			for i := range 4 {
				c := poolCall(t, p, context.Background(), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tasks/get","params":{"taskId":"other"}}`, 20+i))
				ch, m := gotBy(t, children)
				seen[ch] = true
				ch.send(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"unknown task"}}`, m.ID)
				c.wait()
			}
			if len(seen) != 2 {
				t.Errorf("requests for an unknown task went to %d children, want both", len(seen))
			}
		})
	}
}

// A request for a task whose child is full waits for that child, and the
// calls queued behind it that can go anywhere are not held up by it.
func TestTaskRequestWaitsForItsChildAlone(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, children := bubblePool(t, Options{Workers: 2, MaxInFlight: 1, QueueSize: 4})
		only := func(what string) (*fakeChild, *jsonrpc.Message) {
			t.Helper()
			return onlyOne(t, children, received, what)
		}
		c := poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job","task":{}}}`)
		home, m := only("tools/call")
		home.send(`{"jsonrpc":"2.0","id":%s,"result":{"task":{"taskId":"T-2","status":"working"}}}`, m.ID)
		if _, err := c.wait(); err != nil {
			t.Fatal(err)
		}
		// Fill the task's child, then ask about the task: it queues.
		var busy *call
		var busyOn *fakeChild
		var busyMsg *jsonrpc.Message
		for i := 0; busyOn != home; i++ {
			if busy != nil { // it landed on the other child: end it and try again
				busyOn.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, busyMsg.ID)
				busy.wait()
			}
			busy = poolCall(t, p, context.Background(), fmt.Sprintf(`{"jsonrpc":"2.0","id":"busy%d","method":"tools/call"}`, i))
			busyOn, busyMsg = only("busy")
		}
		get := make(chan *call, 1)
		go func() {
			get <- poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":"get","method":"tasks/get","params":{"taskId":"T-2"}}`)
		}()
		synctest.Wait()
		if q := p.Stats().Queued; q != 1 {
			t.Fatalf("%d calls queued, want the task's request", q)
		}
		// A call for any child gets past it, to the other child's free slot.
		other := poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":"other","method":"tools/call"}`)
		ch, m := only("other")
		if ch == home {
			t.Fatalf("the call behind the task's request went to the full child")
		}
		ch.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
		other.wait()
		// The task's child frees its slot: the request reaches it.
		home.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, busyMsg.ID)
		busy.wait()
		ch, m = only("tasks/get")
		if ch != home || m.Method != "tasks/get" {
			t.Fatalf("the task's request reached the wrong child, or %s came instead", m.Method)
		}
		ch.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
		(<-get).wait()
	})
}

// A listen for a task's notifications opens on the child that holds it.
func TestTaskListenOpensOnTheChildThatHoldsTheTask(t *testing.T) {
	t.Parallel()
	p, children := newPoolWorld(t, Options{Era: EraAuto, Workers: 2}, autoReply{discover: "result"})
	modern := Caller{Modern: true, Capabilities: []byte(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`)}
	c, err := callOn(p, context.Background(), request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job"}}`), modern)
	if err != nil {
		t.Fatal(err)
	}
	home, m := gotBy(t, children)
	home.send(`{"jsonrpc":"2.0","id":%s,"result":{"resultType":"task","taskId":"T-3","status":"working","ttlMs":null}}`, m.ID)
	if _, err := c.wait(); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		ctx, leave := context.WithCancel(context.Background())
		l, err := callOn(p, ctx, request(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":"l%d","method":"subscriptions/listen","params":{"notifications":{"taskIds":["unknown","T-3"]}}}`, i)), modern)
		if err != nil {
			t.Fatal(err)
		}
		ch, m := gotBy(t, children)
		if ch != home || m.Method != "subscriptions/listen" {
			t.Errorf("listen %d: %s reached the child that does not hold the task", i, m.Method)
		}
		leave()
		l.wait()
		if m := ch.next(); m.Method != "notifications/cancelled" {
			t.Fatalf("child got %s, want the listen's cancellation", m.Raw)
		}
	}
}

// A 2026 client's request about a 2025 child's task is refused: the
// child's tasks are 2025-11-25's, not the extension's.
func TestModernClientGetsNoLegacyTasks(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	w.child()
	for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		_, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{"taskId":"t"}}`), Caller{Modern: true})
		if e, ok := errors.AsType[*jsonrpc.Error](err); !ok || e.Code != jsonrpc.CodeMethodNotFound {
			t.Errorf("%s: %v, want method not found", method, err)
		}
	}
}

// A 2026 client cannot ask a 2025 child for a task with 2025-11-25's
// params.task (2026-07-28 has no such opt-in): the child never sees it,
// and would answer in a shape the client cannot read. A 2025 client can.
func TestModernClientCannotOptIntoLegacyTask(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	ch := w.child()
	const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","task":{"ttl":60000}}}`
	_, err := callOn(w.b, context.Background(), request(t, call), Caller{Modern: true})
	if e, ok := errors.AsType[*jsonrpc.Error](err); !ok || e.Code != jsonrpc.CodeInvalidParams || !strings.Contains(e.Message, "params.task") {
		t.Fatalf("a 2026 client's params.task: %v, want invalid params naming it", err)
	}
	c, err := callOn(w.b, context.Background(), request(t, call), Caller{})
	if err != nil {
		t.Fatal(err)
	}
	if m := ch.next(); m.Method != "tools/call" || !strings.Contains(string(m.Raw), `"task":{"ttl":60000}`) {
		t.Fatalf("child got %s first, want the 2025 client's task-augmented call", m.Raw)
	} else {
		ch.send(`{"jsonrpc":"2.0","id":%s,"result":{"task":{"taskId":"t","status":"working"}}}`, m.ID)
	}
	if _, err := c.wait(); err != nil {
		t.Fatal(err)
	}
}

// The tasks remembered are bounded: the oldest is forgotten first, and an
// id too long to keep is not kept.
func TestTaskHomesAreBounded(t *testing.T) {
	var homes taskHomes
	w := &worker{}
	created := func(id string) *jsonrpc.Message {
		return &jsonrpc.Message{Result: []byte(`{"resultType":"task","taskId":"` + id + `"}`)}
	}
	for i := range maxTaskHomes + 2 {
		homes.record(w, created(fmt.Sprint(i)))
	}
	homes.record(w, created("2")) // known: stays where it was in line
	if homes.home("0") != nil || homes.home("1") != nil || homes.home("2") != w || homes.home(fmt.Sprint(maxTaskHomes+1)) != w {
		t.Error("the oldest tasks were not the ones forgotten")
	}
	if len(homes.homes) != maxTaskHomes || len(homes.order) != maxTaskHomes {
		t.Errorf("%d tasks remembered (%d in line), want %d", len(homes.homes), len(homes.order), maxTaskHomes)
	}
	long := strings.Repeat("x", maxTaskID+1)
	homes.record(w, created(long))
	if homes.home(long) != nil {
		t.Error("a task id longer than maxTaskID was remembered")
	}
}

// Two children that mint the same task id cannot both be routed to: the
// newer task's child gets the requests, and the log says why the older
// one's go astray.
func TestTaskIDsThatClash(t *testing.T) {
	t.Parallel()
	var log gatewaytest.LockedBuffer
	p, children := newPoolWorld(t, Options{Era: EraLegacy, Workers: 2, Logger: slog.New(slog.NewTextHandler(&log, nil))}, autoReply{initialize: true})
	// Two calls in flight at once, one on each child; the second answered
	// last, so that its task is the newer.
	a := poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job","task":{}}}`)
	older, ma := gotBy(t, children)
	b := poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"job","task":{}}}`)
	newer, mb := gotBy(t, children)
	if older == newer {
		t.Fatal("both calls went to one child")
	}
	for _, x := range []struct {
		ch *fakeChild
		m  *jsonrpc.Message
		c  *call
	}{{older, ma, a}, {newer, mb, b}} {
		x.ch.send(`{"jsonrpc":"2.0","id":%s,"result":{"task":{"taskId":"1","status":"working"}}}`, x.m.ID)
		if _, err := x.c.wait(); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(log.String(), "two children created tasks with the same id") || !strings.Contains(log.String(), "level=WARN") {
		t.Errorf("the clash was not logged at warn:\n%s", log.String())
	}
	c := poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"1"}}`)
	ch, m := gotBy(t, children)
	if ch != newer {
		t.Error("the request went to the child of the older task")
	}
	ch.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
	c.wait()
}

// taskOnOneChild has a child of the bubble's pool create task id, and
// returns that child.
func taskOnOneChild(t *testing.T, p *Bridge, children []*fakeChild, id string) *fakeChild {
	t.Helper()
	c := poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job","task":{}}}`)
	synctest.Wait()
	var home *fakeChild
	var m *jsonrpc.Message
	for _, ch := range children {
		if got := received(ch); len(got) == 1 {
			home, m = ch, got[0]
		}
	}
	if home == nil {
		t.Fatal("no child got the tools/call")
	}
	home.send(`{"jsonrpc":"2.0","id":%s,"result":{"task":{"taskId":%q,"status":"working"}}}`, m.ID, id)
	if _, err := c.wait(); err != nil {
		t.Fatal(err)
	}
	return home
}

// A request for a task whose child stays full is refused after the queue
// timeout, saying it waited for that child, while the other was free.
func TestTaskRequestTimesOutWaitingForItsChild(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, children := bubblePool(t, Options{Workers: 2, MaxInFlight: 1, QueueSize: 4, QueueTimeout: 3 * time.Second})
		taskOnOneChild(t, p, children, "T-4")
		// Fill the task's child: pinned to it by the task it asks about.
		busy := poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":"busy","method":"tasks/result","params":{"taskId":"T-4"}}`)
		start := time.Now()
		_, err := callOn(p, context.Background(), request(t, `{"jsonrpc":"2.0","id":"get","method":"tasks/get","params":{"taskId":"T-4"}}`), Caller{})
		if code := gatewayCode(t, err); code != jsonrpc.CodeOverloaded || !strings.Contains(err.Error(), "the child that holds the task") || time.Since(start) != 3*time.Second {
			t.Errorf("after %v: %v; want -32003 naming the task's child after the queue timeout", time.Since(start), err)
		}
		busy.Cancel("")
		busy.wait()
	})
}

// A queue that holds only requests waiting for a full child takes a call
// that another, idle child can serve at once: it is not refused as if
// every child were full, and never waits.
func TestQueueOfTaskRequestsLetsOtherCallsBy(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, children := bubblePool(t, Options{Workers: 2, MaxInFlight: 1, QueueSize: 1})
		home := taskOnOneChild(t, p, children, "T-9")
		busy := poolCall(t, p, context.Background(), `{"jsonrpc":"2.0","id":"busy","method":"tasks/result","params":{"taskId":"T-9"}}`)
		synctest.Wait()
		received(home)
		waiting := make(chan error, 1)
		go func() {
			_, err := callOn(p, context.Background(), request(t, `{"jsonrpc":"2.0","id":"get","method":"tasks/get","params":{"taskId":"T-9"}}`), Caller{})
			waiting <- err
		}()
		synctest.Wait()
		if q := p.Stats().Queued; q != 1 {
			t.Fatalf("%d calls queued, want the task's request", q)
		}
		free, err := callOn(p, context.Background(), request(t, `{"jsonrpc":"2.0","id":"free","method":"tools/call","params":{"name":"x"}}`), Caller{})
		if err != nil {
			t.Fatalf("a call for any child, with one child idle, was refused: %v", err)
		}
		free.Cancel("")
		free.wait()
		busy.Cancel("")
		busy.wait()
		if err := <-waiting; err != nil {
			t.Errorf("the task's request: %v", err)
		}
	})
}
