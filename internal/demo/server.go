// Package demo is a small stdio MCP server: the gateway's default child and
// its test fixture. It implements the conformance suite's fixture surface
// in either protocol era. It reads and writes messages with encoding/json
// and none of the gateway's machinery, so that tests through it check the
// gateway rather than agree with it; it shares only the protocol's
// vocabulary (package mcp), the names the spec fixes.
package demo

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// Version is reported as serverInfo.version.
const Version = "0.2.0"

const (
	maxLine    = 64 << 20
	maxHistory = 10000
)

// Run serves MCP on in and out until in ends or ctx is done. args are the
// demo's flags (see -h).
func Run(ctx context.Context, args []string, in io.Reader, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(errOut)
	era := fs.String("era", "legacy", "protocol era to speak: legacy (initialize), modern (server/discover, 2026-07-28) or dual")
	faultList := fs.String("fault", "", "comma-separated misbehaviours, for tests: "+strings.Join(faultNames, ", "))
	if err := fs.Parse(args); err != nil {
		return err
	}
	f, err := parseFaults(*faultList)
	if err != nil {
		return err
	}
	if err := f.atStart(out, errOut); err != nil {
		return err
	}
	switch *era {
	case "legacy", "modern", "dual":
	default:
		return fmt.Errorf("demo: -era must be legacy, modern or dual, not %q", *era)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := newServer(ctx, *era, f, out, errOut)
	if err != nil {
		return err
	}
	err = s.serve(ctx, in)
	f.atEnd(errOut)
	// stdin is closed: requests already being served get a moment to answer
	// (a pipeline that writes requests and closes still gets its answers),
	// then the rest are cancelled so the process exits promptly.
	finished := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-time.After(time.Second):
	}
	cancel()
	<-finished
	return err
}

// newServer makes a server that lives until life ends.
func newServer(life context.Context, era string, f faults, out, errOut io.Writer) (*server, error) {
	s := &server{
		life:     life,
		tasks:    newTaskTable(taskTTL, maxTasks, time.Now),
		era:      era,
		faults:   f,
		out:      out,
		errOut:   errOut,
		inflight: map[string]context.CancelFunc{},
		asked:    map[string]chan message{},
		listens:  map[string]listen{},
		subs:     map[string]bool{},
		changed:  make(chan struct{}),
	}
	if _, err := rand.Read(s.key[:]); err != nil {
		return nil, fmt.Errorf("demo: state key: %w", err)
	}
	return s, nil
}

type server struct {
	life   context.Context // the server's own lifetime: tasks run under it
	era    string
	faults faults
	out    io.Writer
	errOut io.Writer
	wg     sync.WaitGroup
	key    [32]byte // signs requestState

	wmu sync.Mutex // one message per Write, never interleaved

	mu            sync.Mutex
	initialized   bool
	clientCaps    map[string]json.RawMessage // from initialize (legacy)
	logLevel      string                     // from logging/setLevel (legacy)
	inflight      map[string]context.CancelFunc
	asked         map[string]chan message // the demo's own requests to the client, by id
	listens       map[string]listen       // open subscriptions/listen requests, by raw id
	subs          map[string]bool         // resources/subscribe'd URIs (legacy)
	toolAdded     bool                    // test_trigger_tool_change toggles a tool
	promptAdded   bool                    // test_trigger_prompt_change toggles a prompt
	tasks         *taskTable
	requests      []seenRequest
	cancellations []seenCancel
	answeredIDs   []json.RawMessage // ids of requests answered, once the answer is written
	changed       chan struct{}     // closed and replaced when history grows
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
	// Ignored says the demo took no notice of it (-fault ignore-cancel).
	Ignored bool `json:"ignored,omitempty"`
}

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// request is one request with what the demo needs to know about its era.
type request struct {
	id       json.RawMessage
	method   string
	params   json.RawMessage
	modern   bool                       // served under 2026-07-28 rules
	caps     map[string]json.RawMessage // the client's capabilities
	logLevel string                     // "" means no logs for this request
	progress json.RawMessage            // the progress token, if any
}

