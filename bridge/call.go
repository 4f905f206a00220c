package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// Call is one client request in flight, as the HTTP side sees it. Its owner
// waits on Wake and drains it with Take until Take reports done. It ends
// exactly once, by whichever of its endings comes first: the child's
// response, the client leaving or cancelling, a timeout, the child's exit,
// shutdown.
type Call interface {
	// Wake is signalled whenever Take has something new.
	Wake() <-chan struct{}
	// Take returns the messages for the client queued since the last Take,
	// in order (notifications, and requests a legacy client is asked to
	// answer), and, once the call has ended, its response or error with
	// done set. The response carries the client's id. err is a
	// *jsonrpc.Error made by the gateway, or the client's context error.
	// Take is the call's owner's, one goroutine at a time: notes is
	// valid until its next Take, which reuses the slice (not the
	// messages).
	Take() (notes [][]byte, resp []byte, done bool, err error)
	// Streams reports whether the client asked for notifications (progress
	// or log messages) before the response.
	Streams() bool
	// ErrorCode is the code of the child's error response, once Take has
	// reported done with one; 0 otherwise.
	ErrorCode() int
	// Cancel ends the call on the client's behalf (a legacy client's own
	// notifications/cancelled): the child is told, with reason, and the
	// call ends with an error the client will not wait for.
	Cancel(reason string)
}

// Caller describes the client behind one request: what the bridge needs to
// serve it in its own protocol era, whatever the child speaks.
type Caller struct {
	// Modern is true for a 2026-07-28 client: every request carries its
	// version and capabilities in _meta.
	Modern bool
	// Capabilities are the client's (a ClientCapabilities object): from the
	// request's _meta, or from a legacy client's initialize.
	Capabilities json.RawMessage
	// LogLevel is the lowest notifications/message level the client wants;
	// "" means none.
	LogLevel string
	// ClientInfo is the client's Implementation object, if known.
	ClientInfo json.RawMessage
	// CanStream is true when the client takes an SSE answer, so it can be
	// asked questions (sampling, elicitation, roots) in the middle of a call.
	CanStream bool
	// Meta are _meta members for the child that the request itself does not
	// carry (the HTTP request's trace context); a key the request's _meta
	// has keeps the request's value.
	Meta []mcp.Member
	// Principal names who sent the request, as the front door
	// authenticated it ("" for anyone): a parked call resumes only for the
	// caller it was parked for, whoever else holds its requestState.
	Principal string
}

// call is the bridge's Call. Toward the child it is one exchange, or
// several in a row when a modern child needs input that a legacy client
// supplies.
type call struct {
	b        *Bridge
	ch       *child       // nil for a call the gateway answered itself
	req      *mcp.Request // the client's request; nil for the gateway's own
	clientID []byte       // restored on the response, byte for byte
	method   string
	params   []byte // the gateway's own request's params
	token    []byte // the client's progress token; nil if it asked for none
	caller   Caller
	listen   *mcp.Filter // what a listen delivers: its filter (on a legacy child, what the child honors of it)
	start    time.Time
	idleFor  time.Duration // 0: no idle limit
	maxFor   time.Duration // 0: no limit on the whole call
	// ctx is the client's: the call ends when it does (see expire), and
	// the call's log lines carry its values (see logCtx).
	ctx context.Context

	box mailbox

	mu      sync.Mutex
	ex      *exchange   // the exchange in flight; nil before, between and after exchanges
	ended   bool        // claimed by one of its endings
	timer   *time.Timer // the nearer of the idle and the whole-call limits
	alive   time.Time   // the last sign of life (see resetIdle)
	stopCtx func() bool // detaches the client's ctx
	slot    *slot       // released when the call ends
	onEnd   func(*call) // runs once when the call ends

	// first is the call's first exchange (see newExchange); firstUsed
	// (guarded by mu) says it was taken.
	first     exchange
	firstUsed bool
}

// callSpec says what newCall makes.
type callSpec struct {
	req    *mcp.Request // a client's request; nil for the gateway's own
	method string       // the gateway's own request's method and params
	params []byte
	caller Caller
	idle   time.Duration // no answer or progress for this long times out; 0: never
	max    time.Duration // the longest the call may run; 0: no limit
	slot   *slot
	listen *mcp.Filter
	onEnd  func(*call)
}

