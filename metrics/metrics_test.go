package metrics

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/stdiomcp/gateway/bridge"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Requests are labelled with the route pattern that matched, never the
// path; paths and methods no route knows collapse into "other", so no
// client can make new series.
func TestInstrumentLabelsByRoutePattern(t *testing.T) {
	m := New(1)
	r := chi.NewRouter()
	r.Use(m.Instrument)
	r.Post("/mcp", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusAccepted) })
	r.Get("/items/{id}", func(w http.ResponseWriter, r *http.Request) {})
	r.Get("/teapot", func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) })
	send := func(method, path string) {
		defer func() {
			if p := recover(); p != nil && p != http.ErrAbortHandler {
				panic(p)
			}
		}()
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(method, path, nil))
	}
	send("POST", "/mcp")
	for i := range 3 {
		send("GET", fmt.Sprintf("/items/%d", i))
	}
	for i := range 50 {
		send("GET", fmt.Sprintf("/scan/%d", i))
		send(fmt.Sprintf("BREW%d", i), "/mcp")
	}
	send("GET", "/teapot")

	want := map[string]float64{
		`code="202",method="POST",route="/mcp"`:       1,
		`code="200",method="GET",route="/items/{id}"`: 3, // nothing written: net/http's 200
		`code="404",method="GET",route="other"`:       50,
		`code="405",method="other",route="other"`:     50, // chi matched no route: no pattern
		`code="200",method="GET",route="/teapot"`:     1,  // aborted, counted all the same
	}
	got := map[string]float64{}
	fams := scrape(t, m)
	for _, s := range fams["gateway_http_requests_total"].GetMetric() {
		got[labelsOf(s.GetLabel())] = s.GetCounter().GetValue()
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("gateway_http_requests_total:\n got %v\nwant %v", got, want)
	}
	durations := map[string]uint64{}
	for _, s := range fams["gateway_http_request_duration_seconds"].GetMetric() {
		durations[labelsOf(s.GetLabel())] = s.GetHistogram().GetSampleCount()
	}
	wantDurations := map[string]uint64{`method="POST",route="/mcp"`: 1, `method="GET",route="/items/{id}"`: 3,
		`method="GET",route="other"`: 50, `method="other",route="other"`: 50, `method="GET",route="/teapot"`: 1}
	if fmt.Sprint(durations) != fmt.Sprint(wantDurations) {
		t.Errorf("gateway_http_request_duration_seconds counts:\n got %v\nwant %v", durations, wantDurations)
	}
}

// A request is counted with the status its client got: a status set after
// the answer began (Recoverer's 500 once a stream is under way) neither
// counts nor reaches net/http, which would only complain of it; a flush
// that fails says so through the wrapper.
func TestInstrumentKeepsTheFirstStatus(t *testing.T) {
	m := New(1)
	r := chi.NewRouter()
	r.Use(m.Instrument)
	var flushErr error
	r.Get("/stream", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(": stream open\n\n"))
		flushErr = http.NewResponseController(w).Flush()
		w.WriteHeader(http.StatusInternalServerError)
	})
	rec := &headerCount{ResponseRecorder: httptest.NewRecorder()}
	r.ServeHTTP(rec, httptest.NewRequest("GET", "/stream", nil))
	if rec.headers != 1 || rec.Code != http.StatusOK {
		t.Errorf("got %d WriteHeader calls and status %d, want one, 200", rec.headers, rec.Code)
	}
	if flushErr == nil || flushErr.Error() != "the client is gone" {
		t.Errorf("got flush error %v, want the writer's", flushErr)
	}
	got := map[string]float64{}
	for _, s := range scrape(t, m)["gateway_http_requests_total"].GetMetric() {
		got[labelsOf(s.GetLabel())] = s.GetCounter().GetValue()
	}
	if want := map[string]float64{`code="200",method="GET",route="/stream"`: 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("gateway_http_requests_total: got %v, want %v", got, want)
	}
}

