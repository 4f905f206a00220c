package jsonrpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxDepth bounds nesting so a hostile payload cannot exhaust the stack;
// encoding/json uses the same limit.
const maxDepth = 10000

// Span is a half-open byte range [Start, End) of a JSON text.
type Span struct{ Start, End int }

// Member is one name/value pair of a JSON object. Value is a span of the
// scanned text, so a payload is located without being copied or re-encoded.
type Member struct {
	Key   string
	Value Span
}

// SyntaxError reports where a JSON text stopped being valid.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at offset %d: %s", e.Offset, e.Msg)
}

// Members validates that b is exactly one JSON object (surrounding whitespace
// allowed) and returns its members in order. Nested values are validated but
// not decoded. It accepts what json.Valid accepts, which the fuzz test checks.
func Members(b []byte) ([]Member, error) {
	s := scanner{b: b}
	i := s.ws(0)
	if i >= len(b) {
		return nil, s.fail(i, "empty input")
	}
	if b[i] != '{' {
		// Validate anyway so that callers can tell "not JSON" from "not an object".
		end, err := s.value(i, 0)
		if err != nil {
			return nil, err
		}
		if j := s.ws(end); j != len(b) {
			return nil, s.fail(j, "data after the top-level value")
		}
		return nil, &NotObjectError{First: b[i]}
	}
	// Room for a request's envelope, a call's params or its _meta (four
	// members or fewer) at once: growing from nil allocates three times.
	out := make([]Member, 0, 4)
	end, err := s.object(i, 1, func(key string, v Span) { out = append(out, Member{key, v}) })
	if err != nil {
		return nil, err
	}
	if j := s.ws(end); j != len(b) {
		return nil, s.fail(j, "data after the top-level value")
	}
	return out, nil
}

// NotObjectError says the text is valid JSON but its top level is not an
// object; First is the value's first byte ('[' for a batch).
type NotObjectError struct{ First byte }

func (e *NotObjectError) Error() string {
	if e.First == '[' {
		return "a JSON array, not an object"
	}
	return "a JSON value that is not an object"
}

// Lookup finds the value at a path of object keys inside obj, for example
// Lookup(params, "_meta", "progressToken"). The span is relative to obj.
// ok is false when a key is missing or an intermediate value is not an
// object. A key that is ambiguous at its level (see Find) is an
// *AmbiguousError: the caller must not act on a member that another
// decoder could read otherwise.
func Lookup(obj []byte, path ...string) (v Span, ok bool, err error) {
	v = Span{0, len(obj)}
	for depth, key := range path {
		members, err := Members(obj[v.Start:v.End])
		var notObj *NotObjectError
		if errors.As(err, &notObj) {
			return Span{}, false, nil
		}
		if err != nil {
			return Span{}, false, err
		}
		sp, found, err := Find(members, key)
		if err != nil {
			var amb *AmbiguousError
			if errors.As(err, &amb) {
				amb.Path = append(slices.Clone(path[:depth]), amb.Path...)
			}
			return Span{}, false, err
		}
		if !found {
			return Span{}, false, nil
		}
		v = Span{v.Start + sp.Start, v.Start + sp.End}
	}
	return v, true, nil
}

// Get is the value at path inside obj, or nil when it is absent,
// ambiguous, or obj is not valid JSON: for reading what a peer wrote where
// a missing member and a malformed one mean the same.
func Get(obj []byte, path ...string) []byte {
	sp, ok, err := Lookup(obj, path...)
	if !ok || err != nil {
		return nil
	}
	return obj[sp.Start:sp.End]
}

// Find is the value of the member named key among members. The key must
// be unambiguous: a decoder that keeps the last of two equal keys, or one
// that matches keys without regard to letter case (Go's encoding/json
// among them), must read the same member as an exact, first-and-only
// match. So a second member named key, or one whose name equals key under
// Unicode case folding, is an *AmbiguousError. Escapes count for what they
// spell: "n\u0061me" is "name".
func Find(members []Member, key string) (v Span, found bool, err error) {
	for _, m := range members {
		switch {
		case m.Key == key:
			if found {
				return Span{}, false, &AmbiguousError{Name: key, Other: key}
			}
			v, found = m.Value, true
		case strings.EqualFold(m.Key, key):
			return Span{}, false, &AmbiguousError{Name: key, Other: m.Key}
		}
	}
	return v, found, nil
}

// AmbiguousError says that an object member a reader acts on could be read
// otherwise by another decoder: its name appears twice (Other == Name), or
// another member's name, Other, differs from it only in letter case. Path
// names the object holding them. It matches ErrInvalid.
type AmbiguousError struct {
	Path  []string
	Name  string
	Other string
}

func (e *AmbiguousError) Error() string {
	where := "the message"
	if len(e.Path) > 0 {
		where = strings.Join(e.Path, ".")
	}
	if e.Other == e.Name {
		return fmt.Sprintf("%s has the member %q twice", where, e.Name)
	}
	return fmt.Sprintf("%s has a member %q, which decoders that ignore letter case read as %q", where, e.Other, e.Name)
}

func (e *AmbiguousError) Is(target error) bool { return target == ErrInvalid }

// PrefixMember looks for key among the members of a JSON object that may be
// cut short, such as the first kilobytes of a line too long to keep. It
// returns the value only if it is complete inside prefix.
func PrefixMember(prefix []byte, key string) ([]byte, bool) {
	s := scanner{b: prefix}
	i := s.ws(0)
	if i >= len(prefix) || prefix[i] != '{' {
		return nil, false
	}
	var found []byte
	// The error is expected (the text is cut); members seen before it count.
	_, _ = s.object(i, 1, func(k string, v Span) {
		// A value that ends the prefix may be cut short (a number, say).
		if k == key && v.End < len(prefix) {
			found = prefix[v.Start:v.End]
		}
	})
	return found, found != nil
}

type scanner struct{ b []byte }

func (s *scanner) fail(i int, msg string) error { return &SyntaxError{Offset: i, Msg: msg} }

func (s *scanner) ws(i int) int {
	for i < len(s.b) {
		switch s.b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// value validates the value starting at i and returns the offset after it.
func (s *scanner) value(i, depth int) (int, error) {
	if i >= len(s.b) {
		return i, s.fail(i, "unexpected end of input")
	}
	switch c := s.b[i]; {
	case c == '{':
		return s.object(i, depth+1, nil)
	case c == '[':
		return s.array(i, depth+1, nil)
	case c == '"':
		end, _, err := s.str(i)
		return end, err
	case c == 't':
		return s.literal(i, "true")
	case c == 'f':
		return s.literal(i, "false")
	case c == 'n':
		return s.literal(i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number(i)
	default:
		return i, s.fail(i, fmt.Sprintf("unexpected character %q", c))
	}
}

// object validates an object at i; each member is reported to visit when it
// is not nil.
func (s *scanner) object(i, depth int, visit func(string, Span)) (int, error) {
	if depth > maxDepth {
		return i, s.fail(i, "nested too deeply")
	}
	i = s.ws(i + 1)
	if i < len(s.b) && s.b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(s.b) || s.b[i] != '"' {
			return i, s.fail(i, "expected a string key")
		}
		keyStart := i
		end, escaped, err := s.str(i)
		if err != nil {
			return end, err
		}
		var key string
		if visit != nil {
			key, err = s.key(keyStart, end, escaped)
			if err != nil {
				return keyStart, err
			}
		}
		i = s.ws(end)
		if i >= len(s.b) || s.b[i] != ':' {
			return i, s.fail(i, "expected ':' after a key")
		}
		i = s.ws(i + 1)
		vStart := i
		i, err = s.value(i, depth)
		if err != nil {
			return i, err
		}
		if visit != nil {
			visit(key, Span{vStart, i})
		}
		i = s.ws(i)
		if i >= len(s.b) {
			return i, s.fail(i, "unexpected end of input in an object")
		}
		switch s.b[i] {
		case ',':
			i = s.ws(i + 1)
		case '}':
			return i + 1, nil
		default:
			return i, s.fail(i, "expected ',' or '}' in an object")
		}
	}
}

func (s *scanner) key(start, end int, escaped bool) (string, error) {
	if raw := s.b[start+1 : end-1]; !escaped && utf8.Valid(raw) {
		return string(raw), nil
	}
	// Rare: a key such as "\u0069d" must still match "id", and invalid UTF-8
	// must read as encoding/json reads it.
	var k string
	if err := json.Unmarshal(s.b[start:end], &k); err != nil {
		return "", s.fail(start, "bad key escape")
	}
	return k, nil
}

// array validates an array at i; each element is reported to visit when it
// is not nil.
func (s *scanner) array(i, depth int, visit func(Span)) (int, error) {
	if depth > maxDepth {
		return i, s.fail(i, "nested too deeply")
	}
	i = s.ws(i + 1)
	if i < len(s.b) && s.b[i] == ']' {
		return i + 1, nil
	}
	for {
		start := i
		var err error
		i, err = s.value(i, depth)
		if err != nil {
			return i, err
		}
		if visit != nil {
			visit(Span{start, i})
		}
		i = s.ws(i)
		if i >= len(s.b) {
			return i, s.fail(i, "unexpected end of input in an array")
		}
		switch s.b[i] {
		case ',':
			i = s.ws(i + 1)
		case ']':
			return i + 1, nil
		default:
			return i, s.fail(i, "expected ',' or ']' in an array")
		}
	}
}

// str validates a string starting at the quote at i. It reports whether the
// string contains escapes. The inner loop is the hot path for large payloads.
func (s *scanner) str(i int) (end int, escaped bool, err error) {
	b := s.b
	i++
	for i < len(b) {
		c := b[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		switch c {
		case '"':
			return i + 1, escaped, nil
		case '\\':
			escaped = true
			if i+1 >= len(b) {
				return i, escaped, s.fail(i, "unexpected end of input in a string")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, escaped, s.fail(i, "bad \\u escape")
				}
				i += 6
			default:
				return i, escaped, s.fail(i, "bad escape")
			}
		default:
			return i, escaped, s.fail(i, "control character in a string")
		}
	}
	return i, escaped, s.fail(i, "unexpected end of input in a string")
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func (s *scanner) literal(i int, lit string) (int, error) {
	if len(s.b)-i < len(lit) || string(s.b[i:i+len(lit)]) != lit {
		return i, s.fail(i, "bad literal")
	}
	return i + len(lit), nil
}

// number validates -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number(i int) (int, error) {
	b := s.b
	start := i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return i, s.fail(start, "bad number")
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return j, s.fail(start, "bad number")
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return j, s.fail(start, "bad number")
		}
		i = j
	}
	return i, nil
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// Elements validates that b is exactly one JSON array and returns the spans
// of its elements. A 2025-03-26 peer may send a batch this way.
func Elements(b []byte) ([]Span, error) {
	s := scanner{b: b}
	i := s.ws(0)
	if i >= len(b) || b[i] != '[' {
		return nil, s.fail(i, "expected an array")
	}
	var out []Span
	end, err := s.array(i, 1, func(v Span) { out = append(out, v) })
	if err != nil {
		return nil, err
	}
	if j := s.ws(end); j != len(b) {
		return nil, s.fail(j, "data after the top-level value")
	}
	return out, nil
}
