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

// Call is one client request as its owner sees it. The owner waits on Wake
// and drains it with Take until Take reports done; every way a call can end
// (response, caller gone, timeout, child exit, shutdown) ends it exactly
// once. Toward the child a call is one exchange, or several in a row when a
// modern child needs input that a legacy client supplies.
type Call struct {
	b        *Bridge
	s        *session
	req      *jsonrpc.Message // the client's request, for the lines sent to the child
	clientID []byte           // restored on the response, byte for byte
	method   string
	token    []byte // the caller's progress token; nil if it asked for none
	caller   Caller
	start    time.Time

	box mailbox

	mu      sync.Mutex
	ex      *exchange   // the exchange in flight; nil between exchanges
	idle    *time.Timer // reset by progress
	maxDur  *time.Timer
	stopCtx func() bool // detaches the caller's ctx
	inputs  *inputs     // a modern child's input requests, being answered by a legacy client
	onEnd   func()      // runs once when the call ends (a listen's cleanup)
	after   []func()    // run once the call has ended (see whenDone)
	ended   bool        // finish has run
}

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
	case req.Method == "server/discover" && s.eraNow() == EraLegacy:
		return s.answerDiscover(req)
	case req.Method == methodListen && s.eraNow() == EraLegacy:
		return s.listenLegacy(ctx, req, caller)
	}
	if s.eraNow() == EraLegacy {
		if id, round, ours, err := b.ownState(req); ours {
			if err != nil {
				return nil, err
			}
			return b.resume(ctx, req, caller, id, round)
		}
	}
	if caller.LogLevel != "" {
		s.ensureLogLevel(caller.LogLevel)
	}
	c, err := newCall(b, s, req, caller)
	if err != nil {
		return nil, err
	}
	c.arm(ctx)
	if err := s.start(ctx, c, req.Method, nil, false); err != nil {
		return nil, err
	}
	return c, nil
}

// newCall checks the request's progress token and makes its client side.
func newCall(b *Bridge, s *session, req *jsonrpc.Message, caller Caller) (*Call, error) {
	c := &Call{b: b, s: s, req: req, clientID: req.ID, method: req.Method, caller: caller, start: time.Now()}
	c.box.init(b.opts.MaxNotes)
	if req.Params != nil && req.Params[0] == '{' {
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
		}
	}
	return c, nil
}

// internalCall is a request of the gateway's own, with no client behind it.
func (s *session) internalCall(method string) *Call {
	c := &Call{b: s.b, s: s, method: method, start: time.Now()}
	c.box.init(1)
	return c
}

func (c *Call) nextChildID() int64 { return c.b.nextID.Add(1) }

// line is the request as the child gets it under exchange id: the gateway's
// id, the gateway's progress token in place of the caller's, the _meta a
// modern child needs for a legacy caller, and extra params members (a
// retry's inputResponses). Every other byte is the client's.
func (c *Call) line(id int64, extra []byte) []byte {
	req := c.req
	idSpan, _ := req.IDSpan()
	edits := []jsonrpc.Edit{{Span: idSpan, New: jsonrpc.Int(id)}}
	if ps, ok := req.ParamsSpan(); ok && c.token != nil {
		tok, _, _ := jsonrpc.Lookup(req.Params, "_meta", "progressToken")
		edits = append(edits, jsonrpc.Edit{
			Span: jsonrpc.Span{Start: ps.Start + tok.Start, End: ps.Start + tok.End},
			New:  jsonrpc.Int(id),
		})
	}
	if !c.caller.Modern && c.s.eraNow() == EraModern {
		edits = append(edits, c.s.modernMetaEdit(req, c.caller, extra)...)
	} else if extra != nil {
		edits = append(edits, paramsEdit(req, extra))
	}
	line := jsonrpc.Splice(req.Raw, edits...)
	if bytes.ContainsAny(line, "\r\n") {
		// Pretty-printed input: a stdio message must be one line. The body
		// was parsed, so it is valid JSON and compacts.
		var buf bytes.Buffer
		_ = json.Compact(&buf, line)
		line = buf.Bytes()
	}
	return line
}

