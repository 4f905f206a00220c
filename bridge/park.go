package bridge

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// A legacy child asks its client for input with a request in the middle of
// a call; a 2026-07-28 client is asked with an InputRequiredResult instead,
// and answers with a retry: a new request carrying inputResponses and the
// requestState it was given. So the gateway parks the child's exchange,
// answers the client's request with the questions and a requestState of
// its own, and resumes the exchange when the retry comes: it answers the
// child's questions and the retry's HTTP request gets the exchange's
// answer. A retry must therefore be the request parked, but for its
// answers and _meta: the same method, target and arguments (see
// arguments).
//
// The requestState names the parked exchange and is signed, because the
// spec says to treat it as attacker-controlled. An exchange not resumed
// within the idle timeout is abandoned: cancelled toward the child.

const statePrefix = "gw1."

// park ends the exchange's call with an InputRequiredResult holding every
// question the client can answer, and keeps the exchange, with the call's
// slot, for the retry. An exchange none of whose questions the client can
// answer needs a capability the client did not declare, and its call ends
// with -32021. Only the reader parks.
func (ch *child) park(ex *exchange) {
	c := ex.owner()
	if c == nil {
		return // parked already, or ended
	}
	q := ch.b.q
	q.mu.Lock()
	st := q.open[ex]
	var missing []string
	asks := 0
	if st != nil {
		missing, st.missing = st.missing, nil
		asks = len(st.asks)
	}
	q.mu.Unlock()
	if asks == 0 {
		if len(missing) > 0 {
			c.abort(mcp.MissingCapabilities(missing), "the client lacks a capability the request needs")
		}
		return
	}
	if _, ok := c.claim(); !ok {
		return // its client left meanwhile; its ending retires the exchange
	}
	s := c.takeSlot()
	irr, parked := q.park(ex, c.caller, targetOf(c.req), bindArguments(c.req), s)
	if !parked {
		s.release()
		c.deliver(nil, errUnavailable("the child process exited while the call waited for its client's input; the call was lost"))
		return
	}
	ch.log.DebugContext(c.logCtx(), "parked a call for its client's input", "id", ex.id, "client_id", logged(c.clientID), "questions", asks)
	c.deliver(jsonrpc.NewResult(c.clientID, irr), nil)
}

// park records the exchange as parked for caller's retry of the request
// for target with args, holding s, and returns the InputRequiredResult for
// the client. It fails when the exchange has left the pending table
// meanwhile (its child's service ended).
func (q *questions) park(ex *exchange, caller Caller, target string, args arguments, s *slot) ([]byte, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := q.open[ex]
	if st == nil || !ex.ch.isPending(ex) {
		return nil, false
	}
	ex.setOwner(nil)
	st.parkedFor, st.target, st.args, st.slot = caller, target, args, s
	st.round++
	st.timer = time.AfterFunc(ex.ch.b.opts.IdleTimeout, func() { q.abandon(ex) })
	q.parked[ex.id] = ex
	return q.inputRequiredLocked(ex, st), true
}

func (q *questions) inputRequiredLocked(ex *exchange, st *asking) []byte {
	reqs := make([]mcp.InputRequest, 0, len(st.asks))
	for _, a := range st.asks {
		reqs = append(reqs, mcp.InputRequest{Key: a.key, Method: a.method, Params: a.params})
	}
	return mcp.InputRequired(reqs, q.stateFor(ex.id, st.round))
}

// abandon gives up a parked exchange whose retry did not come in time: its
// slot is freed, its questions are refused, and the child is told to
// cancel, unless it has answered.
func (q *questions) abandon(ex *exchange) {
	q.mu.Lock()
	if q.parked[ex.id] != ex {
		q.mu.Unlock()
		return // resumed meanwhile
	}
	final := q.open[ex].final
	asks, s := q.closeLocked(ex)
	q.mu.Unlock()
	s.release()
	if final != nil {
		return // answered while parked; nobody came for the answer
	}
	for _, a := range asks {
		ex.ch.refuseChild(a.childID, a.method, "the client did not answer in time")
	}
	// Its slot was released above: a parking given up frees its slot at
	// once, unlike a call whose client left (see call.abort).
	if retired, _ := ex.ch.retire(ex, nil); retired {
		ex.cancel("the client did not continue the request in time")
	}
}

