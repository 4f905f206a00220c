package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

const maxBigBytes = 128 << 20

func toolList() []map[string]any {
	obj := func(props map[string]any, required ...string) map[string]any {
		s := map[string]any{"type": "object", "properties": props}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	}
	integer := func(desc string) map[string]any { return map[string]any{"type": "integer", "description": desc} }
	return []map[string]any{
		{"name": "echo", "description": "Returns its text.", "inputSchema": obj(map[string]any{
			"text": map[string]any{"type": "string", "description": "what to echo"},
		}, "text")},
		{"name": "slow", "description": "Works for duration_ms, sending progress every interval_ms when asked for it; stops at once when cancelled.", "inputSchema": obj(map[string]any{
			"duration_ms": integer("how long to work (default 2000)"),
			"interval_ms": integer("how often to report progress (default 100)"),
		})},
		{"name": "big", "description": "Returns a text result of the given size in bytes.", "inputSchema": obj(map[string]any{
			"bytes": integer(fmt.Sprintf("size of the text (at most %d)", maxBigBytes)),
		}, "bytes")},
		{"name": "received", "description": "Lists the requests and cancellations this server has received. With wait_cancelled it first waits (at most timeout_ms, default 10000) until that many cancellations have arrived.", "inputSchema": obj(map[string]any{
			"wait_cancelled": integer("cancellations to wait for"),
			"timeout_ms":     integer("the most to wait"),
		})},
	}
}

type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      struct {
		ProgressToken json.RawMessage `json:"progressToken"`
	} `json:"_meta"`
}

// startCall runs a tool on its own goroutine so that a slow tool never
// holds up other requests, and registers it for cancellation.
func (s *server) startCall(ctx context.Context, m *message) {
	var p callParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		s.send(errorResponse(m.ID, -32602, "invalid params: "+err.Error()))
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	key := string(m.ID)
	s.mu.Lock()
	s.inflight[key] = cancel
	s.mu.Unlock()
	s.wg.Go(func() {
		defer func() {
			s.mu.Lock()
			delete(s.inflight, key)
			s.mu.Unlock()
			cancel()
		}()
		res, err := s.runTool(ctx, &p)
		if ctx.Err() != nil {
			return // cancelled: the spec says to send nothing more for it
		}
		if err != nil {
			s.send(errorResponse(m.ID, -32602, err.Error()))
			return
		}
		s.send(result(m.ID, res))
	})
}

func text(s string) map[string]any {
	return map[string]any{"content": []map[string]any{{"type": "text", "text": s}}}
}

func (s *server) runTool(ctx context.Context, p *callParams) (map[string]any, error) {
	switch p.Name {
	case "echo":
		var a struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(p.Arguments, &a)
		return text(a.Text), nil
	case "slow":
		return s.slow(ctx, p)
	case "big":
		var a struct {
			Bytes int `json:"bytes"`
		}
		_ = json.Unmarshal(p.Arguments, &a)
		if a.Bytes < 0 || a.Bytes > maxBigBytes {
			return nil, fmt.Errorf("bytes must be between 0 and %d", maxBigBytes)
		}
		return text(strings.Repeat("x", a.Bytes)), nil
	case "received":
		return s.received(ctx, p)
	}
	return nil, fmt.Errorf("unknown tool %q", p.Name)
}

func (s *server) slow(ctx context.Context, p *callParams) (map[string]any, error) {
	a := struct {
		DurationMS int `json:"duration_ms"`
		IntervalMS int `json:"interval_ms"`
	}{2000, 100}
	_ = json.Unmarshal(p.Arguments, &a)
	if a.IntervalMS <= 0 || a.DurationMS < 0 {
		return nil, fmt.Errorf("interval_ms must be positive and duration_ms not negative")
	}
	steps := max(1, a.DurationMS/a.IntervalMS)
	for i := 1; i <= steps; i++ {
		if !sleepCtx(ctx, time.Duration(a.IntervalMS)*time.Millisecond) {
			return nil, ctx.Err()
		}
		if p.Meta.ProgressToken != nil {
			params, _ := json.Marshal(map[string]any{
				"progressToken": p.Meta.ProgressToken,
				"progress":      i,
				"total":         steps,
				"message":       fmt.Sprintf("step %d of %d", i, steps),
			})
			s.send(message{JSONRPC: "2.0", Method: "notifications/progress", Params: params})
		}
	}
	return text(fmt.Sprintf("done after %d steps", steps)), nil
}

func (s *server) received(ctx context.Context, p *callParams) (map[string]any, error) {
	a := struct {
		WaitCancelled int `json:"wait_cancelled"`
		TimeoutMS     int `json:"timeout_ms"`
	}{0, 10000}
	_ = json.Unmarshal(p.Arguments, &a)
	deadline := time.NewTimer(time.Duration(a.TimeoutMS) * time.Millisecond)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		enough := len(s.cancellations) >= a.WaitCancelled
		changed := s.changed
		snapshot := map[string]any{
			"requests":      append([]seenRequest{}, s.requests...),
			"cancellations": append([]seenCancel{}, s.cancellations...),
		}
		s.mu.Unlock()
		waited := false
		if !enough {
			select {
			case <-changed:
				continue
			case <-deadline.C:
				waited = true
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		body, _ := json.Marshal(snapshot)
		res := text(string(body))
		res["structuredContent"] = snapshot
		if waited {
			res["isError"] = true
			res["content"] = []map[string]any{{"type": "text", "text": fmt.Sprintf("gave up waiting for %d cancellations: %s", a.WaitCancelled, body)}}
		}
		return res, nil
	}
}
