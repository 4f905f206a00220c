package mcp

import (
	"errors"
	"math/big"
	"testing"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// refRead is Read written the plain way, over jsonrpc.Members and
// jsonrpc.Find: Read must agree with it on every request, errors
// included, word for word.
func refRead(m *jsonrpc.Message) (*Request, error) {
	r := &Request{Message: m}
	if id, isNum := new(big.Rat).SetString(string(m.ID)); m.Kind == jsonrpc.KindRequest && m.ID[0] != '"' && (!isNum || !id.IsInt()) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "a request id must be a string or an integer"}
	}
	ps, ok := m.ParamsSpan()
	switch {
	case !ok:
		return r, nil
	case m.Params[0] != '{':
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params must be an object"}
	}
	members, err := jsonrpc.Members(m.Params)
	if err != nil {
		return nil, invalid(err)
	}
	names := readParams()
	if err := refFind(members, names[:], ps, r.params[:], "params"); err != nil {
		return nil, err
	}
	meta, ok := r.Param(ParamMeta)
	switch {
	case !ok || string(meta) == "null":
		return r, nil
	case meta[0] != '{':
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params._meta must be an object"}
	}
	members, err = jsonrpc.Members(meta)
	if err != nil {
		return nil, invalid(err)
	}
	keys := readMeta()
	if err := refFind(members, keys[:], r.params[paramIndex(ParamMeta)], r.meta[:], "params", "_meta"); err != nil {
		return nil, err
	}
	if tok, ok := r.Meta(MetaProgressToken); ok {
		// A string, or a number that is an integer, by exact arithmetic.
		if r, isNum := new(big.Rat).SetString(string(tok)); tok[0] != '"' && (tok[0] == '+' || !isNum || !r.IsInt()) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params._meta.progressToken must be a string or an integer"}
		}
	}
	return r, nil
}

func refFind(members []jsonrpc.Member, names []string, obj jsonrpc.Span, out []jsonrpc.Span, path ...string) error {
	for i, name := range names {
		v, found, err := jsonrpc.Find(members, name)
		if err != nil {
			var amb *jsonrpc.AmbiguousError
			if errors.As(err, &amb) {
				amb.Path = path
			}
			return invalid(err)
		}
		if found {
			out[i] = jsonrpc.Span{Start: obj.Start + v.Start, End: obj.Start + v.End}
		}
	}
	return nil
}

// FuzzReadReference checks Read, and the names it decodes ahead, against
// the plain reader.
func FuzzReadReference(f *testing.F) {
	for _, s := range []string{
		benchCall,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","NAME":"slow","uri":1,"URI":2}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\u0061me":"e\u0063ho","_meta":{"progressToken":true}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"demo://a","_meta":{"progressToken":1,"PROGRESSTOKEN":2}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"gr\u0065et","_meta":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a","tas\u212aId":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":[1,{"name":1,"name":2}]}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-06-18","io.modelcontextprotocol/logLevel":"debug"}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := jsonrpc.Parse(raw)
		if err != nil {
			return
		}
		r, err := Read(m)
		want, wantErr := refRead(m)
		var e, we *jsonrpc.Error
		switch {
		case (err == nil) != (wantErr == nil):
			t.Fatalf("Read(%s): %v; the plain reader: %v", raw, err, wantErr)
		case err != nil:
			if !errors.As(err, &e) || !errors.As(wantErr, &we) || e.Code != we.Code || e.Message != we.Message {
				t.Fatalf("Read(%s): %v; the plain reader: %v", raw, err, wantErr)
			}
			return
		case r.params != want.params || r.meta != want.meta:
			t.Fatalf("Read(%s) found %v %v; the plain reader %v %v", raw, r.params, r.meta, want.params, want.meta)
		}
		for _, name := range []string{ParamName, ParamURI} {
			v, _ := r.Param(name)
			s, ok := String(v)
			if got, gotOK := r.String(name); got != s || gotOK != ok {
				t.Fatalf("Read(%s): params.%s reads %q, %v; decoded now: %q, %v", raw, name, got, gotOK, s, ok)
			}
		}
		targets, err := Targets(r)
		if AccessOf(r.Method) == AccessTargets && err == nil && r.Method != MethodComplete && r.Method != MethodListen {
			if s, _ := r.String(NameField(r.Method)); len(targets) != 1 || targets[0].Name != s {
				t.Fatalf("Targets(%s) = %v, want the one named %q", raw, targets, s)
			}
		}
	})
}

// What the front door reads of a call, once Read has read it, allocates
// nothing: the policy, the audit line and the header checks each read the
// tool's name and the protocol version.
func TestReadingACallDoesNotAllocate(t *testing.T) {
	m, err := jsonrpc.Parse([]byte(benchCall))
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = Read(m) }); n != 2 {
		t.Errorf("Read: %v allocations, want 2 (the Request and the tool's name)", n)
	}
	r, err := Read(m)
	if err != nil {
		t.Fatal(err)
	}
	revision := []byte(`"2025-11-25"`)
	for name, f := range map[string]func(){
		"Targets":     func() { _, _ = Targets(r) },
		"String":      func() { _, _ = r.String(ParamName) },
		"MetaString":  func() { _, _ = r.MetaString(MetaProtocolVersion) },
		"Modern":      func() { _ = r.Modern() },
		"ParamString": func() { _, _ = String(revision) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations, want none", name, n)
		}
	}
}

// The switches that find a member's place agree with the lists Read reads.
func TestMemberIndexes(t *testing.T) {
	for i, name := range readParams() {
		if got := paramIndex(name); got != i {
			t.Errorf("paramIndex(%q) = %d, want %d", name, got, i)
		}
	}
	for i, key := range readMeta() {
		if got := metaIndex(key); got != i {
			t.Errorf("metaIndex(%q) = %d, want %d", key, got, i)
		}
	}
}
