package stdio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// WriteMessage writes msg and a newline to the child's stdin as one line,
// never interleaved with another message. ctx can abandon the write only
// before its first byte is out; after that the line is finished or stdin is
// declared broken, because half a line would corrupt every later message.
// It writes at once: it never waits for lines that GatherMessage gathers.
func (p *Process) WriteMessage(ctx context.Context, msg []byte) error {
	return p.write(ctx, msg, false)
}

// GatherMessage is WriteMessage for a caller that expects others to write
// at about the same time (calls in flight on the child): its line waits
// for the goroutines ready to run to add theirs, and they go out together
// in one write, which wakes the child once for all of them. A write to a
// pipe costs about as much as the gateway's own work on a small call,
// mostly in waking the child. The wait is one turn of the goroutines ready
// to run, which is long when some of them compute (see gather): a caller
// on its own should not take it.
func (p *Process) GatherMessage(ctx context.Context, msg []byte) error {
	return p.write(ctx, msg, true)
}

func (p *Process) write(ctx context.Context, msg []byte, wait bool) error {
	if bytes.IndexByte(msg, '\n') >= 0 {
		return ErrNewline
	}
	if err := ctx.Err(); err != nil {
		return err // select below would pick at random when both are ready
	}
	if wait && len(msg) < gatherMax {
		switch got, off := p.gather(msg); got {
		case sentWhole:
			return nil
		case sentPart:
			// This caller holds stdin now, to finish the line.
			defer func() { p.writeTok <- struct{}{} }()
			return p.finish(ctx, msg, off)
		case sentNoneHeld:
			defer func() { p.writeTok <- struct{}{} }()
			if p.writeErr != nil {
				return p.writeErr
			}
			// A pipe takes a write of up to PIPE_BUF whole or not at all,
			// so this line alone may fit where the batch did not.
			return p.finish(ctx, msg, 0)
		}
	}
	select {
	case <-p.writeTok:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { p.writeTok <- struct{}{} }()
	if p.writeErr != nil {
		return p.writeErr
	}
	return p.finish(ctx, msg, 0)
}

// gatherMax bounds a gathered write, and so the line that may join one:
// the pipe's capacity by default on Linux, so that a batch usually goes in
// whole.
const gatherMax = 64 << 10

// batch is the lines of several callers on their way to stdin in one
// write. The first caller leads: it writes the batch and tells the others
// how far their lines got.
type batch struct {
	buf     []byte        // the lines, each with its newline; the leader's first
	done    chan struct{} // closed once written is set; made when a second line joins
	written int           // how much of buf the one write took
}

// sent is how far a gathered line got.
type sent int

const (
	sentWhole    sent = iota // out whole
	sentPart                 // out in part: its caller holds stdin and must finish it
	sentNone                 // nothing out: its caller writes it alone
	sentNoneHeld             // nothing out, and its caller holds stdin
)

// outcome is how far the line at buf[start:end] got.
func (b *batch) outcome(start, end int) (sent, int) {
	switch {
	case b.written >= end:
		return sentWhole, 0
	case b.written > start:
		return sentPart, b.written - start
	}
	return sentNone, 0
}

// gather writes msg as part of a batch, and reports how far it got: the
// part written of a line cut short (sentPart) is off bytes. A caller that
// finds a batch open with room for its line adds it and waits for the
// leader's one write, which never waits for room. Otherwise it opens a
// batch and leads: it yields once before it writes, so that the goroutines
// ready to run (other calls on their way to the child) add their lines.
// The yield puts it on the runtime's global run queue, which a thread
// serves once its own queue is empty (or once in 61 turns), so with one
// thread running Go code they mostly all run before it again. Each of
// them runs until it blocks or its time slice (10 ms) ends, so one that
// computes for long holds the write up. A caller whose line does not fit
// in the batch open writes its own at once.
func (p *Process) gather(msg []byte) (got sent, off int) {
	p.gatherMu.Lock()
	if b := p.open; b != nil && len(b.buf)+len(msg)+1 <= gatherMax {
		start := len(b.buf)
		b.buf = append(append(b.buf, msg...), '\n')
		if b.done == nil {
			b.done = make(chan struct{})
		}
		p.gatherMu.Unlock()
		<-b.done
		return b.outcome(start, start+len(msg)+1)
	}
	b := p.spare
	p.spare = nil
	if b == nil {
		b = new(batch)
	}
	b.buf = append(append(b.buf[:0], msg...), '\n')
	opened := p.open == nil
	if opened {
		p.open = b
	}
	p.gatherMu.Unlock()

	if opened {
		runtime.Gosched()
	}

	p.gatherMu.Lock()
	if p.open == b {
		p.open = nil
	}
	p.gatherMu.Unlock()
	held := false
	select {
	case <-p.writeTok:
		held = true
		if p.writeErr == nil {
			b.written = p.tryWrite(b.buf)
		}
	default:
		// Another write holds stdin, which may be waiting for room: the
		// lines go after it, each on its own and each with its caller's
		// ctx.
	}
	end := len(msg) + 1
	got, off = b.outcome(0, end)
	switch {
	case !held:
	case got == sentNone:
		got = sentNoneHeld // the leader writes its line alone, holding stdin
	case got == sentPart:
		// The leader finishes its own line, holding stdin.
	case b.written < len(b.buf) && b.buf[b.written-1] != '\n':
		// A later line was cut short: its caller takes stdin over. Lines
		// hold no newline but their last byte, so one before the cut means
		// the cut fell between lines.
	default:
		p.writeTok <- struct{}{}
	}
	if b.done != nil {
		close(b.done)
		b = &batch{buf: b.buf[:0]}
	} else {
		b.written = 0
	}
	if cap(b.buf) <= 2*gatherMax {
		p.gatherMu.Lock()
		p.spare = b
		p.gatherMu.Unlock()
	}
	return got, off
}

// finish writes msg, of which off bytes are out already. The caller holds
// writeTok.
func (p *Process) finish(ctx context.Context, msg []byte, off int) error {
	// Write in pieces so that the stall limit measures progress, not the
	// time a large message takes to go through a slow reader. The newline
	// travels with the last piece, so a message of up to one piece is one
	// write; off passes len(msg) once the newline is out.
	const piece = 64 << 10
	if off == 0 && len(msg) < piece {
		// Most messages fit in the pipe at once: one try that never waits
		// spares the deadline and the watch on ctx below.
		p.scratch = append(append(p.scratch[:0], msg...), '\n')
		n := p.tryWrite(p.scratch)
		if n == len(p.scratch) {
			return nil
		}
		off = n
	}

	var (
		mu        sync.Mutex
		committed = off > 0 // the first byte is out
		abandoned bool      // ctx ended before that
		resumed   bool      // a write cut by ctx after the first byte was taken up again
		over      bool      // this call has returned: the watch on ctx must not touch stdin
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !committed && !over {
			abandoned = true
			_ = p.stdin.SetWriteDeadline(time.Unix(1, 0))
		}
	})
	defer stop()
	// stop does not wait for a watch already running: one that ran late
	// would cut the next message's write. It sees over, under mu. The
	// deadline this write (or its watch) set goes with it: left in place,
	// once passed it would fail every try to write at once (tryWrite).
	defer func() {
		mu.Lock()
		over = true
		_ = p.stdin.SetWriteDeadline(time.Time{})
		mu.Unlock()
	}()

	for off <= len(msg) {
		buf := msg[off:min(off+piece, len(msg))]
		if len(msg)-off <= piece {
			p.scratch = append(append(p.scratch[:0], msg[off:]...), '\n')
			buf = p.scratch
		}
		mu.Lock()
		if abandoned && !committed {
			mu.Unlock()
			return ctx.Err()
		}
		_ = p.stdin.SetWriteDeadline(time.Now().Add(p.cfg.WriteStall))
		mu.Unlock()
		n, err := p.stdin.Write(buf)
		off += n
		if n > 0 {
			mu.Lock()
			committed = true
			mu.Unlock()
		}
		if err == nil {
			continue
		}
		mu.Lock()
		wasCommitted, wasAbandoned := committed, abandoned
		mu.Unlock()
		switch {
		case !wasCommitted && wasAbandoned:
			return ctx.Err()
		case wasAbandoned && !resumed && errors.Is(err, os.ErrDeadlineExceeded):
			// ctx ended while the first piece was going out: finish the line.
			resumed = true
			continue
		case !wasCommitted && errors.Is(err, os.ErrDeadlineExceeded):
			return fmt.Errorf("%w for %v", ErrStalled, p.cfg.WriteStall)
		case errors.Is(err, os.ErrDeadlineExceeded):
			p.writeErr = fmt.Errorf("%w: no progress for %v in the middle of a line", ErrBroken, p.cfg.WriteStall)
		default:
			p.writeErr = fmt.Errorf("%w: %v", ErrBroken, err)
		}
		p.broken.Store(true)
		return p.writeErr
	}
	return nil
}

