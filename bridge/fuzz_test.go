package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// FuzzRewrite checks the id and progress-token rewriting of any request a
// client can send: the line for the child is one line of JSON-RPC with the
// gateway's id and token and the client's payload otherwise untouched; the
// child's progress comes back with the client's token, and its response
// with the client's id, byte for byte.
func FuzzRewrite(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","_meta":{"progressToken":"tok"}}}`), int64(7))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1e3,"method":"m","params":{"_meta":{"progressToken":-12,"k":[1,{"progressToken":2}]}}}`), int64(1<<40))
	f.Add([]byte("{\n \"jsonrpc\": \"2.0\",\n \"id\": 9,\n \"method\": \"m\",\n \"params\": {\"s\": \"\\u2028\", \"_meta\": {\"progressToken\": \"p\"}}\n}"), int64(3))
	f.Add([]byte(`{"params":{"a":null},"method":"m","id":"\u00e9","jsonrpc":"2.0"}`), int64(2))
	f.Add([]byte(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","_meta":null,"requestState":"x","inputResponses":{}}}`), int64(5))
	f.Add([]byte(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"_meta":{"traceparent":"own","k":1}}}`), int64(6))
	f.Fuzz(func(t *testing.T, raw []byte, gw int64) {
		if gw <= 0 {
			return
		}
		msg, err := jsonrpc.Parse(raw)
		if err != nil || msg.Kind != jsonrpc.KindRequest {
			return
		}
		req, err := mcp.Read(msg)
		if err != nil {
			return // ambiguous, or a progress token that is neither string nor number
		}
		b := &Bridge{q: newQuestions(nil, nil)}
		b.opts.defaults()
		b.log = b.opts.Logger
		ch := newChild(&worker{b: b, log: b.log}, nil)
		ch.setEra(EraLegacy)
		c := ch.newCall(context.Background(), callSpec{req: req})
		line := c.appendLine(nil, gw, nil)
		if bytes.ContainsAny(line, "\r\n") {
			t.Fatalf("the child's line has a line break: %q", line)
		}
		out, err := jsonrpc.Parse(line)
		if err != nil {
			t.Fatalf("the child's line %s does not parse: %v", line, err)
		}
		if id, ok := out.IDInt(); !ok || id != gw || out.Method != req.Method {
			t.Fatalf("the child's line %s: want id %d and method %q", line, gw, req.Method)
		}
		// A child of any decoder reads the line one way, translated for a
		// 2026 child (with the _meta a 2025 client's request lacks, and a
		// retry's members) or not.
		if _, err := mcp.Read(out); err != nil {
			t.Fatalf("the child's line %s is ambiguous: %v", line, err)
		}
		ch.setEra(EraModern)
		set := []mcp.Member{{Key: mcp.ParamInputResponses, Value: []byte(`{}`)}, {Key: mcp.ParamRequestState, Value: []byte(`"s"`)}}
		c.caller.Meta = []mcp.Member{{Key: mcp.MetaTraceparent, Value: []byte(`"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`)}}
		modern := c.appendLine([]byte("kept"), gw, set)
		if !bytes.HasPrefix(modern, []byte("kept")) {
			t.Fatalf("appendLine did not append: %q", modern)
		}
		modern = modern[len("kept"):]
		c.caller.Meta = nil
		ch.setEra(EraLegacy)
		if m, err := jsonrpc.Parse(modern); err != nil {
			t.Fatalf("the line for a 2026 child %s does not parse: %v", modern, err)
		} else if r, err := mcp.Read(m); err != nil {
			t.Fatalf("the line for a 2026 child %s is ambiguous: %v", modern, err)
		} else if msg.Params == nil || msg.Params[0] == '{' {
			if v, ok := r.MetaString(mcp.MetaProtocolVersion); !ok || v != mcp.Modern {
				if _, had := req.Meta(mcp.MetaProtocolVersion); !had {
					t.Fatalf("the line for a 2026 child %s lacks the protocol version", modern)
				}
			}
			if _, had := req.Meta(mcp.MetaTraceparent); !had {
				if tp, _ := r.MetaString(mcp.MetaTraceparent); tp != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
					t.Fatalf("the line for a 2026 child %s lacks the trace context", modern)
				}
			}
			if st, _ := r.Param(mcp.ParamRequestState); string(st) != `"s"` {
				t.Fatalf("the line for a 2026 child %s does not carry the retry's state", modern)
			}
		}
		// The params are the client's, with only the token changed.
		want := req.Params
		if c.token != nil {
			tok, _, _ := jsonrpc.Lookup(out.Params, "_meta", "progressToken")
			if got := string(out.Params[tok.Start:tok.End]); got != strconv.FormatInt(gw, 10) {
				t.Fatalf("the child's token is %s, want %d", got, gw)
			}
			orig, _, _ := jsonrpc.Lookup(req.Params, "_meta", "progressToken")
			want = jsonrpc.Splice(req.Params, jsonrpc.Edit{Span: orig, New: jsonrpc.Int(gw)})
		}
		if !sameJSON(out.Params, want) {
			t.Fatalf("the child's params %s, want %s", out.Params, want)
		}

		// The child's progress carries the client's token again.
		if c.token != nil {
			n, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + strconv.FormatInt(gw, 10) + `,"progress":1}}`))
			tok, _, _ := jsonrpc.Lookup(n.Params, "progressToken")
			c.progress(n, tok)
			notes, _, _, _ := c.box.take()
			if len(notes) != 1 {
				t.Fatalf("progress gave %d notes", len(notes))
			}
			p, err := jsonrpc.Parse(notes[0])
			if err != nil {
				t.Fatalf("relayed progress %s: %v", notes[0], err)
			}
			got, _, _ := jsonrpc.Lookup(p.Params, "progressToken")
			if !bytes.Equal(p.Params[got.Start:got.End], c.token) {
				t.Fatalf("relayed token %s, want the client's %s", p.Params[got.Start:got.End], c.token)
			}
		}

		// The response carries the client's id byte for byte.
		// With room to spare, as the stdio reader leaves it: restore may
		// edit in place, so the response is not looked at afterwards.
		answer := append(make([]byte, 0, 256), `{"jsonrpc":"2.0","id":`+strconv.FormatInt(gw, 10)+`,"result":{"ok":true}}`...)
		resp, _ := jsonrpc.Parse(answer)
		back, err := jsonrpc.Parse(c.restore(nil, resp))
		if err != nil || !bytes.Equal(back.ID, req.ID) || string(back.Result) != `{"ok":true}` {
			t.Fatalf("restored response %s (%v): want id %s", back.Raw, err, req.ID)
		}
	})
}

