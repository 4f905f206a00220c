// Package clientlimit holds the per-client limits of an HTTP gateway: a
// token bucket of calls per client, a cap on the requests one client has
// open at once, and the address a client is known by behind trusted
// proxies (Addr).
//
// Memory is bounded: at most Options.MaxClients clients are tracked. A
// client with nothing open whose bucket has refilled is worth nothing to
// remember (a new entry would be the same), so such entries are dropped
// lazily: each call drops up to two of them, and Clients drops them all.
// With no rate limit, an entry goes as soon as its last request ends.
// When the table is full, the client idle longest with nothing open is
// forgotten early, and so gets a full bucket when it comes back; a client
// with requests open is never forgotten, and a new client finds no room
// while every tracked one is busy.
//
// Locking: one mutex, Limiter.mu, guards the table, the idle list and
// every entry, including the rate.Limiter inside it (whose own lock is
// then never contended). Nothing else is locked.
package clientlimit

import (
	"math"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultMaxClients is the number of clients tracked when
// Options.MaxClients is zero: with an entry of a few hundred bytes, tens of
// megabytes at most.
const DefaultMaxClients = 100000

// sweepPerCall is how many refilled entries a call drops at most: more
// than the one entry a call can add, so the table drains under any
// traffic, and few enough that no single call pays for a long quiet spell.
const sweepPerCall = 2

// Options are the limits. Zero or less means the default or "no limit",
// as each field says.
type Options struct {
	Rate       float64          // calls per second per client; 0: no rate limit
	Burst      int              // bucket size; 0: Rate rounded up, at least 1
	MaxStreams int              // requests one client may have open at once; 0: no limit
	MaxClients int              // clients tracked at once; 0: DefaultMaxClients
	Now        func() time.Time // the clock; nil: time.Now
}

// Limiter applies Options per client key (an address or a caller's name).
// It is safe for concurrent use.
type Limiter struct {
	rate       rate.Limit    // 0: no rate limit
	burst      int           //
	fill       time.Duration // an empty bucket's time to refill
	maxStreams int           // 0: no limit
	maxClients int
	now        func() time.Time

	mu      sync.Mutex
	clients map[string]*client
	idle    idleList // the entries with nothing open, idle longest first
}

// client is one tracked key.
type client struct {
	key    string
	bucket *rate.Limiter // nil without a rate limit
	credit int           // tokens given back (see Refund), spent before the bucket's
	open   int
	// idleSince is when the entry last took a call or ended its last open
	// request; while open is 0 the entry is on the idle list, whose order
	// is that of idleSince.
	idleSince  time.Time
	prev, next *client
}

// New returns a Limiter with the limits o gives.
func New(o Options) *Limiter {
	l := &Limiter{maxStreams: max(o.MaxStreams, 0), maxClients: o.MaxClients, now: o.Now}
	if l.maxClients <= 0 {
		l.maxClients = DefaultMaxClients
	}
	if l.now == nil {
		l.now = time.Now
	}
	// An infinite or NaN rate limits nothing.
	if o.Rate > 0 && !math.IsInf(o.Rate, 1) {
		l.rate = rate.Limit(o.Rate)
		l.burst = o.Burst
		if l.burst <= 0 {
			l.burst = int(min(math.Ceil(o.Rate), math.MaxInt32))
		}
		l.fill = seconds(float64(l.burst) / o.Rate)
	}
	l.clients = make(map[string]*client)
	return l
}

// Allow takes one call from key's bucket. When the bucket is empty it
// returns false and how long until a token is there (for Retry-After).
// When the table is full of busy clients and key is not among them, it
// returns false and a second.
func (l *Limiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	if l.rate == 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now, sweepPerCall)
	c := l.lookup(key, now)
	if c == nil {
		return false, time.Second
	}
	if c.open == 0 {
		l.idle.remove(c)
		c.idleSince = now
		l.idle.pushBack(c)
	}
	if l.takeLocked(c, now) {
		return true, 0
	}
	return false, seconds((1 - c.bucket.TokensAt(now)) / float64(l.rate))
}

