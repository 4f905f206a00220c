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

// errExitedOnProbe: the child exited while probed with server/discover,
// which some legacy servers do with any request before initialize.
var errExitedOnProbe = errors.New("the child exited when probed with server/discover")

// handshake settles the child's era and, for a legacy child, initializes it.
// Nothing else is sent to the child before it returns. With auto, a verdict
// of legacy from an earlier child of this configuration is reused: probing
// again would cost a legacy server the probe's wait, or its life.
func (s *session) handshake(ctx context.Context) error {
	era := s.b.opts.Era
	if era == EraAuto && s.b.verdict() == EraLegacy {
		era = EraLegacy
	}
	switch era {
	case EraModern:
		s.setEra(EraModern)
		return nil
	case EraLegacy:
		init, err := s.startInitialize(ctx)
		if err != nil {
			return err
		}
		raw, err := init.Wait()
		return s.finishInitialize(ctx, raw, err)
	}
	return s.probe(ctx)
}

// probe follows the spec's stdio backward-compatibility rule: it asks
// server/discover; a DiscoverResult or a recognised modern error means
// modern, any other error means legacy (never keyed to one error code).
// With no answer in ProbeTimeout it tries initialize, but the probe stays
// open: a slow modern child whose DiscoverResult comes late still wins.
func (s *session) probe(ctx context.Context) error {
	params, _ := json.Marshal(map[string]any{"_meta": s.b.modernMeta()})
	disc, err := s.startInternal(ctx, "server/discover", params, 0)
	if err != nil {
		return fmt.Errorf("probe the child with server/discover: %w", err)
	}
	timer := time.NewTimer(s.b.opts.ProbeTimeout)
	defer timer.Stop()
	var init *Call
	timeout, discWake, initWake := timer.C, disc.Wake(), (<-chan struct{})(nil)
	var refused error           // initialize was refused while the probe was still open
	var giveUp <-chan time.Time // how long a refused initialize waits for the probe's answer
	tryInitialize := func() error {
		timeout = nil
		if init != nil {
			return nil
		}
		var err error
		init, err = s.startInitialize(ctx)
		if err == nil {
			initWake = init.Wake()
		}
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout:
			s.log.Info("no answer to server/discover yet; trying initialize (a late DiscoverResult still counts)", "waited", s.b.opts.ProbeTimeout)
			if err := tryInitialize(); err != nil {
				return err
			}
		case <-discWake:
			_, raw, err, done := disc.Take()
			if !done {
				continue
			}
			discWake = nil
			if err != nil {
				if s.endErr() != nil && init == nil {
					return errExitedOnProbe
				}
				return err
			}
			m, err := jsonrpc.Parse(raw)
			if err != nil {
				return fmt.Errorf("the child's answer to server/discover: %w", err)
			}
			if s.isModernAnswer(m) {
				return s.modern(init)
			}
			if refused != nil {
				return refused
			}
			s.log.Info("child refused server/discover; treating it as legacy", "error", head(m.Error))
			if err := tryInitialize(); err != nil {
				return err
			}
		case <-initWake:
			_, raw, err, done := init.Take()
			if !done {
				continue
			}
			initWake = nil
			if discWake != nil {
				// Both answers may have come together; the select picks
				// either, and a DiscoverResult wins.
				if _, draw, derr, ddone := disc.Take(); ddone && derr == nil {
					if m, perr := jsonrpc.Parse(draw); perr == nil && s.isModernAnswer(m) {
						return s.modern(nil)
					}
				}
				if resp, perr := jsonrpc.Parse(raw); err == nil && perr == nil && resp.Error != nil {
					// A child that refuses initialize may be a slow modern
					// one: its answer to the probe still counts.
					refused = s.finishInitialize(ctx, raw, err)
					giveUp = time.After(s.b.opts.HandshakeTimeout)
					s.log.Info("child refused initialize; waiting for its answer to server/discover", "error", head(resp.Error))
					continue
				}
				s.retire(disc) // a DiscoverResult after this is too late
			}
			return s.finishInitialize(ctx, raw, err)
		case <-giveUp:
			s.retire(disc)
			return refused
		}
	}
}

