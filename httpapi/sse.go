package httpapi

import (
	"bytes"
	"math"
	"net/http"
	"time"
)

// sseWriter writes a Server-Sent Events response by hand. Events are
// written, then flushed together: what the child said at once leaves in one
// write to the client, not one per event. Each event's writes, and the
// flush after the last, have a deadline, so a client that stops reading is
// noticed instead of holding the call forever.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	until   time.Time // the write deadline set last; zero: none since the connection's were cleared
	pending bool      // something was written since the last flush
	// answering: the next event is the request's answer, before whose
	// last byte the request's place is given back (see answering).
	answering bool
	// frame is an event's "data: " and "\n\n", written from here: the
	// bytes of a constant handed to a Write would be allocated each time.
	frame [len(dataField) + len(eventEnd)]byte
}

const dataField, eventEnd = "data: ", "\n\n"

func newSSE(w http.ResponseWriter, timeout time.Duration) *sseWriter {
	s := &sseWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
	copy(s.frame[copy(s.frame[:], dataField):], eventEnd)
	return s
}

// open sends the headers and a first comment at once: some proxies hold the
// headers back until body bytes flow.
func (s *sseWriter) open() error {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	s.w.WriteHeader(http.StatusOK)
	if err := s.comment("stream open"); err != nil {
		return err
	}
	return s.flush()
}

// writeOneEvent answers with a stream of one event, msg: a call's answer
// to a client that takes no JSON (see streamOnly).
func writeOneEvent(w http.ResponseWriter, timeout time.Duration, msg []byte) {
	s := newSSE(w, timeout)
	there := present(w)
	if s.open() == nil && s.answer(msg) == nil && s.flush() == nil {
		markAnswered(w, there)
	}
}

// event writes one JSON-RPC message as the data of one event. The message is
// a single line (stdio framing guarantees it), so it needs one data field.
// It goes out in three writes rather than being copied into one buffer: a
// tool result may be tens of megabytes.
func (s *sseWriter) event(msg []byte) error {
	return s.send(s.frame[:len(dataField)], oneLine(msg), s.frame[len(dataField):])
}

// answer writes msg, the request's answer, as the data of one event.
func (s *sseWriter) answer(msg []byte) error {
	s.answering = true
	return s.event(msg)
}

// oneLine is data that SSE reads as one line. Stdio framing leaves no
// newline in a message, but a carriage return, which SSE also takes for a
// line end, may stand between JSON tokens; inside a JSON string it is
// always escaped, so each raw one is whitespace and a space stands in for
// it. Messages without one (all but a rare child's) are not copied.
func oneLine(msg []byte) []byte {
	if bytes.IndexByte(msg, '\r') < 0 {
		return msg
	}
	return bytes.ReplaceAll(msg, []byte{'\r'}, []byte{' '})
}

// named writes one event of the REST API: its name, then data (a single
// line of JSON).
func (s *sseWriter) named(event string, data []byte) error {
	return s.send([]byte("event: "+event+"\ndata: "), oneLine(data), []byte("\n\n"))
}

// comment writes an SSE comment, which clients ignore; it keeps idle
// connections from being closed by intermediaries.
func (s *sseWriter) comment(text string) error {
	return s.send([]byte(": " + text + "\n\n"))
}

// send writes parts under a deadline at least the timeout away (a large
// event may go to the connection at once), which the next flush keeps. A
// part larger than answerChunk goes a chunk at a time, the deadline kept
// before each: it is one for a client that takes nothing, not for the
// whole event.
func (s *sseWriter) send(parts ...[]byte) error {
	s.keepDeadline()
	s.pending = true
	for i, p := range parts {
		for len(p) > answerChunk {
			if _, err := s.w.Write(p[:answerChunk]); err != nil {
				return err
			}
			p = p[answerChunk:]
			s.keepDeadline()
		}
		if s.answering && i == len(parts)-1 {
			// The client has the event only with its last byte; one slow
			// to take a large answer holds its place while it is sent.
			s.answering = false
			answering(s.w)
		}
		if _, err := s.w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// keepDeadline sets the deadline an eighth further than the timeout, once
// less than the timeout is left: setting it costs more than an event's
// writes, and a stream sends many events a second. The eighth stops short
// of the largest Duration, past which the deadline would wrap around into
// the past.
func (s *sseWriter) keepDeadline() {
	if now := time.Now(); s.until.Sub(now) < s.timeout {
		s.until = now.Add(s.timeout + min(s.timeout/8, math.MaxInt64-s.timeout))
		_ = s.rc.SetWriteDeadline(s.until)
	}
}

// flush sends what was written since the last flush, if anything was.
func (s *sseWriter) flush() error {
	if !s.pending {
		return nil
	}
	s.pending = false
	return s.rc.Flush()
}

// deadlineCleared tells the writer that its connection's deadlines were
// cleared (a stream that left the server, see detach.Leave): the next
// send sets one again.
func (s *sseWriter) deadlineCleared() { s.until = time.Time{} }
