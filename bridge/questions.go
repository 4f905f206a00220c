package bridge

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// questions are the questions for clients in the middle of their calls, and
// the calls parked for a 2026 client's retry, across the workers:
//
//   - a legacy child asks its client (sampling, elicitation, roots) with a
//     request of its own. A legacy client gets it on the call's stream and
//     answers with a POSTed response (byID); a modern client gets every
//     question asked together in one InputRequiredResult, the call is
//     parked, and the client's retry resumes it (park.go).
//   - a modern child answers a legacy client's call with an
//     InputRequiredResult; the client is asked each question on its stream
//     and, once all are answered, the call goes on with a retry to the
//     child (inputs.go).
type questions struct {
	key      []byte       // signs the requestState of parked calls; set once
	accepted []byte       // verifies them too, never signs; nil: none; set once
	instance string       // names this process in the requestState it signs; set once
	warned   atomic.Int64 // when an answer meant for another process was last logged at warn, in Unix seconds

	mu     sync.Mutex
	byID   map[string]*ask       // questions a legacy client answers with a response, by the id it was sent with
	open   map[*exchange]*asking // the questions a legacy child asked during an exchange, and its parking
	parked map[int64]*exchange   // exchanges waiting for a modern client's retry, by gateway id
	inputs map[*call]*inputs     // a modern child's input requests that a legacy client is answering
}

func newQuestions(key, accepted []byte) *questions {
	q := &questions{key: key, accepted: accepted, byID: map[string]*ask{}, open: map[*exchange]*asking{}, parked: map[int64]*exchange{}, inputs: map[*call]*inputs{}}
	if q.key == nil {
		q.key = make([]byte, 32)
		_, _ = rand.Read(q.key) // crypto/rand.Read never fails (Go 1.24+)
	}
	// Replicas sharing a key count exchange ids alike: the instance keeps
	// one replica's state from resuming another's exchange of the same id.
	var inst [instanceBytes]byte
	_, _ = rand.Read(inst[:])
	q.instance = base64.RawURLEncoding.EncodeToString(inst[:])
	return q
}

// ask is one question for a client. The client sees it as a JSON-RPC
// request whose id is random, so that only the client it was sent to can
// answer it.
type ask struct {
	id     string // the id the client sees, a JSON string
	method string
	params []byte
	key    string // its key in an InputRequiredResult

	// A legacy child's request, answered under the child's own id.
	ex      *exchange
	childID []byte
	// Or a modern child's input request, collected for the call's retry.
	call *call
}

// instanceBytes and askBytes are the random bytes of a question's id: its
// process (base64) and its own (hex).
const instanceBytes, askBytes = 9, 12

func (q *questions) newAskID() string {
	var b [askBytes]byte
	_, _ = rand.Read(b[:])
	return strconv.Quote(askPrefix + q.instance + "." + hex.EncodeToString(b[:]))
}

// askPrefix starts the id of every question the gateway asks a client,
// followed by the instance that asked it: an answer that reaches another
// replica is told where it belongs.
const askPrefix = "gw-"

// askedBy is the instance that asked the question an answer's id names,
// or "" when the id is none of the gateway's.
func askedBy(id []byte) string {
	var s string
	if json.Unmarshal(id, &s) != nil || !strings.HasPrefix(s, askPrefix) {
		return ""
	}
	inst, own, ok := strings.Cut(strings.TrimPrefix(s, askPrefix), ".")
	if !ok || len(inst) != base64.RawURLEncoding.EncodedLen(instanceBytes) || len(own) != hex.EncodedLen(askBytes) {
		return "" // not an id the gateway makes, whatever it starts with
	}
	return inst
}

// shouldWarn reports whether an answer meant for another process, seen
// now, is logged at warn: at most once a minute, since any client can
// send one.
func (q *questions) shouldWarn(now time.Time) bool {
	last := q.warned.Load()
	return now.Unix()-last >= 60 && q.warned.CompareAndSwap(last, now.Unix())
}

