package stdio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// logs records slog entries as "msg key=value ..." strings.
type logs struct {
	mu      sync.Mutex
	entries []string
	levels  []slog.Level // each entry's
	attrs   []slog.Attr
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	for _, a := range l.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, b.String())
	l.levels = append(l.levels, r.Level)
	return nil
}

// levelOf is the level of the first entry with every substring.
func (l *logs) levelOf(substr ...string) (slog.Level, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
next:
	for i, e := range l.entries {
		for _, s := range substr {
			if !strings.Contains(e, s) {
				continue next
			}
		}
		return l.levels[i], true
	}
	return 0, false
}
func (l *logs) WithAttrs(as []slog.Attr) slog.Handler {
	l.mu.Lock()
	defer l.mu.Unlock()
	return &logsView{l, append(append([]slog.Attr{}, l.attrs...), as...)}
}
func (l *logs) WithGroup(string) slog.Handler { return l }
func (l *logs) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.entries...)
}
func (l *logs) find(substr ...string) (string, bool) {
next:
	for _, e := range l.all() {
		for _, s := range substr {
			if !strings.Contains(e, s) {
				continue next
			}
		}
		return e, true
	}
	return "", false
}

type logsView struct {
	l     *logs
	attrs []slog.Attr
}

func (v *logsView) Enabled(ctx context.Context, lv slog.Level) bool { return true }
func (v *logsView) Handle(ctx context.Context, r slog.Record) error {
	r2 := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r2.AddAttrs(v.attrs...)
	r.Attrs(func(a slog.Attr) bool { r2.AddAttrs(a); return true })
	return v.l.Handle(ctx, r2)
}
func (v *logsView) WithAttrs(as []slog.Attr) slog.Handler {
	return &logsView{v.l, append(append([]slog.Attr{}, v.attrs...), as...)}
}
func (v *logsView) WithGroup(string) slog.Handler { return v }

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	p := start(t, child(t, "cat"))
	ctx := context.Background()
	msgs := []string{`{"a":1}`, `{"b":"two"}`, strings.Repeat("z", 200<<10)}
	for _, m := range msgs {
		if err := p.WriteMessage(ctx, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range msgs {
		got, err := p.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("read %.40q (%d bytes), want %.40q (%d bytes)", got, len(got), want, len(want))
		}
	}
	p.Close()
	if _, err := p.ReadMessage(); err != io.EOF {
		t.Errorf("ReadMessage after Close = %v, want io.EOF", err)
	}
	if err := p.WriteMessage(ctx, []byte(`{}`)); !errors.Is(err, ErrBroken) {
		t.Errorf("WriteMessage after Close = %v, want ErrBroken", err)
	}
}

// Concurrent writers must never interleave: every line read back is one of
// the lines written, whole, once. Half of them gather: the large lines
// among those are written alone, the small ones may go out together with
// others.
func TestConcurrentWritesStayWhole(t *testing.T) {
	t.Parallel()
	p := start(t, child(t, "cat"))
	const writers = 32
	lines := make([][]byte, writers)
	for i := range lines {
		lines[i] = []byte(strconv.Itoa(i) + ":" + strings.Repeat(string(rune('a'+i%26)), (i%4)*50_000+10))
	}
	var wg sync.WaitGroup
	for i, line := range lines {
		write := p.WriteMessage
		if i%2 == 0 {
			write = p.GatherMessage
		}
		wg.Go(func() {
			if err := write(context.Background(), line); err != nil {
				t.Error(err)
			}
		})
	}
	readLines(t, p, nil, lines)
	wg.Wait()
}

