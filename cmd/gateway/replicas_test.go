package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// Gateway processes that share GATEWAY_SECRET serve each other's 2025
// sessions; one with another secret does not. A 2026 call parked for its
// client's input resumes only on the replica that parked it: a retry that
// reaches another one is refused at once, saying why.
func TestReplicasShareTheKey(t *testing.T) {
	t.Parallel()
	secret := "GATEWAY_SECRET=the secret these replicas share, 32+ bytes"
	child := []string{"--", gatewayBin, "demo", "-era", "legacy"}
	a := startGateway(t, []string{secret}, child...)
	b := startGateway(t, []string{secret}, child...)
	c := startGateway(t, []string{"GATEWAY_SECRET=another secret, for another gateway!!"}, child...)
	// A replica changing its secret: it signs with the new one and still
	// accepts the old one, from a file.
	old := t.TempDir() + "/old"
	if err := os.WriteFile(old, []byte(strings.TrimPrefix(secret, "GATEWAY_SECRET=")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startGateway(t, []string{"GATEWAY_SECRET=the secret that takes over, 32+ bytes", "GATEWAY_SECRET_ACCEPT_FILE=" + old}, child...)

	type answer struct {
		status int
		header http.Header
		body   map[string]any
	}
	post := func(url, body string, header ...string) answer {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("answer %s: %v", raw, err)
		}
		return answer{resp.StatusCode, resp.Header, m}
	}

	init := post(a.URL, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := init.header.Get("Mcp-Session-Id")
	if init.status != 200 || sid == "" {
		t.Fatalf("initialize: %d %v", init.status, init.body)
	}
	echo := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	if got := post(b.URL, echo, "Mcp-Session-Id", sid); got.status != 200 || got.body["result"] == nil {
		t.Errorf("the replica sharing the secret: %d %v", got.status, got.body)
	}
	if got := post(c.URL, echo, "Mcp-Session-Id", sid); got.status != 404 {
		t.Errorf("the gateway with another secret: %d %v, want 404", got.status, got.body)
	}
	if got := post(d.URL, echo, "Mcp-Session-Id", sid); got.status != 200 {
		t.Errorf("the gateway that accepts the old secret: %d %v, want 200", got.status, got.body)
	}
	dInit := post(d.URL, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if got := post(a.URL, echo, "Mcp-Session-Id", dInit.header.Get("Mcp-Session-Id")); got.status != 404 {
		t.Errorf("a gateway that signs with its new secret was trusted by one that does not accept it: %d", got.status)
	}

	modern := []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "test_elicitation"}
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	first := post(a.URL, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_elicitation","arguments":{"message":"who?"},`+meta+`}}`, modern...)
	result, _ := first.body["result"].(map[string]any)
	state, _ := result["requestState"].(string)
	asks, _ := result["inputRequests"].(map[string]any)
	if result["resultType"] != "input_required" || state == "" || len(asks) != 1 {
		t.Fatalf("the first answer: %d %v, want input_required", first.status, first.body)
	}
	var key string
	for k := range asks {
		key = k
	}
	keyJSON, _ := json.Marshal(key)
	retry := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test_elicitation","arguments":{"message":"who?"},"requestState":"` + state +
		`","inputResponses":{` + string(keyJSON) + `:{"action":"accept","content":{"username":"u","email":"e@x"}}},` + meta + `}}`
	elsewhere := post(b.URL, retry, modern...)
	e, _ := elsewhere.body["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	if elsewhere.status != 400 || e["code"] != float64(-32602) || data["reason"] != "parked_elsewhere" {
		t.Errorf("a retry on another replica: %d %v, want 400, -32602 and reason parked_elsewhere", elsewhere.status, elsewhere.body)
	}
	home := post(a.URL, retry, modern...)
	result, _ = home.body["result"].(map[string]any)
	if home.status != 200 || !strings.Contains(strings.ToLower(jsonText(result)), "accept") {
		t.Errorf("the retry where the call waits: %d %v", home.status, home.body)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
