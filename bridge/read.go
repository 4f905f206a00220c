package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// readLoop is the only reader of the child. It never blocks on a client:
// deliveries go to mailboxes, and writes back to the child go through
// goroutines.
func (ch *child) readLoop() {
	defer close(ch.done)
	reported := false // an oversized message was reported as it began, and has not ended
	for {
		line, err := ch.t.ReadMessage()
		ch.touch()
		if err != nil {
			var skipped SkippedMessage
			if errors.As(err, &skipped) {
				size, h, _ := skipped.Skipped()
				again := reported && !skipped.Ongoing() // the end of a line reported as it began
				switch {
				case skipped.Ongoing():
					// Its call fails now, not once the end comes, which
					// a child that writes without end never sends; such a
					// child stops being heard from (touch is not called
					// meanwhile), and the watchdog probes it.
					reported = true
					ch.log.Warn("child is writing a message over the size limit; skipping it to its end", "err", skipped, "head", head(h))
				case reported:
					reported = false
					ch.log.Info("the child's message over the size limit ended; all of it was skipped", "size", size)
				default:
					ch.log.Warn("child wrote a message over the size limit; skipped", "err", skipped, "size", size, "head", head(h))
				}
				if !skipped.Ongoing() {
					ch.b.opts.Observer.MessageRead(ch.w.index, int(size))
				}
				ch.oversized(skipped, again)
				continue
			}
			ch.sayQuiet()
			ch.end(err)
			return
		}
		ch.b.opts.Observer.MessageRead(ch.w.index, len(line))
		ch.dispatchLine(line)
		if br, ok := ch.t.(Bufferer); !ok || !br.Buffered() {
			ch.flushParks()
		}
	}
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// skippedPerSecond bounds the warnings about lines the reader skips (not
// JSON-RPC, an answer to no request): a child that prints its debugging
// to stdout must not flood the log with a line for each of its own.
const skippedPerSecond = 10

// skipLog counts those warnings: the reader counts, and a timer says
// what a second left unsaid once it is over.
type skipLog struct {
	mu     sync.Mutex
	second time.Time   // the second being counted
	logged int         // warnings logged in it
	quiet  int         // lines skipped in it without a warning
	timer  *time.Timer // says the quiet ones when their second is over
}

// warnSkipped logs a warning about a skipped line, at most
// skippedPerSecond a second; a second with more is followed by a warning
// counting them, as it ends.
func (ch *child) warnSkipped(ctx context.Context, msg string, args ...any) {
	now := time.Now()
	l := &ch.skipped
	l.mu.Lock()
	if now.Sub(l.second) >= time.Second {
		ch.sayQuietLocked()
		l.second, l.logged = now, 0
	}
	if l.logged == skippedPerSecond {
		if l.quiet++; l.quiet == 1 {
			l.timer = time.AfterFunc(l.second.Add(time.Second).Sub(now), ch.sayQuiet)
		}
		l.mu.Unlock()
		return
	}
	l.logged++
	l.mu.Unlock()
	ch.log.WarnContext(ctx, msg, args...)
}

// sayQuiet logs how many skipped lines went without a warning, if any.
func (ch *child) sayQuiet() {
	ch.skipped.mu.Lock()
	defer ch.skipped.mu.Unlock()
	ch.sayQuietLocked()
}

func (ch *child) sayQuietLocked() {
	l := &ch.skipped
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	if l.quiet > 0 {
		ch.log.Warn("child wrote more lines that were skipped; not logged one by one", "skipped", l.quiet, "in_the_second_from", l.second, "logged", l.logged)
		l.quiet = 0
	}
}

func (ch *child) dispatchLine(line []byte) {
	if !ch.saidNotUTF8 && !utf8.Valid(line) {
		// JSON is UTF-8 (RFC 8259 §8.1), but the gateway passes payloads as
		// written: a client that decodes strictly will fail on this, and
		// whoever runs the gateway should know why.
		ch.saidNotUTF8 = true
		ch.log.Warn("child wrote a message that is not valid UTF-8; passed on as written (a strict client will fail to decode it); later ones from this child are not reported", "size", len(line), "head", head(line))
	}
	if len(line) > 0 && line[0] == '[' {
		// A 2025-03-26 child may batch; each element is a message of its own.
		spans, err := jsonrpc.Elements(line)
		if err != nil {
			ch.warnSkipped(context.Background(), "child wrote a line that is not JSON; skipped", "err", err, "size", len(line), "head", head(line))
			return
		}
		for _, sp := range spans {
			// Capped at its end, so that nothing edits a neighbour in place.
			ch.dispatch(line[sp.Start:sp.End:sp.End])
		}
		return
	}
	ch.dispatch(line)
}

func (ch *child) dispatch(raw []byte) {
	m, err := jsonrpc.Parse(raw)
	if err != nil {
		ch.warnSkipped(context.Background(), "child wrote a message that is not JSON-RPC; skipped", "err", err, "size", len(raw), "head", head(raw))
		ch.badAnswer(raw, err)
		return
	}
	if ch.log.Enabled(context.Background(), slog.LevelDebug) {
		ch.log.Debug("from child", "method", m.Method, "id", string(m.ID), "size", len(raw))
	}
	switch m.Kind {
	case jsonrpc.KindResponse:
		ch.response(m)
	case jsonrpc.KindNotification:
		ch.notification(m)
	case jsonrpc.KindRequest:
		ch.childRequest(m)
	}
}

func (ch *child) response(m *jsonrpc.Message) {
	id, ok := m.IDInt()
	if !ok {
		ch.b.unknown.Add(1)
		if m.Error != nil {
			// An error with id null is the child saying it could not read
			// a request: what it says is all there is to go on.
			ch.warnSkipped(context.Background(), "child answered an id the gateway never sent with an error; dropped", "id", string(m.ID), "error", head(m.Error))
			return
		}
		ch.warnSkipped(context.Background(), "child answered an id the gateway never sent; dropped", "id", string(m.ID))
		return
	}
	ex := ch.take(id)
	if ex == nil {
		if id > 0 && id <= ch.b.ids.Load() {
			e, known := ch.endedAs(id)
			switch {
			case known && e.answered:
				// Not a cancellation missed: the child answered one request
				// twice.
				ch.b.unknown.Add(1)
				ch.warnSkipped(e.ctx, "child answered a request it had answered already; dropped", "id", id)
			case known:
				ch.b.late.Add(1)
				ch.log.DebugContext(e.ctx, "dropped late response", "id", id)
			default:
				ch.b.late.Add(1)
				ch.log.Debug("dropped late response", "id", id)
			}
		} else {
			ch.b.unknown.Add(1)
			ch.warnSkipped(context.Background(), "child answered an id the gateway never sent; dropped", "id", id)
		}
		return
	}
	ex.answered(m)
}

// badAnswer fails the call a message that is not valid JSON-RPC was meant
// to answer, if it names one: no method and the id of a client's pending
// call (see answerID). Its answer will not come in any other form, and the
// call would otherwise wait out its timeout. The gateway's own exchanges
// (handshake, probes) keep their timeouts, which decide what an unanswered
// one means.
func (ch *child) badAnswer(raw []byte, why error) {
	id, ok := answerID(raw)
	if !ok {
		return
	}
	if ex := ch.lookup(id); ex == nil || ex.internal {
		return
	}
	if ex := ch.take(id); ex != nil {
		ex.fail(jsonrpc.GatewayError(jsonrpc.CodeBadAnswer, "bad_answer",
			fmt.Sprintf("the child answered with a message that is not valid JSON-RPC (%v)", why)))
	}
}

// answerID is the id a message that is not valid JSON-RPC answers, when it
// can be read one way only and the message has no method: a call must
// never fail for a line that may be a request of the child's own, whose
// ids are its own counting, nor for an id another decoder reads otherwise.
// A message that is JSON has no member named method in any letter case,
// and one id. One that is not JSON (NaN, a trailing comma) is read as the
// head of a line over the size limit is, up to where it goes wrong: one id
// and a result or an error there, and nothing anywhere that may be a
// method. A line that ends before its object does is not taken for an
// answer: it may be a write the child broke off, and the whole answer may
// follow.
func answerID(raw []byte) (int64, bool) {
	var at [2]jsonrpc.Span
	err := jsonrpc.FindMembers(raw, []string{"method", "id"}, at[:])
	var id []byte
	var syntax *jsonrpc.SyntaxError
	switch {
	case errors.As(err, &syntax) && syntax.Offset >= len(raw):
		return 0, false // cut short: not known to be all the child meant to write
	case errors.As(err, &syntax):
		id = headID(raw[:syntax.Offset])
		// Past the break nothing can be read for sure: a method, or an
		// id again, anywhere in it leaves the line naming no call.
		if id == nil || mentions(raw, `"method"`) || mentions(raw[syntax.Offset:], `"id"`) {
			return 0, false
		}
	case err != nil || at[0].End > 0 || at[1].End == 0:
		return 0, false // not an object, a method or an id ambiguous, a method, or no id
	default:
		id = raw[at[1].Start:at[1].End]
	}
	return (&jsonrpc.Message{ID: id}).IDInt()
}

// headID is the id among the members of head, the valid start of a JSON
// object that goes wrong where head ends, when the head shows a result or
// an error and one member named id, in any letter case; otherwise nil.
func headID(head []byte) []byte {
	if !jsonrpc.PrefixHas(head, "result") && !jsonrpc.PrefixHas(head, "error") {
		return nil
	}
	id, ok := jsonrpc.PrefixMember(head, "id")
	if !ok {
		return nil
	}
	// PrefixMember gives the last of two ids: another before it (id is
	// head's own bytes, at this offset) makes it ambiguous.
	if _, twice := jsonrpc.PrefixMember(head[:cap(head)-cap(id)], "id"); twice {
		return nil
	}
	for _, other := range [...]string{"ID", "Id", "iD"} {
		if jsonrpc.PrefixHas(head, other) {
			return nil
		}
	}
	return id
}

// mentions reports whether b holds quoted, a quoted name, in any letter
// case, anywhere: inside a value too, for a text that cannot be read to
// tell where its values are.
func mentions(b []byte, quoted string) bool {
	for i := bytes.IndexByte(b, '"'); i >= 0 && i+len(quoted) <= len(b); {
		if bytes.EqualFold(b[i:i+len(quoted)], []byte(quoted)) {
			return true
		}
		j := bytes.IndexByte(b[i+1:], '"')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

// oversized deals with a line too long to keep, now instead of at a
// timeout. A response fails the pending call its id names: an id among the
// first members of its head, or the last member of its tail (many encoders
// write a response's id after its result) when its head shows a result or
// an error. A request of the child's own (its head shows a method) is
// refused, under its id: its ids are the child's counting, and name no
// call of the gateway's. A line reported as it passed the limit is
// reported again at its end (again), with its tail: what its head told
// was done at the first report.
func (ch *child) oversized(e SkippedMessage, again bool) {
	_, h, tail := e.Skipped()
	id, inHead := jsonrpc.PrefixMember(h, "id")
	ok := inHead
	if !ok {
		id, ok = jsonrpc.SuffixMember(tail, "id")
	}
	if jsonrpc.PrefixHas(h, "method") {
		if ok && !(again && inHead) {
			raw, _ := jsonrpc.PrefixMember(h, "method")
			method, _ := mcp.String(raw)
			ch.refuseChild(id, method, fmt.Sprintf("the request is longer than the gateway's message size limit: %v", e))
		}
		return
	}
	if !inHead && !jsonrpc.PrefixHas(h, "result") && !jsonrpc.PrefixHas(h, "error") {
		return // not known to be a response: its id may be a request's
	}
	n, ok := (&jsonrpc.Message{ID: id}).IDInt()
	if !ok {
		return
	}
	if ex := ch.take(n); ex != nil {
		// With the request's context: the warning about the line itself
		// could not name the request.
		ch.log.WarnContext(ex.logCtx(), "call failed: the child's answer is over the size limit", "id", n, "method", clipped(ex.method), "client_id", logged(ex.clientID))
		ex.fail(jsonrpc.GatewayError(jsonrpc.CodeTooLarge, "too_large",
			fmt.Sprintf("the child's response exceeded the gateway's message size limit: %v", e)))
	}
}

func (ch *child) notification(m *jsonrpc.Message) {
	switch m.Method {
	case mcp.NoteProgress:
		ch.progress(m)
	case mcp.NoteMessage:
		ch.routeLog(m)
	case mcp.NoteCancelled:
		// A legacy child gives up on a question of its own this way; a
		// modern child ends a listen.
		requestID := jsonrpc.Get(m.Params, mcp.ParamRequestID)
		if ch.b.q.withdraw(ch, requestID, jsonrpc.Get(m.Params, "reason")) {
			return
		}
		if id, err := strconv.ParseInt(string(requestID), 10, 64); err == nil {
			ch.endListen(id)
		}
	case mcp.NoteToolsChanged, mcp.NotePromptsChanged, mcp.NoteResourcesChanged, mcp.NoteResourceUpdated:
		if m.Method == mcp.NoteToolsChanged {
			ch.tools.invalidate()
		}
		if ch.eraNow() == EraLegacy {
			ch.fanOut(m)
			return
		}
		ch.relayTagged(m)
	default:
		if !ch.relayTagged(m) {
			ch.log.Debug("child notification", "method", m.Method)
		}
	}
}

// progress routes a progress notification to the call whose token it names
// (the gateway's token is the exchange's id) and restores the client's
// token.
func (ch *child) progress(m *jsonrpc.Message) {
	ch.b.opts.Observer.Progress(ch.routeProgress(m))
}

func (ch *child) routeProgress(m *jsonrpc.Message) ProgressFate {
	sp, ok, err := jsonrpc.Lookup(m.Params, mcp.MetaProgressToken)
	if !ok || err != nil {
		ch.log.Debug("progress without a token; dropped", "err", err)
		return ProgressDropped
	}
	tok := &jsonrpc.Message{ID: m.Params[sp.Start:sp.End]}
	var c *call
	if id, ok := tok.IDInt(); ok {
		if ex := ch.lookup(id); ex != nil {
			c = ex.owner()
		}
	}
	if c == nil {
		ch.log.Debug("progress for no active call; dropped", "token", string(tok.ID))
		return ProgressDropped
	}
	return c.progress(m, sp)
}

// childRequest answers a request from the child: ping at once, and a
// question for the client (sampling, elicitation, roots) by relaying it to
// the client when the gateway can tell whose it is (see question); anything
// else with an error at once, so the child never waits on the gateway.
func (ch *child) childRequest(m *jsonrpc.Message) {
	if ch.eraNow() == EraModern {
		// 2026-07-28 over stdio: a server "MUST NOT write JSON-RPC
		// requests" (its questions come in an input_required result), and
		// a client "MUST NOT write JSON-RPC responses". So the gateway
		// does not answer, not even a ping, and the calls go on.
		ch.warnSkipped(context.Background(), "child sent a request, which a 2026-07-28 server must not; not answered", "method", clipped(m.Method), "id", logged(m.ID))
		return
	}
	if m.Method == mcp.MethodPing {
		ch.reply(jsonrpc.NewResult(m.ID, []byte("{}")), m.Method)
		return
	}
	ch.question(m)
}