func TestNewlineRefused(t *testing.T) {
	t.Parallel()
	p := start(t, child(t, "cat"))
	if err := p.WriteMessage(context.Background(), []byte("{\"a\":\n1}")); !errors.Is(err, ErrNewline) {
		t.Fatalf("WriteMessage with a newline = %v, want ErrNewline", err)
	}
	// The refusal must not have broken the stream.
	if err := p.WriteMessage(context.Background(), []byte(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	if got, err := p.ReadMessage(); err != nil || string(got) != `{"ok":true}` {
		t.Fatalf("ReadMessage = %q, %v", got, err)
	}
}

// A line over the limit is skipped with its size and head reported, and the
// next line still arrives.
func TestTooLongLineIsSkipped(t *testing.T) {
	t.Parallel()
	cfg := child(t, "lines", "first", "big:3000000", "after", "big:1048576", "last")
	cfg.MaxMessageBytes = 1 << 20
	p := start(t, cfg)
	expect := func(want string) {
		t.Helper()
		got, err := p.ReadMessage()
		if err != nil || string(got) != want {
			t.Fatalf("ReadMessage = %.40q, %v; want %q", got, err, want)
		}
	}
	expect("first")
	// The line is reported as it passes the limit, long before its end,
	// and again at its end.
	_, err := p.ReadMessage()
	var tl *TooLongError
	if !errors.As(err, &tl) || !tl.Partial || tl.Size <= 1<<20 || tl.Size >= 3_000_000 || !bytes.HasPrefix(tl.Head, []byte(`{"id":7,"result":"xxx`)) {
		t.Fatalf("ReadMessage = %v, want a partial *TooLongError", err)
	}
	_, err = p.ReadMessage()
	if !errors.As(err, &tl) || tl.Partial {
		t.Fatalf("ReadMessage = %v, want *TooLongError", err)
	}
	if tl.Size != 3_000_000 || tl.Limit != 1<<20 || !bytes.HasPrefix(tl.Head, []byte(`{"id":7,"result":"xxx`)) || len(tl.Head) != headBytes {
		t.Errorf("TooLongError = size %d limit %d head %.30q (%d bytes)", tl.Size, tl.Limit, tl.Head, len(tl.Head))
	}
	if want := strings.Repeat("x", headBytes-2) + `"}`; string(tl.Tail) != want {
		t.Errorf("TooLongError tail = %d bytes ending %q; want the line's last %d bytes, without its newline", len(tl.Tail), tl.Tail[max(0, len(tl.Tail)-8):], headBytes)
	}
	expect("after")
	// Exactly at the limit passes.
	got, err := p.ReadMessage()
	if err != nil || len(got) != 1<<20 {
		t.Fatalf("ReadMessage at the limit = %d bytes, %v", len(got), err)
	}
	expect("last")
}

// A 20 MiB line passes, and the memory it took is not kept afterwards.
func TestLargeMessageMemoryIsReleased(t *testing.T) {
	p := start(t, child(t, "cat"))
	big := make([]byte, 20<<20)
	for i := range big {
		big[i] = 'a' + byte(i%26)
	}
	go func() {
		if err := p.WriteMessage(context.Background(), big); err != nil {
			t.Error(err)
		}
	}()
	got, err := p.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, big) {
		t.Fatalf("read %d bytes, not the %d written", len(got), len(big))
	}
	got, big = nil, nil
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	// What stays is the reader's 64 KiB buffer; anything near the message
	// size would mean a retained buffer.
	if ms.HeapAlloc > 16<<20 {
		t.Errorf("heap after the message = %d MiB, want well under the 20 MiB message", ms.HeapAlloc>>20)
	}
	if err := p.WriteMessage(context.Background(), []byte("small")); err != nil {
		t.Fatal(err)
	}
	if got, err := p.ReadMessage(); err != nil || string(got) != "small" {
		t.Fatalf("ReadMessage = %q, %v", got, err)
	}
}

func TestStderrIsLoggedByLine(t *testing.T) {
	t.Parallel()
	rec := &logs{}
	cfg := child(t, "stderr", "hello", "", strings.Repeat("e", 100), strings.Repeat("f", 64), strings.Repeat("g", 64)+"\r", "bye")
	cfg.StderrLineBytes = 64
	cfg.Logger = slog.New(rec)
	p := start(t, cfg)
	if _, err := p.ReadMessage(); err != io.EOF {
		t.Fatalf("ReadMessage = %v, want io.EOF", err)
	}
	p.Close()
	pid := "pid=" + strconv.Itoa(p.Pid())
	for _, want := range [][]string{
		{"child stderr", "line=hello", pid, "stream=stderr"},
		{"child stderr", "line=" + strings.Repeat("e", 64), "truncated=true"},
		{"child stderr " + pid + " stream=stderr line=" + strings.Repeat("e", 36)},
		{"child stderr " + pid + " stream=stderr line=" + strings.Repeat("f", 64)}, // exactly the limit: whole
		{"child stderr " + pid + " stream=stderr line=" + strings.Repeat("g", 64)}, // and with CRLF
		{"child stderr", "line=bye"},
	} {
		if _, ok := rec.find(want...); !ok || (len(want) == 1 && !slices.Contains(rec.all(), want[0])) {
			t.Errorf("no log entry with %q in:\n%s", want, strings.Join(rec.all(), "\n"))
		}
	}
}

// A child that floods its stderr does not flood the log: lines past the
// rate are drained and counted, and the count is logged; none is lost
// from the count.
func TestStderrIsLoggedAtItsRate(t *testing.T) {
	t.Parallel()
	rec := &logs{}
	var args []string
	for i := range 300 {
		args = append(args, "line"+strconv.Itoa(i))
	}
	cfg := child(t, "stderr", args...)
	cfg.StderrRate = 2 // in bursts of 20
	cfg.Logger = slog.New(rec)
	p := start(t, cfg)
	if _, err := p.ReadMessage(); err != io.EOF {
		t.Fatalf("ReadMessage = %v, want io.EOF", err)
	}
	p.Close()
	logged, dropped := 0, 0
	for _, e := range rec.all() {
		switch {
		case strings.HasPrefix(e, "child stderr lines were not logged"):
			_, n, _ := strings.Cut(e, "dropped=")
			n, _, _ = strings.Cut(n, " ")
			d, err := strconv.Atoi(n)
			if err != nil {
				t.Fatalf("%s: %v", e, err)
			}
			dropped += d
		case strings.HasPrefix(e, "child stderr "):
			logged++
		}
	}
	// The burst, and what the rate adds while the lines are written.
	if logged < 20 || logged >= 300 || logged+dropped != 300 {
		t.Errorf("%d lines logged and %d counted as dropped; want the burst of 20 or a few more logged, and all 300 accounted for:\n%s",
			logged, dropped, strings.Join(rec.all(), "\n"))
	}
}

// A child that dies on its own is logged as a warning, though the reader
// sees its stdout end, and Close is called for that, before it is reaped;
// one the gateway stops is logged as information.
func TestUnaskedExitIsAWarning(t *testing.T) {
	t.Parallel()
	for _, killed := range []bool{true, false} {
		rec := &logs{}
		cfg := child(t, "cat")
		cfg.Logger = slog.New(rec)
		p := start(t, cfg)
		if killed {
			if err := syscall.Kill(p.Pid(), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if _, err := p.ReadMessage(); err != io.EOF {
				t.Fatalf("ReadMessage = %v, want io.EOF", err)
			}
		}
		p.Close()
		want := slog.LevelInfo
		if killed {
			want = slog.LevelWarn
		}
		if level, ok := rec.levelOf("child exited"); !ok || level != want {
			t.Errorf("killed %v: child exited logged at %v (found %v), want %v:\n%s", killed, level, ok, want, strings.Join(rec.all(), "\n"))
		}
	}
}

// Close walks the ladder only as far as the child makes it.
func TestCloseLadder(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		child      string
		wantLog    string // the last step taken
		notLog     string // a step that must not be taken
		wantSignal syscall.Signal
	}{
		"exits on stdin close": {child: "cat", notLog: "SIGTERM"},
		"needs SIGTERM":        {child: "ignore-stdin", wantLog: "sending SIGTERM", notLog: "SIGKILL", wantSignal: syscall.SIGTERM},
		"needs SIGKILL":        {child: "ignore-term", wantLog: "sending SIGKILL", wantSignal: syscall.SIGKILL},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rec := &logs{}
			cfg := child(t, tt.child)
			// Short graces where the step is expected to be needed, a
			// generous one where it must not be (a loaded machine can be slow
			// to run a child that would exit on its own).
			cfg.StdinGrace, cfg.TermGrace = time.Minute, time.Minute
			if tt.wantSignal != 0 {
				cfg.StdinGrace = 200 * time.Millisecond
			}
			if tt.wantSignal == syscall.SIGKILL {
				cfg.TermGrace = 200 * time.Millisecond
			}
			cfg.Logger = slog.New(rec)
			p := start(t, cfg)
			if tt.child != "cat" {
				// Wait until the child has set itself up (signal handlers).
				if line, err := p.ReadMessage(); err != nil || string(line) != "ready" {
					t.Fatalf("ReadMessage = %q, %v; want ready", line, err)
				}
			}
			p.Close()
			select {
			case <-p.Exited():
			default:
				t.Fatal("Close returned before the child exited")
			}
			if tt.wantLog != "" {
				if _, ok := rec.find(tt.wantLog); !ok {
					t.Errorf("no %q in the log:\n%s", tt.wantLog, strings.Join(rec.all(), "\n"))
				}
			}
			if _, ok := rec.find(tt.notLog); ok && tt.notLog != "" {
				t.Errorf("log has %q, a step too far:\n%s", tt.notLog, strings.Join(rec.all(), "\n"))
			}
			var ee *exec.ExitError
			err := p.ExitErr()
			switch {
			case tt.wantSignal == 0 && err != nil:
				t.Errorf("ExitErr = %v, want nil", err)
			case tt.wantSignal != 0 && (!errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != tt.wantSignal):
				t.Errorf("ExitErr = %v, want death by %v", err, tt.wantSignal)
			}
		})
	}
}

