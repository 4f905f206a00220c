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

// Transport carries newline-free messages to and from one child.
type Transport interface {
	// ReadMessage returns the next message from the child. Only the child's
	// reader goroutine calls it. The slice is the bridge's, which may edit
	// it in place (a token or an id put back). An error other than a
	// SkippedMessage ends the child's service.
	ReadMessage() ([]byte, error)
	// WriteMessage writes one message. It returns ctx.Err() only when ctx
	// ended before any of the message went out; any other error means the
	// message was not delivered. It keeps no reference to msg once it
	// returns. Safe for concurrent use.
	WriteMessage(ctx context.Context, msg []byte) error
	// Close stops the child; ReadMessage then returns an error.
	Close() error
}

// The bridge looks for these on a Transport; cmd/gateway asserts that
// stdio.Process has each, so that a rename cannot silently change how a
// child is served.
type (
	// Breaker is a transport that can tell when it can no longer carry
	// messages at all, as opposed to failing one write.
	Breaker interface{ Broken() bool }
	// Bufferer is a transport that can tell whether more of the child's
	// output has already arrived (so the next ReadMessage will not wait).
	// The bridge uses it to see the child's questions that arrive together
	// as one batch.
	Bufferer interface{ Buffered() bool }
	// TryWriter is a transport that can write a small message at once
	// when nothing stands in its way, and otherwise writes nothing and
	// says so. The bridge tells a child of a cancellation this way on the
	// goroutine that learns of it, rather than on a new one that the
	// scheduler may run only after the client's side has been dealt with.
	TryWriter interface{ TryWriteMessage(msg []byte) bool }
	// Gatherer is a transport that can hold a message back for a moment
	// (one turn of the goroutines ready to run) so that messages written
	// at about the same time go out together. The bridge writes a request
	// this way when other calls (not listens, not its own) are pending on
	// the child, so that more are likely on their way; a call on its own,
	// and every other message, is written at once.
	Gatherer interface {
		GatherMessage(ctx context.Context, msg []byte) error
	}
	// Killer is a transport that can stop a child at once, for a child too
	// wedged to stop politely. Kill also does what Close does.
	Killer interface{ Kill() error }
	// SkippedMessage is a read error that cost one message and left the
	// stream usable, such as a line over the size limit. Head and tail are
	// the message's first and last bytes. One that is Ongoing is reported
	// as it passed the limit, its end not yet read (size is what was read
	// so far, and there is no tail): the next read goes on discarding it,
	// and reports it again at its end, not Ongoing.
	SkippedMessage interface {
		error
		Skipped() (size int64, head, tail []byte)
		Ongoing() bool
	}
)

// StartFunc starts a child and returns its transport.
type StartFunc func(ctx context.Context) (Transport, error)

type workerKey struct{}

// WorkerOf is the index of the worker a StartFunc starts a child for, so
// that the child's own logs (its stderr) can say which it is.
func WorkerOf(ctx context.Context) (int, bool) {
	i, ok := ctx.Value(workerKey{}).(int)
	return i, ok
}

// Pider is a Transport to a process: the child's log lines name its pid.
type Pider interface {
	Pid() int
}

// Era is how the bridge talks to its children.
type Era string

const (
	EraAuto   Era = "auto"   // probe with server/discover, fall back to initialize
	EraLegacy Era = "legacy" // initialize + notifications/initialized (2025 revisions)
	EraModern Era = "modern" // stateless 2026-07-28: server/discover, no initialize
)