// newCall makes a call on ch and arms it: the one place where a call is
// tied to its client's ctx (for the gateway's own requests, a ctx with
// their deadline) and given its timer (set for the nearer of its limits).
// Whichever comes first, the ctx or a limit, aborts the call; a call of
// the gateway's own is never cancelled toward the child (see
// exchange.sentOrWanted).
func (ch *child) newCall(ctx context.Context, spec callSpec) *call {
	c := &call{b: ch.b, ch: ch, req: spec.req, method: spec.method, params: spec.params, caller: spec.caller,
		listen: spec.listen, start: time.Now(), idleFor: spec.idle, maxFor: spec.max, slot: spec.slot, onEnd: spec.onEnd,
		ctx: ctx}
	c.alive = c.start
	n := 1
	if spec.req != nil {
		c.clientID, c.method, n = spec.req.ID, spec.req.Method, ch.b.opts.MaxNotes
		if tok, ok := spec.req.Meta(mcp.MetaProgressToken); ok {
			c.token = bytes.Clone(tok)
		}
	}
	c.box.init(n)
	c.mu.Lock()
	defer c.mu.Unlock()
	// Armed under mu: a timer or ctx may fire before the fields are set.
	// Both run expire: one func value for the two.
	expire := c.expire
	c.stopCtx = ch.b.opts.AfterDone(ctx, expire)
	// One timer for both limits, set for the nearer: a call costs one
	// timer, which a sign of life does not touch (see resetIdle).
	if d, ok := c.untilLimit(c.start); ok {
		c.timer = time.AfterFunc(d, expire)
	}
	return c
}

// expire runs when the client's ctx ends or the call's timer fires,
// whichever it was: an ended ctx aborts the call for its reason, and
// otherwise a limit may have been reached.
func (c *call) expire() {
	if err := ctxEnding(c.ctx); err != nil {
		c.abort(err, reasonFor(c.ctx))
		return
	}
	c.limitReached()
}

// logCtx is the client's ctx for its values alone, for a log handler to
// add what the request carries (its request id, its trace) whether or not
// the client is still there. Made only for a line that is written.
func (c *call) logCtx() context.Context { return context.WithoutCancel(c.ctx) }

// untilLimit is how long from now until the idle or the whole-call limit
// is reached, whichever comes first; ok is false when the call has
// neither. Called with mu held.
func (c *call) untilLimit(now time.Time) (d time.Duration, ok bool) {
	if c.idleFor > 0 {
		d, ok = c.alive.Add(c.idleFor).Sub(now), true
	}
	if c.maxFor > 0 {
		if left := c.start.Add(c.maxFor).Sub(now); !ok || left < d {
			d, ok = left, true
		}
	}
	return max(d, 0), ok
}

// limitReached is the timer's (see expire): it aborts the call for the
// limit that is reached, or sets the timer again when a sign of life came
// in the meantime (see resetIdle).
func (c *call) limitReached() {
	now := time.Now()
	c.mu.Lock()
	var err error
	switch {
	case c.ended:
	case c.maxFor > 0 && now.Sub(c.start) >= c.maxFor:
		err = errTimeout(fmt.Sprintf("the call ran past the gateway's %v limit", c.maxFor))
	case c.idleFor > 0 && now.Sub(c.alive) >= c.idleFor:
		err = errTimeout(fmt.Sprintf("no response or progress from the child for %v", c.idleFor))
	default:
		if d, ok := c.untilLimit(now); ok {
			c.timer.Reset(d)
		}
	}
	c.mu.Unlock()
	if err != nil {
		c.abort(err, "timeout")
	}
}

func (c *call) internal() bool { return c.req == nil }

// ctxEnding is the error of a call whose client's ctx ended: the ctx's
// cause when the caller gave one as a JSON-RPC error (its own timeout, as
// the REST API's, is -32001, which the call's ending counts as a timeout),
// and ctx.Err() otherwise; nil while ctx lasts.
func ctxEnding(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if e, ok := errors.AsType[*jsonrpc.Error](context.Cause(ctx)); ok {
		return e
	}
	return err
}

