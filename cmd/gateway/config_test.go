package main

import (
	"bytes"
	"log/slog"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestSplitCommand(t *testing.T) {
	tests := map[string][]string{
		`node server.js`:                {"node", "server.js"},
		`  npx   -y  pkg  `:             {"npx", "-y", "pkg"},
		`python -c "print('a b')"`:      {"python", "-c", "print('a b')"},
		`sh -c 'echo "$HOME"'`:          {"sh", "-c", `echo "$HOME"`},
		`a\ b c`:                        {"a b", "c"},
		`""`:                            {""},
		`/opt/my\"server --flag=x`:      {`/opt/my"server`, "--flag=x"},
		`cmd 'it''s'`:                   {"cmd", "its"},
		`cmd "back\\slash" 'no\escape'`: {"cmd", `back\slash`, `no\escape`},
	}
	for in, want := range tests {
		got, err := splitCommand(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("splitCommand(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`"open`, `'open`, `trailing\`} {
		if _, err := splitCommand(bad); err == nil {
			t.Errorf("splitCommand(%s) accepted an unterminated quote or escape", bad)
		}
	}
}

// Every setting is listed by gateway -h and in the README, and nothing else is.
func TestEverySettingIsDocumented(t *testing.T) {
	var help bytes.Buffer
	usage(&help)
	name := regexp.MustCompile(`GATEWAY_[A-Z_]+[A-Z]`)
	inHelp := uniq(name.FindAllString(help.String(), -1))
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// The README's configuration table: rows that start with a variable.
	row := regexp.MustCompile("(?m)^\\| `(GATEWAY_[A-Z_]+)` \\|")
	var inReadme []string
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		inReadme = append(inReadme, m[1])
	}
	inReadme = uniq(inReadme)
	fields := reflect.TypeOf(Config{}).NumField()
	if len(inHelp) != fields || !slices.Equal(inHelp, inReadme) {
		t.Errorf("Config has %d fields\n-h lists %d: %v\nREADME lists %d: %v", fields, len(inHelp), inHelp, len(inReadme), inReadme)
	}
	for _, v := range inHelp {
		if !strings.Contains(help.String(), v+" ") {
			t.Errorf("-h lists %s without a default column", v)
		}
	}
}

func uniq(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

func TestValidate(t *testing.T) {
	t.Setenv("GATEWAY_ERA", "legacy")
	t.Setenv("GATEWAY_LOG_LEVEL", "loud")
	t.Setenv("GATEWAY_RESTART_DELAY_MIN", "1m")
	t.Setenv("GATEWAY_RESTART_DELAY_MAX", "1s")
	t.Setenv("GATEWAY_MAX_BODY_BYTES", "0")
	t.Setenv("GATEWAY_MAX_MESSAGE_BYTES", "10")
	t.Setenv("GATEWAY_RATE_BURST", "5")
	t.Setenv("GATEWAY_WORKERS", "100000")
	t.Setenv("GATEWAY_STDERR_RATE", "-1")
	_, err := loadConfig()
	for _, want := range []string{"GATEWAY_LOG_LEVEL", "GATEWAY_RESTART_DELAY_MAX", "GATEWAY_MAX_BODY_BYTES", "GATEWAY_MAX_MESSAGE_BYTES must be at least",
		"GATEWAY_RATE_BURST needs GATEWAY_RATE_LIMIT", "GATEWAY_WORKERS must be at most 256", "GATEWAY_STDERR_RATE must be from 0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("loadConfig error %v does not mention %s", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "GATEWAY_ERA") {
		t.Errorf("a valid GATEWAY_ERA was refused: %v", err)
	}
}

// Sizes and rates past what the gateway can hold or count, integers an
// operator padded with zeros (read in another base), and host entries
// with a port or a scheme stop the gateway at start.
func TestValidateBounds(t *testing.T) {
	for _, c := range []struct{ name, value, want string }{
		{"GATEWAY_MAX_MESSAGE_BYTES", "9223372036854775807", "at most 1 GiB"},
		{"GATEWAY_MAX_BODY_BYTES", "2147483648", "at most 1 GiB"},
		{"GATEWAY_STDERR_LINE_BYTES", "4294967296", "at most 1 MiB"},
		{"GATEWAY_STDERR_LINE_BYTES", "5", "at least 16"},
		{"GATEWAY_RATE_LIMIT", "1e19", "at most 1000000"},
		{"GATEWAY_WORKERS", "010", "in decimal"},
		{"GATEWAY_MAX_IN_FLIGHT", "0x10", "in decimal"},
		{"GATEWAY_QUEUE_SIZE", "-01", "in decimal"},
		{"GATEWAY_ALLOWED_HOSTS", "a.example:8080", "without scheme, port or path"},
		{"GATEWAY_ALLOWED_HOSTS", "http://a.example", "without scheme, port or path"},
		{"GATEWAY_ALLOWED_HOSTS", "[::1]:8080", "without scheme, port or path"},
		// A deadline this far away overflows where it is computed.
		{"GATEWAY_CLIENT_TIMEOUT", "2277376h", "at most 10000h"},
		{"GATEWAY_CALL_MAX_DURATION", "10001h", "at most 10000h"},
		{"GATEWAY_SESSION_TTL", "2000000h", "at most 10000h"},
		{"GATEWAY_WEDGE_TIMEOUT", "2000000h", "at most 10000h"},
		{"GATEWAY_SHUTDOWN_GRACE", "2000000h", "at most 10000h"},
		// Busy doing nothing, or cutting every connection.
		{"GATEWAY_SSE_KEEP_ALIVE", "1ns", "at least 100ms"},
		{"GATEWAY_AUTH_POLL", "99ms", "at least 100ms"},
		{"GATEWAY_HEADER_TIMEOUT", "1us", "at least 100ms"},
		// A refusal's Retry-After in centuries.
		{"GATEWAY_RATE_LIMIT", "1e-300", "at least one call a day"},
	} {
		t.Run(c.name+"="+c.value, func(t *testing.T) {
			t.Setenv(c.name, c.value)
			if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), c.name) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("loadConfig: %v; want it refused, saying %q", err, c.want)
			}
		})
	}
	t.Setenv("GATEWAY_ALLOWED_HOSTS", "[::1],::1,a.example")
	t.Setenv("GATEWAY_WORKERS", "10")
	t.Setenv("GATEWAY_AUTH_POLL", "100ms")
	t.Setenv("GATEWAY_CALL_MAX_DURATION", "10000h")
	t.Setenv("GATEWAY_RATE_LIMIT", "0.0000116")
	if cfg, err := loadConfig(); err != nil || !slices.Equal(cfg.AllowedHosts, []string{"::1", "::1", "a.example"}) || cfg.Workers != 10 {
		t.Errorf("%v %q %d; want IPv6 hosts taken as a Host header's name, and 10 workers", err, cfg.AllowedHosts, cfg.Workers)
	}
}

