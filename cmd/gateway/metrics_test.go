package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The metrics tests scrape a live gateway between the steps of a scenario
// and check that each series moves by what the step should move it by,
// and that the others stay put.

// scrape is one parse of /metrics.
type scrape map[string]*dto.MetricFamily

func scrapeAt(t *testing.T, url string) scrape {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d", url, resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return fams
}

// value is the series' value (a histogram's: its count; name_sum for its
// sum), and whether it exists. labels are name="value" pairs in name
// order, comma-separated, as the text format writes them.
func (s scrape) value(name, labels string) (float64, bool) {
	fam, sum := s[name], false
	if fam == nil {
		if base, ok := strings.CutSuffix(name, "_sum"); ok {
			fam, sum = s[base], true
		} else if base, ok := strings.CutSuffix(name, "_count"); ok {
			fam = s[base]
		}
	}
	for _, m := range fam.GetMetric() {
		var pairs []string
		for _, l := range m.GetLabel() {
			pairs = append(pairs, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
		}
		slices.Sort(pairs)
		if strings.Join(pairs, ",") != labels {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil && sum:
			return m.GetHistogram().GetSampleSum(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// expect is what a step does to one series: it moves by by since the
// scrape before the step (at least by, with atLeast), or, with is, stands
// at by.
type expect struct {
	name, labels string
	by           float64
	atLeast, is  bool
}

func (e expect) String() string {
	verb := "moves by"
	switch {
	case e.is:
		verb = "is"
	case e.atLeast:
		verb = "moves by at least"
	}
	return fmt.Sprintf("%s{%s} %s %v", e.name, e.labels, verb, e.by)
}

func (e expect) holds(before, now scrape) (got float64, ok bool) {
	v, present := now.value(e.name, e.labels)
	if !present {
		return 0, false
	}
	if e.is {
		return v, v == e.by
	}
	was, _ := before.value(e.name, e.labels)
	switch d := v - was; {
	case e.atLeast:
		return d, d >= e.by
	default:
		return d, d == e.by
	}
}

// metricsTracker scrapes one gateway and checks steps against the scrape
// before them.
type metricsTracker struct {
	t    *testing.T
	url  string
	last scrape
}

func trackMetrics(t *testing.T, url string) *metricsTracker {
	return &metricsTracker{t: t, url: url, last: scrapeAt(t, url)}
}

// step checks that what a step should do has happened, then takes the
// scrape the next step is measured from. A count moves before the client
// sees its call end, but an HTTP request is counted as its handler
// returns, which a client that has read its answer may see first; so the
// scrapes are repeated, a bounded number of times, until all hold. A
// series that moves too far never holds.
func (m *metricsTracker) step(name string, want ...expect) scrape {
	m.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		now := scrapeAt(m.t, m.url)
		var failed []string
		for _, e := range want {
			if got, ok := e.holds(m.last, now); !ok {
				failed = append(failed, fmt.Sprintf("%v: got %v", e, got))
			}
		}
		if len(failed) == 0 {
			m.last = now
			return now
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("after %s:\n%s", name, strings.Join(failed, "\n"))
		}
	}
}

func moves(name, labels string, by float64) expect { return expect{name: name, labels: labels, by: by} }
func movesAtLeast(name, labels string, by float64) expect {
	return expect{name: name, labels: labels, by: by, atLeast: true}
}
func is(name, labels string, v float64) expect {
	return expect{name: name, labels: labels, by: v, is: true}
}

const (
	okCalls      = `outcome="ok",reason=""`
	mcpPost      = `method="POST",route="/mcp"`
	mcpPost200   = `code="200",method="POST",route="/mcp"`
	worker0      = `worker="0"`
	demoEcho     = `{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	demoSlowWith = `{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"slow","arguments":{"duration_ms":%d,"interval_ms":%d},"_meta":{"progressToken":"p"}}}`
)

// The series of a gateway serving a well-behaved child move with the
// calls, streams, listens and restarts they count.
func TestMetricsFollowTheGateway(t *testing.T) {
	t.Parallel()
	// One slot and room for one call in the queue, so that a call can be
	// made to wait and another refused; a long restart delay, so that the
	// child can be seen down.
	g := startGateway(t, []string{"GATEWAY_MAX_IN_FLIGHT=1", "GATEWAY_QUEUE_SIZE=1",
		"GATEWAY_RESTART_DELAY_MIN=10s", "GATEWAY_RESTART_DELAY_MAX=10s"})
	g.WaitReady()
	m := trackMetrics(t, g.URL+"/metrics")
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes",
		"gateway_http_requests_total", "gateway_http_request_duration_seconds", "gateway_calls_total",
		"gateway_progress_events_total", "gateway_child_stdout_bytes_total", "gateway_child_message_size_bytes",
		"gateway_sse_streams_open", "gateway_calls_in_flight", "gateway_calls_queued", "gateway_listens_open",
		"gateway_child_up", "gateway_child_info", "gateway_child_restarts_total", "gateway_late_answers_dropped_total",
		"gateway_unknown_answers_dropped_total", "gateway_internal_errors_total", "gateway_sessions_live"} {
		if m.last[name] == nil {
			t.Errorf("/metrics has no %s", name)
		}
	}
	m.step("start",
		is("gateway_child_up", worker0, 1), is("gateway_child_info", `era="legacy",worker="0"`, 1),
		is("gateway_child_restarts_total", worker0, 0), is("gateway_calls_in_flight", worker0, 0),
		is("gateway_calls_queued", "", 0), is("gateway_listens_open", "", 0), is("gateway_sse_streams_open", "", 0))

	// A call answered with a result: one line from the child.
	before := m.last
	rpcJSON(t, g.URL, fmt.Sprintf(demoEcho, "ok"), &struct{}{})
	now := m.step("a call",
		moves("gateway_calls_total", okCalls, 1), moves("gateway_http_requests_total", mcpPost200, 1),
		moves("gateway_http_request_duration_seconds", mcpPost, 1), moves("gateway_child_message_size_bytes", "", 1))
	bytes := func(s scrape) (float64, float64) {
		b, _ := s.value("gateway_child_stdout_bytes_total", worker0)
		sum, _ := s.value("gateway_child_message_size_bytes_sum", "")
		return b, sum
	}
	b0, s0 := bytes(before)
	b1, s1 := bytes(now)
	if b1-b0 <= 0 || b1-b0 != s1-s0 {
		t.Errorf("the answer's line moved the stdout bytes by %v and the sizes' sum by %v; want the same, above 0", b1-b0, s1-s0)
	}

	// The child's JSON-RPC error.
	var e rpcError
	rpcJSON(t, g.URL, `{"jsonrpc":"2.0","id":"err","method":"no/such/method"}`, &e)
	if e.Error.Code != -32601 || e.Error.Data.Source == "gateway" {
		t.Fatalf("answer %+v, want the child's -32601", e)
	}
	m.step("the child's error",
		moves("gateway_calls_total", `outcome="child_error",reason=""`, 1), moves("gateway_calls_total", okCalls, 0),
		moves("gateway_http_requests_total", mcpPost200, 1))

	// Progress relayed on a stream that is read to its end.
	resp := rpc(t, context.Background(), g.URL, fmt.Sprintf(demoSlowWith, "progress", 250, 50))
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	m.step("a call with progress",
		moves("gateway_progress_events_total", `fate="relayed"`, 5), moves("gateway_progress_events_total", `fate="coalesced"`, 0),
		moves("gateway_progress_events_total", `fate="dropped"`, 0), moves("gateway_calls_total", okCalls, 1),
		moves("gateway_child_message_size_bytes", "", 6), is("gateway_sse_streams_open", "", 0))

	// A call holds the one slot, a second waits in the queue, a third
	// finds the queue full; the first client leaves, and the second call
	// goes through.
	ctx, leave := context.WithCancel(context.Background())
	resp = rpc(t, ctx, g.URL, fmt.Sprintf(demoSlowWith, "holds", 60000, 20))
	if ev := newSSEReader(resp.Body).next(); !strings.Contains(ev, "notifications/progress") {
		t.Fatalf("first event = %q, want progress", ev)
	}
	m.step("a call in flight", is("gateway_calls_in_flight", worker0, 1), is("gateway_sse_streams_open", "", 1))
	queued := make(chan int, 1)
	go func() {
		// Not rpc: a goroutine must not end the test.
		resp, err := http.Post(g.URL+"/mcp", "application/json", strings.NewReader(fmt.Sprintf(demoEcho, "queued")))
		if err != nil {
			queued <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		queued <- resp.StatusCode
	}()
	m.step("a call waiting", is("gateway_calls_queued", "", 1))
	refused := rpc(t, context.Background(), g.URL, fmt.Sprintf(demoEcho, "refused"))
	refused.Body.Close()
	if refused.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a call past the queue got %d, want 503", refused.StatusCode)
	}
	m.step("a call refused",
		moves("gateway_calls_total", `outcome="overloaded",reason=""`, 1),
		moves("gateway_http_requests_total", `code="503",method="POST",route="/mcp"`, 1))
	leave()
	if status := <-queued; status != http.StatusOK {
		t.Fatalf("the queued call got %d, want 200", status)
	}
	m.step("the client leaving",
		moves("gateway_calls_total", `outcome="cancelled",reason="client_disconnected"`, 1),
		moves("gateway_calls_total", okCalls, 1),
		is("gateway_calls_queued", "", 0), is("gateway_calls_in_flight", worker0, 0), is("gateway_sse_streams_open", "", 0))

	// A 2025 session costs a record only while it holds something here: a
	// call in flight, a log level.
	inSession := func(ctx context.Context, sid, body string) *http.Response {
		t.Helper()
		return postInSession(t, ctx, g.URL, sid, body)
	}
	init := inSession(context.Background(), "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"m","version":"1"}}}`)
	init.Body.Close()
	sid := init.Header.Get("Mcp-Session-Id")
	m.step("a session begun", is("gateway_sessions_live", "", 0))
	ctx, leave = context.WithCancel(context.Background())
	resp = inSession(ctx, sid, fmt.Sprintf(demoSlowWith, "session", 60000, 20))
	if ev := newSSEReader(resp.Body).next(); !strings.Contains(ev, "notifications/progress") {
		t.Fatalf("first event = %q, want progress", ev)
	}
	m.step("a session's call", is("gateway_sessions_live", "", 1))
	leave()
	m.step("the session's call ended", is("gateway_sessions_live", "", 0))
	inSession(context.Background(), sid, `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`).Body.Close()
	m.step("a session's log level", is("gateway_sessions_live", "", 1))

	// A listen is a stream of its own, and no call.
	ctx, stop := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	listen, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer listen.Body.Close()
	if ev := newSSEReader(listen.Body).next(); !strings.Contains(ev, "acknowledged") {
		t.Fatalf("first event of the listen = %q, want the acknowledgement", ev)
	}
	m.step("a listen", is("gateway_listens_open", "", 1), is("gateway_sse_streams_open", "", 1))
	stop()
	m.step("the listen's end", is("gateway_listens_open", "", 0), is("gateway_sse_streams_open", "", 0),
		moves("gateway_calls_total", `outcome="cancelled",reason="client_disconnected"`, 0))

	// The child is killed: down, then restarted.
	syscall.Kill(demoReceived(t, g.URL, 0).PID, syscall.SIGKILL)
	g.Await("not-ready")
	m.step("the child's death", is("gateway_child_up", worker0, 0), is("gateway_child_restarts_total", worker0, 0))
	g.WaitReady()
	m.step("the restart", is("gateway_child_up", worker0, 1), is("gateway_child_restarts_total", worker0, 1),
		is("gateway_child_info", `era="legacy",worker="0"`, 1))

	// Nothing came late, or for an id never sent, and nothing broke.
	m.step("the end", is("gateway_late_answers_dropped_total", "", 0), is("gateway_unknown_answers_dropped_total", "", 0),
		is("gateway_internal_errors_total", "", 0))
}

// The series of a gateway whose child misbehaves: it is too slow, ignores
// cancellation and answers late, writes junk and answers ids never sent.
func TestMetricsOfAMisbehavingChild(t *testing.T) {
	t.Parallel()
	g := startFaulty(t, []string{"GATEWAY_CALL_IDLE_TIMEOUT=1s"}, "-fault", "ignore-cancel,garbage")
	g.WaitReady()
	m := trackMetrics(t, g.URL+"/metrics")

	// No answer within the idle timeout: the call times out; the child,
	// told to cancel, answers anyway, late.
	start := m.last
	var e rpcError
	resp := rpcJSON(t, g.URL, `{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"slow","arguments":{"duration_ms":1500}}}`, &e)
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("a silent call got %d %+v, want 504", resp.StatusCode, e)
	}
	m.step("a timeout", moves("gateway_calls_total", `outcome="timeout",reason=""`, 1),
		moves("gateway_http_requests_total", `code="504",method="POST",route="/mcp"`, 1))
	c := demoReceived(t, g.URL, 1).Cancellations[0]
	demoReceivedArgs(t, g.URL, `{"wait_answered":`+string(c.RequestID)+`}`)
	// Measured from before the call: the late answer may have come before
	// the last scrape of the step above. Every line the child writes comes
	// after an answer to an id never sent.
	m.last = start
	m.step("the late answer", moves("gateway_late_answers_dropped_total", "", 1),
		moves("gateway_calls_total", `outcome="timeout",reason=""`, 1),
		movesAtLeast("gateway_unknown_answers_dropped_total", "", 3))

	// Progress that goes on after its client left is dropped.
	ctx, leave := context.WithCancel(context.Background())
	stream := rpc(t, ctx, g.URL, fmt.Sprintf(demoSlowWith, "ignored", 60000, 20))
	if ev := newSSEReader(stream.Body).next(); !strings.Contains(ev, "notifications/progress") {
		t.Fatalf("first event = %q, want progress", ev)
	}
	leave()
	m.step("progress for a call that ended", movesAtLeast("gateway_progress_events_total", `fate="dropped"`, 1),
		moves("gateway_calls_total", `outcome="cancelled",reason="client_disconnected"`, 1))
}

// With GATEWAY_ADMIN_ADDR, /metrics and the profiles are served there, and
// /metrics is not on the main address; requests there are still counted.
func TestMetricsOnTheAdminAddress(t *testing.T) {
	t.Parallel()
	g := startGateway(t, []string{"GATEWAY_ADMIN_ADDR=127.0.0.1:0"})
	rec := g.Logs.Wait(t, func(r logRecord) bool { _, ok := r["addr"].(string); return ok && r["admin"] == true })
	admin := "http://" + rec["addr"].(string)
	m := trackMetrics(t, admin+"/metrics")

	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}
	if code, _ := get(g.URL + "/metrics"); code != http.StatusNotFound {
		t.Errorf("/metrics on the main address = %d, want 404", code)
	}
	m.step("a request the main address does not serve",
		moves("gateway_http_requests_total", `code="404",method="GET",route="other"`, 1))
	put, _ := http.NewRequest(http.MethodPut, g.URL+"/v1/tools/echo", nil)
	if resp, err := http.DefaultClient.Do(put); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("PUT on a tool: %v %v, want 405", resp, err)
	} else {
		resp.Body.Close()
	}
	for _, path := range []string{"/v1/nowhere", "/v1", "/v1/"} {
		if code, _ := get(g.URL + path); code != http.StatusNotFound {
			t.Errorf("%s = %d, want 404", path, code)
		}
	}
	m.step("requests no /v1 route serves",
		moves("gateway_http_requests_total", `code="405",method="PUT",route="other"`, 1),
		moves("gateway_http_requests_total", `code="404",method="GET",route="other"`, 3))
	if code, body := get(admin + "/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("/debug/pprof/ on the admin address = %d %.200q, want the index of profiles", code, body)
	}
	if code, body := get(admin + "/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Errorf("/debug/pprof/goroutine = %d %.200q, want the goroutine profile", code, body)
	}
	if code, _ := get(admin + "/mcp"); code != http.StatusNotFound {
		t.Errorf("/mcp on the admin address = %d, want 404", code)
	}
	g.WaitReady()
	var r struct{ Result json.RawMessage }
	rpcJSON(t, g.URL, fmt.Sprintf(demoEcho, "ok"), &r)
	m.step("a call on the main address", moves("gateway_calls_total", okCalls, 1), moves("gateway_http_requests_total", mcpPost200, 1))
}

