package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The stdio relay floor: the least any stdio-to-HTTP gateway must do for a
// call, done the plainest way. One child serves every client, so each
// call's id is replaced by one of the relay's own on the way in and put
// back on the way out; each call is one write to the child's stdin (the
// gateway gathers the lines of calls that arrive together into one write;
// the floor does not); one reader of its stdout, shared by
// all calls, hands each answer to the handler waiting for it. A call that
// asks for progress (a progressToken, and an Accept that takes
// text/event-stream) is answered with an SSE stream: each progress
// notification naming its token is an event, flushed at once, and the
// answer the last. A client that leaves before its answer becomes a
// notifications/cancelled on the child's stdin. Nothing else: no logging,
// metrics, auth, keep-alives, coalescing or limits. What the gateway costs
// beyond this is its own.

// relayName is the relay floor's target name.
const relayName = "stdio relay floor (net/http, one child)"

// relayTarget is the relay floor in front of the child, in a process of its
// own (this program, as "bench relay PORT -- CHILD..."). It is sent exactly
// what the gateway is sent.
func relayTarget(self string) target {
	return target{
		name: relayName,
		command: func(ctx context.Context, port int, child []string) *exec.Cmd {
			cmd := exec.CommandContext(ctx, self, append([]string{"relay", strconv.Itoa(port), "--"}, child...)...)
			cmd.Env = serverEnv()
			cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
			return cmd
		},
		dial: dialGateway,
	}
}

// maxRelayBody bounds a request the relay reads, as the gateway's
// GATEWAY_MAX_BODY_BYTES does.
const maxRelayBody = 64 << 20