// A setting that turns authentication on, set but empty (a Secret's key
// missing, say), stops the gateway rather than leaving it open.
func TestAuthenticationSetButEmpty(t *testing.T) {
	for _, name := range []string{"GATEWAY_AUTH_TOKENS", "GATEWAY_AUTH_TOKENS_FILE", "GATEWAY_OAUTH_ISSUER"} {
		values := []string{"", " "}
		if name == "GATEWAY_AUTH_TOKENS" {
			values = append(values, " , ")
		}
		for _, v := range values {
			t.Run(name+"="+strconv.Quote(v), func(t *testing.T) {
				t.Setenv(name, v)
				if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), name+" is set but empty") {
					t.Errorf("loadConfig: %v; want it refused", err)
				}
				// Beside a setting that holds credentials, an empty one is
				// a template's unused variable.
				other := "GATEWAY_AUTH_TOKENS"
				if name == other {
					other = "GATEWAY_OAUTH_ISSUER"
				}
				t.Setenv(other, map[string]string{"GATEWAY_AUTH_TOKENS": "ci:0123456789abcdef0123456789abcdef", "GATEWAY_OAUTH_ISSUER": "https://issuer.example"}[other])
				if _, err := loadConfig(); err != nil && strings.Contains(err.Error(), "is set but empty") {
					t.Errorf("with %s set: %v; want it taken", other, err)
				}
			})
		}
	}
}