// Kill ends a child that ignores both stdin closing and SIGTERM at once,
// without waiting out the graces.
func TestKill(t *testing.T) {
	t.Parallel()
	cfg := child(t, "ignore-term")
	cfg.StdinGrace, cfg.TermGrace = time.Hour, time.Hour
	p := start(t, cfg)
	if line, err := p.ReadMessage(); err != nil || string(line) != "ready" {
		t.Fatalf("ReadMessage = %q, %v; want ready", line, err)
	}
	p.Kill()
	var ee *exec.ExitError
	if err := p.ExitErr(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("ExitErr = %v, want death by SIGKILL", err)
	}
	if _, err := p.ReadMessage(); err != io.EOF {
		t.Errorf("ReadMessage after Kill = %v, want io.EOF", err)
	}
}

func TestExitStatus(t *testing.T) {
	t.Parallel()
	p := start(t, child(t, "exit", "3"))
	if _, err := p.ReadMessage(); err != io.EOF {
		t.Fatalf("ReadMessage = %v, want io.EOF", err)
	}
	var ee *exec.ExitError
	if err := p.ExitErr(); !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("ExitErr = %v, want exit status 3", err)
	}
	// Writing to a child that is gone breaks stdin rather than hanging.
	if err := p.WriteMessage(context.Background(), []byte("x")); !errors.Is(err, ErrBroken) {
		t.Errorf("WriteMessage to an exited child = %v, want ErrBroken", err)
	}
}

