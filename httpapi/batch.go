package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stdiomcp/gateway/clientlimit"
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
func batchRevision(r *http.Request, sess *session) string {
	if v := strings.TrimSpace(r.Header.Get(mcp.HeaderProtocolVersionKey)); v != "" {
		return v
	}
	if sess != nil {
		return sess.claims.revision
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
	// A session that does not open is the batch's 404 (the client must
	// initialize again, whatever the batch held), and another caller's
	// says nothing of itself, its revision included.
	sess, ok := h.legacySession(w, r, nil)
	if !ok {
		return
	}
	if rev := batchRevision(r, sess); rev != "" && !slices.Contains(batchRevisions(), rev) {
		writeError(w, http.StatusBadRequest, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: "batches are not part of MCP " + rev + ", only of 2025-03-26 and earlier; send one JSON-RPC message per POST"})
		return
	}
	spans, n, err := jsonrpc.ElementsUpTo(body, maxBatch)
	switch {
	case err != nil:
		writeError(w, http.StatusBadRequest, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "a batch: " + err.Error()})
		return
	case n == 0:
		writeError(w, http.StatusBadRequest, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "an empty batch (JSON-RPC 2.0 needs at least one message in it)"})
		return
	case n > maxBatch:
		writeError(w, http.StatusBadRequest, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: fmt.Sprintf("a batch of %d messages; the gateway takes at most %d in one", n, maxBatch)})
		return
	}
	if h.b.Status().Draining {
		// Every call in it would be refused: say so as a POST is told, so
		// that a client or balancer retries elsewhere.
		writeError(w, http.StatusServiceUnavailable, nil, jsonrpc.GatewayError(jsonrpc.CodeShutdown, "shutting_down", "the gateway is shutting down"))
		return
	}
	var first, calls []*batchPart
	asked := 0             // the messages with an answer to send
	dearest := costNothing // of the messages served
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
		if p.asks {
			asked++
		}
		if p.answer == nil {
			dearest = max(dearest, costOf(msg.Kind, msg.Method))
		}
	}
	// The batch's POST costs what its dearest message would alone: with a
	// request in it, it is a call, whose place the first request rides on.
	if !h.admitMessage(w, r, dearest) {
		return
	}
	// Each request counts against the client's limits as a POST of its own
	// would, for as long as it is served; the first rides on the batch's
	// own POST, which the limits took already.
	lim := &batchLimits{h: h, r: r, free: 1}
	sid := r.Header.Get(mcp.HeaderSession)
	for _, p := range first {
		if p.answer == nil {
			// A notification or an answer, served at once, rides on the
			// batch's POST too: at most 64 a POST.
			if release, ok := lim.admit(p, !p.asks || lim.ride()); ok {
				h.servePart(p, p.request(r, sid), release)
			}
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
	out := &batchOut{limit: h.opts.MaxMessageBytes, w: w, unanswered: asked}
	if accepts(r.Header.Get("Accept"), "text/event-stream") {
		out.sse = newSSE(w, h.opts.ClientTimeout)
		h.opts.Meter.StreamOpened() // the batch's, in which its calls' streams go
		defer h.opts.Meter.StreamClosed()
		if err := out.sse.open(); err != nil {
			return
		}
	}
	for _, p := range first {
		p.out = out
		out.end(p)
	}
	var wg sync.WaitGroup
	for _, p := range calls {
		p.out = out
		// Let in or refused in the batch's order.
		release, ok := lim.admit(p, lim.ride())
		if !ok {
			out.end(p)
			continue
		}
		wg.Go(func() {
			defer out.end(p)
			h.servePart(p, p.request(r, sid), release)
		})
	}
	wg.Wait()
	if out.sse == nil {
		// A client that does not take the array is cut off as one that
		// does not take a call's answer is.
		out.writeArray(w, h.opts.ClientTimeout)
	}
}

// servePart serves a part's message, giving its place back as its answer
// leaves (see answering), or at the latest once served. A panic in a
// part's goroutine, which no middleware would catch, becomes the part's
// -32603 rather than the end of the process.
func (h *handlers) servePart(p *batchPart, sub *http.Request, release func()) {
	p.place = release
	defer p.givePlaceBack()
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				return // the client is gone: nothing to say
			}
			h.log.ErrorContext(sub.Context(), "panic serving a message of a batch", "panic", v, "stack", string(debug.Stack()))
			e := &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
			if msg, err := jsonrpc.Parse(p.raw); p.streamed() && err == nil {
				// Its stream had begun: the error is its last event.
				p.buf.WriteString(dataField)
				p.buf.Write(jsonrpc.NewErrorResponse(msg.ID, e))
				p.buf.WriteString(eventEnd)
				return
			}
			p.refuse(http.StatusInternalServerError, e, "")
		}
	}()
	h.mcp(p, sub)
}

