package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The progress relay again, with the CPUs kept busy. An event comes every
// few milliseconds, so between two of them every process on its path
// sleeps, and the CPUs with them: an idle CPU halts, and on a virtual
// machine waking it takes the guest and the host a while, once for the
// relay when the child writes and again for the client when the relay
// writes. Here each CPU gets a process of its own that spins at
// SCHED_IDLE, the kernel's least fair-share policy, which gives way at
// once to any other process that wakes there; the share of the CPUs' time
// left idle meanwhile is read from /proc/stat, to show that they were
// kept from halting. Set beside the figures with idle CPUs, the
// difference is roughly what idle CPUs cost, less what preempting a
// spinner costs.

// awakeRun is one run of the progress relay with the CPUs kept busy,
// through the gateway, the stdio relay floor and the bare hops.
type awakeRun struct {
	Gateway, Floor, Hops latencySet
	Idle                 float64 // the share of the CPUs' time idle while they were timed (/proc/stat), 0 to 1
}

// measureAwake times one stream's progress relay through each, the CPUs
// kept busy; each server is started for it, and stopped after.
func measureAwake(ctx context.Context, gw, self string, sz streamSizes, ids *tags) (awakeRun, error) {
	dir, err := os.MkdirTemp("", "gwawake")
	if err != nil {
		return awakeRun{}, err
	}
	defer os.RemoveAll(dir)
	cpus, err := allowedCPUs()
	if err != nil {
		return awakeRun{}, err
	}
	sp, err := keepAwake(ctx, self, cpus)
	if err != nil {
		return awakeRun{}, err
	}
	defer sp.stop()
	var run awakeRun
	var idle, total uint64
	timed := func(f func() error) error {
		i0, t0, err := cpuTicks()
		if err != nil {
			return err
		}
		if err := f(); err != nil {
			return err
		}
		i1, t1, err := cpuTicks()
		idle, total = idle+i1-i0, total+t1-t0
		return err
	}
	relay := func(l *latencySet) func(g *probeGateway) error {
		return func(g *probeGateway) error {
			return timed(func() (err error) {
				*l, err = relayAlone(ctx, g.srv, sz, ids)
				return err
			})
		}
	}
	if err := runSteps(func() (*probeGateway, error) { return startProbeGateway(ctx, gw, self, dir, streamEnv(sz)) },
		[]streamStep{{"the gateway", relay(&run.Gateway)}}); err != nil {
		return awakeRun{}, err
	}
	if err := runSteps(func() (*probeGateway, error) { return startProbeRelay(ctx, self, dir) },
		[]streamStep{{relayName, relay(&run.Floor)}}); err != nil {
		return awakeRun{}, err
	}
	if err := timed(func() (err error) {
		run.Hops, err = bareHops(ctx, self, sz.RelaySteps+1, time.Duration(sz.RelayEvery)*time.Millisecond)
		return err
	}); err != nil {
		return awakeRun{}, fmt.Errorf("the bare hops: %w", err)
	}
	if total > 0 {
		run.Idle = float64(idle) / float64(total)
	}
	// Had one ended meanwhile, its CPU could have halted.
	if err := sp.stop(); err != nil {
		return awakeRun{}, err
	}
	return run, nil
}

// allowedCPUs are the CPUs this process may run on, and so its children.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("the CPUs allowed: %w", err)
	}
	var cpus []int
	for c := range len(set) * 64 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// spinners are the processes keepAwake started.
type spinners struct {
	cmds   []*exec.Cmd
	exited []*exited // each spinner's, once it spins
	once   sync.Once
	err    error
}

// exited is a process's end: done closes once Wait returned err.
type exited struct {
	done chan struct{}
	err  error
}

