package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
)

// errExitedOnProbe: the child exited while probed with server/discover,
// which some legacy servers do with any request before initialize.
var errExitedOnProbe = errors.New("the child exited when probed with server/discover")

// handshake settles the child's era and learns what the child serves: a
// legacy child's InitializeResult, a modern child's DiscoverResult. Nothing
// else is sent to the child before it returns. With auto, a
// verdict of legacy from an earlier child of this configuration is reused:
// probing again would cost a legacy server the probe's wait, or its life.
func (ch *child) handshake(ctx context.Context) error {
	era := ch.b.opts.Era
	if era == EraAuto && ch.w.eraVerdict() == EraLegacy {
		era = EraLegacy
	}
	switch era {
	case EraModern:
		return ch.discover(ctx)
	case EraLegacy:
		init, err := ch.startInitialize(ctx)
		if err != nil {
			return err
		}
		raw, err := init.wait()
		return ch.finishInitialize(ctx, raw, err)
	}
	return ch.probe(ctx)
}

// discover is a modern child's handshake. Its DiscoverResult answers a
// 2025 client's initialize and says whether the child announces tool list
// changes (see watchTools). The child is known to be modern, so nothing
// else is tried: one that refuses server/discover, or does not answer it
// within HandshakeTimeout (the bound initialize has), fails to start.
func (ch *child) discover(ctx context.Context) error {
	c, err := ch.startInternal(ctx, mcp.MethodDiscover, mcp.ModernParams(ch.b.clientID, nil), ch.b.opts.HandshakeTimeout)
	if err != nil {
		return fmt.Errorf("ask the child's server/discover: %w", err)
	}
	raw, err := c.wait()
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("the child did not answer server/discover within %v (GATEWAY_HANDSHAKE_TIMEOUT): %w", ch.b.opts.HandshakeTimeout, err)
	}
	if err != nil {
		return fmt.Errorf("ask the child's server/discover: %w", err)
	}
	m, err := jsonrpc.Parse(raw)
	if err != nil {
		return fmt.Errorf("the child's answer to server/discover: %w", err)
	}
	if m.Result != nil && (len(m.Result) == 0 || m.Result[0] != '{') {
		return fmt.Errorf("the child's DiscoverResult is not an object: %s", head(m.Result))
	}
	if m.Result == nil {
		// auto would take this child for a legacy one, or (for -32022)
		// for a modern one of another revision, with nothing to answer a
		// 2025 client's initialize from; the setting says it speaks
		// this one.
		return fmt.Errorf("the child refused server/discover, though the era is set to modern: %s", head(m.Error))
	}
	ch.isModernAnswer(m)
	ch.setEra(EraModern)
	return nil
}

// probe follows the spec's stdio backward-compatibility rule: it asks
// server/discover; a DiscoverResult or a recognised modern error means
// modern, any other error means legacy (never keyed to one error code).
// With no answer in ProbeTimeout it tries initialize, but the probe stays
// open: a slow modern child whose DiscoverResult comes late still wins.
func (ch *child) probe(ctx context.Context) error {
	disc, err := ch.startInternal(ctx, mcp.MethodDiscover, mcp.ModernParams(ch.b.clientID, nil), 0)
	if err != nil {
		return fmt.Errorf("probe the child with server/discover: %w", err)
	}
	timer := time.NewTimer(ch.b.opts.ProbeTimeout)
	defer timer.Stop()
	p := &prober{ch: ch, ctx: ctx, disc: disc, timeout: timer.C, discWake: disc.Wake()}
	for {
		var done bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.timeout:
			ch.log.Info("no answer to server/discover yet; trying initialize (a late DiscoverResult still counts)", "waited", ch.b.opts.ProbeTimeout)
			err = p.tryInitialize()
		case <-p.discWake:
			done, err = p.discovered()
		case <-p.initWake:
			done, err = p.initialized()
		case <-p.giveUp:
			disc.abort(errRetired, "")
			return p.refused
		}
		if done || err != nil {
			return err
		}
	}
}

