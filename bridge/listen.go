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
	honored := mcp.ReadFilter(notifications).Honored(ch.initResult)
	ch.mu.Lock()
	if ch.ended != nil {
		ch.mu.Unlock()
		s.release()
		return nil, errUnavailable("the child process is not running")
	}
	c := ch.newCall(ctx, callSpec{req: req, caller: caller, slot: s, listen: &honored, onEnd: ch.unlisten})
	ch.listeners = append(ch.listeners, c)
	ch.mu.Unlock()
	c.box.note(mcp.Acknowledged(req.ID, honored), noteAsk)
	for _, uri := range honored.ResourceSubscriptions {
		ch.subscribe(uri, +1)
	}
	return c, nil
}

// unlisten forgets a legacy child's listener whose call has ended.
func (ch *child) unlisten(c *call) {
	ch.mu.Lock()
	i := slices.Index(ch.listeners, c)
	if i >= 0 {
		ch.listeners = slices.Delete(ch.listeners, i, i+1)
	}
	ch.mu.Unlock()
	if i < 0 {
		return // ended with the child, and its subscriptions with it
	}
	for _, uri := range c.listen.ResourceSubscriptions {
		ch.subscribe(uri, -1)
	}
}

// subscribe counts the listeners of a resource and subscribes the child on
// the first and unsubscribes it after the last. The child's answer is not
// waited for; a failure is logged.
func (ch *child) subscribe(uri string, delta int) {
	ch.mu.Lock()
	if ch.ended != nil {
		ch.mu.Unlock()
		return // the child is gone, and its subscriptions with it
	}
	before := ch.subscribed[uri]
	after := before + delta
	if after <= 0 {
		delete(ch.subscribed, uri)
		after = 0
	} else {
		ch.subscribed[uri] = after
	}
	ch.mu.Unlock()
	method := ""
	switch {
	case before == 0 && after > 0:
		method = mcp.MethodSubscribe
	case before > 0 && after == 0:
		method = mcp.MethodUnsubscribe
	default:
		return
	}
	params := append(append([]byte(`{"uri":`), jsonrpc.Quote(uri)...), '}')
	ch.w.bg.spawn(func() {
		resp, err := ch.internal(context.Background(), method, params, ch.b.opts.CancelTimeout)
		switch {
		case err != nil:
			ch.log.Warn("resource subscription on the child failed", "method", method, "uri", uri, "err", err)
		case resp.Error != nil:
			ch.log.Warn("the child refused a resource subscription", "method", method, "uri", uri, "error", head(resp.Error))
		}
	})
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
// streams to the client of that listen, with the client's own listen id.
// It reports false when the notification carries no subscription id.
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
	c.event(mcp.Tagged(m, c.clientID))
	return true
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
	c.b.log.Warn("a listener fell too far behind; ending its stream", "client_id", string(c.clientID), "behind", c.b.opts.MaxNotes)
	c.abort(jsonrpc.GatewayError(jsonrpc.CodeOverloaded, "listener_behind",
		fmt.Sprintf("the client fell %d notifications behind; listen again", c.b.opts.MaxNotes)), "the client fell too far behind")
}

// endListen ends a modern child's listen that the child tore down with
// notifications/cancelled: the client gets the listen's completion.
func (ch *child) endListen(id int64) {
	ex := ch.lookup(id)
	if ex == nil || ex.method != mcp.MethodListen || !ch.retire(ex) {
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
