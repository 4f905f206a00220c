package httpapi

import (
	"io"
	"testing"
)

// acceptCase is a call the fake child answers, and what the client gets.
type acceptCase struct {
	name, accept, body string
	notes              []string // what the child sends before it answers
	answer             string
	code               int  // the child's error code
	legacy             bool // a 2025 call, with no 2026-07-28 headers
	status             int
	contentType, got   string
}

// The Accept header decides the answer's media type: a client whose Accept
// leaves out text/event-stream gets one JSON answer (the progress it cannot
// take is dropped), one that lists both gets the stream as before, and one
// that takes text/event-stream alone gets even an answer with no progress
// as a stream of one event, unless its status is not 200 (an error is
// answered as the gateway's refusals are, in JSON).
func TestAcceptDecidesTheMediaType(t *testing.T) {
	t.Parallel()
	const (
		modernCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		plainCall  = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x",` + modernMeta + `}}`
		legacyCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`
		progress   = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`
		result     = `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`
		notFound   = `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`
		sse        = "text/event-stream"
		json       = "application/json"
	)
	stream := func(events ...string) string {
		s := ": stream open\n\n"
		for _, e := range events {
			s += "data: " + e + "\n\n"
		}
		return s
	}
	for _, tc := range []acceptCase{
		{name: "progress, json alone", accept: json, body: modernCall, notes: []string{progress}, answer: result, status: 200, contentType: json, got: result},
		{name: "progress, json with parameters", accept: "Application/JSON;q=0.9", body: modernCall, notes: []string{progress}, answer: result, status: 200, contentType: json, got: result},
		{name: "progress, stream refused", accept: "application/json, text/event-stream;q=0", body: modernCall, notes: []string{progress}, answer: result, status: 200, contentType: json, got: result},
		{name: "progress, both", accept: "application/json, text/event-stream", body: modernCall, notes: []string{progress}, answer: result, status: 200, contentType: sse, got: stream(progress, result)},
		{name: "no progress, both", accept: "application/json, text/event-stream", body: plainCall, answer: result, status: 200, contentType: json, got: result},
		{name: "no progress, any", accept: "*/*", body: plainCall, answer: result, status: 200, contentType: json, got: result},
		{name: "no progress, stream alone", accept: sse, body: plainCall, answer: result, status: 200, contentType: sse, got: stream(result)},
		{name: "no progress, json refused", accept: "text/event-stream, application/json;q=0", body: plainCall, answer: result, status: 200, contentType: sse, got: stream(result)},
		{name: "no progress, json refused with q=0.0", accept: "text/event-stream, application/json;q=0.0", body: plainCall, answer: result, status: 200, contentType: sse, got: stream(result)},
		{name: "progress, stream refused with q=0.000", accept: "application/json, text/event-stream;q=0.000", body: modernCall, notes: []string{progress}, answer: result, status: 200, contentType: json, got: result},
		{name: "legacy, stream alone", accept: sse, body: legacyCall, legacy: true, answer: result, status: 200, contentType: sse, got: stream(result)},
		{name: "child error, stream alone", accept: sse, body: plainCall, answer: notFound, code: -32601, status: 404, contentType: json, got: notFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testAccept(t, tc)
		})
	}
}

func testAccept(t *testing.T, tc acceptCase) {
	f := newFake()
	srv := newServer(t, f, Options{})
	go func() {
		c := f.next(t)
		for _, n := range tc.notes {
			c.note(n)
			<-c.taken // the note is taken before the answer comes
		}
		c.mu.Lock()
		c.code = tc.code
		c.mu.Unlock()
		c.finish([]byte(tc.answer), nil)
	}()
	header := modernHeaders("tools/call", "Mcp-Name", "x", "Accept", tc.accept)
	if tc.legacy {
		header = []string{"Accept", tc.accept}
	}
	resp := post(t, srv.URL+"/mcp", "application/json", tc.body, header...)
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != tc.status || ct != tc.contentType || string(got) != tc.got {
		t.Errorf("got %d %s %q, want %d %s %q", resp.StatusCode, ct, got, tc.status, tc.contentType, tc.got)
	}
}

// What the gateway answers itself for a 2025 session (logging/setLevel,
// resources/subscribe) comes as a stream of one event too, to a client
// that takes no JSON.
func TestGatewayAnswersToAStreamOnlyClient(t *testing.T) {
	t.Parallel()
	f := newFake()
	srv := newServer(t, f, Options{})
	sid := initialize(t, f, srv.URL)
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///a"}}`,
	} {
		resp := post(t, srv.URL+"/mcp", "application/json", body, "Mcp-Session-Id", sid, "Accept", "text/event-stream")
		got, _ := io.ReadAll(resp.Body)
		if want := ": stream open\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"; resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || string(got) != want {
			t.Errorf("%s: %d %s %q, want a stream of one event", body, resp.StatusCode, resp.Header.Get("Content-Type"), got)
		}
	}
}