// mayRequireInput reports whether a request of this method may be
// answered with an InputRequiredResult: 2026-07-28 allows it on these
// alone.
func mayRequireInput(method string) bool {
	switch method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet, mcp.MethodResourcesRead:
		return true
	}
	return false
}

// targetOf is what a request names by its name field (mcp.NameField): a
// tool, a prompt, a resource; "" for a request that names none.
func targetOf(req *mcp.Request) string {
	if req == nil {
		return ""
	}
	field := mcp.NameField(req.Method)
	if field == "" {
		return ""
	}
	name, _ := req.String(field)
	return name
}

// stateFor mints the requestState for a parked exchange's round: each
// round gets a state of its own, and only the latest resumes the exchange.
// It names this process too: a retry that reaches another replica (one
// sharing the key) is told at once where its call waits.
func (q *questions) stateFor(id int64, round int) string {
	body := q.instance + "." + strconv.FormatInt(id, 10) + "." + strconv.Itoa(round)
	enc := base64.RawURLEncoding
	return statePrefix + enc.EncodeToString([]byte(body)) + "." + enc.EncodeToString(q.sign([]byte(body)))
}

func (q *questions) sign(body []byte) []byte { return mac(q.key, body) }

func mac(key, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return m.Sum(nil)
}

// signed reports whether sum signs body, with the key or the accepted one.
func (q *questions) signed(body, sum []byte) bool {
	return hmac.Equal(sum, q.sign(body)) || q.accepted != nil && hmac.Equal(sum, mac(q.accepted, body))
}

// stateOf reports whether the request continues a call the gateway parked,
// that is whether its requestState has the gateway's form; such a state
// must also carry the gateway's signature and name this process. A modern
// child's requestState is its own and passes through untouched.
func (q *questions) stateOf(req *mcp.Request) (id int64, round int, ours bool, err error) {
	state, ok := req.String(mcp.ParamRequestState)
	if !ok || !strings.HasPrefix(state, statePrefix) {
		return 0, 0, false, nil
	}
	tampered := &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState failed its integrity check: it was altered, or signed by a gateway with another key " +
		"(a replica without the same GATEWAY_SECRET, or this one before a restart); send the request again without requestState"}
	body64, mac64, ok := strings.Cut(strings.TrimPrefix(state, statePrefix), ".")
	enc := base64.RawURLEncoding.Strict() // no other spelling of the same bytes passes
	body, err1 := enc.DecodeString(body64)
	sum, err2 := enc.DecodeString(mac64)
	if !ok || err1 != nil || err2 != nil || !q.signed(body, sum) {
		return 0, 0, true, tampered
	}
	parts := strings.Split(string(body), ".")
	if len(parts) != 3 {
		return 0, 0, true, tampered
	}
	if parts[0] != q.instance {
		return 0, 0, true, jsonrpc.GatewayError(jsonrpc.CodeInvalidParams, "parked_elsewhere",
			"requestState continues a call parked by another gateway process ("+parts[0]+"), not this one ("+q.instance+"): "+
				"another replica, where the call waits, or this replica before a restart, which lost it. "+
				"A call parked for its client's input resumes only where it was parked: route retries to the same replica (session affinity), or send the request again without requestState")
	}
	id, perr := strconv.ParseInt(parts[1], 10, 64)
	round, rerr := strconv.Atoi(parts[2])
	if perr != nil || rerr != nil {
		return 0, 0, true, tampered
	}
	return id, round, true, nil
}