func reasonFor(ctx context.Context) string {
	cause := context.Cause(ctx)
	e, isRPC := errors.AsType[*jsonrpc.Error](cause)
	switch {
	case isRPC:
		return e.Message
	case errors.Is(cause, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(cause, context.Canceled):
		return "client disconnected"
	}
	return cause.Error()
}

// answeredByGateway is a call the gateway answered itself: born ended.
func answeredByGateway(req *mcp.Request, result []byte) *call {
	c := &call{ctx: context.Background(), clientID: req.ID, method: req.Method, ended: true}
	c.box.init(1)
	c.box.finish(jsonrpc.NewResult(req.ID, result), nil)
	return c
}

// newExchange is room for the call's next exchange. The first is part of
// the call, which most calls never go beyond: a call and its exchange are
// one allocation. A parked exchange keeps the call it was made in alive
// until the exchange ends; a retry's call takes it over as it is.
func (c *call) newExchange() *exchange {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.firstUsed {
		return new(exchange)
	}
	c.firstUsed = true
	return &c.first
}

// attach makes ex the call's exchange in flight, unless the call has
// ended.
func (c *call) attach(ex *exchange) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return false
	}
	c.ex = ex
	return true
}

// detach leaves the call between exchanges, unless it has ended.
func (c *call) detach() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return false
	}
	c.ex = nil
	return true
}

func (c *call) isEnded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ended
}

// claim wins the right to end the call, for the one ending that comes
// first: it stops the timer and detaches the client's ctx, and returns
// the exchange in flight, which the winner must retire or has taken. It
// reports false when another ending came first.
func (c *call) claim() (*exchange, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return nil, false
	}
	c.ended = true
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.stopCtx != nil {
		c.stopCtx()
	}
	ex := c.ex
	c.ex = nil
	return ex, true
}

// deliver hands the end of the call to its owner, after letting go of
// what the call held: a client that has seen its call end finds its slot
// free, unless its child keeps it (see abort). Only the ending that
// claimed the call calls it.
func (c *call) deliver(resp []byte, err error) {
	c.mu.Lock()
	s, onEnd := c.slot, c.onEnd
	c.slot, c.onEnd = nil, nil
	c.mu.Unlock()
	s.release()
	if onEnd != nil {
		onEnd(c)
	}
	if !c.internal() && c.method != mcp.MethodListen {
		// Before the owner can see the end, so that a client that has its
		// answer finds it counted.
		c.b.opts.Observer.CallEnded(endingOf(err, c.box.childError()))
	}
	if !c.box.finish(resp, err) {
		c.b.bug(fmt.Errorf("the call for client id %s (%s) ended twice; the second end (%v) is dropped", c.clientID, c.method, err))
		return
	}
	if c.ch != nil && c.ch.log.Enabled(c.ctx, slog.LevelDebug) {
		c.ch.log.DebugContext(c.logCtx(), "call ended", "client_id", logged(c.clientID), "method", clipped(c.method),
			"dur", time.Since(c.start).Round(time.Microsecond), "err", err)
	}
}

// end claims the call and delivers resp or err; it reports false when
// another ending came first. For endings that have taken the call's
// exchange already (the answer, a failed child), or have none.
func (c *call) end(resp []byte, err error) bool {
	if _, ok := c.claim(); !ok {
		return false
	}
	c.deliver(resp, err)
	return true
}

// abort ends the call without the child's response: the client left,
// timed out or cancelled, or the request could not be sent. The exchange in
// flight is retired first, so that a late answer is dropped; then the
// child is told with reason, unless reason is "" or the child never got
// the request (or has answered already). The call's slot goes with its
// exchange: a child that may still be working on it keeps it until it
// settles (see child.holdLocked); the client is not kept waiting for that.
func (c *call) abort(err error, reason string) {
	ex, ok := c.claim()
	if !ok {
		return
	}
	var back *slot
	if ex != nil {
		var retired bool
		retired, back = ex.ch.retire(ex, c.takeSlot())
		if retired {
			ex.setOwner(nil)
			if ex.asked.Load() {
				ex.ch.b.q.refuseAll(ex, "the call was cancelled")
			}
			ex.cancel(reason)
		} else {
			// The child's side took the exchange first (it answered, or it
			// exited and its exchanges failed), and this ending won the call
			// all the same: there is nothing left to cancel.
			ex.ch.log.DebugContext(c.logCtx(), "exchange over before the cancellation", "id", ex.id, "method", clipped(c.method), "client_id", logged(c.clientID))
		}
	}
	c.b.q.dropInputs(c)
	back.release() // as deliver releases a slot: before the owner can see the end
	c.deliver(nil, err)
}