// newRequest decides the request's era: a modern server serves everything
// as 2026-07-28; a dual one serves requests with modern _meta that way.
func (s *server) newRequest(m *message) *request {
	r := &request{id: m.ID, method: m.Method, params: m.Params}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(m.Params, &p)
	_, hasVersion := p.Meta[mcp.MetaProtocolVersion]
	r.modern = s.era == "modern" || (s.era == "dual" && hasVersion)
	r.progress = p.Meta["progressToken"]
	if r.modern {
		_ = json.Unmarshal(p.Meta[mcp.MetaClientCapabilities], &r.caps)
		_ = json.Unmarshal(p.Meta[mcp.MetaLogLevel], &r.logLevel)
		return r
	}
	s.mu.Lock()
	r.caps, r.logLevel = s.clientCaps, s.logLevel
	s.mu.Unlock()
	if r.logLevel == "" {
		r.logLevel = "info" // a legacy server may log until told otherwise
	}
	return r
}

func (r *request) has(capability string) bool {
	_, ok := r.caps[capability]
	return ok
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
			s.send(errorResponse(nil, jsonrpc.CodeParseError, "parse error: "+err.Error(), nil))
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
	s.onMessage(m)
	switch {
	case m.Method == "" && m.ID != nil:
		s.clientAnswered(m)
	case m.ID == nil:
		s.notification(m)
	default:
		s.record(m)
		s.request(ctx, s.newRequest(m))
	}
}

// handler serves one method; a nil result with a nil error means the
// handler answers by itself (later, or not at all).
type handler func(ctx context.Context, r *request) (any, *rpcError)

func (s *server) request(ctx context.Context, r *request) {
	h, ok := s.handlers(r)[r.method]
	if !ok {
		s.answer(r.id, errorResponse(r.id, jsonrpc.CodeMethodNotFound, "method not found: "+r.method, nil))
		return
	}
	if !r.modern && s.era == "legacy" && !s.isInitialized() && r.method != mcp.MethodInitialize && r.method != mcp.MethodPing {
		s.answer(r.id, errorResponse(r.id, jsonrpc.CodeInvalidRequest, "server not initialized", nil))
		return
	}
	// Every request runs on its own goroutine: a slow tool, or one waiting
	// for the client's answer, never holds up the others.
	ctx, cancel := context.WithCancel(ctx)
	key := string(r.id)
	s.mu.Lock()
	s.inflight[key] = cancel
	s.mu.Unlock()
	s.wg.Go(func() {
		defer func() {
			s.mu.Lock()
			delete(s.inflight, key)
			s.mu.Unlock()
			cancel()
		}()
		res, rerr := h(ctx, r)
		if ctx.Err() != nil {
			return // cancelled: the spec says to send nothing more for it
		}
		switch {
		case rerr != nil:
			s.answer(r.id, errorResponse(r.id, rerr.Code, rerr.Message, rerr.Data))
		case res != nil:
			s.answer(r.id, s.result(r, res))
		}
	})
}

// answer sends the answer to request id and records it once written:
// whoever reads the record over stdio reads it after the answer.
func (s *server) answer(id json.RawMessage, m message) {
	s.send(m)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answeredIDs = appendBounded(s.answeredIDs, id)
	s.wakeLocked()
}

// handlers is the method table for the request's era.
func (s *server) handlers(r *request) map[string]handler {
	common := map[string]handler{
		mcp.MethodToolsList:     s.toolsList,
		mcp.MethodToolsCall:     s.toolsCall,
		mcp.MethodResourcesList: s.resourcesList,
		mcp.MethodTemplatesList: s.templatesList,
		mcp.MethodResourcesRead: s.resourcesRead,
		mcp.MethodPromptsList:   s.promptsList,
		mcp.MethodPromptsGet:    s.promptsGet,
		mcp.MethodComplete:      s.complete,
	}
	if r.modern {
		common[mcp.MethodDiscover] = s.discover
		common[mcp.MethodListen] = s.listen
		common[mcp.MethodTasksGet] = s.tasksGet
		common[mcp.MethodTasksCancel] = s.tasksCancel
		common[mcp.MethodTasksUpdate] = s.tasksUpdate
		return common
	}
	common["initialize"] = s.initialize
	common["ping"] = func(context.Context, *request) (any, *rpcError) { return map[string]any{}, nil }
	common[mcp.MethodSetLevel] = s.setLevel
	common[mcp.MethodSubscribe] = s.subscribe
	common[mcp.MethodUnsubscribe] = s.unsubscribe
	if s.era == "dual" {
		common[mcp.MethodDiscover] = s.discover
	}
	return common
}

func (s *server) isInitialized() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.initialized
}

