package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stdiomcp/gateway/internal/gatewaytest"
)

const (
	traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
)

// A client's W3C trace context reaches the child in _meta (one the
// request carries itself is left as it is), and every log line of the
// request names its request id and trace id; the child's stderr names the
// worker and the process it came from. Both ways a request reaches the
// child are covered: forwarded as it came (2025 child), and with the
// 2026-07-28 _meta added (2026 child).
func TestTraceContextAndLogs(t *testing.T) {
	t.Parallel()
	for _, era := range []string{"legacy", "modern"} {
		t.Run(era, func(t *testing.T) {
			t.Parallel()
			g := startGateway(t, nil, "--", gatewayBin, "demo", "-era", era)
			g.WaitReady()

			meta := func(reqID, body string) map[string]json.RawMessage {
				t.Helper()
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, g.URL+"/mcp", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Request-Id", reqID)
				req.Header.Set("traceparent", traceparent)
				req.Header.Set("tracestate", "congo=t61rcWkgMzE")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var out struct {
					Result struct {
						StructuredContent struct {
							Meta map[string]json.RawMessage `json:"_meta"`
						} `json:"structuredContent"`
					} `json:"result"`
				}
				if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
					t.Fatalf("status %d, %v", resp.StatusCode, err)
				}
				return out.Result.StructuredContent.Meta
			}
			got := meta("trace-1", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"meta"}}`)
			if string(got["traceparent"]) != `"`+traceparent+`"` || string(got["tracestate"]) != `"congo=t61rcWkgMzE"` {
				t.Errorf("the child got _meta %s", got)
			}
			own := `"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"`
			got = meta("trace-2", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"meta","_meta":{"traceparent":`+own+`}}}`)
			if string(got["traceparent"]) != own || got["tracestate"] != nil {
				t.Errorf("a request's own trace context was not kept: the child got _meta %s", got)
			}

			// Every line about the first request names it.
			for _, msg := range []string{"http request", "to child", "call ended", "audit"} {
				rec := g.Logs.Wait(t, func(r gatewaytest.Record) bool { return r["msg"] == msg && r["request_id"] == "trace-1" })
				if rec["trace_id"] != traceID {
					t.Errorf("%q: trace_id %v", msg, rec["trace_id"])
				}
				if msg == "to child" && (rec["id"] == nil || rec["client_id"] != "1" || rec["worker"] == nil || rec["pid"] == nil) {
					t.Errorf("%q does not name both ids, the worker and the pid: %v", msg, rec)
				}
			}
			// The child's stderr, tagged with where it came from.
			rec := g.Logs.Wait(t, func(r gatewaytest.Record) bool {
				line, _ := r["line"].(string)
				return strings.Contains(line, "meta traceparent="+`"`+traceparent)
			})
			if rec["worker"] != float64(0) || rec["pid"] == nil {
				t.Errorf("the child's stderr line does not name its worker and pid: %v", rec)
			}
		})
	}
}