// endedBefore is why a call ended before it could start: its client's
// ctx ended, or another ending came first, whose error may not be
// delivered yet.
func (c *call) endedBefore(ctx context.Context) error {
	if err := ctxEnding(ctx); err != nil {
		return ended(err)
	}
	if _, _, _, err := c.box.peek(); err != nil {
		return ended(err)
	}
	return ended(errUnavailable("the call ended before its request reached the child"))
}

// give hands the call a slot to release when it ends. A call that has
// ended gives it back, for the caller to release once it holds no lock.
func (c *call) give(s *slot) (back *slot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return s
	}
	c.slot = s
	return nil
}

// takeSlot takes the call's slot away, for a parking, or a child whose
// call has ended unsettled (see abort), to hold.
func (c *call) takeSlot() *slot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.slot
	c.slot = nil
	return s
}

// progress relays a progress notification for the call's exchange, with
// the client's token restored, and moves the idle limit: a call that
// reports progress is alive.
func (c *call) progress(m *jsonrpc.Message, tok jsonrpc.Span) ProgressFate {
	if c.token == nil {
		return ProgressDropped
	}
	ps, _ := m.ParamsSpan()
	edit := jsonrpc.Edit{Span: jsonrpc.Span{Start: ps.Start + tok.Start, End: ps.Start + tok.End}, New: c.token}
	// The child's line is the gateway's own and used no more: it takes
	// the client's token where it has room (see stdio.Spare).
	note, ok := jsonrpc.SpliceInPlace(m.Raw, edit)
	if !ok {
		note = jsonrpc.Splice(m.Raw, edit)
	}
	kept, coalesced, dropped := c.box.put(note, noteProgress)
	if !kept {
		return ProgressDropped
	}
	c.resetIdle() // the child reports: the call is alive, whether or not its client keeps up
	switch {
	case coalesced:
		return ProgressCoalesced
	case dropped:
		return ProgressDropped
	}
	return ProgressRelayed
}

// resetIdle moves the idle limit from now: the call is alive (it reported
// progress, or its client is being asked something, or answered). The
// timer stays as it is: when it fires, limitReached sets it again for the
// limit from the last sign of life. A stream of progress costs a clock
// read a message, not a reset of the timer.
func (c *call) resetIdle() {
	if c.idleFor <= 0 {
		return
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ended {
		c.alive = now
	}
}

// restore puts the client's id back on the child's response, and
// translates it when the child's era is not the client's.
func (c *call) restore(ex *exchange, m *jsonrpc.Message) []byte {
	if c.clientID == nil {
		return m.Raw
	}
	idSpan, _ := m.IDSpan()
	edits := []jsonrpc.Edit{{Span: idSpan, New: c.clientID}}
	if c.caller.Modern && c.ch.eraNow() == EraLegacy {
		edits = append(edits, mcp.ModernResponse(ex.method, m)...)
	}
	edits = c.retagListenAnswer(m, edits)
	if len(edits) == 1 {
		// The child's line is the gateway's own and used no more: a large
		// result is not copied just to change its id (see stdio.Spare).
		if out, ok := jsonrpc.SpliceInPlace(m.Raw, edits[0]); ok {
			return out
		}
	}
	return jsonrpc.Splice(m.Raw, edits...)
}

func (c *call) Streams() bool {
	return c.token != nil || c.caller.LogLevel != "" || c.method == mcp.MethodListen
}

func (c *call) Cancel(reason string) {
	if c.ch == nil {
		return // answered by the gateway; nothing to cancel
	}
	if reason == "" {
		reason = "cancelled by the client"
	}
	c.abort(jsonrpc.GatewayError(jsonrpc.CodeCancelled, "cancelled", "the client cancelled the call"), reason)
}

func (c *call) ErrorCode() int {
	c.box.mu.Lock()
	defer c.box.mu.Unlock()
	return c.box.code
}

func (c *call) Wake() <-chan struct{} { return c.box.wake }

func (c *call) Take() (notes [][]byte, resp []byte, done bool, err error) {
	return c.box.take()
}

// wait blocks until the call ends and returns its response, dropping any
// notifications.
func (c *call) wait() ([]byte, error) {
	for {
		<-c.Wake()
		if _, resp, done, err := c.Take(); done {
			return resp, err
		}
	}
}
