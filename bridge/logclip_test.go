package bridge

import (
	"context"
	"strings"
	"testing"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// What a client sends that a log line repeats (its id, its method, the
// reason it gave for a cancellation) is cut: a request of many megabytes must not make a
// log line as long.
func TestLogLinesClipWhatClientsSend(t *testing.T) {
	t.Parallel()
	w, child, log := loggedWorld(t)
	id := `"` + strings.Repeat("i", 100_000) + `"`
	method := strings.Repeat("m", 100_000)
	c := w.call(context.Background(), `{"jsonrpc":"2.0","id":`+id+`,"method":"`+method+`","params":{"name":"x"}}`)
	child.expect(method)
	c.Cancel(strings.Repeat("r", 100_000))
	child.expect("notifications/cancelled")
	// Close waits for the goroutine that told the child, and logged it.
	w.b.Close(context.Background())
	text := log.String()
	if !strings.Contains(text, `msg="cancelled call"`) {
		t.Fatalf("no cancellation was logged:\n%.2000s", text)
	}
	for line := range strings.SplitSeq(text, "\n") {
		if len(line) > 2*maxLogged+500 {
			t.Errorf("a log line of %d bytes: %.300s…", len(line), line)
		}
	}
}

// An answer to a question another process asked is refused; it is logged
// at warn once a minute, since any client can send one, and an id the
// gateway could not have made is no other process's.
func TestAnswerElsewhereIsLoggedOnceAMinute(t *testing.T) {
	t.Parallel()
	w, _, log := loggedWorld(t)
	other := `"gw-` + strings.Repeat("A", 12) + `.` + strings.Repeat("0", 24) + `"`
	for range 3 {
		answer, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":` + other + `,"result":{}}`))
		if err := w.b.Respond(context.Background(), answer); err == nil {
			t.Fatal("an answer for another process was taken")
		}
	}
	if n := strings.Count(log.String(), "level=WARN"); n != 1 {
		t.Errorf("%d warnings for three answers meant elsewhere, want 1:\n%s", n, log.String())
	}
	forged, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":"gw-` + strings.Repeat("q", 300_000) + `.1","result":{}}`))
	if err := w.b.Respond(context.Background(), forged); err != nil {
		t.Errorf("an id the gateway never makes was read as another process's: %v", err)
	}
}
