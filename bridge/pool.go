package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// Call sends a client's request to a worker: a retry to the parked call it
// continues, a request about a task to the worker whose child holds it (see
// taskHomes), a listen to the least loaded worker, anything else to the
// least loaded worker with a free slot, waiting in the queue if none has
// one. It fails at once (with a *jsonrpc.Error) when the request cannot be
// served; the returned Call ends by itself when ctx ends, with the child
// told to cancel.
func (b *Bridge) Call(ctx context.Context, req *mcp.Request, caller Caller) (Call, error) {
	c, err := b.route(ctx, req, caller)
	// A call that was made is observed when it ends (see call.deliver);
	// here, a request refused before that, or answered by the gateway.
	if e, ok := errors.AsType[endedError](err); ok {
		return nil, e.error
	}
	switch {
	case req.Method == mcp.MethodListen:
	case err != nil:
		b.opts.Observer.CallEnded(endingOf(err, false))
	default:
		if cc, ok := c.(*call); ok && cc.ch == nil {
			b.opts.Observer.CallEnded(Ending{Outcome: OutcomeOK})
		}
	}
	return c, err
}

func (b *Bridge) route(ctx context.Context, req *mcp.Request, caller Caller) (Call, error) {
	if req.Kind != jsonrpc.KindRequest {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "not a request"}
	}
	if strings.HasPrefix(req.Method, "notifications/") {
		// A child that goes by the method would take it for the
		// notification, which may name another client's request (the
		// gateway's ids are sequential).
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: req.Method + " is a notification, which carries no id"}
	}
	if req.Method == mcp.MethodPing {
		return answeredByGateway(req, []byte("{}")), nil
	}
	if id, round, ours, err := b.q.stateOf(req); ours {
		if err != nil {
			return nil, err
		}
		// A retry continues a call under way: it takes over the slot its
		// parked exchange holds, and is let through while draining.
		return b.resume(ctx, req, caller, id, round)
	}
	b.mu.Lock()
	stopping := b.closed || b.drain
	b.mu.Unlock()
	if stopping {
		return nil, errShutdown()
	}
	home := b.homeOf(req)
	if req.Method == mcp.MethodListen {
		return b.listen(ctx, req, caller, home)
	}
	if c, ok := b.answerHandshake(req); ok {
		return c, nil
	}
	queued := time.Now()
	w, s, err := b.acquire(ctx, home)
	if err != nil {
		return nil, err
	}
	return w.call(ctx, req, caller, s, queued)
}

// A slot is a place a call holds until it ends: one of a worker's
// MaxInFlight, or one of the MaxListens. A call parked for its client's
// retry hands its slot to the parked exchange, and the retry takes it
// back: the child is still working on the call. So does a call that ends
// while the child may still be working on it (its client left, or it
// timed out): its child keeps the slot until the call settles (see
// child.holdLocked). Released once: whoever holds it last releases it,
// and a second release does nothing.
type slot struct {
	b        *Bridge
	w        *worker // whose slot it is; nil for a listen's
	done     atomic.Bool
	settling bool // kept by its child for a call that has ended (see unsettled); guarded by Bridge.mu
}

func (s *slot) release() {
	if s == nil || !s.done.CompareAndSwap(false, true) {
		return
	}
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.w == nil {
		b.listens--
		return
	}
	s.w.active--
	if s.settling {
		s.w.settling--
	}
	b.grantLocked()
	b.broadcastLocked()
}

// unsettled notes that the slot's call has ended and its child keeps the
// slot until the call settles (see child.holdLocked): still taken, but no
// call a drain waits for, since no client waits for it.
func (s *slot) unsettled() {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.done.Load() || s.settling {
		return // settled already: release came first
	}
	s.settling = true
	s.w.settling++
	b.broadcastLocked()
}

