package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawPost is a POST /mcp as bytes, with extra header lines (each ending
// in \r\n) before the Content-Length.
func rawPost(addr, headers, body string) string {
	return "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" +
		headers + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// chunk is one chunk of a chunked body.
func chunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

// What reaches the gateway's port from a browser page or a hostile client
// speaking HTTP badly: rebinding, sizes, framing, header injection,
// duplicate members, and slow clients.
func TestAttackWire(t *testing.T) {
	t.Parallel()
	g := startGateway(t, []string{"GATEWAY_MAX_BODY_BYTES=4096", "GATEWAY_MAX_HEADER_BYTES=8192",
		"GATEWAY_HEADER_TIMEOUT=1s", "GATEWAY_IDLE_TIMEOUT=1s"})
	tg := newTarget(t, g, "")
	echo := call("echo", `{"text":"hi"}`)
	tg.run(t, []attack{
		{name: "rebinding Host", header: []string{"Host", "evil.example"}, body: echo, status: 403, code: -32600},
		{name: "rebinding Host with a port", header: []string{"Host", "evil.example:" + strings.Split(tg.addr(), ":")[1]}, body: echo, status: 403, code: -32600},
		{name: "rebinding Origin", header: []string{"Origin", "http://evil.example"}, body: echo, status: 403, code: -32600},
		{name: "rebinding Host and Origin", header: []string{"Host", "evil.example", "Origin", "http://evil.example"}, body: echo, status: 403, code: -32600},
		{name: "opaque Origin", header: []string{"Origin", "null"}, body: echo, status: 403, code: -32600},
		{name: "body over the limit", body: call("echo", `{"text":"`+strings.Repeat("x", 8<<10)+`"}`), status: 413, code: -32600},
		{name: "chunked body over the limit", chunked: true, body: call("echo", `{"text":"`+strings.Repeat("x", 8<<10)+`"}`), status: 413, code: -32600},
		{name: "headers over the limit", header: []string{"X-Pad", strings.Repeat("p", 20<<10)}, body: echo, status: 431},
		{name: "a body within the limits", body: echo, status: 200, reached: []string{"echo"}},
	})

	// The first 2026-07-28 tools/call makes the gateway read the child's
	// tool list (for Mcp-Param headers); after this, rows see only their own.
	t.Run("a 2026-07-28 call", func(t *testing.T) {
		tg.send(t, "", modernHeaders("echo"), modernCall("echo"), false).is(t, 200, 0)
		tg.reached(t, "echo", "tools/list")
	})

	addr := tg.addr()
	modern := "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n"
	smuggled := rawPost(addr, "", call("test_simple_text", `{}`))
	for _, a := range []struct {
		name    string
		request string
		status  int
		code    int
		reached []string
		closes  bool // the connection must end after the answer
	}{
		// net/http takes Transfer-Encoding over Content-Length, as RFC
		// 9112 §6.1 allows, but then keeps the connection and serves
		// what follows, where a front end that went by Content-Length
		// sees the rest of a body: "Regardless, the server MUST close
		// the connection after responding to such a request".
		{name: "Content-Length with Transfer-Encoding, smuggling a request",
			request: "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n" +
				chunk(echo) + "0\r\n\r\n" + smuggled,
			status: 200, reached: []string{"echo"}, closes: true},
		{name: "two different Content-Lengths", request: rawPost(addr, "Content-Length: "+strconv.Itoa(len(echo)+1)+"\r\n", echo), status: 400, closes: true},
		{name: "Transfer-Encoding that is not chunked", request: "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\n" + echo, status: 501, closes: true},
		{name: "CR in Mcp-Name", request: rawPost(addr, modern+"Mcp-Name: ec\rho\r\n", modernCall("echo")), status: 400, closes: true},
		{name: "LF in Mcp-Name", request: rawPost(addr, modern+"Mcp-Name: ec\nho\r\n", modernCall("echo")), status: 400, closes: true},
		// net/http joins a folded line with a space.
		{name: "CRLF in Mcp-Name, a folded line", request: rawPost(addr, modern+"Mcp-Name: ec\r\n ho\r\n", modernCall("echo")), status: 400, code: -32020},
		// Read as one field (RFC 9110 §5.3), the value is "echo, slow",
		// which is not the body's; the gateway reads the first line only,
		// while an intermediary may act on the last.
		{name: "Mcp-Name twice, an injected header", request: rawPost(addr, modern+"Mcp-Name: echo\r\nMcp-Name: slow\r\n", modernCall("echo")), status: 400, code: -32020},
		{name: "control character in Mcp-Name", request: rawPost(addr, modern+"Mcp-Name: ec\x01ho\r\n", modernCall("echo")), status: 400, closes: true},
		{name: "non-ASCII Mcp-Name not base64-encoded", request: rawPost(addr, modern+"Mcp-Name: \xc3\xa9cho\r\n", modernCall("\u00e9cho")), status: 400, code: -32020},
		{name: "base64 Mcp-Name that disagrees with the body", request: rawPost(addr, modern+"Mcp-Name: =?base64?c2xvdw==?=\r\n", modernCall("echo")), status: 400, code: -32020},
		{name: "base64 Mcp-Name", request: rawPost(addr, modern+"Mcp-Name: =?base64?ZWNobw==?=\r\n", modernCall("echo")), status: 200, reached: []string{"echo"}},
	} {
		t.Run(a.name, func(t *testing.T) {
			c, br := rawConn(t, addr)
			if _, err := io.WriteString(c, a.request); err != nil {
				t.Fatal(err)
			}
			readReply(t, br).is(t, a.status, a.code)
			if a.closes {
				if next, err := nextOrEnd(br); err == nil {
					t.Errorf("the connection goes on after the answer, and answers again: %s", next)
				}
			}
			c.Close()
			tg.reached(t, a.reached...)
		})
	}

	t.Run("headers that never end", func(t *testing.T) {
		c, br := rawConn(t, addr)
		start := time.Now()
		if _, err := io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: "+addr+"\r\n"); err != nil {
			t.Fatal(err)
		}
		next, err := nextOrEnd(br)
		took := time.Since(start)
		t.Logf("after %v: %q, %v", took, next, err)
		switch {
		case err == nil && !strings.HasPrefix(next, "HTTP/1.1 408 "):
			t.Errorf("answer %s; want the connection closed, or 408", next)
		case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
			t.Errorf("the gateway did not close the connection: %v after %v", err, took)
		case took < 500*time.Millisecond || took > 10*time.Second:
			t.Errorf("the connection ended after %v; GATEWAY_HEADER_TIMEOUT is 1s", took)
		}
		tg.reached(t)
	})

	t.Run("a kept-alive connection left idle", func(t *testing.T) {
		c, br := rawConn(t, addr)
		if _, err := io.WriteString(c, rawPost(addr, "", echo)); err != nil {
			t.Fatal(err)
		}
		readReply(t, br).is(t, 200, 0)
		start := time.Now()
		next, err := nextOrEnd(br)
		if took := time.Since(start); !errors.Is(err, io.EOF) || took > 10*time.Second {
			t.Errorf("after the answer: %q, %v after %v; want the connection closed after GATEWAY_IDLE_TIMEOUT (1s)", next, err, took)
		}
		tg.reached(t, "echo")
	})

	// Neither timeout cuts a response that is being streamed.
	t.Run("a 3s stream", func(t *testing.T) {
		start := time.Now()
		r := tg.send(t, "", nil, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow","arguments":{"duration_ms":3000,"interval_ms":100},"_meta":{"progressToken":"p"}}}`, false)
		took := time.Since(start)
		var progress int
		var last string
		for line := range strings.Lines(string(r.body)) {
			if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
				last = data
				if strings.Contains(data, `"notifications/progress"`) {
					progress++
				}
			}
		}
		t.Logf("%d progress events in %v", progress, took)
		if r.status != 200 || r.header.Get("Content-Type") != "text/event-stream" || progress == 0 ||
			!strings.Contains(last, `"done after 30 steps"`) || took < 3*time.Second {
			t.Errorf("after %v, %d progress events, status %d %s, last event %s", took, progress, r.status, r.header.Get("Content-Type"), last)
		}
		tg.reached(t, "slow")
	})
}

// nextOrEnd reads what comes next on a raw connection: the start of
// another answer, or the error that ends the connection.
func nextOrEnd(br *bufio.Reader) (string, error) {
	first, err := br.ReadByte()
	if err != nil {
		return "", err
	}
	line, _ := br.ReadString('\n')
	return string(first) + strings.TrimSpace(line), nil
}

// flood sends n echo calls at once as token, each with the headers
// header(i) gives, and checks every answer is 200 or a 429 that says
// when to come back. It returns how many got through, and how long the
// flood took from the first send to the last answer.
func (tg *target) flood(t *testing.T, token string, n int, header func(i int) []string) (ok int, took time.Duration) {
	t.Helper()
	replies := make([]reply, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			replies[i], errs[i] = tg.post(token, header(i), call("echo", `{"text":"flood"}`), false)
		})
	}
	begin := time.Now()
	close(start)
	wg.Wait()
	took = time.Since(begin)
	limited := 0
	for i, r := range replies {
		switch {
		case errs[i] != nil:
			t.Errorf("call %d: %v", i, errs[i])
		case r.status == http.StatusOK && r.code == 0:
			ok++
		case r.status == http.StatusTooManyRequests && r.code == -32009:
			limited++
			if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
				t.Errorf("429 with Retry-After %q", r.header.Get("Retry-After"))
			}
		default:
			t.Errorf("call %d: %v", i, r)
		}
	}
	// The bucket starts full (5) and gains 5 a second.
	if most := 5 + int(5*took.Seconds()) + 1; limited == 0 || ok > most {
		t.Errorf("%d calls in %v: %d went through, %d were limited; want at least one limited and at most %d through", n, took, ok, limited, most)
	}
	return ok, took
}

