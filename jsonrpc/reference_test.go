package jsonrpc

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The readers below are Parse, Lookup and FindMembers written the plain
// way, over Members and Find. The one-pass readers must agree with them on
// every input, errors included, word for word.

func refFindMembers(obj []byte, names []string) ([]Span, error) {
	members, err := Members(obj)
	if err != nil {
		return nil, err
	}
	out := make([]Span, len(names))
	for i, name := range names {
		v, found, err := Find(members, name)
		if err != nil {
			return nil, err
		}
		if found {
			out[i] = v
		}
	}
	return out, nil
}

func refLookup(obj []byte, path ...string) (v Span, ok bool, err error) {
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

func refParse(raw []byte) (*Message, error) {
	members, err := Members(raw)
	if err != nil {
		var notObj *NotObjectError
		if errors.As(err, &notObj) {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrParse, err)
	}
	m := &Message{Raw: raw}
	var has [nEnvelope]bool
	for i, name := range envelope() {
		v, found, err := Find(members, name)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		if err := m.set(i, v); err != nil {
			return nil, err
		}
		has[i] = true
	}
	hasVersion, hasID, hasMethod := has[memberVersion], has[memberID], has[memberMethod]
	if err := m.classify(hasVersion, hasID, hasMethod); err != nil {
		return nil, err
	}
	return m, nil
}

func refBestEffortID(raw []byte) []byte {
	members, err := Members(raw)
	if err != nil {
		return nil
	}
	sp, found, err := Find(members, "id")
	if !found || err != nil {
		return nil
	}
	if id := raw[sp.Start:sp.End]; validID(id) {
		return id
	}
	return nil
}

// sameError reports whether two errors say the same and are of the same
// type, with the same sentinels.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Error() == b.Error() && reflect.TypeOf(a) == reflect.TypeOf(b) &&
		errors.Is(a, ErrParse) == errors.Is(b, ErrParse) && errors.Is(a, ErrInvalid) == errors.Is(b, ErrInvalid)
}

var referenceSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"progressToken":"p"}}}`,
	`{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":"hello"}]}}`,
	`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t1","progress":1,"total":3}}`,
	`{"jsonrpc":"2.0","id":1,"ID":2,"method":"m"}`,
	`{"jsonrpc":"1.0","id":1,"ID":2,"method":"m"}`,
	`{"jsonrpc":"2.0","id":{},"Method":2}`,
	`{"jsonrpc":"2.0","\u0069d":5,"method":"m","m\u0065thod":"n"}`,
	`{"jsonrpc":"2.0","id":1,"method":"m","params":{},"param\u017F":{}}`,
	`{"jsonrpc":"2.0","id":1,"method":"m","params":{},"PARAMS":{},"ID":3}`,
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\xffb\",\"\xff\":1}",
	`{"progressTo\u212Aen":1,"progressToken":2}`,
	"{\"progressTo\xe2\x84\xaaen\":1,\"progressToken\":2,\"\xe2\x84\xaa\":3}",
	`{"_meta":{"progressToken":1},"_META":{}}`,
	`{"a":1,"A":2,"a":3}`,
	`[{"jsonrpc":"2.0"}]`, `42`, ` `, `{"a":1} x`, `{"a":`, `{"a":1,}`, `{"\u00e9":1,"\u00c9":2}`,
}

// FuzzReaders checks Parse, FindMembers, Lookup and BestEffortID against
// the plain readers, with the envelope's names and one of the input's
// own choosing.
func FuzzReaders(f *testing.F) {
	for _, s := range referenceSeeds {
		f.Add([]byte(s), "progressToken")
		f.Add([]byte(s), "K")
	}
	f.Fuzz(func(t *testing.T, b []byte, name string) {
		m, err := Parse(b)
		want, wantErr := refParse(b)
		if !sameError(err, wantErr) {
			t.Fatalf("Parse(%q): %v; the plain reader: %v", b, err, wantErr)
		}
		if err == nil && (m.Kind != want.Kind || !bytes.Equal(m.ID, want.ID) || m.Method != want.Method ||
			m.id != want.id || m.params != want.params || m.result != want.result || m.err != want.err) {
			t.Fatalf("Parse(%q) = %+v; the plain reader: %+v", b, m, want)
		}

		env := envelope()
		names := append(env[:], name, strings.ToUpper(name))
		out := make([]Span, len(names))
		err = FindMembers(b, names, out)
		wantOut, wantErr := refFindMembers(b, names)
		if !sameError(err, wantErr) {
			t.Fatalf("FindMembers(%q, %q): %v; the plain reader: %v", b, names, err, wantErr)
		}
		if err == nil && !slices.Equal(out, wantOut) {
			t.Fatalf("FindMembers(%q, %q) = %v; the plain reader: %v", b, names, out, wantOut)
		}

		for _, path := range [][]string{{name}, {"params", name}, {"params", "_meta", name}} {
			v, ok, err := Lookup(b, path...)
			wv, wok, wantErr := refLookup(b, path...)
			if !sameError(err, wantErr) || v != wv || ok != wok {
				t.Fatalf("Lookup(%q, %q) = %v, %v, %v; the plain reader: %v, %v, %v", b, path, v, ok, err, wv, wok, wantErr)
			}
			var amb, wamb *AmbiguousError
			if errors.As(err, &amb) && errors.As(wantErr, &wamb) && !slices.Equal(amb.Path, wamb.Path) {
				t.Fatalf("Lookup(%q, %q): path %q; the plain reader: %q", b, path, amb.Path, wamb.Path)
			}
		}

		if got, want := BestEffortID(b), refBestEffortID(b); !bytes.Equal(got, want) {
			t.Fatalf("BestEffortID(%q) = %s; the plain reader: %s", b, got, want)
		}
	})
}

