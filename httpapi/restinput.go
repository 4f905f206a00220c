package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
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
func (h *handlers) restBody(w http.ResponseWriter, r *http.Request) ([]byte, [][2]string, bool) {
	if r.ContentLength == 0 && len(r.TransferEncoding) == 0 {
		return []byte("{}"), nil, true
	}
	body, ok := h.readBody(w, r)
	if !ok {
		return nil, nil, false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return []byte("{}"), nil, true
	}
	twins, ok := checkObject(w, body, "the body")
	return body, twins, ok
}

// checkObject refuses what is not one JSON object, or has a member twice
// at any depth (through escapes too), or a number the schema check cannot
// afford: the schema check and the child must read the same arguments. It
// returns the pairs of members that differ only by letter case, which the
// caller refuses unless the tool's schema names both (see caseTwins).
func checkObject(w http.ResponseWriter, b []byte, what string) ([][2]string, bool) {
	sc := &objectScan{}
	if err := sc.object(b); err != nil {
		writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest, what+" must be a JSON object: "+err.Error()))
		return nil, false
	}
	return sc.twins, true
}

// objectScan walks a JSON object, token by token.
type objectScan struct {
	twins [][2]string // members of one object whose names differ only by letter case
}

// object checks that b is exactly one JSON object.
func (sc *objectScan) object(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	tok, err := d.Token()
	if err != nil {
		return notJSON(err)
	}
	if tok != json.Delim('{') {
		return errors.New("it is not an object")
	}
	if err := sc.members(d, 1); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("something follows the object")
	}
	return nil
}

// maxDepth bounds the nesting the scan walks.
const maxDepth = 512

// members reads the rest of an object (after its '{').
func (sc *objectScan) members(d *json.Decoder, depth int) error {
	if depth > maxDepth {
		return errors.New("nested too deeply")
	}
	seen := map[string]bool{}
	folds := map[string]string{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return notJSON(err)
		}
		key, _ := tok.(string)
		if seen[key] {
			return fmt.Errorf("member %q appears twice", clip(key))
		}
		seen[key] = true
		// A server decoding into structs with Go's encoding/json takes
		// "TEXT" for "text": the pair is reported (see caseTwins).
		folded := strings.ToLower(strings.ToUpper(key))
		if other, ok := folds[folded]; ok {
			sc.twins = append(sc.twins, [2]string{other, key})
		} else {
			folds[folded] = key
		}
		if err := sc.value(d, depth); err != nil {
			return err
		}
	}
	if _, err := d.Token(); err != nil { // '}'
		return notJSON(err)
	}
	return nil
}

func (sc *objectScan) value(d *json.Decoder, depth int) error {
	tok, err := d.Token()
	if err != nil {
		return notJSON(err)
	}
	switch tok := tok.(type) {
	case json.Delim:
		if tok == '{' {
			return sc.members(d, depth+1)
		}
		if depth+1 > maxDepth {
			return errors.New("nested too deeply")
		}
		for d.More() {
			if err := sc.value(d, depth+1); err != nil {
				return err
			}
		}
		if _, err := d.Token(); err != nil { // ']'
			return notJSON(err)
		}
	case json.Number:
		return checkNumber(string(tok))
	}
	return nil
}

// Numbers the schema check takes as exact rationals (math/big): a huge
// exponent costs it seconds, or fails it. No float64 or int64 comes near.
const (
	maxNumberDigits   = 1000
	maxNumberExponent = 1000
)

func checkNumber(n string) error {
	mantissa, exp, hasExp := strings.Cut(strings.ToLower(n), "e")
	if len(mantissa) > maxNumberDigits {
		return fmt.Errorf("a number has more than %d digits", maxNumberDigits)
	}
	if hasExp {
		e, err := strconv.Atoi(exp)
		if err != nil || e > maxNumberExponent || e < -maxNumberExponent {
			return fmt.Errorf("a number's exponent is beyond ±%d", maxNumberExponent)
		}
	}
	return nil
}

// caseTwins refuses members that differ only by letter case, unless the
// tool's schema names both: then each is an argument of its own.
func caseTwins(w http.ResponseWriter, twins [][2]string, declared func(string) bool) bool {
	for _, t := range twins {
		if declared == nil || !declared(t[0]) || !declared(t[1]) {
			writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest, fmt.Sprintf(
				"members %s and %s differ only by letter case, which a server may read as one; the tool's input schema does not name both",
				quote(clip(t[0])), quote(clip(t[1])))))
			return false
		}
	}
	return true
}

// notJSON says what is wrong with JSON the decoder stopped at.
func notJSON(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("not JSON: it ends early")
	}
	return fmt.Errorf("not JSON: %w", err)
}

// queryKeys are the query's parameter names, each allowed once.
func queryKeys(r *http.Request) []string {
	var keys []string
	for k := range r.URL.Query() {
		keys = append(keys, k)
	}
	return keys
}