// A flood past GATEWAY_RATE_LIMIT: keyed on the token's name, and on the
// peer's address when nobody authenticates, where a client that makes up
// a new X-Forwarded-For for every call gains nothing (no proxy is
// trusted). Only what was let through reaches the child.
func TestAttackFlood(t *testing.T) {
	t.Parallel()
	limits := []string{"GATEWAY_RATE_LIMIT=5", "GATEWAY_RATE_BURST=5"}
	t.Run("one token", func(t *testing.T) {
		t.Parallel()
		flood, watch := secret(t), secret(t)
		g := startGateway(t, append(limits, "GATEWAY_AUTH_TOKENS=flood:"+flood+",watch:"+watch))
		tg := newTarget(t, g, watch)
		ok, took := tg.flood(t, flood, 20, func(int) []string { return nil })
		t.Logf("%d of 20 through in %v", ok, took)
		tg.reached(t, slices.Repeat([]string{"echo"}, ok)...)
		neverLogged(t, g, flood, watch)
	})
	t.Run("one address, a new X-Forwarded-For each call", func(t *testing.T) {
		t.Parallel()
		g := startGateway(t, limits)
		tg := newTarget(t, g, "")
		ok, took := tg.flood(t, "", 20, func(i int) []string {
			return []string{"X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i+1)}
		})
		t.Logf("%d of 20 through in %v", ok, took)
		tg.reached(t, slices.Repeat([]string{"echo"}, ok)...)
	})
}

// JSON built to hurt a parser. Only depth is the gateway's to refuse
// (its scanner bounds it at 10000, as encoding/json does, so the child
// could not read it either); a long number or string is valid JSON
// within the body limit, a payload the gateway passes through untouched.
func TestAttackJSONBombs(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil)
	tg := newTarget(t, g, "")
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	long := strings.Repeat("a", 3<<20)
	bigID := "1" + strings.Repeat("0", 99999)
	tg.run(t, []attack{
		{name: "nested 20000 deep", body: call("echo", `{"text":"hi","deep":`+deep(20000)+`}`), status: 400, code: -32700},
		{name: "nested 20000 deep in _meta", body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","_meta":{"x":` + deep(20000) + `}}}`, status: 400, code: -32700},
		{name: "nested 9000 deep", body: call("echo", `{"text":"hi","deep":`+deep(9000)+`}`), status: 200, reached: []string{"echo"}},
		{name: "a number of 100000 digits", body: call("echo", `{"text":"hi","n":1`+strings.Repeat("0", 99999)+`}`), status: 200, reached: []string{"echo"}},
		// The child sees the gateway's own id; the client gets its own back.
		{name: "an id of 100000 digits", body: `{"jsonrpc":"2.0","id":` + bigID + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, status: 200, reached: []string{"echo"}, holds: `"id":` + bigID + `,`},
		{name: "a 3 MiB string", body: call("echo", `{"text":"`+long+`"}`), status: 200, reached: []string{"echo"}, holds: `"text":"` + long + `"`},
		{name: "a 3 MiB key", body: call("echo", `{"text":"hi","`+long+`":1}`), status: 200, reached: []string{"echo"}},
	})
	t.Run("still ready, child not restarted", func(t *testing.T) {
		resp, err := http.Get(g.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if r := g.Readiness(); resp.StatusCode != 200 || r.Restarts != 0 {
			t.Errorf("/readyz %d, %+v", resp.StatusCode, r)
		}
	})
	// Last: the gateway is stopped, so that its log is whole.
	if strings.Contains(stoppedLog(t, g), "panic") {
		t.Errorf("the gateway panicked")
	}
}

// rawConn is a TCP connection to the gateway that the test writes bytes
// on; reads end within a deadline, so that a gateway that never answers
// fails the test instead of hanging it.
func rawConn(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	return c, bufio.NewReader(c)
}

// readReply reads one HTTP answer from a raw connection.
func readReply(t *testing.T, br *bufio.Reader) reply {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer's body: %v", err)
	}
	return newReply(resp.StatusCode, resp.Header, b)
}
