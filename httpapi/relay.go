package httpapi

import (
	"context"
	"errors"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/detach"
	"github.com/stdiomcp/gateway/jsonrpc"
)

// stream answers with SSE: the call's notifications as they come, then the
// response (through filter, when there is one), then the end of the
// stream.
func (h *handlers) stream(w http.ResponseWriter, r *http.Request, c bridge.Call, id []byte, first [][]byte, filter func([]byte) ([]byte, error)) {
	h.relay(w, r, c, first, (*sseWriter).event, func(sse *sseWriter, resp []byte, err error) bool {
		if err == nil && filter != nil {
			resp, err = filter(resp)
		}
		switch {
		case err == nil:
			childError(w, c.ErrorCode())
			return sse.event(resp) == nil
		case errors.Is(context.Cause(r.Context()), errCredentialsEnded):
			// The client is still there: it is told why its stream ends.
			why := context.Cause(r.Context()).Error()
			gatewayError(w, jsonrpc.CodeUnauthorized, why)
			return sse.event(jsonrpc.NewErrorResponse(id, jsonrpc.GatewayError(jsonrpc.CodeUnauthorized, "credentials_ended", why))) == nil
		case r.Context().Err() != nil:
			return false // the client is gone; nothing can reach it
		default:
			e := asRPCError(err)
			gatewayError(w, e.Code, e.Message)
			return sse.event(jsonrpc.NewErrorResponse(id, e)) == nil
		}
	})
}

// streamed is what relay needs of a call: bridge.Call is one.
type streamed interface {
	Wake() <-chan struct{}
	Take() (notes [][]byte, resp []byte, done bool, err error)
}

// relay answers with an SSE stream of a call: first, then each message
// the call gives, through send, with keep-alive comments on a quiet
// stream; once the call is done, end writes the last event and reports
// whether it did. The messages taken together are flushed together. Only
// one goroutine at a time writes to w. A client that stops taking the
// stream ends it, and so the call (its context is the request's).
//
// A stream still open after LeaveAfter leaves the server (package
// detach): a goroutine of its own, with a small stack, goes on with it,
// and the handler returns.
func (h *handlers) relay(w http.ResponseWriter, r *http.Request, c streamed, first [][]byte, send func(*sseWriter, []byte) error, end func(sse *sseWriter, resp []byte, err error) bool) {
	s := &relayed{h: h, w: w, r: r, c: c, send: send, end: end, sse: newSSE(w, h.opts.ClientTimeout), counted: !inBatch(w)}
	if s.counted {
		h.opts.Meter.StreamOpened()
	}
	if s.start(first) && s.pump(true) {
		go s.detached()
		return
	}
	s.close()
}

// relayed is one stream that relay answers with.
type relayed struct {
	h         *handlers
	w         http.ResponseWriter
	r         *http.Request
	c         streamed
	send      func(*sseWriter, []byte) error
	end       func(sse *sseWriter, resp []byte, err error) bool
	sse       *sseWriter
	keepAlive *time.Ticker
	counted   bool // in the streams open: not a batch's call, whose batch is counted
}

func (s *relayed) gone(err error) {
	s.h.log.InfoContext(s.r.Context(), "client stopped taking the stream; its call is cancelled", "err", err)
}

// goneAfterEnd is gone once the call has ended: there is nothing left to
// cancel, only the rest of the stream to drop.
func (s *relayed) goneAfterEnd(err error) {
	s.h.log.InfoContext(s.r.Context(), "client stopped taking the stream after its call ended; the rest of the stream is dropped", "err", err)
}

// start opens the stream with first; false when the client cannot take
// it.
func (s *relayed) start(first [][]byte) bool {
	if err := s.sse.open(); err != nil {
		s.gone(err)
		return false
	}
	for _, n := range first {
		if err := s.send(s.sse, n); err != nil {
			s.gone(err)
			return false
		}
	}
	if err := s.sse.flush(); err != nil {
		s.gone(err)
		return false
	}
	s.keepAlive = time.NewTicker(s.h.opts.KeepAlive)
	return true
}

// pump relays until the call is done or the client goes; with canLeave,
// it returns true instead once the stream has left the server.
func (s *relayed) pump(canLeave bool) (left bool) {
	var leave <-chan time.Time
	if canLeave && s.h.opts.Streams != nil {
		t := time.NewTimer(s.h.opts.LeaveAfter)
		defer t.Stop()
		leave = t.C
	}
	for {
		select {
		case <-s.c.Wake():
		case <-leave:
			leave = nil
			if err := detach.Leave(s.w); err != nil {
				s.h.log.DebugContext(s.r.Context(), "a stream stays with the server", "err", err)
				continue
			}
			s.sse.deadlineCleared()
			return true
		case <-s.keepAlive.C:
			err := s.sse.comment("keep-alive")
			if err == nil {
				err = s.sse.flush()
			}
			if err != nil {
				s.gone(err)
				return false
			}
			continue
		}
		notes, resp, done, err := s.c.Take()
		for _, n := range notes {
			if err := s.send(s.sse, n); err != nil {
				if done {
					s.goneAfterEnd(err)
				} else {
					s.gone(err)
				}
				return false
			}
		}
		// Sent: an idle stream does not keep its last messages (Take
		// hands out the same slice again).
		clear(notes)
		if done {
			// What end writes is the answer: the request's place goes
			// back before its last byte.
			s.sse.answering = true
			there := present(s.w)
			if wrote := s.end(s.sse, resp, err); s.sse.flush() == nil && wrote {
				markAnswered(s.w, there)
			}
			return false
		}
		if err := s.sse.flush(); err != nil {
			s.gone(err)
			return false
		}
	}
}

// detached goes on with a stream that left the server, to its end. A
// panic, in the relay or in what runs at the stream's end, is logged and
// ends the stream, as net/http would for a handler.
func (s *relayed) detached() {
	defer func() {
		if v := recover(); v != nil {
			s.h.log.ErrorContext(s.r.Context(), "panic in a stream", "panic", v, "stack", string(debug.Stack()))
		}
	}()
	defer detach.End(s.w)
	defer s.close()
	defer func() {
		if v := recover(); v != nil {
			detach.Break(s.w)
			s.h.log.ErrorContext(s.r.Context(), "panic in a stream", "panic", v, "stack", string(debug.Stack()))
		}
	}()
	s.pump(false)
}

func (s *relayed) close() {
	if s.keepAlive != nil {
		s.keepAlive.Stop()
	}
	if s.counted {
		s.h.opts.Meter.StreamClosed()
	}
}
