package detach

import (
	"context"
	"sync"
	"sync/atomic"
)

// AfterDone is context.AfterFunc for the context Middleware gives a
// request, and those made from it with values only: f runs once ctx
// ends, unless stop, called first, reports that it stopped it. When the
// server learns that the client has gone, f runs on the goroutine that
// learnt it, which holds no lock, rather than on one started for it: the
// news reaches f one goroutine switch sooner. Such fs run one after
// another on that goroutine, so f must not block. Ended otherwise (the
// handler returned, a write to a response that left failed, shutdown),
// or for a context that may end before the request's, f runs on a
// goroutine of its own, as context.AfterFunc runs it; never on the
// caller's, so that the caller may hold a lock f takes.
func AfterDone(ctx context.Context, f func()) (stop func() bool) {
	own, _ := ctx.Value(ownKey{}).(*ownCtx)
	if own == nil || ctx.Done() != own.Done() {
		// Not a request's own context, or one that may end before it.
		return context.AfterFunc(ctx, f)
	}
	h := &afterDone{own: own, f: f}
	own.mu.Lock()
	if own.over || own.Err() != nil {
		// Ended, or ending: end may have taken its list already.
		own.mu.Unlock()
		h.state.Store(afterRan)
		go f()
		return h.stop
	}
	own.fs = append(own.fs, h)
	own.mu.Unlock()
	return h.stop
}

// ownKey finds a request's own context through those made from it.
type ownKey struct{}

// ownCtx is a request's own context (see Middleware), with what AfterDone
// was handed for it. It is apart from the stream, which a context kept
// after the request ended (by a call parked for its client's input, say)
// must not keep alive.
type ownCtx struct {
	context.Context
	cancel context.CancelCauseFunc // only end calls it

	mu   sync.Mutex
	over bool         // end has run: what AfterDone is handed runs at once
	fs   []*afterDone // what runs when the context ends
}

func (c *ownCtx) Value(key any) any {
	if key == (ownKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// end ends the context for cause, then runs what AfterDone was handed:
// here when inline (the caller is a goroutine of the stream's own that
// learnt the client has gone, and holds no lock), on goroutines of their
// own otherwise. Only the first end runs them.
func (c *ownCtx) end(cause error, inline bool) {
	c.cancel(cause)
	c.mu.Lock()
	c.over = true
	fs := c.fs
	c.fs = nil
	c.mu.Unlock()
	for _, h := range fs {
		if !h.state.CompareAndSwap(afterArmed, afterRan) {
			continue
		}
		if inline {
			h.f()
		} else {
			go h.f()
		}
	}
}

// afterDone is one function handed to AfterDone.
type afterDone struct {
	own   *ownCtx
	f     func()
	state atomic.Int32 // armed, then ran or stopped, whichever came first
}

const (
	afterArmed int32 = iota
	afterRan
	afterStopped
)

func (h *afterDone) stop() bool {
	if !h.state.CompareAndSwap(afterArmed, afterStopped) {
		return false
	}
	c := h.own
	c.mu.Lock()
	for i, o := range c.fs {
		if o == h {
			c.fs = append(c.fs[:i], c.fs[i+1:]...)
			break
		}
	}
	c.mu.Unlock()
	return true
}
