// Package demo is a small stdio MCP server: the gateway's default child and
// its test fixture. It uses encoding/json and none of the gateway's own
// packages, so that tests through it check the gateway rather than agree
// with it.
package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// Version is reported as serverInfo.version.
const Version = "0.1.0"

const (
	modernVersion = "2026-07-28"
	maxLine       = 64 << 20
	maxHistory    = 10000
)

var legacyVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// Run serves MCP on in and out until in ends or ctx is done. args are the
// demo's flags (see -h).
func Run(ctx context.Context, args []string, in io.Reader, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(errOut)
	era := fs.String("era", "legacy", "protocol era to speak: legacy (initialize), modern (server/discover, 2026-07-28) or dual")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch *era {
	case "legacy", "modern", "dual":
	default:
		return fmt.Errorf("demo: -era must be legacy, modern or dual, not %q", *era)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &server{
		era:      *era,
		out:      out,
		errOut:   errOut,
		inflight: map[string]context.CancelFunc{},
		changed:  make(chan struct{}),
	}
	err := s.serve(ctx, in)
	cancel()
	s.wg.Wait()
	return err
}

type server struct {
	era    string
	out    io.Writer
	errOut io.Writer
	wg     sync.WaitGroup

	wmu sync.Mutex // one message per Write, never interleaved

	mu            sync.Mutex
	initialized   bool
	inflight      map[string]context.CancelFunc // by raw request id
	requests      []seenRequest
	cancellations []seenCancel
	changed       chan struct{} // closed and replaced when history grows
}

type seenRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Tool   string          `json:"tool,omitempty"`
}

type seenCancel struct {
	RequestID json.RawMessage `json:"requestId"`
	Reason    string          `json:"reason,omitempty"`
	// Running says whether the request was still being worked on.
	Running bool `json:"running"`
}

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

func (s *server) serve(ctx context.Context, in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		if ctx.Err() != nil {
			return nil
		}
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var m message
		if err := json.Unmarshal(line, &m); err != nil {
			s.send(errorResponse(nil, -32700, "parse error: "+err.Error()))
			continue
		}
		s.handle(ctx, &m)
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("demo: read stdin: %w", err)
	}
	return nil
}

func (s *server) handle(ctx context.Context, m *message) {
	if m.ID == nil {
		s.notification(m)
		return
	}
	if m.Method == "" {
		return // a response to a request the demo never sends
	}
	s.record(m)
	switch m.Method {
	case "initialize":
		s.initialize(m)
	case "server/discover":
		if s.era == "legacy" {
			s.send(errorResponse(m.ID, -32601, "method not found: server/discover (this server speaks the initialize handshake)"))
			return
		}
		s.send(result(m.ID, map[string]any{
			"resultType":        "complete",
			"supportedVersions": []string{modernVersion},
			"capabilities":      capabilities(),
			"instructions":      instructions,
			"ttlMs":             0,
			"cacheScope":        "public",
			"_meta":             map[string]any{"io.modelcontextprotocol/serverInfo": serverInfo()},
		}))
	case "ping":
		s.send(result(m.ID, map[string]any{}))
	case "tools/list":
		if !s.ready(m) {
			return
		}
		s.send(result(m.ID, map[string]any{"tools": toolList()}))
	case "tools/call":
		if !s.ready(m) {
			return
		}
		s.startCall(ctx, m)
	default:
		s.send(errorResponse(m.ID, -32601, "method not found: "+m.Method))
	}
}

// ready refuses requests a legacy-only server gets before initialize.
func (s *server) ready(m *message) bool {
	s.mu.Lock()
	ok := s.initialized || s.era != "legacy"
	s.mu.Unlock()
	if !ok {
		s.send(errorResponse(m.ID, -32600, "server not initialized"))
	}
	return ok
}

func (s *server) initialize(m *message) {
	if s.era == "modern" {
		s.send(errorResponse(m.ID, -32601, "method not found: initialize (this server speaks "+modernVersion+" only)"))
		return
	}
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(m.Params, &p)
	version := legacyVersions[0]
	if slices.Contains(legacyVersions, p.ProtocolVersion) {
		version = p.ProtocolVersion
	}
	s.send(result(m.ID, map[string]any{
		"protocolVersion": version,
		"capabilities":    capabilities(),
		"serverInfo":      serverInfo(),
		"instructions":    instructions,
	}))
}

func (s *server) notification(m *message) {
	switch m.Method {
	case "notifications/initialized":
		s.mu.Lock()
		s.initialized = true
		s.mu.Unlock()
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
			Reason    string          `json:"reason"`
		}
		_ = json.Unmarshal(m.Params, &p)
		s.mu.Lock()
		stop, running := s.inflight[string(p.RequestID)]
		s.cancellations = appendBounded(s.cancellations, seenCancel{p.RequestID, p.Reason, running})
		s.wakeLocked()
		s.mu.Unlock()
		if running {
			stop()
		}
		fmt.Fprintf(s.errOut, "demo: cancelled request %s (reason: %q, running: %v)\n", p.RequestID, p.Reason, running)
	}
}

func (s *server) record(m *message) {
	var p struct {
		Name string `json:"name"`
	}
	if m.Method == "tools/call" {
		_ = json.Unmarshal(m.Params, &p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = appendBounded(s.requests, seenRequest{m.ID, m.Method, p.Name})
	s.wakeLocked()
}

func (s *server) wakeLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func appendBounded[T any](list []T, v T) []T {
	if len(list) >= maxHistory {
		list = slices.Delete(list, 0, len(list)-maxHistory+1)
	}
	return append(list, v)
}

// send writes one message as one line.
func (s *server) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(s.errOut, "demo: cannot encode a message: %v\n", err)
		return
	}
	b = append(b, '\n')
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, err := s.out.Write(b); err != nil {
		fmt.Fprintf(s.errOut, "demo: write stdout: %v\n", err)
	}
}

func result(id json.RawMessage, v any) message {
	b, _ := json.Marshal(v)
	return message{JSONRPC: "2.0", ID: id, Result: b}
}

func errorResponse(id json.RawMessage, code int, msg string) message {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"code": code, "message": msg})
	return message{JSONRPC: "2.0", ID: id, Error: b}
}

func serverInfo() map[string]string {
	return map[string]string{"name": "gateway-demo", "version": Version}
}

func capabilities() map[string]any {
	return map[string]any{"tools": map[string]any{}}
}

const instructions = "A demo server: echo text back, run a slow task with progress, return a large result, or list what it received."

// sleepCtx waits d or until ctx ends, reporting whether the time passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