// Options configure a Bridge. Zero values mean the documented defaults.
type Options struct {
	Era              Era           // "": auto
	IdleTimeout      time.Duration // 0: 5m; a call with no response and no progress for this long times out
	MaxDuration      time.Duration // 0: 30m; no call runs longer, progress or not
	ProbeTimeout     time.Duration // 0: 10s; how long auto waits for server/discover
	HandshakeTimeout time.Duration // 0: 60s; how long initialize (or a modern child's server/discover) may take
	CancelTimeout    time.Duration // 0: 5s; how long writing notifications/cancelled may take
	RestartMin       time.Duration // 0: 250ms; first delay before restarting a child that exited
	RestartMax       time.Duration // 0: 30s; the delay doubles up to this
	WedgeTimeout     time.Duration // 0: 1m; negative: never. With calls pending and nothing read for this long, the child is probed, and killed if the probe goes unanswered for ProbeTimeout
	MaxNotes         int           // 0: 256; undelivered notifications kept per call before progress is coalesced

	Workers      int           // 0: 1; children run at once, each with its own worker
	MaxInFlight  int           // 0: 64; calls in flight per worker
	QueueSize    int           // 0: 256; calls waiting for a free worker; negative: none wait
	QueueTimeout time.Duration // 0: 30s; the longest a call waits for a free worker, or for its worker's child to start
	MaxListens   int           // 0: 1024; open listens across workers

	// StateKey signs the requestState of calls parked for their client's
	// input. Replicas that share it tell a state of another replica's from
	// a forged one. nil: a random key, valid in this process only.
	StateKey []byte
	// AcceptedStateKey is another key whose states are accepted, never
	// signed with: replicas change their key without refusing each other's
	// states meanwhile. nil: none.
	AcceptedStateKey []byte

	ClientName    string       // "": stdiomcp-gateway; clientInfo.name toward the child
	ClientVersion string       // "": dev
	Logger        *slog.Logger // nil: discard
	// OnInternalError is told when the bridge finds one of its own
	// invariants broken (a call ended twice, say). nil: logged at Error.
	OnInternalError func(error)
	// Observer is told how calls end, what becomes of progress, and each
	// line a child writes, for metrics. nil: nobody is told.
	Observer Observer
	// AfterDone arms a call on its client's ctx, as context.AfterFunc
	// does, which it is when nil. A front door whose contexts run f on the
	// goroutine that learns the client has gone (package detach's) spares
	// a cancellation one goroutine switch; the f it is handed does not
	// block. f must never run on the caller's goroutine inside AfterDone:
	// the caller holds the call's lock.
	AfterDone func(ctx context.Context, f func()) (stop func() bool)
}

