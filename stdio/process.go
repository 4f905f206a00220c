// Package stdio runs one child process and frames its stdin and stdout as
// newline-delimited messages. It knows lines, not JSON-RPC.
package stdio

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Config says what to run and how to bound it. Zero values mean the
// documented defaults.
type Config struct {
	Path string   // executable; looked up in PATH when it has no slash
	Args []string // arguments after the executable
	Env  []string // nil: inherit the gateway's environment
	Dir  string   // "": the gateway's working directory

	MaxMessageBytes int           // 0: 64 MiB; longer stdout lines are discarded
	StderrLineBytes int           // 0: 16 KiB; longer stderr lines are logged in pieces
	StderrRate      int           // 0: 200; stderr lines logged a second (at most 1,000,000), in bursts of up to 10 times as many; negative: all
	StdinGrace      time.Duration // 0: 5s; how long Close waits after closing stdin before SIGTERM
	TermGrace       time.Duration // 0: 5s; how long Close waits after SIGTERM before SIGKILL
	WriteStall      time.Duration // 0: 30s; a write that makes no progress this long fails
	DrainGrace      time.Duration // 0: 2s; after exit, how long a pipe held open by an escaped process is waited for

	Logger *slog.Logger // nil: discard
}

func (c *Config) defaults() {
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 64 << 20
	}
	if c.StderrLineBytes <= 0 {
		c.StderrLineBytes = 16 << 10
	}
	if c.StderrRate == 0 {
		c.StderrRate = 200
	}
	if c.StdinGrace <= 0 {
		c.StdinGrace = 5 * time.Second
	}
	if c.TermGrace <= 0 {
		c.TermGrace = 5 * time.Second
	}
	if c.WriteStall <= 0 {
		c.WriteStall = 30 * time.Second
	}
	if c.DrainGrace <= 0 {
		c.DrainGrace = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Process is a running child. ReadMessage must be called from one goroutine
// only; WriteMessage, GatherMessage, TryWriteMessage and Close are safe for
// concurrent use.
type Process struct {
	cfg   Config
	cmd   *exec.Cmd
	pid   int
	log   *slog.Logger
	start time.Time

	stdin    *os.File        // write end
	stdinRaw syscall.RawConn // the same, for a write that must not wait
	stdout   *os.File        // read end
	stderr   *os.File        // read end
	lines    *lineReader

	writeTok chan struct{}         // 1-buffered: holding it means owning stdin for one whole line
	writeErr error                 // set once stdin is broken; guarded by writeTok
	broken   atomic.Bool           // writeErr != nil, readable without the token
	scratch  []byte                // the last piece of a line and its newline; guarded by writeTok
	try      tryState              // tryWrite's; guarded by writeTok
	tryFD    func(fd uintptr) bool // writeFD, made once (see tryWrite)

	gatherMu sync.Mutex
	open     *batch // lines gathering for the next write (see gather)
	spare    *batch // the last batch written, for the next to reuse

	exited     chan struct{}
	exitErr    error // valid after exited is closed
	stderrDone chan struct{}

	closeOnce sync.Once
	closing   atomic.Bool // Close has begun: an exit from now on is expected
	asked     atomic.Bool // Close began with stdout still open: the exit is the gateway's doing
	ended     atomic.Bool // the reader has seen stdout end
}

// Start runs the command in its own process group with stdin, stdout and
// stderr on pipes the gateway owns.
func Start(cfg Config) (*Process, error) {
	cfg.defaults()
	// Pipes from os.Pipe are pollable, so deadlines work on them, and handing
	// *os.File values to exec means exec starts no copying goroutines and
	// Wait never closes our read ends under a reader.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: stdin pipe: %w", cfg.Path, err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		closeAll(stdinR, stdinW)
		return nil, fmt.Errorf("start %s: stdout pipe: %w", cfg.Path, err)
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		closeAll(stdinR, stdinW, stdoutR, stdoutW)
		return nil, fmt.Errorf("start %s: stderr pipe: %w", cfg.Path, err)
	}
	cmd := exec.Command(cfg.Path, cfg.Args...)
	cmd.Env = cfg.Env
	cmd.Dir = cfg.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
	// A group of its own lets one signal reach wrappers and what they spawn
	// (npx, shell scripts), and lets the sweep find leftovers after exit.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		closeAll(stdinR, stdinW, stdoutR, stdoutW, stderrR, stderrW)
		return nil, fmt.Errorf("start %s: %w", cfg.Path, err)
	}
	// The child holds its own copies now; ours would keep EOF from ever coming.
	closeAll(stdinR, stdoutW, stderrW)

	p := &Process{
		cfg:        cfg,
		cmd:        cmd,
		pid:        cmd.Process.Pid,
		start:      time.Now(),
		stdin:      stdinW,
		stdout:     stdoutR,
		stderr:     stderrR,
		writeTok:   make(chan struct{}, 1),
		exited:     make(chan struct{}),
		stderrDone: make(chan struct{}),
	}
	if p.stdinRaw, err = stdinW.SyscallConn(); err != nil {
		closeAll(stdinW, stdoutR, stderrR)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("start %s: stdin pipe: %w", cfg.Path, err)
	}
	p.tryFD = p.writeFD
	p.log = cfg.Logger.With("pid", p.pid)
	p.lines = newLineReader(stdoutR, cfg.MaxMessageBytes)
	p.writeTok <- struct{}{}
	p.log.Info("child started", "path", cfg.Path, "args", cfg.Args)
	go p.wait()
	go p.logStderr()
	return p, nil
}

