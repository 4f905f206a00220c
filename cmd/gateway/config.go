package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/stdiomcp/gateway/httpapi"
)

const envPrefix = "GATEWAY"

// Config is read from GATEWAY_* variables. Field names map to variable names
// by envconfig's split_words rule (MaxBodyBytes -> GATEWAY_MAX_BODY_BYTES).
// No field uses an envconfig:"NAME" tag: that would also read the unprefixed
// variable.
type Config struct {
	Addr    string `default:"127.0.0.1:8080" desc:"address to listen on (host:port)"`
	Command string `desc:"the stdio MCP server to run, split into words on spaces (quotes group words); a command after -- wins; empty: the built-in demo server"`
	Era     string `default:"auto" desc:"how to talk to the child: auto (probe with server/discover, fall back to initialize), legacy or modern"`
	Workers int    `default:"1" desc:"how many children to run (at most 256); each call goes to the one with the fewest calls in flight (unsafe for servers that keep state in memory between calls)"`

	MaxInFlight  int           `split_words:"true" default:"64" desc:"calls in flight per child; more wait in the queue"`
	QueueSize    int           `split_words:"true" default:"256" desc:"calls waiting for a free child; beyond it calls are refused at once (503, -32003); 0: none wait"`
	QueueTimeout time.Duration `split_words:"true" default:"30s" desc:"the longest a call waits in the queue, or for a child that is starting, before it is refused"`
	MaxListens   int           `split_words:"true" default:"1024" desc:"subscriptions/listen streams open at once, across children; beyond it a listen is refused at once (503, -32003)"`

	CallIdleTimeout  time.Duration `split_words:"true" default:"5m" desc:"a call with no response and no progress for this long times out (the child is told to cancel)"`
	CallMaxDuration  time.Duration `split_words:"true" default:"30m" desc:"no call runs longer than this, progress or not"`
	ProbeTimeout     time.Duration `split_words:"true" default:"10s" desc:"with era auto, how long to wait for an answer to server/discover before assuming a legacy child; also how long a liveness probe may go unanswered"`
	WedgeTimeout     time.Duration `split_words:"true" default:"1m" desc:"with nothing read from the child for this long while calls were pending (time with none pending does not count), the child is probed (ping or server/discover) and killed and restarted if the probe goes unanswered; 0: never"`
	HandshakeTimeout time.Duration `split_words:"true" default:"60s" desc:"how long the child may take to answer initialize (with GATEWAY_ERA=modern, server/discover)"`
	RestartDelayMin  time.Duration `split_words:"true" default:"250ms" desc:"first delay before restarting a child that exited; doubles on each quick failure"`
	RestartDelayMax  time.Duration `split_words:"true" default:"30s" desc:"the longest delay between restarts"`

	MaxMessageBytes   int           `split_words:"true" default:"67108864" desc:"longest line the child may write to stdout (64 MiB; at least 4096, at most 1 GiB); longer ones are discarded and their call fails"`
	MaxBodyBytes      int64         `split_words:"true" default:"16777216" desc:"largest HTTP request body (16 MiB; at most 1 GiB); larger ones get 413"`
	StderrLineBytes   int           `split_words:"true" default:"16384" desc:"longest child stderr line logged as one entry (16 bytes to 1 MiB); longer lines are split"`
	StderrRate        int           `split_words:"true" default:"200" desc:"child stderr lines logged a second, per child (at most 1000000), in bursts of up to ten times as many; more are drained and counted, and a warning says how many; 0: every line"`
	ChildWriteTimeout time.Duration `split_words:"true" default:"30s" desc:"a write to the child's stdin that makes no progress this long fails"`
	ClientTimeout     time.Duration `split_words:"true" default:"30s" desc:"a request body must arrive within this, and a client that takes no answer bytes this long (up to an eighth more) is cut off (its call is cancelled)"`
	SSEKeepAlive      time.Duration `split_words:"true" default:"15s" desc:"an SSE comment is sent on a quiet stream this often"`

	StdinGrace      time.Duration `split_words:"true" default:"5s" desc:"on stop, how long to wait after closing the child's stdin before SIGTERM"`
	TermGrace       time.Duration `split_words:"true" default:"5s" desc:"on stop, how long to wait after SIGTERM before SIGKILL"`
	ShutdownGrace   time.Duration `split_words:"true" default:"10s" desc:"on SIGINT or SIGTERM, how long calls in flight may take to finish before they are cancelled (new calls are refused and /readyz is 503 meanwhile; a second signal ends it); 0: none"`
	ShutdownTimeout time.Duration `split_words:"true" default:"10s" desc:"after the grace period, how long to wait for answers to reach clients"`

	Secret           string        `desc:"the key replicas share, at least 32 bytes: it signs 2025 session ids and the requestState of parked calls, so any replica with the same key serves them; empty: a random key, valid in this process only"`
	SecretFile       string        `split_words:"true" desc:"a file holding the key instead (a mounted Secret); whitespace around it is ignored"`
	SecretAccept     string        `split_words:"true" desc:"another key accepted, never signed with, for changing GATEWAY_SECRET without refusing what replicas signed with the other (see the README)"`
	SecretAcceptFile string        `split_words:"true" desc:"a file holding that key instead"`
	SessionTTL       time.Duration `split_words:"true" default:"24h" desc:"a 2025 client's session id is valid this long after initialize, on every replica; then the client gets 404 and initializes again"`
	MaxSessions      int           `split_words:"true" default:"10000" desc:"2025 sessions one gateway holds something for at once (calls in flight, a log level); when full, the one used longest ago without a call in flight makes room; as many sessions ended by DELETE are remembered until they expire"`

	AllowedHosts   []string `split_words:"true" desc:"Host names /mcp and /v1 answer to, comma-separated, without port (* for any); empty: localhost names on a loopback address, any otherwise"`
	AllowedOrigins []string `split_words:"true" desc:"browser Origins allowed on /mcp and /v1, comma-separated scheme://host[:port] (* for any), and answered with CORS headers; empty: localhost origins on a loopback address, same-origin otherwise, and no CORS"`

	AdminAddr string `split_words:"true" desc:"when set, /metrics and /debug/pprof/ are served on this address (host:port) and not on GATEWAY_ADDR"`

	AdaptThreads   bool  `split_words:"true" default:"true" desc:"run Go code on one thread while calls come one at a time or the CPUs are busy (less latency and CPU a call), and on as many as the runtime would once goroutines wait for one and a CPU is idle, or 128 or more are ready to run; false, or GOMAXPROCS set: as many always"`
	HeapFloorBytes int64 `split_words:"true" default:"16777216" desc:"the garbage collector's heap goal is kept at this or above (16 MiB), where the runtime would collect each time a small live heap doubles, dozens of times a second under load; a larger live heap, or GOMEMLIMIT, sets the pace as usual; 0, a floor at or under the runtime's own least goal (4 MiB), or GOGC set: the runtime's pace always"`

	AuthTokens      []string      `split_words:"true" desc:"bearer tokens that may call, comma-separated; each name:token (the name shows in logs) or just token"`
	AuthTokensFile  string        `split_words:"true" desc:"a file of such tokens, one per line (# comments); re-read when it changes and on SIGHUP"`
	AuthPolicyFile  string        `split_words:"true" desc:"a JSON file saying which tools, resources and prompts each token (by name) or JWT scope may use (see the README); re-read with the tokens; empty: every caller may use everything"`
	AuthPoll        time.Duration `split_words:"true" default:"5s" desc:"how often the tokens and policy files are checked for change"`
	OauthIssuer     string        `split_words:"true" desc:"accept OAuth JWT access tokens from this issuer (its URL, the iss they carry)"`
	OauthResource   string        `split_words:"true" desc:"the gateway's resource URL (such as https://mcp.example.com/mcp): the aud the tokens must carry; required with GATEWAY_OAUTH_ISSUER"`
	OauthJwksURL    string        `split_words:"true" desc:"where the issuer's keys are; empty: from the issuer's metadata"`
	OauthAlgorithms []string      `split_words:"true" default:"RS256,ES256" desc:"JWS algorithms accepted (asymmetric only)"`
	OauthLeeway     time.Duration `split_words:"true" default:"30s" desc:"clock skew allowed on a token's exp, nbf and iat (0: none)"`
	OauthScopes     []string      `split_words:"true" desc:"scopes_supported in the Protected Resource Metadata, comma-separated"`
	RequireAuth     bool          `split_words:"true" default:"false" desc:"refuse to start on a non-loopback address with no authentication configured (otherwise a warning)"`
	AuthMetrics     bool          `split_words:"true" default:"false" desc:"/metrics on GATEWAY_ADDR needs credentials too"`

	RateLimit           float64       `split_words:"true" default:"0" desc:"calls per client per second, at most 1000000 (a token bucket; a client is its token's name, or its address); 0: no limit"`
	RateBurst           int           `split_words:"true" default:"0" desc:"calls a client may make at once before the rate applies (needs GATEWAY_RATE_LIMIT); 0: the rate rounded up"`
	MaxStreamsPerClient int           `split_words:"true" default:"0" desc:"requests one client may have open at once on /mcp and /v1, so that one client cannot take every slot (behind a proxy, set GATEWAY_TRUSTED_PROXIES, or every client is the proxy); 0: no limit"`
	TrustedProxies      []string      `split_words:"true" desc:"addresses or CIDRs of proxies whose X-Forwarded-For names the client, comma-separated"`
	MaxHeaderBytes      int           `split_words:"true" default:"32768" desc:"largest request header block (at most 64 KiB; Go's server allows 4 KiB more); larger ones get 431"`
	HeaderTimeout       time.Duration `split_words:"true" default:"10s" desc:"a request's headers must arrive within this (streams are not affected)"`
	IdleTimeout         time.Duration `split_words:"true" default:"2m" desc:"a keep-alive connection with no request for this long is closed (streams are not affected)"`

	ChildEnv []string `split_words:"true" desc:"what the child's environment holds beyond PATH, HOME, locale, TZ and the like: names copied from the gateway's environment, or NAME=value; never GATEWAY_*"`
	ChildDir string   `split_words:"true" desc:"the child's working directory; empty: the gateway's"`

	LogLevel  string `split_words:"true" default:"info" desc:"debug, info, warn or error"`
	LogFormat string `split_words:"true" default:"text" desc:"text or json"`
}

