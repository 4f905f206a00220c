package bridge

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/internal/gatewaytest"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// pipeTransport is the bridge's end of an in-memory child: two io.Pipes
// carrying newline-framed messages, as a real child's stdio would.
type pipeTransport struct {
	r        *bufio.Reader
	rc       *io.PipeReader // child -> bridge
	w        *io.PipeWriter // bridge -> child
	tok      chan struct{}
	maxLine  int
	closeOne sync.Once
	closed   chan struct{}
	gathered atomic.Int32 // GatherMessage calls
	over     *tooLong     // a line over maxLine reported as it passed it, not yet ended
}

// tooLong mimics the stdio reader's error for a line over the limit.
type tooLong struct {
	size    int64
	head    []byte
	tail    []byte // the last 64 bytes
	ongoing bool
}

func (e *tooLong) Error() string { return fmt.Sprintf("a %d-byte line over the limit", e.size) }
func (e *tooLong) Skipped() (int64, []byte, []byte) {
	if e.ongoing {
		return e.size, e.head, nil
	}
	return e.size, e.head, e.tail
}
func (e *tooLong) Ongoing() bool { return e.ongoing }

// ReadMessage reads as the stdio reader does: a line over maxLine whose
// end is not in the reader's buffer yet is reported as it passes the limit,
// and again at its end.
func (p *pipeTransport) ReadMessage() ([]byte, error) {
	last := func(b []byte) []byte { return bytes.Clone(b[max(0, len(b)-64):]) }
	var line []byte
	for {
		chunk, err := p.r.ReadSlice('\n')
		full := errors.Is(err, bufio.ErrBufferFull)
		if o := p.over; o != nil {
			chunk = bytes.TrimSuffix(chunk, []byte("\n"))
			o.size += int64(len(chunk))
			o.tail = last(append(o.tail, chunk...))
			if full {
				continue
			}
			p.over = nil
			return nil, o
		}
		line = append(line, chunk...)
		if full {
			if p.maxLine > 0 && len(line) > p.maxLine {
				head := bytes.Clone(line[:64])
				p.over = &tooLong{size: int64(len(line)), head: head, tail: last(line)}
				return nil, &tooLong{size: int64(len(line)), head: head, ongoing: true}
			}
			continue
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		if p.maxLine > 0 && len(line) > p.maxLine {
			return nil, &tooLong{size: int64(len(line)), head: line[:min(len(line), 64)], tail: last(line)}
		}
		if len(line) > 0 {
			return line, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// Buffered reports what the stdio transport reports: whether more output
// is already read.
func (p *pipeTransport) Buffered() bool { return p.r.Buffered() > 0 }

func (p *pipeTransport) WriteMessage(ctx context.Context, msg []byte) error {
	if bytes.IndexByte(msg, '\n') >= 0 {
		return errors.New("message with a newline")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-p.tok:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { p.tok <- struct{}{} }()
	// Like stdio after its first byte: the write is finished whatever ctx does.
	_, err := p.w.Write(append(msg[:len(msg):len(msg)], '\n'))
	return err
}

// GatherMessage writes at once, as WriteMessage does, and counts the call:
// the bridge asks for it only with other calls pending on the child.
func (p *pipeTransport) GatherMessage(ctx context.Context, msg []byte) error {
	p.gathered.Add(1)
	return p.WriteMessage(ctx, msg)
}

func (p *pipeTransport) Close() error {
	p.closeOne.Do(func() {
		close(p.closed)
		p.w.Close()
		p.rc.CloseWithError(io.EOF)
	})
	return nil
}

// fakeChild is the other end: the test reads what the bridge wrote from got
// and writes lines back with send.
type fakeChild struct {
	t      *testing.T
	out    *io.PipeWriter
	wmu    sync.Mutex
	got    chan *jsonrpc.Message
	gate   chan struct{} // when not nil, reading past the first message (the handshake's) waits for it to close
	auto   autoReply
	exited chan struct{}
}

// autoReply says how the fake child answers the handshake by itself.
type autoReply struct {
	discover    string // "result", "error", "unsupported" (-32022), "array" (a result that is not an object), "exit" (close output), "late" (answer only after initialize) or "" (silent)
	initialize  bool   // answer initialize with a 2025-11-25 InitializeResult
	listChanged bool   // a modern child that announces tool list changes
	ignorePing  bool   // a wedged child: pings, and any server/discover after the first, go unanswered
}

func (c *fakeChild) readLoop(r io.Reader) {
	defer close(c.exited)
	defer close(c.got)
	br := bufio.NewReader(r)
	var late []byte // the probe a slow child answers late
	discovered := false
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return
		}
		m, err := jsonrpc.Parse(bytes.TrimSuffix(line, []byte("\n")))
		if err != nil {
			c.t.Errorf("bridge wrote an invalid message %q: %v", line, err)
			return
		}
		switch {
		case m.Method == "server/discover" && c.auto.ignorePing && discovered:
			// A wedged modern child: the liveness probe goes unanswered.
		case m.Method == "server/discover" && c.auto.discover == "exit":
			c.got <- m
			c.exit()
			continue
		case m.Method == "server/discover" && c.auto.discover == "late":
			late = m.ID
		case m.Method == "initialize" && c.auto.discover == "late":
			// A slow modern child: it gets to the probe only now, and
			// refuses initialize.
			c.send(`{"jsonrpc":"2.0","id":%s,"result":{"supportedVersions":["2026-07-28"],"capabilities":{}}}`, late)
			c.send(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"initialize is not a 2026-07-28 method"}}`, m.ID)
		case m.Method == "server/discover" && c.auto.discover == "result" && c.auto.listChanged:
			c.send(`{"jsonrpc":"2.0","id":%s,"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}}}}`, m.ID)
		case m.Method == "server/discover" && c.auto.discover == "result":
			c.send(`{"jsonrpc":"2.0","id":%s,"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"fake","version":"1"}}}}`, m.ID)
		case m.Method == "server/discover" && c.auto.discover == "array":
			c.send(`{"jsonrpc":"2.0","id":%s,"result":[]}`, m.ID)
		case m.Method == "server/discover" && c.auto.discover == "unsupported":
			c.send(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32022,"message":"unsupported protocol version","data":{"supported":["2099-01-01"]}}}`, m.ID)
		case m.Method == "server/discover" && c.auto.discover == "error":
			c.send(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, m.ID)
		case m.Method == "ping" && !c.auto.ignorePing:
			c.send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
		case m.Method == "initialize" && c.auto.initialize:
			c.send(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true},"logging":{}},"serverInfo":{"name":"fake","version":"1"},"instructions":"be nice"}}`, m.ID)
		}
		discovered = discovered || m.Method == "server/discover"
		c.got <- m
		if c.gate != nil {
			<-c.gate // once closed, it holds nothing up
		}
	}
}

// sendRaw writes s as it is: no newline is added.
func (c *fakeChild) sendRaw(s string) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := io.WriteString(c.out, s); err != nil {
		c.t.Errorf("fake child write: %v", err)
	}
}

