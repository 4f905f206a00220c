package httpapi

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// A request keeps the client's X-Request-Id when it is a short plain
// token; otherwise, or without one, it gets a new id, never the same twice.
func TestRequestNaming(t *testing.T) {
	ids := newRequestIDs()
	var got naming
	h := ids.named(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = *r.Context().Value(namingKey{}).(*naming)
	}))
	name := func(id, traceparent string) naming {
		t.Helper()
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		if id != "" {
			r.Header.Set(requestIDHeader, id)
		}
		if traceparent != "" {
			r.Header.Set("traceparent", traceparent)
		}
		got = naming{}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if said := rec.Result().Header.Values(requestIDHeader); len(said) != 1 || said[0] != got.id {
			t.Errorf("the answer says X-Request-Id %q, the logs %q", said, got.id)
		}
		return got
	}
	if n := name("client-1", ""); n.id != "client-1" || n.traced {
		t.Errorf("a plain client id: %+v", n)
	}
	made := regexp.MustCompile(`^[A-Za-z0-9.:_+=-]+/[A-Za-z0-9_-]{11}-[0-9]{6,}$`)
	seen := map[string]bool{}
	for _, id := range []string{"", "has space", "quote\"d", strings.Repeat("a", 129), "ünïcode"} {
		n := name(id, "")
		if !made.MatchString(n.id) || seen[n.id] {
			t.Errorf("for %q the id is %q (seen before: %v)", id, n.id, seen[n.id])
		}
		seen[n.id] = true
	}
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if n := name("", tp); !n.traced || n.trace.parent != tp {
		t.Errorf("the trace context was not kept: %+v", n)
	}
	if n := name("", "00-zz"); n.traced {
		t.Errorf("a malformed traceparent was kept: %+v", n)
	}
}

// Ids count up from six digits, then grow.
func TestRequestIDDigits(t *testing.T) {
	ids := &requestIDs{prefix: []byte("p-")}
	if id := ids.next(); id != "p-000001" {
		t.Errorf("first id %q", id)
	}
	ids.n.Store(999999)
	if id := ids.next(); id != "p-1000000" {
		t.Errorf("id after 999999: %q", id)
	}
}
