package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/stdiomcp/gateway/internal/gatewaytest"
)

// nginxBin is Debian's nginx, which scripts/setup-nginx installs. Without
// it the test is skipped, unless GATEWAY_REQUIRE_INTEROP is set (as in
// CI), where a missing setup is a failure.
func nginxBin(t *testing.T) string {
	t.Helper()
	if path, err := exec.LookPath("nginx"); err == nil {
		return path
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	if os.Getenv("GATEWAY_REQUIRE_INTEROP") != "" {
		t.Fatal("nginx is not installed: run scripts/setup-nginx")
	}
	t.Skip("nginx is not installed: run scripts/setup-nginx (or ./scripts/test)")
	return ""
}

// nginxConf is the proxy in front of the replicas: round robin, no
// affinity, streams passed through as they come.
var nginxConf = template.Must(template.New("nginx.conf").Parse(`
{{if .Root}}# As root, nginx would hand its workers to nobody, who cannot enter the
# test's private directory; they run as the test does instead.
user root;
{{end -}}
# One worker: one round-robin cursor, so that consecutive requests go to
# consecutive replicas.
worker_processes 1;
daemon off;
pid {{.Dir}}/nginx.pid;
error_log stderr warn;
events { worker_connections 256; }
http {
	client_body_temp_path {{.Dir}}/body;
	proxy_temp_path {{.Dir}}/proxy;
	fastcgi_temp_path {{.Dir}}/fastcgi;
	uwsgi_temp_path {{.Dir}}/uwsgi;
	scgi_temp_path {{.Dir}}/scgi;

	# One JSON line per request, when it ends: which client sent it, which
	# replicas nginx tried ($upstream_addr and $upstream_status list every
	# attempt, comma-separated), what the client got, and whether the
	# answer was complete (empty when the client went away first).
	log_format scaleout escape=json '{"client":"$http_x_scaleout_client","method":"$request_method",'
		'"uri":"$request_uri","status":"$status","upstream":"$upstream_addr","upstream_status":"$upstream_status",'
		'"completion":"$request_completion"}';
	access_log {{.AccessLog}} scaleout;

	upstream gateways {
		# Round robin (the default): no ip_hash, no hash, no sticky.
{{- range .Upstreams}}
		server {{.}};
{{- end}}
		keepalive 16;
	}

	server {
		listen {{.Listen}};
		location / {
			proxy_pass http://gateways;
			# HTTP/1.1 with no Connection header: kept-alive connections to
			# the replicas, and chunked SSE answers.
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			# The gateway checks Host against DNS rebinding: pass the
			# client's, not the upstream block's name.
			proxy_set_header Host $http_host;
			# The client's address, appended to what the client wrote, for
			# GATEWAY_TRUSTED_PROXIES: a proxy that passes the header on as
			# it came lets a client name itself.
			proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
			# The gateway's GATEWAY_MAX_BODY_BYTES, not nginx's 1 MiB.
			client_max_body_size 16m;
			# Progress events reach the client as the gateway writes them.
			proxy_buffering off;
			# A call may run for minutes; the gateway's own keep-alive
			# comments (GATEWAY_SSE_KEEP_ALIVE) keep quiet streams under it.
			proxy_read_timeout 1h;
			proxy_send_timeout 1h;
			# A replica that is draining answers new calls 503 before
			# anything reaches its child, and one that has closed its
			# listener refuses the connection, which sent nothing: for these
			# two cases retrying the POST on the next replica is safe, so
			# non_idempotent is allowed. In general it is not: "error" and
			# "timeout" also cover a replica that died or stalled after its
			# child started the call, and a 503 also answers a call lost
			# when its child exited; a retry runs such a call twice.
			# (The request body is buffered, the default, so it can be sent
			# again.)
			proxy_next_upstream error timeout http_503 non_idempotent;
			proxy_next_upstream_tries 3;
			# For the test: which replica answered, seen by the client.
			add_header X-Upstream $upstream_addr always;
			add_header X-Upstream-Status $upstream_status always;
		}
	}
}
`))

// proxy is a running nginx with its access log.
type proxy struct {
	URL  string
	Log  *accessLog
	done chan struct{}
}

// startNginx runs nginx unprivileged in front of the upstreams (host:port).
// It listens on a socket the test opened and hands over (nginx takes
// inherited sockets from its NGINX variable), so the port is never raced
// for and connections wait in the backlog until nginx accepts them. Its
// access log is a FIFO the test reads, so waiting for an entry needs no
// polling.
func startNginx(t *testing.T, upstreams []string) *proxy {
	t.Helper()
	bin := nginxBin(t)
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lnFile, err := ln.(*net.TCPListener).File()
	ln.Close() // the duplicate in lnFile keeps the socket listening
	if err != nil {
		t.Fatal(err)
	}
	defer lnFile.Close()

	fifo := filepath.Join(dir, "access.log")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Opened read-write, so that this open does not wait for nginx's and
	// the reader never sees end of file between writers.
	logPipe, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{URL: "http://" + ln.Addr().String(), Log: newAccessLog(), done: make(chan struct{})}
	logRead := make(chan struct{})
	go p.Log.read(logPipe, logRead)

	conf := filepath.Join(dir, "nginx.conf")
	var text bytes.Buffer
	err = nginxConf.Execute(&text, map[string]any{
		"Root": os.Geteuid() == 0, "Dir": dir, "AccessLog": fifo,
		"Listen": ln.Addr().String(), "Upstreams": upstreams,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, text.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", conf, "-e", "stderr")
	cmd.ExtraFiles = []*os.File{lnFile} // fd 3
	cmd.Env = append(os.Environ(), "NGINX=3;")
	var stderr gatewaytest.LockedBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var exitErr error
	go func() {
		exitErr = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		// SIGQUIT: nginx stops after the requests in progress.
		cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-p.done
			t.Errorf("nginx did not stop on SIGQUIT")
		}
		logPipe.Close()
		<-logRead
		if t.Failed() || exitErr != nil {
			t.Logf("nginx (%v):\n%s\naccess log:\n%s", exitErr, stderr.String(), p.Log.text())
		}
	})
	return p
}

// accessEntry is one line of the access log (see nginxConf).
type accessEntry struct {
	Client         string `json:"client"`
	Method         string `json:"method"`
	URI            string `json:"uri"`
	Status         string `json:"status"`
	Upstream       string `json:"upstream"`
	UpstreamStatus string `json:"upstream_status"`
	Completion     string `json:"completion"`
}

// servedBy is the replica that gave the final answer.
func (e accessEntry) servedBy() string { return lastTried(e.Upstream) }

// lastTried is the last of the replicas nginx tried, in $upstream_addr's
// list ("a, b" when a refused and b answered).
func lastTried(upstreams string) string {
	tried := strings.Split(upstreams, ", ")
	return tried[len(tried)-1]
}

// accessLog collects nginx's access log as it is written.
type accessLog struct {
	mu      sync.Mutex
	entries []accessEntry
	lines   []string
	changed chan struct{}
}

func newAccessLog() *accessLog { return &accessLog{changed: make(chan struct{})} }

func (l *accessLog) read(pipe *os.File, done chan<- struct{}) {
	defer close(done)
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		var e accessEntry
		err := json.Unmarshal(sc.Bytes(), &e)
		l.mu.Lock()
		l.lines = append(l.lines, sc.Text())
		if err == nil {
			l.entries = append(l.entries, e)
		}
		close(l.changed)
		l.changed = make(chan struct{})
		l.mu.Unlock()
	}
}

// mark is how many entries there are now; wait looks at the later ones.
func (l *accessLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

// wait returns the entries after mark once done says they are complete.
func (l *accessLog) wait(t *testing.T, ctx context.Context, mark int, what string, done func([]accessEntry) bool) []accessEntry {
	t.Helper()
	for {
		l.mu.Lock()
		entries, changed := append([]accessEntry(nil), l.entries[mark:]...), l.changed
		l.mu.Unlock()
		if done(entries) {
			return entries
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("nginx's access log does not show %s: %s", what, fmtEntries(entries))
		}
	}
}

func (l *accessLog) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func fmtEntries(entries []accessEntry) string {
	var b strings.Builder
	for _, e := range entries {
		fmt.Fprintf(&b, "\n  %+v", e)
	}
	return b.String()
}
