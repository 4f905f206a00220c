package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkMCPCall is a 2026-07-28 tools/call through the whole handler
// chain (middleware, the revision's checks, the audit line, formatted as
// the gateway logs it) to a backend that answers at once: the front door's
// share of every call, JSON and SSE.
//
//	go test -run '^$' -bench BenchmarkMCPCall -benchmem -count 6 ./httpapi
func BenchmarkMCPCall(b *testing.B) {
	h := New(instantBackend{tools: toolList(allTools...)}, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	for _, bc := range []struct{ name, accept string }{{"json", "application/json"}, {"stream", "application/json, text/event-stream"}} {
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
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"id":1`) {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