// sameJSON compares two JSON texts that may differ in insignificant space.
func sameJSON(a, b []byte) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// appendSplice writes what jsonrpc.Splice makes of the same edits, ties
// (insertions at one place) included, after what dst holds.
func TestAppendSpliceIsSplice(t *testing.T) {
	t.Parallel()
	b := []byte(`{"jsonrpc":"2.0","id":12,"method":"m","params":{"a":[1,2,3]}}`)
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		// Up to 12 edits (as many as Splice sorts stably), cut from sorted
		// points, some of them empty spans at one place.
		n := rng.IntN(13)
		points := make([]int, 2*n)
		for i := range points {
			points[i] = rng.IntN(len(b) + 1)
		}
		slices.Sort(points)
		var all []jsonrpc.Edit
		starts := map[int]bool{} // of the spans that are not empty
		for i := range n {
			sp := jsonrpc.Span{Start: points[2*i], End: points[2*i+1]}
			if rng.IntN(3) == 0 {
				sp.End = sp.Start
			}
			all = append(all, jsonrpc.Edit{Span: sp, New: []byte(strconv.Itoa(round*100 + i))})
			if sp.End > sp.Start {
				starts[sp.Start] = true
			}
		}
		// An insertion where a replaced span starts would overlap it.
		all = slices.DeleteFunc(all, func(e jsonrpc.Edit) bool { return e.Span.End == e.Span.Start && starts[e.Span.Start] })
		rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		cut := rng.IntN(len(all) + 1)
		want := append([]byte("dst:"), jsonrpc.Splice(b, all...)...)
		x, y := slices.Clone(all[:cut]), slices.Clone(all[cut:])
		if got := appendSplice([]byte("dst:"), b, x, y); !bytes.Equal(got, want) {
			t.Fatalf("edits %v then %v: got %s, want %s", all[:cut], all[cut:], got, want)
		}
	}
}