// batchLimits applies the client's limits to a batch's messages, each as
// if it came in a POST of its own.
type batchLimits struct {
	h    *handlers
	r    *http.Request
	free int // messages the batch's own POST was let in for
}

// ride tells whether the next message served rides on the batch's own
// POST; the batch's goroutine asks, in the batch's order.
func (l *batchLimits) ride() bool {
	l.free--
	return l.free >= 0
}

// admit lets a part's message in within the client's limits (unless it
// rides on the batch's POST), or answers it with the error a POST over
// them gets, under its own id (counted in the metrics, not on the batch's
// access line, which the parts share). One let in holds its place among
// the client's open requests until release.
func (l *batchLimits) admit(p *batchPart, rides bool) (release func(), ok bool) {
	h := l.h
	if rides || h.opts.Limiter == nil {
		return func() {}, true
	}
	key := h.clientKey(l.r)
	if ok, wait := h.opts.Limiter.Allow(key); !ok {
		h.opts.Meter.Refused("rate_limited")
		after := clientlimit.RetryAfterSeconds(wait)
		p.refuse(http.StatusTooManyRequests, rateLimitedError(after), after)
		return nil, false
	}
	release, ok = h.opts.Limiter.Open(key)
	if !ok {
		h.opts.Meter.Refused("too_many_streams")
		p.refuse(http.StatusTooManyRequests, tooManyOpenError(), "1")
		return nil, false
	}
	return release, true
}

// batchAccepted answers a batch with no request in it: 202 when every
// message was taken, else the first refusal, as 2025-03-26 has it (an
// error status, with an error that names no id).
func (h *handlers) batchAccepted(w http.ResponseWriter, parts []*batchPart) {
	answering(w)
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

// batchOut is where a batch's answers go: its stream, which parts write
// whole events to as they come, or the array they are gathered in.
type batchOut struct {
	w          http.ResponseWriter // the batch's, whose place goes back before its last answer
	mu         sync.Mutex
	sse        *sseWriter // nil: the answers are gathered
	failed     error      // a write to the stream failed: the rest are dropped
	answers    [][]byte   // without a stream: each answer
	size       int        // of the answers
	limit      int64      // the most the answers may hold in all, as one message
	unanswered int        // the parts with an answer to send that have not begun to send it
}

// answeredLocked gives p's place back and, when p has an answer, counts
// it as going on: before the batch's last goes on its stream, the batch's
// own place is given back too (see answering), so that a client that has
// every answer finds it free. An array of answers gives it back before
// its last byte (writeArray). Once for each part; o.mu is held.
func (o *batchOut) answeredLocked(p *batchPart) {
	if place := p.place; place != nil {
		p.place = nil
		place()
	}
	if p.asks && !p.answered {
		p.answered = true
		o.unanswered--
		if o.unanswered == 0 && o.sse != nil {
			answering(o.w)
		}
	}
}

// events sends a part's whole events on the stream. With answer, the last
// of them is p's answer: p's place (and the batch's, with its last answer)
// goes back just before its last byte, not as the part wrote it into its
// buffer, so that a client slow to take a large answer holds its place
// while it is sent.
func (o *batchOut) events(b []byte, answer *batchPart) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	cut := len(b)
	if answer != nil {
		cut = max(len(b)-1, 0)
	}
	if o.failed == nil {
		o.failed = o.sse.send(b[:cut])
	}
	if answer != nil {
		o.answeredLocked(answer)
		if o.failed == nil {
			o.failed = o.sse.send(b[cut:])
		}
	}
	if o.failed == nil {
		o.failed = o.sse.flush()
	}
	return o.failed
}

