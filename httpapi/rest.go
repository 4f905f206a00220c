package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/stdiomcp/gateway/auth"
	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// restRoutes mounts the REST API: plain HTTP over the same bridge as
// /mcp (the same ids, cancellation, progress, policy and limits), with
// problem+json errors, for curl, browsers and web apps.
func (h *handlers) restRoutes(r chi.Router) {
	r.Route("/v1", func(v chi.Router) {
		v.Use(restAnswers)
		v.NotFound(func(w http.ResponseWriter, r *http.Request) {
			writeProblem(w, newProblem(kindNotFound, http.StatusNotFound, "no such route: the REST API is described at /openapi.yaml"))
		})
		v.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
			// RFC 9110 §15.5.6: a 405 lists what the route takes.
			var allow []string
			for _, m := range []string{http.MethodGet, http.MethodPost} {
				if v.Match(chi.NewRouteContext(), m, chi.RouteContext(r.Context()).RoutePath) {
					allow = append(allow, m)
				}
			}
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeProblem(w, newProblem(kindMethodNotAllowed, http.StatusMethodNotAllowed, r.Method+" is not served on "+clip(r.URL.Path)))
		})
		g := v.With(h.guardOrigin, h.authenticate, h.limit)
		g.Get("/tools", h.restTools)
		g.Post("/tools/{name}", h.restToolCall)
		g.Get("/tools/{name}", h.restToolCall)
		g.Get("/resources", h.restList(mcp.MethodResourcesList, "resources"))
		g.Get("/resources/templates", h.restList(mcp.MethodTemplatesList, "resourceTemplates"))
		g.Get("/resources/read", h.restRead)
		g.Get("/prompts", h.restList(mcp.MethodPromptsList, "prompts"))
		g.Get("/prompts/{name}", h.restPrompt)
		g.Post("/prompts/{name}", h.restPrompt)
		g.Get("/openapi.json", h.restDocument)
	})
}

// restClientInfo is the clientInfo the child sees on REST calls.
var restClientInfo = []byte(`{"name":"stdiomcp-gateway-rest","version":"1"}`)

// restRequest builds the MCP request a REST call becomes, as a 2026-07-28
// client would send it, and reads it back with the same reader as /mcp:
// nothing reaches the child that the gateway read otherwise. more is the
// params' members past _meta (a comma-separated run; may be nil).
func restRequest(method string, more []byte) (*mcp.Request, error) {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":1,"method":`)
	b.Write(jsonrpc.Quote(method))
	b.WriteString(`,"params":{"_meta":{"progressToken":1,`)
	b.Write(jsonrpc.Quote(mcp.MetaProtocolVersion))
	b.WriteByte(':')
	b.Write(jsonrpc.Quote(mcp.Modern))
	b.WriteByte(',')
	b.Write(jsonrpc.Quote(mcp.MetaClientCapabilities))
	b.WriteString(`:{},`)
	b.Write(jsonrpc.Quote(mcp.MetaClientInfo))
	b.WriteByte(':')
	b.Write(restClientInfo)
	b.WriteByte('}')
	if len(more) > 0 {
		b.WriteByte(',')
		b.Write(more)
	}
	b.WriteString(`}}`)
	msg, err := jsonrpc.Parse(b.Bytes())
	if err != nil {
		return nil, err
	}
	return mcp.Read(msg)
}

// restCaller is the bridge's view of a REST client: 2026-07-28, with no
// capabilities (it cannot be asked questions mid-call), as the front door
// authenticated it.
func (h *handlers) restCaller(r *http.Request) bridge.Caller {
	c := bridge.Caller{Modern: true, Capabilities: []byte("{}"), ClientInfo: restClientInfo, Principal: callerOf(r.Context()).owner()}
	if tr, ok := traceOf(r.Context()); ok {
		c.Meta = tr.meta()
	}
	return c
}

// pathParam is a route parameter, unescaped: chi matches on the escaped
// path when the request has one, so that /v1/tools/a%2Fb names "a/b".
func pathParam(r *http.Request, key string) (string, bool) {
	v := chi.URLParam(r, key)
	if r.URL.RawPath == "" {
		return v, true
	}
	u, err := url.PathUnescape(v)
	return u, err == nil
}

