package bridge

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// Pool runs several workers, each a Bridge with a child of its own, and
// sends each call to the worker with the fewest calls in flight. A call
// stays with its worker for its whole life (its cancellation, progress,
// questions and retries), and so does a listen. Ids come from one counter,
// so none is ever reused across workers either.
//
// Each worker takes at most MaxInFlight calls at once; beyond that, calls
// wait in a bounded queue for a free worker, and past the queue they are
// refused at once with -32003, instead of piling up on a child that
// cannot keep up. A call whose client leaves while it waits never reaches
// a child.
type Pool struct {
	opts    PoolOptions
	workers []*worker

	mu      sync.Mutex
	waiting int           // calls in the queue
	listens int           // open listens, across workers
	freed   chan struct{} // closed and replaced when a slot frees up
	closed  bool
	drain   bool // no new calls; those in flight may finish (see Drain)
	next    int  // where the search for the least loaded worker starts, for fair ties
}

type worker struct {
	*Bridge
	index  int
	active int // calls in flight, listens excepted; guarded by Pool.mu
}

// load is the worker's calls in flight, those parked for their client's
// retry included: the child is working on those too, so they hold a slot
// until their retry comes or they are given up. p.mu is held.
func (w *worker) load() int { return w.active + w.parkedCount() }

// PoolOptions size a Pool. Zero values mean the documented defaults.
type PoolOptions struct {
	Workers      int           // 0: 1
	MaxInFlight  int           // 0: 64; calls in flight per worker
	QueueSize    int           // 0: 256; calls waiting for a free worker; negative: none wait
	QueueTimeout time.Duration // 0: 30s; the longest a call waits for a free worker
	MaxListens   int           // 0: 1024; open listens across workers
}

func (o *PoolOptions) defaults() {
	if o.Workers <= 0 {
		o.Workers = 1
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 64
	}
	if o.QueueSize == 0 {
		o.QueueSize = 256
	}
	o.QueueSize = max(o.QueueSize, 0)
	setDefault(&o.QueueTimeout, 30*time.Second)
	if o.MaxListens <= 0 {
		o.MaxListens = 1024
	}
}

// NewPool starts the workers' children in the background and returns at
// once. Each worker's log lines carry its number when there are several.
func NewPool(start StartFunc, opts Options, popts PoolOptions) *Pool {
	popts.defaults()
	opts.defaults()
	p := &Pool{opts: popts, freed: make(chan struct{})}
	sh := newShared()
	sh.unparked = p.wake
	for i := range popts.Workers {
		o := opts
		if popts.Workers > 1 {
			o.Logger = opts.Logger.With("worker", i)
		}
		p.workers = append(p.workers, &worker{Bridge: newBridge(start, o, sh), index: i})
	}
	return p
}

// Call sends the request to a worker: a retry to the worker whose call it
// continues, a listen to the least loaded worker, anything else to the
// least loaded worker with a free slot, waiting in the queue if none has
// one.
func (p *Pool) Call(ctx context.Context, req *jsonrpc.Message, caller Caller) (*Call, error) {
	var w *worker
	if owner := p.owner(req); owner != nil {
		// A retry continues a call already under way: it takes a slot
		// beyond the cap, and is let through while draining.
		p.mu.Lock()
		w = owner
		w.active++
		p.mu.Unlock()
	} else {
		p.mu.Lock()
		stopping := p.closed || p.drain
		p.mu.Unlock()
		if stopping {
			return nil, errShutdown()
		}
		if req.Method == methodListen {
			return p.listen(ctx, req, caller)
		}
		var err error
		if w, err = p.acquire(ctx); err != nil {
			return nil, err
		}
	}
	c, err := w.Call(ctx, req, caller)
	if err != nil {
		p.release(w)
		return nil, err
	}
	c.whenDone(func() { p.release(w) })
	return c, nil
}

// listen opens a listen on the least loaded worker. Listens take no slot,
// since they are quiet by nature, but each holds a connection and a queue
// of notifications, so their number is capped too.
func (p *Pool) listen(ctx context.Context, req *jsonrpc.Message, caller Caller) (*Call, error) {
	p.mu.Lock()
	if p.listens >= p.opts.MaxListens {
		p.mu.Unlock()
		return nil, errOverloaded(fmt.Sprintf("%d listens are open, the most the gateway keeps; try again later", p.opts.MaxListens))
	}
	p.listens++
	w := p.pickLocked(false)
	p.mu.Unlock()
	ended := func() {
		p.mu.Lock()
		p.listens--
		p.mu.Unlock()
	}
	c, err := w.Call(ctx, req, caller)
	if err != nil {
		ended()
		return nil, err
	}
	c.whenDone(ended)
	return c, nil
}

// owner is the worker holding the parked call a retry continues, if any.
func (p *Pool) owner(req *jsonrpc.Message) *worker {
	id, _, ours, err := p.workers[0].ownState(req)
	if !ours || err != nil {
		return nil
	}
	for _, w := range p.workers {
		if w.parkedExchange(id) != nil {
			return w
		}
	}
	return nil
}

