package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"github.com/stdiomcp/gateway/auth"
	"github.com/stdiomcp/gateway/clientlimit"
)

// guard is who may call and how much.
type guard struct {
	auth    *auth.Authenticator // nil: anyone
	limiter *clientlimit.Limiter
	proxies []netip.Prefix
}

func newGuard(cfg Config, log *slog.Logger) (guard, error) {
	var g guard
	var err error
	if g.auth, err = newAuth(cfg, log); err != nil {
		return g, err
	}
	if g.proxies, err = clientlimit.ParseProxies(cfg.TrustedProxies); err != nil {
		return g, fmt.Errorf("GATEWAY_TRUSTED_PROXIES: %w", err)
	}
	for _, p := range g.proxies {
		if p.Bits() == 0 {
			log.Warn("GATEWAY_TRUSTED_PROXIES trusts every address: any client may name itself in X-Forwarded-For, and so step around the per-client limits; name the proxies' addresses or subnet instead", "entry", p.String())
			break
		}
	}
	g.limiter = newLimiter(cfg)
	return g, nil
}

// newAuth builds who may call from the configuration; nil when nothing
// is configured (anyone who reaches the port may call).
func newAuth(cfg Config, log *slog.Logger) (*auth.Authenticator, error) {
	opts := auth.Options{
		Tokens:     cfg.AuthTokens,
		TokensFile: cfg.AuthTokensFile,
		PolicyFile: cfg.AuthPolicyFile,
		Poll:       cfg.AuthPoll,
		Logger:     log,
	}
	if cfg.OauthIssuer != "" {
		opts.OAuth = &auth.OAuth{
			Issuer:     cfg.OauthIssuer,
			Resource:   cfg.OauthResource,
			JWKSURL:    cfg.OauthJwksURL,
			Algorithms: cfg.OauthAlgorithms,
			Leeway:     cfg.OauthLeeway,
			Scopes:     cfg.OauthScopes,
		}
	} else if cfg.OauthResource != "" || cfg.OauthJwksURL != "" {
		return nil, errors.New("GATEWAY_OAUTH_RESOURCE and GATEWAY_OAUTH_JWKS_URL need GATEWAY_OAUTH_ISSUER")
	}
	a, err := auth.New(opts)
	if err != nil {
		return nil, err
	}
	if !a.Enabled() {
		// (auth.New refuses a policy file with no callers.)
		if cfg.AuthMetrics {
			return nil, errors.New("GATEWAY_AUTH_METRICS needs GATEWAY_AUTH_TOKENS, GATEWAY_AUTH_TOKENS_FILE or GATEWAY_OAUTH_ISSUER")
		}
		return nil, nil
	}
	return a, nil
}

// checkExposure is the warning (or, with GATEWAY_REQUIRE_AUTH, the error)
// for a gateway that anyone on the network may call: it runs a program
// for whoever reaches the port.
func checkExposure(cfg Config, loopback, authenticated bool, addr string, log *slog.Logger) error {
	if loopback {
		return nil
	}
	if authenticated {
		if !cfg.AuthMetrics && cfg.AdminAddr == "" {
			log.Warn("/metrics on this address needs no credentials, and it shows token names and counts of their calls; set GATEWAY_AUTH_METRICS=true or GATEWAY_ADMIN_ADDR", "addr", addr)
		}
		return nil
	}
	const msg = "no authentication is configured and the gateway listens on a non-loopback address: anyone who reaches it may call every tool"
	if cfg.RequireAuth {
		return fmt.Errorf("%s (%s); set GATEWAY_AUTH_TOKENS, GATEWAY_AUTH_TOKENS_FILE or GATEWAY_OAUTH_ISSUER, or listen on 127.0.0.1", msg, addr)
	}
	log.Warn("UNAUTHENTICATED: "+msg+"; set GATEWAY_AUTH_TOKENS, GATEWAY_AUTH_TOKENS_FILE or GATEWAY_OAUTH_ISSUER (GATEWAY_REQUIRE_AUTH=true makes this an error)", "addr", addr)
	return nil
}

// warnAdminExposed warns when the admin address, which serves /metrics and
// /debug/pprof/ with no credentials, is not a loopback one: a heap
// profile holds what the gateway's memory held, requests and answers too.
func warnAdminExposed(addr net.Addr, log *slog.Logger) {
	if tcp, ok := addr.(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
		log.Warn("GATEWAY_ADMIN_ADDR is not a loopback address: /metrics and /debug/pprof/ (whose heap profiles hold what requests and answers the gateway's memory held) need no credentials there; keep it to a network only operators reach", "admin_addr", addr.String())
	}
}

// watchAuth keeps the tokens and policy current until ctx ends: the
// files are polled, and SIGHUP re-reads them at once.
func watchAuth(ctx context.Context, a *auth.Authenticator, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{}, 2)
	go func() {
		a.Run(ctx)
		done <- struct{}{}
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := a.Reload(); err != nil {
					log.Error("SIGHUP: reloading the tokens and policy failed; the previous ones stay in force", "err", err)
				}
			}
		}
	}()
	return func() {
		// Ignored again rather than reset: SIGHUP's default ends the
		// process, and a reload asked for during the shutdown must not.
		signal.Ignore(syscall.SIGHUP)
		cancel()
		<-done
		<-done
	}
}

// saySIGHUPChangesNothing answers SIGHUP, with no authentication to
// reload, with a line in the log, until ctx ends: a signal an operator
// sends to reload should not pass unremarked, nor end the process.
func saySIGHUPChangesNothing(ctx context.Context, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				log.Info("SIGHUP: nothing to re-read (no authentication is configured); the gateway goes on")
			}
		}
	}()
	return func() {
		signal.Ignore(syscall.SIGHUP) // as watchAuth leaves it
		cancel()
		<-done
	}
}

// newLimiter builds the per-client limits; nil when there are none.
func newLimiter(cfg Config) *clientlimit.Limiter {
	if cfg.RateLimit == 0 && cfg.MaxStreamsPerClient == 0 {
		return nil
	}
	return clientlimit.New(clientlimit.Options{Rate: cfg.RateLimit, Burst: rateBurst(cfg), MaxStreams: cfg.MaxStreamsPerClient})
}

// rateBurst is GATEWAY_RATE_BURST, or the rate rounded up.
func rateBurst(cfg Config) int {
	if cfg.RateBurst == 0 && cfg.RateLimit > 0 {
		return int(math.Max(1, math.Ceil(cfg.RateLimit)))
	}
	return cfg.RateBurst
}

// child is the program the gateway runs, and what it runs with.
type child struct {
	argv []string
	env  []string // built from an allow list, never the gateway's whole environment
	dir  string
}

func newChild(cfg Config, argv []string, log *slog.Logger) (child, error) {
	env, missing, err := childEnvironment(os.Environ(), cfg.ChildEnv)
	if err != nil {
		return child{}, fmt.Errorf("GATEWAY_CHILD_ENV: %w", err)
	}
	if len(missing) > 0 {
		log.Warn("GATEWAY_CHILD_ENV names variables that are not set; the child runs without them", "missing", missing)
	}
	if cfg.ChildDir != "" {
		if err := checkChildDir(cfg.ChildDir); err != nil {
			return child{}, err
		}
	}
	return child{argv: argv, env: env, dir: cfg.ChildDir}, nil
}
