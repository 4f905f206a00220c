package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// The workloads that are not about echo (a large answer, a CPU-bound
// child, profiles) call the echo child's other tools, spin and big, on
// the servers the echo workloads measure, dialed as those do.

// running is a server started on a free port and ready to be called.
type running struct {
	*server
	base string // http://127.0.0.1:port
}

// startTarget starts t in front of child on a free port and waits until
// it accepts connections. The caller stops it.
func startTarget(ctx context.Context, t target, child []string) (*running, error) {
	s, err := startServer(ctx, t, child)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.name, err)
	}
	return &running{server: s, base: "http://127.0.0.1:" + strconv.Itoa(s.port)}, nil
}

// startGateway is startTarget for a gateway (gatewayTarget), also
// waiting (a long-poll of /readyz, not a sleep) until every child it runs
// has finished its handshake.
func startGateway(ctx context.Context, t target, child []string) (*running, error) {
	r, err := startTarget(ctx, t, child)
	if err != nil {
		return nil, err
	}
	if err := awaitAllReady(ctx, r.base); err != nil {
		r.stop()
		return nil, err
	}
	return r, nil
}

func awaitAllReady(ctx context.Context, base string) error {
	ctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz?wait=30s&until=all-ready", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("readyz: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"status":"ready"`)) {
		return fmt.Errorf("the gateway is not ready after 30 s: HTTP %d: %s", resp.StatusCode, b)
	}
	return nil
}

// toolClient calls the echo child's tools by name on one server, with
// the URL, headers and revision its target's caller uses for echo (and
// its session, for a 2025 peer).
type toolClient struct {
	client *http.Client
	url    string
	header http.Header // every call's; Mcp-Name is set per tool
	modern bool        // a 2026-07-28 caller: its revision in _meta
	ids    atomic.Int64
	dialed caller // closed with the client: it may end a session
}

// dialTools dials t at base as its caller would, and calls tools over
// transport.
func dialTools(ctx context.Context, t target, base string, transport http.RoundTripper) (*toolClient, error) {
	c, err := t.dial(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", t.name, err)
	}
	tc := &toolClient{client: &http.Client{Transport: transport}, dialed: c}
	switch c := c.(type) {
	case *httpCaller:
		tc.url, tc.header, tc.modern = c.url, c.header.Clone(), true
	case *peerCaller:
		tc.url, tc.header, tc.modern = c.url, c.header.Clone(), c.tail == modernTail
	default:
		c.Close()
		return nil, fmt.Errorf("%s: a caller of type %T has no tools client", t.name, c)
	}
	return tc, nil
}

// call calls tool with args (a JSON object) and returns the JSON-RPC
// message that answers it (from the body, or from the event stream), the
// answer's size on the wire, and the time from writing the request to
// reading the answer's last byte. into, when not nil, is the buffer the
// answer is read into (sized for it: a large answer is then not copied as
// it grows).
func (c *toolClient) call(ctx context.Context, tool, args string, into *bytes.Buffer) (msg []byte, size int, elapsed time.Duration, err error) {
	body := make([]byte, 0, 256+len(args))
	body = append(body, `{"jsonrpc":"2.0","id":`...)
	body = strconv.AppendInt(body, c.ids.Add(1), 10)
	body = append(body, `,"method":"tools/call","params":{"name":`...)
	body = strconv.AppendQuote(body, tool)
	body = append(body, `,"arguments":`...)
	body = append(body, args...)
	if c.modern {
		body = append(body, `,"_meta":{"io.modelcontextprotocol/protocolVersion":"`+modernRevision+`","io.modelcontextprotocol/clientCapabilities":{}}`...)
	}
	body = append(body, "}}"...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, 0, 0, err
	}
	req.Header = c.header.Clone()
	if c.modern {
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", tool)
	}
	buf := into
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	buf.Reset()
	start := time.Now()
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, 0, 0, err
	}
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	elapsed = time.Since(start)
	if err != nil {
		return nil, 0, elapsed, fmt.Errorf("%s: reading the answer: %w", tool, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, buf.Len(), elapsed, fmt.Errorf("%s: HTTP %d: %.200s", tool, resp.StatusCode, buf.Bytes())
	}
	msg, err = answerMessage(resp.Header.Get("Content-Type"), buf.Bytes())
	if err != nil {
		return nil, buf.Len(), elapsed, fmt.Errorf("%s: %w", tool, err)
	}
	return msg, buf.Len(), elapsed, nil
}

func (c *toolClient) Close() error {
	c.client.CloseIdleConnections()
	return c.dialed.Close()
}

// spinCaller is a caller (for runLoad) whose every call is spin for ms
// milliseconds; the text runLoad gives is not used.
type spinCaller struct {
	tools *toolClient
	args  string
	want  []byte // how the answer's text ends
}

func newSpinCaller(tools *toolClient, spin time.Duration) *spinCaller {
	ms := strconv.FormatFloat(float64(spin)/float64(time.Millisecond), 'f', -1, 64)
	return &spinCaller{tools: tools, args: `{"ms":` + ms + `}`, want: []byte(" times in " + ms + ` ms"`)}
}

func (s *spinCaller) Call(ctx context.Context, _ string) error {
	msg, _, _, err := s.tools.call(ctx, "spin", s.args, nil)
	if err != nil {
		return err
	}
	if !bytes.Contains(msg, []byte(`"result":`)) || !bytes.Contains(msg, []byte(`"text":"spun `)) || !bytes.Contains(msg, s.want) {
		return fmt.Errorf("spin: the answer is %.200s", msg)
	}
	return nil
}

func (s *spinCaller) Close() error { return s.tools.Close() }
