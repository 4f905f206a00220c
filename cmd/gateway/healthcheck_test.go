package main

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func TestHealthURL(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1:8080":   "http://127.0.0.1:8080/healthz",
		":8080":            "http://127.0.0.1:8080/healthz",
		"0.0.0.0:8080":     "http://127.0.0.1:8080/healthz",
		"[::]:8080":        "http://[::1]:8080/healthz",
		"[::1]:9000":       "http://[::1]:9000/healthz",
		"10.1.2.3:80":      "http://10.1.2.3:80/healthz",
		"gateway.svc:8080": "http://gateway.svc:8080/healthz",
	} {
		if got, err := healthURL(addr); err != nil || got != want {
			t.Errorf("healthURL(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
	for _, addr := range []string{"", "8080", "localhost", "localhost:"} {
		if got, err := healthURL(addr); err == nil {
			t.Errorf("healthURL(%q) = %q, want an error", addr, got)
		}
	}
}

// runHealthcheck runs `gateway healthcheck args...` with GATEWAY_ADDR=addr
// and returns its exit code and stderr.
func runHealthcheck(t *testing.T, addr string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(gatewayBin, append([]string{"healthcheck"}, args...)...)
	cmd.Env = append(os.Environ(), "GATEWAY_ADDR="+addr)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, stderr.String()
}

// listen serves h on a listener at addr, which may be a wildcard, and
// returns the port.
func listen(t *testing.T, addr string, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s here: %v", addr, err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

func TestHealthcheck(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		asked []string
	)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Method+" "+r.URL.Path)
		mu.Unlock()
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
		}
	})
	down := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusServiceUnavailable)
	})
	// Holds the request until the client gives up.
	hang := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	closed := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		return ln.Addr().String()
	}()

	okPort := listen(t, "127.0.0.1:0", ok)
	anyPort := listen(t, "0.0.0.0:0", ok)
	type check struct {
		name, addr string
		args       []string
		code       int
		stderr     string // words of the one line on stderr; "" means nothing
	}
	cases := []check{
		{name: "ok", addr: "127.0.0.1:" + okPort, code: 0},
		{name: "every interface, no host", addr: ":" + anyPort, code: 0},
		{name: "every interface, 0.0.0.0", addr: "0.0.0.0:" + anyPort, code: 0},
		{name: "not ok", addr: "127.0.0.1:" + listen(t, "127.0.0.1:0", down), code: 1, stderr: "503 Service Unavailable"},
		{name: "nothing listens", addr: closed, code: 1, stderr: "connection refused"},
		{name: "no answer in time", addr: "127.0.0.1:" + listen(t, "127.0.0.1:0", hang), args: []string{"-timeout", "200ms"}, code: 1, stderr: "deadline exceeded"},
		{name: "a bad address", addr: "localhost", code: 1, stderr: "GATEWAY_ADDR"},
	}
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		ln.Close()
		cases = append(cases, check{name: "every interface, [::]", addr: "[::]:" + listen(t, "[::]:0", ok), code: 0})
	}
	for _, c := range cases {
		code, stderr := runHealthcheck(t, c.addr, c.args...)
		if code != c.code {
			t.Errorf("%s: exit %d, want %d (stderr %q)", c.name, code, c.code, stderr)
		}
		if c.stderr == "" && stderr != "" {
			t.Errorf("%s: stderr %q, want nothing", c.name, stderr)
		}
		if c.stderr != "" && (!strings.Contains(stderr, c.stderr) || strings.Count(stderr, "\n") != 1) {
			t.Errorf("%s: stderr %q, want one line with %q", c.name, stderr, c.stderr)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range asked {
		if a != "GET /healthz" {
			t.Errorf("the healthcheck asked %s, want GET /healthz", a)
		}
	}
	if len(asked) < 3 {
		t.Errorf("the gateway stand-ins were asked %d times, want 3 or more", len(asked))
	}
	if code, _ := runHealthcheck(t, "127.0.0.1:"+okPort, "extra"); code != 2 {
		t.Errorf("an extra argument: exit %d, want 2", code)
	}
}

// The image's HEALTHCHECK passes while the gateway drains (its readiness
// fails then, by design), and fails once the gateway has stopped.
func TestHealthcheckWhileDraining(t *testing.T) {
	t.Parallel()
	g := startGateway(t, []string{"GATEWAY_ADDR=0.0.0.0:0", "GATEWAY_SHUTDOWN_GRACE=1m"})
	g.WaitReady()
	addr := strings.TrimPrefix(g.URL, "http://")
	if code, stderr := runHealthcheck(t, addr); code != 0 {
		t.Fatalf("healthcheck of a ready gateway on %s: exit %d, %s", addr, code, stderr)
	}
	cancel := slowCall(t, g.URL, 1)
	if err := g.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := g.Await("not-ready"); !r.Draining {
		t.Fatalf("/readyz after SIGTERM: %+v, want draining", r)
	}
	if code, stderr := runHealthcheck(t, addr); code != 0 {
		t.Errorf("healthcheck while draining: exit %d, %s; want 0", code, stderr)
	}
	cancel()
	<-g.Done
	if code, _ := runHealthcheck(t, addr); code != 1 {
		t.Errorf("healthcheck after the gateway stopped: exit %d, want 1", code)
	}
}
