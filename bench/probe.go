package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The probe is the child of the stream workloads: this program run as
// "bench probe -report SOCKET", a stdio MCP server (both eras) whose tools
// hold a call open and stamp what they send with the monotonic clock, so
// that the client, on the same machine and clock, can time what the server
// in between adds. What happens on stdin that the client cannot see (a
// call arriving, a cancellation arriving) is told to the report socket, a
// Unix datagram socket the client listens on: stdout is the server's pipe.
//
// Tools:
//
//   - hold {tag, every_ms, steps, gate}: sends a progress event at once
//     (step 0), then, once released (when gate is set: see release), one
//     every every_ms for steps steps, and answers "<tag> done <steps>";
//     with steps 0 it never answers, and sends progress every every_ms
//     (with every_ms 0, none after step 0) until cancelled. Each event's
//     message is "<tag> <step> <ns>", ns the monotonic clock just before
//     the write. The call needs a progress token for its events.
//   - release {gate}: lets every hold waiting on gate go on; answers how
//     many it released.
//   - stats: answers {"held","started","cancelled"} so far.
//   - echo {text}: answers text.
//
// Report datagrams: "started <tag> <ns>" when a hold arrives, "cancelled
// <tag> <ns>" when notifications/cancelled names one (tag "-" when it names
// no call held), ns taken as soon as the line was read.

// monoNow is CLOCK_MONOTONIC in nanoseconds: the same clock in every
// process of the machine, so that the probe's stamps and the client's
// compare.
func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

const (
	probeModern = "2026-07-28"
	probeLegacy = "2025-11-25"
	versionKey  = "io.modelcontextprotocol/protocolVersion"
)

var probeTools = []byte(`[` +
	`{"name":"hold","description":"Holds the call open, sending stamped progress.","inputSchema":{"type":"object","properties":{"tag":{"type":"string"},"every_ms":{"type":"integer"},"steps":{"type":"integer"},"gate":{"type":"string"}},"required":["tag"]}},` +
	`{"name":"release","description":"Lets the holds waiting on a gate go on.","inputSchema":{"type":"object","properties":{"gate":{"type":"string"}},"required":["gate"]}},` +
	`{"name":"stats","description":"Counts of holds and cancellations.","inputSchema":{"type":"object"}},` +
	`{"name":"echo","description":"Returns its text.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}]`)

// probe is one probe process's state.
type probe struct {
	outMu sync.Mutex // one message at a time on stdout
	out   io.Writer
	rep   net.Conn // the report socket; nil: none

	mu        sync.Mutex
	held      map[string]*holdCall // by the request id, as its JSON text
	gates     map[string][]*holdCall
	started   int
	cancelled int
}

type holdCall struct {
	tag     string
	token   json.RawMessage
	id      json.RawMessage
	modern  bool
	every   time.Duration
	steps   int
	stop    chan struct{} // closed on cancellation
	release chan struct{} // closed by release; nil: no gate
}

// serveProbe is "bench probe [-report SOCKET]".
func serveProbe(args []string) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	report := fs.String("report", "", "Unix datagram socket to report arrivals and cancellations to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	p := &probe{out: os.Stdout, held: map[string]*holdCall{}, gates: map[string][]*holdCall{}}
	if *report != "" {
		c, err := net.Dial("unixgram", *report)
		if err != nil {
			return fmt.Errorf("the report socket: %w", err)
		}
		defer c.Close()
		p.rep = c
	}
	return p.serve(os.Stdin)
}

// serve reads stdin in a tight loop: each line is handled before the next
// is read, and a cancellation's time is taken before anything else.
func (p *probe) serve(in io.Reader) error {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			rest, err2 := r.ReadBytes('\n')
			line, err = append(bytes.Clone(line), rest...), err2
		}
		now := monoNow()
		if len(bytes.TrimSpace(line)) > 0 {
			p.handle(line, now)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

type probeMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		RequestID json.RawMessage `json:"requestId"`
		Version   string          `json:"protocolVersion"`
		Meta      struct {
			Version       *string         `json:"io.modelcontextprotocol/protocolVersion"`
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	} `json:"params"`
}

