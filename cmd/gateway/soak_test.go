package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
	"go.uber.org/goleak"
)

// The soak test runs the gateway in this process (so that its tables,
// goroutines and descriptors can be inspected) with real demo children,
// under mixed load on loopback for GATEWAY_SOAK_DURATION (default 10s; CI
// runs it longer): plain calls, progress streams, large results, clients
// that abort at random, and a child killed at random. At the end it checks
// that every request had exactly one outcome, that every abort either
// reached the child as a cancellation or found its call already over,
// that nothing is pending, and that no goroutine, descriptor or process
// was left behind.
func TestSoak(t *testing.T) {
	// Not parallel: it counts goroutines, descriptors and processes.
	duration := 10 * time.Second
	if v := os.Getenv("GATEWAY_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("GATEWAY_SOAK_DURATION: %v", err)
		}
		duration = d
	}
	warmUpNetwork(t)
	ignore := goleak.IgnoreCurrent()
	fdsBefore := openFDs(t)

	var cfg Config
	if err := envconfig.Process("SOAK_DEFAULTS_ONLY", &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Workers = 2
	cfg.RestartDelayMin, cfg.RestartDelayMax = 10*time.Millisecond, 200*time.Millisecond
	rec := &logRecorder{}
	log := slog.New(rec)
	pool := newBridge(cfg, keys{}, child{argv: []string{gatewayBin, "demo"}}, log, nil)
	srv := httptest.NewServer(newHandler(cfg, keys{}, guard{}, pool, nil, nil, true, log))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	ready, cancelReady := context.WithTimeout(context.Background(), time.Minute)
	defer cancelReady()
	if err := pool.WaitReady(ready); err != nil {
		t.Fatal(err)
	}

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, duration %v", seed, duration)
	s := &soak{t: t, url: srv.URL + "/mcp", client: client, outcomes: map[string]string{}}
	deadline := time.Now().Add(duration)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			for n := 0; time.Now().Before(deadline); n++ {
				s.one(r, fmt.Sprintf("c%d-%d", i, n))
			}
		})
	}
	kills := 0
	wg.Go(func() {
		r := rand.New(rand.NewPCG(seed, 99))
		for time.Now().Before(deadline) {
			// Pacing, not synchronisation: a kill every second or so.
			time.Sleep(time.Duration(500+r.IntN(1500)) * time.Millisecond)
			if pids := childPIDs(); len(pids) > 0 && time.Now().Before(deadline) {
				syscall.Kill(pids[r.IntN(len(pids))], syscall.SIGKILL)
				kills++
			}
		}
	})
	wg.Wait()
	// A client that aborts returns at once; the gateway's side of it
	// (the call taken off the tables, the cancellation sent and logged)
	// is over once every handler has returned and the pool has closed.
	srv.Close()
	st := pool.Stats()
	closed, cancelClose := context.WithTimeout(context.Background(), time.Minute)
	defer cancelClose()
	pool.Close(closed)

	// Every request had exactly one outcome.
	counts := map[string]int{}
	for id, o := range s.outcomes {
		if strings.HasPrefix(o, "violation") {
			t.Errorf("%s: %s", id, o)
		}
		counts[strings.Fields(o)[0]]++
	}
	// Every abort reached the child, or found the call over.
	for _, id := range s.aborted {
		quoted := strconv.Quote(id)
		switch {
		case rec.has("cancelled call", quoted):
			counts["abort:cancelled"]++
		case rec.has("could not tell the child to cancel", quoted):
			counts["abort:child-gone"]++
		case rec.callEnded(quoted):
			counts["abort:already-over"]++
		case rec.has("exchange over before the cancellation", quoted):
			// The child answered or exited as the client left.
			counts["abort:exchange-over"]++
		case !rec.has("to child", quoted):
			counts["abort:never-sent"]++
		default:
			t.Errorf("aborted call %s neither reached the child as a cancellation nor found its call over", id)
		}
	}
	if st.Pending != 0 || st.InFlight != 0 || st.Queued != 0 || st.InternalErrors != 0 {
		t.Errorf("after the load: %+v, want nothing pending, in flight or queued, and no broken invariant", st)
	}
	t.Logf("requests %d, kills %d, restarts %d, late responses %d; %v", len(s.outcomes), kills, st.Restarts, st.LateResponses, counts)
	if len(s.outcomes) < 100 || kills == 0 || counts["ok"] == 0 || len(s.aborted) == 0 {
		t.Errorf("the soak did too little to show anything: %d requests, %d kills, %v", len(s.outcomes), kills, counts)
	}

	// Nothing is left behind.
	client.CloseIdleConnections()
	if pids := childPIDs(); len(pids) != 0 {
		t.Errorf("child processes left: %v", pids)
	}
	if fds := openFDs(t); fds != fdsBefore {
		t.Errorf("%d open descriptors after, %d before", fds, fdsBefore)
	}
	goleak.VerifyNone(t, ignore)
}

type soak struct {
	t      *testing.T
	url    string
	client *http.Client

	mu       sync.Mutex
	outcomes map[string]string // by client id: "ok", "child-failed", "aborted", or "violation: ..."
	aborted  []string
}

