package bridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// A 2026-07-28 child asks for input by answering with an
// InputRequiredResult, and expects a retry carrying the answers. A legacy
// client knows nothing of that: it is asked each question on its call's
// stream, as a 2025 server would ask it, and once every answer is in, the
// gateway makes the retry itself, a new exchange of the same call.

// inputs are the questions of one InputRequiredResult that a legacy client
// is answering.
type inputs struct {
	state   []byte            // the child's requestState, echoed on the retry
	answers map[string][]byte // by key in inputRequests
	waiting map[string]*ask   // by the id the client sees
}

// needsInputFromLegacyClient reports whether the child's answer is a
// modern InputRequiredResult that this call's legacy client must answer as
// questions on its stream.
func (c *call) needsInputFromLegacyClient(m *jsonrpc.Message) bool {
	return !c.caller.Modern && !c.internal() && c.ch.eraNow() == EraModern && m.Result != nil &&
		mcp.ResultType(m.Result) == mcp.ResultInputRequired
}

// askForInputs turns a modern child's InputRequiredResult, the answer to
// ex (which the reader has taken), into questions for the call's legacy
// client; when all are answered, the call continues with a retry to the
// child (continueWithInputs).
func (c *call) askForInputs(ex *exchange, m *jsonrpc.Message) {
	reqs, state, err := mcp.ReadInputRequired(m.Result)
	if err == nil && len(reqs) == 0 {
		// Retrying at once would only ask again: a child that answers so
		// would loop.
		err = errors.New("it asks for no input")
	}
	if err != nil {
		c.ch.log.WarnContext(c.logCtx(), "the child's InputRequiredResult cannot be turned into questions for a 2025 client; the call fails", "client_id", logged(c.clientID), "err", err)
		c.end(nil, jsonrpc.GatewayError(jsonrpc.CodeBadAnswer, "bad_answer", "the child's InputRequiredResult cannot be read: "+err.Error()))
		return
	}
	in := &inputs{state: state, answers: map[string][]byte{}, waiting: map[string]*ask{}}
	var asks []*ask
	for _, r := range reqs {
		capability := mcp.CapabilityFor(r.Method)
		switch {
		// The client's request cannot be served as it was made: its
		// error, as a modern client's would be, not the gateway's.
		case capability == "" || !mcp.HasCapability(c.caller.Capabilities, capability):
			c.end(nil, jsonrpc.GatewayError(mcp.CodeMissingCapability, "missing_capability",
				fmt.Sprintf("the server needs %s from the client, which did not declare that it can answer it", r.Method)))
			return
		case !c.caller.CanStream:
			c.end(nil, jsonrpc.GatewayError(mcp.CodeMissingCapability, "no_stream",
				fmt.Sprintf("the server needs %s from the client, which cannot take a stream to be asked (its Accept leaves out text/event-stream)", r.Method)))
			return
		}
		a := &ask{id: c.b.q.newAskID(), method: r.Method, params: r.Params, call: c, key: r.Key}
		in.waiting[a.id] = a
		asks = append(asks, a)
	}
	if !c.detach() {
		// Its client left just as the answer came; the child has answered,
		// so there is nothing to cancel.
		return
	}
	if !c.b.q.setInputs(c, in) {
		return // its client left meanwhile
	}
	for _, a := range asks {
		c.box.note(a.request(), noteAsk)
	}
	c.resetIdle() // the wait is the client's now
}

// setInputs records a call's questions, unless the call has ended.
func (q *questions) setInputs(c *call, in *inputs) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if c.isEnded() {
		return false
	}
	q.inputs[c] = in
	for id, a := range in.waiting {
		q.byID[id] = a
	}
	return true
}

// inputAnswered takes a legacy client's answer to one of the questions;
// the last answer continues the call.
func (q *questions) inputAnswered(a *ask, m *jsonrpc.Message) {
	c := a.call
	q.mu.Lock()
	in := q.inputs[c]
	if in == nil || in.waiting[a.id] == nil {
		q.mu.Unlock()
		return
	}
	delete(in.waiting, a.id)
	if m.Error != nil {
		q.mu.Unlock()
		c.abort(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the client refused %s: %s", a.method, m.Error)}, "")
		return
	}
	in.answers[a.key] = m.Result
	c.resetIdle()
	done := len(in.waiting) == 0
	if done {
		delete(q.inputs, c)
	}
	q.mu.Unlock()
	if done {
		c.continueWith(in)
	}
}

// continueWith retries the call to the child with the answers, as a new
// exchange with a new id, carrying the child's requestState unchanged.
// The call's ctx is still tied to it and ends it (and so this exchange) if
// the client leaves.
func (c *call) continueWith(in *inputs) {
	answers := []byte{'{'}
	for key, a := range in.answers {
		if len(answers) > 1 {
			answers = append(answers, ',')
		}
		answers = append(answers, jsonrpc.Quote(key)...)
		answers = append(answers, ':')
		answers = append(answers, a...)
	}
	set := []mcp.Member{{Key: mcp.ParamInputResponses, Value: append(answers, '}')}}
	if in.state != nil {
		set = append(set, mcp.Member{Key: mcp.ParamRequestState, Value: in.state})
	}
	_ = c.ch.start(context.Background(), c, set)
}

// dropInputs forgets the questions of a call that ended.
func (q *questions) dropInputs(c *call) {
	q.mu.Lock()
	defer q.mu.Unlock()
	in := q.inputs[c]
	if in == nil {
		return
	}
	delete(q.inputs, c)
	for id := range in.waiting {
		delete(q.byID, id)
	}
}