// resume continues a parked exchange with the client's retry: the answers
// go to the child, and the retry gets the exchange's answer. Answers still
// missing are asked for again, and the exchange stays parked.
func (b *Bridge) resume(ctx context.Context, req *mcp.Request, caller Caller, id int64, round int) (Call, error) {
	q := b.q
	q.mu.Lock()
	ex, st, err := q.waitingLocked(req, caller, id, round)
	if err != nil {
		q.mu.Unlock()
		return nil, err
	}
	args, target := st.args, st.target
	q.mu.Unlock()
	// Outside q.mu: the arguments may be large, and telling them apart
	// from the call's may take reading them through.
	if !args.match(req) {
		// The answer would be to other arguments than the request's: the
		// child works on the call's.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("requestState belongs to a %s request for %q with other arguments; a retry sends the original request again", ex.method, target)}
	}
	q.mu.Lock()
	if _, st, err = q.waitingLocked(req, caller, id, round); err != nil {
		// Resumed meanwhile by another retry, or given up.
		q.mu.Unlock()
		return nil, err
	}
	responses, _ := req.Param(mcp.ParamInputResponses)
	replies, methods, err := st.answeredBy(responses)
	if err != nil {
		q.mu.Unlock()
		return nil, err
	}
	if len(st.asks) > 0 {
		irr := q.inputRequiredLocked(ex, st)
		q.mu.Unlock()
		ex.ch.sendReplies(ctx, replies, methods)
		return answeredByGateway(req, irr), nil
	}
	c := ex.ch.newCall(ctx, callSpec{req: req, caller: caller, idle: b.opts.IdleTimeout, max: b.opts.MaxDuration})
	if !c.attach(ex) {
		// Its client left already: the exchange stays parked for another
		// retry, and the child gets the answers this one brought.
		q.mu.Unlock()
		ex.ch.sendReplies(ctx, replies, methods)
		return nil, c.endedBefore(ctx)
	}
	// Taken over: the retry's call owns the exchange and its slot. The
	// exchange keeps its round, so that a later round's state is new.
	st.timer.Stop()
	delete(q.parked, id)
	final := st.final
	back := c.give(st.slot) // before a new question can park the exchange again
	st.final, st.slot, st.timer = nil, nil, nil
	if final == nil {
		ex.setOwner(c)
	} else {
		delete(q.open, ex) // answered: nothing more will come of it
	}
	q.mu.Unlock()
	back.release()
	if final != nil {
		// The child answered while the call was parked.
		c.answer(ex, final)
		return c, nil
	}
	ex.ch.sendReplies(ctx, replies, methods)
	return c, nil
}

// waitingLocked is the parked exchange a retry's requestState names, with
// its questions, or the error that refuses the retry: the exchange no
// longer waits, it waits for another caller, the retry is for another
// method or target, or it is an earlier round's. Its arguments are checked
// apart (see arguments). A refused retry changes nothing.
func (q *questions) waitingLocked(req *mcp.Request, caller Caller, id int64, round int) (*exchange, *asking, error) {
	ex := q.parked[id]
	if ex == nil {
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: "requestState names a request that is no longer waiting (it timed out, the server restarted, or another retry continued it); send the request again without requestState"}
	}
	st := q.open[ex]
	switch {
	case st.parkedFor.Principal != caller.Principal:
		// Said as for a state that names nothing: another caller learns
		// nothing from holding it.
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: "requestState names a request that is no longer waiting (it timed out, the server restarted, or another retry continued it); send the request again without requestState"}
	case ex.method != req.Method:
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("requestState belongs to a %s request, not %s", ex.method, req.Method)}
	case targetOf(req) != st.target:
		// The answer would be another tool's (or prompt's, or
		// resource's) than the request names: the one the policy, the
		// audit and Mcp-Name saw.
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("requestState belongs to a %s request for %q, not %q; a retry sends the original request again", ex.method, st.target, targetOf(req))}
	case round != st.round:
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "this requestState is from an earlier round; use the latest one"}
	}
	return ex, st, nil
}

