package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// maxReplies bounds the goroutines answering the child's own requests;
// the replies beyond them wait their turn, up to maxQueuedReplies, and a
// child that floods requests past that gets the excess dropped (and
// logged) rather than growing the gateway without limit.
const (
	maxReplies       = 64
	maxQueuedReplies = 4096
)

// child is one child process from start to exit: its transport, the
// exchanges pending on it and what its handshake learned.
type child struct {
	w   *worker
	b   *Bridge
	t   Transport
	log *slog.Logger

	mu         sync.Mutex
	pending    map[int64]*exchange
	calls      int             // the pending exchanges that are calls, as opposed to listens and the gateway's own (see register)
	ended      error           // why the child's service ended; nil while it serves
	failed     int             // the exchanges its end took from it, for the log (see takeAll)
	listeners  []*call         // listens built on a legacy child
	subscribed map[string]int  // a legacy child's resources with listeners, by listener count
	onChild    map[string]bool // the resources the child was last told to subscribe to
	syncing    map[string]bool // the resources whose subscription is being brought in line: queued or being synced
	toSync     []string        // the resources queued for a syncer, in the order their listeners changed
	syncers    int             // the goroutines bringing subscriptions in line (at most maxSyncers)
	logLevel   string          // the level last set on a legacy child; "" for its default

	// The exchanges that ended last, for what an answer to one of them
	// means in the log (see endedAs); guarded by mu.
	recent     [recentEnds]endedExchange
	recentNext int
	// The exchanges retired without their answer that the child may still
	// be working on, and until when one that did not fit may be (see
	// unsettle); guarded by mu.
	unsettled  [recentEnds]unsettledExchange
	blindUntil time.Time
	barrier    barrierState
	// The slots of the calls among them, by exchange id, each kept until
	// its exchange settles (see holdLocked); guarded by mu.
	held map[int64]*heldSlot

	done     chan struct{} // closed when the reader has stopped and every call has ended
	ready    bool          // handshake done; guarded by worker.mu
	replies  replyQueue
	lastRead atomic.Int64 // when the child last wrote, in Unix nanoseconds (see watch)
	due      []*exchange  // to park once the child's questions that came together are all in; reader only

	saidNotUTF8 bool    // a line that is not UTF-8 was logged; reader only
	skipped     skipLog // warnings about skipped lines

	tools toolCache // the child's x-mcp-header annotations

	// era is set by the handshake and read by the reader too, which runs
	// during the handshake: see eraNow.
	era atomic.Value

	// Set by the handshake, read-only afterwards.
	initResult     []byte // a legacy child's InitializeResult
	discoverResult []byte // a modern child's DiscoverResult
	logs           bool   // a legacy child with the logging capability
}

func newChild(w *worker, t Transport) *child {
	ch := &child{
		w:          w,
		b:          w.b,
		t:          t,
		log:        w.log,
		pending:    make(map[int64]*exchange),
		subscribed: map[string]int{},
		onChild:    map[string]bool{},
		syncing:    map[string]bool{},
		done:       make(chan struct{}),
	}
	if p, ok := t.(Pider); ok {
		ch.log = ch.log.With("pid", p.Pid())
	}
	ch.touch()
	return ch
}

func (ch *child) endErr() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.ended
}

// eraNow is the child's era, once the handshake has found it; "" before.
func (ch *child) eraNow() Era {
	e, _ := ch.era.Load().(Era)
	return e
}

func (ch *child) setEra(e Era) { ch.era.Store(e) }

// pendingCount is how many requests of clients wait for the child; the
// gateway's own (handshake, probes) do not count.
func (ch *child) pendingCount() int {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	n := 0
	for _, ex := range ch.pending {
		if !ex.internal {
			n++
		}
	}
	return n
}