// serveRelay is "bench relay PORT -- CHILD...": it starts the child, asks
// it server/discover (the 2026-07-28 era needs no other handshake, and the
// port opens only once the child answers, so that the suite's wait for the
// port is a wait for readiness), then serves until SIGTERM, when it closes
// the child's stdin and waits for it to exit.
func serveRelay(args []string) error {
	if len(args) < 3 || args[1] != "--" {
		return errors.New("usage: bench relay PORT -- CMD [ARG...]")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := exec.CommandContext(ctx, args[2], args[3:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	// At the end of its input the child exits by itself; it is killed only
	// if it has not a while later.
	cmd.Cancel = in.Close
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the child: %w", err)
	}
	defer func() {
		stop() // the child's stdin closes
		_ = cmd.Wait()
	}()
	r := bufio.NewReaderSize(out, 64<<10)
	if err := discover(in, r); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+args[0])
	if err != nil {
		return err
	}
	rl := newRelay(in)
	srv := &http.Server{Handler: rl}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	read := make(chan error, 1)
	go func() { read <- rl.read(r) }()
	select {
	case err = <-served:
	case err = <-read:
		err = fmt.Errorf("reading the child: %w", err)
	case <-ctx.Done():
		err = nil
	}
	srv.Close()
	return err
}

// discover asks the child server/discover and checks it speaks 2026-07-28.
func discover(in io.Writer, r *bufio.Reader) error {
	line := `{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` +
		modernRevision + `","io.modelcontextprotocol/clientCapabilities":{}}}}` + "\n"
	if _, err := io.WriteString(in, line); err != nil {
		return fmt.Errorf("server/discover: %w", err)
	}
	b, err := r.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("server/discover: %w", err)
	}
	var m struct {
		Result struct {
			SupportedVersions []string `json:"supportedVersions"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &m); err != nil || !slices.Contains(m.Result.SupportedVersions, modernRevision) {
		return fmt.Errorf("server/discover: %s is not among the versions in %.200s", modernRevision, b)
	}
	return nil
}

// relay is the relay floor's handler and the routing of the child's
// lines to it.
type relay struct {
	mu      sync.Mutex // guards next, waiting, tokens and gone
	next    uint64     // the last id given to the child
	waiting map[uint64]chan relayed
	tokens  map[string]chan relayed // the calls streamed, by their progress token as the client wrote it
	gone    bool                    // the child's stdout ended: no answer will come

	wmu   sync.Mutex // one message per write: lines never interleave
	stdin io.Writer
}

// relayed is a line of the child's for a call: a progress notification, or
// its answer, with where the answer's id is.
type relayed struct {
	line       []byte
	start, end int
	progress   bool
}

// relayBacklog is how many lines of the child's a call may have waiting
// for its handler; progress beyond that is dropped (the floor does not
// coalesce), and room is always kept for the answer.
const relayBacklog = 64

func newRelay(stdin io.Writer) *relay {
	return &relay{waiting: map[uint64]chan relayed{}, tokens: map[string]chan relayed{}, stdin: stdin}
}

func (rl *relay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := readBody(w, r)
	if err != nil {
		code := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			code = http.StatusRequestEntityTooLarge
		}
		http.Error(w, err.Error(), code)
		return
	}
	if bytes.ContainsAny(body, "\r\n") {
		// One request is one line on the child's stdin.
		http.Error(w, "the relay takes a body on one line", http.StatusBadRequest)
		return
	}
	start, end, ok := idSpan(body)
	if !ok {
		http.Error(w, "a request with an id, a string or a number, is all the relay takes", http.StatusBadRequest)
		return
	}
	token := ""
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		if t, ok := requestToken(body); ok {
			token = string(t)
		}
	}
	// A call answered with JSON waits for its answer alone; only a stream
	// needs room for progress too.
	backlog := 1
	if token != "" {
		backlog = relayBacklog
	}
	lines := make(chan relayed, backlog)
	rl.mu.Lock()
	switch {
	case rl.gone:
		rl.mu.Unlock()
		http.Error(w, "the child is gone", http.StatusBadGateway)
		return
	case token != "" && rl.tokens[token] != nil:
		rl.mu.Unlock()
		http.Error(w, "a call in progress has this progressToken", http.StatusConflict)
		return
	}
	rl.next++
	id := rl.next
	rl.waiting[id] = lines
	if token != "" {
		rl.tokens[token] = lines
	}
	rl.mu.Unlock()
	line := make([]byte, 0, len(body)+21)
	line = append(line, body[:start]...)
	line = strconv.AppendUint(line, id, 10)
	line = append(line, body[end:]...)
	line = append(line, '\n')
	if err := rl.write(line); err != nil {
		rl.forget(id, token, lines)
		http.Error(w, "writing to the child: "+err.Error(), http.StatusBadGateway)
		return
	}
	clientID := body[start:end]
	if token != "" {
		rl.stream(w, r, id, token, clientID, lines)
		return
	}
	var a relayed
	select {
	case a, ok = <-lines:
		if !ok {
			http.Error(w, "the child is gone", http.StatusBadGateway)
			return
		}
	case <-r.Context().Done():
		rl.cancel(id, token, lines)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(a.line)-(a.end-a.start)+len(clientID)))
	w.Write(a.line[:a.start])
	w.Write(clientID)
	w.Write(a.line[a.end:])
}

// stream answers a call that asked for progress: the headers at once, then
// each line of the child's for it as an event, flushed as it comes, up to
// the answer.
func (rl *relay) stream(w http.ResponseWriter, r *http.Request, id uint64, token string, clientID []byte, lines <-chan relayed) {
	defer rl.forget(id, token, lines)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		rl.cancel(id, token, lines)
		return
	}
	for {
		select {
		case a, ok := <-lines:
			if !ok {
				return // the child is gone; the stream ends without an answer
			}
			w.Write([]byte("data: "))
			if a.progress {
				w.Write(a.line)
			} else {
				w.Write(a.line[:a.start])
				w.Write(clientID)
				w.Write(a.line[a.end:])
			}
			w.Write([]byte("\n\n"))
			if err := rc.Flush(); err != nil {
				rl.cancel(id, token, lines)
				return
			}
			if !a.progress {
				return
			}
		case <-r.Context().Done():
			rl.cancel(id, token, lines)
			return
		}
	}
}

func (rl *relay) write(line []byte) error {
	rl.wmu.Lock()
	defer rl.wmu.Unlock()
	_, err := rl.stdin.Write(line)
	return err
}

// forget stops routing the child's lines to the call id, whose lines go
// to lines, and reports whether its answer was still to come. Its token
// is freed only if it is still the call's: after a cancel has freed it,
// another call may have taken it.
func (rl *relay) forget(id uint64, token string, lines <-chan relayed) (pending bool) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	_, pending = rl.waiting[id]
	delete(rl.waiting, id)
	if token != "" && rl.tokens[token] == lines {
		delete(rl.tokens, token)
	}
	return pending
}

// cancel tells the child that the client of the call id has left, unless
// its answer has come meanwhile.
func (rl *relay) cancel(id uint64, token string, lines <-chan relayed) {
	if !rl.forget(id, token, lines) {
		return
	}
	line := strconv.AppendUint([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`), id, 10)
	_ = rl.write(append(line, `,"reason":"the client left"}}`+"\n"...))
}

// readBody reads the whole request into one buffer of its declared size.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, maxRelayBody)
	if n := r.ContentLength; n >= 0 && n <= maxRelayBody {
		b := make([]byte, n)
		_, err := io.ReadFull(body, b)
		return b, err
	}
	return io.ReadAll(body)
}