// request is the ask as the client receives it.
func (a *ask) request() []byte {
	return jsonrpc.NewRequestRaw([]byte(a.id), a.method, a.params)
}

// asking is an exchange's questions from a legacy child, and, while the
// exchange is parked, what its retry needs.
type asking struct {
	asks    []*ask   // not yet answered, in the order asked
	missing []string // capabilities asked for that the modern client lacks

	// While parked.
	parkedFor Caller
	target    string           // the parked request's tool, prompt or resource (see mcp.NameField)
	args      arguments        // the parked request's arguments
	round     int              // how many times the exchange has been parked
	slot      *slot            // the call's slot, held for the retry
	timer     *time.Timer      // abandons the parking when no retry comes
	final     *jsonrpc.Message // the child's answer, when it came while parked
}

// inputKey names a legacy child's question in an InputRequiredResult: its
// request id, which is what identifies it, without the quotes of a string.
func inputKey(id []byte) string {
	if s, err := strconv.Unquote(string(id)); err == nil && len(id) > 0 && id[0] == '"' {
		return s
	}
	return string(id)
}

// question routes a legacy child's request to the client of the call it
// belongs to. On stdio nothing in the request says which call that is, so
// it goes only where the gateway can tell: the one call in flight, if its
// client can answer (it declared the capability, and can take a stream or
// is a modern client). Otherwise the child is answered with an error at
// once, so it never waits on the gateway. Only the reader calls it.
func (ch *child) question(m *jsonrpc.Message) {
	capability := mcp.CapabilityFor(m.Method)
	if capability == "" {
		ch.refuseChild(m.ID, m.Method, fmt.Sprintf("the gateway does not serve %s to the child", m.Method))
		return
	}
	ex, n := ch.onlyExchange()
	left, more := ch.stillRunning()
	switch {
	case n == 0:
		ch.refuseChild(m.ID, m.Method, fmt.Sprintf("no call is in flight, so no client can be asked %s", m.Method))
		return
	case left > 0 || more:
		// The child may ask for a call whose client left: told to cancel,
		// it may not have stopped, and the question, which carries what
		// that call is about, must not reach the client in flight now.
		ch.refuseChild(m.ID, m.Method, fmt.Sprintf("%s may still be running on the child (told to cancel, it has not answered) and stdio does not say which call asks %s: "+
			"a client is asked only while its call is the only one in flight", leftCalls(left, more), m.Method))
		return
	case ex == nil:
		// Which client would see the question matters: it carries what
		// the call that asks is about.
		ch.refuseChild(m.ID, m.Method, fmt.Sprintf("%d calls are in flight (or parked for their clients' answers) and stdio does not say which one asks %s: "+
			"a client is asked only while its call is the only one in flight", n, m.Method))
		return
	}
	if !ex.servesTask(m.Params) {
		ch.refuseChild(m.ID, m.Method, "the question names a task that the call in flight is not about")
		return
	}
	ex.asked.Store(true)
	a := &ask{id: ch.b.q.newAskID(), method: m.Method, params: m.Params, ex: ex, childID: m.ID, key: inputKey(m.ID)}
	r := ch.b.q.route(ex, a, capability)
	if r.due {
		ch.due = append(ch.due, ex)
	}
	switch {
	case r.refuse != "":
		ch.refuseChild(m.ID, m.Method, r.refuse)
	case r.answer != nil:
		// The client's request already carries the answer.
		ch.reply(jsonrpc.NewResult(a.childID, r.answer), a.method)
	case r.relay != nil:
		r.relay.box.note(a.request(), noteAsk)
		r.relay.resetIdle() // the wait is the client's now
	}
}

// leftCalls says how many calls whose clients left the child may still
// be working on.
func leftCalls(n int, more bool) string {
	switch {
	case more:
		return "more calls whose clients left (or timed out) than the gateway keeps track of"
	case n == 1:
		return "a call whose client left (or timed out)"
	}
	return strconv.Itoa(n) + " calls whose clients left (or timed out)"
}