// headerCount counts WriteHeader calls (Write's implicit one included) and
// fails its flushes.
type headerCount struct {
	*httptest.ResponseRecorder
	headers int
	wrote   bool
}

func (h *headerCount) WriteHeader(code int) {
	h.headers++
	h.wrote = true
	h.ResponseRecorder.WriteHeader(code)
}

func (h *headerCount) Write(b []byte) (int, error) {
	if !h.wrote {
		h.WriteHeader(http.StatusOK)
	}
	return h.ResponseRecorder.Write(b)
}

func (h *headerCount) FlushError() error { return errors.New("the client is gone") }

// The state series are read from the status at each scrape.
func TestStateSeriesFollowTheStatus(t *testing.T) {
	src := &fixedStatus{bridge.Status{
		Workers: []bridge.WorkerStatus{
			{Ready: true, Era: bridge.EraLegacy, InFlight: 2, Restarts: 3},
			{Ready: false, InFlight: 0, Restarts: 7}, // restarting: no handshake yet
		},
		Stats: bridge.Stats{Queued: 1, Listens: 4, LateResponses: 5, Unknown: 6},
	}}
	c := newStateCollector(src)
	const want = `
# HELP gateway_calls_in_flight Calls holding a slot of the worker, parked ones included, and those whose clients left while the child may still run them.
# TYPE gateway_calls_in_flight gauge
gateway_calls_in_flight{worker="0"} 2
gateway_calls_in_flight{worker="1"} 0
# HELP gateway_calls_queued Calls waiting for a worker with a free slot.
# TYPE gateway_calls_queued gauge
gateway_calls_queued 1
# HELP gateway_child_info 1 for the worker's child, labelled with the MCP era it speaks (legacy or modern); absent while a new child has not finished its handshake.
# TYPE gateway_child_info gauge
gateway_child_info{era="legacy",worker="0"} 1
# HELP gateway_child_restarts_total Children the worker started after its first.
# TYPE gateway_child_restarts_total counter
gateway_child_restarts_total{worker="0"} 3
gateway_child_restarts_total{worker="1"} 7
# HELP gateway_child_up 1 while the worker's child runs and its handshake is done, else 0.
# TYPE gateway_child_up gauge
gateway_child_up{worker="0"} 1
gateway_child_up{worker="1"} 0
# HELP gateway_internal_errors_total Broken invariants the gateway found in itself; 0 unless it has a bug.
# TYPE gateway_internal_errors_total counter
gateway_internal_errors_total 0
# HELP gateway_late_answers_dropped_total Answers from a child for calls that had already ended (the client left, or timed out), dropped.
# TYPE gateway_late_answers_dropped_total counter
gateway_late_answers_dropped_total 5
# HELP gateway_listens_open subscriptions/listen streams open, across workers.
# TYPE gateway_listens_open gauge
gateway_listens_open 4
# HELP gateway_unknown_answers_dropped_total Answers from a child for ids the gateway never sent, or a second answer to a request, dropped.
# TYPE gateway_unknown_answers_dropped_total counter
gateway_unknown_answers_dropped_total 6
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	// The next scrape sees the state as it is then.
	src.st.Workers[0].InFlight, src.st.Workers[1].Ready, src.st.Workers[1].Era = 0, true, bridge.EraModern
	const after = `
# HELP gateway_calls_in_flight Calls holding a slot of the worker, parked ones included, and those whose clients left while the child may still run them.
# TYPE gateway_calls_in_flight gauge
gateway_calls_in_flight{worker="0"} 0
gateway_calls_in_flight{worker="1"} 0
# HELP gateway_child_info 1 for the worker's child, labelled with the MCP era it speaks (legacy or modern); absent while a new child has not finished its handshake.
# TYPE gateway_child_info gauge
gateway_child_info{era="legacy",worker="0"} 1
gateway_child_info{era="modern",worker="1"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(after), "gateway_calls_in_flight", "gateway_child_info"); err != nil {
		t.Error(err)
	}
}

type fixedStatus struct{ st bridge.Status }

func (f *fixedStatus) Status() bridge.Status { return f.st }

