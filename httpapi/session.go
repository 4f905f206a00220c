package httpapi

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// sessions are the gateway's own sessions with legacy (2025) clients. The
// child is shared and stateless toward the gateway; a session holds what
// the legacy protocol keeps per connection: the client's capabilities and
// identity (so requests to a modern child can carry them), its log level
// and its revision. All of that is in the session id itself (see
// sessionid.go), so a session lives on no replica in particular.
//
// What cannot travel in the id is local to the replica that holds it, in
// a record: the session's calls in flight here (so its
// notifications/cancelled can name them) and a log level set here. A
// record without a call in flight may make room for another. The end of a
// session that its client ended here with DELETE is kept apart, until the
// id expires, and never makes room: an ended session must stay ended. Both
// are bounded by max: the cap is on the sessions a replica holds something
// for, which is what costs memory.
type sessions struct {
	key      []byte
	accepted []byte // another key whose ids open too (a secret being changed); nil: none
	ttl      time.Duration
	max      int

	warned atomic.Int64 // when a foreign id was last logged at warn, Unix seconds

	mu      sync.Mutex
	records map[string]*record   // by nonce
	ended   map[string]time.Time // sessions ended here by DELETE, by nonce, with their expiry
	swept   time.Time            // when what expired was last forgotten (see sweepLocked)
}

// sweepEvery is how often what has expired is forgotten while records are
// made; a scrape of the metrics forgets it too.
const sweepEvery = time.Minute

// record is what one replica holds for a session. Guarded by sessions.mu.
type record struct {
	calls    map[string]bridge.Call // in flight here, by the client's raw request id
	holds    int                    // calls being set up here
	logLevel string                 // set here by logging/setLevel, for an id that carries none
	expires  time.Time              // the session's expiry: the record is useless after it
	used     time.Time
}

func (rec *record) busy() bool { return len(rec.calls) > 0 || rec.holds > 0 }

// session is one request's view of its session: the id's claims, and this
// replica's record of it, if any.
type session struct {
	ss     *sessions
	claims claims
}

func newSessions(key []byte, ttl time.Duration, max int) *sessions {
	return &sessions{key: key, ttl: ttl, max: max, records: map[string]*record{}, ended: map[string]time.Time{}}
}

// create starts a session for a legacy client's initialize: a fresh id
// that holds it. Nothing is kept.
func (ss *sessions) create(revision, owner string, caps, info []byte) (string, *rpcFailure) {
	nonce, err := newNonce()
	if err != nil {
		return "", refuse(http.StatusInternalServerError, jsonrpc.CodeInternalError, err.Error(), nil)
	}
	// The id counts expiry in whole seconds: rounded up, so that a
	// session lasts at least its lifetime (rounded down, a session of
	// GATEWAY_SESSION_TTL=1s could end at once).
	expires := time.Now().Add(ss.ttl)
	if whole := expires.Truncate(time.Second); whole.Before(expires) {
		expires = whole.Add(time.Second)
	}
	id, err := seal(ss.key, claims{nonce: nonce, revision: revision, expires: expires, owner: owner, caps: caps, info: info})
	if errors.Is(err, errSessionTooBig) {
		return "", refuse(http.StatusBadRequest, jsonrpc.CodeInvalidParams, err.Error(), nil)
	}
	return id, nil
}