// FuzzEqualFold checks equalFold against strings.EqualFold.
func FuzzEqualFold(f *testing.F) {
	for _, s := range [][2]string{{"id", "ID"}, {"id", "iD"}, {"K", "\u212a"}, {"ab", "a\xff"}, {"[", "{"}, {"@", "`"}, {"z", "Z"}, {"k", "k\u212a"}, {"progressTo\u212aen", "progressToken"}, {"\u017f", "S"}, {"ab", "abc"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if got, want := equalFold([]byte(a), b), strings.EqualFold(a, b); got != want {
			t.Fatalf("equalFold(%q, %q) = %v, strings.EqualFold: %v", a, b, got, want)
		}
	})
}

// Lookup, Parse and FindMembers read a message without allocating,
// errors aside: the gateway reads several per call.
func TestReadersDoNotAllocate(t *testing.T) {
	progress, err := Parse(benchProgress)
	if err != nil {
		t.Fatal(err)
	}
	request, err := Parse(benchRequest)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"name", "uri", "_meta"}
	out := make([]Span, len(names))
	for name, f := range map[string]func(){
		"Lookup":       func() { _, _, _ = Lookup(progress.Params, "progressToken") },
		"Get":          func() { _ = Get(request.Params, "_meta", "io.modelcontextprotocol/protocolVersion") },
		"FindMembers":  func() { _ = FindMembers(request.Params, names, out) },
		"BestEffortID": func() { _ = BestEffortID(benchRequest) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations, want none", name, n)
		}
	}
	// Parse allocates its Message, and a request's method name.
	for line, want := range map[*[]byte]float64{&benchRequest: 2, &benchProgress: 2, &benchResponse: 1} {
		if n := testing.AllocsPerRun(100, func() { _, _ = Parse(*line) }); n != want {
			t.Errorf("Parse(%s): %v allocations, want %v", *line, n, want)
		}
	}
}

// FuzzSpecial checks the eight-byte test of the string scanner against a
// byte-by-byte look.
func FuzzSpecial(f *testing.F) {
	for _, w := range []uint64{0, 0x2020202020202020, 0x7f7f7f7f7f7f7f7f, 0xffffffffffffffff, 0x2122232425262728, 0x5c00000000000000, 0x8080808080808080, 0x1f21212121212121} {
		f.Add(w)
	}
	f.Fuzz(func(t *testing.T, w uint64) {
		want := false
		for i := range 8 {
			c := byte(w >> (8 * i))
			want = want || c < 0x20 || c == '"' || c == '\\'
		}
		if got := special(w); got != want {
			t.Fatalf("special(%#016x) = %v, want %v", w, got, want)
		}
	})
}

// Every byte value at every place among others that need no look (ASCII,
// high bytes, the bytes next to the ones looked for), with the borrows
// that the eight-byte test must not be fooled by.
func TestSpecial(t *testing.T) {
	for _, around := range []byte{'a', ' ', '!', '#', '[', ']', 0x7f, 0x80, 0xff} {
		for at := range 8 {
			for c := range 256 {
				var w uint64
				for i := range 8 {
					b := around
					if i == at {
						b = byte(c)
					}
					w |= uint64(b) << (8 * i)
				}
				want := c < 0x20 || c == '"' || c == '\\'
				if got := special(w); got != want {
					t.Fatalf("special(%#016x) = %v, want %v", w, got, want)
				}
			}
		}
	}
}
