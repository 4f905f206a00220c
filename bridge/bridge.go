// Package bridge multiplexes many JSON-RPC callers onto one stdio MCP child.
//
// Every request gets a gateway-allocated id that is never reused; the
// caller's id and progress token are put back on the way out, byte for byte.
// A caller that goes away is retired at once and the child is told with
// notifications/cancelled. The bridge speaks to children of either MCP era
// and restarts a child that exits.
package bridge

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// Transport carries newline-free messages to and from one child.
type Transport interface {
	// ReadMessage returns the next message from the child. Only the bridge's
	// reader goroutine calls it. An error other than one that says a single
	// message was skipped (see skippedMessage) ends the session.
	ReadMessage() ([]byte, error)
	// WriteMessage writes one message. It returns ctx.Err() only when ctx
	// ended before any of the message went out; any other error means the
	// message was not delivered. Safe for concurrent use.
	WriteMessage(ctx context.Context, msg []byte) error
	// Close stops the child; ReadMessage then returns an error.
	Close() error
}

// breaker is implemented by transports that can tell when they can no
// longer carry messages at all, as opposed to failing one write.
type breaker interface{ Broken() bool }

// bufferer is implemented by transports that can tell whether more of the
// child's output has already arrived (so the next ReadMessage will not
// wait). The bridge uses it to see the child's questions that arrive
// together as one batch.
type bufferer interface{ Buffered() bool }

// killer is implemented by transports that can stop a child at once, for a
// child too wedged to stop politely. Kill also does what Close does.
type killer interface{ Kill() error }

// skippedMessage is implemented by read errors that cost one message and
// leave the stream usable, such as a line over the size limit. Head is the
// message's first bytes.
type skippedMessage interface {
	error
	Skipped() (size int64, head []byte)
}

// StartFunc starts a child and returns its transport.
type StartFunc func(ctx context.Context) (Transport, error)

// Era is how the bridge talks to its child.
type Era string

const (
	EraAuto   Era = "auto"   // probe with server/discover, fall back to initialize
	EraLegacy Era = "legacy" // initialize + notifications/initialized (2025 revisions)
	EraModern Era = "modern" // stateless 2026-07-28: no handshake
)

