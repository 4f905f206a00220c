// Package httpapi is the gateway's HTTP front door: MCP Streamable HTTP on
// POST /mcp, health and readiness. It reaches the child only through the
// Backend interface.
package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/detach"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
	"github.com/stdiomcp/gateway/webui"
)

// Backend is what the handlers need from the bridge; *bridge.Bridge is
// one, and tests use fakes.
type Backend interface {
	Call(ctx context.Context, req *mcp.Request, caller bridge.Caller) (bridge.Call, error)
	Notify(ctx context.Context, n *jsonrpc.Message) error
	Respond(ctx context.Context, answer *jsonrpc.Message) error
	ToolHeaders(ctx context.Context, tool string) ([]mcp.ParamHeader, error)
	Tools(ctx context.Context) (*bridge.ToolList, error)
	Status() bridge.Status
	Await(ctx context.Context, cond func(bridge.Status) bool) (bridge.Status, error)
}

// Meter is told what the handlers do, for metrics; *metrics.Metrics is
// one.
type Meter interface {
	// Instrument wraps the router, to count and time every request. It
	// runs around the routing, so it can read chi's route pattern after.
	Instrument(next http.Handler) http.Handler
	// StreamOpened and StreamClosed bracket each SSE response.
	StreamOpened()
	StreamClosed()
	// SessionsLive is handed the count of 2025 sessions the handlers hold
	// something for, read at each scrape.
	SessionsLive(count func() float64)
	// CallAudited counts a call by caller (see caller.label) and outcome
	// (as in the audit line); Refused, a request refused before anything
	// was done for it (unauthorized, rate_limited, too_many_streams).
	CallAudited(caller, outcome string)
	Refused(reason string)
}

type noMeter struct{}

func (noMeter) SessionsLive(func() float64) {}
func (noMeter) CallAudited(string, string)  {}
func (noMeter) Refused(string)              {}

func (noMeter) Instrument(next http.Handler) http.Handler { return next }
func (noMeter) StreamOpened()                             {}
func (noMeter) StreamClosed()                             {}

// Options configure the handlers. Zero values mean the documented defaults.
type Options struct {
	MaxBodyBytes    int64         // 0: 16 MiB; larger request bodies get 413
	MaxMessageBytes int64         // 0: 64 MiB; the longest answer a child may send, and so what a batch's answers may add up to in one array
	MaxCallDuration time.Duration // 0: 30m; the longest timeout a REST call may ask for (the bridge's own limit)
	OpenAPI         []byte        // served at GET /openapi.yaml; nil: no such route
	KeepAlive       time.Duration // 0: 15s; SSE comment sent on a quiet stream this often
	ClientTimeout   time.Duration // 0: 30s; the request body must arrive within it, and a client that takes no answer bytes this long (an SSE stream's: up to an eighth longer) is cut off
	Logger          *slog.Logger  // nil: discard
	Meter           Meter         // nil: nothing is counted
	Metrics         http.Handler  // served on GET /metrics; nil: no such route (it is served elsewhere, or not at all)

	// Streams lets an SSE answer on HTTP/1.1 that is still open after
	// LeaveAfter leave net/http (package detach): an idle stream then
	// costs its connection and little more. nil: streams stay.
	Streams *detach.Streams
	// 100ms: a call answered at once never leaves (leaving costs a hijack
	// and a connection given back), and streams opened together do not
	// pile up net/http's state, whose memory the runtime keeps a while.
	LeaveAfter time.Duration // 0: 100ms

	// Legacy (2025) client sessions. Their ids are self-contained and
	// signed with SessionKey, so that replicas sharing the key serve each
	// other's sessions (see sessionid.go).
	SessionKey  []byte        // nil: a random key, valid in this process only
	AcceptedKey []byte        // another key whose ids are accepted, never signed with (a secret being changed); nil: none
	SessionTTL  time.Duration // 0: 24h; a session id is valid this long after initialize
	MaxSessions int           // 0: 10000; sessions this process holds something for at once (calls in flight, a log level, an end)

	// Who may call (see auth.go): nil lets anyone in. AuthMetrics puts
	// /metrics behind it too.
	Auth        Authenticator
	AuthMetrics bool

	// Per-client limits (see limits.go): nil, none. A client is its
	// authenticated name, or its address; X-Forwarded-For is believed
	// only from TrustedProxies.
	Limiter        Limiter
	TrustedProxies []netip.Prefix

	// DNS-rebinding protection on /mcp (see guardOrigin).
	Loopback       bool     // the listener is on a loopback address
	AllowedHosts   []string // Host names served; empty: local names on loopback, any otherwise; "*": any
	AllowedOrigins []string // Origins allowed (scheme://host[:port]); empty: local on loopback, same-origin otherwise; "*": any
}

