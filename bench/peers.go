package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
)

// The peers are other gateways that put a stdio MCP server on HTTP, run
// from npm (bench/setup installs them into bench/node_modules) by the Node
// that runs the echo child. Each is configured as its README says to serve
// one stdio server over Streamable HTTP, with its logging off: a per-message
// log line is a choice a user can turn off, not a cost of the design.

const (
	legacyRevision = "2025-11-25"
	modernRevision = "2026-07-28"

	// peerStopGrace is how long a peer has to exit after SIGTERM before it
	// is killed. supergateway gives its children 5 s after SIGTERM before it
	// kills them, mcp-proxy gives itself 5 s: both fit.
	peerStopGrace = 10 * time.Second

	// maxAnswer bounds the answer a caller reads; an echo is far smaller.
	maxAnswer = 1 << 20
)

// supergateway 4.0.0 in stateful Streamable HTTP mode (2025 revisions) in
// front of child. It spawns a child per session, when the session's
// initialize arrives: there is none before a caller dials, and each caller
// (one session) has its own. It listens on every interface (it has no
// option for the host) and answers every call as an event stream.
// node is the node binary; dir is bench/, where node_modules is.
func supergatewayTarget(node, dir string) target {
	return target{
		name: "supergateway 4.0.0 --stateful (" + legacyRevision + ")",
		command: func(ctx context.Context, port int, child []string) *exec.Cmd {
			// --stdio is a shell command line; exec spares a shell process
			// between supergateway and the child.
			return peerCommand(ctx, node, filepath.Join(dir, "node_modules", "supergateway", "dist", "index.js"),
				"--stdio", "exec "+shellJoin(child),
				"--outputTransport", "streamableHttp", "--stateful",
				"--port", strconv.Itoa(port), "--logLevel", "none")
		},
		dial: dialSession,
	}
}

// mcp-proxy 6.7.19 in front of child, called as a 2026-07-28 client: every
// request stands alone, with its revision in _meta and in headers. It
// speaks to the child with initialize (its default upstream protocol).
func mcpProxyTarget(node, dir string) target {
	return target{
		name: "mcp-proxy 6.7.19 (" + modernRevision + ")",
		command: func(ctx context.Context, port int, child []string) *exec.Cmd {
			args := []string{filepath.Join(dir, "node_modules", "mcp-proxy", "dist", "bin", "mcp-proxy.mjs"),
				"--host", "127.0.0.1", "--port", strconv.Itoa(port), "--server", "stream", "--"}
			return peerCommand(ctx, node, append(args, child...)...)
		},
		dial: dialModern,
	}
}

// peerCommand runs a peer until ctx ends, then stops it with SIGTERM, and
// kills it if it has not exited peerStopGrace later. Its stderr is ours, so
// that a peer's complaint is seen; its stdout carries only banners.
func peerCommand(ctx context.Context, node string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = peerStopGrace
	cmd.Stderr = os.Stderr
	return cmd
}

// shellJoin quotes argv for sh.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// The body of an echo call is built from fixed pieces around its id and
// text.
const (
	callHead   = `{"jsonrpc":"2.0","id":`
	callMiddle = `,"method":"tools/call","params":{"name":"echo","arguments":{"text":`
	legacyTail = `}}}`
	modernTail = `},"_meta":{"io.modelcontextprotocol/protocolVersion":"` + modernRevision +
		`","io.modelcontextprotocol/clientCapabilities":{}}}}`
)

// peerCaller makes echo calls over one keep-alive client. Call is safe for
// concurrent use: what it shares is read-only or atomic.
type peerCaller struct {
	client *http.Client
	url    string
	// header is every call's header. Requests share it: net/http reads a
	// request's header and never writes to it.
	header http.Header
	tail   string
	ids    atomic.Int64
	bufs   sync.Pool // *bytes.Buffer for answers
	end    func() error
}

func newPeerCaller(url, tail string) *peerCaller {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	return &peerCaller{
		// The load client's own transport, as for every target (see
		// rawTransport; it retries a call on a connection Node closed).
		client: &http.Client{Transport: &rawTransport{}},
		url:    url,
		header: h,
		tail:   tail,
		bufs:   sync.Pool{New: func() any { return new(bytes.Buffer) }},
	}
}

func (c *peerCaller) Call(ctx context.Context, text string) error {
	if !utf8.ValidString(text) {
		return errors.New("echo: text is not UTF-8")
	}
	body := make([]byte, 0, len(callHead)+20+len(callMiddle)+len(text)+8+len(c.tail))
	body = append(body, callHead...)
	body = strconv.AppendInt(body, c.ids.Add(1), 10)
	body = append(body, callMiddle...)
	mark := len(body)
	body = appendJSONString(body, text)
	quoted := body[mark:]
	body = append(body, c.tail...)

	buf := c.bufs.Get().(*bytes.Buffer)
	defer c.bufs.Put(buf)
	resp, err := c.post(ctx, c.header, body, buf)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("echo: HTTP %d: %.200s", resp.StatusCode, buf.Bytes())
	}
	msg, err := answerMessage(resp.Header.Get("Content-Type"), buf.Bytes())
	if err != nil {
		return err
	}
	return checkEcho(msg, quoted, text)
}

// post sends body with header and reads the answer into buf.
func (c *peerCaller) post(ctx context.Context, header http.Header, body []byte, buf *bytes.Buffer) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = header
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	buf.Reset()
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, maxAnswer)); err != nil {
		return nil, fmt.Errorf("read the answer: %w", err)
	}
	return resp, nil
}