// listen opens a listen on home, or with none on the least loaded worker.
// Listens take no slot of a worker, since they are quiet by nature, but
// each holds a connection and a queue of notifications, so their number is
// capped too.
func (b *Bridge) listen(ctx context.Context, req *mcp.Request, caller Caller, home *worker) (Call, error) {
	b.mu.Lock()
	if b.listens >= b.opts.MaxListens {
		b.mu.Unlock()
		return nil, errOverloaded(fmt.Sprintf("%d listens are open, the most the gateway keeps; try again later", b.opts.MaxListens))
	}
	b.listens++
	w := home
	if w == nil {
		w = b.pickLocked(false)
	}
	b.mu.Unlock()
	return w.call(ctx, req, caller, &slot{b: b}, time.Now())
}

// busyMessage says why a call found the queue full: waiting calls, none
// when there is no queue, and how many calls a child takes at once.
func busyMessage(waiting, perChild int) string {
	calls := func(n int) string {
		if n == 1 {
			return "1 call"
		}
		return strconv.Itoa(n) + " calls"
	}
	if waiting == 0 {
		return fmt.Sprintf("every child is busy with %s at once, and no call may wait for one (GATEWAY_QUEUE_SIZE=0); try again later", calls(perChild))
	}
	verb := "are"
	if waiting == 1 {
		verb = "is"
	}
	return fmt.Sprintf("%s %s waiting for a child with a free slot (each takes %s at once); try again later", calls(waiting), verb, calls(perChild))
}

