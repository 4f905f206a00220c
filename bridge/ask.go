package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// ask is a question for an HTTP client in the middle of one of its calls:
// a legacy child's own request (sampling, elicitation, roots), or one of a
// modern child's input requests that a legacy client must answer. The
// client sees it as a JSON-RPC request whose id is random, so that only the
// client it was sent to can answer it.
type ask struct {
	id     string // the id the client sees, a JSON string
	method string
	params json.RawMessage

	// A legacy child's request, answered under the child's own id.
	ex      *exchange
	childID []byte
	// Or a modern child's input request, collected for the call's retry.
	call *Call
	key  string // its key in inputRequests
}

func newAskID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return strconv.Quote("gw-" + hex.EncodeToString(b[:]))
}

// request is the ask as the client receives it.
func (a *ask) request() []byte {
	return jsonrpc.NewRequestRaw([]byte(a.id), a.method, a.params)
}

// capabilityFor names the client capability a server-to-client request
// needs; "" means no client of the gateway can be asked it.
func capabilityFor(method string) string {
	switch method {
	case "sampling/createMessage":
		return "sampling"
	case "elicitation/create":
		return "elicitation"
	case "roots/list":
		return "roots"
	}
	return ""
}

func hasCapability(caps json.RawMessage, name string) bool {
	_, ok, _ := jsonrpc.Lookup(caps, name)
	return ok
}

func (b *Bridge) registerAsk(a *ask) {
	b.askMu.Lock()
	defer b.askMu.Unlock()
	b.asks[a.id] = a
}

func (b *Bridge) takeAsk(id string) *ask {
	b.askMu.Lock()
	defer b.askMu.Unlock()
	a := b.asks[id]
	delete(b.asks, id)
	return a
}

// Respond takes a client's answer to a question the gateway relayed on one
// of its calls' streams. An answer nobody waits for (the call has ended) is
// dropped.
func (b *Bridge) Respond(ctx context.Context, m *jsonrpc.Message) {
	if !b.respond(ctx, m) {
		b.log.Debug("dropped an answer to no waiting question", "id", string(m.ID))
	}
}

// respond delivers an answer if one of this bridge's questions waits for
// it, and reports whether one did.
func (b *Bridge) respond(ctx context.Context, m *jsonrpc.Message) bool {
	a := b.takeAsk(string(m.ID))
	if a == nil {
		return false
	}
	if a.call != nil {
		a.call.inputAnswered(a, m)
		return true
	}
	a.ex.mu.Lock()
	delete(a.ex.asks, a.id)
	a.ex.mu.Unlock()
	idSpan, _ := m.IDSpan()
	a.ex.s.toChild(ctx, jsonrpc.Splice(m.Raw, jsonrpc.Edit{Span: idSpan, New: a.childID}), a.method)
	return true
}

// toChild writes an answer to one of the child's own requests.
func (s *session) toChild(ctx context.Context, line []byte, method string) {
	ctx, cancel := context.WithTimeout(ctx, s.b.opts.CancelTimeout)
	defer cancel()
	if err := s.t.WriteMessage(ctx, line); err != nil {
		s.log.Warn("could not answer the child's request", "method", method, "err", err)
		return
	}
	s.log.Debug("answered the child's request", "method", method)
}

// refuseChild answers one of the child's requests with an error.
func (s *session) refuseChild(id []byte, method, why string) {
	reply := jsonrpc.NewErrorResponse(id, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: why})
	s.log.Info("refused the child's request", "method", method, "id", string(id), "why", why)
	if s.replies.Add(1) > maxReplies {
		s.replies.Add(-1)
		s.log.Warn("too many replies to the child in flight; dropped one", "method", method)
		return
	}
	s.b.spawn(func() {
		defer s.replies.Add(-1)
		s.toChild(context.Background(), reply, method)
	})
}

