package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := map[string]struct {
		in     string
		kind   Kind
		id     string
		method string
		err    error
	}{
		"request":             {in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, kind: KindRequest, id: `1`, method: "tools/call"},
		"string id":           {in: `{"jsonrpc":"2.0","id":"a\"b","method":"x"}`, kind: KindRequest, id: `"a\"b"`, method: "x"},
		"big id":              {in: `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"x"}`, kind: KindRequest, id: `123456789012345678901234567890`, method: "x"},
		"pretty":              {in: "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 7,\n  \"method\": \"m\"\n}\n", kind: KindRequest, id: `7`, method: "m"},
		"notification":        {in: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`, kind: KindNotification, method: "notifications/cancelled"},
		"result":              {in: `{"jsonrpc":"2.0","id":4,"result":{"content":[]}}`, kind: KindResponse, id: `4`},
		"error":               {in: `{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"x"}}`, kind: KindResponse, id: `null`},
		"escaped key":         {in: `{"jsonrpc":"2.0","\u0069d":5,"method":"m"}`, kind: KindRequest, id: `5`, method: "m"},
		"escaped method":      {in: `{"jsonrpc":"2.0","id":5,"method":"a\/b"}`, kind: KindRequest, id: `5`, method: "a/b"},
		"unknown member kept": {in: `{"jsonrpc":"2.0","id":5,"method":"m","x":[1]}`, kind: KindRequest, id: `5`, method: "m"},
		"not json":            {in: `Server started on stdio`, err: ErrParse},
		"truncated":           {in: `{"jsonrpc":"2.0","id":1`, err: ErrParse},
		"trailing garbage":    {in: `{"jsonrpc":"2.0","id":1,"method":"m"} x`, err: ErrParse},
		"batch":               {in: `[{"jsonrpc":"2.0","id":1,"method":"m"}]`, err: ErrInvalid},
		"scalar":              {in: `42`, err: ErrInvalid},
		"no version":          {in: `{"id":1,"method":"m"}`, err: ErrInvalid},
		"wrong version":       {in: `{"jsonrpc":"1.0","id":1,"method":"m"}`, err: ErrInvalid},
		"object id":           {in: `{"jsonrpc":"2.0","id":{},"method":"m"}`, err: ErrInvalid},
		"bool id":             {in: `{"jsonrpc":"2.0","id":true,"method":"m"}`, err: ErrInvalid},
		"null request id":     {in: `{"jsonrpc":"2.0","id":null,"method":"m"}`, err: ErrInvalid},
		"method not string":   {in: `{"jsonrpc":"2.0","id":1,"method":1}`, err: ErrInvalid},
		"scalar params":       {in: `{"jsonrpc":"2.0","id":1,"method":"m","params":3}`, err: ErrInvalid},
		"duplicate id":        {in: `{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}`, err: ErrInvalid},
		"id and ID":           {in: `{"jsonrpc":"2.0","id":1,"ID":2,"method":"m"}`, err: ErrInvalid},
		"ID alone":            {in: `{"jsonrpc":"2.0","ID":2,"method":"m"}`, err: ErrInvalid},
		"escaped duplicate":   {in: `{"jsonrpc":"2.0","id":1,"method":"m","m\u0065thod":"n"}`, err: ErrInvalid},
		"long s":              {in: `{"jsonrpc":"2.0","id":1,"method":"m","params":{},"param\u017F":{}}`, err: ErrInvalid},
		"upper-case version":  {in: `{"JSONRPC":"2.0","id":1,"method":"m"}`, err: ErrInvalid},
		"invalid UTF-8 name":  {in: "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\xffb\"}", kind: KindRequest, id: `1`, method: "a\uFFFDb"},
		"result and error":    {in: `{"jsonrpc":"2.0","id":1,"result":{},"error":{}}`, err: ErrInvalid},
		"method and result":   {in: `{"jsonrpc":"2.0","id":1,"method":"m","result":{}}`, err: ErrInvalid},
		"response without id": {in: `{"jsonrpc":"2.0","result":{}}`, err: ErrInvalid},
		"empty object":        {in: `{"jsonrpc":"2.0"}`, err: ErrInvalid},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			m, err := Parse([]byte(tt.in))
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Parse(%s) error = %v, want %v", tt.in, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%s): %v", tt.in, err)
			}
			if m.Kind != tt.kind || string(m.ID) != tt.id || m.Method != tt.method {
				t.Errorf("Parse(%s) = kind %v id %s method %q, want %v %s %q", tt.in, m.Kind, m.ID, m.Method, tt.kind, tt.id, tt.method)
			}
		})
	}
}

func TestLookupAndSplice(t *testing.T) {
	params := []byte(`{"name":"slow","_meta":{"other":[1,{"progressToken":0}],"progressToken":"tok-1"},"arguments":{}}`)
	span, ok, err := Lookup(params, "_meta", "progressToken")
	if err != nil || !ok {
		t.Fatalf("Lookup: ok=%v err=%v", ok, err)
	}
	if got := string(params[span.Start:span.End]); got != `"tok-1"` {
		t.Fatalf("token = %s, want \"tok-1\"", got)
	}
	out := Splice(params, Edit{span, []byte("42")})
	want := `{"name":"slow","_meta":{"other":[1,{"progressToken":0}],"progressToken":42},"arguments":{}}`
	if string(out) != want {
		t.Errorf("Splice = %s, want %s", out, want)
	}
	if _, ok, _ := Lookup(params, "arguments", "x"); ok {
		t.Error("Lookup of a missing key reported ok")
	}
	if _, ok, err := Lookup(params, "name", "x"); ok || err != nil {
		t.Errorf("Lookup through a string: ok=%v err=%v, want false, nil", ok, err)
	}
}

// A member that another decoder could read otherwise is never looked up:
// twice, by letter case, through escapes or Unicode case folding.
func TestLookupRefusesAmbiguity(t *testing.T) {
	for in, want := range map[string]string{
		`{"_meta":{"progressToken":1,"progressToken":2}}`:           `_meta has the member "progressToken" twice`,
		`{"_meta":{"progressToken":1,"ProgressToken":2}}`:           `_meta has a member "ProgressToken", which decoders that ignore letter case read as "progressToken"`,
		`{"_meta":{"PROGRESSTOKEN":2}}`:                             `_meta has a member "PROGRESSTOKEN", which decoders that ignore letter case read as "progressToken"`,
		`{"_meta":{"progressToken":1,"progressT\u006fken":2}}`:      `_meta has the member "progressToken" twice`,
		`{"_meta":{"progressToken":1,"progress\u0054o\u212Aen":2}}`: "_meta has a member \"progressTo\u212Aen\", which decoders that ignore letter case read as \"progressToken\"",
		`{"_meta":{"progressToken":1},"_META":{}}`:                  `the message has a member "_META", which decoders that ignore letter case read as "_meta"`,
	} {
		_, ok, err := Lookup([]byte(in), "_meta", "progressToken")
		var amb *AmbiguousError
		if ok || !errors.As(err, &amb) || !errors.Is(err, ErrInvalid) {
			t.Errorf("Lookup(%s) = %v, %v; want an *AmbiguousError", in, ok, err)
			continue
		}
		if err.Error() != want {
			t.Errorf("Lookup(%s): %q, want %q", in, err, want)
		}
	}
	// Members the caller does not read may be anything.
	if _, ok, err := Lookup([]byte(`{"_meta":{"progressToken":1,"other":1,"OTHER":2,"other":3}}`), "_meta", "progressToken"); !ok || err != nil {
		t.Errorf("Lookup beside unread duplicates: %v, %v", ok, err)
	}
}

func TestPrefixMember(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","id":12,"result":{"content":[{"type":"text","text":"aaaaaaaa`)
	id, ok := PrefixMember(line, "id")
	if !ok || string(id) != "12" {
		t.Errorf("PrefixMember id = %s %v, want 12 true", id, ok)
	}
	if _, ok := PrefixMember([]byte(`{"jsonrpc":"2.0","result":{"x":"yy`), "id"); ok {
		t.Error("PrefixMember found an id that is not there")
	}
	if _, ok := PrefixMember([]byte(`{"id":123`), "id"); ok {
		t.Error("PrefixMember returned a value that may be cut short")
	}
	// PrefixHas sees a member whose value is cut short too, but only at
	// the object's own level.
	for in, want := range map[string]bool{
		`{"jsonrpc":"2.0","result":{"content":[{"text":"aaaa`: true,
		`{"jsonrpc":"2.0","res`:                               false,
		`{"jsonrpc":"2.0","params":{"result":1,"x":"aaa`:      false,
		`{"a":"result","b":1`:                                 false,
		`["result"`:                                           false,
	} {
		if got := PrefixHas([]byte(in), "result"); got != want {
			t.Errorf("PrefixHas(%s, result) = %v, want %v", in, got, want)
		}
	}
}

