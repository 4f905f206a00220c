package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stdiomcp/gateway/auth"
	"github.com/stdiomcp/gateway/clientlimit"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

const (
	ciToken    = "ci-token-0123456789abcdef0123456789"
	adminToken = "admin-token-0123456789abcdef01234567"
)

// syncBuffer is a log sink that the handlers and the test share.
type syncBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	grew chan struct{} // closed by the next write, for waitFor
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grew != nil {
		close(s.grew)
		s.grew = nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor returns the log once done holds for it. A call's lines are
// written after its answer has left, so a client that has read the answer
// may be ahead of them.
func (s *syncBuffer) waitFor(t *testing.T, done func(log string) bool) string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		s.mu.Lock()
		text := s.b.String()
		if s.grew == nil {
			s.grew = make(chan struct{})
		}
		grew := s.grew
		s.mu.Unlock()
		if done(text) {
			return text
		}
		select {
		case <-grew:
		case <-deadline:
			t.Fatalf("the log never got there:\n%s", text)
		}
	}
}

// guarded is a server whose callers are ci (echo, demo://a*, no prompts)
// and admin (everything).
func guarded(t *testing.T, f *fakeBackend, opts Options) (srv string, logs *syncBuffer) {
	t.Helper()
	policy := filepath.Join(t.TempDir(), "policy.json")
	err := os.WriteFile(policy, []byte(`{"tokens":{"ci":{"tools":["echo"],"resources":["demo://a*"]},
		"admin":{"tools":["*"],"resources":["*"],"prompts":["*"]}}}`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Options{Tokens: []string{"ci:" + ciToken, "admin:" + adminToken}, PolicyFile: policy})
	if err != nil {
		t.Fatal(err)
	}
	logs = &syncBuffer{}
	opts.Auth = a
	opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	return newServer(t, f, opts).URL, logs
}

func bearer(token string) []string { return []string{"Authorization", "Bearer " + token} }

// nothingReached fails when a call reached the backend.
func nothingReached(t *testing.T, f *fakeBackend) {
	t.Helper()
	select {
	case c := <-f.calls:
		t.Fatalf("a call reached the child: %s", c.req.Raw)
	default:
	}
}

func TestCredentialsAreRequired(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv, logs := guarded(t, f, Options{})
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`
	headers := map[string][]string{
		"none":        nil,
		"wrong":       bearer("not-a-token"),
		"basic":       {"Authorization", "Basic Y2k6Y2k="},
		"token as-is": {"Authorization", ciToken},
		"empty":       {"Authorization", "Bearer "},
		"two":         {"Authorization", "Bearer " + ciToken + " " + ciToken},
		// Which of two headers counts is up to each reader of them.
		"header twice": {"Authorization", "Bearer " + ciToken, "Authorization", "Bearer not-a-token"},
	}
	for name, header := range headers {
		resp := post(t, srv+"/mcp", "application/json", call, header...)
		status, code := http.StatusUnauthorized, jsonrpc.CodeUnauthorized
		if name == "empty" || name == "two" || name == "header twice" {
			// No token can be read: RFC 6750's invalid_request.
			status, code = http.StatusBadRequest, jsonrpc.CodeInvalidRequest
		}
		if resp.StatusCode != status || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: status %d, WWW-Authenticate %q", name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
		if _, got := readRPCError(t, resp); got != code {
			t.Errorf("%s: code %d, want %d", name, got, code)
		}
		nothingReached(t, f)
	}
	// DELETE is guarded too.
	req, _ := http.NewRequest(http.MethodDelete, srv+"/mcp", nil)
	req.Header.Set(mcp.HeaderSession, "s1.x.y")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("DELETE without credentials: %d", resp.StatusCode)
	}
	// Health and readiness stay open.
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(srv + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
	}
	// The refused requests (the calls and the DELETE) have each logged
	// their access line.
	refused := len(headers) + 1
	text := logs.waitFor(t, func(text string) bool { return strings.Count(text, `"msg":"http request"`) >= refused })
	if strings.Contains(text, ciToken) {
		t.Errorf("a token reached the log:\n%s", text)
	}
}

// A caller's policy decides from the body what it may use; what is
// outside it never reaches the child, and every call leaves an audit line
// naming the caller, never its token.
func TestPolicy(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv, logs := guarded(t, f, Options{})
	for _, tc := range []struct {
		name, body string
		header     []string
		status     int
	}{
		{"tool outside", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add"}}`, nil, 403},
		{"header says echo, body says add", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add"}}`, []string{"Mcp-Name", "echo"}, 403},
		{"case variant", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","Name":"add"}}`, nil, 400},
		{"escaped twin", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","n\u0061me":"add"}}`, nil, 400},
		{"resource outside", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"demo://b"}}`, nil, 403},
		{"prompt", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"greet"}}`, nil, 403},
		{"completion of a prompt", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"a","value":""}}}`, nil, 403},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"admin/exec","params":{}}`, nil, 403},
		{"unknown notification", `{"jsonrpc":"2.0","method":"notifications/custom"}`, nil, 403},
	} {
		resp := post(t, srv+"/mcp", "application/json", tc.body, append(bearer(ciToken), tc.header...)...)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
		if tc.status == 403 && !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="insufficient_scope"`) {
			t.Errorf("%s: WWW-Authenticate %q", tc.name, resp.Header.Get("WWW-Authenticate"))
		}
		nothingReached(t, f)
	}

	// Allowed: the tool, and a resource by pattern.
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"demo://abc"}}`,
	} {
		go func() { f.next(t).finish([]byte(`{"jsonrpc":"2.0","id":2,"result":{}}`), nil) }()
		if resp := post(t, srv+"/mcp", "application/json", body, bearer(ciToken)...); resp.StatusCode != 200 {
			t.Errorf("%s: status %d", body, resp.StatusCode)
		}
	}
	// The admin may call what ci may not.
	go func() {
		c := f.next(t)
		// What the bridge sends is the body and the members the handlers
		// add to _meta.
		for _, m := range c.caller.Meta {
			if bytes.Contains(m.Value, []byte(adminToken)) {
				t.Errorf("the token is in _meta for the child: %s", m.Value)
			}
		}
		c.finish([]byte(`{"jsonrpc":"2.0","id":3,"result":{}}`), nil)
	}()
	if resp := post(t, srv+"/mcp", "application/json", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"add"}}`, bearer(adminToken)...); resp.StatusCode != 200 {
		t.Errorf("admin: status %d", resp.StatusCode)
	}

	var denied, ok, admin bool
	text := logs.waitFor(t, func(text string) bool {
		for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["msg"] != "audit" {
				continue
			}
			switch {
			case rec["who"] == "token:ci" && rec["tool"] == "add" && rec["outcome"] == "denied" && rec["status"] == 403.0:
				denied = true
			case rec["who"] == "token:ci" && rec["tool"] == "echo" && rec["outcome"] == "ok" && rec["bytes_out"].(float64) > 0:
				ok = true
			case rec["who"] == "token:admin" && rec["tool"] == "add" && rec["outcome"] == "ok":
				admin = true
			}
		}
		return denied && ok && admin
	})
	if strings.Contains(text, ciToken) || strings.Contains(text, adminToken) {
		t.Errorf("a token reached the log:\n%s", text)
	}
}

// A list shows only what the caller may use; the entries kept are the
// child's bytes.
func TestListsAreFiltered(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv, _ := guarded(t, f, Options{})
	list := `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}},{"name":"add"}],"nextCursor":"c"}}`
	for _, tc := range []struct {
		token, want string
		accept      string
	}{
		{ciToken, `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}],"nextCursor":"c"}}`, "application/json"},
		{adminToken, list, "application/json"},
		{ciToken, `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}],"nextCursor":"c"}}`, "text/event-stream"},
	} {
		go func() { f.next(t).finish([]byte(list), nil) }()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
		if tc.accept == "text/event-stream" {
			body = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"progressToken":1}}}`
		}
		resp := post(t, srv+"/mcp", "application/json", body, append(bearer(tc.token), "Accept", tc.accept)...)
		var got string
		if tc.accept == "text/event-stream" {
			events := readEvents(t, resp.Body, nil)
			got = events[len(events)-1]
		} else {
			b, _ := io.ReadAll(resp.Body)
			got = string(b)
		}
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.accept, got, tc.want)
		}
	}
	// A list the gateway cannot read is not passed on unfiltered.
	go func() {
		f.next(t).finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[],"tools":[{"name":"add"}]}}`), nil)
	}()
	resp := post(t, srv+"/mcp", "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, bearer(ciToken)...)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 500 || bytes.Contains(b, []byte(`"add"`)) {
		t.Errorf("ambiguous list: status %d, body %s", resp.StatusCode, b)
	}
}

// A 2025 session belongs to the caller that made it.
func TestSessionBelongsToItsCaller(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv, _ := guarded(t, f, Options{})
	go func() {
		f.next(t).finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"x","version":"1"}}}`), nil)
	}()
	resp := post(t, srv+"/mcp", "application/json", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, bearer(ciToken)...)
	sid := resp.Header.Get(mcp.HeaderSession)
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	ping := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if resp := post(t, srv+"/mcp", "application/json", ping, append(bearer(adminToken), mcp.HeaderSession, sid)...); resp.StatusCode != 404 {
		t.Errorf("another caller's session: status %d, want 404", resp.StatusCode)
	}
	nothingReached(t, f)
	go func() { f.next(t).finish([]byte(`{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}`), nil) }()
	if resp := post(t, srv+"/mcp", "application/json", ping, append(bearer(ciToken), mcp.HeaderSession, sid)...); resp.StatusCode != 200 {
		t.Errorf("its own session: status %d", resp.StatusCode)
	}
}

