package httpapi

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stdiomcp/gateway/clientlimit"
	"github.com/stdiomcp/gateway/jsonrpc"
)

// The REST API passes the same front door as /mcp, and says so with
// problems.
func TestRESTFrontDoor(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.tools = toolList(allTools...)
	srv, _ := guarded(t, f, Options{})
	routes := []struct{ method, path, contentType, body string }{
		{"GET", "/v1/tools", "", ""},
		{"POST", "/v1/tools/echo", "application/json", `{"text":"a"}`},
		{"GET", "/v1/tools/echo", "", ""},
		{"GET", "/v1/resources", "", ""},
		{"GET", "/v1/resources/templates", "", ""},
		{"GET", "/v1/resources/read?uri=demo://a", "", ""},
		{"GET", "/v1/prompts", "", ""},
		{"GET", "/v1/prompts/greet", "", ""},
		{"POST", "/v1/prompts/greet", "application/json", `{}`},
	}
	for _, rt := range routes {
		for _, cred := range []struct {
			name   string
			header []string
			status int
			kind   string
		}{
			{"no token", nil, 401, kindUnauthorized},
			{"wrong token", bearer("not-a-token-0123456789"), 401, kindUnauthorized},
			{"no token in the header", []string{"Authorization", "Bearer "}, 400, kindBadRequest},
			{"the header twice", []string{"Authorization", "Bearer " + ciToken, "Authorization", "Bearer " + ciToken}, 400, kindBadRequest},
		} {
			t.Run(cred.name+" "+rt.method+" "+rt.path, func(t *testing.T) {
				r := restRefused(t, f, restReq(rt.method, srv+rt.path, rt.contentType, rt.body, cred.header...))
				wantProblem(t, r, cred.status, cred.kind)
				if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
				}
				nothingReached(t, f)
			})
		}
	}
	// Outside the caller's policy (ci: the tool echo, resources demo://a*,
	// no prompts); an unknown tool is outside it too, and says nothing of
	// which tools exist.
	for _, rt := range []struct{ method, path, contentType, body string }{
		{"POST", "/v1/tools/add", "application/json", `{}`},
		{"POST", "/v1/tools/nope", "", ""},
		{"GET", "/v1/tools/look", "", ""},
		{"GET", "/v1/resources/read?uri=demo://b", "", ""},
		{"GET", "/v1/prompts/greet?who=a", "", ""},
		{"POST", "/v1/prompts/greet", "application/json", `{"who":"a"}`},
		// The members are read only for a call that may go on.
		{"POST", "/v1/tools/add", "application/json", `{"a":1,"a":2}`},
		{"POST", "/v1/prompts/greet", "application/json", `{"who":"a","who":"b"}`},
	} {
		t.Run("forbidden "+rt.method+" "+rt.path, func(t *testing.T) {
			r := restRefused(t, f, restReq(rt.method, srv+rt.path, rt.contentType, rt.body, bearer(ciToken)...))
			if p := wantProblem(t, r, 403, kindForbidden); p.Code != jsonrpc.CodeForbidden || p.Reason != "forbidden" {
				t.Errorf("code %d, reason %q", p.Code, p.Reason)
			}
			nothingReached(t, f)
		})
	}
	// Inside it: the child learns who calls.
	t.Run("allowed", func(t *testing.T) {
		answer := restStart(restReq("POST", srv+"/v1/tools/echo", "application/json", `{"text":"a"}`, bearer(ciToken)...))
		c := f.next(t)
		if want := callerOwner("token", "ci"); c.caller.Principal != want || !c.caller.Modern {
			t.Errorf("caller %+v, want principal %q", c.caller, want)
		}
		c.finish(rpcResult(`{"content":[]}`), nil)
		if r := await(t, answer); r.status != 200 {
			t.Errorf("status %d: %s", r.status, r.body)
		}
	})
	// Lists show a restricted caller only what it may use.
	t.Run("filtered resources", func(t *testing.T) {
		answer := restStart(restReq("GET", srv+"/v1/resources", "", "", bearer(ciToken)...))
		f.next(t).finish(rpcResult(`{"resources":[{"uri":"demo://b","name":"b"},{"uri":"demo://abc", "name":"a"}]}`), nil)
		if r := await(t, answer); string(r.body) != `{"resources":[{"uri":"demo://abc", "name":"a"}]}` {
			t.Errorf("status %d: %s", r.status, r.body)
		}
	})
}

func TestRESTLimits(t *testing.T) {
	t.Parallel()
	t.Run("rate", func(t *testing.T) {
		t.Parallel()
		f := newFake()
		f.tools = toolList(allTools...)
		srv, _ := guarded(t, f, Options{Limiter: clientlimit.New(clientlimit.Options{Rate: 0.001, Burst: 1})})
		if r := restDo(t, restReq("GET", srv+"/v1/tools", "", "", bearer(ciToken)...)); r.status != 200 {
			t.Fatalf("first: %d", r.status)
		}
		r := restRefused(t, f, restReq("POST", srv+"/v1/tools/echo", "application/json", `{"text":"a"}`, bearer(ciToken)...))
		if p := wantProblem(t, r, 429, kindRateLimited); p.Reason != "rate_limited" {
			t.Errorf("reason %q", p.Reason)
		}
		if n, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || n < 1 {
			t.Errorf("Retry-After %q", r.header.Get("Retry-After"))
		}
		nothingReached(t, f)
	})
	t.Run("open requests", func(t *testing.T) {
		t.Parallel()
		f := newFake()
		f.tools = toolList(allTools...)
		srv, _ := guarded(t, f, Options{Limiter: clientlimit.New(clientlimit.Options{MaxStreams: 1})})
		first := restStart(restReq("POST", srv+"/v1/tools/echo", "application/json", `{"text":"a"}`, bearer(ciToken)...))
		c := f.next(t)
		r := restDo(t, restReq("GET", srv+"/v1/tools", "", "", bearer(ciToken)...))
		if p := wantProblem(t, r, 429, kindRateLimited); p.Reason != "too_many_streams" {
			t.Errorf("reason %q", p.Reason)
		}
		c.finish(rpcResult(`{"content":[]}`), nil)
		if r := await(t, first); r.status != 200 {
			t.Errorf("first: %d", r.status)
		}
	})
}

// /v1/openapi.json shows each caller the tools it may call, and no more:
// the document cached for one caller's set is never another's.
func TestRESTDocumentPerCaller(t *testing.T) {
	t.Parallel()
	f := newFake()
	f.tools = toolList(allTools...)
	srv, _ := guarded(t, f, Options{})
	paths := func(token string) []string {
		t.Helper()
		r := restDo(t, restReq("GET", srv+"/v1/openapi.json", "", "", bearer(token)...))
		var doc struct{ Paths map[string]any }
		if r.status != 200 || json.Unmarshal(r.body, &doc) != nil {
			t.Fatalf("%d %s", r.status, r.body)
		}
		var out []string
		for p := range doc.Paths {
			out = append(out, p)
		}
		slices.Sort(out)
		return out
	}
	for range 2 { // the second time from the cache
		if got := paths(ciToken); !slices.Equal(got, []string{"/v1/tools/echo"}) {
			t.Errorf("ci sees %q", got)
		}
		if got := paths(adminToken); len(got) != len(allTools) {
			t.Errorf("admin sees %q, want all %d tools", got, len(allTools))
		}
	}
	nothingReached(t, f)
}
