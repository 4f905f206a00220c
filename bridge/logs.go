package bridge

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/stdiomcp/gateway/jsonrpc"
)

var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

func logRank(level string) int { return slices.Index(logLevels, level) }

// routeLog delivers a child's log message to the call it belongs to. On
// stdio nothing in the message says which call that is, so the gateway
// delivers it only when it can tell: to the one call in flight that asked
// for logs. A legacy child may log for any call (its level is session-wide),
// so for it that call must also be the only one in flight; otherwise the
// message is dropped rather than shown to a client it may not belong to.
func (s *session) routeLog(m *jsonrpc.Message) {
	var p struct {
		Level string `json:"level"`
	}
	_ = json.Unmarshal(m.Params, &p)
	var target *Call
	wanting, total := 0, 0
	for _, ex := range s.inFlight() {
		c := ex.current()
		if ex.internal || c == nil || ex.method == methodListen {
			continue // parked calls wait for their client; listens do not log
		}
		total++
		if c.caller.LogLevel != "" {
			wanting++
			target = c
		}
	}
	if wanting != 1 || (s.eraNow() == EraLegacy && total != 1) {
		s.log.Debug("dropped a child log message: no single call it belongs to", "calls", total, "wanting_logs", wanting)
		return
	}
	if logRank(p.Level) < logRank(target.caller.LogLevel) {
		return
	}
	target.box.note(m.Raw, noteLog)
}

// ensureLogLevel makes a legacy child log at least as verbosely as level.
// Its level is session-wide, so the gateway keeps it at the most verbose
// level any client has asked for and filters per call (see routeLog). The
// request is written before the caller's, so a child that serves requests
// in order applies it first; the answer is not waited for, so the caller
// never waits on it. A failure costs log messages, not calls.
func (s *session) ensureLogLevel(level string) {
	if s.eraNow() != EraLegacy || !s.logs || logRank(level) < 0 {
		return
	}
	s.logMu.Lock()
	defer s.logMu.Unlock()
	if s.childLogLevel != "" && logRank(level) >= logRank(s.childLogLevel) {
		return
	}
	params, _ := json.Marshal(map[string]string{"level": level})
	ctx, cancel := context.WithTimeout(context.Background(), s.b.opts.CancelTimeout)
	c := s.internalCall("logging/setLevel")
	c.mu.Lock()
	c.stopCtx = context.AfterFunc(ctx, func() { c.abort(ctx.Err(), "") })
	c.mu.Unlock()
	if err := s.start(ctx, c, c.method, params, true); err != nil {
		cancel()
		s.log.Warn("could not set the child's log level", "level", level, "err", err)
		return
	}
	previous := s.childLogLevel
	s.childLogLevel = level
	s.b.spawn(func() {
		defer cancel()
		raw, err := c.Wait()
		var refused []byte
		if err == nil {
			if m, perr := jsonrpc.Parse(raw); perr == nil {
				refused = m.Error
			}
		}
		if err == nil && refused == nil {
			return
		}
		s.log.Warn("the child did not take logging/setLevel", "level", level, "err", err, "error", head(refused))
		s.logMu.Lock()
		defer s.logMu.Unlock()
		if s.childLogLevel == level {
			s.childLogLevel = previous
		}
	})
}