func TestStartFailure(t *testing.T) {
	t.Parallel()
	_, err := Start(Config{Path: "/nonexistent/server"})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/server") {
		t.Fatalf("Start of a missing program = %v, want an error naming it", err)
	}
}

// A grandchild holding stdout is swept with the group, so EOF arrives.
func TestGrandchildIsSwept(t *testing.T) {
	t.Parallel()
	p := start(t, child(t, "grandchild"))
	line, err := p.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	gpid, _ := strconv.Atoi(string(line))
	if _, err := p.ReadMessage(); err != io.EOF {
		t.Fatalf("ReadMessage = %v, want io.EOF once the group is swept", err)
	}
	if !exits(t, gpid, 10*time.Second) {
		t.Errorf("grandchild %d still running after the sweep", gpid)
	}
}

// A grandchild that left the group cannot be swept; the reader is cut loose
// after DrainGrace instead of hanging.
func TestEscapedGrandchildDoesNotHangTheReader(t *testing.T) {
	t.Parallel()
	cfg := child(t, "grandchild", "setsid")
	cfg.DrainGrace = 100 * time.Millisecond
	p := start(t, cfg)
	line, err := p.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	gpid, _ := strconv.Atoi(string(line))
	t.Cleanup(func() { syscall.Kill(gpid, syscall.SIGKILL) })
	if _, err := p.ReadMessage(); err != io.EOF {
		t.Fatalf("ReadMessage = %v, want io.EOF", err)
	}
	p.Close()
}

// exits reports whether pid exits (or is gone) within d. It waits on a
// pidfd, which turns readable when the process exits, even for a process
// that is not our child.
func exits(t *testing.T, pid int, d time.Duration) bool {
	const sysPidfdOpen = 434
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno == syscall.ESRCH {
		return true
	}
	if errno != 0 {
		t.Fatalf("pidfd_open(%d): %v", pid, errno)
	}
	defer syscall.Close(int(fd))
	var set syscall.FdSet
	set.Bits[fd/64] |= 1 << (fd % 64)
	tv := syscall.NsecToTimeval(d.Nanoseconds())
	for {
		n, err := syscall.Select(int(fd)+1, &set, nil, nil, &tv)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("select on pidfd: %v", err)
		}
		return n > 0
	}
}

