package main

// The attack suite: each row sends what an attacker would to the built
// gateway in front of the real demo child, and checks both the answer and
// that nothing the row is meant to stop reached the child. The demo
// records every request it reads; its stdin is ordered, so once the
// watcher's own call after a row is answered, anything the row had got
// through would already be on the record.

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// target is a gateway under attack, and what its child has seen so far.
type target struct {
	g        *gateway
	watch    string       // the token the watcher calls with; "" without authentication
	attacker *http.Client // no keep-alive: no row inherits another's connection
	watcher  *http.Client // from 127.0.0.2, so that limits keyed on the address never count its calls as the attacker's
	seen     int          // requests the child had received at the last look
}

func newTarget(t *testing.T, g *gateway, watch string) *target {
	t.Helper()
	tg := &target{g: g, watch: watch, attacker: oneShotClient(nil), watcher: oneShotClient(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)})}
	g.WaitReady()
	tg.seen = len(tg.received(t).Requests)
	return tg
}

func oneShotClient(local *net.TCPAddr) *http.Client {
	d := &net.Dialer{}
	if local != nil {
		d.LocalAddr = local
	}
	// The timeout only keeps a gateway that hangs from hanging the test.
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// addr is the gateway's host:port, for raw connections.
func (tg *target) addr() string { return strings.TrimPrefix(tg.g.URL, "http://") }

// reply is an HTTP answer, with the JSON-RPC error code of its body.
type reply struct {
	status int
	header http.Header
	body   []byte
	code   int // 0 when the body is not a JSON-RPC error
}

func newReply(status int, header http.Header, body []byte) reply {
	var e struct {
		Error *struct{ Code int } `json:"error"`
	}
	r := reply{status: status, header: header, body: body}
	if json.Unmarshal(body, &e) == nil && e.Error != nil {
		r.code = e.Error.Code
	}
	return r
}

func (r reply) String() string {
	b := r.body
	if len(b) > 300 {
		b = append(b[:300:300], "..."...)
	}
	return fmt.Sprintf("%d %s (WWW-Authenticate %q)", r.status, b, r.header.Get("WWW-Authenticate"))
}

// is checks the status, the JSON-RPC error code (0: none) and what the
// WWW-Authenticate header holds.
func (r reply) is(t *testing.T, status, code int, challenge ...string) {
	t.Helper()
	if r.status != status || r.code != code {
		t.Errorf("answer %v; want status %d with code %d", r, status, code)
	}
	for _, c := range challenge {
		if !strings.Contains(r.header.Get("WWW-Authenticate"), c) {
			t.Errorf("WWW-Authenticate %q lacks %s", r.header.Get("WWW-Authenticate"), c)
		}
	}
}

func do(t *testing.T, c *http.Client, req *http.Request) reply {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return newReply(resp.StatusCode, resp.Header, b)
}

// send posts body to /mcp as the attacker, with the token (if any) and
// header's name/value pairs ("Host" sets the request's host). A chunked
// body is sent without a length.
func (tg *target) send(t *testing.T, token string, header []string, body string, chunked bool) reply {
	t.Helper()
	r, err := tg.post(token, header, body, chunked)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// post is send for goroutines other than the test's.
func (tg *target) post(token string, header []string, body string, chunked bool) (reply, error) {
	var rd io.Reader = strings.NewReader(body)
	if chunked {
		rd = io.MultiReader(rd) // hides the length, so the client sends it chunked
	}
	req, err := http.NewRequest(http.MethodPost, tg.g.URL+"/mcp", rd)
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := tg.attacker.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return newReply(resp.StatusCode, resp.Header, b), nil
}

// received asks the demo, as the watcher, what it has received.
func (tg *target) received(t *testing.T) received {
	t.Helper()
	return tg.receivedWith(t, `{}`)
}

// receivedWith is received with the tool's arguments (such as
// wait_cancelled, to wait until the demo has seen that many).
func (tg *target) receivedWith(t *testing.T, args string) received {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, tg.g.URL+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":"rcv","method":"tools/call","params":{"name":"received","arguments":`+args+`}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if tg.watch != "" {
		req.Header.Set("Authorization", "Bearer "+tg.watch)
	}
	r := do(t, tg.watcher, req)
	var resp struct {
		Result struct {
			StructuredContent received `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(r.body, &resp); r.status != http.StatusOK || err != nil {
		t.Fatalf("asking the demo what it received: %v", r)
	}
	return resp.Result.StructuredContent
}

// reached checks that what the child received since the last look is
// want (the tool of a tools/call, else the method), in any order, then
// the watcher's own call.
func (tg *target) reached(t *testing.T, want ...string) {
	t.Helper()
	r := tg.received(t)
	if tg.seen > len(r.Requests) {
		t.Fatalf("the demo's record shrank from %d to %d requests", tg.seen, len(r.Requests))
	}
	var got []string
	for _, q := range r.Requests[tg.seen:] {
		name := q.Method
		if q.Method == "tools/call" {
			name = q.Tool
		}
		got = append(got, name)
	}
	tg.seen = len(r.Requests)
	if len(got) == 0 || got[len(got)-1] != "received" {
		t.Fatalf("the child's record does not end with the watcher's call: %q", got)
	}
	got = got[:len(got)-1]
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("the child received %q; want %q", got, want)
	}
}

// attack is one row: a POST to /mcp and what must come of it.
type attack struct {
	name    string
	token   string
	header  []string // name/value pairs; "Host" sets the request's host
	body    string
	chunked bool
	status  int
	code    int      // the JSON-RPC error code; 0: none
	auth    []string // what WWW-Authenticate holds
	reached []string // what reaches the child (see target.reached); nil: nothing
	holds   string   // what the answer's body holds, when it matters
}

func (tg *target) run(t *testing.T, rows []attack) {
	t.Helper()
	for _, a := range rows {
		t.Run(a.name, func(t *testing.T) {
			r := tg.send(t, a.token, a.header, a.body, a.chunked)
			r.is(t, a.status, a.code, a.auth...)
			if !strings.Contains(string(r.body), a.holds) {
				t.Errorf("the answer (%d bytes) lacks %.40q", len(r.body), a.holds)
			}
			tg.reached(t, a.reached...)
		})
	}
}

// call is a tools/call body.
func call(tool, args string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
}

// request is a body for method with params.
func request(method, params string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":` + params + `}`
}

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// modernCall is a 2026-07-28 tools/call body; its headers are
// modernHeaders with the Mcp-Name the client claims.
func modernCall(tool string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"text":"hi"},` + modernMeta + `}}`
}

func modernHeaders(name string) []string {
	return []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", name}
}

// secret is a fresh random credential.
func secret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// writeAtomically replaces path's content the way a Secret mount does:
// the watcher never reads a half-written file.
func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// neverLogged checks that none of the secrets appears anywhere in the
// gateway's log.
// It stops the gateway first: a call's lines are written after its
// answer has left, and a stopped gateway has written them all.
func neverLogged(t *testing.T, g *gateway, secrets ...string) {
	t.Helper()
	text := stoppedLog(t, g)
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Errorf("the gateway's log holds the credential %q", s)
		}
	}
}

// stoppedLog stops the gateway and returns its whole log.
func stoppedLog(t *testing.T, g *gateway) string {
	t.Helper()
	g.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.Done:
	case <-time.After(30 * time.Second):
		g.Cmd.Process.Kill()
		t.Fatal("the gateway did not stop on SIGTERM")
	}
	return g.Logs.Text()
}

func msgIs(msg string) func(logRecord) bool {
	return func(r logRecord) bool { return r["msg"] == msg }
}

// Static tokens: none, a wrong one, and one revoked by changing the file,
// which the gateway re-reads on SIGHUP (polling is off, so only the signal
// can have done it) and, in the other gateway, by polling.
func TestAttackTokens(t *testing.T) {
	t.Parallel()
	for _, reload := range []string{"SIGHUP", "poll"} {
		t.Run(reload, func(t *testing.T) {
			t.Parallel()
			alice, bob := secret(t), secret(t)
			file := filepath.Join(t.TempDir(), "tokens")
			writeAtomically(t, file, "# callers\nalice:"+alice+"\nbob:"+bob+"\n")
			poll := "1h"
			if reload == "poll" {
				poll = "200ms"
			}
			g := startGateway(t, []string{"GATEWAY_AUTH_TOKENS_FILE=" + file, "GATEWAY_AUTH_POLL=" + poll})
			tg := newTarget(t, g, alice)
			echo := call("echo", `{"text":"hi"}`)
			tg.run(t, []attack{
				{name: "no token", body: echo, status: 401, code: -32007, auth: []string{`Bearer realm="mcp"`}},
				{name: "wrong token", token: "not-" + alice, body: echo, status: 401, code: -32007, auth: []string{`error="invalid_token"`}},
				{name: "another scheme", header: []string{"Authorization", "Basic " + alice}, body: echo, status: 401, code: -32007},
				{name: "two bearer tokens", header: []string{"Authorization", "Bearer " + alice + " " + bob}, body: echo, status: 400, code: -32600, auth: []string{`error="invalid_request"`}},
				{name: "bob before the change", token: bob, body: echo, status: 200, reached: []string{"echo"}},
			})
			if t.Failed() {
				return
			}
			// Bob's stream, open when his token is revoked, must end then.
			stream := openStream(t, tg, bob)
			tg.reached(t, "slow")
			writeAtomically(t, file, "alice:"+alice+"\n")
			if reload == "SIGHUP" {
				t.Run("file changed, no signal yet", func(t *testing.T) {
					tg.send(t, bob, nil, echo, false).is(t, 200, 0)
					tg.reached(t, "echo")
				})
				if err := g.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
					t.Fatal(err)
				}
			}
			rec := g.Logs.Wait(t, msgIs("auth: tokens and policy reloaded"))
			if rec["tokens"] != 1.0 {
				t.Fatalf("reloaded %v tokens; want 1", rec["tokens"])
			}
			t.Run("stream of a revoked token", func(t *testing.T) {
				if last := <-stream; !strings.Contains(last, `"code":-32007`) {
					t.Errorf("the stream's last event is %.200q; want a -32007 error", last)
				}
				// The child is told to stop the call (the only call
				// cancelled here).
				r := tg.receivedWith(t, `{"wait_cancelled":1}`)
				if n := len(r.Cancellations); n == 0 || !r.Cancellations[n-1].Running {
					t.Errorf("the child's cancellations: %+v", r.Cancellations)
				}
				tg.seen = len(r.Requests)
			})
			tg.run(t, []attack{
				{name: "revoked token", token: bob, body: echo, status: 401, code: -32007, auth: []string{`error="invalid_token"`}},
				{name: "kept token", token: alice, body: echo, status: 200, reached: []string{"echo"}},
			})
			if reload == "SIGHUP" {
				// Bob back, but named twice: the file no longer parses, and
				// what was in force stays so.
				writeAtomically(t, file, "alice:"+alice+"\nalice:"+bob+"\n")
				if err := g.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
					t.Fatal(err)
				}
				g.Logs.Wait(t, msgIs("SIGHUP: reloading the tokens and policy failed; the previous ones stay in force"))
				tg.run(t, []attack{
					{name: "token of a file that failed to parse", token: bob, body: echo, status: 401, code: -32007},
					{name: "token in force before the bad file", token: alice, body: echo, status: 200, reached: []string{"echo"}},
				})
			}
			neverLogged(t, g, alice, bob)
		})
	}
}

// openStream starts a long call of the demo's slow tool with progress, as
// token's caller, and returns once the first progress event is in; the
// channel then gives the stream's last data line when it ends.
func openStream(t *testing.T, tg *target, token string) <-chan string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, tg.g.URL+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"slow","arguments":{"duration_ms":600000,"interval_ms":200},"_meta":{"progressToken":"p"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() && !strings.HasPrefix(lines.Text(), "data:") {
	}
	last := make(chan string, 1)
	go func() {
		defer resp.Body.Close()
		var data string
		for lines.Scan() {
			if strings.HasPrefix(lines.Text(), "data:") {
				data = lines.Text()
			}
		}
		last <- data
	}()
	return last
}

// A 2025 session belongs to the caller that made it.
func TestAttackSessionOfAnotherCaller(t *testing.T) {
	t.Parallel()
	alice, bob := secret(t), secret(t)
	g := startGateway(t, []string{"GATEWAY_AUTH_TOKENS=alice:" + alice + ",bob:" + bob})
	tg := newTarget(t, g, alice)
	init := tg.send(t, alice, nil, request("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"a","version":"1"}}`), false)
	init.is(t, 200, 0)
	sid := init.header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("no session id: %v", init)
	}
	session := []string{"Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-06-18"}
	tg.run(t, []attack{
		{name: "another caller's session", token: bob, header: session, body: call("echo", `{"text":"hi"}`), status: 404, code: -32600},
		{name: "its own session", token: alice, header: session, body: call("echo", `{"text":"hi"}`), status: 200, reached: []string{"echo"}},
	})
	neverLogged(t, g, alice, bob, sid)
}