// acquire takes a slot on the least loaded worker that has one, waiting in
// the queue while none has.
func (p *Pool) acquire(ctx context.Context) (*worker, error) {
	var timeout <-chan time.Time
	p.mu.Lock()
	for {
		if p.closed || p.drain {
			p.mu.Unlock()
			return nil, errShutdown()
		}
		if w := p.pickLocked(true); w != nil {
			w.active++
			p.mu.Unlock()
			return w, nil
		}
		if p.waiting >= p.opts.QueueSize {
			p.mu.Unlock()
			return nil, errOverloaded(fmt.Sprintf("every worker has %d calls in flight and %d calls are waiting; try again later", p.opts.MaxInFlight, p.waiting))
		}
		if timeout == nil {
			t := time.NewTimer(p.opts.QueueTimeout)
			defer t.Stop()
			timeout = t.C
		}
		p.waiting++
		freed := p.freed
		p.mu.Unlock()
		var err error
		select {
		case <-freed:
		case <-ctx.Done():
			err = ctx.Err()
		case <-timeout:
			err = errOverloaded(fmt.Sprintf("no worker had a free slot within %v; try again later", p.opts.QueueTimeout))
		}
		p.mu.Lock()
		p.waiting--
		if err != nil {
			p.mu.Unlock()
			return nil, err
		}
	}
}

func (p *Pool) release(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w.active--
	p.broadcastLocked()
}

// wake tells those waiting that a slot may be free: a parked call left.
func (p *Pool) wake() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.broadcastLocked()
}

// broadcastLocked wakes everything waiting on the pool's state.
func (p *Pool) broadcastLocked() {
	close(p.freed)
	p.freed = make(chan struct{})
}

// pickLocked chooses the worker with the fewest calls in flight, ready
// workers first, then those starting, then any. With needSlot it only
// considers workers below the cap, and may return nil.
func (p *Pool) pickLocked(needSlot bool) *worker {
	var best *worker
	bestRank, bestLoad := 3, 0
	n := len(p.workers)
	for k := range n {
		w := p.workers[(p.next+k)%n]
		load := w.load()
		if needSlot && load >= p.opts.MaxInFlight {
			continue
		}
		ready, starting := w.status()
		rank := 2
		switch {
		case ready:
			rank = 0
		case starting:
			rank = 1
		}
		if best == nil || rank < bestRank || (rank == bestRank && load < bestLoad) {
			best, bestRank, bestLoad = w, rank, load
		}
	}
	p.next = (p.next + 1) % n
	return best
}

// Notify forwards a client notification to every worker's child (their
// state is meant to be the same), and fails only if none took it.
func (p *Pool) Notify(ctx context.Context, n *jsonrpc.Message) error {
	var errs []error
	for _, w := range p.workers {
		if err := w.Notify(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == len(p.workers) {
		return errs[0]
	}
	return nil
}

// Respond delivers a client's answer to the worker whose question it is.
func (p *Pool) Respond(ctx context.Context, m *jsonrpc.Message) {
	for _, w := range p.workers {
		if w.respond(ctx, m) {
			return
		}
	}
	p.workers[0].log.Debug("dropped an answer to no waiting question", "id", string(m.ID))
}

// ToolHeaders reads the tool annotations from a ready worker: the workers
// run the same server.
func (p *Pool) ToolHeaders(ctx context.Context, tool string) ([]ParamHeader, error) {
	p.mu.Lock()
	w := p.pickLocked(false)
	p.mu.Unlock()
	return w.ToolHeaders(ctx, tool)
}

// Drain refuses new calls (with the shutdown error; a retry that continues
// a call under way is still let through) and waits until no call is in
// flight, or ctx ends. Listens are not waited for. Ready reports false from
// the start.
func (p *Pool) Drain(ctx context.Context) error {
	p.Refuse()
	p.mu.Lock()
	for {
		active := 0
		for _, w := range p.workers {
			active += w.load()
		}
		if active == 0 {
			p.mu.Unlock()
			return nil
		}
		freed := p.freed
		p.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
		p.mu.Lock()
	}
}

// Refuse starts a drain without waiting: from now on new calls are
// refused, calls waiting in the queue too, and Ready reports false.
func (p *Pool) Refuse() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drain = true
	p.broadcastLocked()
}

// Ready reports whether at least one worker is ready, unless the pool is
// draining.
func (p *Pool) Ready() bool {
	p.mu.Lock()
	stopping := p.closed || p.drain
	p.mu.Unlock()
	if stopping {
		return false
	}
	for _, w := range p.workers {
		if w.Ready() {
			return true
		}
	}
	return false
}

// WaitReady blocks until a worker is ready, the pool is closed, or ctx
// ends.
func (p *Pool) WaitReady(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(p.workers))
	for _, w := range p.workers {
		go func() { errs <- w.WaitReady(ctx) }()
	}
	var first error
	for range p.workers {
		err := <-errs
		if err == nil {
			cancel()
			first = nil
			// Drain the others so no goroutine outlives the call.
			for range len(p.workers) - 1 {
				<-errs
			}
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// Stats sums the workers' counters.
func (p *Pool) Stats() Stats {
	var st Stats
	for _, w := range p.workers {
		ws := w.Stats()
		st.Pending += ws.Pending
		st.LateResponses += ws.LateResponses
		st.Unknown += ws.Unknown
		st.Restarts += ws.Restarts
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.workers {
		st.InFlight += w.load()
	}
	st.Queued = p.waiting
	return st
}

// Close refuses new calls, then closes every worker (see Bridge.Close).
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.broadcastLocked()
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range p.workers {
		wg.Go(func() { w.Close(ctx) })
	}
	wg.Wait()
	return nil
}

// Workers is the number of workers, for logs.
func (p *Pool) Workers() int { return len(p.workers) }

func errOverloaded(msg string) *jsonrpc.Error {
	return jsonrpc.GatewayError(jsonrpc.CodeOverloaded, "overloaded", msg)
}
