package deploy

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
)

// image is what the Dockerfile's final stage makes, as far as the
// Kubernetes manifests depend on it.
type image struct {
	uid     int64             // the numeric USER
	env     map[string]string // ENV, expanded
	gateway string            // where the gateway binary is
}

// dockerfile is a parsed Dockerfile: its stages as BuildKit's instructions
// package reads them.
type dockerfile struct {
	stages []instructions.Stage
	lex    *shell.Lex
}

// parseDockerfile parses src as BuildKit does, with its linter; a warning of
// either is an error.
func parseDockerfile(src []byte) (*dockerfile, error) {
	res, err := parser.Parse(bytes.NewReader(src))
	if err != nil {
		return nil, err
	}
	var warnings []string
	for _, w := range res.Warnings {
		warnings = append(warnings, w.Short)
	}
	lint := linter.New(&linter.Config{Warn: func(rule, _, _, msg string, _ []parser.Range) {
		warnings = append(warnings, rule+": "+msg)
	}})
	stages, _, err := instructions.Parse(res.AST, lint)
	if err != nil {
		return nil, err
	}
	if len(warnings) > 0 {
		return nil, fmt.Errorf("warnings: %s", strings.Join(warnings, "; "))
	}
	return &dockerfile{stages: stages, lex: shell.NewLex(res.EscapeToken)}, nil
}

// stage finds a stage by the name or index that COPY --from uses.
func (d *dockerfile) stage(ref string) (int, bool) {
	for i, s := range d.stages {
		if strings.EqualFold(s.Name, ref) || strconv.Itoa(i) == ref {
			return i, true
		}
	}
	return -1, false
}

// env is a stage's ENV, each value expanded as BuildKit expands it.
func (d *dockerfile) env(s instructions.Stage) (map[string]string, error) {
	env := mapEnv{}
	for _, c := range s.Commands {
		if e, ok := c.(*instructions.EnvCommand); ok {
			for _, kv := range e.Env {
				v, _, err := d.lex.ProcessWord(kv.Value, env)
				if err != nil {
					return nil, fmt.Errorf("ENV %s: %w", kv.Key, err)
				}
				env[kv.Key] = v
			}
		}
	}
	return env, nil
}

type mapEnv map[string]string

func (m mapEnv) Get(k string) (string, bool) { v, ok := m[k]; return v, ok }
func (m mapEnv) Keys() []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

