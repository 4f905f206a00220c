// Command gateway serves a stdio MCP server over HTTP. See gateway -h.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	contract "github.com/stdiomcp/gateway"
	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/detach"
	"github.com/stdiomcp/gateway/heapfloor"
	"github.com/stdiomcp/gateway/httpapi"
	"github.com/stdiomcp/gateway/internal/demo"
	"github.com/stdiomcp/gateway/metrics"
	"github.com/stdiomcp/gateway/procs"
	"github.com/stdiomcp/gateway/stdio"
)

const version = "0.1.0"

// The bridge serves a child through these: what stdio.Process offers decides
// how a wedged child is killed, when a broken pipe ends a child, how the
// child's questions that come together are batched, and whether requests
// that come together go out in one write. A rename in
// either package must not change that silently.
var (
	_ bridge.Transport      = (*stdio.Process)(nil)
	_ bridge.Breaker        = (*stdio.Process)(nil)
	_ bridge.Bufferer       = (*stdio.Process)(nil)
	_ bridge.TryWriter      = (*stdio.Process)(nil)
	_ bridge.Gatherer       = (*stdio.Process)(nil)
	_ bridge.Killer         = (*stdio.Process)(nil)
	_ bridge.Pider          = (*stdio.Process)(nil)
	_ bridge.SkippedMessage = (*stdio.TooLongError)(nil)
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, errUsage) {
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

// configError says what is wrong with the settings, and where to find them
// all: the whole table would bury the line that matters.
func configError(err error) error {
	return fmt.Errorf("configuration: %w\n(gateway -h lists every setting, its default and its meaning)", err)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "demo":
			return demo.Run(ctx, args[1:], stdin, stdout, stderr)
		case "healthcheck":
			return healthcheck(ctx, args[1:], stderr)
		case "token":
			return runToken(args[1:], stdin, stdout, stderr)
		case "-h", "-help", "--help", "help":
			usage(stdout)
			return nil
		}
	}
	var childArgs []string
	if i := slices.Index(args, "--"); i >= 0 {
		childArgs, args = args[i+1:], args[:i]
	}
	if len(args) > 0 {
		usage(stderr)
		fmt.Fprintf(stderr, "\nunexpected argument %q: put the child's command after --\n", args[0])
		return errUsage
	}
	cfg, err := loadConfig()
	if err != nil {
		return configError(err)
	}
	// From here on everything for stderr goes through the sink, so that
	// an error said at exit cannot overtake a log line written before it.
	sink := newLogSink(stderr)
	defer sink.Close()
	stderr = sink
	log := cfg.logger(sink)
	names, meant := unknownSettings(os.Environ())
	for i, name := range names {
		if meant[i] != "" {
			log.Warn("a GATEWAY_ variable that is not a setting is ignored", "name", name, "did_you_mean", meant[i])
		} else {
			log.Warn("a GATEWAY_ variable that is not a setting is ignored (gateway -h lists them)", "name", name)
		}
	}
	argv, err := childCommand(cfg, childArgs, log)
	if err != nil {
		return err
	}
	// A program that is not there will not appear by restarting it; say so
	// now rather than retry forever.
	program := argv[0]
	if cfg.ChildDir != "" && strings.ContainsRune(program, filepath.Separator) && !filepath.IsAbs(program) {
		// The child runs in GATEWAY_CHILD_DIR, where a relative path is
		// taken from.
		program = filepath.Join(cfg.ChildDir, program)
	}
	if _, err := exec.LookPath(program); err != nil {
		return fmt.Errorf("the child command: %w", err)
	}
	k, err := loadKeys(cfg)
	if err != nil {
		return configError(err)
	}
	if !k.shared {
		log.Info("no GATEWAY_SECRET: 2025 sessions and parked calls are valid on this gateway process only")
	} else if k.accepted.session != nil {
		log.Info("GATEWAY_SECRET_ACCEPT is set: what was signed with that key is accepted too (remove it once every replica signs with GATEWAY_SECRET and GATEWAY_SESSION_TTL has passed)")
	}
	// Always: the environment may hold tokens, keys, or the operator's
	// own secrets that GATEWAY_CHILD_ENV does not hand on.
	if err := hideEnviron(); err != nil {
		log.Warn("cannot hide the gateway's environment from processes of its user; a child could read the gateway's settings there", "err", err)
	}
	g, err := newGuard(cfg, log)
	if err != nil {
		return configError(err)
	}
	// SIGHUP reloads the tokens once the gateway serves (watchAuth), and
	// with no authentication changes nothing; until then, and after, it
	// must not end the process, as its default would.
	signal.Ignore(syscall.SIGHUP)
	if g.auth != nil {
		log.Info("authentication on", "static_tokens", g.auth.Tokens(), "tokens_file", cfg.AuthTokensFile,
			"policy_file", cfg.AuthPolicyFile, "oauth_issuer", cfg.OauthIssuer, "oauth_resource", cfg.OauthResource)
	}
	if g.limiter != nil {
		log.Info("per-client limits on", "rate", cfg.RateLimit, "burst", rateBurst(cfg), "streams", cfg.MaxStreamsPerClient, "trusted_proxies", cfg.TrustedProxies)
	}
	ch, err := newChild(cfg, argv, log)
	if err != nil {
		return configError(err)
	}
	return serve(ctx, cfg, k, g, ch, log)
}

