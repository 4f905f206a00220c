package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/clientlimit"
	"github.com/stdiomcp/gateway/metrics"
)

const init0326 = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// answerCalls plays the child for n calls (the bridge, which puts the
// client's id back, is not here: each is answered under that id), after a progress note when it asked for progress.
func answerCalls(t *testing.T, f *fakeBackend, n int) {
	t.Helper()
	for range n {
		c := f.next(t)
		if c.streams {
			c.note(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`)
		}
		c.finish([]byte(`{"jsonrpc":"2.0","id":`+string(c.req.ID)+`,"result":{"for":`+string(c.req.ID)+`}}`), nil)
	}
}

// batchMessages reads a batch's answer, a stream or an array, as its
// messages.
func batchMessages(t *testing.T, resp *http.Response) []map[string]any {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var raw []json.RawMessage
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for line := range strings.SplitSeq(string(body), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				raw = append(raw, json.RawMessage(d))
			}
		}
	} else if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("a batch's JSON answer is not an array: %v: %s", err, body)
	}
	var out []map[string]any
	for _, m := range raw {
		var v map[string]any
		if err := json.Unmarshal(m, &v); err != nil {
			t.Fatalf("message %s: %v", m, err)
		}
		out = append(out, v)
	}
	return out
}

// outcomes is each answer as "id:code" ("id:ok" for a result), sorted.
func outcomes(msgs []map[string]any) []string {
	var out []string
	for _, m := range msgs {
		code := "ok"
		if e, ok := m["error"].(map[string]any); ok {
			code = fmt.Sprint(e["code"])
		}
		out = append(out, fmt.Sprint(m["id"], ":", code))
	}
	slices.Sort(out)
	return out
}

// A 2025-03-26 client may batch (its revision says a server MUST take
// one): each message is served as it would be alone, the calls at once,
// and every request is answered under its own id, on one stream or, for a
// client that takes none, in one array; progress comes on the stream.
func TestBatch(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{})
	sid := initializeWith(t, f, srv.URL, init0326)
	batch := `[{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","_meta":{"progressToken":"p"}}},` +
		`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"y"}},` +
		`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{}},` +
		`[1],` +
		`{"jsonrpc":"2.0","id":4,"method":"logging/setLevel","params":{"level":"debug"}}]`
	for _, accept := range []string{"application/json, text/event-stream", "application/json"} {
		t.Run(accept, func(t *testing.T) {
			go answerCalls(t, f, 2)
			resp := post(t, srv.URL+"/mcp", "application/json", batch, "Mcp-Session-Id", sid, "Accept", accept)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if n := <-f.notified; n.Method != "notifications/roots/list_changed" {
				t.Errorf("the child was notified of %s", n.Method)
			}
			answers := map[string]any{}
			progress := 0
			for _, m := range batchMessages(t, resp) {
				switch {
				case m["method"] == "notifications/progress":
					progress++
				case m["error"] != nil:
					answers[fmt.Sprint(m["id"])] = m["error"].(map[string]any)["code"]
				default:
					answers[fmt.Sprint(m["id"])] = m["result"]
				}
			}
			want := map[string]any{
				"a":     map[string]any{"for": "a"},
				"2":     map[string]any{"for": 2.0},
				"3":     -32600.0, // initialize is never batched
				"<nil>": -32600.0, // [1] is not a message
				"4":     map[string]any{},
			}
			if fmt.Sprint(answers) != fmt.Sprint(want) {
				t.Errorf("answers %v, want %v", answers, want)
			}
			if streamed := accept != "application/json"; progress != map[bool]int{true: 1}[streamed] {
				t.Errorf("%d progress notes; a stream has the one sent, an array none", progress)
			}
			if resp.Header.Get("Mcp-Session-Id") == "" {
				t.Error("logging/setLevel in a batch gave the session no new id")
			}
		})
	}
}

// A batch with no request in it is answered 202 when every message was
// taken, and with the first refusal otherwise.
func TestBatchWithoutRequests(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{})
	resp := post(t, srv.URL+"/mcp", "application/json", `[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`)
	if resp.StatusCode != 202 {
		t.Fatalf("notifications only: status %d, want 202", resp.StatusCode)
	}
	for range 2 {
		<-f.notified
	}
	resp = post(t, srv.URL+"/mcp", "application/json", `[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","method":"notifications/x","params":{"_meta":3}}]`)
	<-f.notified
	if id, code := readRPCError(t, resp); resp.StatusCode != 400 || code != -32602 || id != "" {
		t.Errorf("a bad notification in a batch: %d %d id %s, want 400 -32602 without an id", resp.StatusCode, code, id)
	}
}

// Batches are 2025-03-26's (and 2024-11-05's): a client of a later
// revision, said by its header or its session, is refused, as are an
// empty batch and one larger than the gateway takes.
func TestBatchRefused(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{})
	call := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	sid0618 := initializeWith(t, f, srv.URL, strings.Replace(init0326, "2025-03-26", "2025-06-18", 1))
	for _, c := range []struct {
		name, body string
		header     []string
		msg        string
	}{
		{"2025-06-18 header", "[" + call + "]", []string{"MCP-Protocol-Version", "2025-06-18"}, "not part of MCP 2025-06-18"},
		{"2026-07-28 header", "[" + call + "]", []string{"MCP-Protocol-Version", "2026-07-28"}, "not part of MCP 2026-07-28"},
		{"2025-06-18 session", "[" + call + "]", []string{"Mcp-Session-Id", sid0618}, "not part of MCP 2025-06-18"},
		{"empty", "[ ]", nil, "empty batch"},
		{"too large", "[" + strings.Repeat(call+",", maxBatch) + call + "]", nil, "at most 64"},
	} {
		resp := post(t, srv.URL+"/mcp", "application/json", c.body, c.header...)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 400 || !strings.Contains(string(body), c.msg) || !strings.Contains(string(body), "-32600") {
			t.Errorf("%s: %d %s, want 400 -32600 saying %q", c.name, resp.StatusCode, body, c.msg)
		}
	}
	select {
	case c := <-f.calls:
		t.Errorf("a refused batch reached the child: %s", c.req.Method)
	default:
	}
}

// Answers gathered into one array are one message, bounded as a child's
// answer is: those past the bound are errors in their place.
func TestBatchArrayIsBounded(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{MaxMessageBytes: 60})
	go answerCalls(t, f, 2) // each answer is some 45 bytes
	resp := post(t, srv.URL+"/mcp", "application/json", `[{"jsonrpc":"2.0","id":1,"method":"tools/call"},{"jsonrpc":"2.0","id":2,"method":"tools/call"}]`, "Accept", "application/json")
	codes := outcomes(batchMessages(t, resp))
	if len(codes) != 2 || !(strings.HasSuffix(codes[0], ":ok") != strings.HasSuffix(codes[1], ":ok")) || !strings.Contains(strings.Join(codes, " "), ":-32004") {
		t.Errorf("answers %v; want one answer and one -32004 under its id", codes)
	}
}

// A batch's stream is one stream open, whatever its calls stream.
func TestBatchIsOneStream(t *testing.T) {
	t.Parallel()
	f := newFake()
	m := metrics.New(1)
	srv := newServer(t, f, Options{Meter: m, Metrics: m.Handler()})
	open := func() string {
		t.Helper()
		r, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return regexp.MustCompile(`(?m)^gateway_sse_streams_open \S+$`).FindString(string(b))
	}
	resp := post(t, srv.URL+"/mcp", "application/json", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"a"}}},`+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"progressToken":"b"}}}]`, "Accept", "text/event-stream")
	calls := []*fakeCall{f.next(t), f.next(t)}
	for _, c := range calls {
		c.note(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"x","progress":1}}`)
	}
	events := bufio.NewScanner(resp.Body)
	for seen := 0; seen < 2 && events.Scan(); {
		if strings.HasPrefix(events.Text(), "data: ") {
			seen++
		}
	}
	if got := open(); got != "gateway_sse_streams_open 1" {
		t.Errorf("while a batch streams two calls' progress: %q, want 1", got)
	}
	for _, c := range calls {
		c.finish([]byte(`{"jsonrpc":"2.0","id":`+string(c.req.ID)+`,"result":{}}`), nil)
	}
	rest, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(rest), "stream open") {
		t.Errorf("the calls' streams said again that the stream is open: %s", rest)
	}
	if got := open(); got != "gateway_sse_streams_open 0" {
		t.Errorf("after the batch: %q, want 0", got)
	}
}

// Many calls over the client's limits at once are each refused under
// their ids, the last ones in the batch (and nothing the parts share is
// written without a lock, which -race checks); a notification is not
// answered.
func TestBatchManyOverTheLimits(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{Limiter: clientlimit.New(clientlimit.Options{MaxStreams: 1})})
	var msgs []string
	for i := range 8 {
		msgs = append(msgs, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call"}`, i))
	}
	msgs = append(msgs, `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	go answerCalls(t, f, 1) // the call that rides on the batch's own place
	resp := post(t, srv.URL+"/mcp", "application/json", "["+strings.Join(msgs, ",")+"]", "Accept", "application/json")
	refused := strings.Join(outcomes(batchMessages(t, resp)), " ")
	if refused != "0:ok 1:-32009 2:-32009 3:-32009 4:-32009 5:-32009 6:-32009 7:-32009" {
		t.Errorf("refused %v; want the last 7 calls, without a place, each under its id (the first rides on the batch's POST), and no answer to the notification", refused)
	}
}

// Another caller's session id tells a batch nothing of the session, its
// revision included: 404, as for any request.
func TestBatchOnAnotherCallersSession(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv, _ := guarded(t, f, Options{})
	go func() { f.next(t).finish([]byte(`{"jsonrpc":"2.0","id":0,"result":{}}`), nil) }()
	init := post(t, srv+"/mcp", "application/json", strings.Replace(init0326, "2025-03-26", "2025-06-18", 1), bearer(ciToken)...)
	sid := init.Header.Get("Mcp-Session-Id")
	resp := post(t, srv+"/mcp", "application/json", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, append(bearer(adminToken), "Mcp-Session-Id", sid)...)
	if body, _ := io.ReadAll(resp.Body); resp.StatusCode != 404 || strings.Contains(string(body), "2025-06-18") {
		t.Errorf("%d %s; want 404, naming no revision", resp.StatusCode, body)
	}
}

// A batch of very many tiny elements is refused without a span kept for
// each.
func TestBatchOfMillionsIsCheap(t *testing.T) {
	f := newFake()
	srv := newServer(t, f, Options{MaxBodyBytes: 4 << 20})
	body := "[" + strings.Repeat("0,", 1<<20) + "0]"
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp := post(t, srv.URL+"/mcp", "application/json", body)
	runtime.ReadMemStats(&after)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 400 || !strings.Contains(string(b), "a batch of 1048577 messages") {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("refusing a 2 MiB batch allocated %d MiB", alloc>>20)
	}
}

// A panic serving a message of a batch, on a goroutine of its own, is that
// message's -32603, not the end of the process; and its place among the
// client's open requests is given back.
func TestBatchPartPanics(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.panics = "boom"
	srv := newServer(t, f, Options{Logger: slog.New(slog.DiscardHandler), Limiter: clientlimit.New(clientlimit.Options{MaxStreams: 2})})
	for range 2 {
		resp := post(t, srv.URL+"/mcp", "application/json", `[{"jsonrpc":"2.0","id":1,"method":"tools/call"},{"jsonrpc":"2.0","id":2,"method":"tools/call"}]`, "Accept", "application/json")
		if codes := outcomes(batchMessages(t, resp)); strings.Join(codes, " ") != "1:-32603 2:-32603" {
			t.Fatalf("answers %v; want -32603 for each (and places to spare the second time)", codes)
		}
	}
}

// A panic once a message's stream has begun ends that stream with the
// message's -32603, on the batch's stream.
func TestBatchPartPanicsMidStream(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{Logger: slog.New(slog.DiscardHandler)})
	go func() {
		c := f.next(t)
		c.mu.Lock()
		c.panics = "boom"
		c.mu.Unlock()
		c.note(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`)
	}()
	resp := post(t, srv.URL+"/mcp", "application/json", `[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"progressToken":"p"}}}]`, "Accept", "text/event-stream")
	msgs := batchMessages(t, resp)
	if len(msgs) == 0 || fmt.Sprint(msgs[len(msgs)-1]["id"]) != "7" || msgs[len(msgs)-1]["error"] == nil {
		t.Errorf("messages %v; want the last one the call's error", msgs)
	}
}