// Allowed origins and hosts are read with the spaces around commas
// dropped; an entry that is not an origin stops the gateway at start.
func TestAllowedOrigins(t *testing.T) {
	t.Setenv("GATEWAY_ALLOWED_ORIGINS", "https://app.example , http://localhost:3000/,")
	t.Setenv("GATEWAY_ALLOWED_HOSTS", " mcp.example.com, localhost ")
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.AllowedOrigins, []string{"https://app.example", "http://localhost:3000/"}) ||
		!slices.Equal(cfg.AllowedHosts, []string{"mcp.example.com", "localhost"}) {
		t.Errorf("origins %q, hosts %q", cfg.AllowedOrigins, cfg.AllowedHosts)
	}
	for _, bad := range []string{"app.example", "https://app.example/path", "https://", "https://u@app.example", "https://app.example?x=1", "https://*.example.com", "https://app.example:443", "http://app.example:80", "https://app.example#x", "https://app.example?", "https://bücher.example", "https://b%C3%BCcher.example"} {
		t.Setenv("GATEWAY_ALLOWED_ORIGINS", "*,"+bad)
		if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), "GATEWAY_ALLOWED_ORIGINS") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// The key comes from GATEWAY_SECRET or a file, is long enough, and each
// use gets a key of its own that replicas with the same secret share.
func TestKeys(t *testing.T) {
	secret := "a secret that replicas share, at least 32 bytes"
	file := t.TempDir() + "/secret"
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fromEnv, err := loadKeys(Config{Secret: secret})
	if err != nil || !fromEnv.shared {
		t.Fatalf("GATEWAY_SECRET: %+v, %v", fromEnv, err)
	}
	fromFile, err := loadKeys(Config{SecretFile: file})
	if err != nil || !bytes.Equal(fromFile.session, fromEnv.session) || !bytes.Equal(fromFile.requestState, fromEnv.requestState) {
		t.Errorf("GATEWAY_SECRET_FILE with a final newline derives other keys than GATEWAY_SECRET (%v)", err)
	}
	if bytes.Equal(fromEnv.session, fromEnv.requestState) || bytes.Contains(fromEnv.session, []byte(secret)) {
		t.Error("the session key is the requestState key, or the secret itself")
	}
	r1, _ := loadKeys(Config{})
	r2, _ := loadKeys(Config{})
	if r1.shared || len(r1.session) != 32 || bytes.Equal(r1.session, r2.session) {
		t.Error("without a secret, each process does not get a random key of its own")
	}
	rotating, err := loadKeys(Config{Secret: "the next secret, at least 32 bytes long", SecretAcceptFile: file})
	if err != nil || !bytes.Equal(rotating.accepted.session, fromEnv.session) || !bytes.Equal(rotating.accepted.requestState, fromEnv.requestState) ||
		bytes.Equal(rotating.session, fromEnv.session) {
		t.Errorf("GATEWAY_SECRET_ACCEPT_FILE does not accept the other secret's keys, or signs with them (%v)", err)
	}
	for name, cfg := range map[string]Config{
		"accept without a secret": {SecretAccept: secret},
		"accept too short":        {Secret: secret, SecretAccept: "short"},
		"accept twice":            {Secret: secret, SecretAccept: secret, SecretAcceptFile: file},
		"too short":               {Secret: "short"},
		"both":                    {Secret: secret, SecretFile: file},
		"no file":                 {SecretFile: file + ".missing"},
		"empty file":              {SecretFile: os.DevNull},
		"short file":              {SecretFile: writeFile(t, "short\n")},
		"only spaces":             {SecretFile: writeFile(t, "  \n")},
	} {
		if _, err := loadKeys(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	f := t.TempDir() + "/f"
	if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// A GATEWAY_ variable that no setting reads is named, with the setting it
// most likely meant; Kubernetes' service links are no settings and pass.
func TestUnknownSettings(t *testing.T) {
	names, meant := unknownSettings([]string{
		"GATEWAY_MAX_INFLIGHT=10", "GATEWAY_ADDR=:1", "GATEWAY_WEDGE_TIMOUT=1s", "GATEWAY_FROBNICATE=1",
		"GATEWAY_SERVICE_HOST=10.0.0.1", "GATEWAY_PORT=tcp://10.0.0.1:80", "GATEWAY_PORT_80_TCP_ADDR=10.0.0.1",
		"GATEWAY_SESSION_IDLE_TIMEOUT=1m", "PATH=/bin", "GATEWAYS=1",
	})
	want := []string{"GATEWAY_MAX_INFLIGHT", "GATEWAY_WEDGE_TIMOUT", "GATEWAY_FROBNICATE"}
	wantMeant := []string{"GATEWAY_MAX_IN_FLIGHT", "GATEWAY_WEDGE_TIMEOUT", ""}
	if !slices.Equal(names, want) || !slices.Equal(meant, wantMeant) {
		t.Errorf("unknownSettings = %q, %q; want %q, %q", names, meant, want, wantMeant)
	}
	if n := len(settingNames()); n != reflect.TypeOf(Config{}).NumField() {
		t.Errorf("%d setting names for %d settings", n, reflect.TypeOf(Config{}).NumField())
	}
}

// A variable the gateway no longer reads is an error, not silently ignored.
func TestRetiredSetting(t *testing.T) {
	t.Setenv("GATEWAY_SESSION_IDLE_TIMEOUT", "30m")
	if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), "GATEWAY_SESSION_TTL") {
		t.Errorf("loadConfig error %v does not name the replacement", err)
	}
}

// Who may call and how much: settings that cannot work together, or would
// quietly protect nothing, stop the gateway at start with a message naming
// them.
func TestGuardSettings(t *testing.T) {
	log := discardLogger()
	token := "ci:0123456789abcdef0123"
	policy := writeFile(t, `{"tokens":{"ci":{"tools":["echo"]}}}`)
	for name, tc := range map[string]struct {
		cfg  Config
		want string // "" when it is accepted
	}{
		"nothing":                    {Config{}, ""},
		"tokens":                     {Config{AuthTokens: []string{token}}, ""},
		"tokens and policy":          {Config{AuthTokens: []string{token}, AuthPolicyFile: policy}, ""},
		"policy without callers":     {Config{AuthPolicyFile: policy}, "GATEWAY_AUTH_POLICY_FILE"},
		"metrics without callers":    {Config{AuthMetrics: true}, "GATEWAY_AUTH_METRICS"},
		"resource without an issuer": {Config{OauthResource: "https://mcp.example.com/mcp"}, "GATEWAY_OAUTH_ISSUER"},
		"issuer without a resource":  {Config{OauthIssuer: "https://issuer.example"}, "esource"},
		"a short token":              {Config{AuthTokens: []string{"ci:REPLACE-ME"}}, "at least 16"},
		"a bad proxy":                {Config{TrustedProxies: []string{"10.0.0.0/33"}}, "GATEWAY_TRUSTED_PROXIES"},
	} {
		g, err := newGuard(tc.cfg, log)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one naming %q", name, err, tc.want)
		case tc.want == "" && (g.auth != nil) != (len(tc.cfg.AuthTokens) > 0):
			t.Errorf("%s: authentication on: %v", name, g.auth != nil)
		}
	}
	t.Setenv("GATEWAY_MAX_HEADER_BYTES", "1048576")
	t.Setenv("GATEWAY_OAUTH_LEEWAY", "1h")
	t.Setenv("GATEWAY_RATE_LIMIT", "-1")
	t.Setenv("GATEWAY_HEAP_FLOOR_BYTES", "-1")
	_, err := loadConfig()
	for _, want := range []string{"GATEWAY_MAX_HEADER_BYTES", "GATEWAY_OAUTH_LEEWAY", "GATEWAY_RATE_LIMIT", "GATEWAY_HEAP_FLOOR_BYTES"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("loadConfig error %v does not mention %s", err, want)
		}
	}
	t.Setenv("GATEWAY_MAX_HEADER_BYTES", "4096")
	t.Setenv("GATEWAY_OAUTH_LEEWAY", "1s")
	t.Setenv("GATEWAY_HEAP_FLOOR_BYTES", "0")
	for _, rate := range []string{"NaN", "Inf", "-Inf", "+Inf"} {
		t.Setenv("GATEWAY_RATE_LIMIT", rate)
		if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), "GATEWAY_RATE_LIMIT") {
			t.Errorf("GATEWAY_RATE_LIMIT=%s: %v", rate, err)
		}
	}
}

