package jsonrpc

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// maxDepth bounds nesting so a hostile payload cannot exhaust the stack;
// encoding/json uses the same limit.
const maxDepth = 10000

// Span is a half-open byte range [Start, End) of a JSON text.
type Span struct{ Start, End int }

// SyntaxError reports where a JSON text stopped being valid.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at offset %d: %s", e.Offset, e.Msg)
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
		return s.object(i, depth+1)
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

// keySpan is where a member's name sits: Span covers its quotes, and
// escaped says whether it must be decoded to be read.
type keySpan struct {
	Span
	escaped bool
}

// raw is the text of the key between its quotes.
func (s *scanner) raw(k keySpan) []byte { return s.b[k.Start+1 : k.End-1] }

// object validates an object at i and returns the offset after it.
func (s *scanner) object(i, depth int) (int, error) {
	i, more, err := s.enter(i, depth)
	for more && err == nil {
		var v Span
		if _, v, err = s.member(i, depth); err == nil {
			i, more, err = s.next(v.End)
		}
	}
	return i, err
}

// The steps of an object, for readers that look at its members in turn:
//
//	i, more, err := s.enter(i, depth)
//	for more && err == nil {
//		k, v, err := s.member(i, depth)
//		...
//		i, more, err = s.next(v.End)
//	}
//
// A member is reported before what follows it is checked, so that a text
// cut short still yields the members before the cut.

// enter starts the object at i: more is true when a member starts at next.
func (s *scanner) enter(i, depth int) (next int, more bool, err error) {
	if depth > maxDepth {
		return i, false, s.fail(i, "nested too deeply")
	}
	i = s.ws(i + 1)
	if i < len(s.b) && s.b[i] == '}' {
		return i + 1, false, nil
	}
	return i, true, nil
}

// member validates the member that starts at i: its key, and its value.
func (s *scanner) member(i, depth int) (k keySpan, v Span, err error) {
	if i >= len(s.b) || s.b[i] != '"' {
		return k, v, s.fail(i, "expected a string key")
	}
	end, escaped, err := s.str(i)
	if err != nil {
		return k, v, err
	}
	k = keySpan{Span{i, end}, escaped}
	i = s.ws(end)
	if i >= len(s.b) || s.b[i] != ':' {
		return k, v, s.fail(i, "expected ':' after a key")
	}
	i = s.ws(i + 1)
	end, err = s.value(i, depth)
	return k, Span{i, end}, err
}

// next reads what follows a member's value, which ends at i: more is true
// when another member starts at next, and false after the object's end.
func (s *scanner) next(i int) (next int, more bool, err error) {
	i = s.ws(i)
	if i >= len(s.b) {
		return i, false, s.fail(i, "unexpected end of input in an object")
	}
	switch s.b[i] {
	case ',':
		return s.ws(i + 1), true, nil
	case '}':
		return i + 1, false, nil
	}
	return i, false, s.fail(i, "expected ',' or '}' in an object")
}

// plain reports whether the key at k reads as it stands: no escape, and
// valid UTF-8.
func (s *scanner) plain(k keySpan) bool {
	raw := s.raw(k)
	return !k.escaped && (isASCII(raw) || utf8.Valid(raw))
}

// key is the name at k, decoded.
func (s *scanner) key(k keySpan) (string, error) {
	if s.plain(k) {
		return string(s.raw(k)), nil
	}
	// Rare: a key such as "\u0069d" must still match "id", and invalid UTF-8
	// must read as encoding/json reads it. str has validated the string,
	// which encoding/json therefore decodes.
	var key string
	if err := json.Unmarshal(s.b[k.Start:k.End], &key); err != nil {
		return "", s.fail(k.Start, "bad key escape")
	}
	return key, nil
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
// string contains escapes. The inner loops are the hot path for large
// payloads: a tool's result is mostly the text of strings.
func (s *scanner) str(i int) (end int, escaped bool, err error) {
	b := s.b
	i++
	for {
		// Eight bytes at a time past those that need no look, then one at
		// a time up to the byte that does.
		for i+8 <= len(b) && !special(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && b[i] >= 0x20 && b[i] != '"' && b[i] != '\\' {
			i++
		}
		if i >= len(b) {
			return i, escaped, s.fail(i, "unexpected end of input in a string")
		}
		switch b[i] {
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
}

// special reports whether any of the eight bytes of w ends a string, starts
// an escape or is a control character. Each test is the classic one for a
// zero byte, (x-0x01..)&^x&0x80.., which is exact as to whether there is
// one; a byte below 0x20 is found the same way.
func special(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	hasZero := func(x uint64) uint64 { return (x - ones) & ^x & highs }
	quote := hasZero(w ^ (ones * '"'))
	backslash := hasZero(w ^ (ones * '\\'))
	control := (w - ones*0x20) & ^w & highs
	return quote|backslash|control != 0
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

// top finds the start of the top-level object of s.b. A text that is not
// one is validated all the same, so that callers can tell "not JSON"
// (a *SyntaxError) from "not an object" (a *NotObjectError).
func (s *scanner) top() (int, error) {
	b := s.b
	i := s.ws(0)
	if i >= len(b) {
		return i, s.fail(i, "empty input")
	}
	if b[i] != '{' {
		end, err := s.value(i, 0)
		if err != nil {
			return i, err
		}
		if j := s.ws(end); j != len(b) {
			return i, s.fail(j, "data after the top-level value")
		}
		return i, &NotObjectError{First: b[i]}
	}
	return i, nil
}