// releaseSignal is a Limiter that says when a place is given back.
type releaseSignal struct {
	Limiter
	released chan struct{}
}

func (l releaseSignal) Open(key string) (func(), bool) {
	release, ok := l.Limiter.Open(key)
	if !ok {
		return release, ok
	}
	return func() { release(); l.released <- struct{}{} }, true
}

// A client that does not take a batch's array of answers is cut off at
// the client timeout, as for a call's answer, and its place given back.
func TestBatchArrayNobodyReads(t *testing.T) {
	t.Parallel()
	f := newFake()
	lim := releaseSignal{clientlimit.New(clientlimit.Options{MaxStreams: 4}), make(chan struct{}, 4)}
	srv := newServer(t, f, Options{ClientTimeout: 300 * time.Millisecond, Limiter: lim})
	conn := dial(t, srv)
	body := `[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]`
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	f.next(t).finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{"text":"`+strings.Repeat("x", 32<<20)+`"}}`), nil)
	select {
	case <-lim.released:
	case <-time.After(10 * time.Second):
		t.Fatal("a batch whose array nobody reads still holds its place")
	}
}

// A batch sent while the gateway stops is refused whole, as a POST is, so
// that it is sent elsewhere.
func TestBatchWhileStopping(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.draining = true
	srv := newServer(t, f, Options{})
	resp := post(t, srv.URL+"/mcp", "application/json", `[{"jsonrpc":"2.0","id":1,"method":"tools/call"}]`)
	if _, code := readRPCError(t, resp); resp.StatusCode != 503 || code != -32005 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("%d %d Retry-After %q; want 503 -32005 with Retry-After", resp.StatusCode, code, resp.Header.Get("Retry-After"))
	}
}

// A client that goes cancels every call of its batch.
func TestBatchClientGoneCancelsItsCalls(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	req := newPost(srv.URL+"/mcp", "application/json", `[{"jsonrpc":"2.0","id":1,"method":"tools/call"},{"jsonrpc":"2.0","id":2,"method":"tools/call"}]`).WithContext(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	c1, c2 := f.next(t), f.next(t)
	cancel()
	for _, c := range []*fakeCall{c1, c2} {
		if cause := c.waitEnded(t); cause == nil {
			t.Errorf("call %s did not end with its client", c.req.ID)
		}
	}
	<-done
}

// The calls of a batch count against the client's limits, each as a POST
// of its own would: one over them is refused under its own id, and one
// that is answered gives its place back while the others run.
func TestBatchCountsAgainstLimits(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{Limiter: clientlimit.New(clientlimit.Options{MaxStreams: 2})})
	three := `[{"jsonrpc":"2.0","id":1,"method":"tools/call"},{"jsonrpc":"2.0","id":2,"method":"tools/call"},{"jsonrpc":"2.0","id":3,"method":"tools/call"}]`
	// On a stream, so that the refusal is seen while the two let in are
	// held (answered, they would give their places back to the third).
	resp := post(t, srv.URL+"/mcp", "application/json", three, "Accept", "text/event-stream")
	held := []*fakeCall{f.next(t), f.next(t)}
	events := bufio.NewScanner(resp.Body)
	for events.Scan() {
		if line := events.Text(); strings.HasPrefix(line, "data: ") {
			if !strings.Contains(line, `"code":-32009`) || strings.Contains(line, `"id":`+string(held[0].req.ID)) || strings.Contains(line, `"id":`+string(held[1].req.ID)) {
				t.Errorf("the first answer %s, want the third call's refusal, -32009 under its id", line)
			}
			break
		}
	}
	for _, c := range held {
		c.finish([]byte(`{"jsonrpc":"2.0","id":`+string(c.req.ID)+`,"result":{}}`), nil)
	}
	if rest, _ := io.ReadAll(resp.Body); strings.Count(string(rest), "data: ") != 2 {
		t.Errorf("after the refusal: %s; want the two answers", rest)
	}

	// The first call rides on the batch's own place; the second has one
	// of its own, free again once it is answered (which the stream shows:
	// the place is given back before the answer goes on).
	resp = post(t, srv.URL+"/mcp", "application/json", `[{"jsonrpc":"2.0","id":1,"method":"tools/call"},{"jsonrpc":"2.0","id":2,"method":"tools/call"}]`, "Accept", "text/event-stream")
	rider, second := f.next(t), f.next(t)
	if string(rider.req.ID) == "2" {
		rider, second = second, rider
	}
	second.finish([]byte(`{"jsonrpc":"2.0","id":2,"result":{}}`), nil)
	events = bufio.NewScanner(resp.Body)
	for events.Scan() && !strings.HasPrefix(events.Text(), "data: ") {
	}
	go answerCalls(t, f, 1)
	if r := post(t, srv.URL+"/mcp", "application/json", `{"jsonrpc":"2.0","id":9,"method":"tools/call"}`); r.StatusCode != 200 {
		t.Errorf("a call beside a batch whose second call was answered: %d, want 200", r.StatusCode)
	}
	rider.finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), nil)
	io.Copy(io.Discard, resp.Body)
}
