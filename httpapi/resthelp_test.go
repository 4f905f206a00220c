package httpapi

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

var allTools = []string{echoTool, addTool, lookTool, slashTool, spaceTool, pctTool, quotedTool}

// toolList is a tool list as the bridge keeps it: each object as the child
// wrote it, its name, and the digest of the whole.
func toolList(tools ...string) *bridge.ToolList {
	l := &bridge.ToolList{}
	d := sha256.New()
	for _, t := range tools {
		name, _ := mcp.String(jsonrpc.Get([]byte(t), "name"))
		l.Tools = append(l.Tools, json.RawMessage(t))
		l.Names = append(l.Names, name)
		d.Write([]byte(t))
		d.Write([]byte{'\n'})
	}
	d.Sum(l.Digest[:0])
	return l
}

// restServer is a server over a fake child that lists tools.
func restServer(t *testing.T, opts Options, tools ...string) (*fakeBackend, string) {
	t.Helper()
	f := newFake()
	f.tools = toolList(tools...)
	return f, newServer(t, f, opts).URL
}

func rpcResult(result string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":1,"result":` + result + `}`)
}

func rpcError(errObj string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":1,"error":` + errObj + `}`)
}

// restReq is a request with the content type (none if empty) and the
// header's name, value pairs.
func restReq(method, url, contentType, body string, header ...string) *http.Request {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		panic(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	return req
}

// reply is an answer read whole.
type reply struct {
	status int
	header http.Header
	body   []byte
	err    error
}

// restStart sends req from a goroutine of its own and reads the whole
// answer; the caller must receive from the channel.
func restStart(req *http.Request) <-chan reply {
	ch := make(chan reply, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- reply{err: err}
			return
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		ch <- reply{status: resp.StatusCode, header: resp.Header, body: body, err: err}
	}()
	return ch
}

// restDo sends req and reads the whole answer.
func restDo(t *testing.T, req *http.Request) reply {
	t.Helper()
	return await(t, restStart(req))
}

// restRefused sends req, which must be answered without reaching the
// child: a call that does reach it fails the test and is ended, so that
// the test does not wait for an answer nobody gives.
func restRefused(t *testing.T, f *fakeBackend, req *http.Request) reply {
	t.Helper()
	answer := restStart(req)
	select {
	case r := <-answer:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r
	case c := <-f.calls:
		t.Errorf("a call reached the child: %s", c.req.Raw)
		c.finish(rpcError(`{"code":-32603,"message":"not for the child"}`), nil)
		return await(t, answer)
	}
}

func await(t *testing.T, ch <-chan reply) reply {
	t.Helper()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r
}

// problemDoc is a problem as a client reads it; raw members keep their
// bytes.
type problemDoc struct {
	Type          string          `json:"type"`
	Title         string          `json:"title"`
	Status        int             `json:"status"`
	Detail        string          `json:"detail"`
	Code          int             `json:"code"`
	Reason        string          `json:"reason"`
	Errors        []argumentError `json:"errors"`
	Result        json.RawMessage `json:"result"`
	InputRequests json.RawMessage `json:"inputRequests"`
	Error         json.RawMessage `json:"error"`
}

// checkProblem reads a problem object and checks what every problem
// holds: a type under the gateway's URN, a title, and status.
func checkProblem(t *testing.T, data []byte, status int, kind string) problemDoc {
	t.Helper()
	var p problemDoc
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatalf("not a problem object: %v: %s", err, data)
	}
	if !strings.HasPrefix(p.Type, problemPrefix) || p.Title == "" || p.Status != status {
		t.Errorf("problem: type %q, title %q, status %d; want a type under %s, a title, status %d: %s", p.Type, p.Title, p.Status, problemPrefix, status, data)
	}
	if kind != "" && p.Type != problemPrefix+kind {
		t.Errorf("problem type %q, want %s: %s", p.Type, problemPrefix+kind, data)
	}
	if bytes.Contains(data, []byte(`"jsonrpc"`)) {
		t.Errorf("a JSON-RPC body where a problem belongs: %s", data)
	}
	return p
}

// wantProblem checks that r is an application/problem+json answer with
// status, of the kind (any when "").
func wantProblem(t *testing.T, r reply, status int, kind string) problemDoc {
	t.Helper()
	if r.status != status {
		t.Errorf("status %d, want %d: %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json: %s", ct, r.body)
	}
	p := checkProblem(t, r.body, r.status, kind)
	if (status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests) && r.header.Get("Retry-After") == "" {
		t.Errorf("%d without Retry-After", status)
	}
	return p
}

// sseEvent is one event of a stream; name "message" when it had none.
type sseEvent struct{ name, data string }

// sseEvents reads the events of a whole stream.
func sseEvents(t *testing.T, r reply) []sseEvent {
	t.Helper()
	if ct := r.header.Get("Content-Type"); r.status != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q, want a 200 stream: %s", r.status, ct, r.body)
	}
	var events []sseEvent
	ev := sseEvent{name: "message"}
	var data []string
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != nil {
				ev.data = strings.Join(data, "\n")
				events = append(events, ev)
			}
			ev, data = sseEvent{name: "message"}, nil
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		}
	}
	if data != nil {
		t.Errorf("the stream ends inside an event: %s", r.body)
	}
	return events
}

// lastEvent is the stream's last event, after checking that exactly one
// result or error ends it.
func lastEvent(t *testing.T, events []sseEvent) sseEvent {
	t.Helper()
	if len(events) == 0 {
		t.Fatal("no events")
	}
	for _, e := range events[:len(events)-1] {
		if e.name != "progress" {
			t.Errorf("event %q before the end, want only progress: %v", e.name, events)
		}
	}
	return events[len(events)-1]
}
