package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/jsonrpc"
)

// GET /v1/tools is the child's list, each tool as it wrote it, and for a
// restricted caller only its tools.
func TestRESTToolList(t *testing.T) {
	t.Parallel()
	tools := []string{echoTool, addTool, `{ "name":"slow" ,"inputSchema":{ } }`}
	all := `{"tools":[` + strings.Join(tools, ",") + `]}`
	plain, plainURL := restServer(t, Options{}, tools...)
	g := newFake()
	g.tools = toolList(tools...)
	guardedURL, _ := guarded(t, g, Options{})
	down := newFake()
	down.callErr = jsonrpc.GatewayError(jsonrpc.CodeUnavailable, "child_unavailable", "no child")
	downURL := newServer(t, down, Options{}).URL
	for _, tc := range []struct {
		name, url string
		header    []string
		status    int
		want      string // the body, or the problem's kind
	}{
		{"anonymous", plainURL + "/v1/tools", nil, 200, all},
		{"admin", guardedURL + "/v1/tools", bearer(adminToken), 200, all},
		{"restricted caller", guardedURL + "/v1/tools", bearer(ciToken), 200, `{"tools":[` + echoTool + `]}`},
		{"unknown query parameter", plainURL + "/v1/tools?verbose=1", nil, 400, kindBadRequest},
		{"a cursor", plainURL + "/v1/tools?cursor=x", nil, 400, kindBadRequest},
		{"unreadable query", plainURL + "/v1/tools?a=%zz", nil, 400, kindBadRequest},
		{"no child", downURL + "/v1/tools", nil, 503, kindUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := restDo(t, restReq("GET", tc.url, "", "", tc.header...))
			if tc.status != 200 {
				wantProblem(t, r, tc.status, tc.want)
				return
			}
			if r.status != 200 || r.header.Get("Content-Type") != "application/json" || string(r.body) != tc.want {
				t.Errorf("status %d, Content-Type %q\n got %s\nwant %s", r.status, r.header.Get("Content-Type"), r.body, tc.want)
			}
		})
	}
	nothingReached(t, plain)
	nothingReached(t, g)
}

