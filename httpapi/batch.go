package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// maxBatch is the most messages one batch may carry: each request in it is
// a call, and the body's size alone would let thousands in.
const maxBatch = 64

// batchRevisions are the revisions whose clients may send a batch:
// 2025-03-26 says a receiver MUST take one, and 2025-06-18 took batches out
// of MCP.
func batchRevisions() []string { return []string{"2025-03-26", "2024-11-05"} }

// batchRevision is the revision a batch is sent in: the header's, else the
// session's (a 2025-03-26 client sends no header), else none, which
// 2025-06-18 says is to be read as 2025-03-26.
func (h *handlers) batchRevision(r *http.Request) string {
	if v := strings.TrimSpace(r.Header.Get(mcp.HeaderProtocolVersionKey)); v != "" {
		return v
	}
	if sid := r.Header.Get(mcp.HeaderSession); sid != "" {
		if s, err := h.sessions.open(sid); err == nil {
			return s.claims.revision
		}
	}
	return ""
}

// batch serves a JSON array of messages from a client of a revision that
// has batches. Each message is served as if it came in a POST of its own
// (the same checks, limits and audit line); the answers to its requests
// come back on one stream, or in one array for a client that takes no
// stream. Notifications, responses to the gateway's questions and
// logging/setLevel are served first, in order (the last may give the
// session a new id, which the calls then carry); the calls then run at
// once.
func (h *handlers) batch(w http.ResponseWriter, r *http.Request, body []byte) {
	if rev := h.batchRevision(r); rev != "" && !slices.Contains(batchRevisions(), rev) {
		writeError(w, http.StatusBadRequest, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: "batches are not part of MCP " + rev + ", only of 2025-03-26 and earlier; send one JSON-RPC message per POST"})
		return
	}
	spans, err := jsonrpc.Elements(body)
	switch {
	case err != nil:
		writeError(w, http.StatusBadRequest, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "a batch: " + err.Error()})
		return
	case len(spans) == 0:
		writeError(w, http.StatusBadRequest, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "an empty batch (JSON-RPC 2.0 needs at least one message in it)"})
		return
	case len(spans) > maxBatch:
		writeError(w, http.StatusBadRequest, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: fmt.Sprintf("a batch of %d messages; the gateway takes at most %d in one", len(spans), maxBatch)})
		return
	}
	if _, ok := h.legacySession(w, r, nil); !ok {
		// A session that does not open is the batch's 404: the client
		// must initialize again, whatever the batch held.
		return
	}
	var first, calls []*batchPart
	for _, s := range spans {
		p := &batchPart{raw: body[s.Start:s.End], header: http.Header{}}
		msg, err := jsonrpc.Parse(p.raw)
		p.asks = err == nil && msg.Kind == jsonrpc.KindRequest
		switch {
		case err != nil:
			// Not a message (a batch in a batch among them): its error is
			// its answer, as in a POST of its own.
			p.answer = jsonrpc.NewErrorResponse(jsonrpc.BestEffortID(p.raw), &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error()})
			p.asks = true
			first = append(first, p)
		case msg.Kind == jsonrpc.KindRequest && msg.Method == mcp.MethodInitialize:
			// 2025-03-26: nothing else can be sent before initialize is
			// answered, so it never comes in a batch.
			p.answer = jsonrpc.NewErrorResponse(msg.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
				Message: "initialize must not be part of a batch; send it alone, first"})
			first = append(first, p)
		case msg.Kind == jsonrpc.KindRequest && msg.Method != mcp.MethodSetLevel:
			calls = append(calls, p)
		default:
			// Answered at once.
			first = append(first, p)
		}
	}
	asked := len(calls)
	for _, p := range first {
		if p.asks {
			asked++
		}
	}
	if asked > 1 && h.opts.Limiter != nil {
		// The batch's POST took one call from the client's budget and
		// one of its open requests; the rest are taken here, all or none.
		release, ok := h.takeMore(w, r, asked-1)
		if !ok {
			return
		}
		defer release()
	}
	sid := r.Header.Get(mcp.HeaderSession)
	for _, p := range first {
		if p.answer == nil {
			h.mcp(p, p.request(r, sid))
		}
		if s := p.header.Get(mcp.HeaderSession); s != "" {
			sid = s
		}
	}
	if sid != r.Header.Get(mcp.HeaderSession) {
		w.Header().Set(mcp.HeaderSession, sid)
	}
	if asked == 0 {
		h.batchAccepted(w, first)
		return
	}
	out := &batchOut{}
	if accepts(r.Header.Get("Accept"), "text/event-stream") {
		out.sse = newSSE(w, h.opts.ClientTimeout)
		if err := out.sse.open(); err != nil {
			return
		}
	}
	for _, p := range first {
		out.end(p)
	}
	var wg sync.WaitGroup
	for _, p := range calls {
		p.out = out
		wg.Go(func() {
			h.mcp(p, p.request(r, sid))
			out.end(p)
		})
	}
	wg.Wait()
	if out.sse == nil {
		all := append([]byte{'['}, bytes.Join(out.answers, []byte{','})...)
		writeJSON(w, http.StatusOK, append(all, ']'))
	}
}