// retired names variables the gateway no longer reads, with what took
// their place: a setting that silently stops working is worse than none.
var retired = map[string]string{
	"GATEWAY_SESSION_IDLE_TIMEOUT": "GATEWAY_SESSION_TTL (a session id now carries its own expiry, so that any replica can check it)",
}

// minMessageBytes is the least GATEWAY_MAX_MESSAGE_BYTES: below it even
// an ordinary initialize result may not fit, and a child whose handshake
// cannot be read is restarted without end.
const minMessageBytes = 4096

// maxWorkers bounds GATEWAY_WORKERS: more children than that is a
// mistake, not a deployment (scale out with replicas instead), and would
// run out of file descriptors and restart without end.
const maxWorkers = 256

// maxDuration bounds every duration setting, minPeriod those that recur
// or that every connection waits on, and minRate GATEWAY_RATE_LIMIT (see
// validate).
const (
	maxDuration = 10000 * time.Hour
	minPeriod   = 100 * time.Millisecond
	minRate     = 1.0 / 86400
)

func loadConfig() (Config, error) {
	var cfg Config
	for name, instead := range retired {
		if _, set := os.LookupEnv(name); set {
			return cfg, fmt.Errorf("%s is no longer read; use %s", name, instead)
		}
	}
	if err := decimalIntegers(); err != nil {
		return cfg, err
	}
	if err := envconfig.Process(envPrefix, &cfg); err != nil {
		return cfg, err
	}
	// Each of these turns authentication on. Set with nothing in it (a
	// Secret's key missing or empty, say) while none of the others holds
	// anything, it would leave the gateway open where its operator meant
	// it closed. (A template that writes every variable, the unused ones
	// empty, beside one that holds credentials, is fine.)
	if len(trimList(cfg.AuthTokens)) == 0 && strings.TrimSpace(cfg.AuthTokensFile) == "" && strings.TrimSpace(cfg.OauthIssuer) == "" {
		for _, name := range []string{"GATEWAY_AUTH_TOKENS", "GATEWAY_AUTH_TOKENS_FILE", "GATEWAY_OAUTH_ISSUER"} {
			if _, set := os.LookupEnv(name); set {
				return cfg, fmt.Errorf("%s is set but empty, and no other setting configures authentication: the gateway would run without the authentication it asks for; unset it to run without", name)
			}
		}
	}
	return cfg, cfg.validate()
}

