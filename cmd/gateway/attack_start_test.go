package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/internal/gatewaytest"
)

// What the child runs with: none of the gateway's settings or secrets, in
// its environment or (through /proc) in the gateway's; and no credential
// in what it receives or in the gateway's log.
func TestAttackCredentialsStayWithTheGateway(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		shared bool // GATEWAY_SECRET set
	}{
		{"with GATEWAY_SECRET", true},
		// Without GATEWAY_SECRET the gateway hides its /proc entries all
		// the same: GATEWAY_AUTH_TOKENS is there.
		{"tokens only", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			token, key, other := secret(t), secret(t)+secret(t), secret(t)
			childDir := sharedDir(t)
			dump := filepath.Join(childDir, "dump.json")
			env, args := gatewaytest.ChildCommand(t, "env-dump")
			env = append(env,
				"GATEWAY_AUTH_TOKENS=ci:"+token,
				"GATEWAY_CHILD_ENV="+gatewaytest.ChildEnv+","+gatewaytest.DumpFileEnv+",EXTRA=1",
				gatewaytest.DumpFileEnv+"="+dump,
				"SOME_SECRET="+other,
				"GATEWAY_CHILD_DIR="+childDir)
			secrets := []string{token, other}
			if tc.shared {
				env = append(env, "GATEWAY_SECRET="+key)
				secrets = append(secrets, key)
			}
			g := startAsUser(t, env, args[len(args)-1])
			tg := newTarget(t, g, token) // ready: the child wrote its dump before it served

			b, err := os.ReadFile(dump)
			if err != nil {
				t.Fatal(err)
			}
			var d gatewaytest.EnvDump
			if err := json.Unmarshal(b, &d); err != nil {
				t.Fatal(err)
			}
			var path, extra bool
			for _, kv := range d.Environ {
				name, _, _ := strings.Cut(kv, "=")
				switch {
				case strings.HasPrefix(strings.ToUpper(name), "GATEWAY_") || name == "SOME_SECRET":
					t.Errorf("the child's environment holds %s", name)
				case name == "PATH":
					path = true
				case kv == "EXTRA=1":
					extra = true
				}
			}
			if !path || !extra {
				t.Errorf("the child's environment lacks PATH or EXTRA=1: %q", d.Environ)
			}
			want, _ := filepath.EvalSymlinks(childDir)
			if got, _ := filepath.EvalSymlinks(d.Dir); got != want {
				t.Errorf("the child runs in %q; want %q", d.Dir, childDir)
			}
			for _, kv := range d.ParentEnviron {
				for _, s := range secrets {
					if strings.Contains(kv, s) {
						name, _, _ := strings.Cut(kv, "=")
						t.Errorf("the child reads %s in /proc/<gateway>/environ", name)
					}
				}
			}

			r := tg.send(t, token, []string{"Cookie", "session=" + other}, call("meta", `{}`), false)
			r.is(t, 200, 0)
			for _, s := range secrets {
				if strings.Contains(string(r.body), s) {
					t.Errorf("the child received a credential: %s", r.body)
				}
			}
			tg.reached(t, "meta")
			neverLogged(t, g, secrets...)
		})
	}
}

// sharedDir is a temporary directory every user may use.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// startAsUser starts the gateway with child as its command, as the
// tests' user, or as nobody when that is root: root reads every
// process's /proc entries, so only a gateway and child of another user
// show what a child can read of the gateway that runs it.
func startAsUser(t *testing.T, env []string, child string) *gateway {
	t.Helper()
	if os.Geteuid() != 0 {
		return startGateway(t, env, "--", child)
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skipf("running as root, and no setpriv to run the gateway as another user: %v", err)
	}
	dir := sharedDir(t)
	bin, exe := filepath.Join(dir, "gateway"), filepath.Join(dir, "child")
	for from, to := range map[string]string{gatewayBin: bin, child: exe} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return gatewaytest.Start(t, setpriv, env, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "--", exe)
}