func TestSuffixMember(t *testing.T) {
	for in, want := range map[string]string{
		`aaaa"}]},"id":12}`:              "12",
		`aaaa"}]}, "id" : "x\"y" } `:     `"x\"y"`,
		`aaaa"}]},"id":-1.5e3}` + "\r\n": "-1.5e3",
		`{"id":"k"}`:                     `"k"`,
		`aaaa"}]},"id":"a\\\\"}`:         `"a\\\\"`,
		// Not the object's own last member, or not an id at all.
		`aaa","x":{"id":12}}`:   "",
		`aaa","x":[{"id":12}]}`: "",
		`"text":"a,\"id\":12}`:  "",
		`,"id":12}}`:            "",
		`,"id":null}`:           "",
		`,"id":{"a":1}}`:        "",
		`,"id":12`:              "",
		`,"ids":12}`:            "",
		`x"id":12}`:             "",
		`,"id":"unterminated}`:  "",
		`,"id":1-2}`:            "",
		`}`:                     "",
		``:                      "",
		`,"id":"\u0031"}`:       `"\u0031"`,
	} {
		got, ok := SuffixMember([]byte(in), "id")
		if string(got) != want || ok != (want != "") {
			t.Errorf("SuffixMember(%s) = %s, %v; want %q", in, got, ok, want)
		}
	}
}

