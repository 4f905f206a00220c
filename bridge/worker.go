package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// worker keeps one child running: start, handshake, serve until it ends,
// wait, start again. Calls dispatched to it go to its current child.
type worker struct {
	b     *Bridge
	index int
	start StartFunc
	log   *slog.Logger
	bg    background // goroutines close waits for

	active   int           // slots held: calls in flight and parked, and ended calls still unsettled; guarded by Bridge.mu
	settling int           // of active, those of ended calls still unsettled (see slot.unsettled); guarded by Bridge.mu
	restarts atomic.Uint64 // children started after the first

	mu       sync.Mutex
	cur      *child        // the current child; nil before the first
	starting bool          // a child is being started or handshaken
	verdict  Era           // with auto: the verdict on an earlier child of this configuration
	changed  chan struct{} // closed and replaced whenever the state above changes
	closed   bool
	why      string // for clients, why the last child never came to serve; "" once one is ready

	stopRun context.CancelFunc
	runDone chan struct{}
}

func newWorker(b *Bridge, index int, start StartFunc, log *slog.Logger) *worker {
	return &worker{b: b, index: index, start: start, log: log, starting: true, changed: make(chan struct{}), runDone: make(chan struct{})}
}

// launch starts the run loop in the background.
func (w *worker) launch() {
	ctx, cancel := context.WithCancel(context.Background())
	w.stopRun = cancel
	go w.run(ctx)
}

// minServed is the least a child must have served, from the end of its
// handshake, for its restart to come after the shortest delay (see run).
const minServed = 10 * time.Second

// run keeps a child running. The delay doubles after each quick failure,
// so a child that cannot start is never restarted in a hot loop.
func (w *worker) run(ctx context.Context) {
	defer close(w.runDone)
	opts := &w.b.opts
	delay := opts.RestartMin
	for {
		w.setStarting(true)
		ch, err := w.startChild(ctx)
		if err != nil {
			// Said before the waiting calls learn that nothing starts: in
			// a word, the details (a path, what the child said) being for
			// the log.
			why := "it failed to start; the gateway's log says why"
			if errors.Is(err, context.DeadlineExceeded) {
				why = "its handshake timed out"
			}
			w.mu.Lock()
			w.why = why
			w.mu.Unlock()
		}
		w.setStarting(false)
		var served time.Duration // from the end of its handshake; 0 for one that did not start
		if err == nil {
			ready := time.Now()
			select {
			case <-ch.done:
			case <-ctx.Done():
				return
			}
			err, served = ch.endErr(), time.Since(ready)
		}
		if ctx.Err() != nil {
			return
		}
		// A child that served for a while earns a quick restart, and so
		// does one that only exited because it was probed: it is started
		// again as legacy. A while is minServed: one that fails to start,
		// or fails seconds into its service, backs off to the cap; one that
		// fails now and then (once a minute) is restarted at once each
		// time, its clients waiting no longer than they must.
		if served >= minServed || errors.Is(err, errExitedOnProbe) {
			delay = opts.RestartMin
		}
		if errors.Is(err, errExitedOnProbe) {
			w.setVerdict(EraLegacy)
		}
		w.log.Warn("child unavailable; restarting", "err", err, "retry_in", delay)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		delay = min(2*delay, opts.RestartMax)
		w.restarts.Add(1)
		w.b.restarts.Add(1)
		w.b.stateChanged()
	}
}

func (w *worker) startChild(ctx context.Context) (*child, error) {
	t, err := w.start(context.WithValue(ctx, workerKey{}, w.index))
	if err != nil {
		return nil, err
	}
	ch := newChild(w, t)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		t.Close()
		return nil, ErrClosed
	}
	w.cur = ch
	w.notifyChangedLocked()
	w.mu.Unlock()
	go ch.readLoop()
	if err := ch.handshake(ctx); err != nil {
		ch.kill(err)
		<-ch.done
		return nil, err
	}
	if ch.eraNow() == EraModern {
		ch.watchTools(ctx)
	}
	// close sets the background closed only after run has returned, so
	// this spawn starts a goroutine.
	w.bg.spawn(func() { ch.watch(ctx) })
	w.mu.Lock()
	ch.ready = true
	w.why = ""
	w.notifyChangedLocked()
	w.mu.Unlock()
	// Logged only now, so that whoever reads it finds the child ready.
	ch.log.Info("child ready", "era", ch.eraNow())
	return ch, nil
}

