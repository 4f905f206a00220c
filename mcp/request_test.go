package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stdiomcp/gateway/jsonrpc"
)

func read(t *testing.T, raw string) (*Request, error) {
	t.Helper()
	m, err := jsonrpc.Parse([]byte(raw))
	if err != nil {
		return nil, err
	}
	return Read(m)
}

// What the gateway reads is what a case-insensitive, last-wins decoder
// reads, or the request is refused with a message naming the member.
func TestReadRefusesAmbiguousMembers(t *testing.T) {
	tests := map[string]struct{ body, want string }{
		"ID beside id": {`{"jsonrpc":"2.0","id":1,"ID":2,"method":"tools/call"}`,
			`has a member "ID", which decoders that ignore letter case read as "id"`},
		"name twice": {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"slow"}}`,
			`params has the member "name" twice`},
		"NAME beside name": {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","NAME":"slow"}}`,
			`params has a member "NAME", which decoders that ignore letter case read as "name"`},
		"name through escapes": {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","n\u0061me":"slow"}}`,
			`params has the member "name" twice`},
		"method twice": {`{"jsonrpc":"2.0","id":1,"method":"tools/list","Method":"tools/call"}`,
			`has a member "Method", which decoders that ignore letter case read as "method"`},
		"uri by case": {`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a","URI":"b"}}`,
			`params has a member "URI"`},
		"taskId by Unicode folding": {`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a","tas\u212aId":"b"}}`,
			`params has a member "tas` + "\u212a" + `Id"`},
		"_meta by case": {`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{},"_Meta":{}}}`,
			`params has a member "_Meta"`},
		"progress token twice": {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":1,"progressToken":2}}}`,
			`params._meta has the member "progressToken" twice`},
		"version by case": {`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"IO.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			`params._meta has a member "IO.modelcontextprotocol/protocolVersion"`},
		"requestId twice": {`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"requestid":2}}`,
			`params has a member "requestid"`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := read(t, tt.body)
			if err == nil {
				t.Fatalf("read %s: accepted", tt.body)
			}
			var e *jsonrpc.Error
			code := 0
			switch {
			case errors.As(err, &e):
				code = e.Code
			default:
				code = jsonrpc.CodeInvalidRequest // from Parse, which 400s as -32600
			}
			if code != jsonrpc.CodeInvalidRequest || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("read %s: %v (code %d), want -32600 saying %q", tt.body, err, code, tt.want)
			}
		})
	}
}

func TestRead(t *testing.T) {
	r, err := read(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Other":1,"other":2,"name":"echo","arguments":{"Text":1,"text":2},"_meta":{"progressToken":"p","x":1,"X":2,"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if name, ok := r.String(ParamName); !ok || name != "echo" {
		t.Errorf("name = %q, %v", name, ok)
	}
	if tok, ok := r.Meta(MetaProgressToken); !ok || string(tok) != `"p"` {
		t.Errorf("progressToken = %s, %v", tok, ok)
	}
	if !r.Modern() {
		t.Error("a request with a protocol version in _meta is not modern")
	}
	if _, ok := r.Param(ParamURI); ok {
		t.Error("found a uri that is not there")
	}
	sp, _ := r.MetaSpan(MetaProgressToken)
	if got := string(r.Raw[sp.Start:sp.End]); got != `"p"` {
		t.Errorf("progress token span holds %s", got)
	}

	for body, want := range map[string]int{
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":"x"}}`:                      jsonrpc.CodeInvalidParams,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":true}}}`:   jsonrpc.CodeInvalidParams,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":null}}}`:   jsonrpc.CodeInvalidParams,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":{}}}}`:     jsonrpc.CodeInvalidParams,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":[1]}}}`:    jsonrpc.CodeInvalidParams,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":-1.5}}}`:   jsonrpc.CodeInvalidParams,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":-15e-1}}}`: jsonrpc.CodeInvalidParams,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":-1.5e1}}}`: 0,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":1.0}}}`:    0,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":null}}`:                     0,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":[1,{"name":1,"name":2}]}`:            jsonrpc.CodeInvalidParams, // MCP's params are an object
		`{"jsonrpc":"2.0","method":"notifications/m","params":[]}`:                          jsonrpc.CodeInvalidParams,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":{"arguments":{"a":1,"a":2,"A":3}}}`:  0,
	} {
		_, err := read(t, body)
		var e *jsonrpc.Error
		switch {
		case want == 0 && err != nil:
			t.Errorf("read %s: %v", body, err)
		case want != 0 && (!errors.As(err, &e) || e.Code != want):
			t.Errorf("read %s: %v, want code %d", body, err, want)
		}
	}
}

