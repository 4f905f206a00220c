package main

// The checker of the OpenAPI tests: one request and its answer against
// openapi.yaml, problems against the Problem schema, and the events of a
// stream against the schemas the document names for them.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// liveExchange is one request and what its answer must be.
type liveExchange struct {
	name, method, path string
	header             []string // name, value, ...
	body               string   // sent as application/json unless header says otherwise
	status             int
	kind               string // the problem's kind (of the answer, or of a stream's error event)
	last               string // a stream's last event: result or error
	progress           bool   // a stream has progress events before its last
	eventStatus        int    // the status in a stream's error event
	invalid            bool   // the request breaks openapi.yaml: the document refuses it too
	undocumented       bool   // not a route of openapi.yaml (a problem all the same)
	check              func(t *testing.T, body []byte)
}

// liveSpec is openapi.yaml, valid, with a router over its operations.
type liveSpec struct {
	doc    *openapi3.T
	router routers.Router
}

var registerDecoders sync.Once

func loadLiveSpec(t *testing.T) *liveSpec {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile("../../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not valid: %v", err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	// kin-openapi decodes none of these; their schemas are strings.
	registerDecoders.Do(func() {
		for _, ct := range []string{"text/event-stream", "text/html", "text/css", "text/javascript"} {
			openapi3filter.RegisterBodyDecoder(ct, openapi3filter.FileBodyDecoder)
		}
	})
	return &liveSpec{doc: doc, router: router}
}

// exchange sends ex's request to the gateway at base, and checks the
// request and the answer against the document and ex.
func (s *liveSpec) exchange(t *testing.T, base string, ex liveExchange) {
	t.Run(ex.name, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		newRequest := func() *http.Request {
			req, err := http.NewRequestWithContext(ctx, ex.method, base+ex.path, strings.NewReader(ex.body))
			if err != nil {
				t.Fatal(err)
			}
			if ex.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			for i := 0; i+1 < len(ex.header); i += 2 {
				req.Header.Set(ex.header[i], ex.header[i+1])
			}
			return req
		}
		checked := newRequest()
		route, params, err := s.router.FindRoute(checked)
		if (err == nil) == ex.undocumented {
			t.Fatalf("%s %s: route found in openapi.yaml = %v, want %v (%v)", ex.method, ex.path, err == nil, !ex.undocumented, err)
		}
		var in *openapi3filter.RequestValidationInput
		if route != nil {
			in = &openapi3filter.RequestValidationInput{Request: checked, PathParams: params, Route: route,
				Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
			err := openapi3filter.ValidateRequest(ctx, in)
			if ex.invalid && err == nil {
				t.Errorf("openapi.yaml allows a request the test means to break it")
			} else if !ex.invalid && err != nil {
				t.Errorf("the request does not match openapi.yaml: %v", err)
			}
		}
		resp, err := http.DefaultClient.Do(newRequest())
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != ex.status {
			t.Fatalf("status %d, want %d; body %.2000s", resp.StatusCode, ex.status, body)
		}
		if in != nil {
			in.Request = newRequest()
			err := openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
				RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
				Body: io.NopCloser(bytes.NewReader(body)), Options: &openapi3filter.Options{IncludeResponseStatus: true},
			})
			if err != nil {
				t.Errorf("the answer does not match openapi.yaml: %v\nbody: %.2000s", err, body)
			}
		}
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		switch {
		case resp.StatusCode >= 400 && strings.HasPrefix(ex.path, "/v1/"):
			if mt != "application/problem+json" {
				t.Fatalf("Content-Type %q, want application/problem+json", mt)
			}
			s.problem(t, body, ex.kind, resp.StatusCode)
		case ex.last != "":
			if mt != "text/event-stream" {
				t.Fatalf("Content-Type %q, want text/event-stream", mt)
			}
			s.stream(t, route, body, ex)
		}
		if ex.check != nil {
			ex.check(t, body)
		}
	})
}

// problem checks a problem against the Problem schema, its kind and its
// status.
func (s *liveSpec) problem(t *testing.T, body []byte, kind string, status int) {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("a problem that is not JSON: %v: %s", err, body)
	}
	if err := s.doc.Components.Schemas["Problem"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		t.Errorf("not a Problem: %v\n%s", err, body)
	}
	var p struct {
		Type   string
		Status int
	}
	_ = json.Unmarshal(body, &p)
	if p.Type != "urn:stdiomcp:problem:"+kind || p.Status != status {
		t.Errorf("problem of type %q and status %d, want kind %s and %d: %s", p.Type, p.Status, kind, status, body)
	}
}

// stream checks an SSE answer: every event is one that openapi.yaml names
// (x-sse-events) with data matching its schema; progress events, then
// one last event, then the end.
func (s *liveSpec) stream(t *testing.T, route *routers.Route, body []byte, ex liveExchange) {
	t.Helper()
	schemas := map[string]*openapi3.Schema{}
	named, _ := route.Operation.Responses.Status(200).Value.Content.Get("text/event-stream").Extensions["x-sse-events"].(map[string]any)
	for event, ref := range named {
		r, _ := ref.(map[string]any)["$ref"].(string)
		sr := s.doc.Components.Schemas[strings.TrimPrefix(r, "#/components/schemas/")]
		if sr == nil {
			t.Fatalf("x-sse-events names %q for %s, not a schema of openapi.yaml", r, event)
		}
		schemas[event] = sr.Value
	}
	if len(schemas) == 0 {
		t.Fatal("openapi.yaml names no events (x-sse-events) for this stream")
	}
	events, err := readEvents(bytes.NewReader(body))
	if err != nil || len(events) == 0 {
		t.Fatalf("events %v, err %v; body %s", events, err, body)
	}
	progress := 0
	for i, ev := range events {
		schema := schemas[ev.name]
		if schema == nil {
			t.Errorf("event %d is a %q event, which openapi.yaml does not name", i, ev.name)
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
			t.Errorf("event %d (%s): data is not JSON: %v", i, ev.name, err)
		} else if err := schema.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("event %d (%s) does not match its schema: %v\ndata: %s", i, ev.name, err, ev.data)
		}
		switch {
		case i == len(events)-1:
			if ev.name != ex.last {
				t.Errorf("last event %q, want %q", ev.name, ex.last)
			}
		case ev.name == "progress":
			progress++
		default:
			t.Errorf("event %d is %q before the end; only progress comes before the last", i, ev.name)
		}
	}
	if ex.progress && progress == 0 {
		t.Errorf("no progress event before the %s", ex.last)
	}
	if last := events[len(events)-1]; last.name == "error" {
		s.problem(t, []byte(last.data), ex.kind, ex.eventStatus)
	}
}

// streamEvent is one event of a stream: its name ("message" when it has
// none) and its data lines, joined.
type streamEvent struct{ name, data string }

// readEvents reads a whole SSE stream as the WHATWG parser does: comments
// skipped, an event dispatched at a blank line when it has data.
func readEvents(r io.Reader) ([]streamEvent, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 64<<20)
	var events []streamEvent
	var name string
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data != nil {
				if name == "" {
					name = "message"
				}
				events = append(events, streamEvent{name: name, data: strings.Join(data, "\n")})
			}
			name, data = "", nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name = value
		case "data":
			data = append(data, value)
		}
	}
	return events, sc.Err()
}