// register adds an exchange unless the child's service has ended, and
// reports how many other calls are pending beside it: a sign that more are
// on their way. A listen, open for as long as its client stays, and the
// gateway's own exchanges are no such sign.
func (ch *child) register(ex *exchange) (others int, err error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.ended != nil {
		return 0, ch.ended
	}
	ch.pending[ex.id] = ex
	others = ch.calls
	if ex.isCall() {
		ch.calls++
	}
	return others, nil
}

// isCall reports whether ex counts among the calls in flight (see register).
func (ex *exchange) isCall() bool { return !ex.internal && ex.method != mcp.MethodListen }

// forget takes ex out of the pending table; ch.mu is held.
func (ch *child) forget(ex *exchange) {
	delete(ch.pending, ex.id)
	if ex.isCall() {
		ch.calls--
	}
}

// retire takes an exchange out of the pending table, so that a late answer
// is dropped. It fails when the exchange was taken already (answered,
// failed, retired). s is the slot of the exchange's call, or nil: one the
// child may still be working on keeps it until it settles (see holdLocked);
// otherwise back is s, for the caller to release.
func (ch *child) retire(ex *exchange, s *slot) (ok bool, back *slot) {
	// ex.mu (before ch.mu) is held throughout, so that a write that fails
	// meanwhile settles the exchange after it is unsettled here, not
	// before (see writeDone), and gives back the slot kept for it.
	ex.mu.Lock()
	// A client's call, or the gateway's own request (a resources/subscribe
	// it makes for a listen), that the child may still be working on:
	// written, or being written.
	reached := (ex.isCall() || ex.internal && forAClient(ex.method)) && ex.write != notWritten
	ch.mu.Lock()
	if ch.pending[ex.id] != ex {
		ch.mu.Unlock()
		ex.mu.Unlock()
		return false, s
	}
	ch.forget(ex)
	ch.remember(ex, false)
	var kept *slot
	if reached {
		ch.unsettle(ex.id)
		if s != nil && s.w != nil {
			ch.holdLocked(ex.id, s)
			kept, s = s, nil
		}
	}
	ch.mu.Unlock()
	ex.mu.Unlock()
	if kept != nil {
		kept.unsettled()
	}
	return true, s
}

// heldSlot is the slot of a call retired without its answer, kept while
// the child may still be working on the call (see holdLocked).
type heldSlot struct {
	s     *slot
	told  time.Time   // when its cancellation reached the child's input (see cancelled); zero: not (yet)
	timer *time.Timer // gives it back once unsettledSpan has passed
}

// holdLocked keeps s, the slot of the exchange id just unsettled, until
// the exchange settles as unsettle says (the child answers it, a barrier
// settles it, unsettledSpan passes) or the child's service ends; ch.mu is
// held. The client has its ending already, but MaxInFlight bounds what the
// child runs: cancellation is advisory, and a child that goes on with
// cancelled calls would otherwise run more than that at once.
func (ch *child) holdLocked(id int64, s *slot) {
	if ch.held == nil {
		ch.held = make(map[int64]*heldSlot)
	}
	ch.held[id] = &heldSlot{s: s, timer: time.AfterFunc(ch.unsettledSpan(), func() { ch.unhold(id) })}
}

// unhold gives back the slot kept for exchange id, if any.
func (ch *child) unhold(id int64) {
	ch.mu.Lock()
	h := ch.unholdLocked(id)
	ch.mu.Unlock()
	h.free()
}

// unholdLocked takes the slot kept for exchange id, for the caller to free
// once ch.mu is no longer held; nil when none is.
func (ch *child) unholdLocked(id int64) *heldSlot {
	h := ch.held[id]
	delete(ch.held, id)
	return h
}

// free gives the slot back: whoever took h from child.held, alone.
func (h *heldSlot) free() {
	if h == nil {
		return
	}
	h.timer.Stop()
	h.s.release()
}

// unsettledExchange is an exchange retired without its answer, and when.
type unsettledExchange struct {
	id    int64 // 0: a free place
	since time.Time
	told  time.Time // when its cancellation reached the child's input; zero: not (yet)
}

