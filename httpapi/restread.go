package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"
	"time"

	"github.com/stdiomcp/gateway/auth"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// restTools serves GET /v1/tools from the bridge's copy of the child's
// list, showing a restricted caller only its tools.
func (h *handlers) restTools(w http.ResponseWriter, r *http.Request) {
	if _, ok := onlyQuery(w, r); !ok {
		return
	}
	list, ok := h.toolList(w, r, r.Context())
	if !ok {
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
	writeAnswer(w, http.StatusOK, b.Bytes(), h.opts.ClientTimeout)
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
		// Up to tens of megabytes: a client that takes none of it for
		// the timeout is cut off, as from a call's answer.
		b.WriteString(`]}`)
		writeAnswer(w, http.StatusOK, b.Bytes(), h.opts.ClientTimeout)
	}
}

// collect gathers every page of a list, each entry as the child wrote it
// and the caller may see it: nil and no problem when the client is gone.
func (h *handlers) collect(w http.ResponseWriter, r *http.Request, method, member string) ([][]byte, *problem) {
	items := [][]byte{}
	size := 0
	var cursor []byte
	seen := map[string]bool{}
	for page := 1; ; page++ {
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
		rawNext := jsonrpc.Get(result, "nextCursor")
		next, _ := mcp.String(rawNext)
		if seen[next] {
			// A child that ignores the cursor sends a page it sent
			// before: the list ends before it.
			h.log.WarnContext(r.Context(), "the child's list gave a cursor it had given before; the list is cut before that page", "method", method, "pages", page-1, "items", len(items))
			break
		}
		seen[next] = true
		list := jsonrpc.Get(result, member)
		if len(list) > 0 && string(list) != "null" {
			// The child's answer is not a list: saying it has nothing
			// would be saying what it did not.
			spans, err := jsonrpc.Elements(list)
			if err != nil {
				return nil, problemFor(http.StatusBadGateway, jsonrpc.GatewayError(jsonrpc.CodeBadAnswer, "bad_answer",
					fmt.Sprintf("the server's %s result has %s that is not an array: %v", method, member, err)))
			}
			for _, sp := range spans {
				items = append(items, list[sp.Start:sp.End])
				size += sp.End - sp.Start + 1
			}
		}
		if size > maxListBytes {
			return nil, newProblem(kindAnswerTooLarge, http.StatusBadGateway, fmt.Sprintf("the server's %s add up to more than %d bytes", member, maxListBytes))
		}
		if next == "" {
			break
		}
		if page == maxListPages {
			h.log.WarnContext(r.Context(), "the child's list has more pages than the gateway reads; the list is cut after them", "method", method, "pages", page, "items", len(items))
			break
		}
		cursor = rawNext // sent back as the child wrote it
	}
	return items, nil
}

// maxListPages bounds the pages of a list gathered for one answer.
const maxListPages = 100

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
	h.restOnce(w, r, req, nil, func(p *problem) *problem {
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
		writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest, "the prompt name in the path is not validly escaped, or not UTF-8 once unescaped"))
		return
	}
	var args []byte
	var check func(http.ResponseWriter) bool
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
		check = func(w http.ResponseWriter) bool {
			if !h.checkArguments(w, r, r.Context(), args, "the body", nil, name) {
				return false
			}
			members, err := jsonrpc.Members(args)
			if err == nil {
				for _, m := range members {
					if v := args[m.Value.Start:m.Value.End]; len(v) == 0 || v[0] != '"' {
						writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest, "a prompt's arguments are strings: "+quote(clip(m.Key))+" is not"))
						return false
					}
				}
			}
			return true
		}
	}
	more := append(append([]byte(`"name":`), jsonrpc.Quote(name)...), `,"arguments":`...)
	req, err := restRequest(mcp.MethodPromptsGet, append(more, args...))
	if err != nil {
		h.restFail(w, r, r.Context(), err)
		return
	}
	h.restOnce(w, r, req, check, func(p *problem) *problem {
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

// restOnce makes one call and answers with its result as it came, or a
// problem (passed through edit, when there is one). Once the caller may
// make it, check, when there is one, may refuse it instead.
func (h *handlers) restOnce(w http.ResponseWriter, r *http.Request, req *mcp.Request, check func(http.ResponseWriter) bool, edit func(*problem) *problem) {
	a := newAudited(w, r)
	defer h.audit(r, req, a, 0, time.Now())
	w = a
	if !h.authorize(w, r, req) || (check != nil && !check(w)) {
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
		writeAnswer(w, http.StatusOK, result, h.opts.ClientTimeout)
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
	if len(msg.Result) == 0 || msg.Result[0] != '{' {
		// Every MCP result is an object; the REST API answers with it.
		return nil, problemFor(http.StatusBadGateway, jsonrpc.GatewayError(jsonrpc.CodeBadAnswer, "bad_answer",
			"the server's result is not a JSON object: "+clip(string(msg.Result))))
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
	list, ok := h.toolList(w, r, r.Context())
	if !ok {
		return
	}
	// One document per set of tools a caller may see, cached with the
	// list it was built from.
	rules := callerOf(r.Context()).rules()
	tools, key := list.Tools, "" // "": every tool
	if !rules.Unrestricted() {
		tools = nil
		names := sha256.New()
		for i, t := range list.Tools {
			if rules.Allows(auth.Tool, list.Names[i]) {
				tools = append(tools, t)
				// Each name with its length first: no two sets of
				// names write the same bytes.
				names.Write(binary.AppendUvarint(nil, uint64(len(list.Names[i]))))
				names.Write([]byte(list.Names[i]))
			}
		}
		key = "some:" + string(names.Sum(nil))
	}
	doc, err := h.catalogs.of(list).document(key, tools)
	if err != nil {
		writeProblem(w, newProblem(kindInternal, http.StatusInternalServerError, "the tools' document could not be built: "+err.Error()))
		return
	}
	writeAnswer(w, http.StatusOK, doc, h.opts.ClientTimeout)
}
