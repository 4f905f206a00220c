package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// The bare hops: the progress relay's two hops with no work on them. A
// child writes its stamp (CLOCK_MONOTONIC, as the probe does) to its
// stdout at the progress relay's pace; a process of its own copies
// whatever the pipe gives to a TCP connection at once, parsing nothing;
// the client stamps each line as it reads it. Every process is this
// program, in Go as the probe, the relay floor and the gateway are. What
// is left is the wake-ups after the pace's idle time: of the copier by the
// pipe, and of the client by the socket. The gateway and the relay floor
// also hand each event from the goroutine that reads the child to the
// stream's own; the copier has one goroutine.

// bareHops times events lines through the bare hops, one every every
// (the first at once).
func bareHops(ctx context.Context, self string, events int, every time.Duration) (latencySet, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return latencySet{}, err
	}
	defer ln.Close()
	cmd := exec.CommandContext(ctx, self, "hops-relay", ln.Addr().String(), strconv.Itoa(events), every.String())
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return latencySet{}, fmt.Errorf("starting the hops' relay: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	type read struct {
		lat []time.Duration
		err error
	}
	lines := make(chan read, 1)
	go func() {
		lat, err := readHops(ln, events, every)
		lines <- read{lat, err}
	}()
	select {
	case r := <-lines:
		if r.err != nil {
			_ = cmd.Process.Kill()
			<-exited
			return latencySet{}, r.err
		}
		if err := <-exited; err != nil {
			return latencySet{}, fmt.Errorf("the hops' relay: %w", err)
		}
		return newLatencySet(r.lat, true), nil
	case err := <-exited:
		// The relay is gone (done, failed, or killed with ctx): its end of
		// the connection is closed, and an accept still waiting ends here
		// rather than at its deadline.
		ln.Close()
		r := <-lines
		if err != nil {
			return latencySet{}, fmt.Errorf("the hops' relay: %w", err)
		}
		if r.err != nil {
			return latencySet{}, r.err
		}
		return newLatencySet(r.lat, true), nil
	}
}

// readHops takes the relay's connection on ln and times each line on it:
// each must be a stamp later than the last.
func readHops(ln net.Listener, events int, every time.Duration) ([]time.Duration, error) {
	// Bounded: the relay connects as it starts, and the lines take
	// events×every.
	limit := time.Now().Add(30*time.Second + time.Duration(events)*every)
	if err := ln.(*net.TCPListener).SetDeadline(limit); err != nil {
		return nil, err
	}
	conn, err := ln.Accept()
	if err != nil {
		return nil, fmt.Errorf("waiting for the hops' relay: %w", err)
	}
	defer conn.Close()
	if err := conn.SetReadDeadline(limit); err != nil {
		return nil, err
	}
	r := bufio.NewReader(conn)
	lat := make([]time.Duration, 0, events)
	var last int64
	for len(lat) < events {
		line, err := r.ReadSlice('\n')
		at := monoNow()
		if err != nil {
			return nil, fmt.Errorf("the hops: %d lines of %d: %w", len(lat), events, err)
		}
		stamp, err := strconv.ParseInt(string(line[:len(line)-1]), 10, 64)
		if err != nil || stamp > at || stamp <= last {
			return nil, fmt.Errorf("the hops: line %q is not a stamp of this machine's monotonic clock after the last", line)
		}
		last = stamp
		lat = append(lat, time.Duration(at-stamp))
	}
	return lat, nil
}

// serveHopsRelay is "bench hops-relay ADDR EVENTS EVERY": it connects to
// ADDR, starts "bench hops-writer EVENTS EVERY" and copies its stdout to
// the connection, each read as it comes, until the writer is done.
func serveHopsRelay(args []string) error {
	if len(args) != 3 {
		return errors.New("usage: bench hops-relay ADDR EVENTS EVERY")
	}
	conn, err := net.Dial("tcp", args[0])
	if err != nil {
		return err
	}
	defer conn.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "hops-writer", args[1], args[2])
	cmd.Stderr = os.Stderr
	// The writer goes with the relay, however the relay ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	for {
		n, rerr := out.Read(buf)
		if n > 0 {
			if _, err := conn.Write(buf[:n]); err != nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				return err
			}
		}
		if rerr != nil {
			break // the writer is done (or gone: Wait says which)
		}
	}
	return cmd.Wait()
}

// serveHopsWriter is "bench hops-writer EVENTS EVERY": EVENTS lines, one
// every EVERY (the first at once), each the monotonic clock read just
// before its write.
func serveHopsWriter(args []string) error {
	if len(args) != 2 {
		return errors.New("usage: bench hops-writer EVENTS EVERY")
	}
	events, err := strconv.Atoi(args[0])
	if err != nil || events < 1 {
		return fmt.Errorf("events %q: a count of at least 1", args[0])
	}
	every, err := time.ParseDuration(args[1])
	if err != nil || every <= 0 {
		return fmt.Errorf("every %q: a positive duration", args[1])
	}
	t := time.NewTicker(every)
	defer t.Stop()
	buf := make([]byte, 0, 24)
	for i := range events {
		if i > 0 {
			<-t.C
		}
		buf = append(strconv.AppendInt(buf[:0], monoNow(), 10), '\n')
		if _, err := os.Stdout.Write(buf); err != nil {
			return err
		}
	}
	return nil
}
