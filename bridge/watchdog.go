package bridge

import (
	"context"
	"errors"
	"time"

	"github.com/stdiomcp/gateway/mcp"
)

// A wedged child still runs but serves nothing: a deadlock, a blocked
// write, an endless loop. Its calls would each time out in turn, and every
// new call would join them. The watchdog tells it from a busy child by
// asking: when calls are pending and the child has written nothing for
// WedgeTimeout (see silentFor), it sends a liveness probe (ping to a legacy child,
// server/discover to a modern one), and only when that goes unanswered for
// ProbeTimeout is the child killed, so that it is restarted. Killing is the
// last resort; a single slow call is never a reason.

// errWedged is why a wedged child's calls failed.
var errWedged = errors.New("the child stopped responding (nothing read and a liveness probe unanswered); it was killed and is being restarted")

// touch records that the child wrote something.
func (ch *child) touch() { ch.lastRead.Store(time.Now().UnixNano()) }

// silentFor is how long the child has owed its clients answers without
// writing anything; false when it owes none. Silence counts from the later
// of its last output and the moment it began to owe the oldest answer it
// still owes: a child that sat idle for an hour and was then handed a
// call has been silent only since the call.
func (ch *child) silentFor() (time.Duration, bool) {
	var oldest time.Time
	for _, ex := range ch.inFlight() {
		if sent, ok := ex.owedSince(); ok && (oldest.IsZero() || sent.Before(oldest)) {
			oldest = sent
		}
	}
	if oldest.IsZero() {
		return 0, false
	}
	since := time.Unix(0, ch.lastRead.Load())
	if oldest.After(since) {
		since = oldest
	}
	return time.Since(since), true
}

// watch runs the watchdog until the child's service ends.
func (ch *child) watch(ctx context.Context) {
	wedge := ch.b.opts.WedgeTimeout
	if wedge < 0 {
		return
	}
	t := time.NewTicker(max(wedge/4, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ch.done:
			return
		case <-ctx.Done():
			return
		}
		if silent, owes := ch.silentFor(); !owes || silent < wedge {
			continue
		}
		if ch.alive(ctx) {
			continue
		}
		silent, _ := ch.silentFor()
		ch.log.Error("child wedged: killing it", "silent_for", silent.Round(time.Millisecond),
			"probe_timeout", ch.b.opts.ProbeTimeout, "pending", ch.pendingCount())
		ch.kill(errWedged)
		return
	}
}

// alive sends the liveness probe and reports whether any answer came, an
// error included: an answer is all it asks for.
func (ch *child) alive(ctx context.Context) bool {
	method, params := mcp.MethodPing, []byte(nil)
	if ch.eraNow() == EraModern {
		method, params = mcp.MethodDiscover, mcp.ModernParams(ch.b.clientID, nil)
	}
	silent, _ := ch.silentFor()
	ch.log.Warn("child silent with calls pending; probing it", "silent_for", silent.Round(time.Millisecond), "probe", method)
	_, err := ch.internal(ctx, method, params, ch.b.opts.ProbeTimeout)
	if err == nil {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	// The child's service ended or the gateway stops: nothing left to watch.
	ch.log.Debug("liveness probe ended", "err", err)
	return true
}
