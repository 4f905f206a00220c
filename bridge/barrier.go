package bridge

import (
	"context"
	"time"

	"github.com/stdiomcp/gateway/mcp"
)

// barrierState is a child's barrier (see cancelled); guarded by child.mu.
type barrierState struct {
	out    bool      // a barrier probe is out
	again  bool      // a cancellation went out since that probe was sent
	doubt  time.Time // until when barriers settle nothing (see goesOn)
	logged time.Time // when goesOn last logged at info
}

// cancelled is told that the cancellation of exchange id reached the
// child's input. Calls retired without their answer keep the child's
// questions and log lines from being attributed (see unsettle), since the
// child may still be working on them; but a child reads its input in
// order, so once it answers a probe sent after a cancellation it has taken
// it, and a child that honours cancellations has stopped that call. The
// barrier sends that probe (ping, or server/discover to a modern child) and
// settles the calls whose cancellations went in before it: questions flow
// again at once, not after unsettledFor. A child seen answering a request
// after a barrier showed it had taken its cancellation goes on with
// cancelled calls: for it a barrier proves nothing, and only unsettledFor
// (or a late answer) settles them from then on. (An answer that crossed
// the cancellation on the way, or an error a child sends for a cancelled
// request before it reads the probe, comes before the barrier's answer and
// says nothing of the kind.) One barrier is out at a time; cancellations
// meanwhile get the next.
func (ch *child) cancelled(id int64) {
	now := time.Now()
	ch.mu.Lock()
	for i := range ch.unsettled {
		if u := &ch.unsettled[i]; u.id == id {
			u.told = now
		}
	}
	if h := ch.held[id]; h != nil {
		h.told = now
	}
	b := &ch.barrier
	if now.Before(b.doubt) {
		ch.mu.Unlock()
		return
	}
	if b.out {
		b.again = true
		ch.mu.Unlock()
		return
	}
	b.out = true
	ch.mu.Unlock()
	ch.w.bg.spawn(ch.runBarrier)
}

func (ch *child) runBarrier() {
	for {
		sent := time.Now()
		method, params := mcp.MethodPing, []byte(nil)
		if ch.eraNow() == EraModern {
			method, params = mcp.MethodDiscover, mcp.ModernParams(ch.b.clientID, nil)
		}
		_, err := ch.internal(context.Background(), method, params, ch.unsettledSpan())
		var freed []*heldSlot
		ch.mu.Lock()
		b := &ch.barrier
		doubted := time.Now().Before(b.doubt)
		if err == nil && !doubted {
			// Only those whose cancellation went in before the probe: one
			// never told to cancel (a tasks/cancel whose client left, a
			// cancellation still on its way) is still the child's to run.
			// What overflowed the table (blindUntil) is not known to have
			// been told, and waits out its time.
			for i := range ch.unsettled {
				if u := &ch.unsettled[i]; u.id != 0 && !u.told.IsZero() && !u.told.After(sent) {
					ch.barLocked(u.id)
					*u = unsettledExchange{}
				}
			}
			// Their slots come back by the same rule (see holdLocked). A call
			// that counts again later (see goesOn) does not take its slot
			// back: a slot given to another call is not taken from it.
			for id, h := range ch.held {
				if !h.told.IsZero() && !h.told.After(sent) {
					freed = append(freed, ch.unholdLocked(id))
				}
			}
		}
		again := b.again && err == nil && !doubted
		b.again = false
		if !again {
			b.out = false
		}
		ch.mu.Unlock()
		for _, h := range freed {
			h.free()
		}
		if !again {
			return
		}
	}
}

// barLocked marks the ended exchange id as settled by a barrier, so that an
// answer to it from now on shows the child went on with it; ch.mu is held.
func (ch *child) barLocked(id int64) {
	now := time.Now()
	for i := range ch.recent {
		if ch.recent[i].id == id {
			ch.recent[i].barred = now
		}
	}
}

// goesOn is told, ch.mu held, that the child answered exchange id after a
// barrier had settled it: it went on with a call after taking its
// cancellation (a check for it that came too late, or none). For
// unsettledSpan from now barriers settle nothing, and the other calls
// barriers settled within that span count again, as the calls whose
// clients left count without barriers. (A doubt that lasts, rather than
// one for good: a child whose answer raced its cancellation by a few
// milliseconds would otherwise have its questions refused for its whole
// life after every cancellation.)
func (ch *child) goesOn(id int64) {
	now := time.Now()
	span := ch.unsettledSpan()
	b := &ch.barrier
	if !now.Before(b.doubt) && now.Sub(b.logged) >= time.Minute {
		b.logged = now
		ch.log.Info("the child answered a call after it had taken its cancellation; for a while its questions and log lines wait out the calls whose clients left, as they do without the probe (logged once a minute at most)",
			"id", id, "for", span)
	}
	b.doubt = now.Add(span)
	for i := range ch.recent {
		e := &ch.recent[i]
		if e.id == id || e.barred.IsZero() {
			continue
		}
		if now.Sub(e.barred) < span {
			ch.unsettle(e.id)
		}
		e.barred = time.Time{}
	}
}