func (c *fakeChild) send(format string, args ...any) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	// A bridge that closed its end (pipeTransport.Close, with io.EOF)
	// takes nothing more: an answer racing a test's end is not an error.
	if _, err := fmt.Fprintf(c.out, format+"\n", args...); err != nil && !errors.Is(err, io.ErrClosedPipe) && !errors.Is(err, io.EOF) {
		c.t.Errorf("fake child write: %v", err)
	}
}

// exit closes the child's output, as a process that exits does.
func (c *fakeChild) exit() { c.out.Close() }

// next returns the next message the bridge wrote, skipping the handshake
// and liveness probes.
func (c *fakeChild) next() *jsonrpc.Message {
	c.t.Helper()
	for {
		select {
		case m, ok := <-c.got:
			if !ok {
				c.t.Fatal("the bridge closed the child's input")
			}
			if m.Method == "server/discover" || m.Method == "initialize" || m.Method == "notifications/initialized" || m.Method == "ping" {
				continue
			}
			return m
		case <-time.After(10 * time.Second):
			c.t.Fatal("no message from the bridge")
		}
	}
}

// expect returns the next message and checks its method.
func (c *fakeChild) expect(method string) *jsonrpc.Message {
	c.t.Helper()
	m := c.next()
	if m.Method != method {
		c.t.Fatalf("child got %s %s, want %s", m.Method, m.Raw, method)
	}
	return m
}

