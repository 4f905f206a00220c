package httpapi

import (
	"context"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stdiomcp/gateway/clientlimit"
	"github.com/stdiomcp/gateway/detach"
)

// BenchmarkMCPCall is a 2026-07-28 tools/call through the whole handler
// chain (middleware, the revision's checks, the audit line, formatted as
// the gateway logs it) to a backend that answers at once: the front door's
// share of every call, JSON and SSE.
//
//	go test -run '^$' -bench BenchmarkMCPCall -benchmem -count 6 ./httpapi
func BenchmarkMCPCall(b *testing.B) {
	h := New(instantBackend{tools: toolList(allTools...)}, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	leaving := New(instantBackend{tools: toolList(allTools...)}, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Streams: detach.New(nil, 0)})
	limited := New(instantBackend{tools: toolList(allTools...)}, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Limiter: clientlimit.New(clientlimit.Options{MaxStreams: 8})})
	const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	for _, bc := range []struct {
		name, accept string
		h            http.Handler
	}{
		{"json", "application/json", h},
		{"stream", "application/json, text/event-stream", h},
		// The same, with streams that may leave the server (package
		// detach), as the gateway serves them: what that costs a call
		// that answers at once.
		{"stream-may-leave", "application/json, text/event-stream", leaving},
		// With a cap on the requests a client has open: what holding a
		// place, and giving it back, costs a call.
		{"json-limited", "application/json", limited},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", bc.accept)
				req.Header.Set("MCP-Protocol-Version", "2026-07-28")
				req.Header.Set("Mcp-Method", "tools/call")
				req.Header.Set("Mcp-Name", "echo")
				rec := httptest.NewRecorder()
				ctx, cancel := context.WithCancel(req.Context()) // as net/http's, which can end
				bc.h.ServeHTTP(rec, req.WithContext(ctx))
				cancel()
				if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"id":1`) {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
}

// acceptsParsed is accepts as it reads every part with mime.ParseMediaType:
// what the shortcut for parts without parameters must agree with.
func acceptsParsed(accept, mediaType string) bool {
	if strings.TrimSpace(accept) == "" {
		return true
	}
	major, _, _ := strings.Cut(mediaType, "/")
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		// RFC 9110's qvalue of zero: "0" [ "." 0*3DIGIT ], the digits zeros.
		if err != nil || regexp.MustCompile(`^0(\.0*)?$`).MatchString(params["q"]) {
			continue
		}
		if mt == mediaType || mt == "*/*" || mt == major+"/*" {
			return true
		}
	}
	return false
}

func FuzzAccepts(f *testing.F) {
	for _, s := range []string{"", "application/json, text/event-stream", "TEXT/Event-Stream", "text/*;q=0", "*/*", "text/*",
		"application/json;q=0.9, text/event-stream;q=0", "text/event-stream, application/json;q=0.0", "application/json;q=0.", "application/json;q=0.001", "a,,b", "text/event-stream/x", " text/event-stream\t", "text/event-stream;", `text/"x"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		for _, mt := range []string{"text/event-stream", "application/json"} {
			if got, want := accepts(accept, mt), acceptsParsed(accept, mt); got != want {
				t.Fatalf("accepts(%q, %q) = %v, parsing every part says %v", accept, mt, got, want)
			}
		}
		ct := strings.TrimSpace(accept)
		mt, _, err := mime.ParseMediaType(ct)
		if got, want := isJSON(ct), err == nil && mt == "application/json"; got != want {
			t.Fatalf("isJSON(%q) = %v, want %v", ct, got, want)
		}
	})
}
