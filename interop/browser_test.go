package interop

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The web page in a real browser: Debian's Chromium, driven by
// playwright-core (browser.mjs), against the gateway with the demo child.
// A long call shows its progress as it arrives, and Cancel ends it on the
// child; a short one shows its result; invalid arguments and a tool's own
// error show their problems; images and audio are shown; the page works
// from the keyboard alone (Escape cancels), on a phone-sized screen, and
// against a gateway that wants a bearer token. The screenshots stay in a
// temporary directory that the test prints.
func TestBrowser(t *testing.T) {
	nodeBin := node(t)
	chromium := chromiumBin(t)
	if _, err := os.Stat(filepath.Join("node_modules", "playwright-core", "package.json")); err != nil {
		missing(t, "playwright-core is not installed: run scripts/setup-interop")
	}
	g := startGateway(t, nil)
	token := rand.Text()
	authed := startGateway(t, []string{"GATEWAY_AUTH_TOKENS=browser:" + token})
	g.WaitReady()
	authed.WaitReady()
	dir, err := os.MkdirTemp("", "gateway-browser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, "browser.mjs", g.URL, dir)
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium, "AUTH_URL="+authed.URL, "AUTH_TOKEN="+token)
	// SIGTERM lets playwright close the browser it started.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	wait := func() error {
		waited = true
		return cmd.Wait()
	}
	defer func() {
		if !waited {
			cancel()
			wait()
			t.Logf("browser.mjs:\n%s", stderr.String())
		}
	}()

	var shots []string
	done := false
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		var ev struct {
			Event    string    `json:"event"`
			Name     string    `json:"name"`
			Path     string    `json:"path"`
			Progress []float64 `json:"progress"`
		}
		if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
			t.Fatalf("browser.mjs printed %q: %v", lines.Text(), err)
		}
		switch ev.Event {
		case "screenshot":
			checkPNG(t, ev.Path)
			shots = append(shots, ev.Name)
			t.Logf("screenshot %s: %s", ev.Name, ev.Path)
			fmt.Printf("screenshot %s: %s\n", ev.Name, ev.Path)
		case "cancelled":
			if !slices.IsSorted(ev.Progress) || len(slices.Compact(slices.Clone(ev.Progress))) < 3 {
				t.Errorf("the progress bar took the values %v, want at least three, rising", ev.Progress)
			}
			checkCancelledSlow(t, g.URL, 1)
			io.WriteString(stdin, "continue\n")
		case "done":
			done = true
		default:
			t.Fatalf("browser.mjs printed an unknown event %q", lines.Text())
		}
	}
	if err := wait(); err != nil {
		t.Fatalf("browser.mjs: %v\n%s", err, stderr.String())
	}
	if !done {
		t.Fatalf("browser.mjs ended without finishing:\n%s", stderr.String())
	}
	// Escape in the keyboard run cancelled a second call.
	checkCancelledSlow(t, g.URL, 2)
	want := []string{"slow-progress", "slow-cancelled", "echo-result", "echo-invalid", "tool-error", "keyboard-echo", "keyboard-cancelled", "phone", "awkward-tools", "auth-refused"}
	if !slices.Equal(shots, want) {
		t.Errorf("screenshots %v, want %v", shots, want)
	}
}

// checkCancelledSlow checks that the demo child received n
// notifications/cancelled, each for a call of the slow tool that was still
// running: the browser's cancel reached the child.
func checkCancelledSlow(t *testing.T, url string, n int) {
	t.Helper()
	rec := demoReceived(t, url, n)
	slow := map[string]bool{}
	for _, r := range rec.Requests {
		if r.Method == "tools/call" && r.Tool == "slow" {
			slow[string(r.ID)] = true
		}
	}
	if len(rec.Cancellations) != n {
		t.Fatalf("the child received %d cancellations, want %d: %+v", len(rec.Cancellations), n, rec.Cancellations)
	}
	for _, c := range rec.Cancellations {
		if !slow[string(c.RequestID)] || !c.Running {
			t.Errorf("cancellation %+v: want one for a running call of slow (calls of slow: %v)", c, slow)
		}
	}
}

func checkPNG(t *testing.T, path string) {
	t.Helper()
	if !strings.HasPrefix(path, os.TempDir()) {
		t.Errorf("screenshot %s is outside the temporary directory", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) < 1000 {
		t.Errorf("screenshot %s is not a PNG of a page (%d bytes)", path, len(b))
	}
}

// chromiumBin is Debian's Chromium, which scripts/setup-browser installs.
func chromiumBin(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		missing(t, "chromium is not installed: run scripts/setup-browser")
	}
	return path
}

// missing skips the test, or fails it when GATEWAY_REQUIRE_INTEROP is set
// (as in CI), where a missing setup is a failure.
func missing(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("GATEWAY_REQUIRE_INTEROP") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
}