// An error without an id answers a request whose id could not be read;
// a result always names its request.
func TestResponseWithoutID(t *testing.T) {
	m, err := Parse([]byte(`{"jsonrpc":"2.0","error":{"code":-32700,"message":"bad"}}`))
	if err != nil || m.Kind != KindResponse || m.ID != nil {
		t.Errorf("an error without an id: %+v, %v; want a response with no id", m, err)
	}
	if _, err := Parse([]byte(`{"jsonrpc":"2.0","result":{}}`)); !errors.Is(err, ErrInvalid) {
		t.Errorf("a result without an id: %v, want it invalid", err)
	}
}

// Integral agrees with exact arithmetic on what is an integer.
func TestIntegralAtTheEdges(t *testing.T) {
	for in, want := range map[string]bool{
		"1.5e-9223372036854775807": false,
		"1e-9223372036854775808":   false,
		"1e9223372036854775807":    true,
		"0e-9223372036854775808":   true,
		"15e-1":                    false,
		"150e-1":                   true,
		"-0.55e1":                  false,
		"-0.50e2":                  true,
	} {
		if got := Integral([]byte(in)); got != want {
			t.Errorf("Integral(%s) = %v, want %v", in, got, want)
		}
	}
}

func FuzzIntegral(f *testing.F) {
	for _, s := range []string{"0", "-0", "1", "1.5", "1.0", "1e3", "15e-1", "150e-1", "1.5e1", "-0.0e-7", "1E+2", "12300e-2", "12300e-3", "0.000", "1e999999999999999999999", "9007199254740993.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var n json.Number
		if json.Unmarshal([]byte(s), &n) != nil || strings.TrimSpace(s) != s {
			return // not one JSON number
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			return // an exponent too large for big.Rat to take
		}
		if got, want := Integral([]byte(s)), r.IsInt(); got != want {
			t.Errorf("Integral(%s) = %v, want %v", s, got, want)
		}
	})
}

