package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
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

// FuzzArgumentScan: the shape check takes exactly the single JSON objects,
// and on those the scan refuses exactly what the decoder-based reference
// does, never panicking.
func FuzzArgumentScan(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":{"b":[{"c":1,"c":2}]}}`, `{"a":"\"","b":"\\"}`,
		`{"\xff":1,"\xfe":2}`, `{"n":1e1001}`, `{"n":-0.5E-3}`, `[1]`, `{} {}`, `{"a":`, ` {"a" : [ true , false , null ] } `,
		`{"a":1,"A":2}`, `{"` + strings.Repeat("x", 100) + `":{}}`, strings.Repeat(`{"a":`, 600) + `1` + strings.Repeat(`}`, 600),
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
		if err := objectShape(b); (err == nil) != isObject {
			t.Fatalf("%q: shape %v, decodes to an object: %v", b, err, isObject)
		}
		if !isObject {
			return
		}
		got, want := scanArguments(b, nil), refScan(b)
		if (got == nil) != (want == nil) {
			t.Fatalf("%q: scan %v, reference %v", b, got, want)
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