// Options configure a Bridge. Zero values mean the documented defaults.
type Options struct {
	Era              Era           // "": auto
	IdleTimeout      time.Duration // 0: 5m; a call with no response and no progress for this long times out
	MaxDuration      time.Duration // 0: 30m; no call runs longer, progress or not
	ProbeTimeout     time.Duration // 0: 10s; how long auto waits for server/discover
	HandshakeTimeout time.Duration // 0: 60s; how long initialize may take
	CancelTimeout    time.Duration // 0: 5s; how long writing notifications/cancelled may take
	RestartMin       time.Duration // 0: 250ms; first delay before restarting a child that exited
	RestartMax       time.Duration // 0: 30s; the delay doubles up to this
	WedgeTimeout     time.Duration // 0: 1m; negative: never. With calls pending and nothing read for this long, the child is probed, and killed if the probe goes unanswered for ProbeTimeout
	MaxNotes         int           // 0: 256; undelivered notifications kept per call before progress is coalesced
	ClientName       string        // "": stdiomcp-gateway; clientInfo.name toward the child
	ClientVersion    string        // "": dev
	Logger           *slog.Logger  // nil: discard
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
	if o.WedgeTimeout == 0 {
		o.WedgeTimeout = time.Minute
	}
	if o.MaxNotes <= 0 {
		o.MaxNotes = 256
	}
	if o.ClientName == "" {
		o.ClientName = "stdiomcp-gateway"
	}
	if o.ClientVersion == "" {
		o.ClientVersion = "dev"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// Bridge serves calls from many callers with one child at a time.
type Bridge struct {
	opts  Options
	start StartFunc
	log   *slog.Logger

	// nextID is shared by every child the bridge ever starts, and by the
	// other workers of its pool, so an id is never reused for the life of
	// the gateway.
	nextID *atomic.Int64

	mu       sync.Mutex
	sess     *session      // the current child; nil before the first
	starting bool          // a child is being started or handshaken
	era      Era           // with auto: the verdict on an earlier child of this configuration
	changed  chan struct{} // closed and replaced whenever the state above changes
	closed   bool

	stopRun  context.CancelFunc
	runDone  chan struct{}
	bgMu     sync.Mutex
	bgClosed bool           // Close is waiting for wg; no more may be added
	wg       sync.WaitGroup // cancellations, replies and closes still running

	stateKey *[32]byte // signs the requestState of parked calls (park.go); shared by a pool
	askMu    sync.Mutex
	asks     map[string]*ask     // questions waiting on legacy clients, by the id they were sent with
	parked   map[int64]*exchange // calls waiting for a modern client's retry
	unparked func()              // called when a call leaves parked (a pool counts them as in flight)

	late     atomic.Uint64 // responses for calls already retired
	unknown  atomic.Uint64 // responses for ids the bridge never sent
	restarts atomic.Uint64
}

// New starts the first child in the background and returns at once; calls
// made before its handshake is done wait for it.
func New(start StartFunc, opts Options) *Bridge {
	return newBridge(start, opts, newShared())
}

// shared is what the workers of a pool have in common: the id counter and
// the key that signs requestState, so that any of them can read a state
// another minted.
type shared struct {
	ids      *atomic.Int64
	key      *[32]byte
	unparked func() // nil: nobody counts parked calls
}

func newShared() shared {
	sh := shared{ids: new(atomic.Int64), key: new([32]byte)}
	_, _ = rand.Read(sh.key[:])
	return sh
}

func newBridge(start StartFunc, opts Options, sh shared) *Bridge {
	opts.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	b := &Bridge{
		opts:     opts,
		start:    start,
		log:      opts.Logger,
		nextID:   sh.ids,
		stateKey: sh.key,
		changed:  make(chan struct{}),
		starting: true,
		stopRun:  cancel,
		runDone:  make(chan struct{}),
		asks:     map[string]*ask{},
		parked:   map[int64]*exchange{},
		unparked: sh.unparked,
	}
	go b.run(ctx)
	return b
}

// ErrClosed is returned by calls made after Close.
var ErrClosed = errors.New("bridge: closed")

// run keeps a child running: start, handshake, serve until it ends, wait,
// start again. The delay doubles after each quick failure so a child that
// cannot start is never restarted in a hot loop.
func (b *Bridge) run(ctx context.Context) {
	defer close(b.runDone)
	delay := b.opts.RestartMin
	for {
		began := time.Now()
		b.setStarting(true)
		s, err := b.startSession(ctx)
		b.setStarting(false)
		if err == nil {
			select {
			case <-s.done:
			case <-ctx.Done():
				return
			}
			err = s.endErr()
		}
		if ctx.Err() != nil {
			return
		}
		// A child that served for a good while earns a quick restart, and so
		// does one that only exited because it was probed: it is started
		// again as legacy.
		if time.Since(began) > 4*b.opts.RestartMax || errors.Is(err, errExitedOnProbe) {
			delay = b.opts.RestartMin
		}
		if errors.Is(err, errExitedOnProbe) {
			b.setVerdict(EraLegacy)
		}
		b.log.Warn("child unavailable; restarting", "err", err, "retry_in", delay)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		delay = min(2*delay, b.opts.RestartMax)
		b.restarts.Add(1)
	}
}

func (b *Bridge) startSession(ctx context.Context) (*session, error) {
	t, err := b.start(ctx)
	if err != nil {
		return nil, err
	}
	s := newSession(b, t)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		t.Close()
		return nil, ErrClosed
	}
	b.sess = s
	b.notifyChangedLocked()
	b.mu.Unlock()
	go s.readLoop()
	if err := s.handshake(ctx); err != nil {
		s.kill(err)
		<-s.done
		return nil, err
	}
	if s.eraNow() == EraModern {
		s.watchTools(ctx)
	}
	// Close sets bgClosed only after this goroutine (run) has returned, so
	// spawn starts a goroutine here.
	b.spawn(func() { s.watch(ctx) })
	b.mu.Lock()
	s.ready = true
	b.notifyChangedLocked()
	b.mu.Unlock()
	// Logged only now, so that whoever reads it finds the child ready.
	s.log.Info("child ready", "era", s.eraNow())
	return s, nil
}

func (b *Bridge) verdict() Era {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.era
}

func (b *Bridge) setVerdict(e Era) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.era = e
}