func (o *Options) defaults() {
	if o.Era == "" {
		o.Era = EraAuto
	}
	setDefault(&o.IdleTimeout, 5*time.Minute)
	setDefault(&o.MaxDuration, 30*time.Minute)
	setDefault(&o.ProbeTimeout, 10*time.Second)
	setDefault(&o.HandshakeTimeout, 60*time.Second)
	setDefault(&o.CancelTimeout, 5*time.Second)
	setDefault(&o.RestartMin, 250*time.Millisecond)
	setDefault(&o.RestartMax, 30*time.Second)
	setDefault(&o.QueueTimeout, 30*time.Second)
	if o.WedgeTimeout == 0 {
		o.WedgeTimeout = time.Minute
	}
	for _, n := range []struct {
		v   *int
		def int
	}{{&o.MaxNotes, 256}, {&o.Workers, 1}, {&o.MaxInFlight, 64}, {&o.MaxListens, 1024}} {
		if *n.v <= 0 {
			*n.v = n.def
		}
	}
	if o.QueueSize == 0 {
		o.QueueSize = 256
	}
	o.QueueSize = max(o.QueueSize, 0)
	if o.ClientName == "" {
		o.ClientName = "stdiomcp-gateway"
	}
	if o.ClientVersion == "" {
		o.ClientVersion = "dev"
	}
	if o.AfterDone == nil {
		o.AfterDone = context.AfterFunc
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Observer == nil {
		o.Observer = noObserver{}
	}
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// Bridge serves clients' requests with a pool of workers, each keeping one
// child running, and sends each call to the worker with the fewest calls
// in flight. A call stays with its worker for its whole life (its
// cancellation, progress, questions and retries), and so does a listen.
//
// Each worker takes at most MaxInFlight calls at once; beyond that, calls
// wait in a bounded queue for a free worker, and past the queue they are
// refused at once with -32003, instead of piling up on a child that
// cannot keep up. A call whose client leaves while it waits never reaches
// a child.
type Bridge struct {
	opts     Options
	log      *slog.Logger
	workers  []*worker
	q        *questions
	ids      atomic.Int64 // every gateway id, across workers and restarts: never reused
	clientID []byte       // the gateway's Implementation object toward children
	tasks    taskHomes    // which worker's child holds each task (with several workers)

	late     atomic.Uint64 // responses for calls already ended
	unknown  atomic.Uint64 // responses for ids the bridge never sent
	restarts atomic.Uint64
	bugs     atomic.Uint64
	lines    sync.Pool                     // *[]byte: buffers for the lines written to children (see lineBuf)
	changed  atomic.Pointer[chan struct{}] // closed when the status may have changed; nil while nobody is in Await

	mu      sync.Mutex
	queue   []*queued     // calls waiting for a slot, longest waiting first
	listens int           // open listens, across workers
	freed   chan struct{} // closed when a slot frees up or the state changes; nil while nobody waits for that (see Drain)
	closed  bool
	drain   bool // no new calls; those in flight may finish (see Drain)
	next    int  // where the search for the least loaded worker starts, for fair ties
}

// New starts the workers' children in the background and returns at once;
// calls made before a handshake is done wait for it. Each worker's log
// lines carry its number when there are several.
func New(start StartFunc, opts Options) *Bridge {
	opts.defaults()
	b := &Bridge{opts: opts, log: opts.Logger, q: newQuestions(opts.StateKey, opts.AcceptedStateKey)}
	b.clientID = mcp.Implementation(opts.ClientName, opts.ClientVersion)
	for i := range opts.Workers {
		b.workers = append(b.workers, newWorker(b, i, start, opts.Logger.With("worker", i)))
	}
	for _, w := range b.workers {
		w.launch()
	}
	return b
}

// ErrClosed is returned by WaitReady once the bridge is closed. Calls made
// after Close fail with the gateway's shutting_down error instead, which
// the HTTP side relays.
var ErrClosed = errors.New("bridge: closed")

// bug reports a broken invariant: loudly in tests, logged in production.
func (b *Bridge) bug(err error) {
	b.bugs.Add(1)
	if b.opts.OnInternalError != nil {
		b.opts.OnInternalError(err)
		return
	}
	b.log.Error("internal error", "err", err)
}

// Ready reports whether at least one child is running and its handshake is
// done, unless the bridge is draining.
func (b *Bridge) Ready() bool { return b.Status().Ready }

// Status is the bridge at a moment: its readiness, each worker's, and its
// counters.
type Status struct {
	Ready    bool           // a child serves, and new calls are taken
	Draining bool           // new calls are refused: the gateway is stopping
	Workers  []WorkerStatus // in worker order
	Stats
}

// WorkerStatus is one worker at a moment.
type WorkerStatus struct {
	Ready    bool   // its child's handshake is done and it serves
	Era      Era    // its child's era; "" before the handshake
	InFlight int    // calls holding its slots, parked ones and unsettled ones whose clients left included
	Restarts uint64 // children it started after its first
}

// ReadyWorkers counts the workers whose child serves.
func (s Status) ReadyWorkers() int {
	n := 0
	for _, w := range s.Workers {
		if w.Ready {
			n++
		}
	}
	return n
}

// Status returns the bridge's status now.
func (b *Bridge) Status() Status {
	st := Status{Stats: b.Stats()}
	for _, w := range b.workers {
		ready, _ := w.status()
		ws := WorkerStatus{Ready: ready, Restarts: w.restarts.Load()}
		if ch := w.current(); ch != nil && ch.endErr() == nil {
			// A child that ended speaks no era while the next is awaited.
			ws.Era = ch.eraNow()
		}
		st.Workers = append(st.Workers, ws)
	}
	b.mu.Lock()
	st.Draining = b.closed || b.drain
	closed := b.closed
	for i, w := range b.workers {
		st.Workers[i].InFlight = w.active
	}
	b.mu.Unlock()
	st.Ready = !st.Draining && st.ReadyWorkers() > 0
	if closed {
		st.Ready = false
	}
	return st
}

// Await blocks until cond holds for the bridge's status, and returns that
// status. It fails when ctx ends first, or with ErrClosed when the bridge
// is closed and cond does not hold.
func (b *Bridge) Await(ctx context.Context, cond func(Status) bool) (Status, error) {
	for {
		// Taken before the look, so that a change after the look wakes us
		// (see stateChanged).
		changed := b.nextChange()
		st := b.Status()
		if cond(st) {
			return st, nil
		}
		b.mu.Lock()
		closed := b.closed
		b.mu.Unlock()
		if closed {
			return st, ErrClosed
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return st, ctx.Err()
		}
	}
}

// nextChange returns the channel the next stateChanged closes, made by
// the first caller to wait for it.
func (b *Bridge) nextChange() <-chan struct{} {
	for {
		if p := b.changed.Load(); p != nil {
			return *p
		}
		ch := make(chan struct{})
		if b.changed.CompareAndSwap(nil, &ch) {
			return ch
		}
	}
}

// stateChanged wakes those in Await. It takes no lock, so any code may
// call it, with any lock held; it is called after the change it reports,
// on the goroutine that made it. With nobody in Await it costs an atomic
// load: every call's end calls it.
//
// No wake-up is lost. Await takes its channel (nextChange) before it reads
// the status, and the change is made before stateChanged looks for a
// channel. Suppose an Await's read misses the change. The change and the
// read are ordered, either by the lock that guards that part of the status
// or, for an atomic counter, in the one sequentially consistent order of
// atomic operations; missing the change puts the read first, so the
// Await's nextChange comes before the look below. The look then finds
// that channel, or nil or a later one because another stateChanged has
// closed it since: either way the Await wakes and reads again.
func (b *Bridge) stateChanged() {
	if b.changed.Load() == nil {
		return
	}
	if p := b.changed.Swap(nil); p != nil {
		close(*p)
	}
}

// WaitReady blocks until a child is ready, the bridge is closed
// (ErrClosed), or ctx ends.
func (b *Bridge) WaitReady(ctx context.Context) error {
	_, err := b.Await(ctx, func(s Status) bool { return s.Ready })
	return err
}

// Stats are counters for tests and metrics.
type Stats struct {
	InFlight       int    // calls holding a worker's slot, parked ones and unsettled ones whose clients left included
	Queued         int    // calls waiting for a free worker
	Listens        int    // listens open, across workers
	Pending        int    // requests of clients waiting for a child (parked ones and listens included)
	LateResponses  uint64 // responses dropped because their call had ended
	Unknown        uint64 // responses for ids the bridge never sent
	Restarts       uint64 // children started after each worker's first
	InternalErrors uint64 // broken invariants (see Options.OnInternalError); 0 unless there is a bug
}

// Stats returns the current counters.
func (b *Bridge) Stats() Stats {
	st := Stats{LateResponses: b.late.Load(), Unknown: b.unknown.Load(), Restarts: b.restarts.Load(), InternalErrors: b.bugs.Load()}
	for _, w := range b.workers {
		if ch := w.current(); ch != nil {
			st.Pending += ch.pendingCount()
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, w := range b.workers {
		st.InFlight += w.active
	}
	st.Queued = len(b.queue)
	st.Listens = b.listens
	return st
}

// Workers is the number of workers, for logs.
func (b *Bridge) Workers() int { return len(b.workers) }

// Close refuses new calls, cancels the calls in flight (telling each child,
// within ctx), stops the children and waits for the bridge's goroutines.
func (b *Bridge) Close(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	b.broadcastLocked()
	b.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range b.workers {
		wg.Go(func() { w.close(ctx) })
	}
	wg.Wait()
	return nil
}

func errUnavailable(msg string) *jsonrpc.Error {
	return jsonrpc.GatewayError(jsonrpc.CodeUnavailable, "child_unavailable", msg)
}

func errShutdown() *jsonrpc.Error {
	return jsonrpc.GatewayError(jsonrpc.CodeShutdown, "shutting_down", "the gateway is shutting down")
}

func errOverloaded(msg string) *jsonrpc.Error {
	return jsonrpc.GatewayError(jsonrpc.CodeOverloaded, "overloaded", msg)
}

func errTimeout(msg string) *jsonrpc.Error {
	return jsonrpc.GatewayError(jsonrpc.CodeTimeout, "timeout", msg+"; the child was told to cancel")
}

// head is the start of a message for a log line.
func head(b []byte) string {
	const n = 200
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// notRunning is the error for a call that found its child gone.
func notRunning(err error) *jsonrpc.Error {
	return errUnavailable(fmt.Sprintf("the child process is not running (%v)", err))
}
