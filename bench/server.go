package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// server is a target's process, started on a port and listening there.
type server struct {
	cmd     *exec.Cmd
	port    int
	exited  chan struct{} // closed once the process was waited for
	waitErr error         // how it ended, once exited is closed
	stderr  *tailWriter
}

// stderrTail is how much of a server's stderr is kept to say why it ended.
const stderrTail = 4 << 10

// serverWaitDelay is how long a server has to exit once the run is cut
// short (it is then killed), and bounds how long the end of its stderr is
// read after it exited: a descendant it left behind may hold the pipe
// open. stop gives it as long.
const serverWaitDelay = 10 * time.Second

// startServer starts t in front of child on a free port and waits until
// it listens there. The caller stops it.
func startServer(ctx context.Context, t target, child []string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return startOn(ctx, t, port, child)
}

// startOn starts t on port. It returns once the server's own process tree
// listens there, and fails as soon as the server exits, with the end of
// what it wrote on stderr. Its errors do not name t: the callers' do.
func startOn(ctx context.Context, t target, port int, child []string) (*server, error) {
	cmd := t.command(ctx, port, child)
	s := &server{cmd: cmd, port: port, exited: make(chan struct{}), stderr: &tailWriter{max: stderrTail}}
	if cmd.Stderr == nil {
		cmd.Stderr = s.stderr
	} else {
		cmd.Stderr = io.MultiWriter(cmd.Stderr, s.stderr)
	}
	// Stopped in order when the run is cut short, as by stop, not killed
	// outright (CommandContext's way): a relay floor killed left its child
	// behind, writing into a closed pipe. In a process group of its own,
	// so that a Ctrl-C reaches the suite alone, which stops it so: the
	// terminal's SIGINT ended a server's child under it, and the server's
	// complaints hid that the run was interrupted.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = serverWaitDelay
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	if err := s.await(ctx, 30*time.Second); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// await dials the server's port until it accepts, the server exits, or
// within has passed; then checks that what accepted is the server (see
// owns).
func (s *server) await(ctx context.Context, within time.Duration) error {
	addr := "127.0.0.1:" + strconv.Itoa(s.port)
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	pace := time.NewTicker(20 * time.Millisecond)
	defer pace.Stop()
	for {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return s.owns()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.exited:
			return s.exitError("before listening on " + addr)
		case <-deadline.C:
			return fmt.Errorf("nothing listens on %s after %v: %w%s", addr, within, err, s.stderrNote())
		case <-pace.C:
		}
	}
}

// owns checks that the server is still running and that every socket
// listening on its port is its process tree's. freePort's port is free
// only until its listener closes: another process may take it before the
// server binds it, and would then be measured in its stead.
func (s *server) owns() error {
	if err := s.gone(); err != nil {
		return err
	}
	inodes, err := listeners(s.port)
	if err != nil {
		return err
	}
	ours := map[string]bool{}
	for _, pid := range (procTree{pid: s.cmd.Process.Pid}).pids() {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil {
				ours[l] = true
			}
		}
	}
	for _, ino := range inodes {
		if !ours["socket:["+ino+"]"] {
			return fmt.Errorf("port %d is held by another process than the server's (it took the port before the server did)%s", s.port, s.stderrNote())
		}
	}
	return s.gone()
}

// listeners are the inodes of the TCP sockets listening on port, over
// IPv4 and IPv6, from /proc/net/tcp and tcp6.
func listeners(port int) ([]string, error) {
	want := fmt.Sprintf(":%04X", port)
	var inodes []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) && f == "/proc/net/tcp6" {
			continue // no IPv6
		}
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(line)
			if len(fields) < 10 || fields[3] != "0A" || !strings.HasSuffix(fields[1], want) {
				continue
			}
			inodes = append(inodes, fields[9])
		}
	}
	if len(inodes) == 0 {
		return nil, fmt.Errorf("no socket listens on port %d in /proc/net/tcp", port)
	}
	return inodes, nil
}

// gone is nil while the server runs, else how it ended.
func (s *server) gone() error {
	select {
	case <-s.exited:
		return s.exitError("")
	default:
		return nil
	}
}

// exitError says the server exited (when), how, and what it wrote last on
// stderr.
func (s *server) exitError(when string) error {
	if when != "" {
		when = " " + when
	}
	how := "exited"
	if s.waitErr != nil {
		how = s.waitErr.Error()
	}
	return fmt.Errorf("the server exited%s (%s)%s", when, how, s.stderrNote())
}

// stderrNote is the end of the server's stderr, for an error message.
func (s *server) stderrNote() string {
	t := strings.TrimSpace(s.stderr.String())
	if t == "" {
		return ""
	}
	return "; its stderr ended:\n" + t
}

// stop ends the server: SIGTERM, then SIGKILL if it is still there
// serverWaitDelay later.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(serverWaitDelay):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// pid is the server's process.
func (s *server) pid() int { return s.cmd.Process.Pid }

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
	cut bool // bytes before buf were dropped
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	if len(p) >= w.max {
		w.cut = w.cut || len(w.buf) > 0 || len(p) > w.max
		w.buf = append(w.buf[:0], p[len(p)-w.max:]...)
		return n, nil
	}
	if over := len(w.buf) + len(p) - w.max; over > 0 {
		w.cut = true
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	w.buf = append(w.buf, p...)
	return n, nil
}

// String is what was kept, from its first whole line when it was cut.
func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.buf
	if w.cut {
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
			b = b[i+1:]
		}
	}
	return string(b)
}
