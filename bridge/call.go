package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// Call is one request in flight to the child. Its owner waits on Wake and
// drains it with Take until Take reports done; every way a call can end
// (response, caller gone, timeout, child exit, shutdown) ends it exactly once.
type Call struct {
	b        *Bridge
	s        *session
	id       int64  // the gateway's id, also the progress token the child sees
	clientID []byte // restored on the response, byte for byte
	method   string
	token    []byte // the caller's progress token; nil if it asked for none
	caller   Caller
	internal bool // the gateway's own (handshake); never cancelled toward the child

	box   mailbox
	start time.Time

	mu           sync.Mutex
	idle         *time.Timer // reset by progress
	maxDur       *time.Timer
	stopCtx      func() bool // detaches the caller's ctx
	write        writeState
	cancelReason string // a cancellation that must follow the write in flight
}

type writeState int

const (
	writing    writeState = iota // WriteMessage has not returned
	written                      // the child has the request
	notWritten                   // it never reached the child
)

// Call forwards a request to the child on behalf of caller. It waits while
// a child is starting, and fails at once (with a *jsonrpc.Error) when there
// is none. The returned Call ends by itself when ctx ends, with the child
// told to cancel.
func (b *Bridge) Call(ctx context.Context, req *jsonrpc.Message, caller Caller) (*Call, error) {
	if req.Kind != jsonrpc.KindRequest {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "not a request"}
	}
	if req.Method == "ping" {
		return answered(req, []byte("{}")), nil
	}
	s, err := b.readySession(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case req.Method == "initialize":
		return s.answerInitialize(req)
	case req.Method == "server/discover" && s.era == EraLegacy:
		return s.answerDiscover(req)
	}
	if caller.LogLevel != "" {
		s.ensureLogLevel(caller.LogLevel)
	}
	c := &Call{b: b, s: s, id: b.nextID.Add(1), clientID: req.ID, method: req.Method, caller: caller, start: time.Now()}
	line, err := c.outgoing(req)
	if err != nil {
		return nil, err
	}
	if err := c.send(ctx, line, true); err != nil {
		return nil, err
	}
	return c, nil
}

// outgoing rewrites the request for the child: the gateway's id, and the
// gateway's progress token in place of the caller's.
func (c *Call) outgoing(req *jsonrpc.Message) ([]byte, error) {
	idSpan, _ := req.IDSpan()
	edits := []jsonrpc.Edit{{Span: idSpan, New: jsonrpc.Int(c.id)}}
	if ps, ok := req.ParamsSpan(); ok && req.Params[0] == '{' {
		tok, found, err := jsonrpc.Lookup(req.Params, "_meta", "progressToken")
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		if found {
			v := req.Params[tok.Start:tok.End]
			if v[0] != '"' && v[0] != '-' && (v[0] < '0' || v[0] > '9') {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "_meta.progressToken must be a string or an integer"}
			}
			c.token = bytes.Clone(v)
			edits = append(edits, jsonrpc.Edit{
				Span: jsonrpc.Span{Start: ps.Start + tok.Start, End: ps.Start + tok.End},
				New:  jsonrpc.Int(c.id),
			})
		}
	}
	if !c.caller.Modern && c.s.era == EraModern {
		edits = append(edits, c.s.modernMetaEdit(req, c.caller)...)
	}
	line := jsonrpc.Splice(req.Raw, edits...)
	if bytes.ContainsAny(line, "\r\n") {
		// Pretty-printed input: a stdio message must be one line.
		var buf bytes.Buffer
		if err := json.Compact(&buf, line); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: err.Error()}
		}
		line = buf.Bytes()
	}
	return line, nil
}