// onlyQuery refuses query parameters other than those named: a guessed
// parameter must not be silently ignored.
func onlyQuery(w http.ResponseWriter, r *http.Request, allowed ...string) (url.Values, bool) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest, "the query string cannot be read: "+err.Error()))
		return nil, false
	}
	for k, vs := range q {
		if !contains(allowed, k) {
			hint := ""
			if len(allowed) > 0 {
				hint = " (this route takes " + strings.Join(allowed, ", ") + ")"
			}
			writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest, fmt.Sprintf("unknown query parameter %q%s", clip(k), hint)))
			return nil, false
		}
		if len(vs) > 1 {
			writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest, fmt.Sprintf("query parameter %q given %d times", clip(k), len(vs))))
			return nil, false
		}
	}
	return q, true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// restBody reads a JSON object body: the arguments of a call. An empty
// body is {}.
func (h *handlers) restBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.ContentLength == 0 && len(r.TransferEncoding) == 0 {
		return []byte("{}"), true
	}
	body, ok := h.readBody(w, r)
	if !ok {
		return nil, false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return []byte("{}"), true
	}
	return body, checkObject(w, body, "the body")
}

// checkObject refuses what is not one JSON object, or has a member twice
// at any depth (through escapes or letter case too): the schema check and
// the child must read the same arguments.
func checkObject(w http.ResponseWriter, b []byte, what string) bool {
	if err := uniqueObject(b); err != nil {
		writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest, what+" must be a JSON object: "+err.Error()))
		return false
	}
	return true
}

// uniqueObject checks that b is exactly one JSON object in which no object
// has a member twice (escapes decoded).
func uniqueObject(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	tok, err := d.Token()
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if tok != json.Delim('{') {
		return errors.New("it is not an object")
	}
	if err := uniqueMembers(d, 1); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("something follows the object")
	}
	return nil
}

// maxDepth bounds the nesting uniqueMembers walks.
const maxDepth = 512

// uniqueMembers reads the rest of an object (after its '{').
func uniqueMembers(d *json.Decoder, depth int) error {
	if depth > maxDepth {
		return errors.New("nested too deeply")
	}
	seen := map[string]bool{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return fmt.Errorf("not JSON: %w", err)
		}
		key, _ := tok.(string)
		// By letter case too: a server decoding into structs with Go's
		// encoding/json takes "TEXT" for "text", which the schema check
		// would not have looked at.
		folded := strings.ToLower(strings.ToUpper(key))
		if seen[folded] {
			return fmt.Errorf("member %q appears twice (names are compared ignoring letter case)", clip(key))
		}
		seen[folded] = true
		if err := skipValue(d, depth); err != nil {
			return err
		}
	}
	if _, err := d.Token(); err != nil { // '}'
		return fmt.Errorf("not JSON: %w", err)
	}
	return nil
}

func skipValue(d *json.Decoder, depth int) error {
	tok, err := d.Token()
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	switch tok {
	case json.Delim('{'):
		return uniqueMembers(d, depth+1)
	case json.Delim('['):
		if depth+1 > maxDepth {
			return errors.New("nested too deeply")
		}
		for d.More() {
			if err := skipValue(d, depth+1); err != nil {
				return err
			}
		}
		if _, err := d.Token(); err != nil { // ']'
			return fmt.Errorf("not JSON: %w", err)
		}
	}
	return nil
}

// restTools serves GET /v1/tools from the bridge's copy of the child's
// list, showing a restricted caller only its tools.
func (h *handlers) restTools(w http.ResponseWriter, r *http.Request) {
	if _, ok := onlyQuery(w, r); !ok {
		return
	}
	list, err := h.b.Tools(r.Context())
	if err != nil {
		h.restFail(w, r, r.Context(), err)
		return
	}
	rules := callerOf(r.Context()).rules()
	var b bytes.Buffer
	b.WriteString(`{"tools":[`)
	n := 0
	for i, t := range list.Tools {
		if !rules.Unrestricted() && !rules.Allows(auth.Tool, list.Names[i]) {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.Write(t)
		n++
	}
	b.WriteString(`]}`)
	writeJSON(w, http.StatusOK, b.Bytes())
}

// maxListBytes bounds a list the gateway gathers from the child's pages.
const maxListBytes = 32 << 20

// restList serves a list of resources, templates or prompts: every page
// of it, in one array named member, filtered to what the caller may use.
func (h *handlers) restList(method, member string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, ok := onlyQuery(w, r); !ok {
			return
		}
		items, p := h.collect(w, r, method, member)
		if p != nil {
			writeProblem(w, p)
			return
		}
		if items == nil {
			return // the client is gone
		}
		var b bytes.Buffer
		b.WriteString(`{"` + member + `":[`)
		for i, it := range items {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(it)
		}
		b.WriteString(`]}`)
		writeJSON(w, http.StatusOK, b.Bytes())
	}
}