// childCommand picks the child: the words after --, else GATEWAY_COMMAND,
// else this binary's own demo server.
func childCommand(cfg Config, childArgs []string, log *slog.Logger) ([]string, error) {
	if len(childArgs) > 0 {
		if cfg.Command != "" {
			log.Info("the command after -- takes precedence over GATEWAY_COMMAND", "ignored", cfg.Command)
		}
		return childArgs, nil
	}
	if cfg.Command != "" {
		words, err := splitCommand(cfg.Command)
		if err != nil {
			return nil, err
		}
		if len(words) == 0 {
			return nil, errors.New("GATEWAY_COMMAND has no words")
		}
		return words, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the gateway's own binary for the demo server: %w", err)
	}
	return []string{self, "demo"}, nil
}

func serve(ctx context.Context, cfg Config, k keys, g guard, ch child, log *slog.Logger) error {
	// The addresses first: a gateway that will not serve (an address
	// taken, or exposed without authentication when that is refused)
	// never starts the child.
	tcpLn, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// Streams that left the server (package detach) give their
	// connections back through the listener.
	ln := detach.NewListener(tcpLn)
	var adminLn net.Listener
	if cfg.AdminAddr != "" {
		if adminLn, err = net.Listen("tcp", cfg.AdminAddr); err != nil {
			ln.Close()
			return fmt.Errorf("listen on the admin address: %w", err)
		}
		warnAdminExposed(adminLn.Addr(), log)
	}
	tcp, _ := ln.Addr().(*net.TCPAddr)
	loopback := tcp != nil && tcp.IP.IsLoopback()
	if err := checkExposure(cfg, loopback, g.auth != nil, ln.Addr().String(), log); err != nil {
		ln.Close()
		if adminLn != nil {
			adminLn.Close()
		}
		return err
	}
	m := metrics.New(cfg.Workers)
	b := newBridge(cfg, k, ch, log, m)
	m.Watch(b)
	streams := detach.New(ln.Reuse, cfg.IdleTimeout)
	m.StreamsDetached(func() float64 { return float64(streams.Live()) })
	if g.auth != nil {
		defer watchAuth(ctx, g.auth, log)()
	} else {
		defer saySIGHUPChangesNothing(ctx, log)()
	}
	defer adaptThreads(cfg, log)()
	defer keepHeapFloor(cfg, log)()
	srv := newServer(cfg, newHandler(cfg, k, g, b, m, streams, loopback, log), log)
	log.Info("listening", "addr", ln.Addr().String(), "child", ch.argv, "era", cfg.Era, "workers", b.Workers(), "version", version)
	served := make(chan error, 2)
	go func() { served <- srv.Serve(ln) }()
	var admin *http.Server
	if adminLn != nil {
		admin = newServer(cfg, httpapi.BodyDeadline(cfg.ClientTimeout)(adminHandler(m)), log)
		log.Info("admin listening", "addr", adminLn.Addr().String(), "admin", true)
		go func() { served <- admin.Serve(adminLn) }()
	}

	select {
	case <-ctx.Done():
		b.Refuse() // before the log line says so
		log.Info("shutting down", "signal", context.Cause(ctx), "grace", cfg.ShutdownGrace)
	case err := <-served:
		srv.Close()
		if admin != nil {
			admin.Close()
		}
		b.Close(context.Background())
		return fmt.Errorf("serve: %w", err)
	}
	drain(b, cfg.ShutdownGrace, log)
	// Stop taking connections first; then end the calls in flight, which
	// tells the child about each and lets every handler answer its client;
	// then wait for those answers to go out.
	shutCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(shutCtx) }()
	b.Close(shutCtx)
	if err := <-shut; err != nil {
		log.Warn("some connections did not finish in time; closing them", "err", err)
		srv.Close()
	}
	// net/http does not wait for the streams that left it.
	if err := streams.Wait(shutCtx); err != nil {
		log.Warn("some streams did not finish in time; closed them", "err", err)
	}
	// Last, so that the shutdown can be watched to its end.
	if admin != nil {
		if err := admin.Shutdown(shutCtx); err != nil {
			admin.Close()
		}
	}
	log.Info("stopped")
	return nil
}

