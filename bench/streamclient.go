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
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The stream workloads' client: calls to the probe's tools on raw
// connections, one call per connection, so that closing the connection is
// what cancels a call, and each SSE event is timed as it is read.

// streamServer is how to call the probe through one server.
type streamServer struct {
	addr   string      // host:port
	header http.Header // every request's headers but Content-Length and Host
	modern bool        // 2026-07-28 bodies (_meta revision); otherwise 2025 (a session in header)
}

// modernStreamServer is a 2026-07-28 server at addr (the gateway,
// mcp-proxy).
func modernStreamServer(addr string) streamServer {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("MCP-Protocol-Version", modernRevision)
	h.Set("Mcp-Method", "tools/call")
	return streamServer{addr: addr, header: h, modern: true}
}

// body is a tools/call of tool with args (a JSON object), asking for
// progress under token when it is not empty.
func (s streamServer) body(id int64, tool string, args []byte, token string) []byte {
	b := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s`, id, tool, args)
	var meta []string
	if s.modern {
		meta = append(meta, `"io.modelcontextprotocol/protocolVersion":"`+modernRevision+`","io.modelcontextprotocol/clientCapabilities":{}`)
	}
	if token != "" {
		meta = append(meta, `"progressToken":`+strconv.Quote(token))
	}
	if len(meta) > 0 {
		b = append(b, `,"_meta":{`+strings.Join(meta, ",")+`}`...)
	}
	return append(b, "}}"...)
}

// holdArgs are the arguments of a hold.
type holdArgs struct {
	tag          string
	every, steps int
	gate         string
}

func (a holdArgs) json() []byte {
	return fmt.Appendf(nil, `{"tag":%q,"every_ms":%d,"steps":%d,"gate":%q}`, a.tag, a.every, a.steps, a.gate)
}

// holdStream is one hold call on its own connection.
type holdStream struct {
	tag  string
	conn net.Conn
	br   *bufio.Reader // the connection
	resp *http.Response
	body *bufio.Reader // the answer's body, once its headers are read
}

// post sends a hold to s on a new connection; its answer is not read yet.
func (s streamServer) post(ctx context.Context, id int64, a holdArgs) (*holdStream, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return nil, err
	}
	if err := writeRequest(c, s, s.body(id, "hold", a.json(), a.tag), "hold"); err != nil {
		c.Close()
		return nil, err
	}
	return &holdStream{tag: a.tag, conn: c, br: bufio.NewReaderSize(c, 4<<10)}, nil
}

func writeRequest(c net.Conn, s streamServer, body []byte, tool string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", s.addr, len(body))
	for k, vs := range s.header {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	if s.modern {
		fmt.Fprintf(&b, "Mcp-Name: %s\r\n", tool)
	}
	b.WriteString("\r\n")
	b.Write(body)
	_, err := c.Write(b.Bytes())
	return err
}

// open posts a hold and reads its answer's headers, which must start an
// event stream.
func (s streamServer) open(ctx context.Context, id int64, a holdArgs, wait time.Duration) (*holdStream, error) {
	h, err := s.post(ctx, id, a)
	if err != nil {
		return nil, err
	}
	if err := h.headers(wait); err != nil {
		h.Close()
		return nil, err
	}
	if ct := h.resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		b, _ := io.ReadAll(io.LimitReader(h.body, 1<<10))
		h.Close()
		return nil, fmt.Errorf("hold %s: HTTP %d, %s, not an event stream: %.200s", a.tag, h.resp.StatusCode, ct, b)
	}
	return h, nil
}

// headers reads the answer's status and headers, waiting at most wait.
func (h *holdStream) headers(wait time.Duration) error {
	_ = h.conn.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(h.br, nil)
	if err != nil {
		return fmt.Errorf("hold %s: %w", h.tag, err)
	}
	h.resp = resp
	h.body = bufio.NewReaderSize(resp.Body, 4<<10)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(h.body, 1<<10))
		return fmt.Errorf("hold %s: HTTP %d: %.200s", h.tag, resp.StatusCode, b)
	}
	return nil
}

// next is the data of the stream's next event and the monotonic time its
// data line was read, waiting at most wait (0: for ever). A JSON answer
// (not a stream) is one event.
func (h *holdStream) next(wait time.Duration) ([]byte, int64, error) {
	if wait > 0 {
		_ = h.conn.SetReadDeadline(time.Now().Add(wait))
	} else {
		_ = h.conn.SetReadDeadline(time.Time{})
	}
	if !strings.HasPrefix(h.resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(io.LimitReader(h.body, maxAnswer))
		if err == nil && len(b) == 0 {
			err = io.EOF
		}
		return b, monoNow(), err
	}
	var data []byte
	var at int64
	for {
		line, err := h.body.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			rest, err2 := h.body.ReadBytes('\n')
			line, err = append(bytes.Clone(line), rest...), err2
		}
		if err != nil {
			return nil, 0, err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if data != nil {
				return data, at, nil
			}
		case bytes.HasPrefix(line, []byte("data:")):
			if data == nil {
				at = monoNow()
			} else {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
		}
		// Comments (keep-alives), event names and ids carry nothing here.
	}
}

func (h *holdStream) Close() error { return h.conn.Close() }

// streamEvent is what the client reads of an event: a progress
// notification, or the call's answer.
type streamEvent struct {
	Method string          `json:"method"`
	ID     json.RawMessage `json:"id"`
	Params struct {
		ProgressToken json.RawMessage `json:"progressToken"`
		Message       string          `json:"message"`
	} `json:"params"`
	Result *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// stamp is a progress message's tag, step and the probe's clock.
type stamp struct {
	tag  string
	step int
	ns   int64
}

func parseStamp(msg string) (stamp, error) {
	f := strings.Fields(msg)
	if len(f) != 3 {
		return stamp{}, fmt.Errorf("progress message %q is not \"tag step ns\"", msg)
	}
	step, err1 := strconv.Atoi(f[1])
	ns, err2 := strconv.ParseInt(f[2], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return stamp{}, fmt.Errorf("progress message %q: %w", msg, err)
	}
	return stamp{f[0], step, ns}, nil
}

// decodeEvent reads an event: a progress stamp (progress true), or the
// answer, which must be a result.
func decodeEvent(data []byte) (ev streamEvent, st stamp, progress bool, err error) {
	if err := json.Unmarshal(data, &ev); err != nil {
		return ev, st, false, fmt.Errorf("an event that is not JSON: %.200s", data)
	}
	switch {
	case ev.Method == "notifications/progress":
		st, err = parseStamp(ev.Params.Message)
		return ev, st, true, err
	case ev.Method != "":
		return ev, st, false, fmt.Errorf("an unexpected %s", ev.Method)
	case ev.Error != nil:
		return ev, st, false, fmt.Errorf("error %d: %s", ev.Error.Code, ev.Error.Message)
	case ev.Result == nil:
		return ev, st, false, fmt.Errorf("neither progress nor a result: %.200s", data)
	}
	return ev, st, false, nil
}

// tally counts what one stream of the concurrent workload received: its
// steps 0..steps and its answer, each once, all its own.
type tally struct {
	tag       string
	steps     int
	seen      []bool
	events    int // progress events read
	misrouted int // events or an answer of another call
	repeated  int // a step seen twice
	answered  bool
}

func newTally(tag string, steps int) *tally {
	return &tally{tag: tag, steps: steps, seen: make([]bool, steps+1)}
}

// add takes one event's data; an error is an event that is not what a
// hold sends at all (it fails the run).
func (t *tally) add(data []byte) (stamp, bool, error) {
	ev, st, progress, err := decodeEvent(data)
	if err != nil {
		return st, false, fmt.Errorf("stream %s: %w", t.tag, err)
	}
	if !progress {
		if len(ev.Result.Content) != 1 || ev.Result.Content[0].Text != t.tag+" done "+strconv.Itoa(t.steps) {
			t.misrouted++
		}
		t.answered = true
		return st, false, nil
	}
	t.events++
	if st.tag != t.tag || string(ev.Params.ProgressToken) != strconv.Quote(t.tag) {
		t.misrouted++
		return st, true, nil
	}
	if st.step < 0 || st.step > t.steps {
		t.misrouted++
		return st, true, nil
	}
	if t.seen[st.step] {
		t.repeated++
	}
	t.seen[st.step] = true
	return st, true, nil
}

// lost is the steps the stream never received.
func (t *tally) lost() int {
	n := 0
	for _, ok := range t.seen {
		if !ok {
			n++
		}
	}
	return n
}

// reports is the client's end of the probe's report socket.
type reports struct {
	conn *net.UnixConn
	path string

	mu        sync.Mutex
	waiters   map[string]chan int64 // by "kind tag"
	counts    map[string]int        // by kind
	changed   chan struct{}         // closed and replaced on each report
	readError error
	done      chan struct{}
}

// listenReports listens on a new socket in dir (short: a socket path is at
// most 107 bytes).
func listenReports(dir string) (*reports, error) {
	path := filepath.Join(dir, "report.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, err
	}
	_ = c.SetReadBuffer(4 << 20)
	r := &reports{conn: c, path: path, waiters: map[string]chan int64{}, counts: map[string]int{}, changed: make(chan struct{}), done: make(chan struct{})}
	go r.read()
	return r, nil
}

func (r *reports) read() {
	defer close(r.done)
	buf := make([]byte, 512)
	for {
		n, err := r.conn.Read(buf)
		if err != nil {
			r.mu.Lock()
			r.readError = err
			r.mu.Unlock()
			return
		}
		f := strings.Fields(string(buf[:n]))
		if len(f) != 3 {
			continue
		}
		ns, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			continue
		}
		r.mu.Lock()
		r.counts[f[0]]++
		if w, ok := r.waiters[f[0]+" "+f[1]]; ok {
			delete(r.waiters, f[0]+" "+f[1])
			w <- ns
		}
		close(r.changed)
		r.changed = make(chan struct{})
		r.mu.Unlock()
	}
}

// expect is where the next report of kind for tag will come: call it
// before what makes the probe report.
func (r *reports) expect(kind, tag string) <-chan int64 {
	ch := make(chan int64, 1)
	r.mu.Lock()
	r.waiters[kind+" "+tag] = ch
	r.mu.Unlock()
	return ch
}

func (r *reports) forget(kind, tag string) {
	r.mu.Lock()
	delete(r.waiters, kind+" "+tag)
	r.mu.Unlock()
}

// count is how many reports of kind came so far.
func (r *reports) count(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[kind]
}

// waitCount waits until n reports of kind have come, for at most wait; it
// returns how many came.
func (r *reports) waitCount(ctx context.Context, kind string, n int, wait time.Duration) int {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		got, changed := r.counts[kind], r.changed
		r.mu.Unlock()
		if got >= n {
			return got
		}
		select {
		case <-changed:
		case <-deadline.C:
			return got
		case <-ctx.Done():
			return got
		}
	}
}

func (r *reports) Close() error {
	err := r.conn.Close()
	<-r.done
	os.Remove(r.path)
	return err
}

// jsonCall calls tool with args on s (no progress: a JSON answer) and
// returns the text of the result.
func (s streamServer) jsonCall(ctx context.Context, tool string, args []byte) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := writeRequest(c, s, s.body(1, tool, args, ""), tool); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", fmt.Errorf("%s: %w", tool, err)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return "", fmt.Errorf("%s: %w", tool, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: HTTP %d: %.200s", tool, resp.StatusCode, b)
	}
	msg, err := answerMessage(resp.Header.Get("Content-Type"), b)
	if err != nil {
		return "", err
	}
	ev, _, _, err := decodeEvent(msg)
	if err != nil {
		return "", fmt.Errorf("%s: %w", tool, err)
	}
	if len(ev.Result.Content) != 1 {
		return "", fmt.Errorf("%s: %.200s", tool, msg)
	}
	return ev.Result.Content[0].Text, nil
}

// probeStats is the probe's counts, from its stats tool.
type probeStats struct {
	Held, Started, Cancelled int
}

func (s streamServer) stats(ctx context.Context) (probeStats, error) {
	text, err := s.jsonCall(ctx, "stats", []byte(`{}`))
	if err != nil {
		return probeStats{}, err
	}
	var st probeStats
	if err := json.Unmarshal([]byte(text), &st); err != nil {
		return st, fmt.Errorf("stats: %q", text)
	}
	return st, nil
}