// Refund gives back a token Allow took for key, for a request that turned
// out to owe none (a message whose kind only its body tells): it is spent
// before the bucket's.
func (l *Limiter) Refund(key string) {
	if l.rate == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.clients[key]; c != nil && c.credit < l.burst {
		c.credit++
	}
}

// takeLocked takes a token of c's: one given back first, unless the
// bucket has filled up since (it holds no more than its size).
func (l *Limiter) takeLocked(c *client, now time.Time) bool {
	if c.credit > 0 {
		if c.bucket.TokensAt(now) < float64(l.burst) {
			c.credit--
			return true
		}
		c.credit = 0
	}
	return c.bucket.AllowN(now, 1)
}

// Open counts an open request for key. release ends it and must be called
// when the request ends; calls after the first do nothing. ok is false
// (and release does nothing) when key has MaxStreams requests open
// already, or when the table is full of busy clients and key is not among
// them.
func (l *Limiter) Open(key string) (release func(), ok bool) {
	if l.rate == 0 && l.maxStreams == 0 {
		return func() {}, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now, sweepPerCall)
	c := l.lookup(key, now)
	if c == nil || (l.maxStreams > 0 && c.open >= l.maxStreams) {
		return func() {}, false
	}
	if c.open == 0 {
		l.idle.remove(c)
	}
	c.open++
	released := false // guarded by l.mu
	return func() { l.release(c, &released) }, true
}

func (l *Limiter) release(c *client, released *bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if *released {
		return
	}
	*released = true
	c.open--
	if c.open > 0 {
		return
	}
	if c.bucket == nil {
		delete(l.clients, c.key) // nothing left to remember
		return
	}
	c.idleSince = l.now()
	l.idle.pushBack(c)
}

// Clients is the number of clients tracked now, after dropping those with
// nothing to remember.
func (l *Limiter) Clients() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(l.now(), math.MaxInt)
	return len(l.clients)
}

// lookup returns key's entry, made (idle, with a full bucket) when there
// is none; nil when the table is full and every entry has requests open.
func (l *Limiter) lookup(key string, now time.Time) *client {
	if c, ok := l.clients[key]; ok {
		return c
	}
	if len(l.clients) >= l.maxClients {
		oldest := l.idle.front()
		if oldest == nil {
			return nil
		}
		l.drop(oldest)
	}
	c := &client{key: key, idleSince: now}
	if l.rate > 0 {
		c.bucket = rate.NewLimiter(l.rate, l.burst)
	}
	l.clients[key] = c
	l.idle.pushBack(c)
	return c
}

// sweep drops up to n idle entries whose buckets have refilled. The idle
// list is in order of idleSince and every bucket refills in l.fill, so
// they are found at its front.
func (l *Limiter) sweep(now time.Time, n int) {
	for ; n > 0; n-- {
		c := l.idle.front()
		if c == nil || now.Sub(c.idleSince) < l.fill {
			return
		}
		l.drop(c)
	}
}

func (l *Limiter) drop(c *client) {
	l.idle.remove(c)
	delete(l.clients, c.key)
}

// RetryAfterSeconds is d as the value of a Retry-After header: whole
// seconds, rounded up, at least 1 (a client told 0 would retry at once).
func RetryAfterSeconds(d time.Duration) string {
	s := d / time.Second
	if d%time.Second > 0 {
		s++
	}
	return strconv.FormatInt(max(int64(s), 1), 10)
}

// seconds is s seconds as a Duration, to the nearest nanosecond (the
// float arithmetic of the bucket is no more exact than that; Retry-After
// rounds up to whole seconds), capped at the longest Duration.
func seconds(s float64) time.Duration {
	ns := math.Round(s * float64(time.Second))
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// idleList is a doubly linked list threaded through the entries, so that
// moving one costs no allocation.
type idleList struct{ head, tail *client }

func (q *idleList) front() *client { return q.head }

func (q *idleList) pushBack(c *client) {
	c.prev, c.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = c
	} else {
		q.head = c
	}
	q.tail = c
}

func (q *idleList) remove(c *client) {
	if c.prev != nil {
		c.prev.next = c.next
	} else if q.head == c {
		q.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else if q.tail == c {
		q.tail = c.prev
	}
	c.prev, c.next = nil, nil
}
