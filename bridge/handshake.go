package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// ModernVersion is the stateless protocol revision.
const ModernVersion = "2026-07-28"

// legacyVersions are the initialize-based revisions the gateway speaks,
// newest first.
var legacyVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

const (
	codeUnsupportedVersion = -32022
	codeMissingCapability  = -32021
)

// relayedCapabilities are the client capabilities the gateway declares to
// a legacy child.
const relayedCapabilities = `{"sampling":{},"elicitation":{},"roots":{}}`

// handshake settles the child's era and, for a legacy child, initializes it.
// Nothing else is sent to the child before it returns.
func (s *session) handshake(ctx context.Context) error {
	era := s.b.opts.Era
	if era == EraAuto {
		var err error
		if era, err = s.probe(ctx); err != nil {
			return err
		}
	}
	s.era = era
	if era == EraLegacy {
		return s.initialize(ctx)
	}
	s.log.Info("child ready", "era", era)
	return nil
}

// probe asks server/discover, as the spec's stdio backward-compatibility
// rule says: a DiscoverResult or a recognised modern error means modern; any
// other error or silence means legacy. The fallback is never keyed to one
// error code.
func (s *session) probe(ctx context.Context) (Era, error) {
	params, _ := json.Marshal(map[string]any{"_meta": s.b.modernMeta()})
	resp, err := s.internal(ctx, "server/discover", params, s.b.opts.ProbeTimeout)
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		s.log.Info("no answer to server/discover; treating the child as legacy", "waited", s.b.opts.ProbeTimeout)
		return EraLegacy, nil
	case err != nil:
		return "", fmt.Errorf("probe the child with server/discover: %w", err)
	case resp.Result != nil:
		s.discoverResult = append([]byte(nil), resp.Result...)
		return EraModern, nil
	}
	if code, ok := errorCode(resp.Error); ok && code == codeUnsupportedVersion {
		// A modern child that wants another modern revision is still modern.
		s.log.Warn("child is modern but does not support "+ModernVersion, "error", head(resp.Error))
		return EraModern, nil
	}
	s.log.Info("child refused server/discover; treating it as legacy", "error", head(resp.Error))
	return EraLegacy, nil
}