// send registers the call, arms its timers and writes it. On failure the call
// has been ended and the error says why.
func (c *Call) send(ctx context.Context, line []byte, timers bool) error {
	c.box.init(c.b.opts.MaxNotes)
	if err := c.s.register(c); err != nil {
		return errUnavailable(fmt.Sprintf("the child process is not running (%v)", err))
	}
	// Armed before the write so that an abort during the write is not lost:
	// the cancellation then follows the write (see sentOrWanted). Armed
	// under mu because a timer or ctx may fire before the fields are set.
	c.mu.Lock()
	if timers {
		c.idle = time.AfterFunc(c.b.opts.IdleTimeout, func() {
			c.abort(errTimeout(fmt.Sprintf("no response or progress from the child for %v", c.b.opts.IdleTimeout)), "timeout")
		})
		c.maxDur = time.AfterFunc(c.b.opts.MaxDuration, func() {
			c.abort(errTimeout(fmt.Sprintf("the call ran past the gateway's %v limit", c.b.opts.MaxDuration)), "timeout")
		})
	}
	c.stopCtx = context.AfterFunc(ctx, func() { c.abort(ctx.Err(), reasonFor(ctx)) })
	c.mu.Unlock()

	err := c.s.t.WriteMessage(ctx, line)
	c.writeDone(err)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		// The caller left before the request went out: it never reached the
		// child, so there is nothing to cancel.
		c.abort(ctx.Err(), "")
		return ctx.Err()
	default:
		if br, ok := c.s.t.(breaker); ok && br.Broken() {
			c.s.kill(fmt.Errorf("writing to the child failed: %w", err))
		}
		e := errUnavailable(fmt.Sprintf("could not send the request to the child: %v", err))
		c.abort(e, "")
		return e
	}
}

func reasonFor(ctx context.Context) string {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(cause, context.Canceled):
		return "client disconnected"
	}
	return cause.Error()
}

func errTimeout(msg string) *jsonrpc.Error {
	return jsonrpc.GatewayError(jsonrpc.CodeTimeout, "timeout", msg+"; the child was told to cancel")
}

// abort ends the call without a response: retire it first (a late answer is
// then dropped), then tell the child, unless it never got the request.
// An empty reason means the child must not be told.
func (c *Call) abort(err error, reason string) {
	if c.s.claim(c.id) == nil {
		return // already ended
	}
	c.finish(nil, err)
	if reason != "" && c.sentOrWanted(reason) {
		c.cancelInBackground(reason)
	}
}

// cancelInBackground tells the child to cancel, detached and bounded: the
// caller is gone or has its answer and must not wait for a slow child to
// take the notification.
func (c *Call) cancelInBackground(reason string) {
	c.b.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.b.opts.CancelTimeout)
		defer cancel()
		c.s.writeCancel(ctx, c, reason)
	})
}

// sentOrWanted reports whether the child has the request, so a cancellation
// should go now. While the write is still in flight it records the reason
// instead, and writeDone sends the cancellation once the request is out.
func (c *Call) sentOrWanted(reason string) bool {
	if c.internal || c.method == "initialize" {
		return false // the spec forbids cancelling initialize
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.write {
	case written:
		return true
	case writing:
		c.cancelReason = reason
	}
	return false
}

func (c *Call) writeDone(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.write = notWritten
		return
	}
	c.write = written
	if c.cancelReason != "" {
		c.cancelInBackground(c.cancelReason)
	}
}

func (s *session) writeCancel(ctx context.Context, c *Call, reason string) {
	params, _ := json.Marshal(struct {
		RequestID int64  `json:"requestId"`
		Reason    string `json:"reason"`
	}{c.id, reason})
	if err := s.t.WriteMessage(ctx, jsonrpc.NewNotification("notifications/cancelled", params)); err != nil {
		s.log.Warn("could not tell the child to cancel", "id", c.id, "method", c.method, "reason", reason, "err", err)
		return
	}
	s.log.Info("cancelled call", "id", c.id, "method", c.method, "reason", reason)
}

