package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
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
	}
	return q, true
}

// restBody reads a JSON object body: the arguments of a call. An empty
// body is {}.
func (h *handlers) restBody(w http.ResponseWriter, r *http.Request) ([]byte, *objectScan, bool) {
	empty := &objectScan{}
	if r.ContentLength == 0 && len(r.TransferEncoding) == 0 {
		return []byte("{}"), empty, true
	}
	body, ok := h.readBody(w, r)
	if !ok {
		return nil, nil, false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return []byte("{}"), empty, true
	}
	sc, ok := checkObject(w, body, "the body")
	return body, sc, ok
}

// checkObject refuses what is not one JSON object, or has a member twice
// at any depth (through escapes too), or a number the schema check cannot
// afford: the schema check and the child must read the same arguments. It
// returns what it saw of the names, for caseCheck.
func checkObject(w http.ResponseWriter, b []byte, what string) (*objectScan, bool) {
	sc := &objectScan{keys: map[string]bool{}}
	if err := sc.object(b); err != nil {
		writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest, what+" must be a JSON object: "+err.Error()))
		return nil, false
	}
	return sc, true
}

// objectScan walks a JSON object, token by token.
type objectScan struct {
	keys   map[string]bool // every member name, at any depth
	twins  [][2]string     // members of one object whose names differ only by letter case
	values int             // values seen, nested ones included
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

// maxDepth bounds the nesting the scan walks; maxValues, the values.
const (
	maxDepth  = 512
	maxValues = 1 << 20
)

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
		sc.keys[key] = true
		// A server decoding into structs with Go's encoding/json takes
		// "TEXT" for "text": the pair is noted (see caseCheck).
		folded := foldName(key)
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
	// The schema check holds each value decoded, at some tens of bytes
	// apiece: a body of empty objects would cost it twenty times its size.
	if sc.values++; sc.values > maxValues {
		return fmt.Errorf("more than %d values: the gateway checks arguments that many at most", maxValues)
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

// caseCheck refuses arguments a server decoding into Go structs may read
// otherwise than the schema check did (encoding/json matches member names
// ignoring letter case, the last one winning): a member whose name is a
// declared argument's in another case, unless it is declared itself, and
// two such members in one object, unless one object of the schema
// declares both. Names the schema does not declare are free (a map's
// keys).
func caseCheck(w http.ResponseWriter, sc *objectScan, decl *declaredNames) bool {
	if decl == nil {
		return true
	}
	refuse := func(msg string) bool {
		writeProblem(w, newProblem(kindBadRequest, http.StatusBadRequest, msg))
		return false
	}
	for k := range sc.keys {
		if decl.names[k] {
			continue
		}
		if ds := decl.byFold[foldName(k)]; len(ds) > 0 {
			return refuse(fmt.Sprintf("member %s may be read as the argument %s, which the tool's input schema declares; use its name as declared",
				quote(clip(k)), quote(clip(ds[0]))))
		}
	}
	for _, t := range sc.twins {
		if decl.names[t[0]] && decl.names[t[1]] && !decl.together[pairOf(t[0], t[1])] {
			return refuse(fmt.Sprintf("members %s and %s differ only by letter case, which a server may read as one; no object of the tool's input schema declares both",
				quote(clip(t[0])), quote(clip(t[1]))))
		}
	}
	return true
}

// foldName is a name as encoding/json matches it.
func foldName(s string) string { return strings.ToLower(strings.ToUpper(s)) }

func pairOf(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
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