func TestBuilders(t *testing.T) {
	tests := map[string]struct{ got, want []byte }{
		"request":      {NewRequest(9, "ping", nil), []byte(`{"jsonrpc":"2.0","id":9,"method":"ping"}`)},
		"notification": {NewNotification("notifications/cancelled", []byte(`{"requestId":9}`)), []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}`)},
		"result":       {NewResult([]byte(`"a"`), []byte(`{}`)), []byte(`{"jsonrpc":"2.0","id":"a","result":{}}`)},
		// No id read, none written: MCP's schema has no null id.
		"error":         {NewErrorResponse(nil, &Error{Code: -32700, Message: "bad"}), []byte(`{"jsonrpc":"2.0","error":{"code":-32700,"message":"bad"}}`)},
		"error, null":   {NewErrorResponse([]byte("null"), &Error{Code: -32600, Message: "bad"}), []byte(`{"jsonrpc":"2.0","error":{"code":-32600,"message":"bad"}}`)},
		"error with id": {NewErrorResponse([]byte(`"a"`), &Error{Code: -32600, Message: "bad"}), []byte(`{"jsonrpc":"2.0","id":"a","error":{"code":-32600,"message":"bad"}}`)},
	}
	for name, tt := range tests {
		if !bytes.Equal(tt.got, tt.want) {
			t.Errorf("%s: got %s, want %s", name, tt.got, tt.want)
		}
		if !json.Valid(tt.got) {
			t.Errorf("%s: invalid JSON %s", name, tt.got)
		}
	}
}

// Edits apply wherever they are listed, and the list is left as it came.
func TestSpliceOrder(t *testing.T) {
	b := []byte(`{"id":1,"token":2}`)
	edits := []Edit{{Span{16, 17}, []byte(`"b"`)}, {Span{6, 7}, []byte(`"a"`)}}
	want := `{"id":"a","token":"b"}`
	if got := Splice(b, edits...); string(got) != want {
		t.Errorf("Splice = %s, want %s", got, want)
	}
	if edits[0].Span.Start != 16 {
		t.Error("Splice reordered the caller's edits")
	}
	if got := Splice(b, edits[1], edits[0]); string(got) != want {
		t.Errorf("Splice in order = %s, want %s", got, want)
	}
}

// FuzzQuote checks Quote's shortcut against encoding/json.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "2026-07-28", "a\"b", "<tag>", "a&b", "caf\u00e9", "\x7f", "\xff", "tab\t", "\u2028", `back\slash`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := Quote(s); !bytes.Equal(got, want) {
			t.Fatalf("Quote(%q) = %s, encoding/json: %s", s, got, want)
		}
	})
}

// FuzzMembers checks the scanner against encoding/json: it accepts exactly
// what json.Valid accepts, and the members it finds are the ones
// encoding/json decodes.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1}`, `{"a":[1,2,{"b":null}],"c":"\u00e9\n"}`, `[1]`, `"x"`, `{"a":1,}`,
		`{"a":-0.5e+3}`, `{"a":01}`, `{"a":"\x01"}`, ` {"a" : true } `, `{"a":tru}`, `{"\u0061":1,"a":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		members, err := Members(b)
		var notObj *NotObjectError
		valid := json.Valid(b)
		switch {
		case errors.As(err, &notObj):
			if !valid {
				t.Fatalf("Members(%q) called invalid JSON a non-object", b)
			}
			// encoding/json also decodes null into a slice (as nil); only
			// an array is one for Elements.
			var elems []json.RawMessage
			if json.Unmarshal(b, &elems) == nil && elems != nil {
				spans, err := Elements(b)
				if err != nil || len(spans) != len(elems) {
					t.Fatalf("Elements(%q) = %d spans, %v; want %d", b, len(spans), err, len(elems))
				}
				for i, sp := range spans {
					if !bytes.Equal(b[sp.Start:sp.End], elems[i]) {
						t.Fatalf("Elements(%q)[%d] = %s, want %s", b, i, b[sp.Start:sp.End], elems[i])
					}
				}
			}
			return
		case err != nil:
			if valid {
				t.Fatalf("Members(%q) rejected valid JSON: %v", b, err)
			}
			return
		case !valid:
			t.Fatalf("Members(%q) accepted invalid JSON", b)
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("Members accepted %q but Unmarshal says %v", b, err)
		}
		got := map[string][]byte{}
		for _, m := range members {
			got[m.Key] = b[m.Value.Start:m.Value.End]
		}
		if len(got) != len(want) {
			t.Fatalf("Members(%q) found %d distinct keys, want %d", b, len(got), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("Members(%q)[%q] = %s, want %s", b, k, got[k], v)
			}
		}
	})
}

// FuzzRewriteID checks that replacing a request's id and restoring it gives
// back the original bytes, whatever the id and the payload around it.
func FuzzRewriteID(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"x":"\u2028"}}`), int64(1))
	f.Add([]byte(`{"id":1e400,"jsonrpc":"2.0","method":"m"}`), int64(1<<62))
	f.Add([]byte(`{"jsonrpc":"2.0","id":-0,"result":{"id":3}}`), int64(7))
	f.Fuzz(func(t *testing.T, raw []byte, gw int64) {
		m, err := Parse(raw)
		if err != nil || m.ID == nil {
			return
		}
		rewritten := m.WithID(Int(gw))
		m2, err := Parse(rewritten)
		if err != nil {
			t.Fatalf("rewritten message %s does not parse: %v", rewritten, err)
		}
		if n, ok := m2.IDInt(); !ok || n != gw {
			t.Fatalf("rewritten id = %s, want %d", m2.ID, gw)
		}
		if m2.Method != m.Method || !bytes.Equal(m2.Params, m.Params) || !bytes.Equal(m2.Result, m.Result) {
			t.Fatalf("rewriting the id changed the payload: %s -> %s", raw, rewritten)
		}
		if restored := m2.WithID(m.ID); !bytes.Equal(restored, raw) {
			t.Fatalf("restore(rewrite(%s)) = %s", raw, restored)
		}
	})
}

