package bridge

import (
	"context"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// routeLog delivers a child's log message to the call it belongs to. On
// stdio nothing in the message says which call that is, so the gateway
// delivers it only when it can tell: to the one call in flight that asked
// for logs. A legacy child may log for any call (its level is child-wide),
// so for it that call must also be the only one it may be working on: no
// other in flight, none of the gateway's own requests, and none left by its
// client lately (see unsettle); otherwise the message is dropped rather
// than shown to a client it may not belong to.
func (ch *child) routeLog(m *jsonrpc.Message) {
	level, _ := mcp.String(jsonrpc.Get(m.Params, mcp.ParamLevel))
	var target *call
	var targetEx *exchange
	wanting, total := 0, 0
	for _, ex := range ch.inFlight() {
		if ex.method == mcp.MethodListen {
			continue // listens do not log
		}
		if ex.internal {
			if forAClient(ex.method) {
				total++ // the gateway's own request, made for a client (see forAClient)
			}
			continue
		}
		c := ex.owner()
		if c == nil {
			continue // parked: it waits for its client's answers (see onlyExchange)
		}
		total++
		if c.caller.LogLevel != "" {
			wanting++
			target, targetEx = c, ex
		}
	}
	if wanting == 1 {
		if n, more := ch.stillRunning(); n > 0 || more {
			total += n + 1
			wanting = 0 // a call whose client left may be the one logging
		}
	}
	if wanting != 1 || (ch.eraNow() == EraLegacy && total != 1) {
		ch.log.Debug("dropped a child log message: no single call it belongs to", "calls", total, "wanting_logs", wanting)
		return
	}
	if !targetEx.servesTask(m.Params) {
		ch.log.Debug("dropped a child log message: it names a task the call in flight is not about")
		return
	}
	if mcp.LogRank(level) < mcp.LogRank(target.caller.LogLevel) {
		return
	}
	target.box.note(m.Raw, noteLog)
}

// ensureLogLevel makes a legacy child log at least as verbosely as level.
// Its level is child-wide, so the gateway keeps it at the most verbose
// level any client has asked for and filters per call (see routeLog). The
// request is written before the client's, so a child that serves requests
// in order applies it first; the answer is not waited for, so the client
// never waits on it. A failure costs log messages, not calls.
func (ch *child) ensureLogLevel(level string) {
	if ch.eraNow() != EraLegacy || !ch.logs || mcp.LogRank(level) < 0 {
		return
	}
	ch.mu.Lock()
	previous := ch.logLevel
	if previous != "" && mcp.LogRank(level) >= mcp.LogRank(previous) {
		ch.mu.Unlock()
		return
	}
	ch.logLevel = level
	ch.mu.Unlock()
	restore := func() {
		ch.mu.Lock()
		defer ch.mu.Unlock()
		if ch.logLevel == level {
			ch.logLevel = previous
		}
	}
	params := append(append([]byte(`{"level":`), jsonrpc.Quote(level)...), '}')
	c, err := ch.startInternal(context.Background(), mcp.MethodSetLevel, params, ch.b.opts.CancelTimeout)
	if err != nil {
		ch.log.Warn("could not set the child's log level", "level", level, "err", err)
		restore()
		return
	}
	ch.w.bg.spawn(func() {
		raw, err := c.wait()
		var refused []byte
		if err == nil {
			if m, perr := jsonrpc.Parse(raw); perr == nil {
				refused = m.Error
			}
		}
		if err == nil && refused == nil {
			return
		}
		ch.log.Warn("the child did not take logging/setLevel", "level", level, "err", err, "error", head(refused))
		restore()
	})
}