// prober is a probe under way: the server/discover still open, and the
// initialize tried beside it.
type prober struct {
	ch       *child
	ctx      context.Context
	disc     *call
	init     *call
	timeout  <-chan time.Time // when initialize is tried too
	discWake <-chan struct{}  // nil once server/discover is answered
	initWake <-chan struct{}  // nil until initialize is sent, and once it is answered
	refused  error            // initialize was refused while the probe was still open
	giveUp   <-chan time.Time // how long a refused initialize waits for the probe's answer
}

func (p *prober) tryInitialize() error {
	p.timeout = nil
	if p.init != nil {
		return nil
	}
	init, err := p.ch.startInitialize(p.ctx)
	if err == nil {
		p.init, p.initWake = init, init.Wake()
	}
	return err
}

// discovered takes the answer to server/discover, if it is in, and reports
// whether the handshake is over.
func (p *prober) discovered() (done bool, err error) {
	_, raw, answered, err := p.disc.Take()
	if !answered {
		return false, nil
	}
	p.discWake = nil
	if err != nil {
		if p.ch.endErr() != nil && p.init == nil {
			return true, errExitedOnProbe
		}
		return true, err
	}
	m, err := jsonrpc.Parse(raw)
	if err != nil {
		return true, fmt.Errorf("the child's answer to server/discover: %w", err)
	}
	if p.ch.isModernAnswer(m) {
		return true, p.ch.modern(p.init)
	}
	if p.refused != nil {
		return true, p.refused
	}
	p.ch.log.Info("child refused server/discover; treating it as legacy", "error", head(m.Error))
	return false, p.tryInitialize()
}

// initialized takes the answer to initialize, if it is in, and reports
// whether the handshake is over.
func (p *prober) initialized() (done bool, err error) {
	_, raw, answered, err := p.init.Take()
	if !answered {
		return false, nil
	}
	p.initWake = nil
	if p.discWake != nil {
		// Both answers may have come together; the select picks either,
		// and a DiscoverResult wins.
		if _, draw, ddone, derr := p.disc.Take(); ddone && derr == nil {
			if m, perr := jsonrpc.Parse(draw); perr == nil && p.ch.isModernAnswer(m) {
				return true, p.ch.modern(nil)
			}
		}
		if resp, perr := jsonrpc.Parse(raw); err == nil && perr == nil && resp.Error != nil {
			// A child that refuses initialize may be a slow modern one:
			// its answer to the probe still counts.
			p.refused = p.ch.finishInitialize(p.ctx, raw, err)
			p.giveUp = time.After(p.ch.b.opts.HandshakeTimeout)
			p.ch.log.Info("child refused initialize; waiting for its answer to server/discover", "error", head(resp.Error))
			return false, nil
		}
		p.disc.abort(errRetired, "") // a DiscoverResult after this is too late
	}
	return true, p.ch.finishInitialize(p.ctx, raw, err)
}

// errRetired ends a request of the gateway's own whose answer it no longer
// needs; the answer, if it ever comes, is dropped.
var errRetired = errors.New("retired: the answer is no longer needed")

// modern concludes the probe: the child is modern. An initialize still
// waiting is retired, never cancelled (the spec forbids cancelling it).
func (ch *child) modern(init *call) error {
	if init != nil {
		init.abort(errRetired, "")
	}
	ch.setEra(EraModern)
	ch.w.setVerdict(EraModern)
	return nil
}

// isModernAnswer reads the answer to server/discover: a result, or a modern
// error asking for another modern revision, means a modern child.
func (ch *child) isModernAnswer(m *jsonrpc.Message) bool {
	if m.Result != nil {
		ch.discoverResult = append([]byte(nil), m.Result...)
		return true
	}
	if code, ok := mcp.ErrorCode(m.Error); ok && code == mcp.CodeUnsupportedVersion {
		ch.log.Warn("child is modern but does not support "+mcp.Modern, "error", head(m.Error))
		return true
	}
	return false
}

