package jsonrpc

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Edit replaces the bytes of Span with New.
type Edit struct {
	Span Span
	New  []byte
}

// Splice returns a new slice with the edits applied; b is not modified. Edits
// must not overlap. This is how ids and tokens are rewritten without touching
// a single byte of the payload around them.
func Splice(b []byte, edits ...Edit) []byte {
	byStart := func(a, b Edit) int { return a.Span.Start - b.Span.Start }
	if !slices.IsSortedFunc(edits, byStart) {
		// The caller's slice is left as it came.
		edits = slices.Clone(edits)
		slices.SortFunc(edits, byStart)
	}
	n := len(b)
	for _, e := range edits {
		n += len(e.New) - (e.Span.End - e.Span.Start)
	}
	out := make([]byte, 0, n)
	at := 0
	for _, e := range edits {
		out = append(out, b[at:e.Span.Start]...)
		out = append(out, e.New...)
		at = e.Span.End
	}
	return append(out, b[at:]...)
}

// SpliceInPlace applies one edit to b in its own memory when the result
// fits in b's capacity, and reports whether it did; b then must not be
// used any more, only the returned slice. It spares a message a second
// copy of itself when one member changes (its id, a progress token). The
// bytes outside the edit move, but are not changed.
func SpliceInPlace(b []byte, e Edit) ([]byte, bool) {
	n := len(b) + len(e.New) - (e.Span.End - e.Span.Start)
	if n > cap(b) {
		return nil, false
	}
	tail := b[e.Span.End:]
	out := b[:n]
	copy(out[e.Span.Start+len(e.New):], tail) // copy handles the overlap
	copy(out[e.Span.Start:], e.New)
	return out, true
}

// Int is the JSON form of an integer id or token.
func Int(n int64) []byte { return strconv.AppendInt(nil, n, 10) }

// NewRequest builds a compact request line; params is raw JSON or nil.
func NewRequest(id int64, method string, params []byte) []byte {
	b := append([]byte(`{"jsonrpc":"2.0","id":`), Int(id)...)
	return appendTail(b, method, params)
}

// NewRequestRaw builds a compact request line with a raw JSON id.
func NewRequestRaw(id []byte, method string, params []byte) []byte {
	b := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	return appendTail(b, method, params)
}

// NewNotification builds a compact notification line; params is raw JSON or nil.
func NewNotification(method string, params []byte) []byte {
	return appendTail([]byte(`{"jsonrpc":"2.0"`), method, params)
}

func appendTail(b []byte, method string, params []byte) []byte {
	b = append(b, `,"method":`...)
	b = appendString(b, method)
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

// NewResult builds a success response; id and result are raw JSON.
func NewResult(id, result []byte) []byte {
	b := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}

// NewErrorResponse builds an error response; id is raw JSON. With no id
// (nil or null: the request's could not be read) the response has none, as
// MCP's schema has it (its id is optional, a string or an integer), where
// JSON-RPC 2.0 itself writes null.
func NewErrorResponse(id []byte, e *Error) []byte {
	obj, err := json.Marshal(e)
	if err != nil {
		// Data is the only part that can fail to marshal; drop it rather than
		// lose the error itself.
		obj, _ = json.Marshal(&Error{Code: e.Code, Message: e.Message})
	}
	b := []byte(`{"jsonrpc":"2.0",`)
	if id != nil && string(id) != "null" {
		b = append(append(append(b, `"id":`...), id...), ',')
	}
	b = append(b, `"error":`...)
	b = append(b, obj...)
	return append(b, '}')
}

func appendString(b []byte, s string) []byte { return append(b, Quote(s)...) }

// Quote is s as a JSON string, as encoding/json writes it.
func Quote(s string) []byte {
	if !plainJSON(s) {
		q, _ := json.Marshal(s) // a string always marshals
		return q
	}
	q := make([]byte, 0, len(s)+2)
	return append(append(append(q, '"'), s...), '"')
}

// plainJSON reports whether encoding/json writes s as it is between
// quotes: printable ASCII with nothing it escapes (a quote, a backslash,
// or the <, > and & it escapes for HTML).
func plainJSON(s string) bool {
	for i := range len(s) {
		switch c := s[i]; {
		case c < 0x20, c >= utf8.RuneSelf, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