// collect gathers every page of a list, each entry as the child wrote it
// and the caller may see it: nil and no problem when the client is gone.
func (h *handlers) collect(w http.ResponseWriter, r *http.Request, method, member string) ([][]byte, *problem) {
	items := [][]byte{}
	size := 0
	var cursor []byte
	for range maxToolPages {
		var more []byte
		if cursor != nil {
			more = append([]byte(`"cursor":`), cursor...)
		}
		req, err := restRequest(method, more)
		if err != nil {
			return nil, newProblem(kindInternal, http.StatusInternalServerError, err.Error())
		}
		result, p := h.restExchange(w, r, r.Context(), req)
		if result == nil {
			return nil, p
		}
		if filter := h.answerFilter(r, method, true); filter != nil {
			// The policy's list filter reads a whole response.
			resp, err := filter(jsonrpc.NewResult([]byte("1"), result))
			if err != nil {
				e := asRPCError(err)
				return nil, problemFor(statusFor(e.Code), e)
			}
			if result, p = answerOf(resp); p != nil {
				return nil, p
			}
		}
		list := jsonrpc.Get(result, member)
		if len(list) > 0 && list[0] == '[' {
			spans, err := jsonrpc.Elements(list)
			if err != nil {
				return nil, newProblem(kindInternal, http.StatusInternalServerError, "the server's list cannot be read: "+err.Error())
			}
			for _, sp := range spans {
				items = append(items, list[sp.Start:sp.End])
				size += sp.End - sp.Start + 1
			}
		}
		if size > maxListBytes {
			return nil, newProblem(kindAnswerTooLarge, http.StatusBadGateway, fmt.Sprintf("the server's %s add up to more than %d bytes", member, maxListBytes))
		}
		next := jsonrpc.Get(result, "nextCursor")
		if s, ok := mcp.String(next); !ok || s == "" {
			break
		}
		cursor = next
	}
	return items, nil
}

// maxToolPages bounds the pages of a list gathered for one answer.
const maxToolPages = 100

// restRead serves GET /v1/resources/read?uri=...
func (h *handlers) restRead(w http.ResponseWriter, r *http.Request) {
	q, ok := onlyQuery(w, r, "uri")
	if !ok {
		return
	}
	uri := q.Get("uri")
	if uri == "" {
		writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest, "the uri query parameter is required"))
		return
	}
	req, err := restRequest(mcp.MethodResourcesRead, append([]byte(`"uri":`), jsonrpc.Quote(uri)...))
	if err != nil {
		h.restFail(w, r, r.Context(), err)
		return
	}
	h.restOnce(w, r, req, func(p *problem) *problem {
		if p.Type == problemPrefix+kindChildError && (p.Code == jsonrpc.CodeInvalidParams || p.Code == mcp.CodeLegacyNotFound) {
			// 2026-07-28 says -32602 for a resource that does not exist.
			nf := newProblem(kindNotFound, http.StatusNotFound, p.Detail)
			nf.Code, nf.Error = p.Code, p.Error
			return nf
		}
		return p
	})
}

// restPrompt serves a prompt: GET with each query parameter an argument,
// or POST with the arguments as a JSON object of strings.
func (h *handlers) restPrompt(w http.ResponseWriter, r *http.Request) {
	name, ok := pathParam(r, "name")
	if !ok {
		writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest, "the prompt name in the path is not validly escaped"))
		return
	}
	var args []byte
	if r.Method == http.MethodGet {
		q, ok := onlyQuery(w, r, queryKeys(r)...)
		if !ok {
			return
		}
		m := map[string]string{}
		for k := range q {
			m[k] = q.Get(k)
		}
		args = mustJSON(m)
	} else {
		if _, ok := onlyQuery(w, r); !ok {
			return
		}
		if args, ok = h.restBody(w, r); !ok {
			return
		}
		members, err := jsonrpc.Members(args)
		if err == nil {
			for _, m := range members {
				if v := args[m.Value.Start:m.Value.End]; len(v) == 0 || v[0] != '"' {
					writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest, "a prompt's arguments are strings: "+quote(clip(m.Key))+" is not"))
					return
				}
			}
		}
	}
	more := append(append([]byte(`"name":`), jsonrpc.Quote(name)...), `,"arguments":`...)
	req, err := restRequest(mcp.MethodPromptsGet, append(more, args...))
	if err != nil {
		h.restFail(w, r, r.Context(), err)
		return
	}
	h.restOnce(w, r, req, func(p *problem) *problem {
		if p.Type != problemPrefix+kindChildError || p.Code != jsonrpc.CodeInvalidParams || h.hasPrompt(w, r, name) {
			return p
		}
		nf := newProblem(kindNotFound, http.StatusNotFound, fmt.Sprintf("the server has no prompt %s (GET /v1/prompts lists them)", quote(clip(name))))
		nf.Code, nf.Error = p.Code, p.Error
		return nf
	})
}