func (w *worker) eraVerdict() Era {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.verdict
}

func (w *worker) setVerdict(e Era) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.verdict = e
}

func (w *worker) setStarting(v bool) {
	w.mu.Lock()
	w.starting = v
	w.notifyChangedLocked()
	w.mu.Unlock()
	// Starting, or ready (no longer starting, having started), its free
	// slots serve the queue; pickLocked passed them over meanwhile.
	w.b.grant()
}

func (w *worker) notifyChangedLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
	w.b.stateChanged()
}

func (w *worker) current() *child {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur
}

// readyLocked reports whether the current child serves. w.mu is held.
func (w *worker) readyLocked() bool {
	return !w.closed && w.cur != nil && w.cur.ready && w.cur.endErr() == nil
}

// status reports whether a child is ready, and whether one is starting.
func (w *worker) status() (ready, starting bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.readyLocked(), w.starting
}

// readyChild returns the current child once its handshake is done. It
// waits while a child is starting, until the queue timeout has passed
// since queued (the time the client began to wait: a child that takes long
// to start is a wait for capacity like the queue's); with no child at all
// it fails at once.
func (w *worker) readyChild(ctx context.Context, queued time.Time) (*child, error) {
	var expired <-chan time.Time
	for {
		w.mu.Lock()
		ch, changed, closed, starting, ready, why := w.cur, w.changed, w.closed, w.starting, w.readyLocked(), w.why
		if why == "" && ch != nil && ch.endErr() != nil {
			why = "it stopped" // a child that served
		}
		w.mu.Unlock()
		switch {
		case closed:
			return nil, errShutdown()
		case ready:
			return ch, nil
		case !starting && why != "":
			return nil, errUnavailable("the child is not serving (" + why + "); it is being restarted")
		case !starting:
			return nil, errUnavailable("the child is not serving; it is being restarted")
		}
		if expired == nil {
			// Made only now: a call to a ready child never waits.
			t := time.NewTimer(time.Until(queued.Add(w.b.opts.QueueTimeout)))
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctxEnding(ctx)
		case <-expired:
			return nil, errUnavailable(fmt.Sprintf("the child is starting and was not ready within %v; try again later", w.b.opts.QueueTimeout))
		}
	}
}

// close refuses new calls, cancels the calls in flight (telling the child,
// within ctx), stops the child and waits for the worker's goroutines.
func (w *worker) close(ctx context.Context) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.runDone
		return
	}
	w.closed = true
	w.notifyChangedLocked()
	w.mu.Unlock()
	w.stopRun()
	<-w.runDone
	if ch := w.current(); ch != nil {
		ch.shutdown(ctx)
	}
	w.bg.close()
}

