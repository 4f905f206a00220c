package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// A call logs one line at info, its audit line (with the path and the
// client's address); its access line is at debug. A request that never
// became a call keeps its access line at info, with the status sent.
func TestOneLinePerCallAtInfo(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv, logs := guarded(t, f, Options{})
	go func() { f.next(t).finish([]byte(`{"jsonrpc":"2.0","id":7,"result":{}}`), nil) }()
	if resp := post(t, srv+"/mcp", "application/json", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}`, bearer(ciToken)...); resp.StatusCode != 200 {
		t.Fatalf("call: status %d", resp.StatusCode)
	}
	if resp := post(t, srv+"/mcp", "application/json", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo"}}`); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without credentials: status %d", resp.StatusCode)
	}
	var audits, access []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		switch rec["msg"] {
		case "audit":
			audits = append(audits, rec)
		case "http request":
			access = append(access, rec)
		}
	}
	if len(audits) != 1 || audits[0]["path"] != "/mcp" || audits[0]["remote"] != "127.0.0.1" || audits[0]["outcome"] != "ok" {
		t.Errorf("want one audit line for the call, with path /mcp and remote 127.0.0.1: %v", audits)
	}
	if len(access) != 1 || access[0]["status"] != float64(http.StatusUnauthorized) || access[0]["level"] != "INFO" {
		t.Errorf("want one access line at info, for the refused request (401): %v", access)
	}
}
