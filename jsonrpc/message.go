// Package jsonrpc reads and writes the JSON-RPC 2.0 envelope of MCP messages.
//
// Only the envelope is interpreted (jsonrpc, id, method, params, result,
// error); every payload stays a span of the original bytes, so a large tool
// result is located once and copied, never decoded or re-encoded.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kind is what a message is, decided by which envelope members it has.
type Kind int

const (
	KindRequest      Kind = iota + 1 // method and id
	KindNotification                 // method, no id
	KindResponse                     // result or error, and id
)

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResponse:
		return "response"
	}
	return "unknown"
}

// ErrParse marks text that is not JSON; ErrInvalid marks JSON that is not a
// single JSON-RPC 2.0 message. Callers branch on these with errors.Is.
var (
	ErrParse   = errors.New("parse error")
	ErrInvalid = errors.New("invalid request")
)

// Message is one JSON-RPC message whose envelope has been located. The
// byte-slice fields alias Raw.
type Message struct {
	Raw    []byte
	Kind   Kind
	ID     []byte // raw id: a JSON string, number or null; nil for notifications
	Method string
	Params []byte // nil when absent
	Result []byte // nil when absent
	Error  []byte // nil when absent

	id     Span // where ID sits in Raw, for rewriting
	params Span
	result Span
	err    Span
}

// The envelope's members, in the order Parse checks them; every other
// member passes through untouched.
const (
	memberVersion = iota
	memberID
	memberMethod
	memberParams
	memberResult
	memberError
	nEnvelope
)

func envelope() [nEnvelope]string {
	return [nEnvelope]string{"jsonrpc", "id", "method", "params", "result", "error"}
}

// Parse locates the envelope of one JSON-RPC 2.0 message. Errors wrap
// ErrParse or ErrInvalid. An envelope member that appears twice, or beside
// a member whose name differs from it only in letter case, is refused (see
// Find): the gateway and the peer must never read different messages from
// the same bytes.
func Parse(raw []byte) (*Message, error) {
	names := envelope()
	var at [nEnvelope]Span
	amb, err := findMembers(raw, names[:], at[:])
	if err != nil {
		if _, notObj := err.(*NotObjectError); notObj {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrParse, err)
	}
	m := &Message{Raw: raw}
	// Member by member, as Find would be asked for them: a member's type
	// is checked before a later member's ambiguity.
	for i, name := range names {
		if amb != nil && amb.Name == name {
			return nil, amb // matches ErrInvalid
		}
		if at[i].End == 0 {
			continue
		}
		if err := m.set(i, at[i]); err != nil {
			return nil, err
		}
	}
	hasVersion, hasID, hasMethod := at[memberVersion].End > 0, at[memberID].End > 0, at[memberMethod].End > 0
	if err := m.classify(hasVersion, hasID, hasMethod); err != nil {
		return nil, err
	}
	return m, nil
}

// classify sets the message's kind from the envelope members it has, or
// says why it is none.
func (m *Message) classify(hasVersion, hasID, hasMethod bool) error {
	if !hasVersion {
		return fmt.Errorf("%w: missing jsonrpc \"2.0\"", ErrInvalid)
	}
	switch {
	case hasMethod && (m.Result != nil || m.Error != nil):
		return fmt.Errorf("%w: a message cannot have both method and result or error", ErrInvalid)
	case hasMethod && hasID:
		if string(m.ID) == "null" {
			return fmt.Errorf("%w: a request id must not be null", ErrInvalid)
		}
		m.Kind = KindRequest
	case hasMethod:
		m.Kind = KindNotification
	case m.Result != nil && m.Error != nil:
		return fmt.Errorf("%w: a response cannot have both result and error", ErrInvalid)
	case m.Result != nil || m.Error != nil:
		// An error answering a request whose id could not be read has
		// none in MCP's schema (JSON-RPC 2.0 writes null there).
		if !hasID && m.Error == nil {
			return fmt.Errorf("%w: a result needs the id of the request it answers", ErrInvalid)
		}
		m.Kind = KindResponse
	default:
		return fmt.Errorf("%w: neither a request, a notification nor a response", ErrInvalid)
	}
	return nil
}