// call serves a client's request on the current child, holding s, which
// it releases when the request ends (or at once, when it fails).
func (w *worker) call(ctx context.Context, req *mcp.Request, caller Caller, s *slot, queued time.Time) (*call, error) {
	ch, err := w.readyChild(ctx, queued)
	if err != nil {
		s.release()
		return nil, err
	}
	legacy := ch.eraNow() == EraLegacy
	switch {
	case req.Method == mcp.MethodInitialize:
		s.release()
		return ch.answerInitialize(req), nil
	case req.Method == mcp.MethodDiscover && legacy:
		s.release()
		return answeredByGateway(req, mcp.DiscoverFromInitialize(ch.initResult)), nil
	case req.Method == mcp.MethodListen && legacy:
		return ch.listenLegacy(ctx, req, caller, s)
	case caller.Modern && legacy && mcp.IsTaskMethod(req.Method):
		// 2025-11-25's tasks are not the extension's, and are not offered
		// to a 2026 client (see mcp.DiscoverFromInitialize); a task id of
		// the child's, learnt elsewhere, gets no answer in the wrong shape.
		s.release()
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf(
			"method not found: the child speaks a 2025 revision, whose tasks are not the %s extension's, and the gateway does not translate them", mcp.TasksExtension)}
	case caller.Modern && legacy && hasParam(req, mcp.ParamTask):
		// 2026-07-28 has no per-request task opt-in; forwarded, it would
		// make the child answer with a 2025-11-25 task, which the client
		// cannot read and the gateway does not translate.
		s.release()
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"params.task asks for a 2025-11-25 task, which 2026-07-28 does not have (its tasks are the %s extension's); the child speaks a 2025 revision and the gateway does not translate them", mcp.TasksExtension)}
	}
	if caller.LogLevel != "" {
		ch.ensureLogLevel(caller.LogLevel)
	}
	spec := callSpec{req: req, caller: caller, slot: s}
	if req.Method == mcp.MethodListen {
		// A listen lasts as long as its client wants it. Its filter is
		// read once, here: one the child could read otherwise than the
		// gateway is refused (as for a legacy child), and what the filter
		// did not ask for is dropped on the way (see relays).
		notifications, _ := req.Param(mcp.ParamNotifications)
		f, err := mcp.ReadFilter(notifications)
		if err != nil {
			s.release()
			return nil, err
		}
		spec.listen = &f
	} else {
		spec.idle, spec.max = w.b.opts.IdleTimeout, w.b.opts.MaxDuration
	}
	c := ch.newCall(ctx, spec)
	if err := ch.start(ctx, c, nil); err != nil {
		return nil, ended(err)
	}
	return c, nil
}

func hasParam(req *mcp.Request, name string) bool {
	_, ok := req.Param(name)
	return ok
}

// notify handles a notification from a client. Those that only make sense
// between one client and one server are absorbed: the child is shared, its
// handshake is the gateway's, and a client's cancellation or progress
// cannot name anything the child knows. Anything else is forwarded as it
// is.
func (w *worker) notify(ctx context.Context, n *jsonrpc.Message) error {
	if mcp.KeptFromServer(n.Method) {
		w.log.Debug("absorbed a client notification", "method", clipped(n.Method))
		return nil
	}
	ch, err := w.readyChild(ctx, time.Now())
	if err != nil {
		return err
	}
	line := n.Raw
	if bytes.ContainsAny(line, "\r\n") {
		var buf bytes.Buffer
		if err := json.Compact(&buf, line); err != nil {
			return &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: err.Error()}
		}
		line = buf.Bytes()
	}
	if err := ch.t.WriteMessage(ctx, line); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errUnavailable(fmt.Sprintf("could not send the notification to the child: %v", err))
	}
	return nil
}

// toolHeaders returns the x-mcp-header annotations of the child's tool.
func (w *worker) toolHeaders(ctx context.Context, tool string) ([]mcp.ParamHeader, error) {
	ch, err := w.readyChild(ctx, time.Now())
	if err != nil {
		return nil, err
	}
	_, headers, err := ch.tools.get(ctx, ch)
	if err != nil {
		return nil, err
	}
	return headers[tool], nil
}

// toolList returns the child's tools.
func (w *worker) toolList(ctx context.Context) (*ToolList, error) {
	ch, err := w.readyChild(ctx, time.Now())
	if err != nil {
		return nil, err
	}
	list, _, err := ch.tools.get(ctx, ch)
	return list, err
}

// background runs goroutines that close waits for: cancellations, replies
// to the child, closes.
type background struct {
	mu     sync.Mutex
	closed bool // close is waiting for wg; no more may be added
	wg     sync.WaitGroup
}

// spawn runs f on a goroutine that close waits for. Once close is waiting,
// f runs on the caller's goroutine instead: by then the transport is
// closed and f (a write or a close) returns at once.
func (g *background) spawn(f func()) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		f()
		return
	}
	g.wg.Add(1)
	g.mu.Unlock()
	go func() {
		defer g.wg.Done()
		f()
	}()
}

func (g *background) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}