func (o *Options) defaults() {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 16 << 20
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 64 << 20
	}
	if o.MaxCallDuration <= 0 {
		o.MaxCallDuration = 30 * time.Minute
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.ClientTimeout <= 0 {
		o.ClientTimeout = 30 * time.Second
	}
	if o.LeaveAfter <= 0 {
		o.LeaveAfter = 100 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Logger = slog.New(LogContext(o.Logger.Handler()))
	if o.Meter == nil {
		o.Meter = noMeter{}
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 10000
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 24 * time.Hour
	}
	if o.SessionKey == nil {
		o.SessionKey = make([]byte, 32)
		_, _ = rand.Read(o.SessionKey) // crypto/rand.Read never fails (Go 1.24+)
	}
}

// New returns the gateway's HTTP handler. The caller owns the server and
// its timeouts; no ReadTimeout or WriteTimeout there: they would cut SSE
// streams (a read deadline left on the connection cancels the request), so
// the handlers set per-request deadlines instead.
func New(b Backend, opts Options) http.Handler {
	opts.defaults()
	h := &handlers{b: b, opts: opts, log: opts.Logger, sessions: newSessions(opts.SessionKey, opts.SessionTTL, opts.MaxSessions)}
	h.sessions.accepted = opts.AcceptedKey
	h.catalogs.log = opts.Logger
	h.bigChecks = make(chan struct{}, 2)
	h.stateKeys = [][]byte{stateKey(opts.SessionKey)}
	if opts.AcceptedKey != nil {
		h.stateKeys = append(h.stateKeys, stateKey(opts.AcceptedKey))
	}
	opts.Meter.SessionsLive(func() float64 { return float64(h.sessions.live()) })
	r := chi.NewRouter()
	// The meter sits outside Recoverer, so that it sees the 500 a panic
	// becomes.
	r.Use(BodyDeadline(opts.ClientTimeout), closeAfterChunked, newRequestIDs().named, accessLog(opts.Logger, opts.TrustedProxies), opts.Meter.Instrument, withCORS(opts.AllowedOrigins, h.originAllowed), middleware.Recoverer)
	r.MethodNotAllowed(h.methodNotAllowed(r))
	r.NotFound(h.notFound)
	// No timeout middleware on /mcp: it may answer with a stream that lasts
	// as long as the call, and chi's Timeout writes a 504 after the fact.
	// Every route that reaches the child is guarded, then authenticated,
	// then limited, in that order: a rebinding page learns nothing, and a
	// limit keys on who the caller is. What a POST costs is known once its
	// body is read (see costOf); a DELETE is over once answered.
	guarded := r.With(h.guardOrigin, h.authenticate)
	guarded.With(h.limit(costOfMessage)).Post("/mcp", h.mcp)
	guarded.With(h.limit(costToken)).Delete("/mcp", h.endSession)
	h.restRoutes(r)
	// The web page needs no credentials: it is static, and asks for a
	// token when the API answers 401.
	ui := webui.Handler()
	r.Method(http.MethodGet, "/", ui)
	r.Method(http.MethodGet, "/ui/{file}", ui)
	// HEAD where a GET has no effects, for uptime checks (curl -I); not on
	// /v1, where a GET may call a tool.
	r.Method(http.MethodHead, "/", ui)
	r.Method(http.MethodHead, "/ui/{file}", ui)
	r.Head("/healthz", h.healthz)
	r.Head("/readyz", h.readyz)
	if opts.OpenAPI != nil {
		contract := func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/yaml")
			w.Header().Set("Content-Length", strconv.Itoa(len(opts.OpenAPI)))
			w.Write(opts.OpenAPI)
		}
		r.Get("/openapi.yaml", contract)
		r.Head("/openapi.yaml", contract)
	}
	r.Get("/healthz", h.healthz)
	r.Get("/readyz", h.readyz)
	if opts.Auth != nil {
		if paths, body, ok := opts.Auth.Metadata(); ok {
			for _, p := range paths {
				r.Get(p, h.metadata(body))
				r.Options(p, metadataPreflight)
			}
		}
	}
	if opts.Metrics != nil {
		if opts.AuthMetrics {
			r.With(h.authenticate).Method(http.MethodGet, "/metrics", opts.Metrics)
		} else {
			r.Method(http.MethodGet, "/metrics", opts.Metrics)
		}
	}
	if opts.Streams != nil {
		return opts.Streams.Middleware(r)
	}
	return r
}