// keepAwake starts a spinner ("bench spin CPU") on each of cpus and waits
// until each spins.
func keepAwake(ctx context.Context, self string, cpus []int) (*spinners, error) {
	sp := &spinners{}
	for i, cpu := range cpus {
		c := exec.CommandContext(ctx, self, "spin", strconv.Itoa(cpu))
		// One P, for the one goroutine that spins; and no preemption of
		// it, which would hand the P to another thread and back, each
		// time a wake-up.
		c.Env = append(os.Environ(), "GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1")
		c.Stderr = os.Stderr
		// Killed with the thread that started it, should the suite die
		// before stop: the suite locks no thread, so that is with the
		// suite.
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		out, err := c.StdoutPipe()
		if err != nil {
			sp.stop()
			return nil, err
		}
		if err := c.Start(); err != nil {
			sp.stop()
			return nil, fmt.Errorf("starting a spinner: %w", err)
		}
		sp.cmds = append(sp.cmds, c)
		line, err := readSpinning(out)
		if err != nil {
			// It ended, or it will be killed: its Wait says how.
			_ = c.Process.Kill()
			werr := c.Wait()
			sp.cmds = sp.cmds[:len(sp.cmds)-1]
			sp.stop()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("spinner %d of %d (CPU %d) said %q: %w", i+1, len(cpus), cpu, line, errors.Join(err, werr))
		}
		e := &exited{done: make(chan struct{})}
		go func() {
			e.err = c.Wait()
			close(e.done)
		}()
		sp.exited = append(sp.exited, e)
	}
	return sp, nil
}

// readSpinning reads a spinner's first line, which says it spins; it
// writes no other.
func readSpinning(out io.ReadCloser) (string, error) {
	f, ok := out.(*os.File)
	if !ok {
		return "", fmt.Errorf("a spinner's stdout is a %T", out)
	}
	if err := f.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(f).ReadString('\n')
	if err == nil && line != spinning {
		err = errors.New("not that it spins")
	}
	return line, err
}

// spinning is what a spinner writes once it spins.
const spinning = "spinning at SCHED_IDLE\n"

// stop kills the spinners and waits for them; an error says that one had
// ended before. Only the first call does anything.
func (sp *spinners) stop() error {
	sp.once.Do(func() {
		var errs []error
		for i, c := range sp.cmds {
			if i >= len(sp.exited) {
				_ = c.Process.Kill()
				_ = c.Wait()
				continue
			}
			e := sp.exited[i]
			select {
			case <-e.done:
				errs = append(errs, fmt.Errorf("spinner %d of %d ended while it was needed: %v", i+1, len(sp.cmds), e.err))
				continue
			default:
			}
			_ = c.Process.Kill()
			<-e.done
		}
		sp.err = errors.Join(errs...)
	})
	return sp.err
}

// serveSpin is "bench spin CPU": every thread of it on that CPU, at
// SCHED_IDLE, it spins until it is killed.
func serveSpin(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: bench spin CPU")
	}
	cpu, err := strconv.Atoi(args[0])
	if err != nil || cpu < 0 {
		return fmt.Errorf("bench spin: %q is not a CPU", args[0])
	}
	// The spinning goroutine stays on this thread, which the settings
	// below reach whatever else runs.
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	// A thread takes its policy and CPUs from the one that made it: once
	// every thread has them, so does any made later. The list is read
	// again until no thread is new.
	done := map[int]bool{}
	for try := 0; ; try++ {
		tids, err := threads()
		if err != nil {
			return err
		}
		fresh := 0
		for _, tid := range tids {
			if done[tid] {
				continue
			}
			fresh++
			if err := unix.SchedSetaffinity(tid, &set); err != nil {
				return fmt.Errorf("CPU %d: %w", cpu, err)
			}
			if err := unix.SchedSetAttr(tid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0); err != nil {
				return fmt.Errorf("SCHED_IDLE: %w", err)
			}
			done[tid] = true
		}
		if fresh == 0 {
			break
		}
		if try == 10 {
			return errors.New("new threads keep appearing")
		}
	}
	if _, err := os.Stdout.WriteString(spinning); err != nil {
		return err
	}
	//lint:ignore SA5002 spinning is this process's whole job
	for {
	}
}

// threads are this process's threads' ids.
func threads() ([]int, error) {
	dirs, err := filepath.Glob("/proc/self/task/*")
	if err != nil {
		return nil, err
	}
	var tids []int
	for _, d := range dirs {
		if tid, err := strconv.Atoi(filepath.Base(d)); err == nil {
			tids = append(tids, tid)
		}
	}
	if len(tids) == 0 {
		return nil, errors.New("no thread in /proc/self/task")
	}
	return tids, nil
}
