package jsonrpc

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCanonicalSum(t *testing.T) {
	sum := func(s string) [32]byte {
		t.Helper()
		got, err := CanonicalSum([]byte(s))
		if err != nil {
			t.Fatalf("CanonicalSum(%s): %v", s, err)
		}
		return got
	}
	same := [][]string{
		{`{"a":1,"b":[true,null,"x"]}`, ` { "b" : [ true , null , "x" ] , "a" : 1 } `, "{\n\t\"b\":[true,null,\"\\u0078\"],\"\\u0061\":1}"},
		{`{"outer":{"y":2,"x":{"q":1,"p":0}}}`, `{"outer":{"x":{"p":0,"q":1},"y":2}}`},
		{`1`, `1.0`, `1e0`, `10E-1`, `0.1e+1`, `100e-2`, `1.000`},
		{`0`, `-0`, `0.0`, `0e5`, `-0.000E-7`},
		{`-12.5`, `-125e-1`, `-0.125E2`},
		{`120`, `1.2e2`, `1200e-1`, `0.00120e5`, `12.0E+1`},
		{`0.01`, `0.0100`, `1e-2`, `10E-3`, `1e-0000000000000000000002`},
		{`123456789012345678901234567890`, `1234567890123456789012345678.9e2`},
		{`"é😀/"`, `"\u00e9\ud83d\ude00\/"`, `"\u00E9\uD83D\uDE00/"`},
		{`"a\nb\"\\"`, `"a\u000ab\u0022\u005c"`},
		{`{}`, ` { } `},
		{`[]`, `[ ]`},
	}
	for _, group := range same {
		want := sum(group[0])
		for _, s := range group[1:] {
			if sum(s) != want {
				t.Errorf("%s and %s differ", group[0], s)
			}
		}
	}
	// Every one of these is another value than every other.
	apart := []string{
		`{"a":1}`, `{"a":"1"}`, `{"A":1}`, `{"a":1,"b":1}`, `{"a":[1]}`, `{"a":{}}`, `{"a":null}`, `{}`, `[]`, `null`,
		`[1,2]`, `[2,1]`, `[[1],2]`, `[1,[2]]`, `[{}]`, `[{},{}]`, `[""]`, `["",""]`,
		`2`, `-1`, `0.1`, `1e-1000000000000000000`, `9007199254740992`, `9007199254740993`, `12`, `1.2`,
		`"ab"`, `"a"`, `"\ufffd"`, `"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `true`, `false`,
		`{"ab":"c"}`, `{"a":"bc"}`, `{"a":{"b":1}}`, `{"a":{"b":1},"c":2}`, `{"a":{"b":1,"c":2}}`,
	}
	seen := map[[32]byte]string{}
	for _, s := range apart {
		got := sum(s)
		if other, ok := seen[got]; ok {
			t.Errorf("%s and %s have one sum", s, other)
		}
		seen[got] = s
	}
	// A lone surrogate's form is what these bytes would be, were they
	// taken: a text that is not UTF-8 has no sum.
	for _, s := range []string{`{"a":1,"a":1}`, `{"a":1,"\u0061":2}`, `[{"x":{"b":1,"b":2}}]`, "\"\xff\"", "\"\xed\xa0\x80\""} {
		if _, err := CanonicalSum([]byte(s)); !errors.Is(err, ErrNoCanonicalForm) {
			t.Errorf("CanonicalSum(%s) = %v, want ErrNoCanonicalForm", s, err)
		}
	}
	for _, s := range []string{``, `{`, `{"a":}`, `[1,]`, `1 2`, `{"a":1}x`, `"\x"`, strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)} {
		var syn *SyntaxError
		if _, err := CanonicalSum([]byte(s)); !errors.As(err, &syn) {
			t.Errorf("CanonicalSum(%q) = %v, want a syntax error", s, err)
		}
	}
}

// A value re-encoded by encoding/json (keys sorted, strings escaped its
// way) keeps its sum.
func FuzzCanonicalSum(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,null,{"y":"\u00e9","x":-0.5e+3}]}`, `"<\u2028>"`, `[1.50,2e3]`, `{"a":{"a":{}}}`,
	} {
		f.Add([]byte(s))
	}
	// Go decodes a lone surrogate to U+FFFD, which the sum keeps apart.
	surrogate := regexp.MustCompile(`(?i)\\ud[89a-f]`)
	f.Fuzz(func(t *testing.T, b []byte) {
		want, err := CanonicalSum(b)
		if (err == nil || errors.Is(err, ErrNoCanonicalForm)) != json.Valid(b) {
			t.Fatalf("CanonicalSum(%q): %v, while json.Valid says %v", b, err, json.Valid(b))
		}
		if err != nil || !utf8.Valid(b) || surrogate.Match(b) {
			return
		}
		d := json.NewDecoder(strings.NewReader(string(b)))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("decoding %q: %v", b, err)
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := CanonicalSum(again); err != nil || got != want {
			t.Fatalf("%q re-encoded as %s: %v, another sum", b, again, err)
		}
	})
}