// Pid is the child's process id (and its process group id).
func (p *Process) Pid() int { return p.pid }

// Exited is closed once the child has exited and been reaped.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitErr is how the child ended (nil for status 0); valid after Exited.
func (p *Process) ExitErr() error {
	<-p.exited
	return p.exitErr
}

// wait reaps the child, then sweeps its process group: a grandchild that
// inherited stdout would otherwise keep the reader from ever seeing EOF.
func (p *Process) wait() {
	err := p.cmd.Wait()
	p.exitErr = err
	if err := signalGroup(p.pid, syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.log.Warn("sweep process group", "err", err)
	}
	level := slog.LevelInfo
	if !p.asked.Load() {
		// Nobody asked it to stop: Close had not begun, or began only
		// because its stdout ended (it died, and the reader saw it
		// first).
		level = slog.LevelWarn
	}
	p.log.Log(context.Background(), level, "child exited", "status", exitStatus(err), "dur", time.Since(p.start).Round(time.Millisecond))
	close(p.exited) // after the line, so that whoever waits for the exit finds it logged
	// Anything that escaped the group (setsid) may still hold the pipes; give
	// the readers time to drain what the child wrote, then cut them loose.
	time.AfterFunc(p.cfg.DrainGrace, func() {
		now := time.Now()
		_ = p.stdout.SetReadDeadline(now)
		_ = p.stderr.SetReadDeadline(now)
	})
}

// Close stops the child as the MCP lifecycle says: close stdin and wait,
// then SIGTERM the group and wait, then SIGKILL. It returns once the child
// has been reaped and its stderr drained; calling it again returns at once.
func (p *Process) Close() error {
	p.closeOnce.Do(func() {
		p.asked.Store(!p.ended.Load())
		p.closing.Store(true)
		_ = p.stdin.Close() // unblocks a writer stuck on a full pipe, too
		if p.waitExit(p.cfg.StdinGrace) {
			return
		}
		p.log.Info("child still running after stdin closed; sending SIGTERM", "grace", p.cfg.StdinGrace)
		if err := signalGroup(p.pid, syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			p.log.Warn("SIGTERM", "err", err)
		}
		if p.waitExit(p.cfg.TermGrace) {
			return
		}
		p.log.Warn("child ignored SIGTERM; sending SIGKILL", "grace", p.cfg.TermGrace)
		if err := signalGroup(p.pid, syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
			p.log.Warn("SIGKILL", "err", err)
		}
		<-p.exited
	})
	<-p.stderrDone
	// The reader may still be parked on stdout if something outside the group
	// holds the pipe; closing our end hands it EOF.
	_ = p.stdout.Close()
	return nil
}