// set records the envelope member (one of the member* indexes), whose
// value is at v in Raw, after checking its type.
func (m *Message) set(member int, v Span) error {
	val := m.Raw[v.Start:v.End]
	switch member {
	case memberVersion:
		if string(val) != `"2.0"` {
			return fmt.Errorf("%w: jsonrpc must be \"2.0\"", ErrInvalid)
		}
	case memberID:
		if !validID(val) {
			return fmt.Errorf("%w: id must be a string or a number (null only in the answer to a message whose id could not be read)", ErrInvalid)
		}
		m.ID, m.id = val, v
	case memberMethod:
		method, ok := plainString(val)
		if !ok {
			return fmt.Errorf("%w: method must be a string", ErrInvalid)
		}
		m.Method = method
	case memberParams:
		if val[0] != '{' && val[0] != '[' {
			return fmt.Errorf("%w: params must be an object or an array", ErrInvalid)
		}
		m.Params, m.params = val, v
	case memberResult:
		m.Result, m.result = val, v
	case memberError:
		if val[0] != '{' {
			return fmt.Errorf("%w: error must be an object", ErrInvalid)
		}
		m.Error, m.err = val, v
	}
	return nil
}

func validID(v []byte) bool {
	switch c := v[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9':
		return true
	case string(v) == "null":
		return true
	}
	return false
}

// maxShift bounds the exponents Integral reckons with, past any number's
// length (so that its arithmetic cannot overflow): a number of more digits
// is no id anyone sends.
const maxShift = 1 << 24

// Integral reports whether num, a JSON number, is an integer: MCP's ids
// and progress tokens are strings or integers (Parse takes any number, as
// JSON-RPC does; the front door asks more of a client). 1e3 and 1.0 are (JSON
// Schema's integer is any number without a fraction); 1.5 and 15e-1 are
// not. It reads the digits, so that no float rounds a fraction away.
func Integral(num []byte) bool {
	s := strings.TrimPrefix(string(num), "-")
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil {
			return false // an exponent past any int: no id is such a number
		}
		mant, exp = s[:i], e
	}
	whole, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(whole+strings.TrimRight(frac, "0"), "0")
	switch {
	case digits == "":
		return true // zero
	case exp > maxShift:
		return true // more zeros than any fraction has digits
	case exp < -maxShift:
		return false // fewer trailing zeros than it would take
	}
	// The value is digits × 10^shift; with shift < 0, the digits' trailing
	// zeros must make up for it.
	shift := exp - len(strings.TrimRight(frac, "0"))
	return shift >= 0 || len(digits)-len(strings.TrimRight(digits, "0")) >= -shift
}

// plainString returns the contents of a JSON string: a plain one as it is
// (method names are plain ASCII in practice), an escaped one, or one that
// is not valid UTF-8, decoded as encoding/json decodes it, so that the
// gateway and a Go peer read the same name.
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

// IDInt returns the id as an int64 when it is a plain integer, as the ids the
// gateway allocates are.
func (m *Message) IDInt() (int64, bool) { return intValue(m.ID) }

// intValue parses a JSON integer, or a string holding one (tolerating peers
// that echo a numeric token as a string).
func intValue(v []byte) (int64, bool) {
	if len(v) >= 2 && v[0] == '"' {
		v = v[1 : len(v)-1]
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil
}

// WithID returns a copy of the message with its id replaced by id (raw JSON).
func (m *Message) WithID(id []byte) []byte {
	return Splice(m.Raw, Edit{m.id, id})
}

// ParamsSpan is where params sit in Raw; ok is false when they are absent.
func (m *Message) ParamsSpan() (Span, bool) { return m.params, m.Params != nil }

// ResultSpan is where the result sits in Raw; ok is false when absent.
func (m *Message) ResultSpan() (Span, bool) { return m.result, m.Result != nil }

// ErrorSpan is where the error object sits in Raw; ok is false when absent.
func (m *Message) ErrorSpan() (Span, bool) { return m.err, m.Error != nil }

// IDSpan is where the id sits in Raw; ok is false for notifications.
func (m *Message) IDSpan() (Span, bool) { return m.id, m.ID != nil }

// BestEffortID returns the id of a message that failed validation, when its
// top level is still an object with a usable id, so that an error answer can
// carry it; otherwise nil.
func BestEffortID(raw []byte) []byte {
	var at [1]Span
	amb, err := findMembers(raw, []string{"id"}, at[:])
	if err != nil || amb != nil || at[0].End == 0 {
		return nil // not an object, or the id is absent or ambiguous
	}
	id := raw[at[0].Start:at[0].End]
	if !validID(id) {
		return nil
	}
	return id
}
