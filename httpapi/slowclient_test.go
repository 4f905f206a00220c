package httpapi

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/detach"
)

// GATEWAY_CLIENT_TIMEOUT cuts off a client that takes no answer bytes for
// that long, not one whose whole answer takes longer: a client that reads
// a large answer steadily, if slowly, has it all, and one that stops
// midway is cut off. Either way the audit line counts the answer bytes
// that went out. Each way an answer goes: JSON, a stream of one event to
// a client that takes no JSON, SSE that stays in net/http or leaves it
// (package detach), and REST's JSON and SSE.
func TestClientTimeoutIsForAClientThatTakesNothing(t *testing.T) {
	t.Parallel()
	const (
		timeout = 300 * time.Millisecond
		both    = "application/json, text/event-stream"
		stopAt  = 224 << 10 // where a client stops reading: inside an answer's chunk
	)
	// 2 MiB, which the client below takes in several timeouts.
	result := `{"content":[{"type":"text","text":"` + strings.Repeat("x", 2<<20) + `"}]}`
	rpcCall := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},` + modernMeta + `}}`
	for _, tc := range []struct {
		name, path, body string
		header           []string
		leave            bool // the answer is given once the stream has left net/http
	}{
		{"json", "/mcp", rpcCall, modernHeaders("tools/call", "Mcp-Name", "echo", "Accept", "application/json"), false},
		{"json, accepting a stream too", "/mcp", rpcCall, modernHeaders("tools/call", "Mcp-Name", "echo", "Accept", both), false},
		{"one event", "/mcp", rpcCall, modernHeaders("tools/call", "Mcp-Name", "echo", "Accept", "text/event-stream"), false},
		{"a stream that stays", "/mcp", streamedCall, modernHeaders("tools/call", "Mcp-Name", "echo", "Accept", both), false},
		{"a stream that left", "/mcp", streamedCall, modernHeaders("tools/call", "Mcp-Name", "echo", "Accept", both), true},
		{"rest json", "/v1/tools/echo", `{"text":"hi"}`, []string{"Accept", "application/json"}, false},
		{"rest stream that left", "/v1/tools/echo", `{"text":"hi"}`, []string{"Accept", "text/event-stream"}, true},
	} {
		for _, stops := range []bool{false, true} {
			name := tc.name + ", read steadily"
			if stops {
				name = tc.name + ", stopping midway"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				f, audits := newFake(), make(chan auditLine, 1)
				f.tools = toolList(allTools...)
				addr, returned := slowClientServer(t, f, Options{Logger: slog.New(auditBytesTap{audits}), ClientTimeout: timeout}, tc.leave)
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				// Small enough that the answer does not all wait in
				// buffers, large enough that each read below finds a
				// fair share of it.
				_ = conn.(*net.TCPConn).SetReadBuffer(32 << 10)
				req := newPost("http://"+addr+tc.path, "application/json", tc.body, tc.header...)
				if err := req.Write(conn); err != nil {
					t.Fatal(err)
				}
				c := f.next(t)
				if tc.leave {
					select {
					case <-returned: // the stream left: its handler is done
					case <-time.After(10 * time.Second):
						t.Fatal("the stream did not leave the server")
					}
				}
				c.finish([]byte(`{"jsonrpc":"2.0","id":1,"result":`+result+`}`), nil)
				resp, err := http.ReadResponse(bufio.NewReaderSize(steadyReader{conn}, 16<<10), req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d, want 200", resp.StatusCode)
				}
				var got int64
				if stops {
					// From here on the client reads nothing, and keeps
					// its connection open.
					got, err = io.CopyN(io.Discard, resp.Body, stopAt)
				} else {
					got, err = io.Copy(io.Discard, resp.Body)
				}
				if err != nil {
					t.Fatalf("after %d bytes of the answer: %v", got, err)
				}
				var a auditLine
				select {
				case a = <-audits:
				case <-time.After(10 * time.Second):
					t.Fatal("no audit line")
				}
				switch {
				case !stops && a.outcome != "ok":
					t.Errorf("the client read %d bytes in all, audited %q, want ok", got, a.outcome)
				case !stops && a.bytesOut != got:
					t.Errorf("bytes_out %d, want the %d bytes the client read", a.bytesOut, got)
				case stops && a.outcome != "client_gone":
					t.Errorf("audited %q, want client_gone", a.outcome)
				case stops && (a.bytesOut < got || a.bytesOut > got+256<<10):
					t.Errorf("bytes_out %d, want what went out: at least the %d bytes the client read, and not much more", a.bytesOut, got)
				}
			})
		}
	}
}

// An SSE stream's write deadline is in the future however large the
// timeout: an eighth more than the largest Duration wraps around to one
// in the past, which would close every stream at once.
func TestSSEDeadlineOfAHugeTimeout(t *testing.T) {
	t.Parallel()
	for _, timeout := range []time.Duration{300 * time.Millisecond, 2277376 * time.Hour, math.MaxInt64} {
		w := &deadlines{ResponseRecorder: httptest.NewRecorder()}
		s := newSSE(w, timeout)
		before := time.Now()
		if err := s.event([]byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if len(w.set) == 0 {
			t.Fatalf("timeout %v: no deadline set", timeout)
		}
		if got := w.set[len(w.set)-1]; !got.After(before.Add(timeout / 2)) {
			t.Errorf("timeout %v: deadline %v, want one at least the timeout away", timeout, got)
		}
	}
}

// deadlines is a ResponseRecorder that keeps the write deadlines set.
type deadlines struct {
	*httptest.ResponseRecorder
	set []time.Time
}

func (d *deadlines) SetWriteDeadline(t time.Time) error {
	d.set = append(d.set, t)
	return nil
}

// steadyReader reads a little at a time, with a pause before each read
// far shorter than the timeout above: a slow client that keeps reading.
type steadyReader struct{ r io.Reader }

func (s steadyReader) Read(p []byte) (int, error) {
	time.Sleep(10 * time.Millisecond)
	return s.r.Read(p[:min(len(p), 16<<10)])
}

// slowClientServer serves f on connections with small send buffers, so
// that a client's reading paces its answer. Returned has a value each time
// a handler returns; with leave, streams leave the server at once.
func slowClientServer(t *testing.T, f *fakeBackend, opts Options, leave bool) (addr string, returned <-chan struct{}) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	ln := detach.NewListener(smallSends{srv.Listener})
	srv.Listener = ln
	if leave {
		opts.Streams = detach.New(ln.Reuse, 0)
		opts.LeaveAfter = time.Nanosecond
	}
	h, done := New(f, opts), make(chan struct{}, 1)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		done <- struct{}{}
	})
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		if opts.Streams == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := opts.Streams.Wait(ctx); err != nil {
			t.Errorf("streams that left the server did not end: %v", err)
		}
	})
	return srv.Listener.Addr().String(), done
}

// auditLine is what an audit line says of how a call ended.
type auditLine struct {
	outcome  string
	bytesOut int64
}

// auditBytesTap is a log handler that hands over each audit line's
// outcome and bytes_out.
type auditBytesTap struct{ lines chan auditLine }

func (auditBytesTap) Enabled(context.Context, slog.Level) bool { return true }

func (a auditBytesTap) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "audit" {
		return nil
	}
	var l auditLine
	r.Attrs(func(at slog.Attr) bool {
		switch at.Key {
		case "outcome":
			l.outcome = at.Value.String()
		case "bytes_out":
			l.bytesOut = at.Value.Int64()
		}
		return true
	})
	a.lines <- l
	return nil
}
func (a auditBytesTap) WithAttrs([]slog.Attr) slog.Handler { return a }
func (a auditBytesTap) WithGroup(string) slog.Handler      { return a }

// The REST API's lists and documents, which may be megabytes, cut off a
// client that takes none of them for the timeout, as a call's answer does:
// their handler returns rather than waiting on the client for good.
func TestListToAClientThatTakesNothing(t *testing.T) {
	t.Parallel()
	big := `{"name":"big","description":"` + strings.Repeat("d", 8<<20) + `","inputSchema":{"type":"object"}}`
	for _, path := range []string{"/v1/tools", "/v1/openapi.json"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			f := newFake()
			f.tools = toolList(big)
			addr, returned := slowClientServer(t, f, Options{ClientTimeout: 300 * time.Millisecond}, false)
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.(*net.TCPConn).SetReadBuffer(32 << 10)
			req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
			if err := req.Write(conn); err != nil {
				t.Fatal(err)
			}
			select {
			case <-returned:
			case <-time.After(10 * time.Second):
				t.Fatalf("GET %s to a client that reads nothing: its handler still writes after 10 s", path)
			}
		})
	}
}