// Arguments that fail the tool's input schema are refused, each failure
// with its place in the arguments; the child never sees them.
func TestRESTArgumentsAreChecked(t *testing.T) {
	t.Parallel()
	const (
		local = `{"name":"local","inputSchema":{"type":"object","properties":{"p":{"$ref":"#/$defs/point"}},` +
			`"$defs":{"point":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}}}}`
		draft7 = `{"name":"draft7","inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",` +
			`"properties":{"n":{"type":"integer"}},"required":["n"],"dependencies":{"a":["b"]}}}`
		closed = `{"name":"closed","inputSchema":{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}}`
		odd    = `{"name":"odd","inputSchema":{"type":"object","properties":{"a/b":{"type":"string"},"c~d":{"type":"string"}}}}`
		pair   = `{"name":"pair","inputSchema":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a","b"],"additionalProperties":false}}`
	)
	f, srv := restServer(t, Options{}, echoTool, local, draft7, closed, odd, pair)
	for _, tc := range []struct {
		name, tool, args string
		paths            []string // the failures' paths, sorted (a missing or unexpected member's own); nil: the arguments pass
		message          string   // in the failure at the first path, which names no other path's member
	}{
		{"valid", "echo", `{"text":"a","opts":{"n":1},"more":true}`, nil, ""},
		{"wrong type", "echo", `{"text":5}`, []string{"/text"}, "string"},
		{"nested", "echo", `{"text":"a","opts":{"n":0}}`, []string{"/opts/n"}, "minimum"},
		{"missing required", "echo", `{}`, []string{"/text"}, "text"},
		{"two failures", "echo", `{"opts":{"n":"x"}}`, []string{"/opts/n", "/text"}, "integer"},
		{"escaped member names are read", "echo", `{"t\u0065xt":5}`, []string{"/text"}, "string"},
		{"local reference", "local", `{"p":{"x":"no"}}`, []string{"/p/x"}, "number"},
		{"local reference, missing member", "local", `{"p":{}}`, []string{"/p/x"}, "x"},
		{"local reference, valid", "local", `{"p":{"x":1.5}}`, nil, ""},
		{"names that need escaping in a pointer", "odd", `{"a/b":1,"c~d":2}`, []string{"/a~1b", "/c~0d"}, "string"},
		{"additional property", "closed", `{"a":"x","b":1}`, []string{"/b"}, "b"},
		{"draft-07", "draft7", `{"n":"x"}`, []string{"/n"}, "integer"},
		{"draft-07, valid", "draft7", `{"n":1}`, nil, ""},
		// dependencies is a keyword of draft-07 only: 2020-12 ignores it.
		{"draft-07 keyword", "draft7", `{"n":1,"a":1}`, []string{""}, "b"},
		// Each member is told apart, under its own path, in its own words.
		{"two missing", "pair", `{}`, []string{"/a", "/b"}, "'a'"},
		{"two not allowed", "pair", `{"a":"x","b":"y","c":1,"d":2}`, []string{"/c", "/d"}, "'c'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := restReq("POST", srv+"/v1/tools/"+tc.tool, "application/json", tc.args)
			if tc.paths == nil {
				answer := restStart(req)
				c := f.next(t)
				if args, _ := c.req.Param("arguments"); string(args) != tc.args {
					t.Errorf("arguments %s, want %s", args, tc.args)
				}
				c.finish(rpcResult(`{"content":[]}`), nil)
				if r := await(t, answer); r.status != 200 {
					t.Errorf("status %d: %s", r.status, r.body)
				}
				return
			}
			p := wantProblem(t, restRefused(t, f, req), 400, kindInvalidArguments)
			var paths []string
			for _, e := range p.Errors {
				paths = append(paths, e.Path)
				if e.Message == "" {
					t.Errorf("no message at %q", e.Path)
				}
			}
			slices.Sort(paths)
			if !slices.Equal(paths, tc.paths) {
				t.Errorf("paths %q, want %q: %+v", paths, tc.paths, p.Errors)
			}
			if len(p.Errors) > 0 && !strings.Contains(messageAt(p.Errors, tc.paths[0]), tc.message) {
				t.Errorf("failure at %q says %q, want it to mention %q", tc.paths[0], messageAt(p.Errors, tc.paths[0]), tc.message)
			}
			for _, other := range tc.paths[1:] {
				if member := "'" + strings.TrimPrefix(other, "/") + "'"; strings.Contains(messageAt(p.Errors, tc.paths[0]), member) {
					t.Errorf("failure at %q says %q, naming %s too", tc.paths[0], messageAt(p.Errors, tc.paths[0]), member)
				}
			}
			nothingReached(t, f)
		})
	}
}

func messageAt(errs []argumentError, path string) string {
	var ms []string
	for _, e := range errs {
		if e.Path == path {
			ms = append(ms, e.Message)
		}
	}
	return strings.Join(ms, "; ")
}

// A schema the gateway cannot use leaves the check to the child: the call
// goes through, and the gateway reads no file and fetches no URL for it.
func TestRESTUncheckableSchemas(t *testing.T) {
	t.Parallel()
	// Were they read, these schemas would refuse every argument.
	file := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(file, []byte(`false`), 0o600); err != nil {
		t.Fatal(err)
	}
	var fetched atomic.Int32
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		w.Header().Set("Content-Type", "application/schema+json")
		w.Write([]byte(`false`))
	}))
	t.Cleanup(remote.Close)
	tools := []string{
		`{"name":"file","inputSchema":{"type":"object","properties":{"x":{"$ref":"file://` + filepath.ToSlash(file) + `"}}}}`,
		`{"name":"passwd","inputSchema":{"$ref":"file:///etc/passwd"}}`,
		`{"name":"http","inputSchema":{"type":"object","properties":{"x":{"$ref":"` + remote.URL + `/schema.json"}}}}`,
		`{"name":"http-root","inputSchema":{"$ref":"` + remote.URL + `/root.json"}}`,
		`{"name":"meta","inputSchema":{"$schema":"` + remote.URL + `/meta.json","type":"object"}}`,
		`{"name":"bad type","inputSchema":{"type":"nonsense"}}`,
		`{"name":"not a schema","inputSchema":"object"}`,
		`{"name":"bad pattern","inputSchema":{"type":"object","properties":{"x":{"type":"string","pattern":"("}}}}`,
		`{"name":"none"}`,
	}
	f, srv := restServer(t, Options{}, tools...)
	for _, tool := range []string{"file", "passwd", "http", "http-root", "meta", "bad type", "not a schema", "bad pattern", "none"} {
		t.Run(tool, func(t *testing.T) {
			// Twice: a schema that failed once is not tried again into a
			// different answer.
			for range 2 {
				answer := restStart(restReq("POST", srv+"/v1/tools/"+strings.ReplaceAll(tool, " ", "%20"), "application/json", `{"x":"anything"}`))
				c := f.next(t)
				if args, _ := c.req.Param("arguments"); string(args) != `{"x":"anything"}` {
					t.Errorf("arguments %s", args)
				}
				c.finish(rpcResult(`{"content":[]}`), nil)
				if r := await(t, answer); r.status != 200 {
					t.Errorf("status %d: %s", r.status, r.body)
				}
			}
		})
	}
	if n := fetched.Load(); n != 0 {
		t.Errorf("the gateway fetched a schema %d times", n)
	}
}