// exitsAtStart runs the gateway with env and returns its exit code and
// stderr; a gateway that starts instead is a failure.
func exitsAtStart(t *testing.T, env ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, gatewayBin)
	cmd.Env = append(os.Environ(), append([]string{"GATEWAY_ADDR=127.0.0.1:0"}, env...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if ctx.Err() != nil || !errors.As(err, &exit) {
		t.Fatalf("the gateway did not refuse to start (%v): %s", err, stderr.String())
	}
	return exit.ExitCode(), stderr.String()
}

// Configurations that would expose the gateway or hand its secrets to the
// child stop it at start; an open gateway on the network is warned about.
func TestAttackStartUp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  []string
		says string
	}{
		{"GATEWAY_SECRET for the child", []string{"GATEWAY_SECRET=" + strings.Repeat("k", 32), "GATEWAY_CHILD_ENV=GATEWAY_SECRET"}, "GATEWAY_SECRET"},
		{"gateway_auth_tokens for the child", []string{"GATEWAY_AUTH_TOKENS=" + secret(t), "GATEWAY_CHILD_ENV=gateway_auth_tokens"}, "gateway_auth_tokens"},
		{"anyone on the network, required auth", []string{"GATEWAY_ADDR=0.0.0.0:0", "GATEWAY_REQUIRE_AUTH=true"}, "no authentication is configured"},
		{"HMAC tokens", oauthEnv("ISSUER", "https://issuer.example", "RESOURCE", "https://mcp.example/mcp", "ALGORITHMS", "HS256"), "HS256"},
		{"unsigned tokens", oauthEnv("ISSUER", "https://issuer.example", "RESOURCE", "https://mcp.example/mcp", "ALGORITHMS", "none"), `"none"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stderr := exitsAtStart(t, tc.env...)
			if code != 1 || !strings.Contains(stderr, tc.says) {
				t.Errorf("exit %d, stderr %q; want 1 and a message naming %s", code, stderr, tc.says)
			}
			// A gateway that will not serve never runs the child.
			if strings.Contains(stderr, "child started") {
				t.Errorf("the child was started before the gateway refused to: %s", stderr)
			}
		})
	}
	for _, tc := range []struct {
		name string
		env  []string
		warn bool
	}{
		{"anyone on the network", []string{"GATEWAY_ADDR=0.0.0.0:0"}, true},
		{"tokens on the network", []string{"GATEWAY_ADDR=0.0.0.0:0", "GATEWAY_AUTH_TOKENS=t-" + secret(t)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := startGateway(t, tc.env)
			g.Logs.Wait(t, msgIs("listening")) // the check comes before
			warned := g.Logs.Find(func(r logRecord) bool {
				msg, _ := r["msg"].(string)
				return r["level"] == "WARN" && strings.Contains(msg, "UNAUTHENTICATED")
			})
			if (len(warned) == 1) != tc.warn {
				t.Errorf("UNAUTHENTICATED warnings: %v; want one: %v", warned, tc.warn)
			}
		})
	}
}

// SIGHUP with no authentication to reload is said in the log, and ends
// nothing: its default would end the process, calls and child with it.
func TestSIGHUPWithoutAuthentication(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil)
	g.WaitReady()
	if err := g.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.Logs.Wait(t, msgIs("SIGHUP: nothing to re-read (no authentication is configured); the gateway goes on"))
	echoWorks(t, g, "tools/call")
}

// Settings that open what should stay closed are warned about at start:
// proxies that trust every address, an admin address beyond loopback.
func TestExposingSettingsAreWarnedAbout(t *testing.T) {
	t.Parallel()
	g := startGateway(t, []string{"GATEWAY_TRUSTED_PROXIES=10.0.0.0/8,0.0.0.0/0", "GATEWAY_RATE_LIMIT=100", "GATEWAY_ADMIN_ADDR=0.0.0.0:0"})
	for _, says := range []string{"GATEWAY_TRUSTED_PROXIES trusts every address", "GATEWAY_ADMIN_ADDR is not a loopback address"} {
		g.Logs.Wait(t, func(r logRecord) bool {
			msg, _ := r["msg"].(string)
			return r["level"] == "WARN" && strings.HasPrefix(msg, says)
		})
	}
}