// reference is how a decoder that matches keys without regard to letter
// case and keeps the last duplicate (Go's encoding/json) reads the members
// the gateway acts on.
type reference struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name            json.RawMessage `json:"name"`
		URI             json.RawMessage `json:"uri"`
		TaskID          json.RawMessage `json:"taskId"`
		Arguments       json.RawMessage `json:"arguments"`
		RequestState    json.RawMessage `json:"requestState"`
		InputResponses  json.RawMessage `json:"inputResponses"`
		Level           json.RawMessage `json:"level"`
		ProtocolVersion json.RawMessage `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ClientInfo      json.RawMessage `json:"clientInfo"`
		RequestID       json.RawMessage `json:"requestId"`
		Reason          json.RawMessage `json:"reason"`
		Notifications   json.RawMessage `json:"notifications"`
		Meta            struct {
			ProgressToken json.RawMessage `json:"progressToken"`
			Version       json.RawMessage `json:"io.modelcontextprotocol/protocolVersion"`
			Capabilities  json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
			ClientInfo    json.RawMessage `json:"io.modelcontextprotocol/clientInfo"`
			LogLevel      json.RawMessage `json:"io.modelcontextprotocol/logLevel"`
			Traceparent   json.RawMessage `json:"traceparent"`
			Tracestate    json.RawMessage `json:"tracestate"`
		} `json:"_meta"`
	} `json:"params"`
}

// FuzzRead is differential: whenever the gateway accepts a message and so
// does a case-insensitive, last-wins decoder, both must read the same id,
// method and every params and _meta member the gateway acts on.
func FuzzRead(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"progressToken":"p"}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo","NAME":"slow"}}`,
		`{"jsonrpc":"2.0","id":1,"ID":2,"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\u0061me":"echo"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"tas\u212aId":"t"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"x"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"info"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x","requestState":"s","inputResponses":{"k":{}}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"logging/setLevel","params":{"level":"debug"}}`,
		`{"jsonrpc":"2.0","id":6,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"test://a","_meta":null}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","Tracestate":"a=b"}}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"a\xffb\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := jsonrpc.Parse(raw)
		if err != nil || m.Kind == jsonrpc.KindResponse {
			return
		}
		r, err := Read(m)
		if err != nil {
			return
		}
		var ref reference
		if json.Unmarshal(raw, &ref) != nil {
			return // the other decoder refuses it: nothing reaches a child
		}
		p, meta := ref.Params, ref.Params.Meta
		want := map[string][]byte{
			"id":          ref.ID,
			"params.name": p.Name, "params.uri": p.URI, "params.taskId": p.TaskID, "params.arguments": p.Arguments,
			"params.requestState": p.RequestState, "params.inputResponses": p.InputResponses, "params.level": p.Level,
			"params.protocolVersion": p.ProtocolVersion, "params.capabilities": p.Capabilities, "params.clientInfo": p.ClientInfo,
			"params.requestId": p.RequestID, "params.reason": p.Reason, "params.notifications": p.Notifications,
			"_meta.progressToken": meta.ProgressToken, "_meta.protocolVersion": meta.Version,
			"_meta.clientCapabilities": meta.Capabilities, "_meta.clientInfo": meta.ClientInfo, "_meta.logLevel": meta.LogLevel,
			"_meta.traceparent": meta.Traceparent, "_meta.tracestate": meta.Tracestate,
		}
		got := map[string][]byte{"id": r.ID}
		for _, name := range []string{ParamName, ParamURI, ParamTaskID, ParamArguments, ParamRequestState, ParamInputResponses,
			ParamLevel, ParamProtocolVersion, ParamCapabilities, ParamClientInfo, ParamRequestID, ParamReason, ParamNotifications} {
			got["params."+name], _ = r.Param(name)
		}
		for key, short := range map[string]string{MetaProgressToken: "progressToken", MetaProtocolVersion: "protocolVersion",
			MetaClientCapabilities: "clientCapabilities", MetaClientInfo: "clientInfo", MetaLogLevel: "logLevel",
			MetaTraceparent: "traceparent", MetaTracestate: "tracestate"} {
			got["_meta."+short], _ = r.Meta(key)
		}
		if r.Method != ref.Method {
			t.Fatalf("%s: the gateway reads method %q, a case-insensitive decoder %q", raw, r.Method, ref.Method)
		}
		for k, w := range want {
			if !bytes.Equal(got[k], w) {
				t.Fatalf("%s: the gateway reads %s as %s, a case-insensitive decoder as %s", raw, k, got[k], w)
			}
		}
	})
}

// BenchmarkReadRequest is the envelope of every call: parsed, validated
// and read for what the gateway acts on, the payload left as bytes.
//
//	go test -run '^$' -bench BenchmarkReadRequest -benchmem ./mcp
func BenchmarkReadRequest(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello from the bench"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":7}}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		m, err := jsonrpc.Parse(body)
		if err != nil {
			b.Fatal(err)
		}
		req, err := Read(m)
		if err != nil || req.Method != MethodToolsCall {
			b.Fatalf("%v, %+v", err, req)
		}
	}
}