func (p *probe) handle(line []byte, now int64) {
	var m probeMessage
	if err := json.Unmarshal(line, &m); err != nil {
		p.send(probeError(nil, -32700, "parse error"))
		return
	}
	if m.Method == "notifications/cancelled" {
		p.cancel(string(bytes.TrimSpace(m.Params.RequestID)), now)
		return
	}
	if m.ID == nil || m.Method == "" {
		return // other notifications; answers to us (we ask nothing)
	}
	modern := m.Params.Meta.Version != nil || m.Method == "server/discover"
	if v := m.Params.Meta.Version; v != nil && *v != probeModern {
		p.send(probeError(m.ID, -32022, "unsupported protocol version"))
		return
	}
	done := func(body string) {
		if modern {
			body = strings.TrimSuffix(body, "}") + `,"resultType":"complete"}`
		}
		p.send(probeResult(m.ID, body))
	}
	switch m.Method {
	case "initialize":
		v := m.Params.Version
		if !strings.HasPrefix(v, "2025-") {
			v = probeLegacy
		}
		p.send(probeResult(m.ID, `{"protocolVersion":`+strconv.Quote(v)+`,"capabilities":{"tools":{}},"serverInfo":{"name":"bench-probe","version":"1.0.0"}}`))
	case "server/discover":
		done(`{"supportedVersions":["` + probeModern + `"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"public","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"bench-probe","version":"1.0.0"}}}`)
	case "ping":
		if modern {
			p.send(probeResult(m.ID, `{"resultType":"complete"}`))
		} else {
			p.send(probeResult(m.ID, `{}`))
		}
	case "tools/list":
		if modern {
			p.send(probeResult(m.ID, `{"tools":`+string(probeTools)+`,"resultType":"complete","ttlMs":0,"cacheScope":"public"}`))
		} else {
			p.send(probeResult(m.ID, `{"tools":`+string(probeTools)+`}`))
		}
	case "tools/call":
		p.call(&m, modern, now, done)
	default:
		p.send(probeError(m.ID, -32601, "method not found: "+m.Method))
	}
}

func (p *probe) call(m *probeMessage, modern bool, now int64, done func(string)) {
	var args struct {
		Tag     string `json:"tag"`
		EveryMS int    `json:"every_ms"`
		Steps   int    `json:"steps"`
		Gate    string `json:"gate"`
		Text    string `json:"text"`
	}
	if len(m.Params.Arguments) > 0 {
		if err := json.Unmarshal(m.Params.Arguments, &args); err != nil {
			p.send(probeError(m.ID, -32602, "arguments: "+err.Error()))
			return
		}
	}
	text := func(s string) string { return `{"content":[{"type":"text","text":` + strconv.Quote(s) + `}]}` }
	switch m.Params.Name {
	case "echo":
		done(text(args.Text))
	case "stats":
		p.mu.Lock()
		s := fmt.Sprintf(`{"held":%d,"started":%d,"cancelled":%d}`, len(p.held), p.started, p.cancelled)
		p.mu.Unlock()
		done(text(s))
	case "release":
		p.mu.Lock()
		hs := p.gates[args.Gate]
		delete(p.gates, args.Gate)
		p.mu.Unlock()
		for _, h := range hs {
			close(h.release)
		}
		done(text(strconv.Itoa(len(hs))))
	case "hold":
		if args.Tag == "" || strings.ContainsAny(args.Tag, " \n") || args.EveryMS < 0 || args.Steps < 0 {
			p.send(probeError(m.ID, -32602, "hold needs a tag without spaces, every_ms >= 0, steps >= 0"))
			return
		}
		h := &holdCall{tag: args.Tag, token: m.Params.Meta.ProgressToken, id: m.ID, modern: modern,
			every: time.Duration(args.EveryMS) * time.Millisecond, steps: args.Steps, stop: make(chan struct{})}
		p.mu.Lock()
		p.held[string(bytes.TrimSpace(m.ID))] = h
		p.started++
		if args.Gate != "" {
			h.release = make(chan struct{})
			p.gates[args.Gate] = append(p.gates[args.Gate], h)
		}
		p.mu.Unlock()
		p.report("started", h.tag, now)
		p.progress(h, 0)
		if h.steps == 0 && h.every == 0 && h.release == nil {
			return // idle until cancelled: no goroutine to hold
		}
		go p.run(h)
	default:
		p.send(probeError(m.ID, -32602, "unknown tool: "+m.Params.Name))
	}
}

