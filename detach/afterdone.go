package detach

import (
	"context"
	"sync/atomic"
)

// AfterDone is context.AfterFunc for the context Middleware gives a
// request, and those made from it with values only: f runs once ctx
// ends, unless stop, called first, reports that it stopped it. When the
// server learns that the client has gone, f runs on the goroutine that
// learnt it, which holds no lock, rather than on one started for it: the
// news reaches f one goroutine switch sooner. Ended otherwise (the
// handler returned, a write to a response that left failed, shutdown),
// or for a context that may end before the request's, f runs on a
// goroutine of its own, as context.AfterFunc runs it; never on the
// caller's, so that the caller may hold a lock f takes.
func AfterDone(ctx context.Context, f func()) (stop func() bool) {
	st, _ := ctx.Value(streamKey{}).(*stream)
	if st == nil || ctx.Done() != st.ctx.Done() {
		// Not the stream's context, or one that may end before it does.
		return context.AfterFunc(ctx, f)
	}
	h := &afterDone{st: st, f: f}
	st.mu.Lock()
	if st.over {
		st.mu.Unlock()
		h.state.Store(ran)
		go f()
		return h.stop
	}
	st.afterDone = append(st.afterDone, h)
	st.mu.Unlock()
	return h.stop
}

// streamKey finds a request's stream through a context made from its own.
type streamKey struct{}

// streamCtx is a request's own context, as Middleware hands it on: the
// stream's, which knows its stream.
type streamCtx struct {
	context.Context
	st *stream
}

func (c *streamCtx) Value(key any) any {
	if key == (streamKey{}) {
		return c.st
	}
	return c.Context.Value(key)
}

// afterDone is one function handed to AfterDone.
type afterDone struct {
	st    *stream
	f     func()
	state atomic.Int32 // armed, then ran or stopped, whichever came first
}

const (
	armed int32 = iota
	ran
	stopped
)

func (h *afterDone) stop() bool {
	if !h.state.CompareAndSwap(armed, stopped) {
		return false
	}
	st := h.st
	st.mu.Lock()
	for i, o := range st.afterDone {
		if o == h {
			st.afterDone = append(st.afterDone[:i], st.afterDone[i+1:]...)
			break
		}
	}
	st.mu.Unlock()
	return true
}

// end ends the request's own context for cause, then runs what AfterDone
// was handed: here when inline (the caller is a goroutine of the stream's
// own that learnt the client has gone, and holds no lock), on goroutines
// of their own otherwise. Only the first end runs them.
func (st *stream) end(cause error, inline bool) {
	st.cancel(cause)
	st.mu.Lock()
	st.over = true
	hs := st.afterDone
	st.afterDone = nil
	st.mu.Unlock()
	for _, h := range hs {
		if !h.state.CompareAndSwap(armed, ran) {
			continue
		}
		if inline {
			h.f()
		} else {
			go h.f()
		}
	}
}
