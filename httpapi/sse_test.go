package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/detach"
	"github.com/stdiomcp/gateway/internal/gatewaytest"
)

// What a call gives at once (a burst of progress) leaves in one flush, in
// order; the answer that ends the stream is flushed when it comes.
func TestRelayFlushesWhatItTakesTogetherOnce(t *testing.T) {
	t.Parallel()
	opts := Options{Logger: slog.New(slog.DiscardHandler)}
	opts.defaults()
	h := &handlers{opts: opts, log: opts.Logger}
	c := &fakeCall{wake: make(chan struct{}, 1), taken: make(chan struct{}, 1), ended: make(chan struct{})}
	const burst = 5
	c.mu.Lock()
	for i := range burst {
		c.notes = append(c.notes, fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":%d}}`, i))
	}
	c.signal()
	c.mu.Unlock()
	w := &flushCounter{ResponseRecorder: httptest.NewRecorder(), flushes: make(chan string, 16)}
	done := make(chan struct{})
	t.Cleanup(func() {
		c.finish(nil, errors.New("the test is over"))
		<-done
	})
	go func() {
		defer close(done)
		h.relay(w, httptest.NewRequest("POST", "/mcp", nil), c, nil, (*sseWriter).event, func(sse *sseWriter, resp []byte, err error) bool {
			return sse.event(resp) == nil
		})
	}()
	next := func() string {
		t.Helper()
		select {
		case body := <-w.flushes:
			return body
		case <-time.After(10 * time.Second):
			t.Fatal("no flush")
			return ""
		}
	}
	if open := next(); strings.Contains(open, "data:") {
		t.Fatalf("got %q at the first flush, want only the stream's opening", open)
	}
	body := next()
	if got := strings.Count(body, "data: "); got != burst {
		t.Fatalf("got %d events at the second flush, want the burst of %d in one: %q", got, burst, body)
	}
	for i := range burst {
		if !strings.Contains(body, fmt.Sprintf(`"progress":%d}`, i)) || (i > 0 && strings.Index(body, fmt.Sprintf(`"progress":%d}`, i)) < strings.Index(body, fmt.Sprintf(`"progress":%d}`, i-1))) {
			t.Fatalf("progress %d missing or out of order: %q", i, body)
		}
	}
	c.finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), nil)
	if last := next(); !strings.HasSuffix(last, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n") {
		t.Fatalf("got %q at the last flush, want the answer at its end", last)
	}
	<-done
	if n := len(w.flushes); n != 0 {
		t.Errorf("got %d more flushes after the answer, want none", n)
	}
}

// flushCounter is a response writer that hands over what was written so
// far at each flush.
type flushCounter struct {
	*httptest.ResponseRecorder
	flushes chan string
}

func (f *flushCounter) Flush() { f.flushes <- f.Body.String() }

// BenchmarkRelayBurst streams a burst of progress events and the answer
// over a loopback connection: what one flush per burst saves in writes to
// the client.
//
//	go test -run '^$' -bench BenchmarkRelayBurst -benchmem -count 6 ./httpapi
func BenchmarkRelayBurst(b *testing.B) {
	opts := Options{Logger: slog.New(slog.DiscardHandler)}
	opts.defaults()
	h := &handlers{opts: opts, log: opts.Logger}
	const burst = 16
	notes := make([][]byte, burst)
	for i := range notes {
		notes[i] = fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":%d}}`, i)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &fakeCall{wake: make(chan struct{}, 1), taken: make(chan struct{}, 1), ended: make(chan struct{})}
		c.notes = slices.Clone(notes)
		c.finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), nil)
		h.relay(w, r, c, nil, (*sseWriter).event, func(sse *sseWriter, resp []byte, err error) bool { return sse.event(resp) == nil })
	}))
	defer srv.Close()
	client := srv.Client()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Get(srv.URL)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || strings.Count(string(body), "data: ") != burst+1 {
			b.Fatalf("got %q, %v; want %d events", body, err, burst+1)
		}
	}
}