// run is one hold after its step 0.
func (p *probe) run(h *holdCall) {
	if h.release != nil {
		select {
		case <-h.release:
		case <-h.stop:
			return
		}
	}
	if h.every == 0 && h.steps == 0 {
		<-h.stop
		return
	}
	var tick <-chan time.Time
	if h.every > 0 {
		t := time.NewTicker(h.every)
		defer t.Stop()
		tick = t.C
	}
	for step := 1; h.steps == 0 || step <= h.steps; step++ {
		if tick != nil {
			select {
			case <-tick:
			case <-h.stop:
				return
			}
		}
		p.progress(h, step)
	}
	p.mu.Lock()
	_, live := p.held[string(bytes.TrimSpace(h.id))]
	delete(p.held, string(bytes.TrimSpace(h.id)))
	p.mu.Unlock()
	if !live {
		return // cancelled meanwhile
	}
	body := `{"content":[{"type":"text","text":` + strconv.Quote(h.tag+" done "+strconv.Itoa(h.steps)) + `}]`
	if h.modern {
		body += `,"resultType":"complete"`
	}
	p.send(probeResult(h.id, body+"}"))
}

// progress sends step of h, stamped just before the write; a call without
// a progress token gets none.
func (p *probe) progress(h *holdCall, step int) {
	if len(h.token) == 0 || string(h.token) == "null" {
		return
	}
	b := make([]byte, 0, 192)
	b = append(b, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`...)
	b = append(b, h.token...)
	b = append(b, `,"progress":`...)
	b = strconv.AppendInt(b, int64(step), 10)
	if h.steps > 0 {
		b = append(b, `,"total":`...)
		b = strconv.AppendInt(b, int64(h.steps), 10)
	}
	b = append(b, `,"message":"`...)
	b = append(b, h.tag...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(step), 10)
	b = append(b, ' ')
	p.outMu.Lock()
	defer p.outMu.Unlock()
	b = strconv.AppendInt(b, monoNow(), 10)
	b = append(b, "\"}}\n"...)
	_, _ = p.out.Write(b)
}

// cancel ends the hold the gateway's request id names, and reports it.
func (p *probe) cancel(id string, now int64) {
	p.mu.Lock()
	h := p.held[id]
	delete(p.held, id)
	p.cancelled++
	p.mu.Unlock()
	tag := "-"
	if h != nil {
		tag = h.tag
		close(h.stop)
	}
	p.report("cancelled", tag, now)
}

func (p *probe) report(kind, tag string, ns int64) {
	if p.rep == nil {
		return
	}
	_, _ = p.rep.Write([]byte(kind + " " + tag + " " + strconv.FormatInt(ns, 10)))
}

func (p *probe) send(line []byte) {
	p.outMu.Lock()
	defer p.outMu.Unlock()
	_, _ = p.out.Write(line)
}

func probeResult(id json.RawMessage, body string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + body + "}\n")
}

func probeError(id json.RawMessage, code int, msg string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	return []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":` + strconv.Itoa(code) + `,"message":` + strconv.Quote(msg) + "}}\n")
}