// question routes a legacy child's request to the client of the call it
// belongs to. On stdio nothing in the request says which call that is, so
// it goes only where the gateway can tell: the one call in flight, if its
// client can answer (it declared the capability, and can take a stream or
// is a modern client). Otherwise the child is answered with an error at
// once, so it never waits on the gateway.
func (s *session) question(m *jsonrpc.Message) {
	capability := capabilityFor(m.Method)
	if capability == "" {
		s.refuseChild(m.ID, m.Method, fmt.Sprintf("the gateway does not serve %s to the child", m.Method))
		return
	}
	ex := s.onlyExchange()
	if ex == nil {
		s.refuseChild(m.ID, m.Method, fmt.Sprintf("no single call in flight whose client could answer %s", m.Method))
		return
	}
	a := &ask{id: newAskID(), method: m.Method, params: m.Params, ex: ex, childID: m.ID, key: inputKey(m.ID)}
	ex.mu.Lock()
	c := ex.call
	var caller Caller
	if c != nil {
		caller = c.caller
	} else {
		caller = ex.parkedFor
	}
	switch {
	case !hasCapability(caller.Capabilities, capability):
		if caller.Modern && c != nil && capability != "roots" {
			// If nothing the child asks can be asked, the call needs a
			// capability the client lacks: -32021, decided in flushParks.
			// Not for roots: servers ask for them on their own schedule
			// (after initialize, on list changes), so a roots/list that
			// happens to come during a call says nothing about the call.
			ex.missing = append(ex.missing, capability)
			s.parkSoon(ex)
		}
		ex.mu.Unlock()
		s.refuseChild(m.ID, m.Method, fmt.Sprintf("the client did not declare the %s capability", capability))
		return
	case !caller.Modern && !caller.CanStream:
		ex.mu.Unlock()
		s.refuseChild(m.ID, m.Method, "the client cannot take a stream, so it cannot be asked "+m.Method)
		return
	}
	if ex.asks == nil {
		ex.asks = map[string]*ask{}
	}
	ex.asks[a.id] = a
	if caller.Modern && c != nil {
		if answer, ok := c.inputResponse(a.key); ok {
			// The client's request already carries the answer.
			delete(ex.asks, a.id)
			ex.mu.Unlock()
			s.b.spawn(func() { s.toChild(context.Background(), jsonrpc.NewResult(a.childID, answer), a.method) })
			return
		}
	}
	if caller.Modern {
		// A 2026-07-28 client is asked with an InputRequiredResult, and
		// answers with a retry (see park.go). The call is parked once the
		// questions that arrived together are all in, so that one result
		// carries them all.
		for _, other := range ex.asks {
			if other != a && other.key == a.key {
				a.key += "#" + strconv.Itoa(len(ex.asks))
			}
		}
		if c != nil {
			s.parkSoon(ex)
		}
		ex.mu.Unlock()
		return
	}
	ex.mu.Unlock()
	s.b.registerAsk(a)
	c.box.note(a.request(), noteAsk)
}

// inputResponse is the answer the call's own request carries for key, in
// its inputResponses: a 2026-07-28 request may supply input up front.
func (c *Call) inputResponse(key string) (json.RawMessage, bool) {
	if c.req == nil || len(c.req.Params) == 0 {
		return nil, false
	}
	sp, ok, _ := jsonrpc.Lookup(c.req.Params, "inputResponses", key)
	if !ok || c.req.Params[sp.Start] != '{' {
		return nil, false
	}
	return json.RawMessage(c.req.Params[sp.Start:sp.End]), true
}

// parkSoon queues the exchange for flushParks. ex.mu is held.
func (s *session) parkSoon(ex *exchange) {
	if !ex.parkSoon {
		ex.parkSoon = true
		s.toPark = append(s.toPark, ex)
	}
}

// flushParks parks the calls whose questions are all in (see question):
// the client gets one InputRequiredResult with every question it can
// answer. A call none of whose questions it can answer needs a capability
// the client did not declare, and ends with -32021. Only the reader calls
// it, between messages.
func (s *session) flushParks() {
	for _, ex := range s.toPark {
		ex.mu.Lock()
		c, missing := ex.call, ex.missing
		ex.parkSoon, ex.missing = false, nil
		switch {
		case c == nil:
			ex.mu.Unlock() // answered or ended meanwhile
		case len(ex.asks) > 0:
			irr := ex.parkLocked(c)
			s.log.Debug("parked a call for its client's input", "id", ex.id, "questions", len(ex.asks), "round", ex.round)
			ex.mu.Unlock()
			c.finish(jsonrpc.NewResult(c.clientID, irr), nil)
		case len(missing) > 0:
			ex.mu.Unlock()
			c.abort(missingCapabilities(missing), "the client lacks a capability the request needs")
		default:
			ex.mu.Unlock()
		}
	}
	s.toPark = s.toPark[:0]
}

// missingCapabilities is 2026-07-28's error for a request that needs client
// capabilities the client did not declare.
func missingCapabilities(names []string) *jsonrpc.Error {
	caps := map[string]struct{}{}
	for _, n := range names {
		caps[n] = struct{}{}
	}
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": caps})
	return &jsonrpc.Error{Code: codeMissingCapability, Message: "the request needs client capabilities the client did not declare: " + strings.Join(names, ", "), Data: data}
}

// inputKey names a legacy child's question in an InputRequiredResult: its
// request id, which is what identifies it, without the quotes of a string.
func inputKey(id []byte) string {
	if s, err := strconv.Unquote(string(id)); err == nil && len(id) > 0 && id[0] == '"' {
		return s
	}
	return string(id)
}

// onlyExchange is the exchange a question from the child belongs to, when
// the gateway can tell: the one call in flight, or, with none, the one call
// parked waiting for its client's answers. nil otherwise.
func (s *session) onlyExchange() *exchange {
	var active, parked []*exchange
	for _, ex := range s.inFlight() {
		if ex.internal || ex.method == "subscriptions/listen" {
			continue
		}
		if ex.current() != nil {
			active = append(active, ex)
		} else {
			parked = append(parked, ex)
		}
	}
	switch {
	case len(active) == 1:
		return active[0]
	case len(active) == 0 && len(parked) == 1:
		return parked[0]
	}
	return nil
}

