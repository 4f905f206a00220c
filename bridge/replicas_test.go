package bridge

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// Gateway processes that share a key, as replicas behind a balancer do:
// what one process holds (a parked call, a question asked of a client) is
// never taken by another, which says where it belongs.

// An answer that reaches another gateway process than the one whose child
// asked (a balancer's doing) is refused, saying so, and the question stays
// open for the answer where it was asked.
func TestAnswerElsewhereIsRefused(t *testing.T) {
	t.Parallel()
	a := newWorld(t, legacy(), autoReply{initialize: true})
	b := newWorld(t, legacy(), autoReply{initialize: true})
	child := a.child()
	c, err := callOn(a.b, context.Background(), request(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_sampling"}}`), legacyStreamer)
	if err != nil {
		t.Fatal(err)
	}
	child.expect("tools/call")
	child.send(`{"jsonrpc":"2.0","id":"child-q","method":"sampling/createMessage","params":{"maxTokens":5}}`)
	q := nextNote(t, c)
	answer, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":` + string(q.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"hi"}}}`))
	err = b.b.Respond(context.Background(), answer)
	var e *jsonrpc.Error
	if !errors.As(err, &e) || !strings.Contains(string(e.Data), `"reason":"answered_elsewhere"`) {
		t.Fatalf("an answer on another process: %v", err)
	}
	if err := a.b.Respond(context.Background(), answer); err != nil {
		t.Fatal(err)
	}
	if got := child.next(); string(got.ID) != `"child-q"` {
		t.Errorf("child got %s, want the answer", got.Raw)
	}
	c.Cancel("done")
}

// Replicas that share a key tell a parked call's requestState from a
// forged one, and a retry that reaches the wrong replica is told at once
// where its call waits, without touching that replica's child; the call
// still resumes where it was parked.
func TestParkedCallResumesOnlyWhereItWaits(t *testing.T) {
	t.Parallel()
	key := []byte("the key that replicas share, 32+")
	opts := legacy()
	opts.StateKey = key
	a := newWorld(t, opts, autoReply{initialize: true})
	b := newWorld(t, opts, autoReply{initialize: true})
	other := legacy()
	other.StateKey = []byte("another key for another gateway!")
	c := newWorld(t, other, autoReply{initialize: true})
	childA, childB := a.child(), b.child()
	firstA, state := park(t, a, childA)
	// The other replica has a call parked too, under the same gateway id
	// (replicas count alike): it must not be the one that resumes.
	if firstB, _ := park(t, b, childB); string(firstB.ID) != string(firstA.ID) {
		t.Fatalf("the replicas' exchanges have ids %s and %s; the test needs them alike", firstA.ID, firstB.ID)
	}

	retry := `{"jsonrpc":"2.0","id":"second","method":"tools/call","params":{"name":"ask","inputResponses":{"q":{"action":"accept"}},"requestState":"` + state + `"}}`
	_, err := callOn(b.b, context.Background(), request(t, retry), modernAsker)
	var e *jsonrpc.Error
	if !errors.As(err, &e) || e.Code != jsonrpc.CodeInvalidParams || !strings.Contains(string(e.Data), `"reason":"parked_elsewhere"`) || !strings.Contains(e.Message, "another gateway process") {
		t.Fatalf("a retry on another replica: %v (data %s)", err, dataOf(e))
	}
	_, err = callOn(c.b, context.Background(), request(t, retry), modernAsker)
	if !errors.As(err, &e) || e.Code != jsonrpc.CodeInvalidParams || !strings.Contains(e.Message, "integrity check") {
		t.Fatalf("a retry on a gateway with another key: %v", err)
	}
	// Nothing of the retry reached the wrong replica's child (its question
	// is not answered): the next thing it gets is a call of its own.
	b.call(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if got := childB.next(); got.Method != "tools/list" {
		t.Errorf("the other replica's child got %s", got.Raw)
	}

	r, err := callOn(a.b, context.Background(), request(t, retry), modernAsker)
	if err != nil {
		t.Fatalf("the retry where the call waits: %v", err)
	}
	if got := childA.next(); string(got.ID) != `"q"` || got.Result == nil {
		t.Fatalf("child got %s, want the answer to q", got.Raw)
	}
	r.Cancel("done")
}

func dataOf(e *jsonrpc.Error) string {
	if e == nil {
		return ""
	}
	return string(e.Data)
}

// A replica whose key is being changed accepts the states signed with the
// other key: a retry that reaches it is told where its call waits, not
// that its state is forged.
func TestStateKeyBeingChanged(t *testing.T) {
	t.Parallel()
	oldKey, newKey := []byte("the key being retired, 32+ bytes"), []byte("the key taking over, 32+ bytes!!")
	opts := legacy()
	opts.StateKey = oldKey
	a := newWorld(t, opts, autoReply{initialize: true})
	changing := legacy()
	changing.StateKey, changing.AcceptedStateKey = newKey, oldKey
	b := newWorld(t, changing, autoReply{initialize: true})
	_, state := park(t, a, a.child())
	retry := `{"jsonrpc":"2.0","id":"second","method":"tools/call","params":{"name":"ask","inputResponses":{"q":{"action":"accept"}},"requestState":"` + state + `"}}`
	_, err := callOn(b.b, context.Background(), request(t, retry), modernAsker)
	var e *jsonrpc.Error
	if !errors.As(err, &e) || !strings.Contains(string(e.Data), `"reason":"parked_elsewhere"`) {
		t.Errorf("a retry on a replica that accepts the old key: %v", err)
	}
}