// unsettledFor bounds how long an exchange retired without its answer
// counts for the child's questions (see unsettle): a child that honours
// the cancellation sends no answer at all (the spec says a receiver
// SHOULD NOT), and questions must not stay refused for a whole idle
// timeout after every client that leaves. What it covers is a child that
// was about to ask when the cancellation came, or is slow to notice it.
const unsettledFor = 30 * time.Second

// unsettledSpan is unsettledFor, or the idle timeout when that is shorter
// (the call would have timed out by then).
func (ch *child) unsettledSpan() time.Duration {
	if d := ch.b.opts.IdleTimeout; d > 0 && d < unsettledFor {
		return d
	}
	return unsettledFor
}

// unsettle notes that the exchange with this id was retired without its
// answer; ch.mu is held. The child was told to cancel it, but cancellation
// is advisory: it may still work on it, and ask a question for it, which
// must not go to another call that happens to be the only one in flight
// then (see question). It counts until the child answers it (see endedAs)
// or unsettledSpan passes; one that finds no place makes every question
// ambiguous for as long.
func (ch *child) unsettle(id int64) {
	now := time.Now()
	span := ch.unsettledSpan()
	for i := range ch.unsettled {
		if u := &ch.unsettled[i]; u.id == 0 || now.Sub(u.since) >= span {
			*u = unsettledExchange{id: id, since: now}
			return
		}
	}
	ch.blindUntil = now.Add(span)
}

// settle notes that the child is not working on the exchange with this id
// after all (its request never reached the child).
func (ch *child) settle(id int64) {
	ch.mu.Lock()
	h := ch.settleLocked(id)
	ch.mu.Unlock()
	h.free()
}

// settleLocked settles the exchange id, and returns the slot kept for it,
// for the caller to free once ch.mu is no longer held.
func (ch *child) settleLocked(id int64) *heldSlot {
	for i := range ch.unsettled {
		if ch.unsettled[i].id == id {
			ch.unsettled[i] = unsettledExchange{}
		}
	}
	return ch.unholdLocked(id)
}

// stillRunning is how many exchanges retired without their answer the
// child may still be working on (see unsettle), and whether more may be
// than the child keeps.
func (ch *child) stillRunning() (n int, more bool) {
	now := time.Now()
	span := ch.unsettledSpan()
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, u := range ch.unsettled {
		if u.id != 0 && now.Sub(u.since) < span {
			n++
		}
	}
	return n, now.Before(ch.blindUntil)
}

// take is the reader taking the exchange the child answered.
func (ch *child) take(id int64) *exchange {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ex := ch.pending[id]
	if ex != nil {
		ch.forget(ex)
		ch.remember(ex, true)
	}
	return ex
}

// recentEnds is how many ended exchanges a child remembers: enough for the
// answers that trail a burst of cancellations, few enough to cost nothing.
const recentEnds = 256

// endedExchange is an exchange that left the pending table: answered, or retired
// without its answer.
type endedExchange struct {
	id       int64
	ctx      context.Context // its call's, for the values of a log line
	answered bool
	barred   time.Time // retired unanswered, and settled by a barrier then (see cancelled); zero: not
}

// remember notes that ex ended; ch.mu is held.
func (ch *child) remember(ex *exchange, answered bool) {
	ch.recent[ch.recentNext] = endedExchange{id: ex.id, ctx: ex.ctx, answered: answered}
	ch.recentNext = (ch.recentNext + 1) % recentEnds
}

// endedAs is how the exchange with this id ended, if it ended recently.
// It is asked about an answer that came after its exchange ended: an
// exchange retired without its answer has it now, and stops counting as
// one the child may still be working on (see unsettle).
func (ch *child) endedAs(id int64) (endedExchange, bool) {
	ch.mu.Lock()
	h := ch.settleLocked(id) // answered late: the child is done with it
	defer h.free()           // deferred first: runs once ch.mu is unlocked
	defer ch.mu.Unlock()
	for i := range ch.recent {
		if e := &ch.recent[i]; e.id == id && !e.barred.IsZero() {
			e.barred = time.Time{}
			ch.goesOn(id)
		}
	}
	for _, e := range ch.recent {
		if e.id == id && e.ctx != nil {
			return e, true
		}
	}
	return endedExchange{}, false
}

