package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// maxReplies bounds the goroutines answering the child's own requests; a
// child that floods requests gets the excess dropped (and logged) rather
// than growing the gateway without limit.
const maxReplies = 64

// session is one child process from start to exit: its transport, the calls
// pending on it and what its handshake learned.
type session struct {
	b   *Bridge
	t   Transport
	log *slog.Logger

	mu      sync.Mutex
	pending map[int64]*exchange
	ended   error // why the session ended; nil while it runs

	done     chan struct{} // closed when the reader has stopped and every call has ended
	ready    bool          // handshake done; guarded by b.mu
	replies  atomic.Int32
	lastRead atomic.Int64 // when the child last wrote, in Unix nanoseconds (see watch)
	toPark   []*exchange  // calls to park once the child's questions that came together are all in; reader only

	tools     toolCache // the child's x-mcp-header annotations
	toolWatch *Call     // the gateway's own listen for tool list changes (modern child)

	listeners  []*listener    // listens built on a legacy child; guarded by mu
	subscribed map[string]int // a legacy child's resource subscriptions, by listener count; guarded by mu

	// era is set by the handshake and read by the reader too, which runs
	// during the handshake: see eraNow.
	era atomic.Value

	// Set by the handshake, read-only afterwards.
	initResult     []byte // a legacy child's InitializeResult
	discoverResult []byte // a modern child's DiscoverResult
	logs           bool   // a legacy child with the logging capability

	logMu         sync.Mutex // serializes logging/setLevel toward the child
	childLogLevel string     // the level last set on a legacy child; "" for its default
}

func newSession(b *Bridge, t Transport) *session {
	s := &session{
		b:          b,
		t:          t,
		log:        b.log,
		pending:    make(map[int64]*exchange),
		subscribed: map[string]int{},
		done:       make(chan struct{}),
	}
	s.touch()
	return s
}

func (s *session) endErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// pendingCount is how many requests of clients wait for the child; the
// gateway's own (handshake, probes) do not count.
func (s *session) pendingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ex := range s.pending {
		if !ex.internal {
			n++
		}
	}
	return n
}

// register adds an exchange unless the session has ended.
func (s *session) register(ex *exchange) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != nil {
		return s.ended
	}
	s.pending[ex.id] = ex
	return nil
}

// claim removes an exchange from the pending table. Whoever claims an
// exchange is the one who ends it, so every call ends exactly once.
func (s *session) claim(ex *exchange) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending[ex.id] != ex {
		return false
	}
	delete(s.pending, ex.id)
	return true
}

func (s *session) claimID(id int64) *exchange {
	s.mu.Lock()
	defer s.mu.Unlock()
	ex := s.pending[id]
	delete(s.pending, id)
	return ex
}

// inFlight is a snapshot of the pending exchanges. Lock order is ex.mu
// before s.mu (see retire), so code that looks into exchanges works on a
// snapshot rather than under s.mu.
func (s *session) inFlight() []*exchange {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := make([]*exchange, 0, len(s.pending))
	for _, ex := range s.pending {
		all = append(all, ex)
	}
	return all
}

func (s *session) lookup(id int64) *exchange {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending[id]
}

// claimAll empties the pending table and marks the session ended, so no
// exchange can be registered after it.
func (s *session) claimAll(why error) []*exchange {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended == nil {
		s.ended = why
	}
	all := make([]*exchange, 0, len(s.pending))
	for id, ex := range s.pending {
		all = append(all, ex)
		delete(s.pending, id)
	}
	return all
}

// kill ends the session from outside the reader: the calls pending fail at
// once, and the transport is closed, which makes the reader stop. A wedged
// child is killed outright where the transport can (see killer): it would
// not read its closed stdin.
func (s *session) kill(why error) {
	calls := s.claimAll(why)
	why = s.endErr() // an earlier reason stands
	s.failAll(calls, why)
	k, hard := s.t.(killer)
	s.b.spawn(func() {
		if hard && errors.Is(why, errWedged) {
			_ = k.Kill()
			return
		}
		s.t.Close()
	})
}

// readLoop is the only reader of the child. It never blocks on a caller:
// deliveries go to mailboxes, and writes back to the child go through
// goroutines.
func (s *session) readLoop() {
	defer close(s.done)
	for {
		line, err := s.t.ReadMessage()
		s.touch()
		if err != nil {
			var skipped skippedMessage
			if errors.As(err, &skipped) {
				s.oversized(skipped)
				continue
			}
			s.end(err)
			return
		}
		s.dispatchLine(line)
		if br, ok := s.t.(bufferer); !ok || !br.Buffered() {
			s.flushParks()
		}
	}
}

// end fails every pending call at once: their answers can no longer come.
func (s *session) end(readErr error) {
	why := errors.New("the child process exited")
	if !errors.Is(readErr, io.EOF) {
		why = fmt.Errorf("reading from the child failed: %w", readErr)
	}
	calls := s.claimAll(why)
	why = s.endErr() // kill may have recorded a better reason first
	s.failAll(calls, why)
	level := slog.LevelWarn
	var e *jsonrpc.Error
	if errors.As(why, &e) && e.Code == jsonrpc.CodeShutdown {
		level = slog.LevelInfo
	}
	s.log.Log(context.Background(), level, "child session ended", "err", why, "failed_calls", len(calls))
	// Close is idempotent: stopping the child here reaps it and its group.
	s.t.Close()
}