// batchAccepted answers a batch with no request in it: 202 when every
// message was taken, else the first refusal, as 2025-03-26 has it (an
// error status, with an error that names no id).
func (h *handlers) batchAccepted(w http.ResponseWriter, parts []*batchPart) {
	for _, p := range parts {
		if p.status >= 300 {
			for k, v := range p.header {
				w.Header()[k] = v
			}
			w.WriteHeader(p.status)
			w.Write(p.buf.Bytes())
			return
		}
	}
	w.WriteHeader(http.StatusAccepted)
}

// takeMore takes n more calls, and n more open requests, from the client's
// limits, or refuses the batch as the limits refuse a POST.
func (h *handlers) takeMore(w http.ResponseWriter, r *http.Request, n int) (release func(), ok bool) {
	key := h.clientKey(r)
	var releases []func()
	release = func() {
		for _, f := range releases {
			f()
		}
	}
	for range n {
		if ok, wait := h.opts.Limiter.Allow(key); !ok {
			release()
			h.tooMany(w, r, key, wait, "batch", n+1)
			return nil, false
		}
		f, ok := h.opts.Limiter.Open(key)
		if !ok {
			release()
			h.tooManyOpen(w, r, key)
			return nil, false
		}
		releases = append(releases, f)
	}
	return release, true
}

// batchOut is where a batch's answers go: its stream, which parts write
// whole events to as they come, or the array they are gathered in.
type batchOut struct {
	mu      sync.Mutex
	sse     *sseWriter // nil: the answers are gathered
	failed  error      // a write to the stream failed: the rest are dropped
	answers [][]byte   // without a stream: each answer
}

// events sends a part's whole events on the stream.
func (o *batchOut) events(b []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failed == nil {
		if o.failed = o.sse.send(b); o.failed == nil {
			o.failed = o.sse.flush()
		}
	}
	return o.failed
}

// end sends what a served part has left to say: the rest of its stream,
// or its answer. A part that took no stream (a JSON answer, an error) is
// one message.
func (o *batchOut) end(p *batchPart) {
	msg := p.answer
	if msg == nil && !p.streamed() {
		msg = bytes.TrimSpace(p.buf.Bytes())
	}
	if o.sse != nil {
		if p.streamed() {
			_ = o.events(p.buf.Bytes())
			return
		}
		if len(msg) > 0 {
			_ = o.events(fmt.Appendf(nil, "%s%s%s", dataField, oneLine(msg), eventEnd))
		}
		return
	}
	var msgs [][]byte
	if p.streamed() {
		msgs = dataOf(p.buf.Bytes())
	} else if len(msg) > 0 {
		msgs = [][]byte{msg}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range msgs {
		if parsed, err := jsonrpc.Parse(m); err == nil && parsed.Kind != jsonrpc.KindResponse {
			continue // an array answers requests; notifications have no place in it
		}
		o.answers = append(o.answers, m)
	}
}

// dataOf is the data of each event in an SSE stream's bytes.
func dataOf(b []byte) [][]byte {
	var out [][]byte
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		if d, ok := bytes.CutPrefix(line, []byte(dataField)); ok {
			out = append(out, d)
		}
	}
	return out
}

// batchPart is the response of one message of a batch, served as if it
// came alone: what it writes is kept, and a stream's whole events go on to
// the batch's stream as it flushes them. It is not a wrapper of the
// batch's response (it has no Unwrap): a part must not take the
// connection for itself (package detach) nor set its deadlines.
type batchPart struct {
	raw    []byte
	asks   bool // a request: it has an answer to send
	header http.Header
	status int
	buf    bytes.Buffer
	answer []byte    // the gateway's own answer, when it served none
	out    *batchOut // nil until it may stream
}

// request is the POST the part's message would have come in alone.
func (p *batchPart) request(r *http.Request, sid string) *http.Request {
	sub := r.Clone(r.Context())
	sub.Body = io.NopCloser(bytes.NewReader(p.raw))
	sub.ContentLength = int64(len(p.raw))
	if sid != "" {
		sub.Header.Set(mcp.HeaderSession, sid)
	}
	return sub
}

func (p *batchPart) Header() http.Header { return p.header }

func (p *batchPart) WriteHeader(code int) {
	if p.status == 0 {
		p.status = code
	}
}

func (p *batchPart) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return p.buf.Write(b)
}

// streamed tells whether the part answered with a stream.
func (p *batchPart) streamed() bool {
	return strings.HasPrefix(p.header.Get("Content-Type"), "text/event-stream")
}

// FlushError passes the stream's whole events on; the rest waits for the
// next flush or the part's end.
func (p *batchPart) FlushError() error {
	if p.out == nil || p.out.sse == nil || !p.streamed() {
		return nil
	}
	b := p.buf.Bytes()
	i := bytes.LastIndex(b, []byte(eventEnd))
	if i < 0 {
		return nil
	}
	err := p.out.events(b[:i+len(eventEnd)])
	p.buf.Next(i + len(eventEnd))
	return err
}

func (p *batchPart) Flush() { _ = p.FlushError() }