func (ch *child) isPending(ex *exchange) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.pending[ex.id] == ex
}

func (ch *child) lookup(id int64) *exchange {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.pending[id]
}

// inFlight is a snapshot of the pending exchanges, for code that looks
// into them (which takes exchange.mu, outside child.mu).
func (ch *child) inFlight() []*exchange {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	all := make([]*exchange, 0, len(ch.pending))
	for _, ex := range ch.pending {
		all = append(all, ex)
	}
	return all
}

// takeAll empties the pending table and marks the child's service ended,
// so that no exchange can be registered after it. An earlier reason
// stands. The slots kept for calls the child may have been working on
// (see holdLocked) come back: whatever it still runs, its calls go to the
// next child.
func (ch *child) takeAll(why error) ([]*exchange, error) {
	ch.mu.Lock()
	if ch.ended == nil {
		ch.ended = why
		ch.b.stateChanged() // the worker is not ready any more
	}
	all := make([]*exchange, 0, len(ch.pending))
	for _, ex := range ch.pending {
		all = append(all, ex)
		ch.forget(ex)
		if !ex.internal {
			ch.failed++ // the gateway's own (a handshake, a probe) is no client's loss
		}
	}
	held := ch.held
	ch.held = nil // none is kept from now on: retire finds nothing pending
	why = ch.ended
	ch.mu.Unlock()
	for _, h := range held {
		h.free()
	}
	return all, why
}

// kill ends the child's service from outside the reader: the calls pending
// fail at once, and the transport is closed, which makes the reader stop.
// A wedged child is killed outright where the transport can (see Killer):
// it would not read its closed stdin.
func (ch *child) kill(why error) {
	exs, why := ch.takeAll(why)
	ch.failAll(exs, why)
	k, hard := ch.t.(Killer)
	ch.w.bg.spawn(func() {
		if hard && errors.Is(why, errWedged) {
			_ = k.Kill()
			return
		}
		ch.t.Close()
	})
}

// maxLostNamed bounds the lines naming the calls a child's end cost: the
// first few name their requests, the "child stopped serving" line counts
// them all.
const maxLostNamed = 10

// end fails every pending call at once when the reader stops: their answers
// can no longer come.
func (ch *child) end(readErr error) {
	// Whether the process is gone too is for its reaper to say: a child
	// may close its stdout and live on.
	why := errors.New("the child's stdout ended (it exited, or closed it)")
	if !isEOF(readErr) {
		why = fmt.Errorf("reading from the child failed: %w", readErr)
	}
	exs, why := ch.takeAll(why)
	ch.failAll(exs, why)
	ch.mu.Lock()
	failed := ch.failed // a kill before the end failed some already
	ch.mu.Unlock()
	level := slog.LevelWarn
	var e *jsonrpc.Error
	if errors.As(why, &e) && e.Code == jsonrpc.CodeShutdown {
		level = slog.LevelInfo
	}
	ch.log.Log(context.Background(), level, "child stopped serving", "err", why, "failed_calls", failed)
	// Close is idempotent: stopping the child here reaps it and its group.
	ch.t.Close()
}

// failAll ends the calls of exchanges taken from a child whose service has
// ended, and its listens: their clients should call, or listen, again.
func (ch *child) failAll(exs []*exchange, why error) {
	named := 0
	for _, ex := range exs {
		again := "the call was lost"
		if ex.method == mcp.MethodListen {
			again = "listen again"
		}
		if !ex.internal && ex.method != mcp.MethodListen && named < maxLostNamed {
			// With the request's context, so that the line names its
			// request: which calls this child's end cost, beside the worker
			// and pid that say which child it was.
			named++
			// With why: the line that says how the child ended may come
			// seconds later (a child killed for a stalled write is
			// given GATEWAY_STDIN_GRACE first).
			ch.log.WarnContext(ex.logCtx(), "call lost with its child", "id", ex.id, "method", clipped(ex.method), "client_id", logged(ex.clientID), "err", why)
		}
		ex.fail(errUnavailable(fmt.Sprintf("%v; %s", why, again)))
	}
	ch.b.q.childGone(ch, errUnavailable(fmt.Sprintf("%v; the call was lost", why)))
	ch.endListeners(errUnavailable(fmt.Sprintf("%v; listen again", why)))
}