func (s *session) dispatchLine(line []byte) {
	if len(line) > 0 && line[0] == '[' {
		// A 2025-03-26 child may batch; each element is a message of its own.
		spans, err := jsonrpc.Elements(line)
		if err != nil {
			s.log.Warn("child wrote a line that is not JSON; skipped", "err", err, "size", len(line), "head", head(line))
			return
		}
		for _, sp := range spans {
			// Capped at its end, so that nothing edits a neighbour in place.
			s.dispatch(line[sp.Start:sp.End:sp.End])
		}
		return
	}
	s.dispatch(line)
}

func (s *session) dispatch(raw []byte) {
	m, err := jsonrpc.Parse(raw)
	if err != nil {
		s.log.Warn("child wrote a message that is not JSON-RPC; skipped", "err", err, "size", len(raw), "head", head(raw))
		return
	}
	s.log.Debug("from child", "method", m.Method, "id", string(m.ID), "size", len(raw))
	switch m.Kind {
	case jsonrpc.KindResponse:
		s.response(m)
	case jsonrpc.KindNotification:
		s.notification(m)
	case jsonrpc.KindRequest:
		s.childRequest(m)
	}
}

func (s *session) response(m *jsonrpc.Message) {
	id, ok := m.IDInt()
	if !ok {
		s.b.unknown.Add(1)
		s.log.Warn("child answered an id the gateway never sent; dropped", "id", string(m.ID))
		return
	}
	ex := s.claimID(id)
	if ex == nil {
		if id > 0 && id <= s.b.nextID.Load() {
			s.b.late.Add(1)
			s.log.Debug("dropped late response", "id", id)
		} else {
			s.b.unknown.Add(1)
			s.log.Warn("child answered an id the gateway never sent; dropped", "id", id)
		}
		return
	}
	ex.answered(m)
}

// oversized handles a line that was too long to keep: if its start names a
// pending call, that call fails now instead of waiting for its timeout.
func (s *session) oversized(e skippedMessage) {
	size, h := e.Skipped()
	s.log.Warn("child wrote a message over the size limit; skipped", "err", e, "size", size, "head", head(h))
	raw, ok := jsonrpc.PrefixMember(h, "id")
	if !ok {
		return
	}
	m := &jsonrpc.Message{ID: raw}
	id, ok := m.IDInt()
	if !ok {
		return
	}
	if ex := s.claimID(id); ex != nil {
		ex.end(jsonrpc.GatewayError(jsonrpc.CodeTooLarge, "too_large",
			fmt.Sprintf("the child's response (%d bytes) exceeded the gateway's message size limit: %v", size, e)))
	}
}

func (s *session) notification(m *jsonrpc.Message) {
	switch m.Method {
	case "notifications/progress":
		s.progress(m)
	case "notifications/message":
		s.routeLog(m)
	case "notifications/cancelled":
		// A modern child ends a listen this way; a legacy child gives up on a
		// question of its own, which needs nothing.
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &p) == nil && p.RequestID != nil {
			s.endListen(p.RequestID)
		}
	case "notifications/tools/list_changed", "notifications/prompts/list_changed",
		"notifications/resources/list_changed", "notifications/resources/updated":
		if m.Method == "notifications/tools/list_changed" {
			s.tools.invalidate()
		}
		if s.eraNow() == EraLegacy {
			s.fanOut(m)
			return
		}
		s.relayTagged(m)
	default:
		if !s.relayTagged(m) {
			s.log.Debug("child notification", "method", m.Method)
		}
	}
}

// progress routes a progress notification to the call whose token it names
// (the gateway's token is the call's id) and restores the caller's token.
func (s *session) progress(m *jsonrpc.Message) {
	sp, ok, _ := jsonrpc.Lookup(m.Params, "progressToken")
	if !ok {
		s.log.Debug("progress without a token; dropped")
		return
	}
	tok := &jsonrpc.Message{ID: m.Params[sp.Start:sp.End]}
	id, ok := tok.IDInt()
	var c *Call
	if ok {
		if ex := s.lookup(id); ex != nil {
			c = ex.current()
		}
	}
	if c == nil {
		s.log.Debug("progress for no active call; dropped", "token", string(tok.ID))
		return
	}
	c.progress(m, sp)
}

// childRequest answers a request from the child: ping at once, and a
// question for the client (sampling, elicitation, roots) by relaying it to
// the client when the gateway can tell whose it is (see question);
// anything else with an error at once, so the child never waits on the
// gateway.
func (s *session) childRequest(m *jsonrpc.Message) {
	if m.Method == "ping" {
		s.b.spawn(func() { s.toChild(context.Background(), jsonrpc.NewResult(m.ID, []byte("{}")), m.Method) })
		return
	}
	s.question(m)
}

// shutdown cancels every pending call, telling the child about each one that
// reached it, then stops the child.
func (s *session) shutdown(ctx context.Context) {
	calls := s.claimAll(errShutdown())
	for _, ex := range calls {
		ex.end(errShutdown())
		if ex.sentOrWanted("gateway shutting down") {
			s.writeCancel(ctx, ex, "gateway shutting down")
		}
	}
	s.endListeners(errShutdown())
	s.t.Close()
	<-s.done
}

// head is the start of a message for a log line.
func head(b []byte) string {
	const n = 200
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// eraNow is the child's era, once the handshake has found it; "" before.
func (s *session) eraNow() Era {
	e, _ := s.era.Load().(Era)
	return e
}

func (s *session) setEra(e Era) { s.era.Store(e) }

// failAll ends the calls of a session that has ended, and its listens:
// their clients should call, or listen, again.
func (s *session) failAll(calls []*exchange, why error) {
	for _, ex := range calls {
		again := "the call was lost"
		if ex.method == methodListen {
			again = "listen again"
		}
		ex.end(errUnavailable(fmt.Sprintf("%v; %s", why, again)))
	}
	s.endListeners(errUnavailable(fmt.Sprintf("%v; listen again", why)))
}