// Over the rate: 429 with Retry-After, and nothing reaches the child. A
// client is its credential's name, so another token has a budget of its
// own.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv, _ := guarded(t, f, Options{Limiter: clientlimit.New(clientlimit.Options{Rate: 0.001, Burst: 1})})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`
	go func() { f.next(t).finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), nil) }()
	if resp := post(t, srv+"/mcp", "application/json", body, bearer(ciToken)...); resp.StatusCode != 200 {
		t.Fatalf("first call: %d", resp.StatusCode)
	}
	resp := post(t, srv+"/mcp", "application/json", body, bearer(ciToken)...)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("second call: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if _, code := readRPCError(t, resp); code != jsonrpc.CodeRateLimited {
		t.Errorf("code %d", code)
	}
	nothingReached(t, f)
	go func() { f.next(t).finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), nil) }()
	if resp := post(t, srv+"/mcp", "application/json", body, bearer(adminToken)...); resp.StatusCode != 200 {
		t.Errorf("another caller: %d", resp.StatusCode)
	}
}

// Streams per client: with one open, a second is refused.
func TestStreamsPerClient(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv, _ := guarded(t, f, Options{Limiter: clientlimit.New(clientlimit.Options{MaxStreams: 1})})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`
	first := postInBackground(srv+"/mcp", body, bearer(ciToken)...)
	c := f.next(t) // the first is open at the child
	if resp := post(t, srv+"/mcp", "application/json", body, bearer(ciToken)...); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("second stream: %d", resp.StatusCode)
	}
	nothingReached(t, f)
	// Another client is not held back by this one.
	go func() { f.next(t).finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), nil) }()
	if resp := post(t, srv+"/mcp", "application/json", body, bearer(adminToken)...); resp.StatusCode != 200 {
		t.Errorf("another client: %d", resp.StatusCode)
	}
	c.finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), nil)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// Guessing tokens counts against the address's rate: past it, even a
// wrong token gets 429, not a verdict.
func TestFailedAttemptsAreLimited(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv, _ := guarded(t, f, Options{Limiter: clientlimit.New(clientlimit.Options{Rate: 1e-9, Burst: 2})})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`
	var got []int
	for range 4 {
		got = append(got, post(t, srv+"/mcp", "application/json", body, bearer("guess-0123456789abcdef")...).StatusCode)
	}
	if want := []int{401, 401, 429, 429}; !slices.Equal(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
	nothingReached(t, f)
}

// A client over IPv6 is its /64: it cannot take a fresh address for each
// try.
func TestIPv6ClientIsItsNetwork(t *testing.T) {
	for addr, want := range map[string]string{
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"2001:db8:1:2::ffff":   "2001:db8:1:2::/64",
		"192.0.2.7":            "192.0.2.7",
		"not an address":       "not an address",
	} {
		if got := network(addr); got != want {
			t.Errorf("network(%q) = %q, want %q", addr, got, want)
		}
	}
}

func TestClip(t *testing.T) {
	long := strings.Repeat("é", maxLogged) // two bytes each
	if got := clip(long); len(got) > maxLogged+len("…") || !strings.HasSuffix(got, "…") || !utf8.ValidString(got) {
		t.Errorf("clip: %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if clip("echo") != "echo" {
		t.Error("a short name was changed")
	}
}

// A request refused before it was read gets one line, its access line, at
// info, saying why: credentials (with the verifier's words), the rate or
// the streams a client may have (with the key it counted against), and
// for a rate reached by wrong tokens, that the credentials were invalid.
func TestRefusalsAreOneLineSayingWhy(t *testing.T) {
	t.Parallel()
	lines := func(t *testing.T, logs *syncBuffer, n int) []map[string]any {
		t.Helper()
		text := logs.waitFor(t, func(text string) bool { return strings.Count(text, `"msg":"http request"`) >= n })
		var out []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			if rec["level"] == "INFO" && rec["msg"] != "audit" {
				out = append(out, rec)
			}
		}
		// In the order the requests came: a request's line is written
		// once its answer is out, and the client's next request may be
		// logged first. Request ids sort as they were given.
		slices.SortFunc(out, func(a, b map[string]any) int {
			return strings.Compare(fmt.Sprint(a["request_id"]), fmt.Sprint(b["request_id"]))
		})
		return out
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`
	t.Run("wrong tokens, then the rate", func(t *testing.T) {
		t.Parallel()
		srv, logs := guarded(t, newFake(), Options{Limiter: clientlimit.New(clientlimit.Options{Rate: 1e-9, Burst: 2})})
		for range 3 {
			post(t, srv+"/mcp", "application/json", body, bearer("guess-0123456789abcdef")...)
		}
		got := lines(t, logs, 3)
		if len(got) != 3 {
			t.Fatalf("%d lines at info for 3 refused requests, want 3: %v", len(got), got)
		}
		for i, want := range []map[string]any{
			{"status": 401.0, "refused": "unauthorized"},
			{"status": 401.0, "refused": "unauthorized"},
			{"status": 429.0, "refused": "rate_limited", "limit_key": "addr:127.0.0.1", "credentials": "invalid"},
		} {
			for k, v := range want {
				if got[i][k] != v {
					t.Errorf("line %d: %s = %v, want %v: %v", i, k, got[i][k], v, got[i])
				}
			}
		}
		if why, _ := got[0]["why"].(string); why == "" {
			t.Errorf("the 401's line does not say why: %v", got[0])
		}
	})
	t.Run("a caller over its rate", func(t *testing.T) {
		t.Parallel()
		f := newFake()
		srv, logs := guarded(t, f, Options{Limiter: clientlimit.New(clientlimit.Options{Rate: 1e-9, Burst: 1})})
		go func() { f.next(t).finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), nil) }()
		post(t, srv+"/mcp", "application/json", body, bearer(ciToken)...)
		post(t, srv+"/mcp", "application/json", body, bearer(ciToken)...)
		got := lines(t, logs, 1) // the call's own access line is at debug
		if len(got) != 1 || got[0]["status"] != 429.0 || got[0]["refused"] != "rate_limited" || got[0]["limit_key"] != "token:ci" {
			t.Errorf("want one line at info besides the audit, the 429 naming token:ci: %v", got)
		}
	})
}

// TestKeysUnavailable: a JWT that cannot be checked because the issuer's
// keys cannot be fetched gets 503 with Retry-After and -32000, as the
// gateway's other outages do, and no invalid_token challenge: that would
// tell the client to throw its token away over the server's own outage.
// A static token is still served.
func TestKeysUnavailable(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	t.Cleanup(down.Close)
	a, err := auth.New(auth.Options{Tokens: []string{"ci:" + ciToken},
		OAuth: &auth.OAuth{Issuer: down.URL, Resource: "https://mcp.example.com/mcp", JWKSURL: down.URL + "/jwks"}})
	if err != nil {
		t.Fatal(err)
	}
	f := newFake()
	srv := newServer(t, f, Options{Auth: a}).URL
	enc := base64.RawURLEncoding.EncodeToString
	jwt := enc([]byte(`{"alg":"RS256","typ":"JWT","kid":"k1"}`)) + "." + enc([]byte(`{"sub":"alice"}`)) + "." + enc([]byte("signature"))
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`
	for range 2 { // the fetch, then a request within its rate limit
		resp := post(t, srv+"/mcp", "application/json", call, bearer(jwt)...)
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("status %d, want 503", resp.StatusCode)
		}
		if c := resp.Header.Get("WWW-Authenticate"); c != "" {
			t.Errorf("WWW-Authenticate %q on a 503", c)
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 || s > 30 {
			t.Errorf("Retry-After %q, want the seconds until the keys may be fetched again", resp.Header.Get("Retry-After"))
		}
		if _, code := readRPCError(t, resp); code != jsonrpc.CodeUnavailable {
			t.Errorf("code %d, want %d", code, jsonrpc.CodeUnavailable)
		}
		nothingReached(t, f)
	}
	// The REST routes answer with their problem of the same kind.
	r := restRefused(t, f, restReq("POST", srv+"/v1/tools/echo", "application/json", `{"text":"a"}`, bearer(jwt)...))
	wantProblem(t, r, http.StatusServiceUnavailable, kindUnavailable)
	if c := r.header.Get("WWW-Authenticate"); c != "" || r.header.Get("Retry-After") == "1" {
		t.Errorf("REST: WWW-Authenticate %q, Retry-After %q", c, r.header.Get("Retry-After"))
	}
	go func() { f.next(t).finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), nil) }()
	if resp := post(t, srv+"/mcp", "application/json", call, bearer(ciToken)...); resp.StatusCode != http.StatusOK {
		t.Errorf("a static token during the outage: status %d", resp.StatusCode)
	}
}