func (c *peerCaller) Close() error {
	var err error
	if c.end != nil {
		err = c.end()
	}
	c.client.CloseIdleConnections()
	return err
}

// answerMessage is the JSON-RPC message an answer carries: the body, or
// the last data line of an event stream (the final response ends it).
func answerMessage(contentType string, body []byte) ([]byte, error) {
	if !strings.HasPrefix(contentType, "text/event-stream") {
		return body, nil
	}
	var msg []byte
	for rest := body; len(rest) > 0; {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			msg = bytes.TrimSpace(data)
		}
	}
	if msg == nil {
		return nil, fmt.Errorf("echo: an event stream with no data: %.200s", body)
	}
	return msg, nil
}

// checkEcho checks that msg is a result whose text content is text. The
// peers write JSON as JavaScript's JSON.stringify does, as appendJSONString
// quotes it, so the text is found as bytes; anything else is decoded to
// say what came back.
func checkEcho(msg, quoted []byte, text string) error {
	if i := bytes.Index(msg, []byte(`"text":`)); i >= 0 && bytes.HasPrefix(msg[i+len(`"text":`):], quoted) &&
		bytes.Contains(msg, []byte(`"result":`)) {
		return nil
	}
	var m struct {
		Result *struct {
			Content []struct{ Text string }
		}
		Error *struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return fmt.Errorf("echo: not JSON-RPC: %.200s", msg)
	}
	switch {
	case m.Error != nil:
		return fmt.Errorf("echo: error %d: %s", m.Error.Code, m.Error.Message)
	case m.Result == nil || len(m.Result.Content) != 1:
		return fmt.Errorf("echo: not one content item: %.200s", msg)
	case m.Result.Content[0].Text != text:
		return fmt.Errorf("echo: got %q back, want %q", m.Result.Content[0].Text, text)
	}
	return nil
}

// appendJSONString appends s (valid UTF-8) as a JSON string, escaped as
// JSON.stringify escapes it: quote, backslash and control characters only.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// dialSession opens a 2025 session: initialize, the session id it returns,
// notifications/initialized; the caller's calls carry the session id and
// the revision agreed, and Close ends the session with DELETE.
func dialSession(ctx context.Context, base string) (caller, error) {
	c := newPeerCaller(base+"/mcp", legacyTail)
	buf := new(bytes.Buffer)
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + legacyRevision +
		`","capabilities":{},"clientInfo":{"name":"gateway-bench","version":"1"}}}`
	resp, err := c.post(ctx, c.header, []byte(init), buf)
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("initialize: HTTP %d: %.200s", resp.StatusCode, buf.Bytes())
	}
	session := resp.Header.Get("Mcp-Session-Id")
	if session == "" {
		return nil, errors.New("initialize: no Mcp-Session-Id in the answer")
	}
	msg, err := answerMessage(resp.Header.Get("Content-Type"), buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	var m struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &m); err != nil || m.Result.ProtocolVersion == "" {
		return nil, fmt.Errorf("initialize: no protocolVersion in %.200s", msg)
	}
	h := c.header.Clone()
	h.Set("Mcp-Session-Id", session)
	h.Set("MCP-Protocol-Version", m.Result.ProtocolVersion)
	resp, err = c.post(ctx, h, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), buf)
	if err != nil {
		return nil, fmt.Errorf("notifications/initialized: %w", err)
	}
	if resp.StatusCode != http.StatusAccepted {
		return nil, fmt.Errorf("notifications/initialized: HTTP %d: %.200s", resp.StatusCode, buf.Bytes())
	}
	c.header = h
	c.end = c.deleteSession
	return c, nil
}

// deleteSession ends the caller's session, which frees its child.
func (c *peerCaller) deleteSession() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.url, nil)
	if err != nil {
		return err
	}
	req.Header = c.header
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("end the session: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("end the session: HTTP %d", resp.StatusCode)
	}
	return nil
}

// dialModern makes a 2026-07-28 caller: no handshake, every call carries
// its revision and the headers that mirror its body. It asks
// server/discover once, so that a server that does not speak the revision
// is found before the load starts.
func dialModern(ctx context.Context, base string) (caller, error) {
	c := newPeerCaller(base+"/mcp", modernTail)
	h := c.header.Clone()
	h.Set("MCP-Protocol-Version", modernRevision)
	h.Set("Mcp-Method", "server/discover")
	discover := `{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` +
		modernRevision + `","io.modelcontextprotocol/clientCapabilities":{}}}}`
	buf := new(bytes.Buffer)
	resp, err := c.post(ctx, h, []byte(discover), buf)
	if err != nil {
		return nil, fmt.Errorf("server/discover: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("server/discover: HTTP %d: %.200s", resp.StatusCode, buf.Bytes())
	}
	msg, err := answerMessage(resp.Header.Get("Content-Type"), buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("server/discover: %w", err)
	}
	var m struct {
		Result struct {
			SupportedVersions []string `json:"supportedVersions"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &m); err != nil || !slices.Contains(m.Result.SupportedVersions, modernRevision) {
		return nil, fmt.Errorf("server/discover: %s is not among the versions in %.200s", modernRevision, msg)
	}
	h.Set("Mcp-Method", "tools/call")
	h.Set("Mcp-Name", "echo")
	c.header = h
	return c, nil
}