// A client that keeps reading is never cut off, however long its stream
// goes on: the write deadline moves with the events (here, on a stream
// that left the server at once).
func TestAStreamReadAsItComesOutlivesTheClientTimeout(t *testing.T) {
	t.Parallel()
	f := newFake()
	const timeout = 500 * time.Millisecond
	srv := newServer(t, f, Options{ClientTimeout: timeout})
	resp := post(t, srv.URL+"/mcp", "application/json", streamedCall, modernHeaders("tools/call", "Mcp-Name", "echo", "Accept", "application/json, text/event-stream")...)
	defer resp.Body.Close()
	c := f.next(t)
	body := bufio.NewReader(resp.Body)
	start := time.Now()
	event := func() string {
		t.Helper()
		for {
			l, err := body.ReadString('\n')
			if err != nil {
				t.Fatalf("the stream ended %v into it: %v", time.Since(start), err)
			}
			if strings.HasPrefix(l, "data: ") {
				return l
			}
		}
	}
	n := 0
	for ; time.Since(start) < 4*timeout && n < 100_000; n++ {
		c.note(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":%d}}`, n))
		if l := event(); !strings.Contains(l, fmt.Sprintf(`"progress":%d}`, n)) {
			t.Fatalf("event %d: %q", n, l)
		}
	}
	if time.Since(start) < 4*timeout {
		t.Fatalf("%d events in %v: the test ran out of events before time", n, time.Since(start))
	}
	c.finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`), nil)
	if l := event(); !strings.Contains(l, `"result":{"content":[]}`) {
		t.Fatalf("the answer: %q", l)
	}
}

// A stream that left the server (package detach) goes on to its answer,
// and is audited, logged and counted when it ends, with every byte the
// client read; the call was the request's until then.
func TestALeftStreamIsAccountedForAtItsEnd(t *testing.T) {
	t.Parallel()
	f := newFake()
	logs, wrote := &syncBuffer{}, make(chan struct{}, 1)
	streams := &streamMeter{left: make(chan struct{})}
	out := io.MultiWriter(logs, signalWriter(wrote))
	srv := newServer(t, f, Options{Logger: slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})), Meter: streams})
	resp := post(t, srv.URL+"/mcp", "application/json", streamedCall, modernHeaders("tools/call", "Mcp-Name", "echo", "Accept", "application/json, text/event-stream")...)
	defer resp.Body.Close()
	c := f.next(t)
	body := bufio.NewReader(resp.Body)
	var read bytes.Buffer
	line := func() string {
		t.Helper()
		l, err := body.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream: %v (read %q)", err, read.String())
		}
		read.WriteString(l)
		return l
	}
	for line() != ": stream open\n" {
	}
	line()
	for i := range 3 {
		// Each note after the first goes out from where the stream left.
		c.note(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":%d}}`, i))
		if l := line(); !strings.Contains(l, fmt.Sprintf(`"progress":%d`, i)) {
			t.Fatalf("event %d: %q", i, l)
		}
		line()
	}
	select {
	case <-streams.left:
	case <-time.After(10 * time.Second):
		t.Fatal("no stream left the server")
	}
	if strings.Contains(logs.String(), `"msg":"audit"`) {
		t.Fatal("audited before its end")
	}
	c.finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`), nil)
	rest, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	read.Write(rest)
	if !strings.Contains(read.String(), `"result":{"content":[]}`) {
		t.Fatalf("no answer: %q", read.String())
	}
	var audit, access map[string]any
	for access == nil {
		// The lines are written as the stream ends, after the client
		// read it.
		select {
		case <-wrote:
		case <-time.After(10 * time.Second):
			t.Fatalf("no access line: %s", logs.String())
		}
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(l), &rec) != nil {
				continue
			}
			switch rec["msg"] {
			case "audit":
				audit = rec
			case "http request":
				access = rec
			}
		}
	}
	n := float64(read.Len())
	if audit == nil || audit["outcome"] != "ok" || audit["status"] != float64(200) || audit["bytes_out"] != n {
		t.Errorf("audit line %v, want ok, 200 and %v bytes out", audit, n)
	}
	if access == nil || access["status"] != float64(200) || access["bytes"] != n {
		t.Errorf("access line %v, want 200 and %v bytes", access, n)
	}
	if err := c.waitEnded(t); err != nil {
		t.Errorf("the call's context ended: %v", err)
	}
}

// signalWriter tells of each write.
type signalWriter chan struct{}

func (s signalWriter) Write(p []byte) (int, error) {
	select {
	case s <- struct{}{}:
	default:
	}
	return len(p), nil
}

// streamMeter tells, from where the meter's Instrument sits, when a
// stream left the server: its handler returned with its response gone on.
type streamMeter struct {
	noMeter
	left chan struct{}
}

func (m *streamMeter) Instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		if detach.Left(w) {
			close(m.left)
		}
	})
}

// A stream whose client stops reading after its call ended says so, and
// does not claim to cancel a call that is over.
func TestStreamGoneAfterTheCallEnded(t *testing.T) {
	t.Parallel()
	var log gatewaytest.LockedBuffer
	h := &handlers{log: slog.New(slog.NewTextHandler(&log, nil)), opts: Options{KeepAlive: time.Hour, ClientTimeout: time.Minute, Meter: noMeter{}}}
	w := &breakingWriter{ResponseRecorder: httptest.NewRecorder()}
	woken := make(chan struct{})
	close(woken)
	c := endedCall{wake: woken, notes: [][]byte{[]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`)}}
	s := &relayed{h: h, w: w, r: httptest.NewRequest(http.MethodPost, "/mcp", nil), c: c, sse: newSSE(w, time.Minute),
		send: func(sse *sseWriter, n []byte) error { return sse.event(n) },
		end:  func(sse *sseWriter, resp []byte, err error) bool { return sse.event(resp) == nil }}
	if !s.start(nil) {
		t.Fatal("the stream did not open")
	}
	defer s.close()
	w.broken = true
	s.pump(false)
	if !strings.Contains(log.String(), "after its call ended") || strings.Contains(log.String(), "its call is cancelled") {
		t.Errorf("log:\n%s", log.String())
	}
}

// breakingWriter fails every write once broken, as a connection does
// whose client stopped reading.
type breakingWriter struct {
	*httptest.ResponseRecorder
	broken bool
}

func (b *breakingWriter) Write(p []byte) (int, error) {
	if b.broken {
		return 0, errors.New("write: the client stopped reading")
	}
	return b.ResponseRecorder.Write(p)
}

// endedCall is a call whose last take has notes and its end.
type endedCall struct {
	wake  chan struct{}
	notes [][]byte
}

func (c endedCall) Wake() <-chan struct{} { return c.wake }
func (c endedCall) Take() ([][]byte, []byte, bool, error) {
	return c.notes, []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), true, nil
}
