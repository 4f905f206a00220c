package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// exchange is one request as the child sees it, under a gateway id, from
// when it is written until the child answers or is told to cancel. Its
// client side is a Call. A 2026-07-28 client that must supply input for a
// legacy child leaves the exchange parked, with no Call, until the client's
// retry picks it up (see park.go).
type exchange struct {
	s        *session
	id       int64
	method   string
	clientID []byte // the client's id for the request, for logs
	internal bool   // the gateway's own (handshake); never cancelled toward the child

	mu           sync.Mutex
	call         *Call            // the client side; nil while parked
	write        writeState       // how far the request got toward the child
	cancelReason string           // a cancellation that must follow the write in flight
	asks         map[string]*ask  // the child's questions waiting on the client, by the id the client sees
	final        *jsonrpc.Message // the child's answer, when it came while parked
	parkTimer    *time.Timer      // ends a parked exchange the client does not continue
	parkedFor    Caller           // the client a parked exchange waits for
	parkSoon     bool             // questions for a modern client are coming in (see flushParks)
	missing      []string         // capabilities the child asked for that the modern client lacks
	round        int              // how many times the exchange has been parked
}

type writeState int

const (
	writing    writeState = iota // WriteMessage has not returned
	written                      // the child has the request
	notWritten                   // it never reached the child
)

// start sends a request to the child for c: registered first, so that an
// answer racing the write is not lost, then written. On failure c has been
// ended and the error says why.
func (s *session) start(ctx context.Context, c *Call, method string, line []byte, internal bool) error {
	ex := &exchange{s: s, id: c.nextChildID(), method: method, clientID: c.clientID, internal: internal, call: c}
	c.attach(ex)
	if internal {
		line = jsonrpc.NewRequest(ex.id, method, line)
	} else {
		line = c.line(ex.id, line)
	}
	if err := s.register(ex); err != nil {
		e := errUnavailable(fmt.Sprintf("the child process is not running (%v)", err))
		c.finish(nil, e)
		return e
	}
	err := s.t.WriteMessage(ctx, line)
	s.log.Debug("to child", "id", ex.id, "method", method, "client_id", string(ex.clientID), "size", len(line), "err", err)
	ex.writeDone(err)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		// The caller left before the request went out: it never reached the
		// child, so there is nothing to cancel.
		c.abort(ctx.Err(), "")
		return ctx.Err()
	default:
		if br, ok := s.t.(breaker); ok && br.Broken() {
			s.kill(fmt.Errorf("writing to the child failed: %w", err))
		}
		e := errUnavailable(fmt.Sprintf("could not send the request to the child: %v", err))
		c.abort(e, "")
		return e
	}
}

// retire takes the exchange out of the pending table for its call c, so
// that a late answer is dropped, and detaches c so that it is not parked
// afterwards. It fails when the child's answer claimed the exchange first,
// or when c no longer owns it: parking detached c, or a retry took over.
// Deciding under ex.mu keeps a call that leaves just as it is parked from
// retiring the parked exchange its retry will need.
func (ex *exchange) retire(c *Call) bool {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.call != c || !ex.s.claim(ex) {
		return false
	}
	ex.call = nil
	return true
}

// current is the exchange's client side, or nil while parked.
func (ex *exchange) current() *Call {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.call
}

// sentOrWanted reports whether the child has the request, so a cancellation
// should go now. While the write is still in flight it records the reason
// instead, and writeDone sends the cancellation once the request is out.
func (ex *exchange) sentOrWanted(reason string) bool {
	if ex.internal || ex.method == "initialize" || strings.HasPrefix(ex.method, "tasks/") {
		// The spec forbids cancelling initialize. A task is never cancelled
		// by a client going away: a tasks/* request is only a look at one,
		// and only tasks/cancel ends it.
		return false
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	switch ex.write {
	case written:
		return true
	case writing:
		ex.cancelReason = reason
	}
	return false
}

func (ex *exchange) writeDone(err error) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if err != nil {
		ex.write = notWritten
		return
	}
	ex.write = written
	if ex.cancelReason != "" {
		ex.cancelInBackground(ex.cancelReason)
	}
}

// cancel tells the child to stop, unless it never got the request.
func (ex *exchange) cancel(reason string) {
	if reason != "" && ex.sentOrWanted(reason) {
		ex.cancelInBackground(reason)
	}
}

// cancelInBackground tells the child to cancel, detached and bounded: the
// caller is gone or has its answer and must not wait for a slow child to
// take the notification.
func (ex *exchange) cancelInBackground(reason string) {
	ex.s.b.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ex.s.b.opts.CancelTimeout)
		defer cancel()
		ex.s.writeCancel(ctx, ex, reason)
	})
}

func (s *session) writeCancel(ctx context.Context, ex *exchange, reason string) {
	params, _ := json.Marshal(struct {
		RequestID int64  `json:"requestId"`
		Reason    string `json:"reason"`
	}{ex.id, reason})
	if err := s.t.WriteMessage(ctx, jsonrpc.NewNotification("notifications/cancelled", params)); err != nil {
		s.log.Warn("could not tell the child to cancel", "id", ex.id, "method", ex.method, "client_id", string(ex.clientID), "reason", reason, "err", err)
		return
	}
	s.log.Info("cancelled call", "id", ex.id, "method", ex.method, "client_id", string(ex.clientID), "reason", reason)
}

// answered hands the child's response to the client side: translated,
// relayed, turned into questions for a legacy client, or kept for a parked
// exchange's retry.
func (ex *exchange) answered(m *jsonrpc.Message) {
	ex.closeAsks("the request they belonged to has ended")
	ex.mu.Lock()
	c := ex.call
	if c == nil {
		ex.final = m
	}
	ex.mu.Unlock()
	if c == nil {
		return // parked: the client's retry will take it
	}
	if m.Error != nil {
		if code, ok := errorCode(m.Error); ok {
			c.box.setErrorCode(code)
		}
	}
	if c.needsInputFromLegacyClient(ex, m) {
		c.askForInputs(ex, m)
		return
	}
	c.finish(c.restore(ex, m), nil)
}

// end fails the exchange's client side (the child is gone or the gateway
// stops) and drops its questions.
func (ex *exchange) end(err error) {
	ex.closeAsks("")
	ex.mu.Lock()
	c := ex.call
	if ex.parkTimer != nil {
		ex.parkTimer.Stop()
	}
	ex.mu.Unlock()
	ex.s.b.unpark(ex)
	if c != nil {
		c.finish(nil, err)
	}
}