// swappingBackend is a fake whose tool list a test may change between
// requests.
type swappingBackend struct {
	*fakeBackend
	mu   sync.Mutex
	list *bridge.ToolList
}

func (b *swappingBackend) Tools(context.Context) (*bridge.ToolList, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.list, nil
}

func (b *swappingBackend) set(l *bridge.ToolList) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.list = l
}

// A new tool list brings its own schemas and annotations.
func TestRESTCatalogFollowsTheToolList(t *testing.T) {
	t.Parallel()
	b := &swappingBackend{fakeBackend: newFake(), list: toolList(echoTool)}
	srv := httptest.NewServer(New(b, Options{}))
	t.Cleanup(srv.Close)
	wantProblem(t, restRefused(t, b.fakeBackend, restReq("POST", srv.URL+"/v1/tools/echo", "application/json", `{}`)), 400, kindInvalidArguments)
	wantProblem(t, restRefused(t, b.fakeBackend, restReq("GET", srv.URL+"/v1/tools/add", "", "")), 404, kindUnknownTool)

	b.set(toolList(`{"name":"echo","inputSchema":{"type":"object"}}`, `{"name":"add","annotations":{"readOnlyHint":true}}`))
	answer := restStart(restReq("POST", srv.URL+"/v1/tools/echo", "application/json", `{}`))
	b.next(t).finish(rpcResult(`{"content":[]}`), nil)
	if r := await(t, answer); r.status != 200 {
		t.Errorf("under the new schema: %d %s", r.status, r.body)
	}
	answer = restStart(restReq("GET", srv.URL+"/v1/tools/add", "", ""))
	b.next(t).finish(rpcResult(`{"content":[]}`), nil)
	if r := await(t, answer); r.status != 200 {
		t.Errorf("a tool that became read-only: %d %s", r.status, r.body)
	}
	if r := restDo(t, restReq("GET", srv.URL+"/v1/tools", "", "")); string(r.body) != `{"tools":[{"name":"echo","inputSchema":{"type":"object"}},{"name":"add","annotations":{"readOnlyHint":true}}]}` {
		t.Errorf("list %s", r.body)
	}
}

func BenchmarkValidateArguments(b *testing.B) {
	s, err := compileSchema([]byte(`{"type":"object","properties":{"text":{"type":"string","maxLength":1000},` +
		`"opts":{"type":"object","properties":{"n":{"type":"integer","minimum":1},"tags":{"type":"array","items":{"type":"string"}}}}},` +
		`"required":["text"],"additionalProperties":false}`))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name, args string
		fails      bool
	}{
		{"valid", `{"text":"hello world","opts":{"n":3,"tags":["a","b","c"]}}`, false},
		{"invalid", `{"text":5,"opts":{"n":0,"tags":[1]},"extra":true}`, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			args := []byte(bc.args)
			for b.Loop() {
				failures, err := validateArguments(s, args)
				if err != nil || (failures != nil) != bc.fails {
					b.Fatalf("failures %v, err %v", failures, err)
				}
			}
		})
	}
}
