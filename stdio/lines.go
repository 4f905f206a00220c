package stdio

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
)

// headBytes is how much of an oversized line is kept, so the caller can still
// tell whose answer it was.
const headBytes = 4 << 10

// TooLongError reports a stdout line over the size limit. The line has been
// discarded up to its newline and reading can go on. A line whose end has
// not come as it passes the limit is reported then too, once, Partial: the
// call it answers need not wait for its end, which may be far off (or
// never come, from a child that writes without end).
type TooLongError struct {
	Size    int64  // bytes in the line, without the newline; read so far, when Partial
	Limit   int    // the limit it exceeded
	Head    []byte // the line's first bytes
	Tail    []byte // its last bytes (newline aside); none when Partial
	Partial bool   // the line goes on; it is discarded as it comes, and reported again at its end
}

// Skipped reports the discarded line's size, first and last bytes.
func (e *TooLongError) Skipped() (int64, []byte, []byte) { return e.Size, e.Head, e.Tail }

// keepTail adds chunk to the end of tail, keeping its last headBytes and
// room for a CR LF (see endTail).
func keepTail(tail, chunk []byte) []byte {
	const keep = headBytes + 2
	if len(chunk) >= keep {
		return append(tail[:0], chunk[len(chunk)-keep:]...)
	}
	if drop := len(tail) + len(chunk) - keep; drop > 0 {
		tail = append(tail[:0], tail[drop:]...)
	}
	return append(tail, chunk...)
}

// endTail is the tail of a line that ended: its last headBytes, its end of
// line aside.
func endTail(tail []byte) []byte {
	tail = trimEOL(tail)
	return tail[max(0, len(tail)-headBytes):]
}

// Ongoing reports whether the line goes on (see Partial).
func (e *TooLongError) Ongoing() bool { return e.Partial }

func (e *TooLongError) Error() string {
	if e.Partial {
		return fmt.Sprintf("child is writing a line over the %d-byte limit (%d bytes so far); discarding it to its end", e.Limit, e.Size)
	}
	return fmt.Sprintf("child wrote a %d-byte line, over the %d-byte limit; discarded", e.Size, e.Limit)
}

// ErrNewline refuses a message that would break the framing.
var ErrNewline = errors.New("stdio: message contains a newline")

// ErrBroken means stdin can no longer carry messages: a write failed after
// part of a line went out, or the child closed its end.
var ErrBroken = errors.New("stdio: child stdin broken")

// ErrStalled means the child read nothing of a message for the stall limit.
var ErrStalled = errors.New("stdio: child is not reading its stdin")

type lineReader struct {
	br    *bufio.Reader
	max   int
	last  int           // the size of the last large line read (see collect)
	asked atomic.Int32  // collections asked for since the one running began; 0: none runs (see collect)
	gc    func()        // runtime.GC; a test's own to see when collections are made
	over  *TooLongError // a line reported Partial, being discarded to its end
	begun bool          // a line was returned: a byte order mark is looked for only before the first
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10), max: max, gc: runtime.GC}
}

// collectAfter is the size of line from which reading it ends with a
// garbage collection (see next).
const collectAfter = 8 << 20

// Spare is the room left after a line's end in the slice next returns, so
// that a caller can lengthen a message a little (a longer id or progress
// token, say) in place instead of copying it.
const Spare = 64

