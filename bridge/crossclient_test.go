package bridge

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// leaked fails the test if any of the notes a call's client got holds
// secret.
func leaked(t *testing.T, who string, notes [][]byte, secret string) {
	t.Helper()
	for _, n := range notes {
		if strings.Contains(string(n), secret) {
			t.Errorf("%s got another client's message: %s", who, n)
		}
	}
}

// A 2026 child's log line, written for a call whose client left before
// the child read the cancellation, must not reach the next call that asked
// for logs. (This child is too busy to answer the probe that would show
// it took the cancellation: see cancelled.)
func TestModernChildLogOfALeftCallIsNotRelayed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, Options{Era: EraModern, IdleTimeout: time.Minute}, autoReply{discover: "result", ignorePing: true})
	child := w.child()
	gone, leave := context.WithCancel(context.Background())
	a, err := callOn(w.b, gone, request(t, `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"slow"}}`), Caller{Modern: true, LogLevel: "debug"})
	if err != nil {
		t.Fatal(err)
	}
	child.expect("tools/call")
	leave()
	a.wait()
	child.expect("notifications/cancelled")
	b, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"quick"}}`), Caller{Modern: true, LogLevel: "debug"})
	if err != nil {
		t.Fatal(err)
	}
	mb := child.expect("tools/call")
	child.send(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","data":"A's secret"}}`)
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, mb.ID)
	notes, _ := drain(t, b)
	leaked(t, "B", notes, "A's secret")
}

// While the gateway's own request is in flight (here the resources/subscribe
// it makes for client L's listen), a 2025 child's question or log line may
// be about it: it reaches neither the one client call in flight (M) nor
// anyone else.
func TestQuestionDuringTheGatewaysOwnRequest(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	asker := legacyStreamer
	asker.LogLevel = "debug"
	m, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":"m","method":"tools/call","params":{"name":"quick"}}`), asker)
	if err != nil {
		t.Fatal(err)
	}
	set := child.expect("logging/setLevel")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, set.ID)
	reqM := child.expect("tools/call")
	l := listen(t, w, context.Background(), `"L"`, `{"resourceSubscriptions":["secret://L-private-doc"]}`)
	sub := child.expect("resources/subscribe")
	child.send(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"subscribed secret://L-private-doc"}}`)
	child.send(`{"jsonrpc":"2.0","id":"q1","method":"elicitation/create","params":{"message":"Allow secret://L-private-doc?","requestedSchema":{"type":"object","properties":{}}}}`)
	refusedChild(t, child, `"q1"`, "in flight")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, sub.ID)
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, reqM.ID)
	notes, _ := drain(t, m)
	leaked(t, "M", notes, "L-private-doc")
	l.Cancel("")
	l.wait()
}

// A 2025-11-25 task runs on after its tools/call was answered. A question
// the child asks for it (naming it in _meta related-task) goes only to a
// request about that task, such as its client's tasks/result: never to
// another call that happens to be alone in flight.
func TestTaskQuestionGoesOnlyToItsTask(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	a, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"long","task":{"ttl":60000}}}`), legacyStreamer)
	if err != nil {
		t.Fatal(err)
	}
	ra := child.expect("tools/call")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"task":{"taskId":"t-A","status":"working","createdAt":"2025-01-01T00:00:00Z","ttl":60000}}}`, ra.ID)
	a.wait()
	const question = `{"jsonrpc":"2.0","id":%q,"method":"elicitation/create","params":{"message":"confirm A's secret","requestedSchema":{"type":"object","properties":{}},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t-A"}}}}`

	logger := legacyStreamer
	logger.LogLevel = "debug"
	m, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":"m","method":"tools/call","params":{"name":"quick"}}`), logger)
	if err != nil {
		t.Fatal(err)
	}
	set := child.expect("logging/setLevel")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, set.ID)
	rm := child.expect("tools/call")
	child.send(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","data":"A's secret in a log","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t-A"}}}}`)
	child.send(question, "q1")
	refusedChild(t, child, `"q1"`, "task")
	// Named twice, the task is unclear: refused as well.
	child.send(`{"jsonrpc":"2.0","id":"q1b","method":"elicitation/create","params":{"message":"A's secret again","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t-A"},"io.modelcontextprotocol/related-task":{"taskId":"t-A"}}}}`)
	refusedChild(t, child, `"q1b"`, "task")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, rm.ID)
	notes, _ := drain(t, m)
	leaked(t, "M", notes, "A's secret")

	// The task's own client, waiting on tasks/result, is asked.
	r, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":"r","method":"tasks/result","params":{"taskId":"t-A"}}`), legacyStreamer)
	if err != nil {
		t.Fatal(err)
	}
	rr := child.expect("tasks/result")
	child.send(question, "q2")
	if q := nextNote(t, r); q.Method != "elicitation/create" || !contains(q.Params, "A's secret") {
		t.Fatalf("the task's client got %s, want its question", q.Raw)
	}
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, rr.ID)
	r.wait()
}

// A request whose method is a notification's (one with an id) is refused:
// forwarded, a child that goes by the method could take a client's
// notifications/cancelled naming another client's request (the gateway's
// ids are sequential) as a cancellation.
func TestRequestNamedAsANotificationIsRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, legacy(), autoReply{initialize: true})
	child := w.child()
	_, err := callOn(w.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":"x","method":"notifications/cancelled","params":{"requestId":3}}`), legacyStreamer)
	if e, ok := errors.AsType[*jsonrpc.Error](err); !ok || e.Code != jsonrpc.CodeInvalidRequest {
		t.Errorf("a request named notifications/cancelled: %v, want invalid request", err)
	}
	c := w.call(context.Background(), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	next := child.expect("tools/list")
	child.send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`, next.ID)
	c.wait()
}
