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

// Large progress for an owner that does not take it is coalesced once the
// mailbox holds maxNoteBytes, not only once it holds max notes: what a
// call holds is bounded in bytes, and a late take sees the latest value.
// Log messages over the bytes are dropped and counted, as over the count;
// requests to the client are kept.
func TestMailboxBoundsBytes(t *testing.T) {
	t.Parallel()
	var m mailbox
	m.init(256)
	big := maxNoteBytes / 3
	held := func() int {
		n := 0
		for _, x := range m.notes {
			n += len(x.raw)
		}
		return n
	}
	for i := range 100 {
		b := fmt.Appendf(nil, "p%03d", i)
		m.put(append(b, make([]byte, big)...), noteProgress)
		if h := held(); h > maxNoteBytes+big+4 {
			t.Fatalf("after %d progress notes of %d bytes, the mailbox holds %d bytes, want at most %d", i+1, big+4, h, maxNoteBytes+big+4)
		}
	}
	if kept, _, dropped := m.put(make([]byte, big), noteLog); !kept || !dropped || m.dropped != 1 {
		t.Errorf("a log message over the bytes: kept %v, dropped %v (count %d), want it dropped and counted", kept, dropped, m.dropped)
	}
	if kept, _, dropped := m.put([]byte("ask"), noteAsk); !kept || dropped {
		t.Error("a request to the client over the bytes was not kept")
	}
	notes, _, _, _ := m.take()
	if len(notes) < 2 || string(notes[len(notes)-1]) != "ask" || string(notes[len(notes)-2][:4]) != "p099" {
		t.Fatalf("a late take got %d notes, the last two beginning %q, want the latest progress (p099) and the request", len(notes), heads(notes))
	}
	// A take empties the mailbox, bytes and all: notes queue again.
	m.put(make([]byte, big), noteProgress)
	m.put(make([]byte, big), noteProgress)
	if notes, _, _, _ := m.take(); len(notes) != 2 {
		t.Errorf("after a take, two progress notes of %d bytes were taken as %d, want 2", big, len(notes))
	}
	// One message larger than the whole budget still goes through.
	if kept, _, dropped := m.put(make([]byte, 2*maxNoteBytes), noteLog); !kept || dropped {
		t.Error("a message over the budget, queued alone, was not kept")
	}
}

func heads(notes [][]byte) []string {
	var out []string
	for _, n := range notes {
		out = append(out, string(n[:min(4, len(n))]))
	}
	return out
}
