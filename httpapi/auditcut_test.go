package httpapi

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/detach"
)

// A client that stops reading is cut off once GATEWAY_CLIENT_TIMEOUT
// passes with no answer bytes taken, and its call is audited
// "client_gone", whichever way its answer went: JSON written at once
// (which an Accept naming an event stream too sends through package
// detach's middleware, where the request's context ends a goroutine
// later than net/http's), a stream that left the server, or REST. The
// server here hands its handler a context that ends only once the handler
// has returned: the news of the failed write at its latest, so that the
// audit cannot learn of it from the context.
func TestAuditOutcomeOfAClientCutOff(t *testing.T) {
	t.Parallel()
	const both = "application/json, text/event-stream"
	big := strings.Repeat("x", 1<<20) // far more than the socket buffers below hold
	result := `{"content":[{"type":"text","text":"` + big + `"}]}`
	rpcCall := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},` + modernMeta + `}}`
	for _, tc := range []struct {
		name, path, body string
		header           []string
		stays            bool // no package detach: the response stays in net/http
	}{
		{"json, accepting a stream too", "/mcp", rpcCall, modernHeaders("tools/call", "Mcp-Name", "echo", "Accept", both), false},
		{"json", "/mcp", rpcCall, modernHeaders("tools/call", "Mcp-Name", "echo", "Accept", "application/json"), false},
		{"a stream that left", "/mcp", streamedCall, modernHeaders("tools/call", "Mcp-Name", "echo", "Accept", both), false},
		{"a stream that stays", "/mcp", streamedCall, modernHeaders("tools/call", "Mcp-Name", "echo", "Accept", both), true},
		{"rest json, accepting a stream too", "/v1/tools/echo", `{"text":"hi"}`, []string{"Accept", "application/json;q=1, text/event-stream;q=0.5"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, outcomes := newFake(), make(chan string, 1)
			f.tools = toolList(allTools...)
			addr := smallBufferServer(t, f, Options{Logger: slog.New(auditTap{outcomes}), ClientTimeout: 200 * time.Millisecond}, !tc.stays)
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.(*net.TCPConn).SetReadBuffer(4096)
			req := newPost("http://"+addr+tc.path, "application/json", tc.body, tc.header...)
			if err := req.Write(conn); err != nil {
				t.Fatal(err)
			}
			// The client reads nothing from here on.
			f.next(t).finish([]byte(`{"jsonrpc":"2.0","id":1,"result":`+result+`}`), nil)
			select {
			case got := <-outcomes:
				if got != "client_gone" {
					t.Errorf("audited %q, want client_gone", got)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no audit line")
			}
		})
	}
}

// smallBufferServer is newServer whose connections have small send
// buffers, so that an answer of a megabyte stalls for a client that does
// not read, and whose requests' contexts end when their handler returns,
// not when a write to the client fails. With leave, its streams leave the
// server as soon as they can.
func smallBufferServer(t *testing.T, f *fakeBackend, opts Options, leave bool) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	ln := detach.NewListener(smallSends{srv.Listener})
	srv.Listener = ln
	if leave {
		opts.Streams = detach.New(ln.Reuse, 0)
		opts.LeaveAfter = time.Nanosecond
	}
	h := New(f, opts)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if opts.Streams == nil {
			return
		}
		if err := opts.Streams.Wait(ctx); err != nil {
			t.Errorf("streams that left the server did not end: %v", err)
		}
	})
	return srv.Listener.Addr().String()
}

// smallSends is a listener whose connections send through a small buffer.
type smallSends struct{ net.Listener }

func (l smallSends) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}
