package httpapi

import (
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
