package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// shellTarget is a server that is the shell script script, its port in
// $PORT.
func shellTarget(script string) target {
	return target{
		name: "sh",
		command: func(ctx context.Context, port int, _ []string) *exec.Cmd {
			cmd := exec.CommandContext(ctx, "sh", "-c", script)
			cmd.Env = append(serverEnv(), "PORT="+strconv.Itoa(port))
			return cmd
		},
	}
}

// A server that exits as it starts fails its start at once, with the end
// of its stderr, not 30 s later with nothing to say why.
func TestServerExitsAtStart(t *testing.T) {
	// More than the tail keeps, then the reason.
	script := `i=0; while [ $i -lt 200 ]; do echo "filler line $i of the log"; i=$((i+1)); done >&2
echo "GATEWAY_FOO: no such setting" >&2; exit 3`
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := startServer(ctx, shellTarget(script), nil)
	if err == nil {
		s.stop()
		t.Fatal("started")
	}
	msg := err.Error()
	if ctx.Err() != nil || !strings.Contains(msg, "GATEWAY_FOO: no such setting") || !strings.Contains(msg, "exit status 3") {
		t.Errorf("got %q; want the exit status and the last stderr line, before the context ends", msg)
	}
	if strings.Contains(msg, "filler line 0 ") || len(msg) > stderrTail+200 {
		t.Errorf("the error holds more than the stderr's tail (%d bytes): %.300q", len(msg), msg)
	}
}

// A port another process took before the server bound it is not taken for
// the server's, though it accepts connections.
func TestServerPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := startOn(ctx, shellTarget("echo waiting >&2; exec sleep 60"), port, nil)
	if err == nil {
		s.stop()
		t.Fatal("another process's port was taken for the server's")
	}
	if !strings.Contains(err.Error(), "another process") {
		t.Errorf("got %v; want it to say another process holds the port", err)
	}
}

// A server listening on the port, over IPv4 or IPv6, is taken for
// itself.
func TestServerOwnsPort(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	targets := []target{floorTarget(exe)}
	// Node listens on every interface, IPv6 and IPv4, by default; the
	// peers do too.
	node := testNode(t)
	targets = append(targets, target{name: "node", command: func(ctx context.Context, port int, _ []string) *exec.Cmd {
		return exec.CommandContext(ctx, node, "-e", "require('net').createServer().listen("+strconv.Itoa(port)+")")
	}})
	for _, tg := range targets {
		s, err := startServer(ctx, tg, nil)
		if err != nil {
			t.Errorf("%s: %v", tg.name, err)
			continue
		}
		if err := s.gone(); err != nil {
			t.Errorf("%s: %v", tg.name, err)
		}
		s.stop()
		if s.gone() == nil {
			t.Errorf("%s: running after stop", tg.name)
		}
	}
}

// The tail keeps the last bytes written, whatever the writes' sizes, and
// starts at a whole line once it was cut.
func TestTailWriter(t *testing.T) {
	w := &tailWriter{max: 16}
	w.Write([]byte("one\n"))
	if got := w.String(); got != "one\n" {
		t.Errorf("got %q", got)
	}
	w.Write([]byte("two\nthree\n"))
	w.Write([]byte("four\n"))
	if got := w.String(); got != "two\nthree\nfour\n" {
		t.Errorf("got %q, want the last whole lines", got)
	}
	w.Write([]byte(strings.Repeat("x", 40) + "\nlast\n"))
	if got := w.String(); got != "last\n" {
		t.Errorf("got %q, want the last whole line", got)
	}
	if len(w.buf) > 16 {
		t.Errorf("kept %d bytes", len(w.buf))
	}
}