type handlers struct {
	b         Backend
	opts      Options
	log       *slog.Logger
	sessions  *sessions
	stateKeys [][]byte      // sign requestStates bound to their caller; the first signs, any verifies
	catalogs  catalogs      // the REST API's view of the child's tools
	bigChecks chan struct{} // a slot per schema check of large arguments running
}

func (h *handlers) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
}

// maxReadyWait bounds how long GET /readyz?wait= holds a request.
const maxReadyWait = time.Minute

// readyz answers whether the gateway serves, with what it knows of its
// children. With ?wait=DURATION it first waits, at most that long, until
// the gateway is ready (until=ready, the default), is not (until=not-ready:
// it is draining or has no child), or every worker is (until=all-ready):
// a script or a test waits for a state rather than polling.
func (h *handlers) readyz(w http.ResponseWriter, r *http.Request) {
	st := h.b.Status()
	q := r.URL.Query()
	if q.Has("wait") || q.Has("until") {
		d, err := time.ParseDuration(q.Get("wait"))
		cond := readyConditions()[q.Get("until")]
		if err != nil || d < 0 || d > maxReadyWait || cond == nil {
			writeJSON(w, http.StatusBadRequest, mustJSON(map[string]string{"status": "bad request",
				"reason": fmt.Sprintf("wait must be a duration from 0 to %v (such as 30s), and until one of ready, not-ready, all-ready", maxReadyWait)}))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), d)
		st, _ = h.b.Await(ctx, cond)
		cancel()
	}
	body := readiness{Status: "ready", Draining: st.Draining, Restarts: st.Restarts, InFlight: st.InFlight,
		Queued: st.Queued, Pending: st.Pending, LateResponses: st.LateResponses, UnknownResponses: st.Unknown}
	for _, ws := range st.Workers {
		body.Workers = append(body.Workers, workerReadiness{Ready: ws.Ready, Era: string(ws.Era), InFlight: ws.InFlight})
	}
	if st.Ready {
		writeJSON(w, http.StatusOK, mustJSON(body))
		return
	}
	body.Status, body.Reason = "not ready", "no child process has finished its handshake"
	if st.Draining {
		body.Reason = "the gateway is shutting down"
	}
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusServiceUnavailable, mustJSON(body))
}

func readyConditions() map[string]func(bridge.Status) bool {
	ready := func(s bridge.Status) bool { return s.Ready }
	return map[string]func(bridge.Status) bool{
		"":          ready,
		"ready":     ready,
		"not-ready": func(s bridge.Status) bool { return !s.Ready },
		"all-ready": func(s bridge.Status) bool { return s.Ready && s.ReadyWorkers() == len(s.Workers) },
	}
}

// readiness is the body of /readyz (Readiness in openapi.yaml).
type readiness struct {
	Status           string            `json:"status"`
	Reason           string            `json:"reason,omitempty"`
	Draining         bool              `json:"draining"`
	Workers          []workerReadiness `json:"workers"`
	Restarts         uint64            `json:"restarts"`
	InFlight         int               `json:"in_flight"`
	Queued           int               `json:"queued"`
	Pending          int               `json:"pending"`
	LateResponses    uint64            `json:"late_responses"`
	UnknownResponses uint64            `json:"unknown_responses"`
}

type workerReadiness struct {
	Ready    bool   `json:"ready"`
	Era      string `json:"era,omitempty"`
	InFlight int    `json:"in_flight"`
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings and numbers always marshal
	}
	return b
}

