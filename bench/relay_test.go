package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The id is found at the top level only, whatever comes before it, and
// only a string or a number is taken.
func TestIDSpan(t *testing.T) {
	for _, c := range []struct{ in, id string }{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `1`},
		{`{"id":"a\"b\\","method":"ping"}`, `"a\"b\\"`},
		{` { "id" : -12.5e3 , "method":"ping"}`, `-12.5e3`},
		{`{"params":{"id":9,"list":[{"id":8}]},"id":"late"}`, `"late"`},
		{`{"params":{"text":"\"id\":7, {"},"id":3}`, `3`},
		{`{"jsonrpc":"2.0","idx":5,"id":6}`, `6`},
		{`{"jsonrpc":"2.0","id":42}`, `42`},
		// Refused: no id at the top level, an id of another kind, not an
		// object, cut short.
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"id":2}}`, ``},
		{`{"jsonrpc":"2.0","id":null}`, ``},
		{`{"jsonrpc":"2.0","id":{"n":1}}`, ``},
		{`{"jsonrpc":"2.0","id":[1]}`, ``},
		{`{"method":"id","x":"id"}`, ``},
		{`["id",1]`, ``},
		{``, ``},
		{`{"id":"open`, ``},
		{`{"id"`, ``},
		{`{"id":`, ``},
	} {
		start, end, ok := idSpan([]byte(c.in))
		got := ""
		if ok {
			got = c.in[start:end]
		}
		if ok != (c.id != "") || got != c.id {
			t.Errorf("%s: got %q, %v; want %q", c.in, got, ok, c.id)
		}
	}
}

// lockedBuffer records what passes between the relay and the child.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// take returns what was recorded since the last take.
func (l *lockedBuffer) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	l.b.Reset()
	return s
}

