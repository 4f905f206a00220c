package main

import (
	"io"
	"sync"
)

// logSinkMax is how much log output may wait for its write; a line that
// finds this much waiting is written by its own goroutine, with what came
// before it (the logger slows down rather than dropping or growing).
const logSinkMax = 1 << 20

// logSink is where the gateway's log lines go: gathered in memory and
// written by a goroutine of its own, so that a request never waits for
// stderr before its answer goes out, and lines logged together (every call
// logs one) leave in one write instead of one each. Lines keep their order.
type logSink struct {
	out  io.Writer
	kick chan struct{} // 1-buffered: there is something to write
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	pending []byte
	closed  bool // Close began: lines are written at once

	flushMu sync.Mutex // held while writing, so that batches leave in order
	spare   []byte     // the batch written last, reused; guarded by flushMu
}

func newLogSink(out io.Writer) *logSink {
	s := &logSink{out: out, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *logSink) run() {
	defer close(s.done)
	for {
		select {
		case <-s.kick:
			s.flush()
		case <-s.stop:
			return
		}
	}
}

// Write takes one line (slog writes each record at once).
func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.flushMu.Lock()
		defer s.flushMu.Unlock()
		s.flushLocked()
		return s.out.Write(p)
	}
	s.pending = append(s.pending, p...)
	full := len(s.pending) >= logSinkMax
	s.mu.Unlock()
	if full {
		s.flush()
		return len(p), nil
	}
	select {
	case s.kick <- struct{}{}:
	default: // a write is due already; it takes this line too
	}
	return len(p), nil
}

func (s *logSink) flush() {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.flushLocked()
}

func (s *logSink) flushLocked() {
	s.mu.Lock()
	b := s.pending
	s.pending = s.spare[:0]
	s.mu.Unlock()
	if len(b) > 0 {
		// A failed write has nowhere to be reported: slog drops a
		// handler's error too.
		_, _ = s.out.Write(b)
	}
	s.spare = b[:0]
}

// Close writes what waits and makes every later line a write of its own.
func (s *logSink) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	s.flush()
	return nil
}
