package jsonrpc

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Member is one name/value pair of a JSON object. Value is a span of the
// scanned text, so a payload is located without being copied or re-encoded.
type Member struct {
	Key   string
	Value Span
}

// Members validates that b is exactly one JSON object (surrounding whitespace
// allowed) and returns its members in order. Nested values are validated but
// not decoded. It accepts what json.Valid accepts, which the fuzz test checks.
func Members(b []byte) ([]Member, error) {
	s := scanner{b: b}
	i, err := s.top()
	if err != nil {
		return nil, err
	}
	// Room for a request's envelope, a call's params or its _meta (four
	// members or fewer) at once: growing from nil allocates three times.
	out := make([]Member, 0, 4)
	// The keys that read as they stand (most) are copied out together,
	// into one string, once the object is read; the others are decoded
	// one by one.
	var plainBuf [8]plainKey
	plain, n := plainBuf[:0], 0
	i, more, err := s.enter(i, 1)
	for more && err == nil {
		var k keySpan
		var v Span
		if k, v, err = s.member(i, 1); err != nil {
			break
		}
		m := Member{Value: v}
		if raw := s.raw(k); !k.escaped && (isASCII(raw) || utf8.Valid(raw)) {
			plain = append(plain, plainKey{len(out), Span{k.Start + 1, k.End - 1}})
			n += len(raw)
		} else if m.Key, err = s.key(k); err != nil {
			break
		}
		out = append(out, m)
		i, more, err = s.next(v.End)
	}
	if err != nil {
		return nil, err
	}
	if j := s.ws(i); j != len(b) {
		return nil, s.fail(j, "data after the top-level value")
	}
	if len(plain) > 0 {
		var all strings.Builder
		all.Grow(n)
		for _, k := range plain {
			all.Write(b[k.Start:k.End])
		}
		joined, at := all.String(), 0
		for _, k := range plain {
			out[k.member].Key = joined[at : at+k.End-k.Start]
			at += k.End - k.Start
		}
	}
	return out, nil
}

// plainKey is where the key of out[member] sits, between its quotes.
type plainKey struct {
	member int
	Span
}

// FindMembers validates that obj is exactly one JSON object, as Members
// does, and finds the members named names in the same pass, with the
// rules of Find, without allocating: out[i] is where the value of
// names[i] sits in obj, and the zero Span when there is none (out must be
// as long as names). Its error is Members' for a text that is not an
// object, or else the *AmbiguousError that Find gives for the first of
// names, in their order, that is ambiguous; out is then incomplete.
func FindMembers(obj []byte, names []string, out []Span) error {
	amb, err := findMembers(obj, names, out)
	if err != nil {
		return err
	}
	if amb != nil {
		return amb
	}
	return nil
}

// findMembers is FindMembers with its two kinds of error apart.
func findMembers(b []byte, names []string, out []Span) (*AmbiguousError, error) {
	out = out[:len(names)]
	clear(out)
	s := scanner{b: b}
	i, err := s.top()
	if err != nil {
		return nil, err
	}
	// first is the first of names known to be ambiguous: the names after
	// it no longer matter, as Find would never be asked for them.
	first, other := len(names), ""
	i, more, err := s.enter(i, 1)
	for more && err == nil {
		var k keySpan
		var v Span
		if k, v, err = s.member(i, 1); err != nil {
			break
		}
		// A key that reads as it stands (no escape, valid UTF-8) is
		// compared where it is; only another one is decoded.
		raw := s.raw(k)
		ascii := !k.escaped && isASCII(raw)
		plain := ascii || s.plain(k)
		var key string
		if !plain {
			if key, err = s.key(k); err != nil {
				break
			}
		}
		for j := 0; j < first; j++ {
			name := names[j]
			var exact, fold bool
			switch {
			case !plain:
				exact = key == name
				fold = !exact && strings.EqualFold(key, name)
			case ascii && (len(raw) > len(name) || len(raw) > 0 && name[0] < utf8.RuneSelf && lower(raw[0]) != lower(name[0])):
				// Most pairs: an ASCII key matches no shorter name, even
				// folded, nor one that starts with another ASCII letter.
				continue
			case len(raw) == len(name):
				exact = string(raw) == name
				fold = !exact && equalFold(raw, name)
			case len(raw) < len(name) || !ascii:
				// Letters such as 'K' and the Kelvin sign fold together
				// at different lengths; an ASCII key and a shorter name
				// cannot.
				fold = equalFold(raw, name)
			}
			switch {
			case exact && out[j].End == 0:
				out[j] = v
			case exact:
				first, other = j, name
			case fold && plain:
				first, other = j, string(raw)
			case fold:
				first, other = j, key
			}
		}
		i, more, err = s.next(v.End)
	}
	if err != nil {
		return nil, err
	}
	if j := s.ws(i); j != len(b) {
		return nil, s.fail(j, "data after the top-level value")
	}
	if first < len(names) {
		return &AmbiguousError{Name: names[first], Other: other}, nil
	}
	return nil, nil
}

