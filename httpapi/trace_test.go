package httpapi

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

func TestTraceparent(t *testing.T) {
	valid := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for s, want := range map[string]bool{
		valid: true,
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later": true, // a later version may add fields
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later": false,
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01":       false,
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01":       false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01":       false,
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01":       false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1":        false,
		"00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01":       false,
		"": false,
	} {
		if got := validTraceparent(s); got != want {
			t.Errorf("validTraceparent(%q) = %v", s, got)
		}
	}
	h := http.Header{}
	h.Add("traceparent", valid)
	h.Add("tracestate", "a=1")
	h.Add("tracestate", "b=2")
	if tr, ok := readTrace(h); !ok || tr.parent != valid || tr.state != "a=1,b=2" || tr.traceID() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("readTrace = %+v, %v", tr, ok)
	}
	h.Set("tracestate", strings.Repeat("x", maxTracestate+1))
	if tr, ok := readTrace(h); !ok || tr.state != "" {
		t.Errorf("an oversized tracestate was kept: %+v", tr)
	}
	h.Add("traceparent", valid)
	if _, ok := readTrace(h); ok {
		t.Error("two traceparent headers were read as one")
	}
}

// A line logged with a request's context names the request, once, however
// often the handler is wrapped.
func TestLogContext(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogContext(LogContext(slog.NewTextHandler(&buf, nil)))).With("worker", 0)
	ctx := context.WithValue(context.Background(), namingKey{}, &naming{id: "r-1", trace: trace{parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, traced: true})
	log.InfoContext(ctx, "hello")
	log.Info("no request")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || strings.Count(lines[0], "request_id=r-1") != 1 || !strings.Contains(lines[0], "trace_id=4bf92f3577b34da6a3ce929d0e0e4736") ||
		!strings.Contains(lines[0], "worker=0") || strings.Contains(lines[1], "request_id") {
		t.Errorf("log:\n%s", buf.String())
	}
}