// read hands each line of the child's to its call: an answer to the call
// waiting for its id, a progress notification to the stream of its token.
// Once the child's stdout ends, the calls still waiting, and those to
// come, fail. Other lines (there are none from the suite's children) are
// dropped.
func (rl *relay) read(r *bufio.Reader) error {
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			rl.mu.Lock()
			rl.gone = true
			for id, lines := range rl.waiting {
				close(lines)
				delete(rl.waiting, id)
			}
			clear(rl.tokens)
			rl.mu.Unlock()
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		if start, end, ok := idSpan(line); ok {
			id, ok := parseID(line[start:end])
			if !ok {
				continue
			}
			rl.mu.Lock()
			lines, ok := rl.waiting[id]
			delete(rl.waiting, id)
			rl.mu.Unlock()
			if ok {
				// Never blocks: progress leaves room for the answer.
				lines <- relayed{line: line, start: start, end: end}
			}
			continue
		}
		token, ok := progressOf(line)
		if !ok {
			continue
		}
		rl.mu.Lock()
		lines := rl.tokens[string(token)]
		rl.mu.Unlock()
		if lines != nil && len(lines) < cap(lines)-1 {
			// Only this goroutine sends, so the room just seen stays.
			lines <- relayed{line: line, progress: true}
		}
	}
}

// parseID reads one of the relay's ids: decimal digits.
func parseID(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// idSpan finds the value of the "id" member of the JSON object b, at its
// top level: b[start:end] is a string (quotes included) or a number. ok is
// false when b is not an object, has no such member, or its id is neither
// a string nor a number.
func idSpan(b []byte) (start, end int, ok bool) {
	start, end, ok = memberSpan(b, "id")
	if !ok || b[start] != '"' && b[start] != '-' && (b[start] < '0' || b[start] > '9') {
		return 0, 0, false
	}
	return start, end, true
}

// requestToken is the progressToken a request asks for progress under
// (params._meta.progressToken), as it is written.
func requestToken(b []byte) ([]byte, bool) {
	return path(b, "params", "_meta", "progressToken")
}

// progressOf is the token a progress notification names
// (params.progressToken), as it is written.
func progressOf(b []byte) ([]byte, bool) {
	m, ok := path(b, "method")
	if !ok || string(m) != `"notifications/progress"` {
		return nil, false
	}
	return path(b, "params", "progressToken")
}

// path is the value of the member at names, each inside the last.
func path(b []byte, names ...string) ([]byte, bool) {
	for _, name := range names {
		start, end, ok := memberSpan(b, name)
		if !ok {
			return nil, false
		}
		b = b[start:end]
	}
	return b, true
}

// memberSpan finds the value of the member name of the JSON object b, at
// its top level. It scans only up to that value, and skips what is nested
// and what is inside strings, so that a member of the same name further
// in is not taken for it. ok is false when b is not an object, has no such
// member, or is cut short before the member's value ends.
func memberSpan(b []byte, name string) (start, end int, ok bool) {
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return 0, 0, false
	}
	depth := 0
	isName := false // the next string is a member's name at the top level
	for ; i < len(b); i++ {
		switch b[i] {
		case '{':
			depth++
			isName = depth == 1
		case '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return 0, 0, false
			}
		case ',':
			isName = depth == 1
		case '"':
			e := stringEnd(b, i)
			if e < 0 {
				return 0, 0, false
			}
			if isName && string(b[i+1:e-1]) == name {
				j := skipSpace(b, e)
				if j == len(b) || b[j] != ':' {
					return 0, 0, false
				}
				return valueSpan(b, skipSpace(b, j+1))
			}
			isName = false
			i = e - 1
		}
	}
	return 0, 0, false
}

// valueSpan is the JSON value that starts at b[i]: a string, an object or
// an array (to its closing bracket), or a number or literal.
func valueSpan(b []byte, i int) (start, end int, ok bool) {
	if i == len(b) {
		return 0, 0, false
	}
	switch b[i] {
	case '"':
		e := stringEnd(b, i)
		return i, e, e > 0
	case '{', '[':
		depth := 0
		for k := i; k < len(b); k++ {
			switch b[k] {
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i, k + 1, true
				}
			case '"':
				e := stringEnd(b, k)
				if e < 0 {
					return 0, 0, false
				}
				k = e - 1
			}
		}
		return 0, 0, false
	}
	e := i
	for e < len(b) && (b[e] >= '0' && b[e] <= '9' || b[e] >= 'a' && b[e] <= 'z' || b[e] == '-' || b[e] == '+' || b[e] == '.' || b[e] == 'E') {
		e++
	}
	return i, e, e > i
}

// stringEnd is the index just past the string that starts at b[i], or -1
// when it does not end.
func stringEnd(b []byte, i int) int {
	for k := i + 1; k < len(b); k++ {
		switch b[k] {
		case '\\':
			k++
		case '"':
			return k + 1
		}
	}
	return -1
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