// A child that never reads stdin: ctx abandons a write that has not begun,
// the stall limit fails one that cannot begin, and neither breaks stdin.
func TestWriteToChildThatDoesNotRead(t *testing.T) {
	t.Parallel()
	cfg := child(t, "noread")
	cfg.WriteStall = 200 * time.Millisecond
	p := start(t, cfg)
	if _, err := p.ReadMessage(); err != nil {
		t.Fatal(err)
	}
	// Fill the pipe exactly, so that the next write cannot start.
	size := pipeSize(t, p.stdin)
	if err := p.WriteMessage(context.Background(), bytes.Repeat([]byte("f"), size-1)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.WriteMessage(ctx, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteMessage with a cancelled ctx = %v, want context.Canceled", err)
	}
	if err := p.WriteMessage(context.Background(), []byte("x")); !errors.Is(err, ErrStalled) {
		t.Errorf("WriteMessage into a full pipe = %v, want ErrStalled", err)
	}
	if p.writeErr != nil {
		t.Errorf("stdin marked broken (%v) though no partial line went out", p.writeErr)
	}
}

// pipeSize asks the kernel for the pipe's capacity. It goes through
// SyscallConn because File.Fd would put the pipe in blocking mode and turn
// off deadlines.
func pipeSize(t *testing.T, f *os.File) int {
	const fGetPipeSz = 1032
	var n uintptr
	control(t, f, func(fd uintptr) (errno syscall.Errno) {
		n, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, fGetPipeSz, 0)
		return errno
	})
	return int(n)
}

// control runs a system call on f's descriptor.
func control(t *testing.T, f *os.File, call func(fd uintptr) syscall.Errno) {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) { errno = call(fd) }); err != nil {
		t.Fatal(err)
	}
	if errno != 0 {
		t.Fatal(errno)
	}
}