func (c *Config) validate() error {
	var errs []error
	switch c.Era {
	case "auto", "legacy", "modern":
	default:
		errs = append(errs, fmt.Errorf("GATEWAY_ERA must be auto, legacy or modern, not %q", c.Era))
	}
	if c.Addr == "" {
		errs = append(errs, errors.New("GATEWAY_ADDR must not be empty"))
	}
	c.AllowedHosts = trimList(c.AllowedHosts)
	c.AllowedOrigins = trimList(c.AllowedOrigins)
	for _, o := range c.AllowedOrigins {
		if o != "*" && !isOrigin(o) {
			errs = append(errs, fmt.Errorf("GATEWAY_ALLOWED_ORIGINS: %q is not an origin as browsers send it (scheme://host[:port], no default port, an international name as xn--..., or * alone; no patterns)", o))
		}
	}
	for name, d := range map[string]time.Duration{
		"GATEWAY_CALL_IDLE_TIMEOUT": c.CallIdleTimeout, "GATEWAY_CALL_MAX_DURATION": c.CallMaxDuration,
		"GATEWAY_PROBE_TIMEOUT": c.ProbeTimeout, "GATEWAY_HANDSHAKE_TIMEOUT": c.HandshakeTimeout,
		"GATEWAY_RESTART_DELAY_MIN": c.RestartDelayMin, "GATEWAY_RESTART_DELAY_MAX": c.RestartDelayMax,
		"GATEWAY_CHILD_WRITE_TIMEOUT": c.ChildWriteTimeout, "GATEWAY_CLIENT_TIMEOUT": c.ClientTimeout,
		"GATEWAY_SSE_KEEP_ALIVE": c.SSEKeepAlive, "GATEWAY_STDIN_GRACE": c.StdinGrace,
		"GATEWAY_TERM_GRACE": c.TermGrace, "GATEWAY_SHUTDOWN_TIMEOUT": c.ShutdownTimeout,
		"GATEWAY_QUEUE_TIMEOUT": c.QueueTimeout, "GATEWAY_AUTH_POLL": c.AuthPoll,
		"GATEWAY_HEADER_TIMEOUT": c.HeaderTimeout, "GATEWAY_IDLE_TIMEOUT": c.IdleTimeout,
	} {
		switch {
		case d <= 0:
			errs = append(errs, fmt.Errorf("%s must be positive, not %v", name, d))
		case d > maxDuration:
			// Beyond any use, and near where deadlines computed from
			// it overflow.
			errs = append(errs, fmt.Errorf("%s must be at most %v, not %v", name, maxDuration, d))
		}
	}
	for name, d := range map[string]time.Duration{
		// Those that may be 0, or have a lower bound of their own.
		"GATEWAY_SESSION_TTL": c.SessionTTL, "GATEWAY_WEDGE_TIMEOUT": c.WedgeTimeout,
		"GATEWAY_SHUTDOWN_GRACE": c.ShutdownGrace,
	} {
		if d > maxDuration {
			errs = append(errs, fmt.Errorf("%s must be at most %v, not %v", name, maxDuration, d))
		}
	}
	for name, d := range map[string]time.Duration{
		// Each is a period or a wait that, much shorter, makes the gateway
		// busy doing nothing (a keep-alive comment or a file read every
		// few nanoseconds) or unreachable (every connection cut before its
		// headers can arrive).
		"GATEWAY_SSE_KEEP_ALIVE": c.SSEKeepAlive, "GATEWAY_AUTH_POLL": c.AuthPoll,
		"GATEWAY_HEADER_TIMEOUT": c.HeaderTimeout, "GATEWAY_CLIENT_TIMEOUT": c.ClientTimeout,
		"GATEWAY_IDLE_TIMEOUT": c.IdleTimeout,
	} {
		if d > 0 && d < minPeriod {
			errs = append(errs, fmt.Errorf("%s must be at least %v, not %v", name, minPeriod, d))
		}
	}
	for name, n := range map[string]int64{
		"GATEWAY_MAX_MESSAGE_BYTES": int64(c.MaxMessageBytes), "GATEWAY_MAX_BODY_BYTES": c.MaxBodyBytes,
		"GATEWAY_STDERR_LINE_BYTES": int64(c.StderrLineBytes), "GATEWAY_MAX_SESSIONS": int64(c.MaxSessions),
		"GATEWAY_WORKERS": int64(c.Workers), "GATEWAY_MAX_IN_FLIGHT": int64(c.MaxInFlight),
		"GATEWAY_MAX_LISTENS": int64(c.MaxListens), "GATEWAY_MAX_HEADER_BYTES": int64(c.MaxHeaderBytes),
	} {
		if n <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, not %d", name, n))
		}
	}
	for name, n := range map[string]int64{
		"GATEWAY_MAX_MESSAGE_BYTES": int64(c.MaxMessageBytes), "GATEWAY_MAX_BODY_BYTES": c.MaxBodyBytes,
	} {
		if n > 1<<30 {
			// Held whole in memory; and past this the size arithmetic
			// of a line would overflow long before memory ran out.
			errs = append(errs, fmt.Errorf("%s must be at most 1 GiB (1073741824), not %d", name, n))
		}
	}
	if c.StderrLineBytes > 0 && c.StderrLineBytes < 16 {
		// The reader's buffer has no fewer bytes: lines would be cut at
		// 16 while the setting said less.
		errs = append(errs, fmt.Errorf("GATEWAY_STDERR_LINE_BYTES must be at least 16, not %d", c.StderrLineBytes))
	}
	if c.StderrLineBytes > 1<<20 {
		errs = append(errs, fmt.Errorf("GATEWAY_STDERR_LINE_BYTES must be at most 1 MiB (1048576; each child has a buffer of this size), not %d", c.StderrLineBytes))
	}
	if c.RateLimit > 1e6 {
		errs = append(errs, fmt.Errorf("GATEWAY_RATE_LIMIT must be at most 1000000 calls per second, not %v", c.RateLimit))
	}
	if c.RateLimit > 0 && c.RateLimit < minRate {
		// A refused client is told when to come back: at a slower rate,
		// in years.
		errs = append(errs, fmt.Errorf("GATEWAY_RATE_LIMIT must be 0 (no limit) or at least one call a day (1/86400 calls per second), not %v", c.RateLimit))
	}
	for i, h := range c.AllowedHosts {
		if h != "*" && (strings.Contains(h, "/") || hasPort(h)) {
			errs = append(errs, fmt.Errorf("GATEWAY_ALLOWED_HOSTS entry %q must be a host name, without scheme, port or path (the port is not compared)", h))
		}
		// A Host header's [::1] is compared as ::1.
		c.AllowedHosts[i] = strings.Trim(h, "[]")
	}
	if c.StderrRate < 0 || c.StderrRate > 1_000_000 {
		errs = append(errs, fmt.Errorf("GATEWAY_STDERR_RATE must be from 0 (every line) to 1000000, not %d", c.StderrRate))
	}
	if c.MaxMessageBytes > 0 && c.MaxMessageBytes < minMessageBytes {
		errs = append(errs, fmt.Errorf("GATEWAY_MAX_MESSAGE_BYTES must be at least %d (the child's answer to the handshake must fit), not %d", minMessageBytes, c.MaxMessageBytes))
	}
	if c.SessionTTL < time.Second {
		errs = append(errs, fmt.Errorf("GATEWAY_SESSION_TTL must be at least 1s (a session id's expiry counts in seconds), not %v", c.SessionTTL))
	}
	if c.MaxHeaderBytes > 64<<10 {
		errs = append(errs, fmt.Errorf("GATEWAY_MAX_HEADER_BYTES must be at most 65536, not %d", c.MaxHeaderBytes))
	}
	if math.IsNaN(c.RateLimit) || math.IsInf(c.RateLimit, 0) {
		errs = append(errs, fmt.Errorf("GATEWAY_RATE_LIMIT must be a number of calls per second, not %v", c.RateLimit))
	}
	if c.RateLimit < 0 || c.RateBurst < 0 || c.MaxStreamsPerClient < 0 {
		errs = append(errs, errors.New("GATEWAY_RATE_LIMIT, GATEWAY_RATE_BURST and GATEWAY_MAX_STREAMS_PER_CLIENT must not be negative"))
	}
	if c.RateBurst > 0 && c.RateLimit == 0 {
		errs = append(errs, errors.New("GATEWAY_RATE_BURST needs GATEWAY_RATE_LIMIT: without a rate there is no limit for a burst to be"))
	}
	if c.Workers > maxWorkers {
		errs = append(errs, fmt.Errorf("GATEWAY_WORKERS must be at most %d (each is a child process, with its pipes and memory), not %d", maxWorkers, c.Workers))
	}
	if c.OauthLeeway < 0 || c.OauthLeeway > 5*time.Minute {
		errs = append(errs, fmt.Errorf("GATEWAY_OAUTH_LEEWAY must be from 0 to 5m, not %v", c.OauthLeeway))
	}
	if c.ShutdownGrace < 0 {
		errs = append(errs, fmt.Errorf("GATEWAY_SHUTDOWN_GRACE must not be negative, not %v", c.ShutdownGrace))
	}
	if c.HeapFloorBytes < 0 || c.HeapFloorBytes > 1<<40 {
		errs = append(errs, fmt.Errorf("GATEWAY_HEAP_FLOOR_BYTES must be from 0 to 1 TiB (1099511627776), not %d", c.HeapFloorBytes))
	}
	if c.QueueSize < 0 {
		errs = append(errs, fmt.Errorf("GATEWAY_QUEUE_SIZE must not be negative, not %d", c.QueueSize))
	}
	if c.WedgeTimeout < 0 {
		errs = append(errs, fmt.Errorf("GATEWAY_WEDGE_TIMEOUT must not be negative (0 turns the check off), not %v", c.WedgeTimeout))
	}
	if c.RestartDelayMax < c.RestartDelayMin {
		errs = append(errs, errors.New("GATEWAY_RESTART_DELAY_MAX must not be below GATEWAY_RESTART_DELAY_MIN"))
	}
	if _, err := c.level(); err != nil {
		errs = append(errs, err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("GATEWAY_LOG_FORMAT must be text or json, not %q", c.LogFormat))
	}
	return errors.Join(errs...)
}