// finish delivers the end of the call to its owner, once.
func (c *Call) finish(resp []byte, err error) {
	if !c.box.finish(resp, err) {
		return
	}
	if c.s != nil {
		c.s.log.Debug("call ended", "id", c.id, "client_id", string(c.clientID), "method", c.method,
			"dur", time.Since(c.start).Round(time.Microsecond), "err", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idle != nil {
		c.idle.Stop()
		c.maxDur.Stop()
	}
	if c.stopCtx != nil {
		c.stopCtx()
	}
}

// progress queues a progress notification (token already restored) and
// restarts the idle timer: a call that reports progress is alive.
func (c *Call) progress(note []byte) {
	if !c.box.note(note, true) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idle != nil {
		c.idle.Reset(c.b.opts.IdleTimeout)
	}
}

// restore puts the caller's id back on a response from the child, and
// translates it when the child's era is not the caller's.
func (c *Call) restore(m *jsonrpc.Message) []byte {
	if c.clientID == nil {
		return m.Raw
	}
	idSpan, _ := m.IDSpan()
	edits := []jsonrpc.Edit{{Span: idSpan, New: c.clientID}}
	if c.caller.Modern && c.s.era == EraLegacy {
		edits = append(edits, modernEdits(c.method, m)...)
	}
	return jsonrpc.Splice(m.Raw, edits...)
}

// ID is the id the child sees for this call.
func (c *Call) ID() int64 { return c.id }

// Streams reports whether the caller asked for notifications (progress or
// log messages) before the response.
func (c *Call) Streams() bool { return c.token != nil || c.caller.LogLevel != "" }

// Cancel ends the call on the client's behalf (a legacy client's own
// notifications/cancelled): the child is told, with reason, and the caller
// gets an error it will not wait for.
func (c *Call) Cancel(reason string) {
	if c.s == nil {
		return // answered by the gateway; nothing to cancel
	}
	if reason == "" {
		reason = "cancelled by the client"
	}
	c.abort(jsonrpc.GatewayError(jsonrpc.CodeCancelled, "cancelled", "the client cancelled the call"), reason)
}

// ErrorCode is the code of the child's error response, once Take has
// reported done with one; 0 otherwise.
func (c *Call) ErrorCode() int {
	c.box.mu.Lock()
	defer c.box.mu.Unlock()
	return c.box.code
}

// Wake is signalled whenever Take has something new.
func (c *Call) Wake() <-chan struct{} { return c.box.wake }

// Take returns the notifications queued since the last Take, in order, and,
// once the call has ended, its response or error with done set. The response
// carries the caller's id. err is a *jsonrpc.Error made by the gateway, or the
// caller's context error.
func (c *Call) Take() (notes [][]byte, resp []byte, err error, done bool) {
	return c.box.take()
}

// Wait blocks until the call ends and returns its response, dropping any
// notifications.
func (c *Call) Wait() ([]byte, error) {
	for {
		<-c.Wake()
		if _, resp, err, done := c.Take(); done {
			return resp, err
		}
	}
}

// answered is a call the gateway answered itself.
func answered(req *jsonrpc.Message, result []byte) *Call {
	c := &Call{clientID: req.ID, method: req.Method}
	c.box.init(1)
	c.box.finish(jsonrpc.NewResult(req.ID, result), nil)
	return c
}

// mailbox hands a call's notifications and end from the reader to the owner
// without ever blocking the reader.
type mailbox struct {
	mu      sync.Mutex
	notes   []note
	max     int
	dropped int // notes that found the mailbox full
	code    int // the child's error code when resp is an error response
	resp    []byte
	err     error
	done    bool
	wake    chan struct{} // 1-buffered: a pending signal, never a queue
}

type note struct {
	raw      []byte
	progress bool // cumulative: a newer one makes it obsolete
}

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

// note queues a notification; it reports false once the call has ended.
// Over the limit, a progress notification replaces a progress notification
// queued last (progress is cumulative: the latest value wins, and the order
// is kept); anything else that finds the mailbox full is dropped.
func (m *mailbox) note(b []byte, progress bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return false
	}
	switch {
	case len(m.notes) < m.max:
		m.notes = append(m.notes, note{b, progress})
	case progress && m.notes[len(m.notes)-1].progress:
		m.notes[len(m.notes)-1] = note{b, progress}
	default:
		m.dropped++
	}
	m.signal()
	return true
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

// setErrorCode records the code of the child's error response, before the
// response itself is delivered.
func (m *mailbox) setErrorCode(code int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.code = code
}

// peek reports the call's state without taking anything.
func (m *mailbox) peek() (notes int, resp []byte, err error, done bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.notes), m.resp, m.err, m.done
}

func (m *mailbox) take() ([][]byte, []byte, error, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var notes [][]byte
	for _, n := range m.notes {
		notes = append(notes, n.raw)
	}
	m.notes = nil
	if m.done {
		// Keep signalling: a later Take must see the end again.
		m.signal()
	}
	return notes, m.resp, m.err, m.done
}
