package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"time"
)

// stdioResult is the child alone: calls written straight to its stdin,
// window at a time in flight, answers read from its stdout.
type stdioResult struct {
	Window  int
	Calls   int
	Elapsed time.Duration
}

func (r stdioResult) rate() float64 { return float64(r.Calls) / r.Elapsed.Seconds() }

// runStdio measures the child over stdio with no HTTP: the most any
// gateway in front of it could do.
func runStdio(ctx context.Context, child []string, window, calls int) (stdioResult, error) {
	cmd := exec.CommandContext(ctx, child[0], child[1:]...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return stdioResult{}, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return stdioResult{}, err
	}
	if err := cmd.Start(); err != nil {
		return stdioResult{}, err
	}
	defer func() {
		in.Close()
		_ = cmd.Wait()
	}()
	w := bufio.NewWriter(in)
	r := bufio.NewReaderSize(out, 64<<10)
	want := []byte(strconv.Quote(benchText))
	line := func(id int) []byte {
		return []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":` +
			strconv.Quote(benchText) + `},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}` + "\n")
	}
	read := func() error {
		b, err := r.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("reading the child: %w", err)
		}
		if !bytes.Contains(b, want) {
			return fmt.Errorf("the child answered %.200s", b)
		}
		return nil
	}
	start := time.Now()
	sent, got := 0, 0
	for got < calls {
		for sent < calls && sent-got < window {
			sent++
			if _, err := w.Write(line(sent)); err != nil {
				return stdioResult{}, err
			}
		}
		if err := w.Flush(); err != nil {
			return stdioResult{}, err
		}
		if err := read(); err != nil {
			return stdioResult{}, err
		}
		got++
		// Read what else has come without another flush.
		for got < calls && r.Buffered() > 0 && sent-got > 0 {
			if err := read(); err != nil {
				return stdioResult{}, err
			}
			got++
		}
	}
	return stdioResult{Window: window, Calls: calls, Elapsed: time.Since(start)}, ctx.Err()
}