// methodNotAllowed answers a method a route of mux does not take.
func (h *handlers) methodNotAllowed(mux *chi.Mux) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/mcp" {
			h.mcpMethodNotAllowed(w, r)
			return
		}
		// RFC 9110 §15.5.6: a 405 lists what the route takes (HEAD too,
		// where it is served).
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodOptions} {
			if mux.Match(chi.NewRouteContext(), m, r.URL.Path) {
				allow = append(allow, m)
			}
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// mcpMethodNotAllowed answers a method /mcp does not take: it offers no
// GET stream in either era, and DELETE ends a 2025 session.
func (h *handlers) mcpMethodNotAllowed(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", "POST, DELETE")
	msg := r.Method + " is not supported on /mcp: send each JSON-RPC message as a POST"
	if r.Method == http.MethodDelete {
		// Allow names DELETE: say what it needs.
		msg = "DELETE /mcp ends a 2025 session, named by its " + mcp.HeaderSession + " header, which this request lacks; 2026-07-28 has no session to end"
	}
	writeError(w, http.StatusMethodNotAllowed, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: msg})
}

func (h *handlers) notFound(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "not found: the MCP endpoint is POST /mcp, the REST API is under /v1 (see /openapi.yaml)", http.StatusNotFound)
}

// writeJSON answers with body and sends it at once (sendNow). Its length
// is known, so the flush sends what the end of the handler would have.
func writeJSON(w http.ResponseWriter, status int, body []byte) { writeAnswer(w, status, body, 0) }

// writeAnswer is writeJSON for a call's answer, which a client that takes
// none of it for timeout is cut off from (writeTimed); 0: never.
func writeAnswer(w http.ResponseWriter, status int, body []byte, timeout time.Duration) {
	// One array for the three values, where Header.Set makes a slice for
	// each: every call's answer comes this way.
	v := [3]string{"application/json", strconv.Itoa(len(body)), "no-store"}
	h := w.Header()
	h["Content-Type"], h["Content-Length"], h["Cache-Control"] = v[0:1:1], v[1:2:2], v[2:3:3]
	w.WriteHeader(status)
	writeLast(w, body, timeout)
	sendNow(w)
}

// answerChunk is the most of an answer written under one write deadline:
// a client must take this much in each GATEWAY_CLIENT_TIMEOUT (2 KiB a
// second by default), not the whole answer, which may be tens of
// megabytes. Setting a deadline costs little beside writing this much.
const answerChunk = 64 << 10

// writeTimed writes b under a write deadline timeout away, set again
// before each answerChunk of it: a client that keeps taking its answer,
// however slowly, has it all, and one that takes nothing for timeout is
// cut off. A small b is one deadline and one write; with no timeout, no
// deadline is set.
func writeTimed(w http.ResponseWriter, timeout time.Duration, b []byte) error {
	if timeout <= 0 {
		_, err := w.Write(b)
		return err
	}
	rc := http.NewResponseController(w)
	for {
		_ = rc.SetWriteDeadline(time.Now().Add(timeout))
		n := min(len(b), answerChunk)
		if _, err := w.Write(b[:n]); err != nil || n == len(b) {
			return err
		}
		b = b[n:]
	}
}

// BodyDeadline bounds the time a request's body may take to arrive, on
// every route, not only on those that read it: net/http reads what a
// handler left of a body before it answers (to keep the connection for
// the next request), and without a deadline a client that declares a body
// and never sends it holds the connection, unanswered, for as long as it
// likes. readBody lifts the deadline once the body is in, since an answer
// may stream for as long as its call; set here, not there, it costs a call
// nothing more. The admin address's handler is wrapped in it too.
func BodyDeadline(timeout time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength != 0 { // -1: chunked
				_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
			}
			next.ServeHTTP(w, r)
		})
	}
}

// closeAfterChunked ends the connection after the answer to a request with
// a Transfer-Encoding. net/http reads such a body by its chunks and drops a
// Content-Length sent beside it, so the handlers cannot tell whether both
// came; and when both did, a proxy in front that went by Content-Length
// may have sent another request's bytes inside this body, which would then
// be served as a request of their own. RFC 9112 §6.1: "the server MUST
// close the connection after responding to such a request". A client
// that streams its body pays one new connection.
func closeAfterChunked(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TransferEncoding) > 0 {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}
