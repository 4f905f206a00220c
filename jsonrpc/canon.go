package jsonrpc

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrNoCanonicalForm says a JSON text has no canonical form, being one
// decoders read differently: an object in it has the same key twice (the
// first wins, the last, or it is an error), or it is not UTF-8 (a bad
// byte is kept, made U+FFFD, or an error).
var ErrNoCanonicalForm = errors.New("no canonical form")

// CanonicalSum is a SHA-256 digest of the JSON value b that two texts share
// exactly when they are the same value: whitespace, the order of an
// object's members, the spelling of a string (escapes or not: "\u0041" is
// "A") and of a number ("1", "1.0", "10e-1" and "-0" is "0") do not count.
// Numbers are compared as exact decimals, never through a float, so two
// integers past 2^53 that a float would confuse stay apart. An escaped
// lone surrogate is kept apart from U+FFFD, which a decoder may turn it
// into. A text with a key twice in an object, or that is not UTF-8, has no
// sum (ErrNoCanonicalForm).
//
// It reads b in one pass (and once more to check its UTF-8), whatever its nesting: an object is summed by its
// members' own digests, in the order of their keys, so that no member's
// text is copied or summed again by the objects around it.
func CanonicalSum(b []byte) (sum [32]byte, err error) {
	c := canon{scanner: scanner{b: b}, top: sha256.New()}
	if !utf8.Valid(b) {
		// Besides: a lone surrogate's form below is bytes no UTF-8 text
		// holds, and would be another's with them.
		if !json.Valid(b) {
			return sum, c.fail(0, "not a JSON value")
		}
		return sum, fmt.Errorf("%w: the text is not UTF-8", ErrNoCanonicalForm)
	}
	i := c.ws(0)
	if i >= len(b) {
		return sum, c.fail(i, "empty input")
	}
	i, err = c.value(i, 0, 0, c.top)
	if errors.Is(err, ErrNoCanonicalForm) && !json.Valid(b) {
		// The reading stopped at the key; what follows may not be JSON,
		// and then b is not a value at all.
		return sum, c.fail(i, "not a JSON value")
	}
	if err != nil {
		return sum, err
	}
	if j := c.ws(i); j != len(b) {
		return sum, c.fail(j, "data after the top-level value")
	}
	c.top.Sum(sum[:0])
	return sum, nil
}

// canon writes a value's canonical form to a hash: a tag byte, then what
// the value is, each part's length ahead of it, so that no two values
// write the same bytes.
type canon struct {
	scanner
	top     hash.Hash
	members []hash.Hash // by how many objects enclose the member: reused
	summed  []summed    // the members of the objects being read, innermost last
	scratch []byte      // a decoded string
	tag     [1 + binary.MaxVarintLen64]byte
}

// summed is a member of an object: its key, decoded, and its value's sum.
type summed struct {
	key []byte // in b when it has no escape
	sum [32]byte
}

// value writes the value at i to h and returns the offset after it. depth
// is its nesting, for maxDepth; objects is how many objects enclose it.
func (c *canon) value(i, depth, objects int, h hash.Hash) (int, error) {
	if i >= len(c.b) {
		return i, c.fail(i, "unexpected end of input")
	}
	switch ch := c.b[i]; {
	case ch == '{':
		return c.object(i, depth+1, objects, h)
	case ch == '[':
		return c.array(i, depth+1, objects, h)
	case ch == '"':
		end, s, _, err := c.string(i)
		if err == nil {
			c.write(h, 's', s)
		}
		return end, err
	case ch == 't':
		c.mark(h, 't')
		return c.literal(i, "true")
	case ch == 'f':
		c.mark(h, 'f')
		return c.literal(i, "false")
	case ch == 'n':
		c.mark(h, 'n')
		return c.literal(i, "null")
	case ch == '-' || (ch >= '0' && ch <= '9'):
		end, err := c.number(i)
		if err == nil {
			c.writeNumber(h, c.b[i:end])
		}
		return end, err
	default:
		return i, c.fail(i, "unexpected character")
	}
}

func (c *canon) object(i, depth, objects int, h hash.Hash) (int, error) {
	i, more, err := c.enter(i, depth)
	if len(c.members) <= objects {
		c.members = append(c.members, sha256.New())
	}
	// The members of the object go on c.summed above those of the
	// objects around it; an object inside takes its own off before the
	// next member is added.
	from := len(c.summed)
	defer func() { c.summed = c.summed[:from] }()
	for more && err == nil {
		if i >= len(c.b) || c.b[i] != '"' {
			return i, c.fail(i, "expected a string key")
		}
		var key []byte
		var decoded bool
		if i, key, decoded, err = c.string(i); err != nil {
			return i, err
		}
		if decoded {
			key = bytes.Clone(key) // c.scratch is the next string's
		}
		if i = c.ws(i); i >= len(c.b) || c.b[i] != ':' {
			return i, c.fail(i, "expected ':' after a key")
		}
		mh := c.members[objects]
		mh.Reset()
		if i, err = c.value(c.ws(i+1), depth, objects+1, mh); err != nil {
			return i, err
		}
		c.summed = append(c.summed, summed{key: key})
		mh.Sum(c.summed[len(c.summed)-1].sum[:0])
		i, more, err = c.next(i)
	}
	if err != nil {
		return i, err
	}
	ms := c.summed[from:]
	slices.SortFunc(ms, func(a, b summed) int { return bytes.Compare(a.key, b.key) })
	h.Write(binary.AppendUvarint(append(c.tag[:0], '{'), uint64(len(ms))))
	for j, m := range ms {
		if j > 0 && bytes.Equal(ms[j-1].key, m.key) {
			return i, fmt.Errorf("%w: an object has the same key twice", ErrNoCanonicalForm)
		}
		c.write(h, 'k', m.key)
		h.Write(m.sum[:])
	}
	return i, nil
}

