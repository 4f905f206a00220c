package detach

import (
	"bytes"
	"net/http"
	"testing"
)

// BenchmarkLeftStreamEvent is one SSE event on a stream that left the
// server, as the gateway relays a progress notification: three writes
// (the field, the message, the blank line), a flush, and the client
// reading the event off its connection. Allocations are this process's,
// the client's included:
//
//	go test -run '^$' -bench BenchmarkLeftStreamEvent -benchmem -count 6 ./detach
func BenchmarkLeftStreamEvent(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"bench","progress":1,"total":100,"message":"step 1 of 100"}}`)
	next := make(chan struct{})
	_, addr := server(b, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if err := Leave(w); err != nil {
			b.Errorf("Leave: %v", err)
			return
		}
		go func() {
			defer End(w)
			f := w.(http.Flusher)
			data, end := []byte("data: "), []byte("\n\n")
			for range next {
				w.Write(data)
				w.Write(msg)
				w.Write(end)
				f.Flush()
			}
		}()
	})
	c, br := dial(b, addr)
	resp := openStream(b, c, br)
	defer resp.Body.Close()
	body := resp.Body
	want := append(append([]byte("data: "), msg...), '\n')
	line := make([]byte, 0, 512)
	read := func() {
		// The event's two lines, read without allocating.
		line = line[:0]
		for len(line) < len(want)+1 {
			n, err := body.Read(line[len(line):cap(line)])
			if err != nil {
				b.Fatalf("the stream: %v", err)
			}
			line = line[:len(line)+n]
		}
		if !bytes.Equal(line[:len(want)], want) {
			b.Fatalf("event %q", line)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		next <- struct{}{}
		read()
	}
	b.StopTimer()
	close(next)
}