// shutdown cancels every pending call, telling the child about each one
// that reached it, then stops the child.
func (ch *child) shutdown(ctx context.Context) {
	const reason = "gateway shutting down"
	exs, _ := ch.takeAll(errShutdown())
	for _, ex := range exs {
		ex.fail(errShutdown())
		if ex.sentOrWanted(reason) {
			ch.logCancel(ex, reason, ch.t.WriteMessage(ctx, ex.cancelNote(reason)))
		}
	}
	ch.b.q.childGone(ch, errShutdown())
	ch.endListeners(errShutdown())
	ch.t.Close()
	<-ch.done
}

// toChild writes an answer to one of the child's own requests. The child
// waits for it whatever becomes of the client that gave it, so the write
// is not tied to that client's ctx, only bounded.
func (ch *child) toChild(ctx context.Context, line []byte, method string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ch.b.opts.CancelTimeout)
	defer cancel()
	if err := ch.t.WriteMessage(ctx, line); err != nil {
		if why := ch.endErr(); why != nil {
			// A child being stopped, or gone, takes no answer: no fault.
			ch.log.DebugContext(ctx, "the child's service ended before its request was answered", "method", method, "why", why, "err", err)
			return
		}
		ch.log.WarnContext(ctx, "could not answer the child's request", "method", method, "err", err)
		return
	}
	ch.log.DebugContext(ctx, "answered the child's request", "method", method)
}

// refuseChild answers one of the child's requests with an error, without
// waiting for the write.
func (ch *child) refuseChild(id []byte, method, why string) {
	reply := jsonrpc.NewErrorResponse(id, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: why})
	ch.log.Info("refused the child's request", "method", method, "id", string(id), "why", why)
	ch.reply(reply, method)
}

// replyQueue holds the answers to the child's own requests that wait for
// a writer.
type replyQueue struct {
	mu      sync.Mutex
	writers int
	waiting []queuedReply
}

type queuedReply struct {
	line   []byte
	method string
}

// reply writes an answer to one of the child's requests in the background:
// at most maxReplies writers at once, each taking the waiting replies in
// turn once its own is written.
func (ch *child) reply(line []byte, method string) {
	q := &ch.replies
	q.mu.Lock()
	switch {
	case q.writers < maxReplies:
		q.writers++
	case len(q.waiting) < maxQueuedReplies:
		q.waiting = append(q.waiting, queuedReply{line, method})
		q.mu.Unlock()
		return
	default:
		q.mu.Unlock()
		ch.log.Warn("too many replies to the child waiting; dropped one", "method", method, "id", string(jsonrpc.Get(line, "id")))
		return
	}
	q.mu.Unlock()
	ch.w.bg.spawn(func() {
		for r := (queuedReply{line, method}); ; {
			ch.toChild(context.Background(), r.line, r.method)
			// A child that stopped serving reads no more: what waits for
			// it is dropped at once rather than written to nobody.
			ended := ch.endErr() != nil
			q.mu.Lock()
			if len(q.waiting) == 0 || ended {
				dropped := len(q.waiting)
				q.writers--
				q.waiting = nil // a burst's array is let go
				q.mu.Unlock()
				if dropped > 0 {
					ch.log.Info("the child stopped serving; dropped the answers to its requests that waited", "dropped", dropped)
				}
				return
			}
			r = q.waiting[0]
			q.waiting[0] = queuedReply{}
			q.waiting = q.waiting[1:]
			q.mu.Unlock()
		}
	})
}
