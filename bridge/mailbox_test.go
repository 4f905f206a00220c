package bridge

import (
	"fmt"
	"testing"
)

// What a take returned stays as it was while the reader queues more, until
// the owner's next take; the arrays are used again, so that a stream read
// as it comes costs no allocation here, but a backlog's are let go.
// Not parallel: AllocsPerRun counts the whole program's allocations.
func TestMailboxTakesAreTheOwners(t *testing.T) {
	var m mailbox
	m.init(64)
	for round := range 3 {
		m.put(fmt.Appendf(nil, "a%d", round), noteLog)
		m.put(fmt.Appendf(nil, "b%d", round), noteLog)
		notes, _, _, _ := m.take()
		m.put([]byte("x"), noteLog)
		m.put([]byte("y"), noteLog)
		m.put([]byte("z"), noteLog)
		if got := fmt.Sprintf("%s", notes); got != fmt.Sprintf("[a%d b%d]", round, round) {
			t.Fatalf("round %d: the notes taken became %s once more were queued", round, got)
		}
		if notes, _, _, _ := m.take(); fmt.Sprintf("%s", notes) != "[x y z]" {
			t.Fatalf("round %d: the next take got %s", round, notes)
		}
	}
	b := []byte("p")
	if n := testing.AllocsPerRun(100, func() {
		m.put(b, noteProgress)
		m.take()
	}); n != 0 {
		t.Errorf("a note put and taken costs %v allocations, want 0", n)
	}
	for range 20 {
		m.put(b, noteLog)
	}
	m.take()
	if cap(m.notes) > keptNotes || cap(m.out) > keptNotes {
		t.Errorf("after a backlog of 20, the mailbox keeps room for %d and %d notes, want at most %d", cap(m.notes), cap(m.out), keptNotes)
	}
}