// pipeAtomic is the most a pipe write is sure to take whole or not at
// all on any system: the least PIPE_BUF POSIX allows (_POSIX_PIPE_BUF;
// 4096 on Linux, 512 on macOS and the BSDs). A cancellation is about 150
// bytes.
const pipeAtomic = 512

// TryWriteMessage writes msg and a newline as one line if that needs no
// waiting: no other write holds stdin, and the pipe has room for the whole
// line now. It reports whether it did; when it did not, nothing of msg was
// written and WriteMessage is the way. Only a line that fits in one
// atomic pipe write is tried, so there is never half a line to finish.
func (p *Process) TryWriteMessage(msg []byte) bool {
	if len(msg)+1 > pipeAtomic || bytes.IndexByte(msg, '\n') >= 0 {
		return false
	}
	select {
	case <-p.writeTok:
	default:
		return false
	}
	defer func() { p.writeTok <- struct{}{} }()
	if p.writeErr != nil {
		return false
	}
	p.scratch = append(append(p.scratch[:0], msg...), '\n')
	return p.tryWrite(p.scratch) == len(p.scratch)
}

// tryWrite writes what the pipe takes of b now, without waiting, and
// reports how much that was: 0 when the pipe is full, or on an error
// (which the waiting write meets again). The caller holds writeTok; no
// deadline is set on stdin then (a waiting write clears its own).
func (p *Process) tryWrite(b []byte) int {
	p.try = tryState{b: b}
	err := p.stdinRaw.Write(p.tryFD)
	n := p.try.n
	p.try = tryState{}
	if err != nil {
		return 0
	}
	return n
}

// tryState is one tryWrite's message and outcome, in the Process rather
// than captured by a closure, so that a message costs no closure.
type tryState struct {
	b []byte
	n int
}

// writeFD is tryWrite's one attempt on stdin's descriptor.
func (p *Process) writeFD(fd uintptr) bool {
	if n, err := syscall.Write(int(fd), p.try.b); err == nil {
		p.try.n = n
	}
	return true // never wait for room here
}