// world is a bridge wired to fake children; each start makes a new one.
type world struct {
	t        *testing.T
	b        *Bridge
	children chan *fakeChild
	auto     autoReply
	maxLine  int
	gated    bool
	log      *gatewaytest.LockedBuffer // what the bridge logged, when the test gave it one
}

func newWorld(t *testing.T, opts Options, auto autoReply) *world {
	w := &world{t: t, children: make(chan *fakeChild, 8), auto: auto}
	w.b = New(w.start, strict(t, opts))
	t.Cleanup(func() {
		w.b.Close(context.Background())
		for {
			select {
			case c := <-w.children:
				c.exit()
			default:
				return
			}
		}
	})
	return w
}

func (w *world) start(ctx context.Context) (Transport, error) {
	toChild, fromBridge := io.Pipe()
	fromChild, toBridge := io.Pipe()
	c := &fakeChild{t: w.t, out: toBridge, got: make(chan *jsonrpc.Message, 1024), auto: w.auto, exited: make(chan struct{})}
	if w.gated {
		c.gate = make(chan struct{})
	}
	go c.readLoop(toChild)
	w.children <- c
	tr := &pipeTransport{r: bufio.NewReader(fromChild), rc: fromChild, w: fromBridge, tok: make(chan struct{}, 1), closed: make(chan struct{}), maxLine: w.maxLine}
	tr.tok <- struct{}{}
	return tr, nil
}

// child returns the next child the bridge started.
func (w *world) child() *fakeChild {
	w.t.Helper()
	select {
	case c := <-w.children:
		w.t.Cleanup(c.exit)
		return c
	case <-time.After(10 * time.Second):
		w.t.Fatal("the bridge started no child")
		return nil
	}
}

// request reads a client's request as the HTTP side does.
func request(t *testing.T, s string) *mcp.Request {
	t.Helper()
	m, err := jsonrpc.Parse([]byte(s))
	if err != nil {
		t.Fatalf("Parse(%s): %v", s, err)
	}
	r, err := mcp.Read(m)
	if err != nil {
		t.Fatalf("Read(%s): %v", s, err)
	}
	return r
}

// callOn is b.Call with the bridge's own call, for tests that look inside.
func callOn(b *Bridge, ctx context.Context, req *mcp.Request, caller Caller) (*call, error) {
	c, err := b.Call(ctx, req, caller)
	if err != nil {
		return nil, err
	}
	return c.(*call), nil
}

// currentChild is the first worker's child.
func (w *world) currentChild() *child { return w.b.workers[0].current() }

func legacy() Options { return Options{Era: EraLegacy} }

// strict makes a broken invariant of the bridge (a call ended twice, say)
// fail the test.
func strict(t testing.TB, opts Options) Options {
	opts.OnInternalError = func(err error) { t.Errorf("the bridge broke an invariant: %v", err) }
	return opts
}

// call starts a call and fails the test if it cannot.
func (w *world) call(ctx context.Context, s string) *call {
	w.t.Helper()
	c, err := callOn(w.b, ctx, request(w.t, s), Caller{})
	if err != nil {
		w.t.Fatalf("Call(%s): %v", s, err)
	}
	return c
}

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }
