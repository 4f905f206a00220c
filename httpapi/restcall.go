package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stdiomcp/gateway/auth"
	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/detach"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// bigArguments are arguments large enough that checking them against the
// schema is let run only a few at a time (see handlers.bigChecks).
const bigArguments = 1 << 20

// errCallTimeout is why a REST call whose own timeout passed ends: a
// timeout, to the bridge's count of endings too.
var errCallTimeout = jsonrpc.GatewayError(jsonrpc.CodeTimeout, "timeout", "the call's timeout passed")

// restToolCall serves POST /v1/tools/{name} (the body is the arguments)
// and its GET form for read-only tools (?arguments=<JSON>), answering with
// the result as JSON, or as an SSE stream of progress then the result when
// the client accepts one. The arguments are checked against the tool's
// input schema before the child sees them.
func (h *handlers) restToolCall(w http.ResponseWriter, r *http.Request) {
	name, ok := pathParam(r, "name")
	if !ok {
		writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest, "the tool name in the path is not validly escaped, or not UTF-8 once unescaped"))
		return
	}
	get := r.Method == http.MethodGet
	allowed := []string{"timeout"}
	if get {
		allowed = append(allowed, "arguments")
	}
	q, ok := onlyQuery(w, r, allowed...)
	if !ok {
		return
	}
	timeout, ok := h.callTimeout(w, q.Get("timeout"), q.Has("timeout"))
	if !ok {
		return
	}
	var args []byte
	what := "the body"
	if get {
		what = "the arguments query parameter"
		args = []byte(q.Get("arguments"))
		if len(args) == 0 {
			args = []byte("{}")
		}
		if !shapeOK(w, args, what) {
			return
		}
	} else if args, ok = h.restBody(w, r); !ok {
		return
	}
	more := append(append([]byte(`"name":`), jsonrpc.Quote(name)...), `,"arguments":`...)
	req, err := restRequest(mcp.MethodToolsCall, append(more, args...))
	if err != nil {
		writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest, err.Error()))
		return
	}
	a := newAudited(w, r)
	defer h.auditAtEnd(r, req, a, len(args), time.Now())
	w = a
	if !h.authorize(w, r, req) {
		return
	}
	ctx := r.Context()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, errCallTimeout)
		defer detach.Later(w, cancel)
	}
	list, ok := h.toolList(w, r, ctx)
	if !ok {
		return
	}
	t := h.catalogs.of(list).tools[name]
	if t == nil {
		writeProblem(w, newProblem(kindUnknownTool, http.StatusNotFound, fmt.Sprintf("the server has no tool %s (GET /v1/tools lists them)", quote(clip(name)))))
		return
	}
	if get && !t.readOnly {
		w.Header().Set("Allow", http.MethodPost)
		writeProblem(w, newProblem(kindNotReadOnly, http.StatusMethodNotAllowed,
			fmt.Sprintf("the tool %s does not declare annotations.readOnlyHint, so it is called with POST only", quote(clip(name)))))
		return
	}
	if !h.checkArguments(w, r, ctx, args, what, t, name) {
		return
	}
	c, err := h.b.Call(ctx, req, h.restCaller(r))
	if err != nil {
		h.restFail(w, r, ctx, err)
		return
	}
	if wantsStream(r.Header.Get("Accept")) {
		h.restStream(w, r, ctx, c)
		return
	}
	for {
		<-c.Wake()
		_, resp, done, err := c.Take()
		if !done {
			continue // progress has no place in a JSON answer
		}
		if err != nil {
			h.restFail(w, r, ctx, err)
			return
		}
		result, p := toolAnswer(resp)
		if p != nil {
			writeProblem(w, p)
			return
		}
		writeAnswer(w, http.StatusOK, result, h.opts.ClientTimeout)
		return
	}
}

// wantsStream reports whether Accept prefers text/event-stream, named
// itself, to JSON: a wildcard (curl sends */*) gets JSON, and so does a
// client that weighs application/json higher.
func wantsStream(accept string) bool {
	stream, plain := 0.0, 0.0
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if q, err = strconv.ParseFloat(v, 64); err != nil {
				continue
			}
		}
		switch mt {
		case "text/event-stream":
			stream = max(stream, q)
		case "application/json", "application/*", "*/*":
			plain = max(plain, q)
		}
	}
	return stream > 0 && stream >= plain
}

// callTimeout reads a call's own timeout: at most the server's longest
// call. None given is none; an empty one is refused like any bad one.
func (h *handlers) callTimeout(w http.ResponseWriter, s string, given bool) (time.Duration, bool) {
	if !given {
		return 0, true
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 || d > h.opts.MaxCallDuration {
		writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest,
			fmt.Sprintf("timeout must be a duration above 0 and at most %v (such as 1500ms or 10s), not %s", h.opts.MaxCallDuration, quote(clip(s)))))
		return 0, false
	}
	return d, true
}

// toolAnswer reads a tool call's response: its result, or the problem it
// amounts to (the child's error, the tool's own error, a question the
// REST API cannot answer).
func toolAnswer(resp []byte) ([]byte, *problem) {
	result, p := answerOf(resp)
	if p != nil {
		return nil, p
	}
	if p := inputRequired(result); p != nil {
		return nil, p
	}
	if string(jsonrpc.Get(result, "isError")) == "true" {
		p := newProblem(kindToolError, http.StatusUnprocessableEntity, "the tool ran and reported an error; its result is in result")
		p.Result = result
		return nil, p
	}
	return result, nil
}