// Without credentials, a non-loopback address is a warning, or an error
// with GATEWAY_REQUIRE_AUTH; loopback, or credentials, are neither.
func TestExposure(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if err := checkExposure(Config{}, false, false, "0.0.0.0:8080", log); err != nil || !strings.Contains(logs.String(), "UNAUTHENTICATED") {
		t.Errorf("no warning: %v, %q", err, logs.String())
	}
	if err := checkExposure(Config{RequireAuth: true}, false, false, "0.0.0.0:8080", log); err == nil || !strings.Contains(err.Error(), "GATEWAY_AUTH_TOKENS") {
		t.Errorf("GATEWAY_REQUIRE_AUTH: %v", err)
	}
	logs.Reset()
	quiet := []Config{{RequireAuth: true, AuthMetrics: true}, {RequireAuth: true, AdminAddr: ":9090"}}
	for _, c := range [][2]bool{{true, false}, {false, true}} {
		for _, cfg := range quiet {
			if err := checkExposure(cfg, c[0], c[1], "a", log); err != nil || logs.Len() > 0 {
				t.Errorf("loopback %v, authenticated %v: %v, %q", c[0], c[1], err, logs.String())
			}
		}
	}
	// Authenticated, but /metrics open beside /mcp.
	if err := checkExposure(Config{}, false, true, "0.0.0.0:8080", log); err != nil || !strings.Contains(logs.String(), "GATEWAY_AUTH_METRICS") {
		t.Errorf("no warning about /metrics: %v, %q", err, logs.String())
	}
}

// The child's environment and directory come from the settings, and a
// GATEWAY_* name is refused.
func TestNewChild(t *testing.T) {
	t.Setenv("GATEWAY_AUTH_TOKENS", "ci:0123456789abcdef0123")
	t.Setenv("CHILD_TOKEN", "x")
	dir := t.TempDir()
	ch, err := newChild(Config{ChildEnv: []string{"CHILD_TOKEN", "MODE=fast"}, ChildDir: dir}, []string{"srv"}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	if ch.dir != dir || !slices.Contains(ch.env, "CHILD_TOKEN=x") || !slices.Contains(ch.env, "MODE=fast") ||
		slices.ContainsFunc(ch.env, func(kv string) bool { return strings.HasPrefix(kv, "GATEWAY_") }) {
		t.Errorf("child: %+v", ch)
	}
	for name, cfg := range map[string]Config{
		"a gateway setting": {ChildEnv: []string{"GATEWAY_AUTH_TOKENS"}},
		"no such dir":       {ChildDir: dir + "/missing"},
	} {
		if _, err := newChild(cfg, []string{"srv"}, discardLogger()); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
