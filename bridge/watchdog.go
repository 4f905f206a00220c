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
// WedgeTimeout (see silence), it sends a liveness probe (ping to a legacy child,
// server/discover to a modern one), and only when that goes unanswered for
// ProbeTimeout is the child killed, so that it is restarted. Killing is the
// last resort; a single slow call is never a reason.

// errWedged is why a wedged child's calls failed.
var errWedged = errors.New("the child stopped responding (nothing read and a liveness probe unanswered); it was killed and is being restarted")

// touch records that the child wrote something.
func (ch *child) touch() { ch.lastRead.Store(time.Now().UnixNano()) }

// oldestOwed is when the child began to owe the oldest answer it still
// owes its clients; false if it owes none.
func (ch *child) oldestOwed() (time.Time, bool) {
	var oldest time.Time
	for _, ex := range ch.inFlight() {
		if sent, ok := ex.owedSince(); ok && (oldest.IsZero() || sent.Before(oldest)) {
			oldest = sent
		}
	}
	return oldest, !oldest.IsZero()
}

// silence is how long a child has owed its clients answers without
// writing anything, added up at each tick of the watchdog. Time in which
// it owed nothing does not count: a child idle for an hour and then
// handed a call has been silent only since the call. Output ends the
// silence, and so does a pause of a whole tick with nothing owed; a
// shorter one does not, so that calls that each end unanswered (their
// clients gave up, or timed out) before WedgeTimeout still add up.
type silence struct {
	total    time.Duration
	tick     time.Time // the last tick
	read     int64     // the child's last output as of the last tick
	idleFrom time.Time // since when it has owed nothing; zero while it owes
}

// at adds up the silence to now and returns it.
func (s *silence) at(ch *child, now time.Time, pause time.Duration) time.Duration {
	if read := ch.lastRead.Load(); read != s.read {
		s.read, s.total = read, 0
	}
	oldest, owes := ch.oldestOwed()
	if !owes {
		if s.idleFrom.IsZero() {
			s.idleFrom = now
		}
		if now.Sub(s.idleFrom) >= pause {
			s.total = 0
		}
		s.tick = now
		return s.total
	}
	s.idleFrom = time.Time{}
	from := s.tick
	for _, t := range []time.Time{time.Unix(0, s.read), oldest} {
		if t.After(from) {
			from = t
		}
	}
	if now.After(from) {
		s.total += now.Sub(from)
	}
	s.tick = now
	return s.total
}

// watch runs the watchdog until the child's service ends.
func (ch *child) watch(ctx context.Context) {
	wedge := ch.b.opts.WedgeTimeout
	if wedge < 0 {
		return
	}
	every := max(wedge/4, time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	s := silence{tick: time.Now(), read: ch.lastRead.Load()}
	for {
		select {
		case <-t.C:
		case <-ch.done:
			return
		case <-ctx.Done():
			return
		}
		silent := s.at(ch, time.Now(), every)
		if silent < wedge {
			continue
		}
		if ch.alive(ctx, silent) {
			continue
		}
		ch.log.Error("child wedged: killing it", "silent_for", (silent + ch.b.opts.ProbeTimeout).Round(time.Millisecond),
			"probe_timeout", ch.b.opts.ProbeTimeout, "pending", ch.pendingCount())
		ch.kill(errWedged)
		return
	}
}

// alive sends the liveness probe and reports whether any answer came, an
// error included: an answer is all it asks for.
func (ch *child) alive(ctx context.Context, silent time.Duration) bool {
	method, params := mcp.MethodPing, []byte(nil)
	if ch.eraNow() == EraModern {
		method, params = mcp.MethodDiscover, mcp.ModernParams(ch.b.clientID, nil)
	}
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