// routing is what question does with a question.
type routing struct {
	refuse string // answer the child with this error
	answer []byte // answer the child with this result
	relay  *call  // send the question to this call's legacy client
	due    bool   // park the exchange once the reader has read what came with it
}

func (q *questions) route(ex *exchange, a *ask, capability string) routing {
	q.mu.Lock()
	defer q.mu.Unlock()
	c := ex.owner()
	caller := c.callerOrZero()
	parked := q.parked[ex.id] == ex
	switch {
	case parked:
		caller = q.open[ex].parkedFor
	case c == nil || !ex.ch.isPending(ex):
		// Ended: its end has closed its questions already.
		return routing{refuse: "the request it belongs to has ended"}
	case caller.Modern && !mayRequireInput(ex.method):
		// Only these results may be an InputRequiredResult: the question
		// is refused, and the call goes on.
		return routing{refuse: fmt.Sprintf("the client's %s request cannot be answered with input_required (2026-07-28 allows it on %s, %s and %s only), so its client cannot be asked %s",
			ex.method, mcp.MethodToolsCall, mcp.MethodPromptsGet, mcp.MethodResourcesRead, a.method)}
	}
	st := q.open[ex]
	if st == nil {
		st = &asking{}
		q.open[ex] = st
	}
	// What the question needs of the client: its capability, and for an
	// elicitation the mode it asks in ("elicitation.url").
	need, why := capability, "the client did not declare the "+capability+" capability"
	lacks := !mcp.HasCapability(caller.Capabilities, capability)
	if capability == mcp.CapElicitation {
		switch mode := mcp.ElicitationMode(a.params); {
		case mode != "form" && mode != "url":
			return routing{refuse: "elicitation/create asks in a mode that is neither form nor url"}
		case !mcp.CanElicit(caller.Capabilities, mode):
			if !lacks || mode == "url" {
				need, why = capability+"."+mode, "the client did not declare elicitation in "+mode+" mode"
			}
			lacks = true
		}
	}
	var r routing
	switch {
	case lacks:
		if caller.Modern && !parked && capability != mcp.CapRoots {
			// If nothing the child asks can be asked, the call needs a
			// capability the client lacks: -32021, decided in park. Not for
			// roots: servers ask for them on their own schedule (after
			// initialize, on list changes), so a roots/list that happens to
			// come during a call says nothing about the call.
			st.missing = append(st.missing, need)
			r.due = true
		}
		r.refuse = why
		return r
	case !caller.Modern && !caller.CanStream:
		return routing{refuse: "the client cannot take a stream, so it cannot be asked " + a.method}
	}
	if caller.Modern && !parked {
		if answer, ok := c.inputResponse(a.key); ok {
			return routing{answer: answer}
		}
	}
	for _, other := range st.asks {
		if other.key == a.key {
			a.key += "#" + strconv.Itoa(len(st.asks))
		}
	}
	st.asks = append(st.asks, a)
	if caller.Modern {
		// A 2026-07-28 client is asked with an InputRequiredResult and
		// answers with a retry (see park.go); the call is parked once the
		// questions that arrived together are all in, so that one result
		// carries them all.
		return routing{due: !parked}
	}
	q.byID[a.id] = a
	return routing{relay: c}
}

func (c *call) callerOrZero() Caller {
	if c == nil {
		return Caller{}
	}
	return c.caller
}

// inputResponse is the answer the call's own request carries for key, in
// its inputResponses: a 2026-07-28 request may supply input up front.
func (c *call) inputResponse(key string) ([]byte, bool) {
	if c.req == nil {
		return nil, false
	}
	responses, _ := c.req.Param(mcp.ParamInputResponses)
	answer := jsonrpc.Get(responses, key)
	if len(answer) == 0 || answer[0] != '{' {
		return nil, false
	}
	return answer, true
}

