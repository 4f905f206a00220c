package clientlimit

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a hand-moved clock, so that buckets refill without waiting.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// step is one call in a scenario: Allow(key) at the clock's time after
// advancing it by wait, with the answer wanted.
type step struct {
	wait  time.Duration
	key   string
	ok    bool
	retry time.Duration // wanted when !ok
}

func runSteps(t *testing.T, l *Limiter, c *clock, steps []step) {
	t.Helper()
	for i, s := range steps {
		c.Advance(s.wait)
		ok, retry := l.Allow(s.key)
		if ok != s.ok || (!ok && retry != s.retry) || (ok && retry != 0) {
			t.Fatalf("step %d: Allow(%q) after %v = %v, %v; want %v, %v", i, s.key, s.wait, ok, retry, s.ok, s.retry)
		}
	}
}

func TestAllowRefillAndBurst(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		steps []step
	}{
		{"refill at the rate", Options{Rate: 2}, []step{
			// Burst defaults to the rate rounded up: 2.
			{0, "a", true, 0}, {0, "a", true, 0},
			{0, "a", false, 500 * time.Millisecond},
			{499 * time.Millisecond, "a", false, time.Millisecond},
			{time.Millisecond, "a", true, 0},
			{0, "a", false, 500 * time.Millisecond},
		}},
		{"burst", Options{Rate: 1, Burst: 3}, []step{
			{0, "a", true, 0}, {0, "a", true, 0}, {0, "a", true, 0},
			{0, "a", false, time.Second},
			// A long pause refills the bucket to its size, no more.
			{time.Hour, "a", true, 0}, {0, "a", true, 0}, {0, "a", true, 0},
			{0, "a", false, time.Second},
		}},
		{"fractional rate: burst 1", Options{Rate: 0.5}, []step{
			{0, "a", true, 0},
			{0, "a", false, 2 * time.Second},
			{1500 * time.Millisecond, "a", false, 500 * time.Millisecond},
			{500 * time.Millisecond, "a", true, 0},
		}},
		{"burst rounds the rate up", Options{Rate: 2.5}, []step{
			{0, "a", true, 0}, {0, "a", true, 0}, {0, "a", true, 0},
			{0, "a", false, 400 * time.Millisecond},
		}},
		{"clients have buckets of their own", Options{Rate: 1}, []step{
			{0, "a", true, 0},
			{0, "a", false, time.Second},
			{0, "b", true, 0},
			{0, "b", false, time.Second},
		}},
		{"no rate limit", Options{}, []step{
			{0, "a", true, 0}, {0, "a", true, 0}, {0, "a", true, 0}, {0, "a", true, 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			tt.opts.Now = c.Now
			runSteps(t, New(tt.opts), c, tt.steps)
		})
	}
}

// A token given back is there again, later too; one refused is not
// taken; one given back into a bucket that filled up since adds nothing
// past its size.
func TestRefund(t *testing.T) {
	c := newClock()
	l := New(Options{Rate: 1, Burst: 2, Now: c.Now})
	for range 2 {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatal("a token of a full bucket was refused")
		}
		c.Advance(100 * time.Millisecond)
		l.Refund("a")
	}
	for i := range 2 {
		if ok, retry := l.Allow("a"); !ok {
			t.Fatalf("token %d after refunds: refused (retry after %v), want the whole bucket", i, retry)
		}
	}
	if ok, retry := l.Allow("a"); ok || retry != 800*time.Millisecond {
		t.Fatalf("Allow of an empty bucket = %v, %v; want refused, 800ms (0.2 s refilled)", ok, retry)
	}
	c.Advance(time.Second)
	if ok, _ := l.Allow("a"); !ok {
		t.Fatal("a refused Take took a token")
	}
	c.Advance(time.Hour)
	l.Allow("a")
	c.Advance(time.Hour)
	l.Refund("a")
	for i := range 3 {
		if ok, _ := l.Allow("a"); ok != (i < 2) {
			t.Fatalf("token %d of a full bucket given one back: %v", i, ok)
		}
	}
	New(Options{}).Refund("a") // no rate limit: nothing to give back to
}

func TestRetryAfterSeconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "1"},
		{0, "1"},
		{time.Nanosecond, "1"},
		{time.Second, "1"},
		{time.Second + time.Nanosecond, "2"},
		{1500 * time.Millisecond, "2"},
		{2 * time.Second, "2"},
		{time.Hour, "3600"},
		{1<<63 - 1, "9223372037"},
	}
	for _, tt := range tests {
		if got := RetryAfterSeconds(tt.d); got != tt.want {
			t.Errorf("RetryAfterSeconds(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestStreams(t *testing.T) {
	l := New(Options{MaxStreams: 2})
	r1, ok1 := l.Open("a")
	r2, ok2 := l.Open("a")
	if !ok1 || !ok2 {
		t.Fatalf("first two Open(a) = %v, %v; want true, true", ok1, ok2)
	}
	if r, ok := l.Open("a"); ok {
		r()
		t.Fatal("third Open(a) = true, want false: MaxStreams is 2")
	}
	rb, ok := l.Open("b")
	if !ok {
		t.Fatal("Open(b) = false, want true: a's streams are a's")
	}
	rb()

	r1()
	r1() // a second release must not free a second slot
	r3, ok := l.Open("a")
	if !ok {
		t.Fatal("Open(a) after a release = false, want true")
	}
	if r, ok := l.Open("a"); ok {
		r()
		t.Fatal("Open(a) = true after a double release, want false")
	}
	r2()
	r3()
	if n := l.Clients(); n != 0 {
		t.Errorf("Clients() = %d after every release with no rate limit, want 0", n)
	}
}

func TestNoLimitsTracksNothing(t *testing.T) {
	l := New(Options{})
	for i := range 10 {
		key := fmt.Sprint(i)
		if ok, _ := l.Allow(key); !ok {
			t.Fatalf("Allow(%s) = false with no limits", key)
		}
		if _, ok := l.Open(key); !ok {
			t.Fatalf("Open(%s) = false with no limits", key)
		}
	}
	if n := l.Clients(); n != 0 {
		t.Errorf("Clients() = %d with no limits, want 0", n)
	}
}

// A client whose bucket has refilled and that has nothing open is
// forgotten: remembering it would change nothing.
func TestIdleEntriesDropped(t *testing.T) {
	c := newClock()
	l := New(Options{Rate: 1, Burst: 2, Now: c.Now})
	l.Allow("a")
	c.Advance(time.Second)
	l.Allow("b")
	if n := l.Clients(); n != 2 {
		t.Fatalf("Clients() = %d, want 2", n)
	}
	c.Advance(time.Second) // a's bucket is full again (2 tokens at 1/s), b's not yet
	if n := l.Clients(); n != 1 {
		t.Fatalf("Clients() = %d once a's bucket refilled, want 1", n)
	}
	release, _ := l.Open("b")
	c.Advance(time.Hour)
	if n := l.Clients(); n != 1 {
		t.Fatalf("Clients() = %d with b's request open, want 1", n)
	}
	release()
	c.Advance(2*time.Second - time.Nanosecond)
	if n := l.Clients(); n != 1 {
		t.Fatalf("Clients() = %d just after b's release, want 1", n)
	}
	c.Advance(time.Nanosecond)
	if n := l.Clients(); n != 0 {
		t.Fatalf("Clients() = %d once b is idle with a full bucket, want 0", n)
	}

	// The hot path drops refilled entries too, without Clients' help.
	for i := range 100 {
		l.Allow(fmt.Sprint(i))
		c.Advance(time.Second)
	}
	l.mu.Lock()
	n := len(l.clients)
	l.mu.Unlock()
	if n > 3 {
		t.Errorf("%d entries tracked after 100 clients called one a second, want at most 3", n)
	}
}

func TestEvictionBound(t *testing.T) {
	c := newClock()
	l := New(Options{Rate: 1, MaxClients: 2, Now: c.Now})
	runSteps(t, l, c, []step{
		{0, "a", true, 0},
		{time.Millisecond, "b", true, 0},
		{time.Millisecond, "a", false, 998 * time.Millisecond}, // a is now the newer
		{time.Millisecond, "c", true, 0},                       // the table is full: b, idle longest, goes
		{0, "a", false, 997 * time.Millisecond},                // a was kept
		{0, "b", true, 0},                                      // b is new again; c goes
		{0, "a", false, 997 * time.Millisecond},
	})
	if n := l.Clients(); n != 2 {
		t.Errorf("Clients() = %d, want 2", n)
	}

	// Busy clients are never evicted; with all busy, a new one is refused.
	ra, _ := l.Open("a")
	rb, _ := l.Open("b")
	if ok, retry := l.Allow("c"); ok || retry != time.Second {
		t.Fatalf("Allow(c) with a full table of busy clients = %v, %v; want false, 1s", ok, retry)
	}
	if r, ok := l.Open("c"); ok {
		r()
		t.Fatal("Open(c) with a full table of busy clients = true, want false")
	}
	if ok, _ := l.Allow("a"); ok {
		t.Fatal("Allow(a) = true: a's empty bucket was forgotten")
	}
	ra()
	if ok, _ := l.Allow("c"); !ok {
		t.Fatal("Allow(c) = false once a was idle, want true")
	}
	if ok, _ := l.Allow("b"); ok {
		t.Fatal("Allow(b) = true: busy b was evicted instead of idle a")
	}
	rb()
}

// Many clients at once, more than the table holds: the bound holds at
// every moment, no client ever has more than MaxStreams open, and the
// counts return to nothing.
func TestConcurrent(t *testing.T) {
	const (
		workers    = 8
		calls      = 2000
		keys       = 50
		maxClients = 20
		maxStreams = 3
	)
	c := newClock()
	l := New(Options{Rate: 1000, MaxStreams: maxStreams, MaxClients: maxClients, Now: c.Now})
	var open [keys]atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				k := (w*7 + i*13) % keys
				key := fmt.Sprint("client-", k)
				l.Allow(key)
				release, ok := l.Open(key)
				if ok {
					if n := open[k].Add(1); n > maxStreams {
						errs <- fmt.Sprintf("%s has %d open, want at most %d", key, n, maxStreams)
						return
					}
				}
				if n := l.Clients(); n > maxClients {
					errs <- fmt.Sprintf("Clients() = %d, want at most %d", n, maxClients)
					return
				}
				if ok {
					open[k].Add(-1)
				}
				release()
				if i%100 == 0 {
					c.Advance(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	c.Advance(time.Second) // every bucket refills
	if n := l.Clients(); n != 0 {
		t.Errorf("Clients() = %d after all ended and refilled, want 0", n)
	}
}

// Of many goroutines opening at once for one client, exactly MaxStreams
// get in.
func TestConcurrentStreamsExact(t *testing.T) {
	const tries, maxStreams = 64, 5
	l := New(Options{MaxStreams: maxStreams})
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		releases []func()
	)
	start := make(chan struct{})
	for range tries {
		wg.Go(func() {
			<-start
			if r, ok := l.Open("a"); ok {
				mu.Lock()
				releases = append(releases, r)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if len(releases) != maxStreams {
		t.Errorf("%d of %d concurrent Open(a) got in, want %d", len(releases), tries, maxStreams)
	}
	for _, r := range releases {
		r()
	}
	if n := l.Clients(); n != 0 {
		t.Errorf("Clients() = %d, want 0", n)
	}
}

// benchKeys are 1024 client addresses.
func benchKeys() []string {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("198.51.%d.%d", i/256, i%256)
	}
	return keys
}

// benchParallel runs each over the 1024 keys from every CPU, each
// goroutine starting at another place.
func benchParallel(b *testing.B, each func(l *Limiter, key string)) {
	l := New(Options{Rate: 1e6, MaxStreams: 64})
	keys := benchKeys()
	var seq atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(seq.Add(1)) * 37
		for pb.Next() {
			each(l, keys[i%len(keys)])
			i++
		}
	})
}

func BenchmarkAllow(b *testing.B) {
	benchParallel(b, func(l *Limiter, key string) { l.Allow(key) })
}

func BenchmarkAllowOpen(b *testing.B) {
	benchParallel(b, func(l *Limiter, key string) {
		l.Allow(key)
		if release, ok := l.Open(key); ok {
			release()
		}
	})
}
