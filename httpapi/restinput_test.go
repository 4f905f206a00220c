package httpapi

import (
	"net/http"
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