// onlyExchange is the exchange a question from the child belongs to, when
// the gateway can tell: the one call in flight, or, with none, the one call
// parked waiting for its client's answers, when none of the gateway's own
// requests made for a client (see forAClient) is in flight either. nil
// otherwise, with how many calls it could have been (the gateway's own
// requests among them).
func (ch *child) onlyExchange() (*exchange, int) {
	var active, parked []*exchange
	own := 0
	for _, ex := range ch.inFlight() {
		switch {
		case ex.method == mcp.MethodListen:
			continue // a listen asks nothing
		case ex.internal:
			if forAClient(ex.method) {
				own++ // the gateway's own request, maybe made for a client (a subscribe)
			}
			continue
		case ex.owner() != nil:
			active = append(active, ex)
		default:
			parked = append(parked, ex)
		}
	}
	// A parked call waits for its client's answers, and its child for
	// them: with a call running, the question is that call's. (A child
	// that asks a parked call more without waiting for the answers it
	// asked for cannot be told apart from it. Counting parked calls as
	// running would refuse every question while a client that gave up
	// leaves its call parked, up to the idle timeout.)
	switch {
	case own > 0:
	case len(active) == 1:
		return active[0], 1
	case len(active) == 0 && len(parked) == 1:
		return parked[0], 1
	}
	return nil, len(active) + len(parked) + own
}

// forAClient reports whether the gateway's own request of method is made
// for one client, with what that client asked (a subscribe names its
// listen's resources): a question or log line the child writes while
// serving it may be about it. Its other requests (probes, the handshake,
// its tools/list, logging/setLevel) carry nothing of a client's.
func forAClient(method string) bool {
	return method == mcp.MethodSubscribe || method == mcp.MethodUnsubscribe
}

// respond delivers a client's answer to the question it answers, and
// reports whether one waited for it.
func (q *questions) respond(ctx context.Context, m *jsonrpc.Message) bool {
	q.mu.Lock()
	a := q.byID[string(m.ID)]
	if a == nil {
		q.mu.Unlock()
		return false
	}
	delete(q.byID, a.id)
	if a.ex != nil {
		if st := q.open[a.ex]; st != nil {
			st.asks = slices.DeleteFunc(st.asks, func(o *ask) bool { return o == a })
		}
	}
	q.mu.Unlock()
	if a.call != nil {
		q.inputAnswered(a, m)
		return true
	}
	if c := a.ex.owner(); c != nil {
		c.resetIdle()
	}
	idSpan, _ := m.IDSpan()
	a.ex.ch.toChild(ctx, jsonrpc.Splice(m.Raw, jsonrpc.Edit{Span: idSpan, New: a.childID}), a.method)
	return true
}

// withdraw takes back a question a legacy child cancelled (its
// notifications/cancelled names its own request): a legacy client that was
// sent it is told so on its call's stream, under the id it was sent with,
// and its answer, should one come, is dropped; a modern client's retry
// need not answer it. It reports whether the child had such a question
// open.
func (q *questions) withdraw(ch *child, childID, reason []byte) bool {
	q.mu.Lock()
	var found *ask
	for ex, st := range q.open {
		if ex.ch != ch {
			continue
		}
		if i := slices.IndexFunc(st.asks, func(a *ask) bool { return bytes.Equal(a.childID, childID) }); i >= 0 {
			found = st.asks[i]
			st.asks = slices.Delete(st.asks, i, i+1)
			break
		}
	}
	if found == nil {
		q.mu.Unlock()
		return false
	}
	_, relayed := q.byID[found.id]
	delete(q.byID, found.id)
	q.mu.Unlock()
	if c := found.ex.owner(); relayed && c != nil {
		params := `{"requestId":` + found.id
		if len(reason) > 0 && reason[0] == '"' {
			params += `,"reason":` + string(reason)
		}
		c.box.note(jsonrpc.NewNotification(mcp.NoteCancelled, []byte(params+"}")), noteAsk)
	}
	return true
}