func TestElements(t *testing.T) {
	b := []byte(` [ {"a":1} , 2,"x" ] `)
	spans, err := Elements(b)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range spans {
		got = append(got, string(b[s.Start:s.End]))
	}
	if want := []string{`{"a":1}`, `2`, `"x"`}; !slices.Equal(got, want) {
		t.Errorf("Elements = %q, want %q", got, want)
	}
	for _, bad := range []string{`[1,]`, `{}`, `[1] 2`, `[`} {
		if _, err := Elements([]byte(bad)); err == nil {
			t.Errorf("Elements(%s) accepted invalid input", bad)
		}
	}
	if spans, err := Elements([]byte(`[]`)); err != nil || len(spans) != 0 {
		t.Errorf("Elements([]) = %v, %v", spans, err)
	}
}

func TestSpliceInPlace(t *testing.T) {
	for _, tc := range []struct {
		in, id string
		room   int
		ok     bool
	}{
		{`{"jsonrpc":"2.0","id":12345,"result":"x"}`, `"a"`, 0, true},      // shorter: always fits
		{`{"jsonrpc":"2.0","id":1,"result":"x"}`, `"client-id"`, 16, true}, // longer, with room
		{`{"jsonrpc":"2.0","id":1,"result":"x"}`, `"client-id"`, 2, false}, // longer, without
		{`{"jsonrpc":"2.0","id":7,"result":{"id":7}}`, `"seven"`, 8, true}, // only the envelope's id
	} {
		b := append(make([]byte, 0, len(tc.in)+tc.room), tc.in...)
		m, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		sp, _ := m.IDSpan()
		want := string(Splice(b, Edit{Span: sp, New: []byte(tc.id)}))
		got, ok := SpliceInPlace(b, Edit{Span: sp, New: []byte(tc.id)})
		if ok != tc.ok || (ok && string(got) != want) {
			t.Errorf("SpliceInPlace(%s, %s) = %s, %v; want %s, %v", tc.in, tc.id, got, ok, want, tc.ok)
		}
	}
}

// The scanner nests as deep as encoding/json, and no deeper: a child
// decoding with it must be able to read whatever the gateway accepts.
func TestDepthLimitIsEncodingJSONs(t *testing.T) {
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		for _, open := range []string{"{", "["} {
			// An object at the top holding depth-1 more levels.
			var inner string
			if open == "{" {
				inner = strings.Repeat(`{"a":`, depth-1) + "1" + strings.Repeat("}", depth-1)
			} else {
				inner = strings.Repeat("[", depth-1) + "1" + strings.Repeat("]", depth-1)
			}
			doc := []byte(`{"x":` + inner + `}`)
			_, err := Members(doc)
			if valid := json.Valid(doc); (err == nil) != valid {
				t.Errorf("%d levels of %s: Members says %v, json.Valid %v", depth, open, err, valid)
			}
		}
	}
}
