package bridge

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// subscriptions/listen is 2026-07-28's one long-lived stream. From a modern
// child it is relayed: each client's listen is a listen of its own on the
// child, and the subscription id (which is the listen request's id) is
// rewritten both ways. A legacy child has no such request; the gateway
// builds the stream from the child's list_changed notifications and from
// resources/subscribe, which it counts across listeners since the child is
// shared.

// listenLegacy opens a listen on a legacy child: acknowledged at once with
// what the child can deliver, then fed by fanOut until the client leaves.
func (ch *child) listenLegacy(ctx context.Context, req *mcp.Request, caller Caller, s *slot) (*call, error) {
	notifications, _ := req.Param(mcp.ParamNotifications)
	asked, err := mcp.ReadFilter(notifications)
	if err != nil {
		s.release()
		return nil, err
	}
	honored := asked.Honored(ch.initResult)
	ch.mu.Lock()
	if ch.ended != nil {
		ch.mu.Unlock()
		s.release()
		return nil, errUnavailable("the child process is not running")
	}
	c := ch.newCall(ctx, callSpec{req: req, caller: caller, slot: s, listen: &honored, onEnd: ch.unlisten})
	ch.listeners = append(ch.listeners, c)
	more := ch.countLocked(honored.ResourceSubscriptions, +1)
	ch.mu.Unlock()
	c.box.note(mcp.Acknowledged(req.ID, honored), noteAsk)
	ch.startSyncers(more)
	return c, nil
}

// unlisten forgets a legacy child's listener whose call has ended.
func (ch *child) unlisten(c *call) {
	ch.mu.Lock()
	i := slices.Index(ch.listeners, c)
	if i < 0 {
		ch.mu.Unlock()
		return // ended with the child, and its subscriptions with it
	}
	ch.listeners = slices.Delete(ch.listeners, i, i+1)
	more := ch.countLocked(c.listen.ResourceSubscriptions, -1)
	ch.mu.Unlock()
	ch.startSyncers(more)
}

// maxSyncers bounds the goroutines, and the requests of the gateway's own
// on the child, that bring a legacy child's subscriptions in line: clients
// that open and close listens faster than the child answers make the
// queue of resources longer (each at most once in it), not the number of
// requests waiting on the child.
const maxSyncers = 4

// countLocked counts the listeners of resources: a legacy child is
// subscribed to a resource while at least one listener wants it. The
// resources whose subscription on the child must be brought in line are
// queued for the syncers; it returns how many more syncers to start. ch.mu
// is held.
func (ch *child) countLocked(uris []string, delta int) int {
	for _, uri := range uris {
		if n := ch.subscribed[uri] + delta; n > 0 {
			ch.subscribed[uri] = n
		} else {
			delete(ch.subscribed, uri)
		}
		if !ch.syncing[uri] {
			ch.syncing[uri] = true
			ch.toSync = append(ch.toSync, uri)
		}
	}
	// A syncer takes from the queue until it is empty, so one is started
	// only where a queued resource would find none free to take it.
	more := max(0, min(len(ch.toSync), maxSyncers)-ch.syncers)
	ch.syncers += more
	return more
}

// startSyncers starts n syncers in the background.
func (ch *child) startSyncers(n int) {
	for range n {
		ch.w.bg.spawn(ch.syncQueued)
	}
}

// syncQueued brings the queued resources' subscriptions in line, one at a
// time, until the queue is empty.
func (ch *child) syncQueued() {
	for {
		ch.mu.Lock()
		if len(ch.toSync) == 0 {
			ch.syncers--
			ch.toSync = nil // its array may have grown large under churn
			ch.mu.Unlock()
			return
		}
		uri := ch.toSync[0]
		ch.toSync = ch.toSync[1:]
		ch.mu.Unlock()
		ch.syncSubscription(uri)
	}
}

// syncSubscription subscribes the child to the resource, or unsubscribes
// it, until what it was last told matches whether anyone listens. One runs
// per resource at a time (a resource is queued once until it is synced),
// so the child's subscribe and unsubscribe cannot overtake each other; the
// child's answers are not waited for beyond a bound, and a failure is
// logged.
func (ch *child) syncSubscription(uri string) {
	params := append(append([]byte(`{"uri":`), jsonrpc.Quote(uri)...), '}')
	for {
		ch.mu.Lock()
		want := ch.subscribed[uri] > 0
		if ch.ended != nil || want == ch.onChild[uri] {
			delete(ch.syncing, uri)
			ch.mu.Unlock()
			return
		}
		method := mcp.MethodSubscribe
		if want {
			ch.onChild[uri] = true
		} else {
			delete(ch.onChild, uri)
			method = mcp.MethodUnsubscribe
		}
		ch.mu.Unlock()
		resp, err := ch.internal(context.Background(), method, params, ch.b.opts.CancelTimeout)
		switch {
		case err != nil:
			ch.log.Warn("resource subscription on the child failed", "method", method, "uri", clipped(uri), "err", err)
		case resp.Error != nil:
			ch.log.Warn("the child refused a resource subscription", "method", method, "uri", clipped(uri), "error", head(resp.Error))
		}
	}
}

