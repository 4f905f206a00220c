package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// problemPrefix starts every problem type: a problem's kind is a stable
// name a client can switch on (RFC 9457 §3.1.1 lets a type be any URI).
const problemPrefix = "urn:stdiomcp:problem:"

// Problem kinds, and the titles they are given.
const (
	kindBadRequest       = "bad-request"
	kindInvalidArguments = "invalid-arguments"
	kindUnsupportedMedia = "unsupported-media-type"
	kindTooLarge         = "too-large"
	kindUnauthorized     = "unauthorized"
	kindForbidden        = "forbidden"
	kindRateLimited      = "rate-limited"
	kindUnknownTool      = "unknown-tool"
	kindNotFound         = "not-found"
	kindNotReadOnly      = "not-read-only"
	kindMethodNotAllowed = "method-not-allowed"
	kindToolError        = "tool-error"
	kindInputRequired    = "input-required"
	kindChildError       = "child-error"
	kindTimeout          = "timeout"
	kindUnavailable      = "unavailable"
	kindAnswerTooLarge   = "answer-too-large"
	kindBadAnswer        = "bad-answer"
	kindInternal         = "internal"
)

var problemTitles = map[string]string{
	kindBadRequest:       "The request is malformed",
	kindInvalidArguments: "The arguments do not match the tool's input schema",
	kindUnsupportedMedia: "The body must be JSON",
	kindTooLarge:         "The request body is too large",
	kindUnauthorized:     "Credentials are missing or not valid",
	kindForbidden:        "Not allowed",
	kindRateLimited:      "Too many requests",
	kindUnknownTool:      "No such tool",
	kindNotFound:         "Not found",
	kindNotReadOnly:      "Only read-only tools can be called with GET",
	kindMethodNotAllowed: "The route does not take this method",
	kindToolError:        "The tool reported an error",
	kindInputRequired:    "The tool needs input that the REST API cannot give",
	kindChildError:       "The server answered with an error",
	kindTimeout:          "The call timed out",
	kindUnavailable:      "The server is unavailable",
	kindAnswerTooLarge:   "The server's answer is too large",
	kindBadAnswer:        "The server's answer is not valid JSON-RPC",
	kindInternal:         "Internal error",
}