// next returns the next non-empty line without its newline. The returned
// slice is the caller's: nothing here keeps a reference, so the memory of a
// large message goes back to the heap as soon as the caller drops it. A
// line longer than the bufio buffer is gathered in pieces and copied once
// into a slice of its exact size (plus Spare): growing one slice by
// appending would leave several times its size in garbage behind.
func (r *lineReader) next() ([]byte, error) {
	var parts [][]byte // the pieces of a line longer than the bufio buffer
	var size int       // their total length
	over := r.over     // set while an oversized line is being discarded
	r.over = nil
	for {
		chunk, err := r.br.ReadSlice('\n')
		full := errors.Is(err, bufio.ErrBufferFull)
		switch {
		case over != nil:
			over.Size += int64(len(chunk))
			over.Tail = keepTail(over.Tail, chunk)
		case size+len(chunk) > r.max+2: // +2: room for a CR LF ending
			over = &TooLongError{Size: int64(size + len(chunk)), Limit: r.max}
			for _, p := range append(parts, chunk) {
				over.Head = append(over.Head, p[:min(len(p), headBytes-len(over.Head))]...)
				over.Tail = keepTail(over.Tail, p)
			}
			parts, size = nil, 0
			if full {
				// Its end has not come: the caller hears of it now, and the
				// next call goes on discarding it.
				r.over = over
				return nil, &TooLongError{Size: over.Size, Limit: r.max, Head: over.Head, Partial: true}
			}
		case parts != nil || full:
			parts = append(parts, bytes.Clone(chunk))
			size += len(chunk)
			if size >= collectAfter && size-len(chunk) < collectAfter {
				// A large line begins: the last one is most likely garbage
				// by now, and collected, its memory takes this one's pieces.
				r.collect(max(size, r.last))
			}
		}
		if full {
			continue
		}
		// The line is complete, or the stream ended or failed.
		if over != nil {
			over.Size -= int64(len(chunk) - len(trimEOL(chunk)))
			over.Tail = endTail(over.Tail)
			return nil, over
		}
		var line []byte
		if parts != nil {
			line = make([]byte, 0, size+Spare)
			for _, p := range parts {
				line = append(line, p...)
			}
			parts = nil
			line = trimEOL(line)
			r.collect(size)
			r.last = size
		} else {
			t := trimEOL(chunk)
			line = append(make([]byte, 0, len(t)+Spare), t...)
		}
		if len(line) > r.max {
			return nil, &TooLongError{Size: int64(len(line)), Limit: r.max, Head: bytes.Clone(line[:min(len(line), headBytes)]),
				Tail: bytes.Clone(line[max(0, len(line)-headBytes):])}
		}
		if !r.begun {
			// A byte order mark may open a text stream (some runtimes
			// write one); JSON readers may ignore it (RFC 8259 §8.1), and
			// it is no part of the first message.
			line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
		}
		if len(line) > 0 {
			// A last line without a newline still counts: the child may have
			// exited right after writing it. The error comes on the next call.
			r.begun = true
			return line, nil
		}
		if err != nil {
			return nil, err
		}
		parts, size = nil, 0 // an empty line: skip it
	}
}

// collect starts a garbage collection around a line of size bytes, when
// the line is a large part of the heap: as a large line begins (the last
// one's memory, garbage by then, is what its pieces should fill) and once
// it is read (its pieces are garbage then). Left to the collector's pace,
// the heap would grow to twice what was live at a line's peak (its pieces
// and itself) before the next collection, and each large line would find
// that room and add to it. It runs on a goroutine of its own, never
// holding up the reader, one at a time; a collection asked for while one
// runs is made after it. Not when the heap is large beside the line
// (thousands of open streams), where a collection would cost more than
// the line and save little.
func (r *lineReader) collect(size int) {
	if size < collectAfter {
		return
	}
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	if live[0].Value.Kind() == metrics.KindUint64 && live[0].Value.Uint64() > 4*uint64(size) {
		return
	}
	if r.asked.Add(1) > 1 {
		return // the running one goes on with another after it
	}
	go func() {
		for {
			r.gc()
			if r.asked.CompareAndSwap(1, 0) {
				return // nothing was asked while it ran
			}
			r.asked.Store(1)
		}
	}()
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// Buffered reports whether more of the child's output has already been
// read, so that the next ReadMessage returns without waiting. Only the
// reading goroutine may call it.
func (p *Process) Buffered() bool { return p.lines.br.Buffered() > 0 }

// Broken reports whether stdin can no longer carry messages.
func (p *Process) Broken() bool { return p.broken.Load() }

// ReadMessage returns the next line the child wrote to stdout, without its
// newline. A *TooLongError is not fatal: call again. io.EOF means the child
// closed stdout (normally: it exited). Only one goroutine may call it.
func (p *Process) ReadMessage() ([]byte, error) {
	line, err := p.lines.next()
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, os.ErrClosed) {
		// Cut loose after exit (see wait): for the caller that is EOF.
		err = io.EOF
	}
	if err == io.EOF {
		p.ended.Store(true)
	}
	return line, err
}
