package bridge

import (
	"context"
	"time"

	"github.com/stdiomcp/gateway/mcp"
)

// barrierState is a child's barrier (see cancelled); guarded by child.mu.
type barrierState struct {
	out        bool // a barrier probe is out
	again      bool // a cancellation went out since that probe was sent
	distrusted bool // the child answered a request after it had taken its cancellation
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
	b := &ch.barrier
	if b.distrusted {
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
		ch.mu.Lock()
		b := &ch.barrier
		if err == nil && !b.distrusted {
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
		}
		again := b.again && err == nil && !b.distrusted
		b.again = false
		if !again {
			b.out = false
			ch.mu.Unlock()
			return
		}
		ch.mu.Unlock()
	}
}

// barLocked marks the ended exchange id as settled by a barrier, so that an
// answer to it from now on shows the child went on with it; ch.mu is held.
func (ch *child) barLocked(id int64) {
	for i := range ch.recent {
		if ch.recent[i].id == id {
			ch.recent[i].barred = true
		}
	}
}
