package bridge

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// A legacy child asks its client for input with a request in the middle of
// a call; a 2026-07-28 client is asked with an InputRequiredResult instead,
// and answers with a retry: a new request carrying inputResponses and the
// requestState it was given. So the gateway parks the child's call, answers
// the client's request with the questions and a requestState of its own,
// and picks the call up again when the retry comes: it answers the child's
// questions and the retry's HTTP request gets the call's result.
//
// The requestState names the parked call and is signed, because the spec
// says to treat it as attacker-controlled. A call not continued within the
// idle timeout is cancelled toward the child.

const statePrefix = "gw1."

// stateFor mints the requestState for a parked exchange's round: each round
// gets a state of its own, and only the latest continues the call.
func (b *Bridge) stateFor(id int64, round int) string {
	body := strconv.FormatInt(id, 10) + "." + strconv.Itoa(round)
	mac := hmac.New(sha256.New, b.stateKey[:])
	mac.Write([]byte(body))
	enc := base64.RawURLEncoding
	return statePrefix + enc.EncodeToString([]byte(body)) + "." + enc.EncodeToString(mac.Sum(nil))
}

// ownState reports whether the request continues a call the gateway
// parked, that is whether its requestState has the gateway's form; such a
// state must also carry the gateway's signature. Only a legacy child's
// calls are ever parked: a modern child's requestState is its own and
// passes through untouched.
func (b *Bridge) ownState(req *jsonrpc.Message) (id int64, round int, ours bool, err error) {
	if len(req.Params) == 0 || req.Params[0] != '{' {
		return 0, 0, false, nil
	}
	sp, ok, _ := jsonrpc.Lookup(req.Params, "requestState")
	if !ok {
		return 0, 0, false, nil
	}
	var state string
	if json.Unmarshal(req.Params[sp.Start:sp.End], &state) != nil || !strings.HasPrefix(state, statePrefix) {
		return 0, 0, false, nil
	}
	tampered := &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState failed its integrity check"}
	body64, mac64, ok := strings.Cut(strings.TrimPrefix(state, statePrefix), ".")
	enc := base64.RawURLEncoding
	body, err1 := enc.DecodeString(body64)
	sum, err2 := enc.DecodeString(mac64)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, true, tampered
	}
	mac := hmac.New(sha256.New, b.stateKey[:])
	mac.Write(body)
	if !hmac.Equal(sum, mac.Sum(nil)) {
		return 0, 0, true, tampered
	}
	idText, roundText, _ := strings.Cut(string(body), ".")
	id, perr := strconv.ParseInt(idText, 10, 64)
	round, rerr := strconv.Atoi(roundText)
	if perr != nil || rerr != nil {
		return 0, 0, true, tampered
	}
	return id, round, true, nil
}

// parkLocked parks the exchange while its call's client supplies input, and
// returns the InputRequiredResult for that client. ex.mu is held.
func (ex *exchange) parkLocked(c *Call) []byte {
	ex.call = nil
	ex.parkedFor = c.caller
	ex.round++
	ex.parkTimer = time.AfterFunc(ex.s.b.opts.IdleTimeout, ex.abandon)
	ex.s.b.park(ex)
	return ex.inputRequiredLocked()
}

func (ex *exchange) inputRequiredLocked() []byte {
	requests := map[string]any{}
	for _, a := range ex.asks {
		requests[a.key] = map[string]json.RawMessage{"method": json.RawMessage(strconv.Quote(a.method)), "params": orEmpty(a.params)}
	}
	out, _ := json.Marshal(map[string]any{
		"resultType":    "input_required",
		"inputRequests": requests,
		"requestState":  ex.s.b.stateFor(ex.id, ex.round),
	})
	return out
}

// abandon ends a parked exchange whose client did not continue in time.
func (ex *exchange) abandon() {
	if !ex.s.claim(ex) {
		ex.s.b.unpark(ex) // answered meanwhile; nobody came for the answer
		return
	}
	ex.s.b.unpark(ex)
	ex.closeAsks("the client did not answer in time")
	ex.cancel("the client did not continue the request in time")
}

func (b *Bridge) park(ex *exchange) {
	b.askMu.Lock()
	defer b.askMu.Unlock()
	b.parked[ex.id] = ex
}

func (b *Bridge) unpark(ex *exchange) {
	b.askMu.Lock()
	gone := b.parked[ex.id] == ex
	if gone {
		delete(b.parked, ex.id)
	}
	b.askMu.Unlock()
	if gone && b.unparked != nil {
		b.unparked()
	}
}

// parkedCount is how many calls wait for their client's retry. The child
// is still working on each of them.
func (b *Bridge) parkedCount() int {
	b.askMu.Lock()
	defer b.askMu.Unlock()
	return len(b.parked)
}

func (b *Bridge) parkedExchange(id int64) *exchange {
	b.askMu.Lock()
	defer b.askMu.Unlock()
	return b.parked[id]
}

// resume continues a parked call with the client's retry: the answers go
// to the child, and the retry gets the call's result. Answers still
// missing are asked for again.
func (b *Bridge) resume(ctx context.Context, req *jsonrpc.Message, caller Caller, id int64, round int) (*Call, error) {
	ex := b.parkedExchange(id)
	if ex == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: "requestState names a request that is no longer waiting (it timed out, or the server restarted); send the request again without requestState"}
	}
	if ex.method != req.Method {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("requestState belongs to a %s request, not %s", ex.method, req.Method)}
	}
	var p struct {
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	_ = json.Unmarshal(req.Params, &p)
	c, err := newCall(b, ex.s, req, caller)
	if err != nil {
		return nil, err
	}
	type reply struct {
		a    *ask
		line []byte
	}
	var replies []reply
	ex.mu.Lock()
	if ex.call != nil {
		ex.mu.Unlock()
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "this requestState is already being continued by another request"}
	}
	if round != ex.round {
		ex.mu.Unlock()
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "this requestState is from an earlier round; use the latest one"}
	}
	for aid, a := range ex.asks {
		r, ok := p.InputResponses[a.key]
		if !ok || len(r) == 0 || r[0] != '{' {
			continue // missing or not a result: asked for again below
		}
		replies = append(replies, reply{a, jsonrpc.NewResult(a.childID, r)})
		delete(ex.asks, aid)
	}
	if len(ex.asks) > 0 {
		irr := ex.inputRequiredLocked()
		ex.mu.Unlock()
		for _, r := range replies {
			ex.s.toChild(ctx, r.line, r.a.method)
		}
		return answered(req, irr), nil
	}
	final := ex.final
	ex.call = c
	if ex.parkTimer != nil {
		ex.parkTimer.Stop()
	}
	ex.mu.Unlock()
	b.unpark(ex)
	c.attach(ex)
	if final != nil {
		// The child answered while the call was parked.
		c.finish(c.restore(ex, final), nil)
		return c, nil
	}
	c.arm(ctx)
	for _, r := range replies {
		ex.s.toChild(ctx, r.line, r.a.method)
	}
	return c, nil
}
