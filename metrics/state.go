package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stdiomcp/gateway/bridge"
)

// StatusSource is what the state series are read from; *bridge.Bridge is
// one.
type StatusSource interface {
	Status() bridge.Status
}

// Watch adds the series read from src's status at each scrape: what is
// state (calls in flight, children up) or already counted by the bridge
// (restarts, late answers) is read rather than followed by events, so it
// can never drift.
func (m *Metrics) Watch(src StatusSource) {
	m.reg.MustRegister(newStateCollector(src))
}

type stateCollector struct {
	src StatusSource

	inFlight, queued, listens, up, info, restarts, late, unknown, bugs *prometheus.Desc
}

func newStateCollector(src StatusSource) *stateCollector {
	worker := []string{"worker"}
	return &stateCollector{
		src:      src,
		inFlight: prometheus.NewDesc("gateway_calls_in_flight", "Calls holding a slot of the worker, parked ones included, and those whose clients left while the child may still run them.", worker, nil),
		queued:   prometheus.NewDesc("gateway_calls_queued", "Calls waiting for a worker with a free slot.", nil, nil),
		listens:  prometheus.NewDesc("gateway_listens_open", "subscriptions/listen streams open, across workers.", nil, nil),
		up:       prometheus.NewDesc("gateway_child_up", "1 while the worker's child runs and its handshake is done, else 0.", worker, nil),
		info:     prometheus.NewDesc("gateway_child_info", "1 for the worker's child, labelled with the MCP era it speaks (legacy or modern); absent while a new child has not finished its handshake.", []string{"worker", "era"}, nil),
		restarts: prometheus.NewDesc("gateway_child_restarts_total", "Children the worker started after its first.", worker, nil),
		late:     prometheus.NewDesc("gateway_late_answers_dropped_total", "Answers from a child for calls that had already ended (the client left, or timed out), dropped.", nil, nil),
		unknown:  prometheus.NewDesc("gateway_unknown_answers_dropped_total", "Answers from a child for ids the gateway never sent, or a second answer to a request, dropped.", nil, nil),
		bugs:     prometheus.NewDesc("gateway_internal_errors_total", "Broken invariants the gateway found in itself; 0 unless it has a bug.", nil, nil),
	}
}

func (s *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.inFlight, s.queued, s.listens, s.up, s.info, s.restarts, s.late, s.unknown, s.bugs} {
		ch <- d
	}
}

func (s *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := s.src.Status()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for i, w := range st.Workers {
		worker := strconv.Itoa(i)
		gauge(s.inFlight, float64(w.InFlight), worker)
		up := 0.0
		if w.Ready {
			up = 1
		}
		gauge(s.up, up, worker)
		if w.Era != "" {
			gauge(s.info, 1, worker, string(w.Era))
		}
		counter(s.restarts, w.Restarts, worker)
	}
	gauge(s.queued, float64(st.Queued))
	gauge(s.listens, float64(st.Listens))
	counter(s.late, st.LateResponses)
	counter(s.unknown, st.Unknown)
	counter(s.bugs, st.InternalErrors)
}
