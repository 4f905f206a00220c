package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// The arguments of a REST call are checked in two steps. The first,
// objectShape, is cheap and allocates nothing for good input: it runs
// before the caller's policy and the tool are looked at, and makes the
// arguments safe to splice into a request. The second, argScan, walks
// every member and is run only for a call that may go on, a few at a time
// when the arguments are large (see handlers.bigChecks).

// objectShape says why b is not exactly one JSON object, or nil. An
// object nested deeper than the scan walks is refused here too: the
// request it would be spliced into has a depth bound of its own, which
// it would meet first.
func objectShape(b []byte) error {
	if json.Valid(b) {
		if i := skipSpace(b, 0); b[i] != '{' {
			return errors.New("it is not an object")
		}
		if tooDeep(b) {
			return errors.New("nested too deeply")
		}
		return nil
	}
	// Not valid: a decoder says why, reading one value then looking for
	// another. It holds at most a copy of the first value.
	d := json.NewDecoder(bytes.NewReader(b))
	var first json.RawMessage
	if err := d.Decode(&first); err != nil {
		return notJSON(err)
	}
	if first[0] != '{' {
		return errors.New("it is not an object")
	}
	return errors.New("something follows the object")
}

// tooDeep reports whether valid JSON nests deeper than maxDepth.
func tooDeep(b []byte) bool {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			if depth++; depth > maxDepth {
				return true
			}
		case '}', ']':
			depth--
		case '"':
			i, _ = stringEnd(b, i)
			i--
		}
	}
	return false
}

// maxDepth bounds the nesting the scan walks; maxValues, the values.
const (
	maxDepth  = 512
	maxValues = 1 << 20
)

// argScan walks arguments that objectShape passed and refuses a member
// twice in one object at any depth (through escapes too), nesting or
// numbers the schema check cannot afford, and, against the names the
// tool's input schema declares (decl, when there is one), names a server
// decoding into Go structs may read otherwise than the schema check does
// (see scanArguments). It keeps a set of the names of the object it is in
// and of those around it, nothing more.
type argScan struct {
	b      []byte
	decl   *declaredNames
	values int
	ascii  []byte // a name folded, reused
	// The first name refused for its letter case, and the first pair;
	// refusals of the input itself come first.
	misread, misreadAs string
	twins              [2]string
}

// caseError is a refusal for letter case: b is well formed, but may be
// read otherwise than checked.
type caseError struct{ msg string }

func (e *caseError) Error() string { return e.msg }

// scanArguments runs argScan over b. A *caseError says which names may be
// misread; any other error, what is wrong with b.
func scanArguments(b []byte, decl *declaredNames) error {
	s := &argScan{b: b, decl: decl}
	// The object itself is not one of the values counted.
	if _, err := s.object(skipSpace(b, 0), 1); err != nil {
		return err
	}
	switch {
	case s.misread != "":
		return &caseError{fmt.Sprintf("member %s may be read as the argument %s, which the tool's input schema declares; use its name as declared",
			quote(clip(s.misread)), quote(clip(s.misreadAs)))}
	case s.twins[0] != "":
		return &caseError{fmt.Sprintf("members %s and %s differ only by letter case, which a server may read as one; no object of the tool's input schema declares both",
			quote(clip(s.twins[0])), quote(clip(s.twins[1])))}
	}
	return nil
}

// value reads the value at i (valid JSON, spaces skipped), returning the
// index after it.
func (s *argScan) value(i, depth int) (int, error) {
	// The schema check holds each value decoded, at some tens of bytes
	// apiece: a body of empty objects would cost it twenty times its size.
	if s.values++; s.values > maxValues {
		return 0, fmt.Errorf("more than %d values: the gateway checks arguments that many at most", maxValues)
	}
	switch c := s.b[i]; c {
	case '{':
		return s.object(i, depth+1)
	case '[':
		if depth+1 > maxDepth {
			return 0, errors.New("nested too deeply")
		}
		i = skipSpace(s.b, i+1)
		if s.b[i] == ']' {
			return i + 1, nil
		}
		for {
			end, err := s.value(i, depth+1)
			if err != nil {
				return 0, err
			}
			i = skipSpace(s.b, end)
			if s.b[i] == ']' {
				return i + 1, nil
			}
			i = skipSpace(s.b, i+1) // past ','
		}
	case '"':
		end, _ := stringEnd(s.b, i)
		return end, nil
	case 't', 'n':
		return i + 4, nil
	case 'f':
		return i + 5, nil
	default:
		end := i
		for end < len(s.b) && numberByte(s.b[end]) {
			end++
		}
		return end, checkNumber(s.b[i:end])
	}
}