// hasPort reports whether a host entry names a port (host:80, [::1]:80); an
// IPv6 address alone has colons but no port.
func hasPort(h string) bool {
	if strings.HasPrefix(h, "[") {
		return strings.Contains(h, "]:")
	}
	return strings.Count(h, ":") == 1
}

// decimalIntegers refuses an integer setting written as envconfig would
// read in another base: 010 is 8 to it, 0x10 16, which an operator who
// pads with zeros does not mean.
func decimalIntegers() error {
	var b strings.Builder
	_ = envconfig.Usagef(envPrefix, &Config{}, io.Writer(&b), "{{range .}}{{usage_key .}} {{usage_type .}}\n{{end}}")
	var errs []error
	for line := range strings.Lines(b.String()) {
		name, typ, _ := strings.Cut(strings.TrimSpace(line), " ")
		v, set := os.LookupEnv(name)
		if !set || !strings.Contains(typ, "Integer") {
			continue
		}
		if d := strings.TrimLeft(v, "+-"); len(d) > 1 && d[0] == '0' {
			errs = append(errs, fmt.Errorf("%s is %q: write it in decimal, without leading zeros (it would be read as octal, hexadecimal or binary)", name, v))
		}
	}
	return errors.Join(errs...)
}

func (c *Config) level() (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return 0, fmt.Errorf("GATEWAY_LOG_LEVEL must be debug, info, warn or error, not %q", c.LogLevel)
	}
	return l, nil
}