// The endings the other tests do not reach, each seen moving on a live
// gateway: a 2025 client's own cancellation, a child that dies under a
// call, an answer over the size limit; and a 2026 child's era.
func TestMetricsOfEachEnding(t *testing.T) {
	t.Parallel()
	g := startGateway(t, []string{"GATEWAY_MAX_MESSAGE_BYTES=100000"}, "--", gatewayBin, "demo", "-era", "modern")
	g.WaitReady()
	m := trackMetrics(t, g.URL+"/metrics")
	m.step("start", is("gateway_child_info", `era="modern",worker="0"`, 1), is("gateway_child_up", worker0, 1))

	post := func(ctx context.Context, sid, body string) *http.Response {
		t.Helper()
		return postInSession(t, ctx, g.URL, sid, body)
	}
	started := func(resp *http.Response) *sseReader {
		t.Helper()
		r := newSSEReader(resp.Body)
		if ev := r.next(); !strings.Contains(ev, "notifications/progress") {
			t.Fatalf("first event = %q, want progress", ev)
		}
		return r
	}
	rest := func(r *sseReader) string {
		var last string
		for ev := r.next(); ev != ""; ev = r.next() {
			last = ev
		}
		return last
	}

	// An answer over the line limit.
	var e rpcError
	rpcJSON(t, g.URL, `{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"big","arguments":{"bytes":200000}}}`, &e)
	if e.Error.Code != -32004 {
		t.Fatalf("an answer over the limit: %+v, want -32004", e)
	}
	m.step("an answer too large", moves("gateway_calls_total", `outcome="too_large",reason=""`, 1))

	// A REST call's own timeout passes: a timeout, not a client gone.
	resp, err := http.Post(g.URL+"/v1/tools/slow?timeout=200ms", "application/json", strings.NewReader(`{"duration_ms":60000}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("a REST call past its timeout got %d, want 504", resp.StatusCode)
	}
	m.step("a REST call's timeout", moves("gateway_calls_total", `outcome="timeout",reason=""`, 1),
		moves("gateway_calls_total", `outcome="cancelled",reason="client_disconnected"`, 0))

	// A 2025 client cancels its own call.
	init := post(context.Background(), "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"m","version":"1"}}}`)
	sid := init.Header.Get("Mcp-Session-Id")
	call := started(post(context.Background(), sid, fmt.Sprintf(demoSlowWith, "mine", 60000, 20)))
	if resp := post(context.Background(), sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"mine","reason":"stop"}}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the cancellation got %d", resp.StatusCode)
	}
	rest(call)
	m.step("a client's own cancellation", moves("gateway_calls_total", `outcome="cancelled",reason="client_cancelled"`, 1))

	// The child dies under a call.
	call = started(post(context.Background(), "", fmt.Sprintf(demoSlowWith, "dies", 60000, 20)))
	syscall.Kill(demoReceived(t, g.URL, 0).PID, syscall.SIGKILL)
	if last := rest(call); !strings.Contains(last, "-32000") {
		t.Errorf("the call's last event = %q, want -32000", last)
	}
	m.step("a child's death under a call", moves("gateway_calls_total", `outcome="child_unavailable",reason=""`, 1))
}

// postInSession POSTs body to url's /mcp in the 2025 session sid ("" for
// none), taking JSON or a stream; the body is closed when the test ends.
func postInSession(t *testing.T, ctx context.Context, url, sid, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// The admin address bounds a declared body as the main one does: a
// request that never sends it is answered within GATEWAY_CLIENT_TIMEOUT
// and its connection closed, not held forever.
func TestAdminAddressBoundsAnUnsentBody(t *testing.T) {
	t.Parallel()
	g := startGateway(t, []string{"GATEWAY_ADMIN_ADDR=127.0.0.1:0", "GATEWAY_CLIENT_TIMEOUT=200ms"})
	rec := g.Logs.Wait(t, func(r logRecord) bool { _, ok := r["addr"].(string); return ok && r["admin"] == true })
	conn, err := net.Dial("tcp", rec["addr"].(string))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /metrics HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\n\r\n")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a request whose body never came: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("after the answer (%d) the connection is still open: %v", resp.StatusCode, err)
	}
}