// object reads the object at i.
func (s *argScan) object(i, depth int) (int, error) {
	if depth > maxDepth {
		return 0, errors.New("nested too deeply")
	}
	i = skipSpace(s.b, i+1)
	if s.b[i] == '}' {
		return i + 1, nil
	}
	seen := map[string]struct{}{}
	var declared []string // names the schema declares in other letter cases too, in this object
	for {
		end, escaped := stringEnd(s.b, i)
		key, err := s.name(s.b[i:end], escaped)
		if err != nil {
			return 0, err
		}
		if _, twice := seen[key]; twice {
			return 0, fmt.Errorf("member %q appears twice", clip(key))
		}
		seen[key] = struct{}{}
		if s.decl != nil {
			declared = s.readAlike(key, declared)
		}
		i = skipSpace(s.b, skipSpace(s.b, end)+1) // past ':'
		if i, err = s.value(i, depth); err != nil {
			return 0, err
		}
		i = skipSpace(s.b, i)
		if s.b[i] == '}' {
			return i + 1, nil
		}
		i = skipSpace(s.b, i+1) // past ','
	}
}

// readAlike notes the first name a Go server may read as a declared
// argument other than itself (encoding/json matches member names ignoring
// letter case, the last one winning): a variant of a declared name, or two
// declared names of one object that no object of the schema declares
// together. Names the schema does not declare are free (a map's keys).
// declared holds the object's names that the schema declares in another
// letter case too: the only ones that can make a pair, and few.
func (s *argScan) readAlike(key string, declared []string) []string {
	ds := s.folded(key)
	if !s.decl.names[key] {
		if s.misread == "" && len(ds) > 0 {
			s.misread, s.misreadAs = key, ds[0]
		}
		return declared
	}
	if len(ds) < 2 {
		return declared
	}
	for _, other := range declared {
		if s.twins[0] == "" && slices.Contains(ds, other) && !s.decl.together[pairOf(other, key)] {
			s.twins = [2]string{other, key}
		}
	}
	return append(declared, key)
}

// folded is the declared names key may be read as; an ASCII name is
// folded without allocating.
func (s *argScan) folded(key string) []string {
	for i := 0; i < len(key); i++ {
		if key[i] >= utf8.RuneSelf {
			return s.decl.byFold[foldName(key)]
		}
	}
	s.ascii = s.ascii[:0]
	for i := 0; i < len(key); i++ {
		c := key[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A' // as foldName folds
		}
		s.ascii = append(s.ascii, c)
	}
	return s.decl.byFold[string(s.ascii)]
}

// name decodes a member name (quoted). Escapes, and bytes that are not
// UTF-8 (which decoders read as U+FFFD), are decoded as encoding/json
// does, so that names the child reads as one are one here.
func (s *argScan) name(q []byte, escaped bool) (string, error) {
	raw := q[1 : len(q)-1]
	if !escaped && utf8.Valid(raw) {
		return string(raw), nil
	}
	return unquote(raw), nil
}

// unquote decodes the inside of a JSON string that json.Valid took, as
// encoding/json does: a surrogate pair is one rune, and a lone surrogate,
// or a byte that is not UTF-8, is U+FFFD.
func unquote(raw []byte) string {
	b := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\' && raw[i+1] == 'u':
			r := hex4(raw[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				var next rune = -1
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					next = hex4(raw[i+2:])
				}
				if pair := utf16.DecodeRune(r, next); pair != unicode.ReplacementChar {
					r = pair
					i += 6
				} else {
					r = unicode.ReplacementChar
				}
			}
			b = utf8.AppendRune(b, r)
		case c == '\\':
			b = append(b, jsonrpc.Unescape(raw[i+1]))
			i += 2
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			b = utf8.AppendRune(b, r)
			i += n
		}
	}
	return string(b)
}

// hex4 reads the four hex digits of a \u escape (json.Valid checked them).
func hex4(h []byte) rune {
	var r rune
	for _, c := range h[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// stringEnd is the index after the string starting at i, and whether it
// has an escape.
func stringEnd(b []byte, i int) (int, bool) {
	escaped := false
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			return i + 1, escaped
		}
	}
	return len(b), escaped
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func numberByte(c byte) bool {
	return '0' <= c && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// Numbers the schema check takes as exact rationals (math/big): a huge
// exponent costs it seconds, or fails it. No float64 or int64 comes near.
const (
	maxNumberDigits   = 1000
	maxNumberExponent = 1000
)

func checkNumber(n []byte) error {
	mantissa, exp, hasExp := n, []byte(nil), false
	if e := bytes.IndexAny(n, "eE"); e >= 0 {
		mantissa, exp, hasExp = n[:e], n[e+1:], true
	}
	if len(mantissa) > maxNumberDigits {
		return fmt.Errorf("a number has more than %d digits", maxNumberDigits)
	}
	if hasExp {
		e, err := strconv.Atoi(string(exp))
		if err != nil || e > maxNumberExponent || e < -maxNumberExponent {
			return fmt.Errorf("a number's exponent is beyond ±%d", maxNumberExponent)
		}
	}
	return nil
}

// notJSON says what is wrong with JSON a decoder stopped at.
func notJSON(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("not JSON: it ends early")
	}
	return fmt.Errorf("not JSON: %w", err)
}
