package bridge

import "sync"

// mailbox hands a call's messages and end from the reader to the owner
// without ever blocking the reader.
type mailbox struct {
	mu      sync.Mutex
	notes   []note
	out     [][]byte // what take last returned; its array is kept for the next
	max     int
	held    int  // the bytes of the notes queued
	dropped int  // log messages that found the mailbox full
	code    int  // the child's error code when resp is an error response
	errResp bool // resp is the child's error response
	resp    []byte
	err     error
	done    bool
	wake    chan struct{} // 1-buffered: a pending signal, never a queue
}

type noteKind int

const (
	noteProgress noteKind = iota // cumulative: a newer one makes it obsolete
	noteLog                      // may be dropped when the owner falls behind
	noteAsk                      // a request the client must answer: never dropped
	noteEvent                    // a listen's notification: never dropped; too many end the listen
)

type note struct {
	raw  []byte
	kind noteKind
}

// maxNoteBytes bounds the bytes a mailbox holds for an owner that falls
// behind, as max bounds the count: past it, the owner is behind just as
// past max (progress is coalesced, a log message dropped, a listen ended).
// Without it a call could hold max messages of the largest size a child
// may write (256 of 64 MiB by default). 4 MiB is the default max of 256
// notes at 16 KiB each, far more than a progress notification or a log
// message takes. A message is always taken when no note is queued, and the
// last progress is always replaced, whatever its size: so a mailbox holds
// at most maxNoteBytes and one message of any size the child may write,
// besides the requests to the client, which are few and always kept.
const maxNoteBytes = 4 << 20

// keptNotes is the most notes a mailbox's arrays keep room for between
// takes; a stream read as it comes takes one or two at a time.
const keptNotes = 8

func (m *mailbox) init(max int) {
	m.max = max
	m.wake = make(chan struct{}, 1)
}

func (m *mailbox) signal() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// note queues a message; it reports false once the call has ended, and
// for an event, when the owner is too far behind to take it. Over
// the limits (max notes, maxNoteBytes), a progress notification replaces a progress notification
// queued last (the latest value wins, and the order is kept), a log message
// is dropped, and a request to the client is always kept: the call cannot
// go on without its answer, and there are few.
func (m *mailbox) note(b []byte, kind noteKind) bool {
	kept, _, _ := m.put(b, kind)
	return kept
}

// put is note, and also reports whether a progress notification took the
// place of the one queued last, or was dropped (the owner is behind, and
// the last note queued is not progress).
func (m *mailbox) put(b []byte, kind noteKind) (kept, coalesced, dropped bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return false, false, false
	}
	fits := len(m.notes) == 0 || len(m.notes) < m.max && m.held+len(b) <= maxNoteBytes
	switch {
	case kind == noteEvent && !fits:
		return false, false, false // the owner ends the call (see call.event)
	case fits || kind == noteAsk:
		m.notes = append(m.notes, note{b, kind})
		m.held += len(b)
	case kind == noteProgress && m.notes[len(m.notes)-1].kind == noteProgress:
		last := &m.notes[len(m.notes)-1]
		m.held += len(b) - len(last.raw)
		*last = note{b, kind}
		coalesced = true
	default:
		m.dropped++
		dropped = true
	}
	m.signal()
	return true, coalesced, dropped
}

func (m *mailbox) finish(resp []byte, err error) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return false
	}
	m.resp, m.err, m.done = resp, err, true
	m.signal()
	return true
}

// setErrorCode records that the response is the child's error, and its
// code, before the response itself is delivered.
func (m *mailbox) setErrorCode(code int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.code, m.errResp = code, true
}

func (m *mailbox) childError() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.errResp
}

// peek reports the call's state without taking anything.
func (m *mailbox) peek() (notes int, resp []byte, done bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.notes), m.resp, m.done, m.err
}

// take returns the notes queued since the last take, in a slice that is
// the owner's until its next take: the two arrays are used again, so that
// a stream's events cost no allocation here. Arrays that a backlog grew
// are let go, not kept for the call's life.
func (m *mailbox) take() ([][]byte, []byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.out) // the messages the owner took last are not held here
	notes := m.out[:0]
	for _, n := range m.notes {
		notes = append(notes, n.raw)
	}
	clear(m.notes)
	m.notes, m.held = m.notes[:0], 0
	if cap(m.notes) > keptNotes {
		m.notes = nil
	}
	m.out = notes
	if cap(notes) > keptNotes {
		m.out = nil
	}
	if m.done {
		// Keep signalling: a later Take must see the end again.
		m.signal()
	}
	return notes, m.resp, m.done, m.err
}