// Kill stops the child at once with SIGKILL to its group, for a child that
// no longer reads or answers, then cleans up as Close does.
func (p *Process) Kill() error {
	if !p.closing.Load() {
		p.log.Warn("killing the child")
		if err := signalGroup(p.pid, syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
			p.log.Warn("SIGKILL", "err", err)
		}
	}
	return p.Close()
}

func (p *Process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// signalGroup signals the whole process group; a group already gone is
// reported as os.ErrProcessDone.
func signalGroup(pgid int, sig syscall.Signal) error {
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// logStderr drains stderr for the life of the child: an unread stderr pipe
// fills up and blocks the child. The spec says stderr is not an error signal,
// so lines are logged at Info, at most StderrRate a second (in bursts of
// up to ten times as many): a child that floods its stderr must not flood
// the log, its disk and its pipeline. Lines past the rate are drained and
// counted, and a warning says how many a second after the first of them
// (then each second while they go on), and when stderr ends.
func (p *Process) logStderr() {
	defer close(p.stderrDone)
	defer p.stderr.Close()
	br := bufio.NewReaderSize(p.stderr, p.cfg.StderrLineBytes)
	log := p.log.With("stream", "stderr")
	var limit *lineBudget // nil: every line is logged
	if r := min(p.cfg.StderrRate, 1_000_000); r > 0 {
		limit = &lineBudget{rate: float64(r), burst: float64(10 * r), tokens: float64(10 * r)}
	}
	d := &droppedLines{log: log, rate: p.cfg.StderrRate}
	defer d.tell()
	var held []byte // a cut line, kept while the next byte is looked at
	for {
		line, err := br.ReadSlice('\n')
		cut := errors.Is(err, bufio.ErrBufferFull)
		if cut {
			// A line of exactly StderrLineBytes fills the buffer before its
			// newline: whole, when the newline is next. (Peek waits for
			// the child's next write, as the rest of a longer line would,
			// and may reuse the buffer line is in.)
			line = append(held[:0], line...)
			held = line
			if next, perr := br.Peek(1); perr == nil && next[0] == '\n' {
				_, _ = br.Discard(1)
				cut, err = false, nil
			} else if perr == nil && next[0] == '\r' {
				if next, perr := br.Peek(2); perr == nil && next[1] == '\n' {
					_, _ = br.Discard(2)
					cut, err = false, nil
				}
			}
		}
		switch text := trimEOL(line); {
		case len(text) == 0:
		case limit != nil && !limit.take(time.Now()):
			d.add()
		case cut:
			// The rest of the line follows as the next entry.
			log.Info("child stderr", "line", string(text), "truncated", true)
		default:
			log.Info("child stderr", "line", string(text))
		}
		if err != nil && !cut {
			return
		}
	}
}

// lineBudget is a token bucket of lines: rate a second, burst at once.
// Only the goroutine that drains stderr uses it.
type lineBudget struct {
	rate, burst, tokens float64
	last                time.Time
}

// take spends one line's token, if the budget has one now.
func (b *lineBudget) take(now time.Time) bool {
	if !b.last.IsZero() {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// droppedLines counts the stderr lines not logged, and tells the count a
// second after the first since it last told it.
type droppedLines struct {
	log  *slog.Logger
	rate int

	mu    sync.Mutex
	n     int64
	since time.Time
	timer *time.Timer
}

func (d *droppedLines) add() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == 0 {
		d.since = time.Now()
		d.timer = time.AfterFunc(time.Second, d.tell)
	}
	d.n++
}

// tell logs the count, if any, and starts it again.
func (d *droppedLines) tell() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == 0 {
		return
	}
	d.timer.Stop() // at the end of stderr, before its time
	d.log.Warn("child stderr lines were not logged: the child wrote more than GATEWAY_STDERR_RATE allows",
		"dropped", d.n, "over", time.Since(d.since).Round(time.Millisecond), "rate", d.rate)
	d.n = 0
}
