package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// manyMembers is an object of n members, each a number.
func manyMembers(n int) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// The shape check runs for every call, before the caller's policy: it
// allocates nothing for an object however large (but its scanner). The scan costs one name
// per member, and the set it is kept in.
// Not parallel: AllocsPerRun counts the whole program's allocations.
func TestArgumentChecksCost(t *testing.T) {
	const n = 20000
	body := manyMembers(n)
	if a := testing.AllocsPerRun(10, func() {
		if err := objectShape(body); err != nil {
			t.Fatal(err)
		}
	}); a > 1 { // its scanner, from a pool the race detector empties at times
		t.Errorf("the shape check allocates %v times", a)
	}
	if a := testing.AllocsPerRun(10, func() {
		if err := scanArguments(body, nil); err != nil {
			t.Fatal(err)
		}
	}); a > 1.1*n {
		t.Errorf("the scan allocates %v times for %d members", a, n)
	}
}

// refScan is the scan done by encoding/json's decoder, token by token:
// what scanArguments must agree with on every object.
func refScan(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var value func(depth int) error
	value = func(depth int) error {
		tok, err := d.Token()
		if err != nil {
			return err
		}
		switch tok := tok.(type) {
		case json.Delim:
			if depth+1 > maxDepth {
				return errors.New("nested too deeply")
			}
			seen := map[string]bool{}
			for d.More() {
				if tok == '{' {
					k, err := d.Token()
					if err != nil {
						return err
					}
					if seen[k.(string)] {
						return errors.New("twice")
					}
					seen[k.(string)] = true
				}
				if err := value(depth + 1); err != nil {
					return err
				}
			}
			_, err = d.Token()
			return err
		case json.Number:
			return checkNumber([]byte(tok))
		}
		return nil
	}
	if err := value(0); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("something follows")
	}
	return nil
}

// refCase reports whether a Go server may read a name of b (valid JSON,
// no member twice) otherwise than the schema check: a variant of a
// declared name that is not declared itself, or two declared names of one
// object, alike but for letter case, that the schema never declares
// together. Plainly: every pair of names compared.
func refCase(b []byte, decl *declaredNames) bool {
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return false
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			for k, sub := range v {
				if !decl.names[k] && len(decl.byFold[foldName(k)]) > 0 {
					return true
				}
				for other := range v {
					if other < k && decl.names[k] && decl.names[other] && foldName(k) == foldName(other) && !decl.together[pairOf(k, other)] {
						return true
					}
				}
				if walk(sub) {
					return true
				}
			}
		case []any:
			for _, sub := range v {
				if walk(sub) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

// depthOf is how deep a decoded value nests.
func depthOf(v any) int {
	deepest := 0
	switch v := v.(type) {
	case map[string]any:
		for _, sub := range v {
			deepest = max(deepest, depthOf(sub))
		}
	case []any:
		for _, sub := range v {
			deepest = max(deepest, depthOf(sub))
		}
	default:
		return 0
	}
	return deepest + 1
}

// FuzzArgumentScan: the shape check takes exactly the single JSON objects
// no deeper than the scan walks, and on those the scan refuses exactly
// what the decoder-based references do, for names and for letter case
// against a schema, never panicking.
func FuzzArgumentScan(f *testing.F) {
	decl := &declaredNames{names: map[string]bool{}, byFold: map[string][]string{}, together: map[[2]string]bool{}}
	var schema any
	if err := json.Unmarshal([]byte(`{"type":"object","properties":{"id":{},"ID":{},"inner":{"properties":{"k":{},"K":{}}},`+
		`"a":{},"deep":{"properties":{"A":{},"ſ":{}}},"text":{},"files":{}}}`), &schema); err != nil {
		f.Fatal(err)
	}
	decl.collect(schema, 0)
	for _, seed := range []string{
		`{}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":{"b":[{"c":1,"c":2}]}}`, `{"a":"\"","b":"\\"}`,
		"{\"\xff\":1,\"\xfe\":2}", `{"n":1e1001}`, `{"n":-0.5E-3}`, `[1]`, `{} {}`, `{"a":`, ` {"a" : [ true , false , null ] } `,
		`{"a":1,"A":2}`, `{"` + strings.Repeat("x", 100) + `":{}}`, strings.Repeat(`{"a":`, 600) + `1` + strings.Repeat(`}`, 600),
		`{"id":1,"ID":2}`, `{"inner":{"k":1,"K":2}}`, `{"Text":1}`, `{"s":1,"S":2}`, `{"x":[{"A":1,"a":2}]}`, `{"TEXT":"a","text":"b"}`,
		`{"files":{"Makefile":1,"makefile":2}}`, `{"\u0041":1,"a":2}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v any
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		isObject := d.Decode(&v) == nil
		if _, err := d.Token(); err != io.EOF {
			isObject = false
		}
		if _, ok := v.(map[string]any); !ok {
			isObject = false
		}
		shape := objectShape(b)
		if want := isObject && depthOf(v) <= maxDepth; (shape == nil) != want {
			t.Fatalf("%q: shape %v, decodes to an object no deeper than %d: %v", b, shape, maxDepth, want)
		}
		if shape != nil {
			return
		}
		want := refScan(b)
		if got := scanArguments(b, nil); (got == nil) != (want == nil) {
			t.Fatalf("%q: scan %v, reference %v", b, got, want)
		}
		got := scanArguments(b, decl)
		var ce *caseError
		isCase := errors.As(got, &ce)
		switch {
		case want != nil && (got == nil || isCase):
			t.Fatalf("%q: scan against the schema %v, reference %v", b, got, want)
		case want == nil && isCase != refCase(b, decl):
			t.Fatalf("%q: scan against the schema %v, reference finds a letter-case refusal: %v", b, got, refCase(b, decl))
		case want == nil && got != nil && !isCase:
			t.Fatalf("%q: scan against the schema %v", b, got)
		}
	})
}

// The scan of a large object: what each call with large arguments costs
// before the schema check.
func BenchmarkArgumentScan(b *testing.B) {
	body := manyMembers(100000)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := objectShape(body); err != nil {
			b.Fatal(err)
		}
		if err := scanArguments(body, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// foldName agrees with bytes.EqualFold, which encoding/json matches member
// names by, on every rune: a rune and those it folds with fold alike, and
// to a rune EqualFold takes for it.
func TestFoldNameIsEqualFold(t *testing.T) {
	t.Parallel()
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		s, f := string(r), foldName(string(r))
		if !bytes.EqualFold([]byte(s), []byte(f)) {
			t.Fatalf("%q folds to %q, which EqualFold does not take for it", s, f)
		}
		if g := foldName(string(unicode.SimpleFold(r))); g != f {
			t.Fatalf("%q folds to %q, and %q, of its orbit, to %q", s, f, string(unicode.SimpleFold(r)), g)
		}
	}
}

// unquote reads every JSON string as encoding/json does.
func FuzzUnquote(f *testing.F) {
	for _, seed := range []string{`"plain"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u20AC"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00\ud83d"`,
		`"\ud83dx"`, `"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`, "\"\xff\xfe\"", "\"a\xc3\"", `""`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, q []byte) {
		var want string
		q = bytes.TrimSpace(q)
		if !json.Valid(q) || len(q) < 2 || q[0] != '"' || json.Unmarshal(q, &want) != nil {
			return
		}
		if got := unquote(q[1 : len(q)-1]); got != want {
			t.Fatalf("%q: unquote %q, encoding/json %q", q, got, want)
		}
	})
}