// closeAsks drops the exchange's questions. With a reason, the child is
// still waiting for them (its request was cancelled, not answered), so
// each gets an error.
func (ex *exchange) closeAsks(reason string) {
	ex.mu.Lock()
	asks := ex.asks
	ex.asks = nil
	ex.mu.Unlock()
	for _, a := range asks {
		ex.s.b.takeAsk(a.id)
		if reason != "" {
			ex.s.refuseChild(a.childID, a.method, reason)
		}
	}
}

// inputs are a modern child's input requests that a legacy client is
// answering, one question each, for the retry that continues the call.
type inputs struct {
	state   json.RawMessage // the child's requestState, echoed on the retry
	answers map[string]json.RawMessage
	waiting map[string]*ask
}

// needsInputFromLegacyClient reports whether the child's answer is a
// modern InputRequiredResult that this call's legacy client must answer as
// questions on its stream.
func (c *Call) needsInputFromLegacyClient(ex *exchange, m *jsonrpc.Message) bool {
	if c.caller.Modern || c.s.eraNow() != EraModern || m.Result == nil || c.req == nil {
		return false
	}
	rt, ok, _ := jsonrpc.Lookup(m.Result, "resultType")
	return ok && string(m.Result[rt.Start:rt.End]) == `"input_required"`
}

// askForInputs turns a modern child's InputRequiredResult into questions
// for the call's legacy client; when all are answered, the call continues
// with a retry to the child (continueWithInputs).
func (c *Call) askForInputs(ex *exchange, m *jsonrpc.Message) {
	var irr struct {
		InputRequests map[string]struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		} `json:"inputRequests"`
		RequestState json.RawMessage `json:"requestState"`
	}
	if err := json.Unmarshal(m.Result, &irr); err != nil {
		c.finish(nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the child's InputRequiredResult cannot be read: " + err.Error()})
		return
	}
	in := &inputs{state: irr.RequestState, answers: map[string]json.RawMessage{}, waiting: map[string]*ask{}}
	var asks []*ask
	for key, r := range irr.InputRequests {
		capability := capabilityFor(r.Method)
		switch {
		case capability == "" || !hasCapability(c.caller.Capabilities, capability):
			c.finish(nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
				Message: fmt.Sprintf("the server needs %s from the client, which did not declare that it can answer it", r.Method)})
			return
		case !c.caller.CanStream:
			c.finish(nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
				Message: fmt.Sprintf("the server needs %s from the client, which cannot take a stream to be asked", r.Method)})
			return
		}
		a := &ask{id: newAskID(), method: r.Method, params: r.Params, call: c, key: key}
		in.waiting[a.id] = a
		asks = append(asks, a)
	}
	c.mu.Lock()
	c.ex = nil
	c.inputs = in
	c.mu.Unlock()
	if len(asks) == 0 {
		c.continueWithInputs()
		return
	}
	for _, a := range asks {
		c.b.registerAsk(a)
		c.box.note(a.request(), noteAsk)
	}
}

func (c *Call) inputAnswered(a *ask, m *jsonrpc.Message) {
	c.mu.Lock()
	in := c.inputs
	if in == nil || in.waiting[a.id] == nil {
		c.mu.Unlock()
		return
	}
	delete(in.waiting, a.id)
	if m.Error != nil {
		c.mu.Unlock()
		c.abort(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the client refused %s: %s", a.method, m.Error)}, "")
		return
	}
	in.answers[a.key] = m.Result
	done := len(in.waiting) == 0
	c.mu.Unlock()
	if done {
		c.continueWithInputs()
	}
}

// continueWithInputs retries the call to the child with the answers, as a
// new request with a new id, carrying the child's requestState unchanged.
func (c *Call) continueWithInputs() {
	c.mu.Lock()
	in := c.inputs
	c.inputs = nil
	c.mu.Unlock()
	if in == nil {
		return
	}
	answers, _ := json.Marshal(in.answers)
	extra := append([]byte(`"inputResponses":`), answers...)
	if in.state != nil {
		extra = append(append(extra, `,"requestState":`...), in.state...)
	}
	// Not bound to a ctx: the caller's ctx is still tied to the call, and
	// ends it (and so this exchange) if the client leaves.
	_ = c.s.start(context.Background(), c, c.method, extra, false)
}

// dropInputs forgets the questions of a call that ended.
func (c *Call) dropInputs() {
	c.mu.Lock()
	in := c.inputs
	c.inputs = nil
	c.mu.Unlock()
	if in == nil {
		return
	}
	for id := range in.waiting {
		c.b.takeAsk(id)
	}
}