func newServer(cfg Config, h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler: h,
		// Both apply only between requests (the headers of a request, the
		// wait for the next on a kept-alive connection), never to a stream
		// being written.
		ReadHeaderTimeout: cfg.HeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		// net/http answers 431 beyond it (it reads up to 4 KiB more
		// before it tells).
		MaxHeaderBytes: cfg.MaxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// No ReadTimeout or WriteTimeout: they would cut SSE streams; the
		// handlers set per-request deadlines instead.
	}
}

// adminHandler serves what GATEWAY_ADMIN_ADDR is for: the metrics, and
// the runtime's profiles. The profiles are registered here by hand:
// net/http/pprof also puts them on http.DefaultServeMux, which the gateway
// never serves.
func adminHandler(m *metrics.Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("/debug/pprof/", pprof.Index) // and every named profile under it
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// wedgeTimeout maps the setting to the bridge's option: 0 turns the check
// off, which the bridge spells as a negative duration.
func wedgeTimeout(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// queueSize maps the setting to the pool's option: 0 means no call waits,
// which the pool spells as a negative size.
func queueSize(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// drain lets the calls in flight finish within grace while new ones are
// refused and /readyz says 503, so that a load balancer moves traffic
// elsewhere. A second SIGINT or SIGTERM ends the grace period at once.
func drain(b *bridge.Bridge, grace time.Duration, log *slog.Logger) {
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	go func() {
		select {
		case sig := <-again:
			log.Info("second signal: ending the grace period", "signal", sig)
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := b.Drain(ctx); err != nil {
		log.Warn("grace period over; cancelling the calls still in flight", "in_flight", b.Stats().InFlight)
		return
	}
	log.Info("calls in flight finished")
}

// newBridge starts the children: argv, as many as cfg says, supervised;
// obs (nil: nobody) is told what happens.
func newBridge(cfg Config, k keys, ch child, log *slog.Logger, obs bridge.Observer) *bridge.Bridge {
	argv := ch.argv
	start := func(ctx context.Context) (bridge.Transport, error) {
		clog := log.With("child", argv[0])
		if w, ok := bridge.WorkerOf(ctx); ok {
			clog = clog.With("worker", w)
		}
		return stdio.Start(stdio.Config{
			Path:            argv[0],
			Args:            argv[1:],
			Env:             ch.env,
			Dir:             ch.dir,
			MaxMessageBytes: cfg.MaxMessageBytes,
			StderrLineBytes: cfg.StderrLineBytes,
			StderrRate:      stderrRate(cfg.StderrRate),
			StdinGrace:      cfg.StdinGrace,
			TermGrace:       cfg.TermGrace,
			WriteStall:      cfg.ChildWriteTimeout,
			Logger:          clog,
		})
	}
	return bridge.New(start, bridge.Options{
		Era:              bridge.Era(cfg.Era),
		IdleTimeout:      cfg.CallIdleTimeout,
		MaxDuration:      cfg.CallMaxDuration,
		ProbeTimeout:     cfg.ProbeTimeout,
		HandshakeTimeout: cfg.HandshakeTimeout,
		RestartMin:       cfg.RestartDelayMin,
		RestartMax:       cfg.RestartDelayMax,
		WedgeTimeout:     wedgeTimeout(cfg.WedgeTimeout),
		Workers:          cfg.Workers,
		MaxInFlight:      cfg.MaxInFlight,
		QueueSize:        queueSize(cfg.QueueSize),
		QueueTimeout:     cfg.QueueTimeout,
		MaxListens:       cfg.MaxListens,
		ClientVersion:    version,
		StateKey:         k.requestState,
		AcceptedStateKey: k.accepted.requestState,
		Logger:           log,
		Observer:         obs,
		AfterDone:        detach.AfterDone,
	})
}

// newHandler is the HTTP front door on b, counted by m (nil: not
// counted), which it serves on /metrics unless an admin address does.
// loopback says whether the listener is on a loopback address (see
// httpapi.Options).
func newHandler(cfg Config, k keys, g guard, b *bridge.Bridge, m *metrics.Metrics, streams *detach.Streams, loopback bool, log *slog.Logger) http.Handler {
	opts := httpapi.Options{
		AuthMetrics:     cfg.AuthMetrics,
		TrustedProxies:  g.proxies,
		MaxBodyBytes:    cfg.MaxBodyBytes,
		MaxMessageBytes: int64(cfg.MaxMessageBytes),
		MaxCallDuration: cfg.CallMaxDuration,
		OpenAPI:         contract.OpenAPI(),
		KeepAlive:       cfg.SSEKeepAlive,
		ClientTimeout:   cfg.ClientTimeout,
		Logger:          log,
		Loopback:        loopback,
		AllowedHosts:    cfg.AllowedHosts,
		AllowedOrigins:  cfg.AllowedOrigins,
		SessionKey:      k.session,
		AcceptedKey:     k.accepted.session,
		SessionTTL:      cfg.SessionTTL,
		MaxSessions:     cfg.MaxSessions,
		Streams:         streams,
	}
	// Typed nils would make non-nil interfaces.
	if g.auth != nil {
		opts.Auth = g.auth
	}
	if g.limiter != nil {
		opts.Limiter = g.limiter
	}
	if m != nil {
		opts.Meter = m
		if cfg.AdminAddr == "" {
			opts.Metrics = m.Handler()
		}
	}
	return httpapi.New(b, opts)
}

// adaptThreads runs procs.Run unless GATEWAY_ADAPT_THREADS=false or the
// operator set GOMAXPROCS; the func it returns stops it and waits for it.
func adaptThreads(cfg Config, log *slog.Logger) func() {
	if !cfg.AdaptThreads {
		return func() {}
	}
	if os.Getenv("GOMAXPROCS") != "" {
		log.Info("GOMAXPROCS is set: as many threads run Go code throughout", "gomaxprocs", runtime.GOMAXPROCS(0))
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		procs.Run(ctx, procs.Options{Logger: log})
	}()
	return func() {
		cancel()
		<-done
	}
}

// keepHeapFloor runs heapfloor unless GATEWAY_HEAP_FLOOR_BYTES=0 or the
// operator set GOGC; the func it returns stops it.
func keepHeapFloor(cfg Config, log *slog.Logger) func() {
	if cfg.HeapFloorBytes == 0 {
		return func() {}
	}
	if gogc := os.Getenv("GOGC"); gogc != "" {
		log.Info("GOGC is set: the runtime paces garbage collection throughout", "gogc", gogc)
		return func() {}
	}
	return heapfloor.Start(heapfloor.Options{Floor: uint64(cfg.HeapFloorBytes), Logger: log})
}

// stderrRate is GATEWAY_STDERR_RATE as stdio takes it: there 0 is the
// default and a negative rate logs every line.
func stderrRate(perSecond int) int {
	if perSecond == 0 {
		return -1
	}
	return perSecond
}