func (c *Config) logger(w io.Writer) *slog.Logger {
	level, _ := c.level()
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if c.LogFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	// Lines logged with a request's context name the request, whichever
	// package logs them.
	return slog.New(httpapi.LogContext(h))
}

const usageHead = `gateway serves a stdio MCP server over HTTP.

Usage:
  gateway [-- command [args...]]   run the gateway; the child command after --
                                   (or GATEWAY_COMMAND; default: the built-in demo)
  gateway demo [-era legacy|modern|dual]
                                   run the built-in demo MCP server on stdio
  gateway healthcheck [-timeout d] exit 0 if GET /healthz on GATEWAY_ADDR answers 200
  gateway token [-name n] [-hash]  make a bearer token, and its line for GATEWAY_AUTH_TOKENS_FILE
                                   (-hash: the sha256: form of a token read on stdin)
  gateway -h                       this help

Endpoints: POST /mcp (MCP Streamable HTTP), /v1/... (a REST API: tools,
resources, prompts; /v1/openapi.json describes the tools), GET / (a web
page), GET /openapi.yaml, GET /healthz, GET /readyz
(?wait=30s&until=ready|not-ready|all-ready waits for that state), GET /metrics
(Prometheus; with GATEWAY_ADMIN_ADDR on that address, with /debug/pprof/).

Configuration comes from the environment:

`