// hasPrompt reports whether the child lists the prompt, when it can tell
// (invalid params may mean bad arguments to a prompt that exists).
func (h *handlers) hasPrompt(w http.ResponseWriter, r *http.Request, name string) bool {
	items, _ := h.collect(w, r, mcp.MethodPromptsList, "prompts")
	if items == nil {
		return true
	}
	for _, it := range items {
		if n, _ := mcp.String(jsonrpc.Get(it, "name")); n == name {
			return true
		}
	}
	return false
}

// queryKeys are the query's parameter names, each allowed once.
func queryKeys(r *http.Request) []string {
	var keys []string
	for k := range r.URL.Query() {
		keys = append(keys, k)
	}
	return keys
}

// restOnce makes one call and answers with its result as it came, or a
// problem (passed through edit, when there is one).
func (h *handlers) restOnce(w http.ResponseWriter, r *http.Request, req *mcp.Request, edit func(*problem) *problem) {
	a := &audited{ResponseWriter: w}
	defer h.audit(r, req, a, 0, time.Now())
	w = a
	if !h.authorize(w, r, req) {
		return
	}
	result, p := h.restExchange(w, r, r.Context(), req)
	if p == nil && result != nil {
		p = inputRequired(result)
	}
	switch {
	case p != nil && edit != nil:
		writeProblem(w, edit(p))
	case p != nil:
		writeProblem(w, p)
	case result != nil:
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(h.opts.ClientTimeout))
		writeJSON(w, http.StatusOK, result)
	}
}

// restExchange makes one call and waits for its end: the result, or the
// problem to answer with; neither when the client is gone.
func (h *handlers) restExchange(w http.ResponseWriter, r *http.Request, ctx context.Context, req *mcp.Request) ([]byte, *problem) {
	c, err := h.b.Call(ctx, req, h.restCaller(r))
	if err != nil {
		return nil, h.restProblem(w, r, ctx, err)
	}
	for {
		<-c.Wake()
		_, resp, done, err := c.Take()
		if !done {
			continue // progress: only a tool call's stream shows it
		}
		if err != nil {
			return nil, h.restProblem(w, r, ctx, err)
		}
		return answerOf(resp)
	}
}

// answerOf splits a response into its result, or the child's error as a
// problem.
func answerOf(resp []byte) ([]byte, *problem) {
	msg, err := jsonrpc.Parse(resp)
	if err != nil {
		return nil, newProblem(kindInternal, http.StatusInternalServerError, "the server's answer cannot be read: "+err.Error())
	}
	if msg.Error != nil {
		return nil, childProblem(msg.Error)
	}
	return msg.Result, nil
}

// restDocument serves /v1/openapi.json: the child's tools as an OpenAPI
// document, built once per tool list, or for a restricted caller, from
// the tools it may call.
func (h *handlers) restDocument(w http.ResponseWriter, r *http.Request) {
	if _, ok := onlyQuery(w, r); !ok {
		return
	}
	list, err := h.b.Tools(r.Context())
	if err != nil {
		h.restFail(w, r, r.Context(), err)
		return
	}
	const title = "Tools of the MCP server behind this gateway"
	var doc []byte
	if rules := callerOf(r.Context()).rules(); rules.Unrestricted() {
		c := h.catalogs.of(list)
		c.docOnce.Do(func() { c.doc, c.docErr = toolsDocument(list.Tools, title) })
		doc, err = c.doc, c.docErr
	} else {
		var mine []json.RawMessage
		for i, t := range list.Tools {
			if rules.Allows(auth.Tool, list.Names[i]) {
				mine = append(mine, t)
			}
		}
		doc, err = toolsDocument(mine, title)
	}
	if err != nil {
		writeProblem(w, newProblem(kindInternal, http.StatusInternalServerError, "the tools' document could not be built: "+err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, doc)
}
