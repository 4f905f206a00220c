package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// A wedged child still runs but serves nothing: a deadlock, a blocked
// write, an endless loop. Its calls would each time out in turn, and every
// new call would join them. The watchdog tells it from a busy child by
// asking: when calls are pending and the child has written nothing for
// WedgeTimeout, it sends a liveness probe (ping to a legacy child,
// server/discover to a modern one), and only when that goes unanswered for
// ProbeTimeout is the child killed, so that it is restarted. Killing is the
// last resort; a single slow call is never a reason.

// errWedged is why a wedged child's calls failed.
var errWedged = errors.New("the child stopped responding (nothing read and a liveness probe unanswered); it was killed and is being restarted")

// touch records that the child wrote something.
func (s *session) touch() { s.lastRead.Store(time.Now().UnixNano()) }

func (s *session) silentFor() time.Duration {
	return time.Since(time.Unix(0, s.lastRead.Load()))
}

// busy reports whether the child owes answers: calls of clients are
// pending. A listen is quiet by nature, and a parked call waits on its
// client, not on the child.
func (s *session) busy() bool {
	for _, ex := range s.inFlight() {
		if !ex.internal && ex.method != methodListen && ex.current() != nil {
			return true
		}
	}
	return false
}

// watch runs the watchdog until the session ends.
func (s *session) watch(ctx context.Context) {
	wedge := s.b.opts.WedgeTimeout
	if wedge < 0 {
		return
	}
	t := time.NewTicker(max(wedge/4, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.done:
			return
		case <-ctx.Done():
			return
		}
		if silent := s.silentFor(); silent < wedge || !s.busy() {
			continue
		}
		if s.alive(ctx) {
			continue
		}
		s.log.Error("child wedged: killing it", "silent_for", s.silentFor().Round(time.Millisecond),
			"probe_timeout", s.b.opts.ProbeTimeout, "pending", s.pendingCount())
		s.kill(errWedged)
		return
	}
}

// alive sends the liveness probe and reports whether any answer came, an
// error included: an answer is all it asks for.
func (s *session) alive(ctx context.Context) bool {
	method, params := "ping", []byte(nil)
	if s.eraNow() == EraModern {
		method = "server/discover"
		params, _ = json.Marshal(map[string]any{"_meta": s.b.modernMeta()})
	}
	s.log.Warn("child silent with calls pending; probing it", "silent_for", s.silentFor().Round(time.Millisecond), "probe", method)
	_, err := s.internal(ctx, method, params, s.b.opts.ProbeTimeout)
	if err == nil {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	// The session ended or the gateway stops: nothing left to watch.
	s.log.Debug("liveness probe ended", "err", fmt.Sprint(err))
	return true
}
