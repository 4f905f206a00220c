package mcp

import (
	"net/http"
	"testing"
)

// The key is the header's name as net/http files it, whatever case the
// client sent.
func TestHeaderProtocolVersionKeyIsCanonical(t *testing.T) {
	if got := http.CanonicalHeaderKey(HeaderProtocolVersion); got != HeaderProtocolVersionKey {
		t.Fatalf("net/http files %s as %q, not %q", HeaderProtocolVersion, got, HeaderProtocolVersionKey)
	}
}
