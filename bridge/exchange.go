package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// exchange is one request as the child sees it, under a gateway id, from
// when it is written until the child answers or is told to cancel. Its
// client side is a call. A 2026-07-28 client that must answer a legacy
// child's questions leaves the exchange parked, with no call, until the
// client's retry resumes it (see park.go).
type exchange struct {
	ch       *child
	id       int64
	method   string
	clientID []byte          // the client's id for the request, for logs
	ctx      context.Context // the ctx of the call that started it, for the values in its log lines (see logCtx)
	internal bool            // the gateway's own (handshake, probes); never cancelled toward the child
	// asked is set, by the reader, when the child asks a question during
	// the exchange; only then does the exchange have state in questions.
	asked atomic.Bool

	mu           sync.Mutex
	call         *call      // the client side; nil while parked
	sent         time.Time  // since when the child owes the call an answer (see owedSince)
	write        writeState // how far the request got toward the child
	cancelReason string     // a cancellation that must follow the write in flight
}

type writeState int

const (
	writing    writeState = iota // WriteMessage has not returned
	written                      // the child has the request
	notWritten                   // it never reached the child
)

// start sends the call's request to the child as a new exchange:
// registered first, so that an answer racing the write is not lost, then
// written. set are params members the gateway sets (a retry's
// inputResponses). On failure the call has ended and the error says why.
func (ch *child) start(ctx context.Context, c *call, set []mcp.Member) error {
	ex := c.newExchange()
	*ex = exchange{ch: ch, id: ch.b.ids.Add(1), method: c.method, clientID: c.clientID, ctx: c.ctx, internal: c.internal(), call: c, sent: time.Now()}
	buf := ch.b.lineBuf()
	defer ch.b.freeLineBuf(buf)
	line := c.appendLine((*buf)[:0], ex.id, set)
	*buf = line // grown, for the next line
	others, err := ch.register(ex)
	if err != nil {
		e := notRunning(err)
		c.abort(e, "")
		return e
	}
	if !c.attach(ex) {
		// The call ended before its request went out (its client left):
		// nothing was written, so there is nothing to cancel, and nothing
		// the child may still be working on (see unsettle).
		ex.mu.Lock()
		ex.write = notWritten
		ex.mu.Unlock()
		ch.retire(ex, nil) // the call's ending released its slot
		return c.endedBefore(ctx)
	}
	if g, ok := ch.t.(Gatherer); ok && others > 0 {
		err = g.GatherMessage(ctx, line)
	} else {
		err = ch.t.WriteMessage(ctx, line)
	}
	if ch.log.Enabled(ex.ctx, slog.LevelDebug) {
		ch.log.DebugContext(ex.logCtx(), "to child", "id", ex.id, "method", clipped(ex.method), "client_id", logged(ex.clientID), "size", len(line), "err", err)
	}
	ex.writeDone(err)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		// The client left before the request went out: it never reached
		// the child, so there is nothing to cancel.
		err = ctxEnding(ctx)
		c.abort(err, "")
		return err
	default:
		if br, ok := ch.t.(Breaker); ok && br.Broken() {
			ch.kill(fmt.Errorf("writing to the child failed: %w", err))
		}
		e := errUnavailable(fmt.Sprintf("could not send the request to the child: %v", err))
		c.abort(e, "")
		return e
	}
}

// logCtx is the ctx of the call that started the exchange, for its
// values alone (see call.logCtx).
func (ex *exchange) logCtx() context.Context { return context.WithoutCancel(ex.ctx) }

// owner is the exchange's client side, or nil while parked.
func (ex *exchange) owner() *call {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.call
}

// setOwner gives a parked exchange its client side back, or takes it
// away. A resumed exchange brings the child the answers to its questions,
// and the child owes the result from then.
func (ex *exchange) setOwner(c *call) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ex.call = c
	if c != nil {
		ex.sent = time.Now()
	}
}