func (s *soak) record(id, outcome string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.outcomes[id]; ok {
		outcome = "violation: two outcomes: " + old + " and " + outcome
	}
	s.outcomes[id] = outcome
	if outcome == "aborted" {
		s.aborted = append(s.aborted, id)
	}
}

// one sends one request of a random kind and records its outcome.
func (s *soak) one(r *rand.Rand, id string) {
	switch k := r.IntN(10); {
	case k < 4:
		text := fmt.Sprintf("echo %d", r.IntN(1e6))
		s.record(id, s.json(id, fmt.Sprintf(`{"name":"echo","arguments":{"text":%q}}`, text), text))
	case k < 5:
		n := 1 + r.IntN(256<<10)
		s.record(id, s.json(id, fmt.Sprintf(`{"name":"big","arguments":{"bytes":%d}}`, n), strings.Repeat("x", min(n, 16))))
	case k < 8:
		s.record(id, s.stream(id, 20+r.IntN(200), -1))
	default:
		s.record(id, s.stream(id, 5000, r.IntN(3)))
	}
}

func (s *soak) post(ctx context.Context, id, params string) (*http.Response, error) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":%s}`, id, params)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return s.client.Do(req)
}

// json makes a call answered with JSON, whose text must contain want.
func (s *soak) json(id, params, want string) string {
	resp, err := s.post(context.Background(), id, params)
	if err != nil {
		return "violation: " + err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return judge(id, resp.StatusCode, body, want)
}

// judge classifies one final answer: the result, or the gateway's word
// that the child went away.
func judge(id string, status int, body []byte, want string) string {
	var m struct {
		ID     json.RawMessage
		Result json.RawMessage
		Error  *struct{ Code int }
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return fmt.Sprintf("violation: status %d, not JSON: %.200s", status, body)
	}
	switch {
	case string(m.ID) != strconv.Quote(id):
		return fmt.Sprintf("violation: the answer has id %s", m.ID)
	case m.Error != nil && m.Error.Code == -32000 && (status == 503 || status == 200):
		return "child-failed"
	case m.Error != nil:
		return fmt.Sprintf("violation: status %d, error %.200s", status, body)
	case status != 200 || !bytes.Contains(m.Result, []byte(want)):
		return fmt.Sprintf("violation: status %d, result %.200s", status, body)
	}
	return "ok"
}

// stream makes a slow call with progress. With abortAfter >= 0 the client
// goes away after that many progress events; otherwise the stream must
// carry progress and end with exactly one final message.
func (s *soak) stream(id string, ms, abortAfter int) string {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := s.post(ctx, id, fmt.Sprintf(`{"name":"slow","arguments":{"duration_ms":%d,"interval_ms":10},"_meta":{"progressToken":%q}}`, ms, id))
	if err != nil {
		return "violation: " + err.Error()
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		body, _ := io.ReadAll(resp.Body)
		return judge(id, resp.StatusCode, body, "done") // refused before the stream opened
	}
	events := newSSEReader(resp.Body)
	var final string
	progress := 0
	for ev := events.next(); ev != ""; ev = events.next() {
		if final != "" {
			return "violation: an event after the final answer: " + ev
		}
		if strings.Contains(ev, `"notifications/progress"`) {
			if !strings.Contains(ev, `"progressToken":`+strconv.Quote(id)) {
				return "violation: another call's progress: " + ev
			}
			progress++
			if progress > abortAfter && abortAfter >= 0 {
				cancel()
				return "aborted"
			}
			continue
		}
		final = ev
	}
	if abortAfter >= 0 && final == "" {
		cancel()
		return "aborted"
	}
	if final == "" {
		return "violation: the stream ended with no answer"
	}
	return judge(id, 200, []byte(final), "done")
}

// logRecorder keeps the log records the soak's checks read, by client id.
type logRecorder struct {
	mu       sync.Mutex
	byClient map[string][]map[string]string
}

var soakMessages = map[string]bool{"cancelled call": true, "could not tell the child to cancel": true, "call ended": true, "to child": true,
	"exchange over before the cancellation": true}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	if !soakMessages[r.Message] {
		return nil
	}
	m := map[string]string{"msg": r.Message}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byClient == nil {
		l.byClient = map[string][]map[string]string{}
	}
	l.byClient[m["client_id"]] = append(l.byClient[m["client_id"]], m)
	return nil
}

// has reports a record with msg for the client id (quoted, as logged); a
// "to child" record counts only for a write that went through.
func (l *logRecorder) has(msg, clientID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.byClient[clientID] {
		if r["msg"] == msg && (msg != "to child" || r["err"] == "<nil>") {
			return true
		}
	}
	return false
}

// callEnded reports whether the client's call ended other than by its
// client leaving: answered, or failed because its child went away.
func (l *logRecorder) callEnded(clientID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.byClient[clientID] {
		if r["msg"] == "call ended" && !strings.Contains(r["err"], "context canceled") {
			return true
		}
	}
	return false
}

// childPIDs are the processes this test process started and that still run.
func childPIDs() []int {
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: the fields after the last ')'.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 1 && f[0] != "Z" && f[1] == strconv.Itoa(self) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func openFDs(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// warmUpNetwork makes the runtime open what it keeps for the network
// (the poller's descriptors) before descriptors are counted.
func warmUpNetwork(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err == nil {
		conn.Close()
	}
	ln.Close()
}