// A line the pipe takes only part of at once: the part goes out without
// waiting, the rest once the child reads again, and the line arrives
// whole after the one before it.
func TestLineFinishedAfterPartialWrite(t *testing.T) {
	t.Parallel()
	p, size, resume := stoppedCat(t)
	// Fill all but two pages, so that a longer line fits in part.
	const page = 4096
	first := bytes.Repeat([]byte("a"), size-2*page-1)
	if err := p.WriteMessage(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	second := bytes.Repeat([]byte("b"), 5*page)
	done := make(chan error, 1)
	go func() { done <- p.WriteMessage(context.Background(), second) }()
	// The first two pages of the second line go in at once.
	for i := 0; queued(t, p.stdin) < size; i++ {
		if i == 1_000_000 {
			t.Fatalf("the pipe holds %d of %d bytes: the second line did not go in in part", queued(t, p.stdin), size)
		}
		runtime.Gosched()
	}
	resume()
	for _, want := range [][]byte{first, second} {
		got, err := p.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("read %d bytes (%.10q…), want the %d-byte line", len(got), got, len(want))
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// stoppedCat starts a child that echoes its stdin and stops it, so that
// its stdin pipe (of size bytes) fills; resume lets it go on.
func stoppedCat(t *testing.T) (p *Process, size int, resume func()) {
	t.Helper()
	p = start(t, child(t, "cat"))
	size = pipeSize(t, p.stdin)
	if err := syscall.Kill(p.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resume = func() {
		if err := syscall.Kill(p.Pid(), syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { syscall.Kill(p.Pid(), syscall.SIGCONT) })
	waitState(t, p.Pid(), 'T')
	return p, size, resume
}

// queued is how many bytes wait in the pipe (FIONREAD).
func queued(t *testing.T, f *os.File) int {
	var n int32
	control(t, f, func(fd uintptr) (errno syscall.Errno) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
		return errno
	})
	return int(n)
}

// waitState waits until /proc says the process is in the state (T:
// stopped), reading it at most a million times.
func waitState(t *testing.T, pid int, state byte) {
	t.Helper()
	for range 1_000_000 {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && b[i+2] == state {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("process %d never reached state %c", pid, state)
}

// BenchmarkWriteMessage is one message to the child's stdin and its echo
// back, one at a time: the pipe's share of every call.
//
//	go test -run '^$' -bench BenchmarkWriteMessage -benchmem ./stdio
func BenchmarkWriteMessage(b *testing.B) {
	cfg := Config{Path: "cat"}
	p, err := Start(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello from the bench"}}}`)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if err := p.WriteMessage(ctx, msg); err != nil {
			b.Fatal(err)
		}
		if got, err := p.ReadMessage(); err != nil || len(got) != len(msg) {
			b.Fatalf("%d bytes back, %v", len(got), err)
		}
	}
}

// TryWriteMessage writes a line only when it goes whole at once: not while
// another write holds stdin, not into a pipe without room for all of it,
// not a line longer than one atomic pipe write, not one with a newline;
// each refusal leaves nothing in the pipe, and the lines it wrote arrive
// whole and in order.
func TestTryWriteMessage(t *testing.T) {
	t.Parallel()
	p, size, resume := stoppedCat(t)

	small := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
	if !p.TryWriteMessage(small) || queued(t, p.stdin) != len(small)+1 {
		t.Fatalf("a small line into an empty pipe: the pipe holds %d bytes, want %d", queued(t, p.stdin), len(small)+1)
	}
	longest := bytes.Repeat([]byte("m"), pipeAtomic-1) // with its newline, one atomic write
	if !p.TryWriteMessage(longest) || queued(t, p.stdin) != len(small)+1+pipeAtomic {
		t.Fatalf("a line of one atomic write: the pipe holds %d bytes, want %d", queued(t, p.stdin), len(small)+1+pipeAtomic)
	}
	held := queued(t, p.stdin)
	for name, msg := range map[string][]byte{
		"a line with a newline":        []byte("a\nb"),
		"a line over one atomic write": bytes.Repeat([]byte("l"), pipeAtomic),
	} {
		if p.TryWriteMessage(msg) || queued(t, p.stdin) != held {
			t.Errorf("%s was tried: the pipe holds %d bytes", name, queued(t, p.stdin))
		}
	}
	<-p.writeTok // another write holds stdin
	if p.TryWriteMessage(small) {
		t.Error("written while another write held stdin")
	}
	p.writeTok <- struct{}{}
	// Lines until the pipe takes no more: each one it took is there whole,
	// and the one it refused left nothing.
	want := [][]byte{small, longest}
	var refused []byte
	for i := 0; refused == nil; i++ {
		if i == size {
			t.Fatalf("%d lines went into a pipe of %d bytes", i, size)
		}
		line := fmt.Appendf(nil, "line %d %s", i, bytes.Repeat([]byte("x"), i%300))
		before := queued(t, p.stdin)
		if !p.TryWriteMessage(line) {
			refused = line
			if after := queued(t, p.stdin); after != before {
				t.Fatalf("a line refused left %d bytes in the pipe", after-before)
			}
			continue
		}
		if after := queued(t, p.stdin); after != before+len(line)+1 {
			t.Fatalf("a line of %d bytes and its newline added %d bytes", len(line), after-before)
		}
		want = append(want, line)
	}
	if q := queued(t, p.stdin); q < size/2 {
		t.Errorf("lines were refused with %d of %d bytes in the pipe", q, size)
	}
	// A write that waits for room (the line refused last, which the pipe
	// takes whole or not at all), abandoned by its ctx, leaves no deadline
	// behind to fail the tries after it.
	ctx, cancel := context.WithCancel(context.Background())
	abandoned := make(chan error, 1)
	go func() { abandoned <- p.WriteMessage(ctx, refused) }()
	// Once it holds stdin it is past its ctx's first check, and waits for
	// room: the cancellation abandons it there.
	for i := 0; len(p.writeTok) > 0; i++ {
		if i == 1_000_000 {
			t.Fatal("the write never took stdin")
		}
		runtime.Gosched()
	}
	cancel()
	if err := <-abandoned; !errors.Is(err, context.Canceled) {
		t.Fatalf("a write into a full pipe, its ctx cancelled: %v", err)
	}
	resume()
	for _, w := range want {
		got, err := p.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, w) {
			t.Fatalf("read %.40q, want %.40q", got, w)
		}
	}
	if !p.TryWriteMessage([]byte("after")) {
		t.Fatal("a small line into an empty pipe, after an abandoned write, was refused")
	}
	if got, err := p.ReadMessage(); err != nil || string(got) != "after" {
		t.Fatalf("the line after: %q, %v", got, err)
	}
}

// The budget gives its burst at once, then its rate.
func TestLineBudget(t *testing.T) {
	b := &lineBudget{rate: 2, burst: 20, tokens: 20}
	t0 := time.Unix(1000, 0)
	n := 0
	for b.take(t0) {
		n++
	}
	if n != 20 {
		t.Fatalf("%d lines at once, want the burst of 20", n)
	}
	later := t0.Add(time.Second)
	var got []bool
	for range 3 {
		got = append(got, b.take(later))
	}
	if !slices.Equal(got, []bool{true, true, false}) {
		t.Errorf("a second later: %v, want 2 lines", got)
	}
	// An hour later it holds no more than its burst.
	n = 0
	for b.take(later.Add(time.Hour)) {
		n++
	}
	if n != 20 {
		t.Errorf("%d lines an hour later, want the burst of 20", n)
	}
}