// acquire takes a slot on the least loaded worker that has one (on want
// alone, when it is not nil), waiting in the queue while none has. The
// queue is first come, first served: a freed slot is handed to the call
// that has waited longest and can take it (see grantLocked), which wakes
// that one call alone, and a call arriving meanwhile cannot take it first.
func (b *Bridge) acquire(ctx context.Context, want *worker) (*worker, *slot, error) {
	b.mu.Lock()
	if b.closed || b.drain {
		b.mu.Unlock()
		return nil, nil, errShutdown()
	}
	// A free slot goes to the call at once, queue or not: whenever a slot
	// frees up (or a worker becomes ready), grantLocked hands it to the
	// calls waiting that can take it, so a slot still free now is one none
	// of them can (they wait for another worker, see queued.want).
	if w := b.freeLocked(want); w != nil {
		w.active++
		b.mu.Unlock()
		return w, &slot{b: b, w: w}, nil
	}
	if len(b.queue) >= b.opts.QueueSize {
		n := len(b.queue)
		b.mu.Unlock()
		return nil, nil, errOverloaded(busyMessage(n, b.opts.MaxInFlight))
	}
	q := &queued{ready: make(chan struct{}), want: want}
	b.queue = append(b.queue, q)
	// The calls ahead of it may each be waiting for a worker of their own
	// (see queued.want), while another has a slot this one can take.
	b.grantLocked()
	b.mu.Unlock()

	t := time.NewTimer(b.opts.QueueTimeout)
	defer t.Stop()
	var err error
	select {
	case <-q.ready:
	case <-ctx.Done():
		err = ctxEnding(ctx)
	case <-t.C:
		err = errOverloaded(fmt.Sprintf("no worker had a free slot within %v; try again later", b.opts.QueueTimeout))
		if want != nil {
			err = errOverloaded(fmt.Sprintf("the child that holds the task (worker %d) had no free slot within %v; try again later", want.index, b.opts.QueueTimeout))
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case q.w != nil && err == nil:
		return q.w, &slot{b: b, w: q.w}, nil
	case q.w != nil:
		// Granted as the client left or the time ran out: the slot goes
		// to the next in line.
		q.w.active--
		b.grantLocked()
		b.broadcastLocked()
		return nil, nil, err
	case err == nil:
		// Woken without a slot: the bridge stopped taking calls.
		return nil, nil, errShutdown()
	}
	for i, o := range b.queue {
		if o == q {
			b.queue = slices.Delete(b.queue, i, i+1)
			break
		}
	}
	return nil, nil, err
}

// A queued call waits for a slot in the queue. ready is closed when it is
// granted one (w is then the worker whose slot it holds) or, with w nil,
// when the bridge stops taking calls. A call with want waits for a slot of
// that worker alone.
type queued struct {
	ready chan struct{}
	w     *worker
	want  *worker
}

// grantLocked hands free slots to the calls that have waited longest. A
// call waiting for one worker (see taskHomes) lets those behind it by
// while that worker is full.
func (b *Bridge) grantLocked() {
	anyFree := true // false once a call that takes any worker found none
	for i := 0; i < len(b.queue); {
		q := b.queue[i]
		if q.want == nil && !anyFree {
			i++
			continue
		}
		w := b.freeLocked(q.want)
		if w == nil {
			if q.want == nil {
				anyFree = false
			}
			i++
			continue
		}
		w.active++
		b.queue = slices.Delete(b.queue, i, i+1)
		q.w = w
		close(q.ready)
	}
}

// freeLocked is want when it has a free slot, or with want nil the least
// loaded worker with one; nil when there is none.
func (b *Bridge) freeLocked(want *worker) *worker {
	if want == nil {
		return b.pickLocked(true)
	}
	if want.active < b.opts.MaxInFlight {
		return want
	}
	return nil
}

// freedLocked is the channel the next broadcast closes, for a caller that
// waits for the slots in use to change (see Drain). It is made only for
// such a caller: a slot released while nobody waits costs no channel.
func (b *Bridge) freedLocked() <-chan struct{} {
	if b.freed == nil {
		b.freed = make(chan struct{})
	}
	return b.freed
}

// broadcastLocked wakes everything waiting on the bridge's state; once the
// bridge takes no calls, that includes the calls in the queue, which are
// refused.
func (b *Bridge) broadcastLocked() {
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
	if b.closed || b.drain {
		for _, q := range b.queue {
			close(q.ready)
		}
		b.queue = nil
	}
	b.stateChanged()
}

// pickLocked chooses the worker with the fewest calls in flight, ready
// workers first, then those starting, then any. With needSlot it only
// considers workers below the cap, and may return nil; and a worker with
// no child at all (waiting to restart it) only when no other has one,
// full or not: a call it took would fail at once, where it could wait in
// the queue for a slot of a child that serves.
func (b *Bridge) pickLocked(needSlot bool) *worker {
	var best *worker
	bestRank, bestLoad := 3, 0
	alive := false // a worker is ready or starting, with a free slot or not
	n := len(b.workers)
	for k := range n {
		w := b.workers[(b.next+k)%n]
		ready, starting := w.status()
		rank := 2
		switch {
		case ready:
			rank = 0
		case starting:
			rank = 1
		}
		alive = alive || rank < 2
		if needSlot && w.active >= b.opts.MaxInFlight {
			continue
		}
		if best == nil || rank < bestRank || (rank == bestRank && w.active < bestLoad) {
			best, bestRank, bestLoad = w, rank, w.active
		}
	}
	b.next = (b.next + 1) % n
	if needSlot && alive && bestRank == 2 {
		return nil
	}
	return best
}

// grant hands free slots to the calls in the queue, for a worker whose
// slots became worth taking: its child is starting or ready again.
func (b *Bridge) grant() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.grantLocked()
}