// startInitialize sends the legacy handshake's initialize, declaring the
// client capabilities the gateway can serve by relaying the child's
// requests to the client of the call in flight (see question).
func (ch *child) startInitialize(ctx context.Context) (*call, error) {
	c, err := ch.startInternal(ctx, mcp.MethodInitialize, mcp.InitializeParams(ch.b.clientID), ch.b.opts.HandshakeTimeout)
	if err != nil {
		return nil, fmt.Errorf("initialize the child: %w", err)
	}
	return c, nil
}

// finishInitialize checks the InitializeResult and completes the legacy
// handshake with notifications/initialized, once per child process.
func (ch *child) finishInitialize(ctx context.Context, raw []byte, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("the child did not answer initialize within %v (GATEWAY_HANDSHAKE_TIMEOUT): %w", ch.b.opts.HandshakeTimeout, err)
	}
	if err != nil {
		return fmt.Errorf("initialize the child: %w", err)
	}
	resp, err := jsonrpc.Parse(raw)
	if err != nil {
		return fmt.Errorf("the child's answer to initialize: %w", err)
	}
	if resp.Error != nil {
		ch.w.setVerdict("") // perhaps not legacy after all: the next child is probed
		return fmt.Errorf("the child refused initialize: %s", head(resp.Error))
	}
	if len(resp.Result) == 0 || resp.Result[0] != '{' {
		return fmt.Errorf("the child's InitializeResult is not an object: %s", head(resp.Result))
	}
	init := mcp.ReadInitialize(resp.Result)
	if !mcp.IsLegacy(init.ProtocolVersion) {
		// The lifecycle spec says a client that does not speak the version
		// the server chose should disconnect.
		return fmt.Errorf("the child chose protocol version %q, which the gateway does not speak", init.ProtocolVersion)
	}
	if err := ch.t.WriteMessage(ctx, jsonrpc.NewNotification(mcp.NoteInitialized, nil)); err != nil {
		return fmt.Errorf("send notifications/initialized: %w", err)
	}
	ch.setEra(EraLegacy)
	ch.initResult = append([]byte(nil), resp.Result...)
	ch.logs = init.Logging
	if ch.b.opts.Era == EraAuto {
		ch.w.setVerdict(EraLegacy)
	}
	ch.log.Info("child initialized", "protocol_version", init.ProtocolVersion,
		"server", init.ServerName, "server_version", init.ServerVersion)
	return nil
}

// startInternal sends a request of the gateway's own, which ends by itself
// after timeout (0: only when ctx does). It is never cancelled toward the
// child.
func (ch *child) startInternal(ctx context.Context, method string, params []byte, timeout time.Duration) (*call, error) {
	// The deadline bounds the write too: a wedged child may not read.
	cancel := context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	c := ch.newCall(ctx, callSpec{method: method, params: params, onEnd: func(*call) { cancel() }})
	if err := ch.start(ctx, c, nil); err != nil {
		return nil, err
	}
	return c, nil
}

// internal makes a request of the gateway's own and waits for its
// response, at most timeout.
func (ch *child) internal(ctx context.Context, method string, params []byte, timeout time.Duration) (*jsonrpc.Message, error) {
	c, err := ch.startInternal(ctx, method, params, timeout)
	if err != nil {
		return nil, err
	}
	raw, err := c.wait()
	if err != nil {
		return nil, err
	}
	return jsonrpc.Parse(raw)
}

// answerInitialize answers a legacy client's initialize from what the
// gateway learned of the child: the child is shared and already
// initialized, so the request is never forwarded.
func (ch *child) answerInitialize(req *mcp.Request) *call {
	asked, _ := req.String(mcp.ParamProtocolVersion) // a missing or odd version gets the latest
	if ch.initResult != nil {
		return answeredByGateway(req, mcp.InitializeResult(ch.initResult, asked))
	}
	// A modern child: the same facts come from its DiscoverResult.
	return answeredByGateway(req, mcp.InitializeFromDiscover(ch.discoverResult, asked, ch.b.clientID))
}