// equalFold is strings.EqualFold(string(b), s), sparing the conversion
// while both are ASCII, as keys and the names looked for are.
func equalFold(b []byte, s string) bool {
	for i := range min(len(b), len(s)) {
		c, d := b[i], s[i]
		if c|d >= utf8.RuneSelf {
			// Both start a rune here: what precedes is ASCII.
			return strings.EqualFold(string(b[i:]), s[i:])
		}
		if c != d && lower(c) != lower(d) {
			return false
		}
	}
	return len(b) == len(s)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func isASCII[T string | []byte](s T) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
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
	for depth := range path {
		var at [1]Span
		amb, err := findMembers(obj[v.Start:v.End], path[depth:depth+1], at[:])
		if _, notObj := err.(*NotObjectError); notObj {
			return Span{}, false, nil
		}
		if err != nil {
			return Span{}, false, err
		}
		if amb != nil {
			amb.Path = slices.Clone(path[:depth])
			return Span{}, false, amb
		}
		if at[0].End == 0 {
			return Span{}, false, nil
		}
		v = Span{v.Start + at[0].Start, v.Start + at[0].End}
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
// returns the value only if it is complete inside prefix; of two members
// named key, the last.
func PrefixMember(prefix []byte, key string) ([]byte, bool) {
	s := scanner{b: prefix}
	i := s.ws(0)
	if i >= len(prefix) || prefix[i] != '{' {
		return nil, false
	}
	var found []byte
	// The scan ends in an error where the text is cut; members seen
	// before it count.
	i, more, err := s.enter(i, 1)
	for more && err == nil {
		var k keySpan
		var v Span
		if k, v, err = s.member(i, 1); err != nil {
			break
		}
		// A value that ends the prefix may be cut short (a number, say).
		if v.End < len(prefix) && s.is(k, key) {
			found = prefix[v.Start:v.End]
		}
		i, more, err = s.next(v.End)
	}
	return found, found != nil
}

// PrefixHas reports whether key names a member of a JSON object of which
// only prefix is at hand, its value there whole or cut short: a response
// whose result begins within the first kilobytes of a line too long to
// keep.
func PrefixHas(prefix []byte, key string) bool {
	s := scanner{b: prefix}
	i := s.ws(0)
	if i >= len(prefix) || prefix[i] != '{' {
		return false
	}
	i, more, err := s.enter(i, 1)
	for more && err == nil {
		var k keySpan
		var v Span
		k, v, err = s.member(i, 1)
		if k.End > 0 && s.is(k, key) {
			return true
		}
		if err != nil {
			break
		}
		i, more, err = s.next(v.End)
	}
	return false
}

// SuffixMember looks for key as the last member of a JSON object of which
// only the end is at hand, such as the last kilobytes of a line too long to
// keep: many encoders write a response's id after its result. It returns
// the value only when it is a string or a number, written as the object's
// last member at its top level: the text ends with key, its value and the
// object's closing brace, with a comma or the object's opening brace
// before key. (Inside a string, the quotes around key would be escaped; in
// a nested object, more than one closing brace would follow.) A key
// spelled with escapes is not recognised.
func SuffixMember(suffix []byte, key string) ([]byte, bool) {
	back := func(i int) int { // the offset before the whitespace that ends suffix[:i]
		for i > 0 && (suffix[i-1] == ' ' || suffix[i-1] == '\t' || suffix[i-1] == '\n' || suffix[i-1] == '\r') {
			i--
		}
		return i
	}
	// openQuote is the offset of the quote that opens the string whose
	// closing quote is at end: the first quote before it not escaped.
	openQuote := func(end int) int {
		for j := end - 1; j >= 0; j-- {
			if suffix[j] != '"' {
				continue
			}
			n := 0
			for k := j - 1; k >= 0 && suffix[k] == '\\'; k-- {
				n++
			}
			if n%2 == 0 {
				return j
			}
		}
		return -1
	}
	i := back(len(suffix))
	if i == 0 || suffix[i-1] != '}' {
		return nil, false
	}
	end := back(i - 1)
	if end == 0 {
		return nil, false
	}
	start := end - 1
	if suffix[start] == '"' {
		if start = openQuote(start); start < 0 {
			return nil, false
		}
	} else {
		for start > 0 && strings.IndexByte("0123456789+-.eE", suffix[start-1]) >= 0 {
			start--
		}
	}
	value := suffix[start:end]
	s := scanner{b: value}
	if e, err := s.value(0, 0); err != nil || e != len(value) || (value[0] != '"' && value[0] != '-' && (value[0] < '0' || value[0] > '9')) {
		return nil, false
	}
	i = back(start)
	if i == 0 || suffix[i-1] != ':' {
		return nil, false
	}
	i = back(i - 1)
	if i == 0 || suffix[i-1] != '"' {
		return nil, false
	}
	q := openQuote(i - 1)
	if q < 0 || string(suffix[q+1:i-1]) != key {
		return nil, false
	}
	if j := back(q); j == 0 || (suffix[j-1] != ',' && suffix[j-1] != '{') {
		return nil, false
	}
	return value, true
}

// is reports whether the key at k reads as name.
func (s *scanner) is(k keySpan, name string) bool {
	if s.plain(k) {
		return string(s.raw(k)) == name
	}
	key, err := s.key(k)
	return err == nil && key == name
}

// Elements validates that b is exactly one JSON array and returns the spans
// of its elements. A 2025-03-26 peer may send a batch this way.
func Elements(b []byte) ([]Span, error) {
	spans, _, err := ElementsUpTo(b, -1)
	return spans, err
}

// ElementsUpTo is Elements that keeps the spans of the first max elements
// only (all when max < 0), and counts them all: an array of millions of
// tiny elements must not cost a span each when a few are wanted.
func ElementsUpTo(b []byte, max int) (spans []Span, n int, err error) {
	s := scanner{b: b}
	i := s.ws(0)
	if i >= len(b) || b[i] != '[' {
		return nil, 0, s.fail(i, "expected an array")
	}
	end, err := s.array(i, 1, func(v Span) {
		if n++; max < 0 || n <= max {
			spans = append(spans, v)
		}
	})
	if err != nil {
		return nil, 0, err
	}
	if j := s.ws(end); j != len(b) {
		return nil, 0, s.fail(j, "data after the top-level value")
	}
	return spans, n, nil
}