// fanOut delivers a legacy child's list_changed or resources/updated
// notification to every listener that asked for it, tagged with each one's
// subscription id.
func (ch *child) fanOut(m *jsonrpc.Message) {
	ch.mu.Lock()
	targets := make([]*call, 0, len(ch.listeners))
	for _, c := range ch.listeners {
		if c.listen.Wants(m) {
			targets = append(targets, c)
		}
	}
	ch.mu.Unlock()
	for _, c := range targets {
		c.event(mcp.Tagged(m, c.clientID))
	}
}

// relayTagged routes a modern child's notification for one of its listen
// streams to the client of that listen, with the client's own listen id,
// when the listen asked for it (see relays). It reports false when the notification carries no subscription id.
func (ch *child) relayTagged(m *jsonrpc.Message) bool {
	sp, ok := mcp.SubscriptionID(m)
	if !ok {
		return false
	}
	var c *call
	if id, err := strconv.ParseInt(string(m.Params[sp.Start:sp.End]), 10, 64); err == nil {
		if ex := ch.lookup(id); ex != nil && ex.method == mcp.MethodListen {
			if ex.internal {
				ch.toolsChanged(m) // the gateway's own listen
				return true
			}
			c = ex.owner()
		}
	}
	if c == nil {
		ch.log.Debug("a notification for no open listen; dropped", "method", m.Method, "subscription", string(m.Params[sp.Start:sp.End]))
		return true
	}
	if !c.relays(m) {
		ch.log.Debug("a notification the listen did not ask for; dropped", "method", m.Method, "client_id", logged(c.clientID))
		return true
	}
	c.event(mcp.Tagged(m, c.clientID))
	return true
}

// relays reports whether the client of a relayed listen asked for the
// child's notification m (see mcp.Filter.Passes): a child may send every
// type to every listen, and the client must hear only what it asked for.
// The filter was read when the listen was made (see worker.call).
func (c *call) relays(m *jsonrpc.Message) bool {
	return c.listen == nil || c.listen.Passes(m)
}

// retagListenAnswer adds to edits, for a relayed listen's final response,
// the one that puts the client's listen id in the result's
// _meta.subscriptionId, where the child named the listen by its own id
// (as restore puts the client's id back on the response's). Nothing else
// of the result is touched.
func (c *call) retagListenAnswer(m *jsonrpc.Message, edits []jsonrpc.Edit) []jsonrpc.Edit {
	if c.method != mcp.MethodListen {
		return edits
	}
	if sp, ok := mcp.ResultSubscriptionID(m); ok {
		edits = append(edits, jsonrpc.Edit{Span: sp, New: c.clientID})
	}
	return edits
}

// event queues a notification for a listen's client. One that has fallen
// MaxNotes notifications behind is not waited for: its listen ends with an
// error, so that it listens again and refetches what it missed, rather
// than the gateway holding an ever longer backlog for it.
func (c *call) event(b []byte) {
	if c.box.note(b, noteEvent) {
		return
	}
	if _, _, done, _ := c.box.peek(); done {
		return
	}
	c.b.log.WarnContext(c.logCtx(), "a listener fell too far behind; ending its stream", "client_id", logged(c.clientID), "behind", c.b.opts.MaxNotes)
	c.abort(jsonrpc.GatewayError(jsonrpc.CodeOverloaded, "listener_behind",
		fmt.Sprintf("the client fell %d notifications (or %d MiB of them) behind; listen again", c.b.opts.MaxNotes, maxNoteBytes>>20)), "the client fell too far behind")
}

// endListen ends a modern child's listen that the child tore down with
// notifications/cancelled: the client gets the listen's completion.
func (ch *child) endListen(id int64) {
	ex := ch.lookup(id)
	if ex == nil || ex.method != mcp.MethodListen {
		return
	}
	if retired, _ := ch.retire(ex, nil); !retired {
		return
	}
	if c := ex.owner(); c != nil {
		c.end(jsonrpc.NewResult(c.clientID, mcp.ListenEnded(c.clientID)), nil)
	}
}

// endListeners ends a legacy child's listens when the child goes away, so
// their clients listen again once it is back.
func (ch *child) endListeners(err error) {
	ch.mu.Lock()
	ls := ch.listeners
	ch.listeners = nil
	ch.mu.Unlock()
	for _, c := range ls {
		c.end(nil, err)
	}
}