// relayedCall is a 2026-07-28 echo of text with id (JSON) as its id,
// given after the params when late.
func relayedCall(id, text string, late bool) string {
	params := `"params":{"name":"echo","arguments":{"text":` + strconv.Quote(text) + `,"id":5},` + modernMeta + `}`
	if late {
		return `{"jsonrpc":"2.0","method":"tools/call",` + params + `,"id":` + id + `}`
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call",` + params + `}`
}

// Through the relay in front of the real echo child: the child is sent the
// body with the relay's own id in place of the client's and nothing else
// changed; the client is answered the child's line with its own id put
// back, byte for byte; a body with no id, or not on one line, is refused
// and the child sent nothing; concurrent calls each get their own answer.
func TestRelayRewritesIDs(t *testing.T) {
	e := startEcho(t)
	var toChild, fromChild lockedBuffer
	r := bufio.NewReader(io.TeeReader(e.out, &fromChild))
	if err := discover(io.MultiWriter(e.in, &toChild), r); err != nil {
		t.Fatal(err)
	}
	toChild.take()
	fromChild.take()
	rl := newRelay(io.MultiWriter(e.in, &toChild))
	read := make(chan error, 1)
	go func() { read <- rl.read(r) }()
	srv := httptest.NewServer(rl)
	// A call the relay never answers fails the test rather than hanging it.
	client := &http.Client{Timeout: 5 * time.Second}
	t.Cleanup(func() {
		// The child's stdout ends as it exits (or is closed by the wait for
		// it first), which fails any call still waiting, so that the server
		// can close.
		e.in.Close()
		if err := <-read; !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
			t.Errorf("the reader ended with %v, not at the end of the child's stdout", err)
		}
		closed := make(chan struct{})
		go func() { srv.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Error("calls still wait 10 s after the child's stdout ended")
		}
	})
	post := func(body string) (int, string, http.Header) {
		t.Helper()
		resp, err := client.Post(srv.URL+"/mcp", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b), resp.Header
	}

	next := 0 // the relay's last id
	for _, c := range []struct {
		id   string
		late bool
	}{{`99`, false}, {`"abc"`, false}, {`"x\"y\\"`, true}, {`-7`, true}, {`123456789012345678901234567890`, false}, {`1.5e2`, false}, {`""`, false}} {
		next++
		body := relayedCall(c.id, "hello "+c.id, c.late)
		code, answer, h := post(body)
		if code != http.StatusOK || h.Get("Content-Type") != "application/json" || h.Get("Content-Length") != strconv.Itoa(len(answer)) {
			t.Fatalf("id %s: %d %v %s", c.id, code, h, answer)
		}
		sent := toChild.take()
		if want := strings.Replace(body, `"id":`+c.id, `"id":`+strconv.Itoa(next), 1) + "\n"; sent != want {
			t.Errorf("id %s: the child was sent\n%s\nwant\n%s", c.id, sent, want)
		}
		line := fromChild.take()
		if want := strings.Replace(strings.TrimSuffix(line, "\n"), `"id":`+strconv.Itoa(next), `"id":`+c.id, 1); answer != want ||
			!strings.HasPrefix(answer, `{"jsonrpc":"2.0","id":`+c.id+`,"result":`) || !strings.Contains(answer, strconv.Quote("hello "+c.id)) {
			t.Errorf("id %s: the client was answered\n%s\nthe child's line being\n%s", c.id, answer, line)
		}
	}

	for _, body := range []string{
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"id":2}}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":{"n":1},"method":"ping"}`,
		`not json`,
		``,
		"{\"jsonrpc\":\"2.0\",\n\"id\":3,\"method\":\"ping\"}",
	} {
		if code, answer, _ := post(body); code != http.StatusBadRequest {
			t.Errorf("%q: %d %s; want 400", body, code, answer)
		}
	}
	if sent := toChild.take(); sent != "" {
		t.Errorf("the child was sent %q for bodies it refused", sent)
	}

	// Many calls at once, with ids of both kinds that repeat across
	// clients: each answer is the one to its own call.
	var wg sync.WaitGroup
	errs := make(chan error, 32*8)
	for g := range 32 {
		wg.Go(func() {
			for i := range 8 {
				id := strconv.Itoa(i)
				if g%2 == 0 {
					id = strconv.Quote(fmt.Sprint("c", i))
				}
				text := fmt.Sprintf("client %d call %d", g, i)
				resp, err := client.Post(srv.URL+"/mcp", "application/json", strings.NewReader(relayedCall(id, text, g%3 == 0)))
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(b), `{"jsonrpc":"2.0","id":`+id+`,"result":`) || !strings.Contains(string(b), strconv.Quote(text)) {
					errs <- fmt.Errorf("%s (id %s): %d %s %v", text, id, resp.StatusCode, b, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if len(rl.waiting) != 0 || rl.next != uint64(next+32*8) {
		t.Errorf("%d calls still wait; the last id is %d, want %d", len(rl.waiting), rl.next, next+32*8)
	}
}

// The members the relay reads are found at their own level only.
func TestRelayTokens(t *testing.T) {
	for _, c := range []struct{ name, in, req, note string }{
		{"request", `{"id":1,"params":{"name":"hold","_meta":{"progressToken":"t1"}}}`, `"t1"`, ``},
		{"request, decoys before it", `{"params":{"arguments":{"_meta":{"progressToken":"no"},"x":[{"}":"]"}]},"_meta" : { "a":[1,{"progressToken":0}], "progressToken" : 42 }},"id":1}`, `42`, ``},
		{"request, in the arguments only", `{"id":1,"params":{"arguments":{"_meta":{"progressToken":"inside"}}}}`, ``, ``},
		{"request, _meta outside params", `{"id":1,"_meta":{"progressToken":"top"},"params":{}}`, ``, ``},
		{"progress", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t1","progress":1}}`, ``, `"t1"`},
		{"progress, a decoy in a string", `{"params":{"message":"\"progressToken\":9","progressToken":-3},"method":"notifications/progress"}`, ``, `-3`},
		{"another notification", `{"jsonrpc":"2.0","method":"notifications/message","params":{"progressToken":"t1"}}`, ``, ``},
		{"progress, the token nested", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"data":{"progressToken":"t1"}}}`, ``, ``},
		{"progress, cut short", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t1"`, ``, ``},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, k := range []struct {
				want string
				find func([]byte) ([]byte, bool)
			}{{c.req, requestToken}, {c.note, progressOf}} {
				got, ok := k.find([]byte(c.in))
				if ok != (k.want != "") || string(got) != k.want {
					t.Errorf("%s: got %q, %v; want %q", c.in, got, ok, k.want)
				}
			}
		})
	}
}

// The relay floor's streams, in front of the probe: every timed workload
// runs through it (each fails on a step lost or misrouted, or a
// cancellation the child never reads); a stream's last event is the answer
// with the client's id; a second stream under a token in use is refused.
func TestRelayFloorStreams(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sz := smallStreams
	var ids tags
	l, err := floorStreams(ctx, testSelf(t), sz, &ids)
	if err != nil {
		t.Fatal(err)
	}
	checkLatencies(t, l, sz)

	g, err := startProbeRelay(ctx, testSelf(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer g.stop()
	// Held after its step 0 until released: the token stays in use.
	h, err := g.srv.open(ctx, 777, holdArgs{tag: "mine", every: 1, steps: 3, gate: "g"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := firstStep(h); err != nil {
		t.Fatal(err)
	}
	dup, err := g.srv.post(ctx, 778, holdArgs{tag: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	defer dup.Close()
	if err := dup.headers(10 * time.Second); err == nil || !strings.Contains(err.Error(), "HTTP 409") {
		t.Errorf("a second stream under a token in use: %v", err)
	}
	if _, err := g.srv.jsonCall(ctx, "release", []byte(`{"gate":"g"}`)); err != nil {
		t.Fatal(err)
	}
	var last []byte
	for range 4 {
		if last, _, err = h.next(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	ev, _, progress, err := decodeEvent(last)
	if err != nil || progress || string(ev.ID) != "777" || len(ev.Result.Content) != 1 || ev.Result.Content[0].Text != "mine done 3" {
		t.Errorf("the stream's last event: %s (%v)", last, err)
	}
}