func (b *Bridge) setStarting(v bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.starting = v
	b.notifyChangedLocked()
}

func (b *Bridge) notifyChangedLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// readySession returns the current child once its handshake is done. It
// waits while a child is starting; with no child at all it fails at once.
func (b *Bridge) readySession(ctx context.Context) (*session, error) {
	for {
		b.mu.Lock()
		s, changed, closed, starting := b.sess, b.changed, b.closed, b.starting
		ready := s != nil && s.ready && s.endErr() == nil
		b.mu.Unlock()
		switch {
		case closed:
			return nil, errShutdown()
		case ready:
			return s, nil
		case !starting:
			return nil, errUnavailable("the child process is not running; it is being restarted")
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// WaitReady blocks until a child is ready (see Ready), the bridge is
// closed, or ctx ends.
func (b *Bridge) WaitReady(ctx context.Context) error {
	for {
		b.mu.Lock()
		s, changed, closed := b.sess, b.changed, b.closed
		ready := s != nil && s.ready && s.endErr() == nil
		b.mu.Unlock()
		switch {
		case closed:
			return ErrClosed
		case ready:
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// status reports whether a child is ready, and whether one is starting.
func (b *Bridge) status() (ready, starting bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ready = !b.closed && b.sess != nil && b.sess.ready && b.sess.endErr() == nil
	return ready, b.starting
}

// Ready reports whether a child is running and its handshake is done.
func (b *Bridge) Ready() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.closed && b.sess != nil && b.sess.ready && b.sess.endErr() == nil
}

// Stats are counters for tests and metrics.
type Stats struct {
	InFlight      int    // calls holding a worker's slot, parked ones included (a Pool's count)
	Queued        int    // calls waiting for a free worker (a Pool's count)
	Pending       int    // requests of clients waiting for the child (parked ones and listens included)
	LateResponses uint64 // responses dropped because their call had been retired
	Unknown       uint64 // responses for ids the bridge never sent
	Restarts      uint64 // children started after the first
}

// Stats returns the current counters.
func (b *Bridge) Stats() Stats {
	st := Stats{LateResponses: b.late.Load(), Unknown: b.unknown.Load(), Restarts: b.restarts.Load()}
	b.mu.Lock()
	s := b.sess
	b.mu.Unlock()
	if s != nil {
		st.Pending = s.pendingCount()
	}
	return st
}

// Close refuses new calls, cancels the calls in flight (telling the child,
// within ctx), stops the child and waits for the bridge's goroutines.
func (b *Bridge) Close(ctx context.Context) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		<-b.runDone
		return nil
	}
	b.closed = true
	b.notifyChangedLocked()
	b.mu.Unlock()
	b.stopRun()
	<-b.runDone
	b.mu.Lock()
	s := b.sess
	b.mu.Unlock()
	if s != nil {
		s.shutdown(ctx)
	}
	b.bgMu.Lock()
	b.bgClosed = true
	b.bgMu.Unlock()
	b.wg.Wait()
	return nil
}

// spawn runs f on a goroutine that Close waits for. Once Close is waiting,
// f runs on the caller's goroutine instead: by then the transport is closed
// and f (a write or a close) returns at once.
func (b *Bridge) spawn(f func()) {
	b.bgMu.Lock()
	if b.bgClosed {
		b.bgMu.Unlock()
		f()
		return
	}
	b.wg.Add(1)
	b.bgMu.Unlock()
	go func() {
		defer b.wg.Done()
		f()
	}()
}

func errUnavailable(msg string) *jsonrpc.Error {
	return jsonrpc.GatewayError(jsonrpc.CodeUnavailable, "child_unavailable", msg)
}

func errShutdown() *jsonrpc.Error {
	return jsonrpc.GatewayError(jsonrpc.CodeShutdown, "shutting_down", "the gateway is shutting down")
}