// answered is the child's answer to an exchange that asked questions: they
// end with it. A parked exchange keeps the answer for its retry and answered
// returns nil; otherwise it returns the exchange's call.
func (q *questions) answered(ex *exchange, m *jsonrpc.Message) *call {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := q.open[ex]
	if st != nil && q.parked[ex.id] == ex {
		st.final = m
		q.forgetLocked(st.asks)
		st.asks = nil
		return nil
	}
	// Not parked, so it holds no slot.
	q.closeLocked(ex)
	return ex.owner()
}

// close drops an exchange's questions and its parking, if any, for an
// exchange that has ended, and returns the questions the child still waits
// for.
func (q *questions) close(ex *exchange) []*ask {
	q.mu.Lock()
	asks, s := q.closeLocked(ex)
	q.mu.Unlock()
	s.release()
	return asks
}

// refuseAll closes an exchange whose request was cancelled: the child still
// waits for the answers to its questions, so each gets an error.
func (q *questions) refuseAll(ex *exchange, why string) {
	for _, a := range q.close(ex) {
		ex.ch.refuseChild(a.childID, a.method, why)
	}
}

// closeLocked forgets an exchange's questions and parking. It returns the
// questions, and the slot a parking held, for the caller to release once
// q.mu is no longer held.
func (q *questions) closeLocked(ex *exchange) ([]*ask, *slot) {
	st := q.open[ex]
	if st == nil {
		return nil, nil
	}
	delete(q.open, ex)
	q.forgetLocked(st.asks)
	var s *slot
	if q.parked[ex.id] == ex {
		delete(q.parked, ex.id)
		st.timer.Stop()
		s = st.slot
	}
	return st.asks, s
}

// childGone ends what waits on questions of a child whose service ended:
// calls waiting for a legacy client's answers to its questions (their
// retry has no child to go to), and its parked exchanges (answered while
// parked, or about to fail).
func (q *questions) childGone(ch *child, err error) {
	var calls []*call
	var slots []*slot
	q.mu.Lock()
	for c, in := range q.inputs {
		if c.ch == ch {
			calls = append(calls, c)
			delete(q.inputs, c)
			for id := range in.waiting {
				delete(q.byID, id)
			}
		}
	}
	for _, ex := range q.parked {
		if ex.ch == ch {
			_, s := q.closeLocked(ex)
			slots = append(slots, s)
		}
	}
	q.mu.Unlock()
	for _, s := range slots {
		s.release()
	}
	for _, c := range calls {
		c.end(nil, err)
	}
}

func (q *questions) forgetLocked(asks []*ask) {
	for _, a := range asks {
		delete(q.byID, a.id)
	}
}

// flushParks parks the exchanges whose questions are all in (see
// question). Only the reader calls it, between messages.
func (ch *child) flushParks() {
	for _, ex := range ch.due {
		ch.park(ex)
	}
	clear(ch.due)
	ch.due = ch.due[:0]
}

// servesTask reports whether a child's message whose _meta names a task
// (2025-11-25 related-task) may go to ex: only a tasks/* request naming
// that task. A message that names no task passes.
func (ex *exchange) servesTask(params []byte) bool {
	sp, named, err := jsonrpc.Lookup(params, "_meta", "io.modelcontextprotocol/related-task")
	if err != nil {
		return false // named twice, or in two spellings: which task is unclear
	}
	if !named {
		return true
	}
	rel := params[sp.Start:sp.End]
	c := ex.owner()
	if c == nil || c.req == nil || !strings.HasPrefix(ex.method, "tasks/") {
		return false
	}
	id, _ := c.req.Param(mcp.ParamTaskID)
	return len(id) > 0 && bytes.Equal(id, jsonrpc.Get(rel, "taskId"))
}
