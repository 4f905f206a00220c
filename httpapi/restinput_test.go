package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A member name in another letter case than the schema declares it is
// refused, unless the schema declares that spelling too (in one object,
// for two in one object); names it does not declare are free. Numbers the
// schema check cannot afford are refused before it runs.
func TestRESTArgumentsAreReadAlike(t *testing.T) {
	t.Parallel()
	const twins = `{"name":"twins","inputSchema":{"type":"object","properties":{"id":{"type":"string"},"ID":{"type":"integer"},` +
		`"inner":{"type":"object","properties":{"k":{},"K":{}}},"files":{"type":"object"},` +
		`"a":{"type":"integer","maximum":5},"deep":{"type":"object","properties":{"A":{}}}}}}`
	const bounded = `{"name":"bounded","inputSchema":{"type":"object","properties":{"n":{"type":"number","maximum":10},` +
		`"l":{"type":"array","uniqueItems":true}}}}`
	f, srv := restServer(t, Options{}, twins, bounded, echoTool)
	for _, tc := range []struct {
		name, tool, args string
		status           int
	}{
		{"twins the schema names", "twins", `{"id":"x","ID":2}`, 200},
		{"a dotted capital I, which Go reads as no i", "twins", `{"İD":1}`, 200},
		{"a Kelvin sign, which Go reads as a k", "twins", `{"deep":{"K":1}}`, 400},
		{"nested twins the schema names", "twins", `{"inner":{"k":1,"K":2}}`, 200},
		{"twins it does not name", "echo", `{"text":"a","TEXT":"b"}`, 400},
		{"a lone variant of a declared name", "echo", `{"TEXT":"b"}`, 400},
		{"a variant of a name declared elsewhere", "twins", `{"inner":{"ID":1}}`, 200},
		{"twins declared by different objects", "twins", `{"a":1,"A":99}`, 400},
		{"names nobody declares, in a map", "twins", `{"files":{"Makefile":"x","makefile":"y"}}`, 200},
		{"a huge exponent", "bounded", `{"n":1e10000000}`, 400},
		{"a huge negative exponent", "bounded", `{"n":1e-10000000}`, 400},
		{"many huge numbers", "bounded", `{"l":[` + strings.Repeat(`1e999999,`, 30) + `1]}`, 400},
		{"a number with too many digits", "bounded", `{"n":` + strings.Repeat("9", 1001) + `}`, 400},
		{"a large but ordinary number", "bounded", `{"n":1e300}`, 400}, // over the maximum: the schema says so
		{"ordinary unique items", "bounded", `{"l":[` + strings.Repeat(`1.5,`, 30) + `2]}`, 400},
		{"more values than the check takes", "bounded", `{"l":[` + strings.Repeat(`0,`, 1<<20) + `0]}`, 400},
		{"as many values as the check takes", "twins", `{"files":{"l":[` + strings.Repeat(`0,`, 1<<20-3) + `0]}}`, 200},
		{"one value more", "twins", `{"files":{"l":[` + strings.Repeat(`0,`, 1<<20-2) + `0]}}`, 400},
		{"nested as deep as JSON goes", "bounded", `{"l":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`, 400},
		{"a byte that is not UTF-8", "echo", "{\"text\":\"a\xffb\"}", 400},
		{"distinct items", "bounded", `{"l":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23]}`, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := restReq("POST", srv+"/v1/tools/"+tc.tool, "application/json", tc.args)
			if tc.status != 200 {
				r := restRefused(t, f, req)
				p := checkProblem(t, r.body, r.status, "")
				if r.status != tc.status || (p.Type != problemPrefix+kindBadRequest && p.Type != problemPrefix+kindInvalidArguments) {
					t.Errorf("%d %s", r.status, r.body)
				}
				return
			}
			answer := restStart(req)
			c := f.next(t)
			if args, _ := c.req.Param("arguments"); string(args) != tc.args {
				t.Errorf("arguments %s", args)
			}
			c.finish(rpcResult(`{"content":[]}`), nil)
			if r := await(t, answer); r.status != http.StatusOK {
				t.Errorf("status %d: %s", r.status, r.body)
			}
		})
	}
}

// A carriage return between a child's JSON tokens would end an SSE line:
// each becomes a space, and the event's data still reads as the result.
func TestSSEDataIsOneLine(t *testing.T) {
	t.Parallel()
	f, srv := restServer(t, Options{}, allTools...)
	answer := restStart(restReq("POST", srv+"/v1/tools/add", "", "", "Accept", "text/event-stream"))
	c := f.next(t)
	c.finish(rpcResult("{\"content\":[],\r\"x\":\r1}"), nil)
	got := sseEvents(t, await(t, answer))
	last := lastEvent(t, got)
	if last.name != "result" || last.data != `{"content":[], "x": 1}` {
		t.Errorf("events %q", got)
	}
	if b := oneLine([]byte(`{"a":1}`)); string(b) != `{"a":1}` {
		t.Errorf("oneLine changed %s", b)
	}
}

// Large arguments are checked two at a time: a call waits for a slot, and
// gives up waiting when its time runs out; a slot is given back however
// the check ends.
func TestLargeArgumentsTakeTurns(t *testing.T) {
	t.Parallel()
	h := &handlers{bigChecks: make(chan struct{}, 2)}
	large := manyMembers(bigArguments / 8)
	twice := append(bytes.Clone(large[:len(large)-1]), `,"k0":0}`...)
	if len(large) <= bigArguments {
		t.Fatalf("%d bytes are not large", len(large))
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/tools/x", nil)
	check := func(ctx context.Context, args []byte) (bool, int) {
		rec := httptest.NewRecorder()
		ok := h.checkArguments(rec, r, ctx, args, "the body", nil, "x")
		return ok, rec.Code
	}
	h.bigChecks <- struct{}{}
	h.bigChecks <- struct{}{}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errCallTimeout)
	if ok, status := check(ctx, large); ok || status != http.StatusGatewayTimeout || len(h.bigChecks) != 2 {
		t.Errorf("waiting for a slot past the timeout: %v, %d, %d slots taken", ok, status, len(h.bigChecks))
	}
	<-h.bigChecks
	if ok, _ := check(context.Background(), large); !ok || len(h.bigChecks) != 1 {
		t.Errorf("with a slot free: %v, %d slots taken after", ok, len(h.bigChecks))
	}
	if ok, status := check(context.Background(), twice); ok || status != http.StatusBadRequest || len(h.bigChecks) != 1 {
		t.Errorf("refused: %v, %d, %d slots taken after", ok, status, len(h.bigChecks))
	}
	if ok, _ := check(ctx, []byte(`{"small":1}`)); !ok {
		t.Error("small arguments waited for a slot")
	}
}