// inputRequired is the problem for a 2026-07-28 result that asks the
// client for input; nil for any other result.
func inputRequired(result []byte) *problem {
	if rt, _ := mcp.String(jsonrpc.Get(result, "resultType")); rt != "input_required" {
		return nil
	}
	p := newProblem(kindInputRequired, http.StatusUnprocessableEntity,
		"the server asks the client for input (elicitation, sampling or roots), which a REST call cannot give; use an MCP client on /mcp")
	p.InputRequests = jsonrpc.Get(result, "inputRequests")
	return p
}

// restStream answers a tool call with SSE: a progress event per progress
// notification, then result or error, then the end.
func (h *handlers) restStream(w http.ResponseWriter, r *http.Request, ctx context.Context, c streamed) {
	progress := func(sse *sseWriter, note []byte) error {
		if data, ok := progressData(note); ok {
			return sse.named("progress", data)
		}
		return nil
	}
	h.relay(w, r, c, nil, progress, func(sse *sseWriter, resp []byte, err error) bool {
		if err != nil {
			if p := h.restProblem(w, r, ctx, err); p != nil {
				gatewayError(w, p.Code, p.Detail)
				return sse.named("error", p.body()) == nil
			}
			return false
		}
		result, p := toolAnswer(resp)
		if p != nil {
			if p.Code != 0 {
				childError(w, p.Code)
			}
			return sse.named("error", p.body()) == nil
		}
		return sse.named("result", result) == nil
	})
}

// progressData is the data of a progress event: the notification's
// progress, total and message, as the child wrote them.
func progressData(note []byte) ([]byte, bool) {
	m, err := jsonrpc.Parse(note)
	if err != nil || m.Method != mcp.NoteProgress {
		return nil, false
	}
	// The event is the REST API's own (ProgressEvent in openapi.yaml):
	// what the child sent that is not of its member's type is left out,
	// and a notification without a number for progress is no event.
	progress := jsonrpc.Get(m.Params, "progress")
	if !isNumber(progress) {
		return nil, false
	}
	var b bytes.Buffer
	b.WriteString(`{"progress":`)
	b.Write(progress)
	if total := jsonrpc.Get(m.Params, "total"); isNumber(total) {
		b.WriteString(`,"total":`)
		b.Write(total)
	}
	if msg := jsonrpc.Get(m.Params, "message"); len(msg) > 0 && msg[0] == '"' {
		b.WriteString(`,"message":`)
		b.Write(msg)
	}
	b.WriteByte('}')
	return b.Bytes(), true
}

// isNumber reports whether v, a JSON value, is a number.
func isNumber(v []byte) bool {
	return len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9')
}

// restProblem is the problem a call that ended with err answers with; nil
// when the client is gone and nothing can reach it.
func (h *handlers) restProblem(w http.ResponseWriter, r *http.Request, ctx context.Context, err error) *problem {
	switch {
	case errors.Is(context.Cause(ctx), errCallTimeout):
		p := newProblem(kindTimeout, http.StatusGatewayTimeout, "the call did not end within the timeout the request gave; the server was told to cancel it, if it had it (a call still waiting in the queue never reaches it)")
		p.Code, p.Reason = jsonrpc.CodeTimeout, "timeout"
		return p
	case errors.Is(context.Cause(r.Context()), errCredentialsEnded):
		if h.opts.Auth != nil {
			w.Header().Set("WWW-Authenticate", h.opts.Auth.Challenge(&auth.Error{Status: http.StatusUnauthorized, Code: "invalid_token", Description: "the credentials stopped being valid during the request"}))
		}
		return problemFor(http.StatusUnauthorized, jsonrpc.GatewayError(jsonrpc.CodeUnauthorized, "credentials_ended", context.Cause(r.Context()).Error()))
	case r.Context().Err() != nil:
		return nil
	}
	e := asRPCError(err)
	return problemFor(statusFor(e.Code), e)
}

// toolList reads the child's tools for a REST request, or answers with
// the problem of why it cannot: the child's error answer to tools/list is
// a child error (502: the gateway's own request failed), a list that does
// not come in time a timeout.
func (h *handlers) toolList(w http.ResponseWriter, r *http.Request, ctx context.Context) (*bridge.ToolList, bool) {
	list, err := h.b.Tools(ctx)
	if err == nil {
		return list, true
	}
	var le *bridge.ListError
	switch {
	case errors.As(err, &le):
		p := childProblem(le.Raw)
		p.Status, p.Detail = http.StatusBadGateway, "the server could not list its tools: "+p.Detail
		writeProblem(w, p)
	case errors.Is(context.Cause(ctx), errCallTimeout):
		p := newProblem(kindTimeout, http.StatusGatewayTimeout, "the call's timeout passed while the server's tool list was read; no call was sent")
		p.Code, p.Reason = jsonrpc.CodeTimeout, "timeout"
		writeProblem(w, p)
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		p := newProblem(kindTimeout, http.StatusGatewayTimeout, "the server did not list its tools in time")
		p.Code = jsonrpc.CodeTimeout
		writeProblem(w, p)
	default:
		h.restFail(w, r, ctx, err)
	}
	return nil, false
}

// restFail answers with the problem err amounts to, if anyone is there.
func (h *handlers) restFail(w http.ResponseWriter, r *http.Request, ctx context.Context, err error) {
	if p := h.restProblem(w, r, ctx, err); p != nil {
		writeProblem(w, p)
	}
}