// arguments is what a parked call's arguments were, for its retry to be
// checked against: two digests, not the arguments, which may be as large
// as a request body and would be kept for as long as the call is parked.
// A retry whose bytes are the call's matches on the first digest without
// being decoded; one a client serialised again (other whitespace, member
// order or escapes) matches on the second.
type arguments struct {
	raw       [32]byte // SHA-256 of the bytes as the client sent them
	canon     [32]byte // their jsonrpc.CanonicalSum
	canonical bool     // false when they have none (a key twice): only the same bytes match
}

// bindArguments is the arguments of the request being parked. It reads
// them through, on the reader, at each park: parks are few, while retries
// that send the same bytes again, the most, then cost one digest each.
func bindArguments(req *mcp.Request) arguments {
	args := argumentsOf(req)
	a := arguments{raw: sha256.Sum256(args)}
	if len(args) > maxCanonicalArguments {
		return a
	}
	var err error
	a.canon, err = jsonrpc.CanonicalSum(args)
	a.canonical = err == nil
	return a
}

// maxCanonicalArguments bounds the arguments read through at a park, on
// the goroutine that reads the child for every client (a MiB of tiny
// objects takes tens of milliseconds): larger ones match only the same
// bytes, which is what a client that sends its request again sends.
const maxCanonicalArguments = 64 << 10

// match reports whether a retry's arguments are the parked call's.
func (a arguments) match(req *mcp.Request) bool {
	args := argumentsOf(req)
	if sha256.Sum256(args) == a.raw {
		return true
	}
	if !a.canonical || len(args) > 8*maxCanonicalArguments {
		// Escapes make a character six bytes at most ("\u003c" for "<"):
		// beyond that, these are not the call's arguments written again,
		// and are not read through to say so.
		return false
	}
	sum, err := jsonrpc.CanonicalSum(args)
	return err == nil && sum == a.canon
}

// argumentsOf is the arguments of a tools/call or prompts/get, on which
// its answer depends beyond its target; {} for none (absent or null, which
// a child reads alike) and for other methods, which have none.
func argumentsOf(req *mcp.Request) []byte {
	if req != nil && (req.Method == mcp.MethodToolsCall || req.Method == mcp.MethodPromptsGet) {
		if args, ok := req.Param(mcp.ParamArguments); ok && string(args) != "null" {
			return args
		}
	}
	return []byte("{}")
}

// answeredBy takes the questions a retry's inputResponses answer out of
// st, and returns the replies for the child. A question with no answer, or
// an answer that is not a result, stays, to be asked again. An answer
// whose key is ambiguous (see jsonrpc.Find) refuses the retry, and leaves
// st as it was.
func (st *asking) answeredBy(responses []byte) (replies [][]byte, methods []string, err error) {
	answers := make([][]byte, len(st.asks))
	for i, a := range st.asks {
		sp, ok, err := jsonrpc.Lookup(responses, a.key)
		if err != nil {
			var amb *jsonrpc.AmbiguousError
			if errors.As(err, &amb) {
				amb.Path = []string{"params", mcp.ParamInputResponses}
			}
			return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error()}
		}
		if ok && responses[sp.Start] == '{' {
			answers[i] = responses[sp.Start:sp.End]
		}
	}
	var left []*ask
	for i, a := range st.asks {
		if answers[i] == nil {
			left = append(left, a)
			continue
		}
		replies = append(replies, jsonrpc.NewResult(a.childID, answers[i]))
		methods = append(methods, a.method)
	}
	st.asks = left
	return replies, methods, nil
}

// sendReplies answers the child's questions, in order.
func (ch *child) sendReplies(ctx context.Context, replies [][]byte, methods []string) {
	for i, r := range replies {
		ch.toChild(ctx, r, methods[i])
	}
}