// initialize performs the legacy handshake once per child process. The
// gateway declares the client capabilities it can serve by relaying the
// child's requests to the client of the call in flight (see question):
// sampling, elicitation and roots, with no list-change notifications. A
// request no client can answer is refused at once.
func (s *session) initialize(ctx context.Context) error {
	params, _ := json.Marshal(map[string]any{
		"protocolVersion": legacyVersions[0],
		"capabilities":    json.RawMessage(relayedCapabilities),
		"clientInfo":      s.b.clientInfo(),
	})
	resp, err := s.internal(ctx, "initialize", params, s.b.opts.HandshakeTimeout)
	if err != nil {
		return fmt.Errorf("initialize the child: %w", err)
	}
	if resp.Error != nil {
		return fmt.Errorf("the child refused initialize: %s", head(resp.Error))
	}
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
		Capabilities    struct {
			Logging json.RawMessage `json:"logging"`
		} `json:"capabilities"`
		ServerInfo struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"serverInfo"`
	}
	if err := json.Unmarshal(resp.Result, &res); err != nil {
		return fmt.Errorf("the child's InitializeResult: %w", err)
	}
	if !slices.Contains(legacyVersions, res.ProtocolVersion) {
		// The lifecycle spec says a client that does not speak the version
		// the server chose should disconnect.
		return fmt.Errorf("the child chose protocol version %q, which the gateway does not speak", res.ProtocolVersion)
	}
	if err := s.t.WriteMessage(ctx, jsonrpc.NewNotification("notifications/initialized", nil)); err != nil {
		return fmt.Errorf("send notifications/initialized: %w", err)
	}
	s.initResult = append([]byte(nil), resp.Result...)
	s.logs = res.Capabilities.Logging != nil
	s.log.Info("child ready", "era", EraLegacy, "protocol_version", res.ProtocolVersion,
		"server", res.ServerInfo.Name, "server_version", res.ServerInfo.Version)
	return nil
}

// internal makes a request of the gateway's own and waits for its response,
// at most timeout. It is never cancelled toward the child.
func (s *session) internal(ctx context.Context, method string, params []byte, timeout time.Duration) (*jsonrpc.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := s.internalCall(method)
	c.mu.Lock()
	c.stopCtx = context.AfterFunc(ctx, func() { c.abort(ctx.Err(), "") })
	c.mu.Unlock()
	if err := s.start(ctx, c, method, params, true); err != nil {
		return nil, err
	}
	raw, err := c.Wait()
	if err != nil {
		return nil, err
	}
	return jsonrpc.Parse(raw)
}

func (b *Bridge) clientInfo() map[string]string {
	return map[string]string{"name": b.opts.ClientName, "version": b.opts.ClientVersion}
}

func (b *Bridge) modernMeta() map[string]any {
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion":    ModernVersion,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         b.clientInfo(),
	}
}

func errorCode(errObj []byte) (int, bool) {
	var e struct {
		Code *int `json:"code"`
	}
	if json.Unmarshal(errObj, &e) != nil || e.Code == nil {
		return 0, false
	}
	return *e.Code, true
}

// answerInitialize answers a legacy client's initialize from what the
// gateway learned of the child: the child is shared and already initialized,
// so the request is never forwarded.
func (s *session) answerInitialize(req *jsonrpc.Message) (*Call, error) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(req.Params, &p) // a missing or odd version gets the latest
	version := legacyVersions[0]
	if slices.Contains(legacyVersions, p.ProtocolVersion) {
		version = p.ProtocolVersion
	}
	result := map[string]json.RawMessage{}
	if s.initResult != nil {
		if err := json.Unmarshal(s.initResult, &result); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the child's InitializeResult is not an object"}
		}
	} else {
		// A modern child: the same facts come from its DiscoverResult.
		d := s.discovered()
		result["capabilities"] = orEmpty(d.Capabilities)
		if d.Instructions != nil {
			result["instructions"] = d.Instructions
		}
		result["serverInfo"] = d.Meta[metaServerInfo]
		if result["serverInfo"] == nil {
			result["serverInfo"], _ = json.Marshal(s.b.clientInfo())
		}
	}
	result["protocolVersion"], _ = json.Marshal(version)
	out, err := json.Marshal(result)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	return answered(req, out), nil
}

type discoverFacts struct {
	Capabilities json.RawMessage            `json:"capabilities"`
	Instructions json.RawMessage            `json:"instructions"`
	Meta         map[string]json.RawMessage `json:"_meta"`
}

func (s *session) discovered() discoverFacts {
	var d discoverFacts
	_ = json.Unmarshal(s.discoverResult, &d)
	return d
}

// answerDiscover answers server/discover for a legacy child, from its
// InitializeResult: a modern client gets the same facts in the 2026-07-28
// shape. The caching hint is "do not cache", as for every translated result.
func (s *session) answerDiscover(req *jsonrpc.Message) (*Call, error) {
	var init struct {
		Capabilities json.RawMessage `json:"capabilities"`
		Instructions json.RawMessage `json:"instructions"`
		ServerInfo   json.RawMessage `json:"serverInfo"`
	}
	_ = json.Unmarshal(s.initResult, &init)
	result := map[string]json.RawMessage{
		"resultType":        json.RawMessage(`"complete"`),
		"supportedVersions": json.RawMessage(`["` + ModernVersion + `"]`),
		"capabilities":      orEmpty(init.Capabilities),
		"ttlMs":             json.RawMessage("0"),
		"cacheScope":        json.RawMessage(`"private"`),
	}
	if init.Instructions != nil {
		result["instructions"] = init.Instructions
	}
	if init.ServerInfo != nil {
		meta, _ := json.Marshal(map[string]json.RawMessage{metaServerInfo: init.ServerInfo})
		result["_meta"] = meta
	}
	out, err := json.Marshal(result)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	return answered(req, out), nil
}

func orEmpty(b json.RawMessage) json.RawMessage {
	if b == nil {
		return json.RawMessage("{}")
	}
	return b
}

// ensureLogLevel makes a legacy child log at least as verbosely as level.
// Its level is session-wide, so the gateway keeps it at the most verbose
// level any client has asked for and filters per call (see routeLog). The
// request is written before the caller's, so a child that serves requests
// in order applies it first; the answer is not waited for, so the caller
// never waits on it. A failure costs log messages, not calls.
func (s *session) ensureLogLevel(level string) {
	if s.era != EraLegacy || !s.logs || logRank(level) < 0 {
		return
	}
	s.logMu.Lock()
	defer s.logMu.Unlock()
	if s.childLogLevel != "" && logRank(level) >= logRank(s.childLogLevel) {
		return
	}
	params, _ := json.Marshal(map[string]string{"level": level})
	ctx, cancel := context.WithTimeout(context.Background(), s.b.opts.CancelTimeout)
	c := s.internalCall("logging/setLevel")
	c.mu.Lock()
	c.stopCtx = context.AfterFunc(ctx, func() { c.abort(ctx.Err(), "") })
	c.mu.Unlock()
	if err := s.start(ctx, c, c.method, params, true); err != nil {
		cancel()
		s.log.Warn("could not set the child's log level", "level", level, "err", err)
		return
	}
	previous := s.childLogLevel
	s.childLogLevel = level
	s.b.spawn(func() {
		defer cancel()
		raw, err := c.Wait()
		var refused []byte
		if err == nil {
			if m, perr := jsonrpc.Parse(raw); perr == nil {
				refused = m.Error
			}
		}
		if err == nil && refused == nil {
			return
		}
		s.log.Warn("the child did not take logging/setLevel", "level", level, "err", err, "error", head(refused))
		s.logMu.Lock()
		defer s.logMu.Unlock()
		if s.childLogLevel == level {
			s.childLogLevel = previous
		}
	})
}