// problem is an application/problem+json body. Raw members carry the
// child's bytes as they came (a tool's error result, its JSON-RPC error).
type problem struct {
	Type          string          `json:"type"`
	Title         string          `json:"title"`
	Status        int             `json:"status"`
	Detail        string          `json:"detail,omitempty"`
	Code          int             `json:"code,omitempty"`
	Reason        string          `json:"reason,omitempty"`
	Errors        []argumentError `json:"errors,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	InputRequests json.RawMessage `json:"inputRequests,omitempty"`
	Error         json.RawMessage `json:"error,omitempty"`

	errorMadeHere bool // Error is the gateway's own, not the child's
}

// argumentError is one way the arguments fail the tool's schema: where in
// the arguments (a JSON pointer) and what is wrong there.
type argumentError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func newProblem(kind string, status int, detail string) *problem {
	return &problem{Type: problemPrefix + kind, Title: problemTitles[kind], Status: status, Detail: detail}
}

func (p *problem) body() []byte {
	// The child's members go in as it wrote them: json.Marshal would
	// compact them and escape <, > and &.
	q := *p
	q.Result, q.InputRequests, q.Error = nil, nil, nil
	b := mustJSON(q)
	b = b[:len(b)-1]
	for _, m := range []struct {
		key string
		raw json.RawMessage
	}{{"result", p.Result}, {"inputRequests", p.InputRequests}, {"error", p.Error}} {
		if len(m.raw) > 0 {
			b = append(b, `,"`+m.key+`":`...)
			b = append(b, m.raw...)
		}
	}
	return append(b, '}')
}

// writeProblem answers with p; the audit sees who made it and the JSON-RPC
// code behind it. A tool's own error and a question the REST API cannot
// answer are results the child gave, as they are on /mcp.
func writeProblem(w http.ResponseWriter, p *problem) {
	switch {
	case p.Error != nil && !p.errorMadeHere: // the child's JSON-RPC error
		childError(w, p.Code)
	case p.Code == 0 && (p.Type == problemPrefix+kindToolError || p.Type == problemPrefix+kindInputRequired):
	default:
		gatewayError(w, p.Code, p.Detail)
	}
	if p.Status == http.StatusServiceUnavailable || p.Status == http.StatusTooManyRequests {
		if w.Header().Get("Retry-After") == "" {
			w.Header().Set("Retry-After", "1")
		}
	}
	body := p.body()
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	writeLast(w, body, 0)
	sendNow(w)
}

// problemFor turns an error the gateway made, answered with status, into
// a problem: the kind follows from the status, the reason word and the
// message from the error.
func problemFor(status int, e *jsonrpc.Error) *problem {
	kind := kindInternal
	switch status {
	case http.StatusBadRequest, http.StatusRequestTimeout:
		kind = kindBadRequest
	case http.StatusUnauthorized:
		kind = kindUnauthorized
	case http.StatusForbidden:
		kind = kindForbidden
	case http.StatusNotFound:
		kind = kindNotFound
	case http.StatusRequestEntityTooLarge:
		kind = kindTooLarge
	case http.StatusUnsupportedMediaType:
		kind = kindUnsupportedMedia
	case http.StatusTooManyRequests:
		kind = kindRateLimited
	case http.StatusServiceUnavailable:
		kind = kindUnavailable
	case http.StatusGatewayTimeout:
		kind = kindTimeout
	case http.StatusBadGateway:
		kind = kindAnswerTooLarge
		if e.Code == jsonrpc.CodeBadAnswer {
			kind = kindBadAnswer
		}
	}
	p := newProblem(kind, status, e.Message)
	p.Code = e.Code
	p.Reason, _ = mcp.String(jsonrpc.Get(e.Data, "reason"))
	if e.Code == mcp.CodeMissingCapability {
		// As a child's refusal comes: its error object, with the
		// capabilities it needs in its data.
		if b, err := json.Marshal(e); err == nil {
			p.Error, p.errorMadeHere = b, true
		}
	}
	return needsInput(p)
}

// needsInput turns a refusal for want of a client capability (a legacy
// child's question the gateway could not relay, or a 2026-07-28 child
// that checks what the client declared) into input-required: a REST call
// declares none, since it cannot answer questions.
func needsInput(p *problem) *problem {
	if p.Code != mcp.CodeMissingCapability {
		return p
	}
	p.Type, p.Title, p.Status = problemPrefix+kindInputRequired, problemTitles[kindInputRequired], http.StatusUnprocessableEntity
	p.Detail += " (a REST call cannot answer the server's questions; call the tool with an MCP client on /mcp)"
	return p
}

// childProblem is the problem for a JSON-RPC error the child answered
// with: its error object goes in whole, the status says what kind of
// failure it is.
func childProblem(errObj []byte) *problem {
	code, _ := strconv.Atoi(string(jsonrpc.Get(errObj, "code")))
	msg, _ := mcp.String(jsonrpc.Get(errObj, "message"))
	status := http.StatusBadGateway
	switch code {
	case jsonrpc.CodeInvalidParams:
		status = http.StatusBadRequest
	case jsonrpc.CodeMethodNotFound, mcp.CodeLegacyNotFound:
		status = http.StatusNotFound
	}
	p := newProblem(kindChildError, status, msg)
	p.Code = code
	p.Error = json.RawMessage(errObj)
	return needsInput(p)
}

// restWriter marks a response as the REST API's: errors written by the
// middleware every route shares (origin, credentials, limits) become
// problems there instead of JSON-RPC errors.
type restWriter struct{ http.ResponseWriter }

func (rw restWriter) Unwrap() http.ResponseWriter { return rw.ResponseWriter }

// restAnswers also marks every REST answer as one no browser may read as
// anything but its Content-Type, nor show inside another site's frame: a
// browser may open a GET route as a page, and the child's text is in it.
func restAnswers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["X-Content-Type-Options"] = []string{"nosniff"}
		h["Content-Security-Policy"] = []string{"frame-ancestors 'none'"}
		next.ServeHTTP(restWriter{w}, r)
	})
}

// isREST reports whether w, or a writer it wraps, is a restWriter.
func isREST(w http.ResponseWriter) bool {
	for {
		switch x := w.(type) {
		case restWriter:
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return false
		}
	}
}