// modern concludes the probe: the child is modern. An initialize still
// waiting is retired, never cancelled (the spec forbids cancelling it).
func (s *session) modern(init *Call) error {
	if init != nil {
		s.retire(init)
	}
	s.setEra(EraModern)
	s.b.setVerdict(EraModern)
	return nil
}

// isModernAnswer reads the answer to server/discover: a result, or a modern
// error asking for another modern revision, means a modern child.
func (s *session) isModernAnswer(m *jsonrpc.Message) bool {
	if m.Result != nil {
		s.discoverResult = append([]byte(nil), m.Result...)
		return true
	}
	if code, ok := errorCode(m.Error); ok && code == codeUnsupportedVersion {
		s.log.Warn("child is modern but does not support "+ModernVersion, "error", head(m.Error))
		return true
	}
	return false
}

// startInitialize sends the legacy handshake's initialize. The gateway
// declares the client capabilities it can serve by relaying the child's
// requests to the client of the call in flight (see question): sampling,
// elicitation and roots, with no list-change notifications. A request no
// client can answer is refused at once.
func (s *session) startInitialize(ctx context.Context) (*Call, error) {
	params, _ := json.Marshal(map[string]any{
		"protocolVersion": legacyVersions[0],
		"capabilities":    json.RawMessage(relayedCapabilities),
		"clientInfo":      s.b.clientInfo(),
	})
	c, err := s.startInternal(ctx, "initialize", params, s.b.opts.HandshakeTimeout)
	if err != nil {
		return nil, fmt.Errorf("initialize the child: %w", err)
	}
	return c, nil
}

// finishInitialize checks the InitializeResult and completes the legacy
// handshake with notifications/initialized, once per child process.
func (s *session) finishInitialize(ctx context.Context, raw []byte, err error) error {
	if err != nil {
		return fmt.Errorf("initialize the child: %w", err)
	}
	resp, err := jsonrpc.Parse(raw)
	if err != nil {
		return fmt.Errorf("the child's answer to initialize: %w", err)
	}
	if resp.Error != nil {
		s.b.setVerdict("") // perhaps not legacy after all: the next child is probed
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
	s.setEra(EraLegacy)
	s.initResult = append([]byte(nil), resp.Result...)
	s.logs = res.Capabilities.Logging != nil
	if s.b.opts.Era == EraAuto {
		s.b.setVerdict(EraLegacy)
	}
	s.log.Info("child initialized", "protocol_version", res.ProtocolVersion,
		"server", res.ServerInfo.Name, "server_version", res.ServerInfo.Version)
	return nil
}

// startInternal sends a request of the gateway's own, which ends by itself
// after timeout (0: only when ctx does). It is never cancelled toward the
// child.
func (s *session) startInternal(ctx context.Context, method string, params []byte, timeout time.Duration) (*Call, error) {
	cancel := context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	c := s.internalCall(method)
	c.mu.Lock()
	c.onEnd = cancel
	c.stopCtx = context.AfterFunc(ctx, func() { c.abort(ctx.Err(), "") })
	c.mu.Unlock()
	if err := s.start(ctx, c, method, params, true); err != nil {
		cancel()
		return nil, err
	}
	return c, nil
}

// internal makes a request of the gateway's own and waits for its response,
// at most timeout.
func (s *session) internal(ctx context.Context, method string, params []byte, timeout time.Duration) (*jsonrpc.Message, error) {
	c, err := s.startInternal(ctx, method, params, timeout)
	if err != nil {
		return nil, err
	}
	raw, err := c.Wait()
	if err != nil {
		return nil, err
	}
	return jsonrpc.Parse(raw)
}

// retire ends an internal call without telling the child: its answer, if
// it ever comes, is dropped.
func (s *session) retire(c *Call) {
	if ex := c.exchange(); ex != nil && s.claim(ex) {
		c.finish(nil, errors.New("retired"))
	}
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
