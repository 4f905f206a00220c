package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// askAll sends requests to the client and waits for all the answers: the
// legacy way for a tool to ask for sampling, elicitation or roots. Each
// request's id is its key, so a client that sees the questions as a
// 2026-07-28 InputRequiredResult (through a gateway) sees the same names a
// modern server would use; the requests go out in one write, as one batch
// of questions.
func (s *server) askAll(ctx context.Context, reqs []inputRequest) (map[string]json.RawMessage, *rpcError) {
	type pending struct {
		key   string
		id    json.RawMessage
		reply chan message
	}
	var ps []pending
	var batch []message
	s.mu.Lock()
	for _, q := range reqs {
		raw := json.RawMessage(strconv.Quote(q.key))
		if old, ok := s.asked[string(raw)]; ok {
			// A question of this name is already waiting, for a call its
			// client has most likely abandoned: the newer call takes the
			// name, and the older one fails.
			select {
			case old <- message{ID: raw, Error: json.RawMessage(`{"code":-32603,"message":"superseded by a newer request"}`)}:
			default:
			}
			delete(s.asked, string(raw))
		}
		p := pending{q.key, raw, make(chan message, 1)}
		s.asked[string(raw)] = p.reply
		ps = append(ps, p)
		params, _ := json.Marshal(q.params)
		batch = append(batch, message{ID: raw, Method: q.method, Params: params})
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		for _, p := range ps {
			if s.asked[string(p.id)] == p.reply { // not taken over by a newer call
				delete(s.asked, string(p.id))
			}
		}
		s.mu.Unlock()
	}()
	s.send(batch...)
	t := time.NewTimer(time.Minute)
	defer t.Stop()
	answers := map[string]json.RawMessage{}
	for i, p := range ps {
		select {
		case m := <-p.reply:
			if m.Error != nil {
				return nil, &rpcError{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the client refused %s: %s", reqs[i].method, m.Error)}
			}
			answers[p.key] = m.Result
		case <-t.C:
			return nil, &rpcError{Code: jsonrpc.CodeInternalError, Message: "the client did not answer " + reqs[i].method + " within a minute"}
		case <-ctx.Done():
			return nil, &rpcError{Code: jsonrpc.CodeInternalError, Message: "cancelled"}
		}
	}
	return answers, nil
}

// clientAnswered takes the client's answer to one of the demo's own
// questions.
func (s *server) clientAnswered(m *message) {
	s.mu.Lock()
	reply, ok := s.asked[string(m.ID)]
	s.mu.Unlock()
	if ok {
		// Never block the reader: a second answer under the same id (the
		// client answered twice, or answered a question this one
		// superseded) has nowhere to go.
		select {
		case reply <- *m:
		default:
			fmt.Fprintf(s.errOut, "demo: a second answer to %s; dropped\n", m.ID)
		}
		return
	}
	fmt.Fprintf(s.errOut, "demo: an answer to %s, which it never asked\n", m.ID)
}
