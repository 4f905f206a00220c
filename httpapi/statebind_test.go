package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stdiomcp/gateway/auth"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// A requestState handed to one caller continues the call for that caller
// only; the child gets back the state it made.
func TestRequestStateIsBoundToItsCaller(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv, _ := guarded(t, f, Options{})
	call := func(token, state string) *http.Response {
		params := `"name":"echo",` + modernMeta
		if state != "" {
			params += `,"requestState":` + string(jsonrpc.Quote(state)) + `,"inputResponses":{}`
		}
		return post(t, srv+"/mcp", "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+params+`}}`,
			append(bearer(token), modernHeaders("tools/call", "Mcp-Name", "echo")...)...)
	}
	go func() {
		f.next(t).finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{},"requestState":"child-state-1"}}`), nil)
	}()
	var first struct {
		Result struct {
			RequestState string `json:"requestState"`
		} `json:"result"`
	}
	resp := call(ciToken, "")
	if err := json.NewDecoder(resp.Body).Decode(&first); err != nil {
		t.Fatal(err)
	}
	bound := first.Result.RequestState
	if !strings.HasPrefix(bound, boundPrefix) || strings.Contains(bound, "child-state-1") {
		t.Fatalf("the state handed out is %q, not one bound to its caller", bound)
	}
	for name, state := range map[string]string{
		"the child's own state":     "child-state-1",
		"altered":                   bound[:len(bound)-2] + "AA",
		"another caller's, renamed": strings.Replace(bound, callerOwner("token", "ci"), callerOwner("token", "admin"), 1),
	} {
		if resp := call(adminToken, state); resp.StatusCode != 400 {
			t.Errorf("%s: status %d", name, resp.StatusCode)
		}
		nothingReached(t, f)
	}
	if resp := call(adminToken, bound); resp.StatusCode != 400 {
		t.Errorf("another caller's state: status %d", resp.StatusCode)
	}
	nothingReached(t, f)
	// Nor as a 2025-era request (no 2026 headers or _meta), nor as a
	// state of another JSON type.
	for name, body := range map[string]string{
		"the child's state, 2025-era": `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","requestState":"child-state-1","inputResponses":{}}}`,
		"a bound state, 2025-era":     `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","requestState":` + string(jsonrpc.Quote(bound)) + `}}`,
		"a state that is an object":   `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","requestState":{"s":"child-state-1"}}}`,
	} {
		if resp := post(t, srv+"/mcp", "application/json", body, bearer(adminToken)...); resp.StatusCode != 400 {
			t.Errorf("%s: status %d", name, resp.StatusCode)
		}
		nothingReached(t, f)
	}
	got := make(chan string, 1)
	go func() {
		c := f.next(t)
		s, _ := c.req.String(mcp.ParamRequestState)
		got <- s
		c.finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[]}}`), nil)
	}()
	if resp := call(ciToken, bound); resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("its own caller's retry: %d %s", resp.StatusCode, b)
	}
	if s := <-got; s != "child-state-1" {
		t.Errorf("the child got the state %q back", s)
	}
}

func callerOwner(kind, name string) string {
	return caller{id: auth.Identity{Kind: kind, Name: name}, authenticated: true}.owner()
}

// A token revoked while its request runs ends the request: its call is
// cancelled toward the child, and its stream ends with an error that
// says why.
func TestRevokedTokenEndsItsStream(t *testing.T) {
	t.Parallel()
	f := newFake()
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("ci:"+ciToken+"\nadmin:"+adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Options{TokensFile: tokens})
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, f, Options{Auth: a})
	resp := post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","_meta":{"progressToken":1}}}`,
		append(bearer(ciToken), "Accept", "text/event-stream")...)
	c := f.next(t)
	if err := os.WriteFile(tokens, []byte("admin:"+adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if cause := c.waitEnded(t); !errors.Is(cause, errCredentialsEnded) {
		t.Errorf("the call ended with %v", cause)
	}
	events := readEvents(t, resp.Body, nil)
	if len(events) == 0 || !strings.Contains(events[len(events)-1], `"code":-32007`) {
		t.Errorf("events: %q", events)
	}
}
