package deploy

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// podEnv is the gateway's environment in a pod of the rendering, for a
// run on this machine: the image's, the ConfigMap's and the container's
// settings, with each Secret volume written to a directory of its own
// (values in replace take the place of a Secret's, by the Secret's name
// prefix and key) and the paths on it moved there. The listen addresses
// keep every interface but take any free port, and the image's child,
// which is not installed here, gives way to the gateway's demo server.
func podEnv(t *testing.T, objs []runtime.Object, f facts, replace map[string]map[string]string) map[string]string {
	t.Helper()
	c := &checker{objs: objs, f: f}
	ctr := gatewayContainer(t, objs)
	env := map[string]string{}
	for k, s := range c.env(*ctr) {
		if s.from == "secret" {
			t.Fatalf("%s comes from a Secret through the environment: teach podEnv", k)
		}
		env[k] = s.value
	}
	d := dep(t, objs)
	for _, m := range ctr.VolumeMounts {
		src := c.volume(d, m.Name).Secret
		if src == nil {
			continue
		}
		if m.SubPath != "" || len(src.Items) > 0 {
			t.Fatalf("volume %s: a subPath or items: teach podEnv", m.Name)
		}
		dir := t.TempDir()
		for _, s := range c.secrets(src.SecretName) {
			for k, v := range s.Data {
				for prefix, values := range replace {
					if r, ok := values[k]; ok && strings.HasPrefix(s.Name, prefix) {
						v = []byte(r)
					}
				}
				if err := os.WriteFile(filepath.Join(dir, k), v, 0o400); err != nil {
					t.Fatal(err)
				}
			}
		}
		for k, v := range env {
			if rel, ok := strings.CutPrefix(v, strings.TrimSuffix(m.MountPath, "/")+"/"); ok {
				env[k] = filepath.Join(dir, rel)
			}
		}
	}
	if len(c.problems) > 0 {
		t.Fatalf("the rendering: %q", c.problems)
	}
	env["HOME"] = t.TempDir()
	env["GATEWAY_ADDR"], env["GATEWAY_ADMIN_ADDR"] = ":0", ":0"
	delete(env, "GATEWAY_COMMAND")
	return env
}

// runGateway runs the gateway with env until it logs that it listens
// (then stops it) or exits. It returns whether it listened and what it
// wrote to stderr.
func runGateway(t *testing.T, env map[string]string) (listened bool, stderr string) {
	t.Helper()
	cmd := exec.Command(gatewayBinary(t))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		all.WriteString(sc.Text() + "\n")
		var rec struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" && !listened {
			listened = true
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Error(err)
			}
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	switch {
	case listened && err != nil:
		t.Errorf("the gateway's stop: %v\n%s", err, all.String())
	case !listened && !errors.As(err, &exit):
		t.Errorf("the gateway neither listened nor failed: %v\n%s", err, all.String())
	}
	return listened, all.String()
}

// The example overlay's settings, run by the real gateway: with either
// placeholder it refuses to start, so that nobody runs it with a value
// published here; with real values it starts; and without its tokens it
// refuses too, since GATEWAY_REQUIRE_AUTH is set.
func TestOverlayRunsTheGateway(t *testing.T) {
	rendered, f := exampleOverlay(t)
	random := func(n int) []byte {
		b := make([]byte, n)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	key := map[string]string{"key": base64.StdEncoding.EncodeToString(random(32))}
	tokens := map[string]string{"tokens": "ci:" + hex.EncodeToString(random(32)) + "\n"}
	for _, tc := range []struct {
		name    string
		replace map[string]map[string]string
		drop    string // a setting taken out
		refusal string // what the gateway says as it refuses to start; empty: it starts
	}{
		{"as shipped", nil, "", "it needs at least 32"},
		{"the tokens' placeholder", map[string]map[string]string{"gateway-secret": key}, "", "it needs at least 16"},
		{"the key's placeholder", map[string]map[string]string{"gateway-auth": tokens}, "", "it needs at least 32"},
		{"real values", map[string]map[string]string{"gateway-secret": key, "gateway-auth": tokens}, "", ""},
		{"no tokens", map[string]map[string]string{"gateway-secret": key}, "GATEWAY_AUTH_TOKENS_FILE", "no authentication is configured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, f := clone(rendered, f)
			env := podEnv(t, objs, f, tc.replace)
			delete(env, tc.drop)
			listened, stderr := runGateway(t, env)
			switch {
			case tc.refusal == "" && !listened:
				t.Errorf("the gateway did not start:\n%s", stderr)
			case tc.refusal != "" && listened:
				t.Errorf("the gateway started, want it to refuse (%q):\n%s", tc.refusal, stderr)
			case tc.refusal != "" && !strings.Contains(stderr, tc.refusal):
				t.Errorf("the gateway refused, but not with %q:\n%s", tc.refusal, stderr)
			}
		})
	}
}