func usage(w io.Writer) {
	io.WriteString(w, usageHead)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// envconfig's own table, with defaults; errors cannot happen for a
	// valid struct.
	_ = envconfig.Usagef(envPrefix, &Config{}, tw, "VARIABLE\tDEFAULT\tMEANING\n{{range .}}{{usage_key .}}\t{{usage_default .}}\t{{usage_description .}}\n{{end}}")
	tw.Flush()
}

// splitCommand splits GATEWAY_COMMAND into words: spaces separate, single
// or double quotes group, a backslash escapes the next character. No shell
// runs, so nothing else is special.
func splitCommand(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case r == '\\' && quote != '\'':
			escaped, inWord = true, true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 || escaped {
		return nil, fmt.Errorf("GATEWAY_COMMAND has an unterminated quote or escape: %q", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// trimList drops the spaces around a list's entries (envconfig splits at
// commas only), and empty entries.
func trimList(list []string) []string {
	var out []string
	for _, e := range list {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// isOrigin reports whether s is an origin as a browser sends it in the
// Origin header: scheme://host[:port], nothing after but an optional
// slash, and no default port (browsers leave it out, so an entry with one
// would never match).
func isOrigin(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false // browsers send an international name as xn--...
		}
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" || u.User != nil || strings.ContainsAny(s, "*?#%") || strings.Trim(u.Path, "/") != "" {
		return false
	}
	port := u.Port()
	return !(u.Scheme == "http" && port == "80") && !(u.Scheme == "https" && port == "443")
}