// arm starts the call's timeouts and ties it to the caller's ctx. Armed
// under mu, since a timer or ctx may fire before the fields are set.
func (c *Call) arm(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopCtx = context.AfterFunc(ctx, func() { c.abort(ctx.Err(), reasonFor(ctx)) })
	if c.method == methodListen {
		return // a listen lasts as long as its client wants it
	}
	c.idle = time.AfterFunc(c.b.opts.IdleTimeout, func() {
		c.abort(errTimeout(fmt.Sprintf("no response or progress from the child for %v", c.b.opts.IdleTimeout)), "timeout")
	})
	c.maxDur = time.AfterFunc(c.b.opts.MaxDuration, func() {
		c.abort(errTimeout(fmt.Sprintf("the call ran past the gateway's %v limit", c.b.opts.MaxDuration)), "timeout")
	})
}

// release stops the timers and detaches the caller's ctx.
func (c *Call) release() {
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

func (c *Call) attach(ex *exchange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ex = ex
}

func (c *Call) exchange() *exchange {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ex
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

// abort ends the call without a response: the exchange is retired first (a
// late answer is then dropped), then the child is told, unless it never got
// the request. An empty reason means the child must not be told.
func (c *Call) abort(err error, reason string) {
	ex := c.exchange()
	if ex != nil && !ex.retire(c) {
		// The child's answer won the race and ends the call; or the
		// exchange was parked (the call has its InputRequiredResult) or
		// continued by a retry, and is no longer this call's to retire.
		return
	}
	if !c.finish(nil, err) {
		return
	}
	c.dropInputs()
	if ex != nil {
		ex.closeAsks("the call was cancelled")
		ex.cancel(reason)
	}
}

// finish delivers the end of the call to its owner, once, and reports
// whether this was the end.
func (c *Call) finish(resp []byte, err error) bool {
	if !c.box.finish(resp, err) {
		return false
	}
	if c.s != nil {
		c.s.log.Debug("call ended", "client_id", string(c.clientID), "method", c.method,
			"dur", time.Since(c.start).Round(time.Microsecond), "err", err)
	}
	c.release()
	c.mu.Lock()
	onEnd, after := c.onEnd, c.after
	c.after, c.ended = nil, true
	c.mu.Unlock()
	if onEnd != nil {
		onEnd()
	}
	for _, f := range after {
		f()
	}
	return true
}

// whenDone runs f once the call has ended, at once if it already has. A
// call the gateway answered by itself (no session) is born ended.
func (c *Call) whenDone(f func()) {
	c.mu.Lock()
	if !c.ended && c.s != nil {
		c.after = append(c.after, f)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	f()
}

// progress relays a progress notification for the call's exchange, with
// the caller's token restored, and restarts the idle timer: a call that
// reports progress is alive.
func (c *Call) progress(m *jsonrpc.Message, tok jsonrpc.Span) {
	if c.token == nil {
		return
	}
	ps, _ := m.ParamsSpan()
	note := jsonrpc.Splice(m.Raw, jsonrpc.Edit{Span: jsonrpc.Span{Start: ps.Start + tok.Start, End: ps.Start + tok.End}, New: c.token})
	if !c.box.note(note, noteProgress) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idle != nil {
		c.idle.Reset(c.b.opts.IdleTimeout)
	}
}

// restore puts the caller's id back on the child's response, and translates
// it when the child's era is not the caller's.
func (c *Call) restore(ex *exchange, m *jsonrpc.Message) []byte {
	if c.clientID == nil {
		return m.Raw
	}
	idSpan, _ := m.IDSpan()
	edits := []jsonrpc.Edit{{Span: idSpan, New: c.clientID}}
	if c.caller.Modern && c.s.eraNow() == EraLegacy {
		edits = append(edits, modernEdits(ex.method, m)...)
	}
	if len(edits) == 1 {
		// The child's line is the gateway's own and used no more: a large
		// result is not copied just to change its id (see stdio.Spare).
		if out, ok := jsonrpc.SpliceInPlace(m.Raw, edits[0]); ok {
			return out
		}
	}
	return jsonrpc.Splice(m.Raw, edits...)
}

// Streams reports whether the caller asked for notifications (progress or
// log messages) before the response.
func (c *Call) Streams() bool {
	return c.token != nil || c.caller.LogLevel != "" || c.method == methodListen
}

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

// Take returns the messages for the client queued since the last Take, in
// order (notifications, and requests a legacy client is asked to answer),
// and, once the call has ended, its response or error with done set. The
// response carries the caller's id. err is a *jsonrpc.Error made by the
// gateway, or the caller's context error.
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
