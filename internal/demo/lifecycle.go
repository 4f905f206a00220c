package demo

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/stdiomcp/gateway/mcp"
)

// initialize and discover are the two eras' ways to meet a client; the
// log level and progress decide which notifications a request gets.

func (s *server) initialize(_ context.Context, r *request) (any, *rpcError) {
	var p struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(r.params, &p)
	version := mcp.LatestLegacy
	if mcp.IsLegacy(p.ProtocolVersion) {
		version = p.ProtocolVersion
	}
	s.mu.Lock()
	s.clientCaps = p.Capabilities
	s.mu.Unlock()
	return map[string]any{
		"protocolVersion": version,
		"capabilities":    s.capabilities(false),
		"serverInfo":      serverInfo(),
		"instructions":    instructions,
	}, nil
}

func (s *server) discover(_ context.Context, r *request) (any, *rpcError) {
	return map[string]any{
		"supportedVersions": []string{mcp.Modern},
		"capabilities":      s.capabilities(true),
		"instructions":      instructions,
		"_meta":             map[string]any{mcp.MetaServerInfo: serverInfo()},
	}, nil
}

func (s *server) capabilities(modern bool) map[string]any {
	c := map[string]any{
		"tools":       map[string]any{"listChanged": true},
		"prompts":     map[string]any{"listChanged": true},
		"resources":   map[string]any{"subscribe": true, "listChanged": true},
		"completions": map[string]any{},
		// In both eras: a server that sends log messages "MUST declare the
		// logging capability" (2026-07-28 too, where the client's level
		// comes with each request).
		"logging": map[string]any{},
	}
	if modern {
		c["extensions"] = map[string]any{mcp.TasksExtension: map[string]any{}}
	}
	return c
}

func (s *server) setLevel(_ context.Context, r *request) (any, *rpcError) {
	var p struct {
		Level string `json:"level"`
	}
	if json.Unmarshal(r.params, &p) != nil || mcp.LogRank(p.Level) < 0 {
		return nil, invalidParams("level must be one of "+strings.Join(mcp.LogLevels(), ", "), nil)
	}
	s.mu.Lock()
	s.logLevel = p.Level
	s.mu.Unlock()
	return map[string]any{}, nil
}

// log sends a notifications/message if the request's log level lets it
// through; a modern request without a level gets none.
func (s *server) log(r *request, level, text string) {
	if r.logLevel == "" || mcp.LogRank(level) < mcp.LogRank(r.logLevel) {
		return
	}
	params, _ := json.Marshal(map[string]any{"level": level, "logger": "demo", "data": text})
	s.send(message{JSONRPC: "2.0", Method: mcp.NoteMessage, Params: params})
}

// progress sends a progress notification if the request asked for them.
func (s *server) progress(r *request, done, total int, msg string) {
	if r.progress == nil {
		return
	}
	params, _ := json.Marshal(map[string]any{"progressToken": r.progress, "progress": done, "total": total, "message": msg})
	s.send(message{JSONRPC: "2.0", Method: mcp.NoteProgress, Params: params})
}
