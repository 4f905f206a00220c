package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// onlyQuery refuses query parameters other than those named: a guessed
// parameter must not be silently ignored.
func onlyQuery(w http.ResponseWriter, r *http.Request, allowed ...string) (url.Values, bool) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest, "the query string cannot be read: "+err.Error()))
		return nil, false
	}
	for k, vs := range q {
		if !slices.Contains(allowed, k) {
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
		if !utf8.ValidString(k) || !utf8.ValidString(vs[0]) {
			// JSON would carry it as U+FFFD: another name, URI or
			// argument than the one sent, and the same as another's.
			writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest, fmt.Sprintf("query parameter %q is not valid UTF-8 once unescaped", clip(k))))
			return nil, false
		}
	}
	return q, true
}

// restBody reads a JSON object body: the arguments of a call. An empty
// body is {}. Only its shape is checked here (see objectShape).
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
	return body, shapeOK(w, body, "the body")
}

// shapeOK refuses what is not exactly one JSON object.
func shapeOK(w http.ResponseWriter, b []byte, what string) bool {
	if err := objectShape(b); err != nil {
		writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest, what+" must be a JSON object: "+err.Error()))
		return false
	}
	return true
}

// checkArguments runs scanArguments then, for a tool with an input
// schema, the schema check, refusing what either finds. Large arguments
// take the checks tens of bytes per byte: few are checked at once, so
// that many cannot exhaust memory together; the call is not held to it.
func (h *handlers) checkArguments(w http.ResponseWriter, r *http.Request, ctx context.Context, args []byte, what string, tool *toolEntry, name string) bool {
	if len(args) > bigArguments {
		select {
		case h.bigChecks <- struct{}{}:
			defer func() { <-h.bigChecks }()
		case <-ctx.Done():
			h.restFail(w, r, ctx, ctx.Err())
			return false
		}
	}
	var decl *declaredNames
	if tool != nil {
		decl = h.catalogs.declared(tool)
	}
	if err := scanArguments(args, decl); err != nil {
		msg := what + " must be a JSON object: " + err.Error()
		var ce *caseError
		if errors.As(err, &ce) {
			msg = ce.msg
		}
		writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest, msg))
		return false
	}
	if tool == nil {
		return true
	}
	s := h.catalogs.inputSchema(name, tool)
	if s == nil {
		return true
	}
	failures, err := validateArguments(s, args)
	if errors.Is(err, errSchemaCheck) {
		h.log.ErrorContext(r.Context(), "checking a tool's arguments failed", "tool", clip(name), "err", err)
		writeProblem(w, newProblem(kindInternal, http.StatusInternalServerError, err.Error()))
		return false
	}
	if err != nil {
		writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest, err.Error()))
		return false
	}
	if failures != nil {
		p := newProblem(kindInvalidArguments, http.StatusBadRequest, fmt.Sprintf("the arguments do not match the input schema of %s", quote(clip(name))))
		p.Errors = failures
		writeProblem(w, p)
		return false
	}
	return true
}

// foldName is a name as Go's encoding/json matches it: names whose
// foldings are equal are equal to it ignoring case (bytes.EqualFold). ASCII
// letters fold to upper case, any other rune to the least of those it
// folds with (unicode.SimpleFold): "ſ" to "S", but "İ" to itself.
func foldName(s string) string {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		switch {
		case 'a' <= r && r <= 'z':
			b = append(b, byte(r-('a'-'A')))
		case r < utf8.RuneSelf:
			b = append(b, byte(r))
		default:
			b = utf8.AppendRune(b, leastFold(r))
		}
	}
	return string(b)
}

// leastFold is the least rune of r's simple case-folding orbit.
func leastFold(r rune) rune {
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return least
}

func pairOf(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// queryKeys are the query's parameter names, each allowed once.
func queryKeys(r *http.Request) []string {
	var keys []string
	for k := range r.URL.Query() {
		keys = append(keys, k)
	}
	return keys
}
