package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
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
		return notJSON(err)
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
			return notJSON(err)
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
		return notJSON(err)
	}
	return nil
}

func skipValue(d *json.Decoder, depth int) error {
	tok, err := d.Token()
	if err != nil {
		return notJSON(err)
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
			return notJSON(err)
		}
	}
	return nil
}

// queryKeys are the query's parameter names, each allowed once.
func queryKeys(r *http.Request) []string {
	var keys []string
	for k := range r.URL.Query() {
		keys = append(keys, k)
	}
	return keys
}

// notJSON says what is wrong with JSON the decoder stopped at.
func notJSON(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("not JSON: it ends early")
	}
	return fmt.Errorf("not JSON: %w", err)
}