// open returns the session an id names, or why it cannot be served:
// another key signed it, it has expired, or its client ended it here.
func (ss *sessions) open(id string) (*session, error) {
	c, err := open(ss.key, id)
	if errors.Is(err, errForeignSession) && ss.accepted != nil {
		c, err = open(ss.accepted, id)
	}
	if err != nil {
		return nil, err
	}
	if !time.Now().Before(c.expires) {
		return nil, errors.New("the session expired at " + c.expires.UTC().Format(time.RFC3339))
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if _, ended := ss.ended[c.nonce]; ended {
		return nil, errSessionEnded
	}
	return &session{ss: ss, claims: c}, nil
}

var errSessionEnded = errors.New("the session was ended by its client")

// errOtherCaller is a session id used by another caller than the one that
// made it. It reads as unknown on purpose.
var errOtherCaller = errors.New("no session with this id belongs to this caller")

// recordLocked returns the session's record, making one if need be. A
// full table makes room by forgetting the record used longest ago that
// has no call in flight; when every record has one, there is no room.
func (ss *sessions) recordLocked(c claims) *record {
	if rec := ss.records[c.nonce]; rec != nil {
		return rec
	}
	now := time.Now()
	if len(ss.records) >= ss.max || now.Sub(ss.swept) >= sweepEvery {
		ss.sweepLocked(now)
	}
	if len(ss.records) >= ss.max {
		var oldest string
		for nonce, rec := range ss.records {
			if !rec.busy() && (oldest == "" || rec.used.Before(ss.records[oldest].used)) {
				oldest = nonce
			}
		}
		if oldest == "" {
			return nil
		}
		delete(ss.records, oldest)
	}
	rec := &record{calls: map[string]bridge.Call{}, expires: c.expires, used: now}
	ss.records[c.nonce] = rec
	return rec
}

// sweepLocked forgets what has expired: the records with no call in
// flight (a log level set on one is of no use, the id being refused) and
// the ends kept for ids that are refused anyway.
func (ss *sessions) sweepLocked(now time.Time) {
	ss.swept = now
	for nonce, rec := range ss.records {
		if !now.Before(rec.expires) && !rec.busy() {
			delete(ss.records, nonce)
		}
	}
	for nonce, exp := range ss.ended {
		if !now.Before(exp) {
			delete(ss.ended, nonce)
		}
	}
}

// dropLocked forgets a record that holds nothing any more.
func (ss *sessions) dropLocked(nonce string, rec *record) {
	if !rec.busy() && rec.logLevel == "" {
		delete(ss.records, nonce)
	}
}

// shouldWarn reports whether a foreign session id seen now is logged at
// warn: at most once a minute.
func (ss *sessions) shouldWarn(now time.Time) bool {
	last := ss.warned.Load()
	return now.Unix()-last >= 60 && ss.warned.CompareAndSwap(last, now.Unix())
}

// live is the number of sessions this replica holds a record for.
func (ss *sessions) live() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.sweepLocked(time.Now())
	return len(ss.records)
}

var errTooManySessions = &rpcFailure{http.StatusServiceUnavailable, jsonrpc.GatewayError(jsonrpc.CodeOverloaded, "overloaded",
	"too many sessions with calls in flight on this gateway; try again later")}

// end ends a session on this replica: its calls in flight here are
// cancelled, and this replica refuses its id from now on. Other replicas
// cannot be told (they share a key, not a store): there the id stays
// valid until it expires, which gives its holder nothing a new initialize
// would not.
func (ss *sessions) end(id, owner string) error {
	s, err := ss.open(id)
	if err != nil {
		return err
	}
	if s.claims.owner != owner {
		return errOtherCaller
	}
	ss.mu.Lock()
	if now := time.Now(); len(ss.ended) >= ss.max || now.Sub(ss.swept) >= sweepEvery {
		ss.sweepLocked(now)
	}
	if len(ss.ended) >= ss.max {
		var first time.Time
		for _, expires := range ss.ended {
			if first.IsZero() || expires.Before(first) {
				first = expires
			}
		}
		ss.mu.Unlock()
		return &endsFull{until: first}
	}
	ss.ended[s.claims.nonce] = s.claims.expires
	var calls map[string]bridge.Call
	if rec := ss.records[s.claims.nonce]; rec != nil {
		calls, rec.calls = rec.calls, map[string]bridge.Call{}
		rec.logLevel = ""
		ss.dropLocked(s.claims.nonce, rec)
	}
	ss.mu.Unlock()
	for _, c := range calls {
		c.Cancel("session ended by the client")
	}
	return nil
}

var errTooManyEnded = &rpcFailure{http.StatusServiceUnavailable, jsonrpc.GatewayError(jsonrpc.CodeOverloaded, "overloaded",
	"too many sessions ended on this gateway that have not expired yet; try again later")}

// endsFull is why a session could not be ended: the ended sessions this
// gateway keeps are as many as it keeps, until the first expires.
type endsFull struct{ until time.Time }

func (e *endsFull) Error() string { return errTooManyEnded.err.Message }

