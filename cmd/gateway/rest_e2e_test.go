package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// restProblem is the part of a problem+json body the tests read.
type restProblem struct {
	Type   string          `json:"type"`
	Status int             `json:"status"`
	Code   int             `json:"code"`
	Result json.RawMessage `json:"result"`
}

// restDo sends a REST request and returns the status, content type and body.
func restDo(t *testing.T, method, url, body string, header ...string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	r := do(t, http.DefaultClient, req)
	return r.status, r.header.Get("Content-Type"), r.body
}

// sseEvent is one event of a REST stream.
type sseEvent struct{ name, data string }

// readSSEEvents reads named events until the stream ends.
func readSSEEvents(r io.Reader, each func(sseEvent) bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.name != "" || ev.data != "" {
				if !each(ev) {
					return
				}
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		}
	}
}

// The REST API against the real demo child, spoken to in each era: the
// answers, the stream of progress, cancellation by closing the connection,
// and the problems a REST user meets.
func TestRESTAgainstEachEra(t *testing.T) {
	t.Parallel()
	for _, era := range []string{"legacy", "modern"} {
		t.Run(era, func(t *testing.T) {
			t.Parallel()
			g := startGateway(t, nil, "--", gatewayBin, "demo", "-era", era)
			base := strings.TrimSuffix(g.URL, "/mcp")

			status, ct, body := restDo(t, http.MethodPost, base+"/v1/tools/echo", `{"text":"héllo"}`)
			if status != 200 || ct != "application/json" || !strings.Contains(string(body), `"text":"héllo"`) {
				t.Errorf("echo: %d %s %s", status, ct, body)
			}
			status, _, body = restDo(t, http.MethodGet, base+"/v1/tools", "")
			var list struct{ Tools []struct{ Name string } }
			if err := json.Unmarshal(body, &list); status != 200 || err != nil || len(list.Tools) < 5 {
				t.Errorf("tools: %d %s", status, body)
			}

			for _, c := range []struct {
				name, method, path, body string
				status                   int
				kind                     string
			}{
				{"tool error", "POST", "/v1/tools/test_error_handling", "", 422, "tool-error"},
				{"unknown tool", "POST", "/v1/tools/nope", "{}", 404, "unknown-tool"},
				{"arguments off the schema", "POST", "/v1/tools/echo", `{"text":5}`, 400, "invalid-arguments"},
				{"a question the REST API cannot answer", "POST", "/v1/tools/test_elicitation", `{"message":"hi"}`, 422, "input-required"},
				{"unknown resource", "GET", "/v1/resources/read?uri=test://nope", "", 404, "not-found"},
				{"unknown prompt", "GET", "/v1/prompts/nope", "", 404, "not-found"},
				{"server-side timeout asked for", "POST", "/v1/tools/slow?timeout=100ms", `{"duration_ms":20000}`, 504, "timeout"},
			} {
				status, ct, body := restDo(t, c.method, base+c.path, c.body)
				var p restProblem
				if err := json.Unmarshal(body, &p); err != nil || status != c.status || ct != "application/problem+json" ||
					p.Type != "urn:stdiomcp:problem:"+c.kind || p.Status != c.status {
					t.Errorf("%s: %d %s %s", c.name, status, ct, body)
				}
			}
			if era == "modern" {
				status, _, body := restDo(t, http.MethodPost, base+"/v1/tools/test_input_required_result_elicitation", "")
				if status != 422 || !strings.Contains(string(body), "input-required") {
					t.Errorf("input_required: %d %s", status, body)
				}
			}
			status, _, body = restDo(t, http.MethodGet, base+"/v1/resources/read?uri=test://static-text", "")
			if status != 200 || !strings.Contains(string(body), "static text resource") {
				t.Errorf("read: %d %s", status, body)
			}
			status, _, body = restDo(t, http.MethodGet, base+"/v1/prompts/test_prompt_with_arguments?arg1=a&arg2=b", "")
			if status != 200 || !strings.Contains(string(body), "arg1='a', arg2='b'") {
				t.Errorf("prompt: %d %s", status, body)
			}

			// The timeout above was cancelled toward the child; so is a
			// stream whose client goes away after two progress events.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/tools/slow", strings.NewReader(`{"duration_ms":20000,"interval_ms":20}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			progress := 0
			readSSEEvents(resp.Body, func(ev sseEvent) bool {
				var p struct {
					Progress *float64 `json:"progress"`
					Total    *float64 `json:"total"`
				}
				if ev.name != "progress" || json.Unmarshal([]byte(ev.data), &p) != nil || p.Progress == nil || p.Total == nil {
					t.Errorf("event %q: %s", ev.name, ev.data)
					return false
				}
				progress++
				return progress < 2
			})
			cancel()
			resp.Body.Close()
			// (A legacy child's question that the gateway could not relay
			// was cancelled too.)
			want := 2
			if era == "legacy" {
				want = 3
			}
			got := demoReceived(t, g.URL, want)
			reasons := map[string]bool{}
			for _, c := range got.Cancellations {
				reasons[c.Reason] = true
			}
			if len(got.Cancellations) != want || !reasons["the call's timeout passed"] || !reasons["client disconnected"] {
				t.Errorf("the child saw these cancellations, want the timeout's and the closed stream's: %+v", got.Cancellations)
			}

			// A stream that runs to its end: progress, then the result.
			start := time.Now()
			status, ct, body = restDo(t, http.MethodPost, base+"/v1/tools/slow", `{"duration_ms":100,"interval_ms":20}`, "Accept", "text/event-stream")
			var names []string
			readSSEEvents(strings.NewReader(string(body)), func(ev sseEvent) bool { names = append(names, ev.name); return true })
			if status != 200 || ct != "text/event-stream" || len(names) < 2 || names[0] != "progress" || names[len(names)-1] != "result" {
				t.Errorf("stream after %v: %d %s events %v", time.Since(start), status, ct, names)
			}
		})
	}
}