// end sends what a served part has left to say: the rest of its stream,
// or its answer. A part that took no stream (a JSON answer, an error) is
// one message.
func (o *batchOut) end(p *batchPart) {
	if !p.asks {
		return // a notification or an answer: nothing to say, whatever came of it
	}
	msg := p.answer
	if msg == nil && !p.streamed() {
		msg = bytes.TrimSpace(p.buf.Bytes())
	}
	if o.sse != nil {
		if p.streamed() {
			_ = p.FlushError()
			if p.buf.Len() > 0 {
				_ = o.events(p.buf.Bytes(), p) // an event cut short, as the part left it
			}
		} else if len(msg) > 0 {
			_ = o.events(fmt.Appendf(nil, "%s%s%s", dataField, oneLine(msg), eventEnd), p)
		}
		// Given back as it went out, or now, when nothing did.
		o.mu.Lock()
		o.answeredLocked(p)
		o.mu.Unlock()
		return
	}
	p.givePlaceBack()
	var msgs [][]byte
	if p.streamed() {
		msgs = dataOf(p.buf.Bytes())
	} else if len(msg) > 0 {
		msgs = [][]byte{msg}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range msgs {
		parsed, err := jsonrpc.Parse(m)
		if err == nil && parsed.Kind != jsonrpc.KindResponse {
			continue // an array answers requests; notifications have no place in it
		}
		if int64(o.size+len(m)) > o.limit {
			// The array is one message, and held whole until the last
			// answer is in: it is bounded as a child's answer is.
			var id []byte
			if err == nil {
				id = parsed.ID
			}
			m = jsonrpc.NewErrorResponse(id, jsonrpc.GatewayError(jsonrpc.CodeTooLarge, "too_large",
				fmt.Sprintf("the batch's answers add up to more than %d bytes, the most one answer may hold; take them as a stream (Accept: text/event-stream), or send fewer", o.limit)))
		}
		o.size += len(m)
		o.answers = append(o.answers, m)
	}
}

// writeArray answers with the gathered answers, as one JSON array, written
// from where they are rather than copied into one, each under deadlines
// timeout away (writeTimed); the batch's place is given back before its
// last byte, as writeLast does.
func (o *batchOut) writeArray(w http.ResponseWriter, timeout time.Duration) {
	n := 2 + max(len(o.answers)-1, 0)
	for _, a := range o.answers {
		n += len(a)
	}
	v := [3]string{"application/json", strconv.Itoa(n), "no-store"}
	h := w.Header()
	h["Content-Type"], h["Content-Length"], h["Cache-Control"] = v[0:1:1], v[1:2:2], v[2:3:3]
	w.WriteHeader(http.StatusOK)
	sep := []byte{'['}
	for _, a := range o.answers {
		if _, err := w.Write(sep); err != nil {
			return
		}
		if err := writeTimed(w, timeout, a); err != nil {
			return
		}
		sep = []byte{','}
	}
	if len(o.answers) == 0 {
		w.Write(sep)
	}
	answering(w)
	w.Write([]byte{']'})
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
	opened bool      // its stream's first bytes went on
	// Only the goroutine serving the part uses these (its own, or the
	// batch's for one served at once or refused).
	place    func() // gives its place among the client's open requests back; nil: it holds none, or gave it back
	answered bool   // out was told its answer is going on
	due      bool   // on a stream: its answer is in buf, its place to go back as it leaves
}

// givePlaceBack gives the part's place back, once, and, when the part
// has an answer to send and may send it now, tells out the answer is
// going on (see answeredLocked). A part served before out exists (at
// once, first) tells it when out.end passes its answer on. On a stream,
// the answer is in the part's buffer yet: its place goes back as the
// answer leaves it (batchOut.events, or out.end).
func (p *batchPart) givePlaceBack() {
	switch {
	case p.asks && p.out != nil && p.out.sse != nil:
		p.due = true
	case p.out != nil:
		p.out.mu.Lock()
		p.out.answeredLocked(p)
		p.out.mu.Unlock()
	case p.place != nil:
		place := p.place
		p.place = nil
		place()
	}
}

// refuse answers the part's message with e, under its id; a
// notification's refusal is kept only for a batch of no requests, which
// answers with the first (a notification is never answered).
func (p *batchPart) refuse(status int, e *jsonrpc.Error, retryAfter string) {
	p.status = status
	if retryAfter != "" {
		p.header.Set("Retry-After", retryAfter)
	}
	if msg, err := jsonrpc.Parse(p.raw); err == nil && msg.Kind == jsonrpc.KindRequest {
		p.answer = jsonrpc.NewErrorResponse(msg.ID, e)
		return
	}
	p.header.Set("Content-Type", "application/json")
	p.buf.Write(jsonrpc.NewErrorResponse(nil, e))
}

// inBatch tells whether w answers one message of a batch.
func inBatch(w http.ResponseWriter) bool {
	for {
		switch x := w.(type) {
		case *batchPart:
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return false
		}
	}
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
	events := b[:i+len(eventEnd)]
	if !p.opened {
		// The batch's stream said it was open.
		p.opened = true
		events = bytes.TrimPrefix(events, []byte(": stream open"+eventEnd))
	}
	var err error
	if len(events) > 0 {
		var answer *batchPart
		if p.due {
			answer = p // its answer is the last of these events
		}
		err = p.out.events(events, answer)
	}
	p.buf.Next(i + len(eventEnd))
	return err
}

func (p *batchPart) Flush() { _ = p.FlushError() }