// Notify forwards a client notification to every worker's child (their
// state is meant to be the same), and fails only if none took it.
func (b *Bridge) Notify(ctx context.Context, n *jsonrpc.Message) error {
	var errs []error
	for _, w := range b.workers {
		if err := w.notify(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == len(b.workers) {
		return errs[0]
	}
	return nil
}

// answerHandshake answers initialize, and a 2026 client's discover of a
// legacy child, from a ready child's handshake, with no slot: the gateway
// answers them itself, and a new client must not wait behind busy workers
// to be told what the child is. With no child ready, the call waits for
// one as any call does.
func (b *Bridge) answerHandshake(req *mcp.Request) (Call, bool) {
	if req.Method != mcp.MethodInitialize && req.Method != mcp.MethodDiscover {
		return nil, false
	}
	for _, w := range b.workers {
		w.mu.Lock()
		ch, ready := w.cur, w.readyLocked()
		w.mu.Unlock()
		switch {
		case !ready:
			continue
		case req.Method == mcp.MethodInitialize:
			return ch.answerInitialize(req), true
		case ch.eraNow() == EraLegacy:
			return answeredByGateway(req, mcp.DiscoverFromInitialize(ch.initResult)), true
		}
		return nil, false // a modern child answers discover itself
	}
	return nil, false
}

// Respond takes a client's answer to a question the gateway relayed on one
// of its calls' streams. An answer nobody waits for here is dropped: the
// call has ended, or the question is another gateway process's, which is
// an error the client is told of (a balancer sent the answer to another
// replica than the one whose child asked).
func (b *Bridge) Respond(ctx context.Context, m *jsonrpc.Message) error {
	if b.q.respond(ctx, m) {
		return nil
	}
	if inst := askedBy(m.ID); inst != "" && inst != b.q.instance {
		level := slog.LevelDebug
		if b.q.shouldWarn(time.Now()) {
			// A balancer without affinity sends them, often; so can any
			// client, made up.
			level = slog.LevelWarn
		}
		b.log.Log(ctx, level, "an answer to a question another gateway process asked; refused (logged at warn once a minute)", "id", logged(m.ID), "asked_by", inst)
		return jsonrpc.GatewayError(jsonrpc.CodeInvalidParams, "answered_elsewhere",
			"this answers a question that another gateway process ("+inst+") asked, not this one ("+b.q.instance+"): "+
				"the call waits there: a 2025 session's requests must reach one replica (for example, a proxy hashing on Mcp-Session-Id)")
	}
	b.log.DebugContext(ctx, "dropped an answer to no waiting question", "id", logged(m.ID))
	return nil
}

// ToolHeaders reads the x-mcp-header annotations of a tool from a ready
// worker: the workers run the same server. It is asked for a tools/call
// before the call is made, and a call whose headers cannot be checked is
// refused: an error here is that call's ending, and is observed as Call
// would have observed it.
func (b *Bridge) ToolHeaders(ctx context.Context, tool string) ([]mcp.ParamHeader, error) {
	b.mu.Lock()
	w := b.pickLocked(false)
	b.mu.Unlock()
	h, err := w.toolHeaders(ctx, tool)
	if err != nil {
		e := endingOf(err, false)
		if e.Outcome == OutcomeError {
			// The child's own error to the list, or one of the
			// gateway's that is no call's: the client is told no child
			// serves it (see httpapi's checkParamHeaders).
			e = Ending{Outcome: OutcomeUnavailable}
		}
		b.opts.Observer.CallEnded(e)
	}
	return h, err
}

// Tools returns the child's tools, all pages, from a ready worker: fetched
// once and kept until the child says its list changed. Once the bridge
// takes no calls it is refused as they are, cached or not: a client is
// told the gateway is stopping, by everything it asks of the child.
// (ToolHeaders is not refused: a retry that continues a call under way
// is let through, and its headers are checked.)
func (b *Bridge) Tools(ctx context.Context) (*ToolList, error) {
	b.mu.Lock()
	if b.closed || b.drain {
		b.mu.Unlock()
		return nil, errShutdown()
	}
	w := b.pickLocked(false)
	b.mu.Unlock()
	return w.toolList(ctx)
}

// Drain refuses new calls (with the shutdown error; a retry that continues
// a call under way is still let through) and waits until no call is in
// flight, parked ones included, or ctx ends. Listens are not waited for,
// nor the slots kept for calls that have ended (see slot.unsettled).
// Ready reports false from the start.
func (b *Bridge) Drain(ctx context.Context) error {
	b.Refuse()
	b.mu.Lock()
	for {
		active := 0
		for _, w := range b.workers {
			active += w.active - w.settling
		}
		if active == 0 {
			b.mu.Unlock()
			return nil
		}
		freed := b.freedLocked()
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
		b.mu.Lock()
	}
}

// Refuse starts a drain without waiting: from now on new calls are
// refused, calls waiting in the queue too, and Ready reports false.
func (b *Bridge) Refuse() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.drain = true
	b.broadcastLocked()
}
