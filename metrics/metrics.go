// Package metrics is the gateway's Prometheus metrics: one registry per
// gateway, fed by the bridge's Observer as things happen, read from the
// bridge's Status at each scrape for what is state (so that it never
// drifts), and by the HTTP handlers. Every series is listed in the
// README's "Metrics" section.
package metrics

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stdiomcp/gateway/bridge"
)

// Metrics holds a gateway's registry and the series it feeds. It is the
// bridge's Observer; its methods that the bridge calls allocate nothing.
type Metrics struct {
	reg *prometheus.Registry

	calls    *prometheus.CounterVec
	endings  map[bridge.Ending]prometheus.Counter // every known ending, resolved once
	progress *prometheus.CounterVec
	fates    map[bridge.ProgressFate]prometheus.Counter
	stdout   *prometheus.CounterVec
	byWorker []prometheus.Counter // stdout bytes, by worker index
	sizes    prometheus.Histogram

	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec
	streams   prometheus.Gauge
	byCaller  *prometheus.CounterVec
	refused   *prometheus.CounterVec
}

// New makes a registry with the Go runtime's and the process's collectors
// and the series fed by events, for a bridge of workers workers.
func New(workers int) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_calls_total",
			Help: "Client requests the bridge was given (listens aside), by how they ended as the client saw it; reason says who cancelled.",
		}, []string{"outcome", "reason"}),
		progress: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_progress_events_total",
			Help: "Progress notifications from the children: relayed to their call's client, coalesced into a newer one the client had not taken, or dropped (no call in flight asked for them).",
		}, []string{"fate"}),
		stdout: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_child_stdout_bytes_total",
			Help: "Bytes of the lines the worker's children wrote on stdout, newlines aside.",
		}, []string{"worker"}),
		sizes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gateway_child_message_size_bytes",
			Help:    "Length of each line the children wrote on stdout.",
			Buckets: prometheus.ExponentialBuckets(64, 4, 11), // 64 B to 64 MiB, the largest line a child may write by default
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_http_requests_total",
			Help: "HTTP requests served, by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gateway_http_request_duration_seconds",
			Help:    "Time from a request's arrival until its handler returned (a stream's whole life), by route pattern and method.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800},
		}, []string{"route", "method"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gateway_sse_streams_open",
			Help: "Server-Sent Events responses being written.",
		}),
		byCaller: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_caller_calls_total",
			Help: "Calls by caller (a static token's name, jwt for any OAuth token, anonymous without authentication) and outcome (as in the audit log: ok, error, denied, refused, failed, cancelled, client_gone).",
		}, []string{"caller", "outcome"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_requests_refused_total",
			Help: "Requests refused before they reached a child: unauthorized (no valid credentials), keys_unavailable (the OAuth issuer's keys cannot be fetched), rate_limited, too_many_streams (a batch's calls refused by the limits count too).",
		}, []string{"reason"}),
		endings: map[bridge.Ending]prometheus.Counter{},
		fates:   map[bridge.ProgressFate]prometheus.Counter{},
	}
	// Resolved now, so that a scrape shows every one from the start (a
	// rate over a series that appears late misses its first increase).
	for _, e := range bridge.Endings() {
		m.endings[e] = m.calls.WithLabelValues(e.Outcome, e.Reason)
	}
	for _, f := range bridge.ProgressFates() {
		m.fates[f] = m.progress.WithLabelValues(string(f))
	}
	for i := range max(workers, 1) {
		m.byWorker = append(m.byWorker, m.stdout.WithLabelValues(strconv.Itoa(i)))
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.calls, m.progress, m.stdout, m.sizes, m.requests, m.durations, m.streams, m.byCaller, m.refused,
	)
	for _, reason := range []string{"unauthorized", "rate_limited", "too_many_streams"} {
		m.refused.WithLabelValues(reason)
	}
	return m
}

// CallAudited counts a call by its caller and outcome. Callers are few:
// static tokens by name, every JWT as one.
func (m *Metrics) CallAudited(caller, outcome string) {
	m.byCaller.WithLabelValues(caller, outcome).Inc()
}

// Refused counts a request refused before it was served.
func (m *Metrics) Refused(reason string) { m.refused.WithLabelValues(reason).Inc() }

// Handler serves the registry in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// SessionsLive adds gateway_sessions_live, read from count at each scrape.
// It may be called once.
func (m *Metrics) SessionsLive(count func() float64) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gateway_sessions_live",
		Help: "2025 client sessions the gateway holds something for: calls in flight here, or a log level set here.",
	}, count))
}

// StreamsDetached adds gateway_sse_streams_detached, read from count at
// each scrape. It may be called once.
func (m *Metrics) StreamsDetached(count func() float64) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gateway_sse_streams_detached",
		Help: "SSE streams open that left the HTTP server to cost less while idle: each holds its connection and a goroutine of its own.",
	}, count))
}

var _ bridge.Observer = (*Metrics)(nil)

// CallEnded counts a call's ending.
func (m *Metrics) CallEnded(e bridge.Ending) {
	if c, ok := m.endings[e]; ok {
		c.Inc()
		return
	}
	m.calls.WithLabelValues(e.Outcome, e.Reason).Inc() // one the bridge does not list: still counted
}

// Progress counts a progress notification by its fate.
func (m *Metrics) Progress(f bridge.ProgressFate) {
	if c, ok := m.fates[f]; ok {
		c.Inc()
		return
	}
	m.progress.WithLabelValues(string(f)).Inc()
}

// MessageRead counts a line a worker's child wrote.
func (m *Metrics) MessageRead(worker, size int) {
	if worker >= 0 && worker < len(m.byWorker) {
		m.byWorker[worker].Add(float64(size))
	} else {
		m.stdout.WithLabelValues(strconv.Itoa(worker)).Add(float64(size))
	}
	m.sizes.Observe(float64(size))
}

// StreamOpened counts an SSE response that starts.
func (m *Metrics) StreamOpened() { m.streams.Inc() }

// StreamClosed counts an SSE response that has ended.
func (m *Metrics) StreamClosed() { m.streams.Dec() }