func (c *canon) array(i, depth, objects int, h hash.Hash) (int, error) {
	if depth > maxDepth {
		return i, c.fail(i, "nested too deeply")
	}
	c.mark(h, '[')
	i = c.ws(i + 1)
	if i < len(c.b) && c.b[i] == ']' {
		c.mark(h, ']')
		return i + 1, nil
	}
	for {
		var err error
		if i, err = c.value(i, depth, objects, h); err != nil {
			return i, err
		}
		i = c.ws(i)
		if i >= len(c.b) {
			return i, c.fail(i, "unexpected end of input in an array")
		}
		switch c.b[i] {
		case ',':
			i = c.ws(i + 1)
		case ']':
			c.mark(h, ']')
			return i + 1, nil
		default:
			return i, c.fail(i, "expected ',' or ']' in an array")
		}
	}
}

// write writes a tagged byte string, its length first.
func (c *canon) write(h hash.Hash, tag byte, s []byte) {
	h.Write(binary.AppendUvarint(append(c.tag[:0], tag), uint64(len(s))))
	h.Write(s)
}

// mark writes a tag alone.
func (c *canon) mark(h hash.Hash, tag byte) { h.Write(append(c.tag[:0], tag)) }

// string is the string at i, decoded: its text as it stands when it has
// no escape, else decoded into c.scratch, valid until the next call.
func (c *canon) string(i int) (end int, s []byte, decoded bool, err error) {
	end, escaped, err := c.str(i)
	if err != nil {
		return end, nil, false, err
	}
	if !escaped {
		return end, c.b[i+1 : end-1], false, nil
	}
	out := c.scratch[:0]
	raw := c.b[i+1 : end-1]
	for k := 0; k < len(raw); {
		if raw[k] != '\\' {
			out = append(out, raw[k])
			k++
			continue
		}
		switch e := raw[k+1]; e {
		case 'u':
			r := rune(hex4(raw[k+2:]))
			k += 6
			if utf16.IsSurrogate(r) && k+6 <= len(raw) && raw[k] == '\\' && raw[k+1] == 'u' {
				if pair := utf16.DecodeRune(r, rune(hex4(raw[k+2:]))); pair != utf8.RuneError {
					out, k = utf8.AppendRune(out, pair), k+6
					continue
				}
			}
			if utf16.IsSurrogate(r) {
				// A lone surrogate: its generalised UTF-8 form, which no
				// valid string has, keeps it apart from U+FFFD.
				out = append(out, 0xe0|byte(r>>12), 0x80|byte(r>>6)&0x3f, 0x80|byte(r)&0x3f)
				continue
			}
			out = utf8.AppendRune(out, r)
		default:
			out = append(out, Unescape(e))
			k += 2
		}
	}
	c.scratch = out
	return end, out, true, nil
}

// Unescape is what a one-letter JSON escape (the letter after '\\')
// stands for.
func Unescape(e byte) byte {
	switch e {
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return e // '"', '\\', '/'
}

// hex4 is the value of the four hex digits str has validated.
func hex4(b []byte) uint16 {
	var v uint16
	for _, d := range b[:4] {
		switch {
		case d >= 'a':
			d -= 'a' - 10
		case d >= 'A':
			d -= 'A' - 10
		default:
			d -= '0'
		}
		v = v<<4 | uint16(d)
	}
	return v
}

// writeNumber writes the number num, which number has validated, as the
// decimal it is: its sign, its significant digits, and the power of ten
// of the last one. An exponent too long to add to is written as it
// stands, under a tag of its own: such a number equals only a number
// spelt the same way.
func (c *canon) writeNumber(h hash.Hash, num []byte) {
	neg := num[0] == '-'
	if neg {
		num = num[1:]
	}
	mant, exp := num, []byte(nil)
	if k := bytes.IndexAny(num, "eE"); k >= 0 {
		mant, exp = num[:k], num[k+1:]
	}
	intPart, frac := mant, []byte(nil)
	if k := bytes.IndexByte(mant, '.'); k >= 0 {
		intPart, frac = mant[:k], mant[k+1:]
	}
	// The significant digits run from the first digit that is not zero to
	// the last, across the point; power is that of the last digit.
	power := int64(-len(frac))
	intPart = bytes.TrimLeft(intPart, "0")
	if len(intPart) == 0 {
		frac = bytes.TrimLeft(frac, "0")
	}
	if t := bytes.TrimRight(frac, "0"); len(t) > 0 {
		power += int64(len(frac) - len(t))
		frac = t
	} else {
		power += int64(len(frac))
		frac = nil
		t := bytes.TrimRight(intPart, "0")
		power += int64(len(intPart) - len(t))
		intPart = t
	}
	if len(intPart)+len(frac) == 0 {
		c.mark(h, '0') // zero, whatever its sign and spelling
		return
	}
	if len(exp) > 0 {
		sign := int64(1)
		switch exp[0] {
		case '-':
			sign, exp = -1, exp[1:]
		case '+':
			exp = exp[1:]
		}
		exp = bytes.TrimLeft(exp, "0")
		if len(exp) > 15 {
			c.write(h, 'N', num) // beyond any float's range: compared as spelt
			c.mark(h, boolByte(neg))
			return
		}
		var e int64
		for _, d := range exp {
			e = e*10 + int64(d-'0')
		}
		power += sign * e
	}
	h.Write(binary.AppendUvarint(append(c.tag[:0], 'd'), uint64(len(intPart)+len(frac))))
	h.Write(intPart)
	h.Write(frac)
	h.Write(binary.AppendVarint(append(c.tag[:0], boolByte(neg)), power))
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