func commands[T instructions.Command](s instructions.Stage) []T {
	var out []T
	for _, c := range s.Commands {
		if t, ok := c.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

func runs(s instructions.Stage) []string {
	var out []string
	for _, r := range commands[*instructions.RunCommand](s) {
		out = append(out, strings.Join(r.CmdLine, " "))
	}
	return out
}

// checkDockerfile returns what is wrong with src, and the image it makes.
func checkDockerfile(src []byte, want pins) ([]string, image) {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var img image
	d, err := parseDockerfile(src)
	if err != nil {
		return []string{"parse: " + err.Error()}, img
	}
	if len(d.stages) < 2 {
		bad("one stage: want a build stage and a runtime stage")
		return problems, img
	}

	// Every COPY --from names an earlier stage; the final stage takes the
	// gateway from the stage that builds it.
	var buildStage = -1
	final := d.stages[len(d.stages)-1]
	for i, s := range d.stages {
		for _, c := range commands[*instructions.CopyCommand](s) {
			if c.From == "" {
				continue
			}
			j, ok := d.stage(c.From)
			if !ok || j >= i {
				bad("COPY --from=%s in stage %d: no earlier stage of that name", c.From, i)
				continue
			}
			if i == len(d.stages)-1 && slices.ContainsFunc(c.SourcePaths, func(p string) bool { return path.Base(p) == "gateway" }) {
				buildStage = j
				img.gateway = c.DestPath
				if strings.HasSuffix(c.DestPath, "/") {
					img.gateway = path.Join(c.DestPath, "gateway")
				}
			}
		}
	}
	if buildStage < 0 {
		bad("the final stage copies no gateway binary from a build stage")
	} else {
		problems = append(problems, checkBuildStage(d.stages[buildStage], want)...)
	}
	runtime, env := checkRuntimeStage(d, final, want, img.gateway)
	problems = append(problems, runtime...)
	img.env = env
	img.uid = -1
	if users := commands[*instructions.UserCommand](final); len(users) > 0 {
		uid, err := strconv.ParseInt(strings.SplitN(users[len(users)-1].User, ":", 2)[0], 10, 64)
		switch {
		case err != nil:
			bad("USER %s: not numeric, so Kubernetes' runAsNonRoot cannot verify it", users[len(users)-1].User)
		case uid == 0:
			bad("USER %s: root", users[len(users)-1].User)
		default:
			img.uid = uid
		}
	} else {
		bad("the final stage has no USER: it runs as root")
	}
	return problems, img
}

func checkBuildStage(s instructions.Stage, want pins) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if !strings.HasPrefix(s.BaseName, "golang:"+want.goVersion) {
		bad("the build stage is FROM %s, want golang:%s (go.mod's go line)", s.BaseName, want.goVersion)
	}
	// go.mod and go.sum come first, alone, so that the module download is
	// a layer of its own.
	copies := commands[*instructions.CopyCommand](s)
	if len(copies) < 2 || !slices.Equal(slices.Sorted(slices.Values(copies[0].SourcePaths)), []string{"go.mod", "go.sum"}) {
		bad("the build stage's first COPY is not go.mod and go.sum")
	}
	var build string
	for _, r := range runs(s) {
		if strings.Contains(r, "go build") {
			build = r
		}
	}
	stageEnv := map[string]string{}
	for _, e := range commands[*instructions.EnvCommand](s) {
		for _, kv := range e.Env {
			stageEnv[kv.Key] = kv.Value
		}
	}
	switch {
	case build == "":
		bad("the build stage runs no go build")
	default:
		if !strings.Contains(build, "CGO_ENABLED=0") && stageEnv["CGO_ENABLED"] != "0" {
			bad("go build without CGO_ENABLED=0: the binary may not be static")
		}
		for _, flag := range []string{"-trimpath", "./cmd/gateway"} {
			if !strings.Contains(build, flag) {
				bad("go build without %s", flag)
			}
		}
		if m := regexp.MustCompile(`-ldflags=?["']?([^"']*)`).FindStringSubmatch(build); m == nil || !strings.Contains(m[1], "-s") || !strings.Contains(m[1], "-w") {
			bad("go build without -ldflags \"-s -w\"")
		}
	}
	return problems
}

// checkRuntimeStage checks the final stage and returns its ENV.
func checkRuntimeStage(d *dockerfile, s instructions.Stage, want pins, gateway string) ([]string, map[string]string) {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if !strings.HasPrefix(s.BaseName, "node:"+want.nodeMajor+"-") || !strings.Contains(s.BaseName, "bookworm") && !strings.Contains(s.BaseName, "trixie") {
		bad("the runtime stage is FROM %s, want a Debian-based node:%s image (the Node the interop tests use)", s.BaseName, want.nodeMajor)
	}
	all := strings.Join(runs(s), "\n")
	if !regexp.MustCompile(`apt-get install[^\n]*\btini\b`).MatchString(all) {
		bad("the runtime stage does not install tini")
	}
	if !regexp.MustCompile(`apt-get install[^\n]*\bca-certificates\b`).MatchString(all) {
		bad("the runtime stage does not install ca-certificates: the gateway's https fetches (the OAuth issuer's keys) would trust no root")
	}
	if m := regexp.MustCompile(`@modelcontextprotocol/server-everything@(\S+)`).FindStringSubmatch(all); m == nil {
		bad("the runtime stage does not install @modelcontextprotocol/server-everything at a pinned version")
	} else if m[1] != want.everything {
		bad("server-everything@%s, but interop/package.json pins %s", m[1], want.everything)
	}

	// tini is PID 1 and runs the gateway: ENTRYPOINT ["tini", ..., "--", gateway].
	var entry []string
	if es := commands[*instructions.EntrypointCommand](s); len(es) > 0 {
		e := es[len(es)-1]
		if e.PrependShell {
			bad("ENTRYPOINT in shell form: a shell is PID 1 and signals do not reach the gateway")
		}
		entry = e.CmdLine
	}
	dash := slices.Index(entry, "--")
	switch {
	case len(entry) == 0 || path.Base(entry[0]) != "tini":
		bad("ENTRYPOINT %q does not start tini, so orphaned grandchildren are never reaped", entry)
	case dash < 0 || dash+1 >= len(entry) || entry[dash+1] != gateway:
		bad("ENTRYPOINT %q does not run the gateway (%s) after --", entry, gateway)
	}

	stop := commands[*instructions.StopSignalCommand](s)
	if len(stop) == 0 || stop[len(stop)-1].Signal != "SIGTERM" {
		bad("no STOPSIGNAL SIGTERM: the gateway drains on SIGTERM")
	}

	problems = append(problems, checkHealthcheck(s, gateway)...)

	env, err := d.env(s)
	if err != nil {
		bad("%v", err)
		return problems, env
	}
	host, port, err := splitAddr(env["GATEWAY_ADDR"])
	if err != nil || !unspecified(host) {
		bad("ENV GATEWAY_ADDR=%q: want every interface (the default is loopback, unreachable from outside the container)", env["GATEWAY_ADDR"])
	}
	var exposed []string
	for _, e := range commands[*instructions.ExposeCommand](s) {
		for _, p := range e.Ports {
			exposed = append(exposed, strings.TrimSuffix(p, "/tcp"))
		}
	}
	if port != "" && !slices.Contains(exposed, port) {
		bad("EXPOSE %v does not include GATEWAY_ADDR's port %s", exposed, port)
	}
	if words := strings.Fields(env["GATEWAY_COMMAND"]); len(words) == 0 || words[0] != "mcp-server-everything" || !slices.Contains(words, "stdio") {
		bad("ENV GATEWAY_COMMAND=%q: want server-everything's command on stdio", env["GATEWAY_COMMAND"])
	}
	return problems, env
}

func checkHealthcheck(s instructions.Stage, gateway string) []string {
	hs := commands[*instructions.HealthCheckCommand](s)
	if len(hs) == 0 {
		return []string{"no HEALTHCHECK"}
	}
	h := hs[len(hs)-1].Health
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if len(h.Test) < 3 || h.Test[0] != "CMD" || h.Test[1] != gateway || h.Test[2] != "healthcheck" {
		bad("HEALTHCHECK runs %q, want [CMD %s healthcheck ...] in exec form (no shell, no curl in the image)", h.Test, gateway)
	}
	own := 3 * time.Second // gateway healthcheck's default -timeout
	if i := slices.Index(h.Test, "-timeout"); i > 0 && i+1 < len(h.Test) {
		d, err := time.ParseDuration(h.Test[i+1])
		if err != nil {
			bad("HEALTHCHECK -timeout %s: %v", h.Test[i+1], err)
		}
		own = d
	}
	switch {
	case h.Interval <= 0 || h.Interval > time.Minute:
		bad("HEALTHCHECK --interval=%v: want one set, at most a minute", h.Interval)
	case h.Timeout <= own || h.Timeout >= h.Interval:
		bad("HEALTHCHECK --timeout=%v: want it above the check's own timeout (%v), so that the check reports why, and below the interval (%v)", h.Timeout, own, h.Interval)
	}
	if h.Retries < 2 {
		bad("HEALTHCHECK --retries=%d: one slow answer should not make the container unhealthy", h.Retries)
	}
	if h.StartPeriod <= 0 {
		bad("HEALTHCHECK without --start-period")
	}
	return problems
}

func TestDockerfile(t *testing.T) {
	problems, img := checkDockerfile(readRepo(t, "Dockerfile"), repoPins(t))
	for _, p := range problems {
		t.Error(p)
	}
	if img.uid <= 0 || img.gateway == "" || img.env["HOME"] == "" {
		t.Errorf("the image: %+v; want a user, the gateway's path and HOME", img)
	}
}

// Each check finds what it is there for: the Dockerfile with one thing
// broken has that problem.
func TestDockerfileChecksBite(t *testing.T) {
	src := string(readRepo(t, "Dockerfile"))
	want := repoPins(t)
	for _, c := range []struct {
		name, old, new, problem string
	}{
		{"one stage", "FROM golang:1.26.8 AS build\n", "", "parse"},
		{"unknown instruction", "STOPSIGNAL SIGTERM", "STOPSIGNAL SIGTERM\nSTOPSINGAL SIGTERM", "parse"},
		{"lint warning", "AS runtime", "as runtime", "FromAsCasing"},
		{"old Go", "FROM golang:1.26.8 AS", "FROM golang:1.26 AS", "go.mod's go line"},
		{"cgo", "CGO_ENABLED=0 go build", "go build", "CGO_ENABLED=0"},
		{"no trimpath", "-trimpath ", "", "-trimpath"},
		{"symbols kept", `-ldflags="-s -w" `, "", "-ldflags"},
		{"modules not cached", "COPY go.mod go.sum ./\n", "", "go.mod and go.sum"},
		{"copy from a stage that is not there", "COPY --from=build", "COPY --from=builder", "no earlier stage"},
		{"no gateway copied", "COPY --from=build /out/gateway /usr/local/bin/gateway\n", "", "copies no gateway"},
		{"root", "USER 10001:10001", "USER 0", "root"},
		{"user by name", "USER 10001:10001", "USER gateway", "not numeric"},
		{"no user", "USER 10001:10001\n", "", "no USER"},
		{"no tini", `ENTRYPOINT ["/usr/bin/tini", "-s", "--", "/usr/local/bin/gateway"]`, `ENTRYPOINT ["/usr/local/bin/gateway"]`, "does not start tini"},
		{"tini not installed", "install -y --no-install-recommends tini ca-certificates", "install -y --no-install-recommends ca-certificates", "does not install tini"},
		{"no CA roots", "install -y --no-install-recommends tini ca-certificates", "install -y --no-install-recommends tini", "does not install ca-certificates"},
		{"tini runs something else", `"--", "/usr/local/bin/gateway"]`, `"--", "/bin/sh"]`, "does not run the gateway"},
		{"shell entrypoint", `ENTRYPOINT ["/usr/bin/tini", "-s", "--", "/usr/local/bin/gateway"]`, `ENTRYPOINT /usr/bin/tini -- /usr/local/bin/gateway`, "shell form"},
		{"stop signal", "STOPSIGNAL SIGTERM", "STOPSIGNAL SIGKILL", "STOPSIGNAL"},
		{"no stop signal", "STOPSIGNAL SIGTERM\n", "", "STOPSIGNAL"},
		{"no healthcheck", "HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \\\n  CMD [\"/usr/local/bin/gateway\", \"healthcheck\", \"-timeout\", \"3s\"]\n", "", "no HEALTHCHECK"},
		{"healthcheck with curl", `CMD ["/usr/local/bin/gateway", "healthcheck", "-timeout", "3s"]`, `CMD curl -f http://localhost:8080/readyz`, "exec form"},
		{"healthcheck timeout", "--timeout=5s", "--timeout=2s", "--timeout"},
		{"healthcheck interval", "--interval=15s", "--interval=5m", "--interval"},
		{"healthcheck retries", "--retries=3", "--retries=1", "--retries"},
		{"healthcheck start period", "--start-period=10s ", "", "--start-period"},
		{"server-everything version", "server-everything@2026.8.31", "server-everything@2025.1.1", "pins"},
		{"server-everything unpinned", "server-everything@2026.8.31", "server-everything", "pinned version"},
		{"other node", "FROM node:22-bookworm-slim", "FROM node:20-bookworm-slim", "node:"},
		{"loopback", "GATEWAY_ADDR=:8080", "GATEWAY_ADDR=127.0.0.1:8080", "every interface"},
		{"port not exposed", "EXPOSE 8080", "EXPOSE 9000", "EXPOSE"},
		{"child not on stdio", `GATEWAY_COMMAND="mcp-server-everything stdio"`, `GATEWAY_COMMAND="mcp-server-everything sse"`, "GATEWAY_COMMAND"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(src, c.old) {
				t.Fatalf("the Dockerfile has no %q to change", c.old)
			}
			problems, _ := checkDockerfile([]byte(strings.Replace(src, c.old, c.new, 1)), want)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, c.problem) }) {
				t.Errorf("problems %q, want one with %q", problems, c.problem)
			}
		})
	}
}