// result wraps a handler's result: modern results carry resultType, and
// the cacheable ones carry caching hints.
func (s *server) result(r *request, res any) message {
	b, err := json.Marshal(res)
	if err != nil {
		return errorResponse(r.id, jsonrpc.CodeInternalError, "encode result: "+err.Error(), nil)
	}
	if r.modern {
		var obj map[string]json.RawMessage
		if json.Unmarshal(b, &obj) == nil {
			if _, ok := obj["resultType"]; !ok {
				obj["resultType"], _ = json.Marshal(mcp.ResultComplete)
			}
			if mcp.Cacheable(r.method) && string(obj["resultType"]) == `"`+mcp.ResultComplete+`"` {
				obj["ttlMs"] = json.RawMessage("0")
				obj["cacheScope"] = json.RawMessage(`"public"`)
			}
			b, _ = json.Marshal(obj)
		}
	}
	return message{JSONRPC: "2.0", ID: r.id, Result: b}
}

type rpcError struct {
	Code    int
	Message string
	Data    any
}

// decodeArgs reads a tool's arguments into a: members it does not name
// are ignored, one of the wrong type is the caller's error (-32602).
// Absent arguments leave a as it is.
func decodeArgs(args json.RawMessage, a any) *rpcError {
	if len(args) == 0 || string(args) == "null" {
		return nil
	}
	if err := json.Unmarshal(args, a); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return invalidParams(fmt.Sprintf("argument %s must be %s, not %s", te.Field, jsonKind(te.Type), te.Value), nil)
		}
		return invalidParams("invalid arguments: "+err.Error(), nil)
	}
	return nil
}

// jsonKind names what JSON value fits a Go type.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// intArg is an integer argument as JSON Schema's "integer" reads one: a
// number with no fraction, so 10.0 is 10; null leaves it as it was.
type intArg int

func (n *intArg) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		// Said as encoding/json says a value of the wrong type.
		value := "number " + string(b)
		if err == nil && f == math.Trunc(f) {
			value += ", out of range"
		}
		switch b[0] {
		case '"':
			value = "string"
		case '[':
			value = "array"
		case '{':
			value = "object"
		case 't', 'f':
			value = "bool"
		}
		return &json.UnmarshalTypeError{Value: value, Type: reflect.TypeFor[intArg]()}
	}
	*n = intArg(f)
	return nil
}

func invalidParams(msg string, data any) *rpcError {
	return &rpcError{Code: jsonrpc.CodeInvalidParams, Message: msg, Data: data}
}

func (s *server) notification(m *message) {
	switch m.Method {
	case mcp.NoteInitialized:
		s.mu.Lock()
		s.initialized = true
		s.mu.Unlock()
	case mcp.NoteCancelled:
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
			Reason    string          `json:"reason"`
		}
		_ = json.Unmarshal(m.Params, &p)
		ignore := s.faults["ignore-cancel"]
		s.mu.Lock()
		stop, running := s.inflight[string(p.RequestID)]
		s.cancellations = appendBounded(s.cancellations, seenCancel{p.RequestID, p.Reason, running, ignore})
		if !ignore {
			delete(s.listens, string(p.RequestID))
		}
		s.wakeLocked()
		s.mu.Unlock()
		if ignore {
			fmt.Fprintf(s.errOut, "demo: ignoring a cancellation: %s (-fault ignore-cancel)\n", m.Params)
			return
		}
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
	if m.Method == mcp.MethodToolsCall {
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

// send writes messages, one line each, in one write.
func (s *server) send(ms ...message) {
	var b []byte
	for _, m := range ms {
		m.JSONRPC = "2.0"
		line, err := json.Marshal(m)
		if err != nil {
			fmt.Fprintf(s.errOut, "demo: cannot encode a message: %v\n", err)
			return
		}
		b = append(append(b, line...), '\n')
		if s.faults["answer-twice"] && m.Method == "" && m.ID != nil {
			b = append(append(b, line...), '\n')
		}
	}
	if s.faults["garbage"] {
		b = append([]byte(junk), b...)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, err := s.out.Write(b); err != nil {
		fmt.Fprintf(s.errOut, "demo: write stdout: %v\n", err)
	}
}

func errorResponse(id json.RawMessage, code int, msg string, data any) message {
	if id == nil {
		id = json.RawMessage("null")
	}
	e := map[string]any{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	b, _ := json.Marshal(e)
	return message{ID: id, Error: b}
}

func serverInfo() map[string]string {
	return map[string]string{"name": "gateway-demo", "version": Version}
}

const instructions = "A demo server: echo text back, run a slow task with progress, return a large result, list what it received, and the MCP conformance fixtures (test_*)."

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
