package httpapi

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// sessions are the gateway's own sessions with legacy (2025) clients. The
// child is shared and stateless toward the gateway; a session holds what
// the legacy protocol keeps per connection: the client's capabilities and
// identity (so requests to a modern child can carry them), its log level,
// and its calls in flight (so its notifications/cancelled can name them).
type sessions struct {
	mu   sync.Mutex
	byID map[string]*session
	max  int
	idle time.Duration
}

type session struct {
	id   string
	caps json.RawMessage
	info json.RawMessage

	mu       sync.Mutex
	logLevel string
	lastSeen time.Time
	calls    map[string]bridge.Call // in flight, by the client's raw request id
	ended    bool
}

func newSessions(max int, idle time.Duration) *sessions {
	return &sessions{byID: map[string]*session{}, max: max, idle: idle}
}

// create starts a session for a legacy client's initialize. When the table
// is full, the session idle longest gives way, if it has no call in flight.
func (ss *sessions) create(caps, info []byte) (*session, *rpcFailure) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, refuse(http.StatusInternalServerError, jsonrpc.CodeInternalError, "cannot mint a session id: "+err.Error(), nil)
	}
	s := &session{id: hex.EncodeToString(raw[:]), caps: bytes.Clone(caps), info: bytes.Clone(info), lastSeen: time.Now(), calls: map[string]bridge.Call{}}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.sweepLocked()
	if len(ss.byID) >= ss.max {
		var oldest *session
		for _, o := range ss.byID {
			if o.busy() {
				continue
			}
			if oldest == nil || o.seen().Before(oldest.seen()) {
				oldest = o
			}
		}
		if oldest == nil {
			return nil, &rpcFailure{http.StatusServiceUnavailable,
				jsonrpc.GatewayError(jsonrpc.CodeOverloaded, "overloaded", "too many sessions, all with calls in flight; try again later")}
		}
		delete(ss.byID, oldest.id)
		oldest.end("session evicted")
	}
	ss.byID[s.id] = s
	return s, nil
}

// get returns the live session with that id, or nil.
func (ss *sessions) get(id string) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.byID[id]
	if s == nil {
		return nil
	}
	if ss.expired(s) {
		delete(ss.byID, id)
		s.end("session expired")
		return nil
	}
	s.touch()
	return s
}

// remove ends a session; its calls in flight are cancelled.
func (ss *sessions) remove(id string) bool {
	ss.mu.Lock()
	s := ss.byID[id]
	delete(ss.byID, id)
	ss.mu.Unlock()
	if s == nil {
		return false
	}
	s.end("session ended by the client")
	return true
}

func (ss *sessions) sweepLocked() {
	for id, s := range ss.byID {
		if ss.expired(s) {
			delete(ss.byID, id)
			s.end("session expired")
		}
	}
}

func (ss *sessions) expired(s *session) bool {
	return !s.busy() && time.Since(s.seen()) > ss.idle
}

func (s *session) touch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastSeen = time.Now()
}

func (s *session) seen() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSeen
}

func (s *session) busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls) > 0
}

// end cancels the session's calls in flight.
func (s *session) end(reason string) {
	s.mu.Lock()
	calls := s.calls
	s.calls = map[string]bridge.Call{}
	s.ended = true
	s.mu.Unlock()
	for _, c := range calls {
		c.Cancel(reason)
	}
}

func (s *session) caller(r *http.Request) bridge.Caller {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bridge.Caller{Capabilities: s.caps, ClientInfo: s.info, LogLevel: s.logLevel,
		CanStream: accepts(r.Header.Get("Accept"), "text/event-stream")}
}

func (s *session) setLogLevel(level string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logLevel = level
}

// track records a call in flight under the client's id, for its
// notifications/cancelled; the returned func forgets it.
func (s *session) track(clientID []byte, c bridge.Call) func() {
	key := string(clientID)
	s.mu.Lock()
	ended := s.ended
	if !ended {
		s.calls[key] = c
	}
	s.mu.Unlock()
	if ended {
		c.Cancel("session ended")
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.calls[key] == c {
			delete(s.calls, key)
		}
		s.lastSeen = time.Now()
	}
}

// cancel cancels the call the client's notifications/cancelled names; an
// id the session does not know (finished, or never sent) is ignored.
func (s *session) cancel(n *mcp.Request) {
	id, ok := n.Param(mcp.ParamRequestID)
	if !ok {
		return
	}
	reason, _ := n.String(mcp.ParamReason)
	s.mu.Lock()
	c := s.calls[string(id)]
	s.mu.Unlock()
	if c != nil {
		c.Cancel(reason)
	}
}