// retryAfter is Retry-After for it: whole seconds until a place is free.
func (e *endsFull) retryAfter(now time.Time) string {
	return strconv.FormatInt(max(1, int64(math.Ceil(e.until.Sub(now).Seconds()))), 10)
}

func (s *session) caller(r *http.Request) bridge.Caller {
	// An id that carries a level comes from a client that takes the id
	// each setLevel answers with: it holds the client's latest level. An
	// id without one takes the level set on this replica, if any.
	level := s.claims.logLevel
	if level == "" {
		s.ss.mu.Lock()
		if rec := s.ss.records[s.claims.nonce]; rec != nil {
			level = rec.logLevel
		}
		s.ss.mu.Unlock()
	}
	return bridge.Caller{Capabilities: s.claims.caps, ClientInfo: s.claims.info, LogLevel: level,
		CanStream: accepts(r.Header.Get("Accept"), "text/event-stream")}
}

// setLogLevel keeps the client's level on this replica and returns a new
// id that carries it, for clients that take a new id (most keep the one
// initialize gave them; their level holds on this replica only), or ""
// when the level does not fit in one.
func (s *session) setLogLevel(level string) (string, *rpcFailure) {
	s.ss.mu.Lock()
	rec := s.ss.recordLocked(s.claims)
	if rec != nil {
		rec.logLevel = level
		rec.used = time.Now()
	}
	s.ss.mu.Unlock()
	if rec == nil {
		return "", errTooManySessions
	}
	c := s.claims
	c.logLevel = level
	id, err := seal(s.ss.key, c)
	if err != nil {
		return "", nil // no room for the level in an id: it holds here only
	}
	return id, nil
}

// hold makes room for a call of the session before it starts, so that a
// full table refuses it before it reaches the child. The tracker it
// returns records the call and forgets it.
func (s *session) hold() (*tracker, *rpcFailure) {
	s.ss.mu.Lock()
	defer s.ss.mu.Unlock()
	if _, ended := s.ss.ended[s.claims.nonce]; ended {
		return nil, &rpcFailure{http.StatusNotFound, jsonrpc.GatewayError(jsonrpc.CodeInvalidRequest, "session_not_found",
			"unknown session: "+errSessionEnded.Error()+"; send initialize again")}
	}
	rec := s.ss.recordLocked(s.claims)
	if rec == nil {
		return nil, errTooManySessions
	}
	rec.holds++
	rec.used = time.Now()
	return &tracker{s: s, rec: rec}, nil
}

type tracker struct {
	s   *session
	rec *record
	key string
	c   bridge.Call
}

// track records the call under the client's id, for its
// notifications/cancelled. A call of a session ended meanwhile is
// cancelled.
func (t *tracker) track(clientID []byte, c bridge.Call) {
	ss := t.s.ss
	ss.mu.Lock()
	_, ended := ss.ended[t.s.claims.nonce]
	if !ended {
		t.key, t.c = string(clientID), c
		t.rec.calls[t.key] = c
	}
	ss.mu.Unlock()
	if ended {
		c.Cancel("session ended by the client")
	}
}

// release forgets the call; a record left holding nothing goes.
func (t *tracker) release() {
	ss := t.s.ss
	ss.mu.Lock()
	defer ss.mu.Unlock()
	t.rec.holds--
	if t.c != nil && t.rec.calls[t.key] == t.c {
		delete(t.rec.calls, t.key)
	}
	t.rec.used = time.Now()
	if ss.records[t.s.claims.nonce] == t.rec {
		ss.dropLocked(t.s.claims.nonce, t.rec)
	}
}

// cancel cancels the call the client's notifications/cancelled names. An
// id this replica does not run (finished, never sent, or running on
// another replica) is ignored.
func (s *session) cancel(n *mcp.Request) {
	id, ok := n.Param(mcp.ParamRequestID)
	if !ok {
		return
	}
	reason, _ := n.String(mcp.ParamReason)
	s.ss.mu.Lock()
	var c bridge.Call
	if rec := s.ss.records[s.claims.nonce]; rec != nil {
		c = rec.calls[string(id)]
	}
	s.ss.mu.Unlock()
	if c != nil {
		c.Cancel(reason)
	}
}