// A caller allowed only echo, and the requests that try to get past
// that: other tools (with a header that lies about the body), resources,
// prompts, methods the policy cannot judge, and bodies that name their
// target twice so that the gateway and the child might read different
// ones. Then the audit lines those calls left.
func TestAttackPolicy(t *testing.T) {
	t.Parallel()
	watch, ci := secret(t), secret(t)
	policy := filepath.Join(t.TempDir(), "policy.json")
	writeAtomically(t, policy, `{"tokens":{"watch":{"tools":["*"],"resources":["*"],"prompts":["*"]},"ci":{"tools":["echo"]}}}`)
	g := startGateway(t, []string{"GATEWAY_AUTH_TOKENS=watch:" + watch + ",ci:" + ci, "GATEWAY_AUTH_POLICY_FILE=" + policy})
	tg := newTarget(t, g, watch)
	denied := []string{`error="insufficient_scope"`}
	const tail = `"arguments":{"text":"hi"}}}`
	tg.run(t, []attack{
		{name: "another tool", token: ci, body: call("slow", `{}`), status: 403, code: -32008, auth: denied},
		{name: "another tool, Mcp-Name says echo", token: ci, header: []string{"Mcp-Name", "echo"}, body: call("slow", `{}`), status: 403, code: -32008, auth: denied},
		{name: "another tool, 2026-07-28 headers say echo", token: ci, header: modernHeaders("echo"), body: modernCall("slow"), status: 403, code: -32008, auth: denied},
		{name: "a resource", token: ci, body: request("resources/read", `{"uri":"test://static-text"}`), status: 403, code: -32008, auth: denied},
		{name: "a prompt", token: ci, body: request("prompts/get", `{"name":"test_simple_prompt"}`), status: 403, code: -32008, auth: denied},
		{name: "an unknown method", token: ci, body: request("evil/method", `{"name":"echo"}`), status: 403, code: -32008, auth: denied},
		{name: "a completion of a prompt", token: ci, body: request("completion/complete", `{"ref":{"type":"ref/prompt","name":"test_prompt_with_arguments"},"argument":{"name":"a","value":"x"}}`), status: 403, code: -32008, auth: denied},

		{name: "name twice", token: ci, body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","name":"slow",` + tail, status: 400, code: -32600},
		{name: "name and Name", token: ci, body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","Name":"slow",` + tail, status: 400, code: -32600},
		{name: "name and an escaped name", token: ci, body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","n\u0061me":"slow",` + tail, status: 400, code: -32600},
		{name: "NAME alone", token: ci, body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"NAME":"slow",` + tail, status: 400, code: -32600},
		{name: "id twice", token: ci, body: `{"jsonrpc":"2.0","id":7,"id":8,"method":"tools/call","params":{"name":"echo",` + tail, status: 400, code: -32600},
		{name: "method twice", token: ci, body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","method":"resources/read","params":{"name":"echo","uri":"test://static-text",` + tail, status: 400, code: -32600},
		{name: "params twice", token: ci, body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo",` + tail[:len(tail)-1] + `,"params":{"name":"slow"}}`, status: 400, code: -32600},
		{name: "Method beside method", token: ci, body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","Method":"resources/read","params":{"name":"echo",` + tail, status: 400, code: -32600},

		{name: "the allowed tool", token: ci, body: call("echo", `{"text":"hi"}`), status: 200, reached: []string{"echo"}},
	})
	t.Run("tools/list shows only echo", func(t *testing.T) {
		r := tg.send(t, ci, nil, request("tools/list", `{}`), false)
		r.is(t, 200, 0)
		var list struct {
			Result struct {
				Tools []struct{ Name string } `json:"tools"`
			} `json:"result"`
		}
		if err := json.Unmarshal(r.body, &list); err != nil || len(list.Result.Tools) != 1 || list.Result.Tools[0].Name != "echo" {
			t.Errorf("tools/list for a caller allowed echo: %v", r)
		}
		tg.reached(t, "tools/list")
	})

	t.Run("audit", func(t *testing.T) {
		auditOf := func(tool, outcome string) logRecord {
			return g.Logs.Wait(t, func(r logRecord) bool {
				return r["msg"] == "audit" && r["who"] == "token:ci" && r["tool"] == tool && r["outcome"] == outcome
			})
		}
		for _, c := range []struct {
			tool, outcome string
			status        float64
		}{{"slow", "denied", 403}, {"echo", "ok", 200}} {
			rec := auditOf(c.tool, c.outcome)
			in, _ := rec["bytes_in"].(float64)
			out, _ := rec["bytes_out"].(float64)
			if rec["method"] != "tools/call" || rec["status"] != c.status || in <= 0 || out <= 0 {
				t.Errorf("audit line of a %s call: %v", c.outcome, rec)
			}
		}
		readOf := func(r logRecord) bool { return r["msg"] == "audit" && r["resource"] == "test://static-text" }
		g.Logs.Wait(t, readOf)
		if rec := g.Logs.Find(readOf); len(rec) != 1 || rec[0]["outcome"] != "denied" {
			t.Errorf("audit lines of the denied resources/read: %v", rec)
		}
	})
	neverLogged(t, g, watch, ci)
}
