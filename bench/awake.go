package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The progress relay again, with no CPU left to idle. An event comes every
// few milliseconds, so between two of them every process on its path
// sleeps, and the CPUs with them. On a virtual machine an idle CPU halts,
// and waking it is the host's work: for the relay when the child writes,
// for the client when the relay writes. Here one process per CPU spins at
// SCHED_IDLE (it runs only when nothing else wants that CPU, and gives way
// to anything that wakes), so that no CPU halts. What is left of a
// latency is the relays' own work and the hops themselves; the difference
// from the figure with idle CPUs is what waking them costs on this host.

// awakeRun is one run of the progress relay with the CPUs kept awake,
// through the gateway, the stdio relay floor and the bare hops.
type awakeRun struct {
	Gateway, Floor, Hops latencySet
}

// measureAwake times one stream's progress relay through each, the CPUs
// kept awake the whole time; each server is started for it, and stopped
// after.
func measureAwake(ctx context.Context, gw, self string, sz streamSizes, ids *tags) (awakeRun, error) {
	dir, err := os.MkdirTemp("", "gwawake")
	if err != nil {
		return awakeRun{}, err
	}
	defer os.RemoveAll(dir)
	stop, err := keepAwake(ctx, self, runtime.NumCPU())
	if err != nil {
		return awakeRun{}, err
	}
	defer stop()
	var run awakeRun
	steps := []streamStep{{"the gateway", func(g *probeGateway) (err error) {
		run.Gateway, err = relayAlone(ctx, g.srv, sz, ids)
		return err
	}}}
	if err := runSteps(func() (*probeGateway, error) { return startProbeGateway(ctx, gw, self, dir, streamEnv(sz)) }, steps); err != nil {
		return awakeRun{}, err
	}
	steps = []streamStep{{relayName, func(g *probeGateway) (err error) {
		run.Floor, err = relayAlone(ctx, g.srv, sz, ids)
		return err
	}}}
	if err := runSteps(func() (*probeGateway, error) { return startProbeRelay(ctx, self, dir) }, steps); err != nil {
		return awakeRun{}, err
	}
	if run.Hops, err = bareHops(ctx, self, sz.RelaySteps+1, time.Duration(sz.RelayEvery)*time.Millisecond); err != nil {
		return awakeRun{}, fmt.Errorf("the bare hops: %w", err)
	}
	return run, nil
}

// keepAwake starts n spinners ("bench spin") and waits until each spins;
// stop kills them and waits for them.
func keepAwake(ctx context.Context, self string, n int) (stop func(), err error) {
	var cmds []*exec.Cmd
	stop = func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
	for range n {
		c := exec.CommandContext(ctx, self, "spin")
		c.Env = append(os.Environ(), "GOMAXPROCS=1")
		c.Stderr = os.Stderr
		// A spinner never outlives the suite, however it ends.
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		out, err := c.StdoutPipe()
		if err != nil {
			stop()
			return nil, err
		}
		if err := c.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("starting a spinner: %w", err)
		}
		cmds = append(cmds, c)
		// Its first line says it spins at SCHED_IDLE; it writes no other.
		// A spinner that failed ends, and the read with it.
		line, err := bufio.NewReader(out).ReadString('\n')
		if line != spinning {
			stop()
			return nil, fmt.Errorf("a spinner said %q: %v", line, err)
		}
	}
	return stop, nil
}

// spinning is what a spinner writes once it spins.
const spinning = "spinning at SCHED_IDLE\n"

// serveSpin is "bench spin": it takes SCHED_IDLE for its thread, then
// spins until it is killed.
func serveSpin(args []string) error {
	if len(args) != 0 {
		return errors.New("usage: bench spin")
	}
	// The policy is the thread's: the spinning goroutine stays on it.
	runtime.LockOSThread()
	if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0); err != nil {
		return fmt.Errorf("SCHED_IDLE: %w", err)
	}
	if _, err := os.Stdout.WriteString(spinning); err != nil {
		return err
	}
	for {
	}
}