// owedSince reports when the child began to owe the exchange's client an
// answer; false if it owes none: the gateway's own, a listen (quiet by
// nature) and a parked exchange (which waits on its client, not the child).
func (ex *exchange) owedSince() (time.Time, bool) {
	if ex.internal || ex.method == mcp.MethodListen {
		return time.Time{}, false
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.sent, ex.call != nil
}

// sentOrWanted reports whether the child has the request, so a cancellation
// should go now. While the write is still in flight it records the reason
// instead, and writeDone sends the cancellation once the request is out.
func (ex *exchange) sentOrWanted(reason string) bool {
	if ex.internal || ex.method == mcp.MethodInitialize || ex.method == mcp.MethodTasksUpdate || ex.method == mcp.MethodTasksCancel {
		// The spec forbids cancelling initialize. A task's update or
		// cancellation must take effect though its client left before the
		// child acknowledged it. (A look at a task, tasks/get or 2025's
		// tasks/result, is cancelled as any request: the poll ends, not
		// the task, which only tasks/cancel ends.)
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
	if err != nil {
		ex.write = notWritten
		ex.mu.Unlock()
		// Retired while its write waited (its client left): counted as
		// maybe running then, it never reached the child, and its slot
		// comes back.
		ex.ch.settle(ex.id)
		return
	}
	ex.write = written
	reason := ex.cancelReason
	ex.mu.Unlock()
	if reason != "" {
		ex.tellCancel(reason)
	}
}

// cancel tells the child to stop, unless reason is "" or the child never
// got the request.
func (ex *exchange) cancel(reason string) {
	if reason != "" && ex.sentOrWanted(reason) {
		ex.tellCancel(reason)
	}
}

// tellCancel tells the child to cancel: at once when its stdin takes the
// notification without waiting (see TryWriter), and otherwise detached
// and bounded: the client is gone or has its answer and must not wait for
// a slow child to take it.
func (ex *exchange) tellCancel(reason string) {
	note := ex.cancelNote(reason)
	if tw, ok := ex.ch.t.(TryWriter); ok && tw.TryWriteMessage(note) {
		ex.ch.logCancel(ex, reason, nil)
		return
	}
	ex.ch.w.bg.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ex.ch.b.opts.CancelTimeout)
		defer cancel()
		ex.ch.logCancel(ex, reason, ex.ch.t.WriteMessage(ctx, note))
	})
}

func (ex *exchange) cancelNote(reason string) []byte {
	return jsonrpc.NewNotification(mcp.NoteCancelled, mcp.Cancelled(ex.id, reason))
}

// logCancel logs how telling the child to cancel ex went.
func (ch *child) logCancel(ex *exchange, reason string, err error) {
	if err != nil {
		ch.log.WarnContext(ex.logCtx(), "could not tell the child to cancel", "id", ex.id, "method", clipped(ex.method), "client_id", logged(ex.clientID), "reason", clipped(reason), "err", err)
		return
	}
	ch.log.InfoContext(ex.logCtx(), "cancelled call", "id", ex.id, "method", clipped(ex.method), "client_id", logged(ex.clientID), "reason", clipped(reason))
	ch.cancelled(ex.id)
}

// maxLogged bounds what a log line repeats from a client: its id, or the
// reason it gave for a cancellation, may be as long as a request.
const maxLogged = 256

// logged is a client's id as a log line shows it.
func logged(id []byte) string { return clipped(string(id)) }

// clipped is s cut to maxLogged bytes, on a character's start.
func clipped(s string) string {
	if len(s) <= maxLogged {
		return s
	}
	cut := maxLogged
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// answered hands the child's response, which the reader has taken from the
// pending table, to the client side: relayed, translated, turned into
// questions for a legacy client, or kept for a parked exchange's retry.
func (ex *exchange) answered(m *jsonrpc.Message) {
	if ex.method == mcp.MethodToolsCall && m.Result != nil && len(ex.ch.b.workers) > 1 {
		ex.ch.b.tasks.record(ex.ch.w, m)
	}
	c := ex.owner()
	if ex.asked.Load() {
		// Its questions end with it; a parked exchange keeps the answer
		// for its retry, whose call then is the owner.
		if c = ex.ch.b.q.answered(ex, m); c == nil {
			return
		}
	}
	if c == nil {
		ex.ch.b.bug(fmt.Errorf("exchange %d was answered with neither a call nor a parking", ex.id))
		return
	}
	if c.needsInputFromLegacyClient(m) {
		c.askForInputs(ex, m)
		return
	}
	if !c.answer(ex, m) {
		// Its client left (or timed out) just as the answer came.
		ex.ch.b.late.Add(1)
		ex.ch.log.DebugContext(ex.logCtx(), "dropped late response", "id", ex.id, "client_id", logged(ex.clientID))
	}
}

// answer ends the call with the child's answer m to ex, and reports false
// when another ending came first.
func (c *call) answer(ex *exchange, m *jsonrpc.Message) bool {
	if m.Error != nil {
		code, _ := mcp.ErrorCode(m.Error) // 0 when the child gave none
		c.box.setErrorCode(code)
	}
	return c.end(c.restore(ex, m), nil)
}

// fail ends the exchange, taken from the pending table of a child whose
// service ended (or for an answer too large to read): its call fails with
// err, its questions are dropped, and a parking gives up its slot.
func (ex *exchange) fail(err error) {
	if ex.asked.Load() {
		ex.ch.b.q.close(ex)
	}
	if c := ex.owner(); c != nil {
		c.end(nil, err)
	}
}