// Every ending and fate is a series from the start, at 0; the observer
// counts into them, and the handler serves them with the Go and process
// collectors' series.
func TestObserverSeries(t *testing.T) {
	m := New(2)
	m.Watch(&fixedStatus{})
	fams := scrape(t, m)
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "gateway_sse_streams_open", "gateway_child_message_size_bytes"} {
		if fams[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	if n, want := len(fams["gateway_calls_total"].GetMetric()), len(bridge.Endings()); n != want {
		t.Errorf("%d gateway_calls_total series before any call, want %d", n, want)
	}
	if n := len(fams["gateway_child_stdout_bytes_total"].GetMetric()); n != 2 {
		t.Errorf("%d gateway_child_stdout_bytes_total series for 2 workers, want 2", n)
	}

	m.CallEnded(bridge.Ending{Outcome: bridge.OutcomeCancelled, Reason: bridge.ReasonClientCancelled})
	m.CallEnded(bridge.Ending{Outcome: bridge.OutcomeOK})
	m.CallEnded(bridge.Ending{Outcome: bridge.OutcomeOK})
	m.Progress(bridge.ProgressCoalesced)
	m.MessageRead(1, 100)
	m.MessageRead(1, 5000)
	m.StreamOpened()
	m.StreamOpened()
	m.StreamClosed()
	m.SessionsLive(func() float64 { return 3 })
	fams = scrape(t, m)
	value := func(name, labels string) float64 {
		for _, s := range fams[name].GetMetric() {
			if labelsOf(s.GetLabel()) == labels {
				switch {
				case s.Counter != nil:
					return s.GetCounter().GetValue()
				case s.Gauge != nil:
					return s.GetGauge().GetValue()
				}
			}
		}
		return -1
	}
	for _, c := range []struct {
		name, labels string
		want         float64
	}{
		{"gateway_calls_total", `outcome="ok",reason=""`, 2},
		{"gateway_calls_total", `outcome="cancelled",reason="client_cancelled"`, 1},
		{"gateway_calls_total", `outcome="cancelled",reason="client_disconnected"`, 0},
		{"gateway_progress_events_total", `fate="coalesced"`, 1},
		{"gateway_progress_events_total", `fate="relayed"`, 0},
		{"gateway_child_stdout_bytes_total", `worker="1"`, 5100},
		{"gateway_child_stdout_bytes_total", `worker="0"`, 0},
		{"gateway_sse_streams_open", ``, 1},
		{"gateway_sessions_live", ``, 3},
	} {
		if got := value(c.name, c.labels); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	h := fams["gateway_child_message_size_bytes"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 2 || h.GetSampleSum() != 5100 {
		t.Errorf("message sizes: %d samples summing to %v, want 2 and 5100", h.GetSampleCount(), h.GetSampleSum())
	}
	// The last bucket is +Inf.
	if top := h.GetBucket()[len(h.GetBucket())-2].GetUpperBound(); top != 64<<20 {
		t.Errorf("the top bucket is %v, want 64 MiB, the largest line a child may write", top)
	}
}

// The observer is called for every line a child writes: it must not
// allocate.
func TestObserverAllocatesNothing(t *testing.T) {
	m := New(4)
	ok := bridge.Ending{Outcome: bridge.OutcomeOK}
	allocs := testing.AllocsPerRun(1000, func() {
		m.MessageRead(3, 1234)
		m.Progress(bridge.ProgressRelayed)
		m.CallEnded(ok)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per message, want 0", allocs)
	}
}

func BenchmarkMessageRead(b *testing.B) {
	m := New(1)
	b.ReportAllocs()
	for b.Loop() {
		m.MessageRead(0, 512)
	}
}

// scrape serves the registry as a scraper gets it, and parses it.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics = %d: %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// labelsOf writes a series' labels as the text format does, in name order.
func labelsOf(pairs []*dto.LabelPair) string {
	var parts []string
	for _, p := range pairs {
		parts = append(parts, fmt.Sprintf("%s=%q", p.GetName(), p.GetValue()))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
