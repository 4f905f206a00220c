package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// loadResult is one closed-loop run: conc clients each calling as soon as
// its last call came back, for a fixed time.
type loadResult struct {
	Conc    int
	Calls   int
	Errors  int
	Elapsed time.Duration
	P50     time.Duration
	P99     time.Duration
	CPU     float64 // seconds of CPU the server's process tree used meanwhile
	OwnCPU  float64 // the same, of the server's process alone (not its child)
}

func (r loadResult) rate() float64 { return float64(r.Calls) / r.Elapsed.Seconds() }

// cpuPerCall is the server's CPU time per call, its child's included, in
// microseconds; ownCPUPerCall, without its child.
func (r loadResult) cpuPerCall() float64    { return perCall(r.CPU, r.Calls) }
func (r loadResult) ownCPUPerCall() float64 { return perCall(r.OwnCPU, r.Calls) }

func perCall(seconds float64, calls int) float64 {
	if calls == 0 {
		return 0
	}
	return seconds / float64(calls) * 1e6
}

// maxErrors ends a run early: a server that fails this often is broken,
// not slow.
const maxErrors = 100

// runLoad calls c from conc goroutines for d after a warm-up, measuring
// each call's latency and the CPU tree used (when tree is not nil).
func runLoad(ctx context.Context, c caller, conc int, warm, d time.Duration, tree *procTree) (loadResult, error) {
	// Warm-up: connections opened, caches filled, the JIT of a Node peer
	// warmed; nothing measured.
	if err := loop(ctx, c, conc, warm, nil); err != nil {
		return loadResult{}, fmt.Errorf("warm-up: %w", err)
	}
	own := procTree{pid: 0, alone: true}
	var cpu0, own0 float64
	if tree != nil {
		own.pid = tree.pid
		var err error
		if cpu0, err = tree.cpuSeconds(); err != nil {
			return loadResult{}, err
		}
		if own0, err = own.cpuSeconds(); err != nil {
			return loadResult{}, err
		}
	}
	lat := make([][]time.Duration, conc)
	start := time.Now()
	err := loop(ctx, c, conc, d, lat)
	elapsed := time.Since(start)
	res := loadResult{Conc: conc, Elapsed: elapsed}
	if tree != nil {
		cpu1, cerr := tree.cpuSeconds()
		own1, oerr := own.cpuSeconds()
		if err := errors.Join(cerr, oerr); err != nil {
			return loadResult{}, err
		}
		res.CPU, res.OwnCPU = cpu1-cpu0, own1-own0
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	res.Calls = len(all)
	if len(all) > 0 {
		res.P50 = all[len(all)/2]
		res.P99 = all[len(all)*99/100]
	}
	return res, err
}

// loop runs conc callers for d; with lat, each records its latencies in
// its own slice.
func loop(ctx context.Context, c caller, conc int, d time.Duration, lat [][]time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var errs atomic.Int64
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	text := benchText
	for i := range conc {
		wg.Go(func() {
			for ctx.Err() == nil {
				t := time.Now()
				err := c.Call(ctx, text)
				if ctx.Err() != nil {
					return // cut off by the end of the run: not counted
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					if errs.Add(1) >= maxErrors {
						cancel()
					}
					continue
				}
				if lat != nil {
					lat[i] = append(lat[i], time.Since(t))
				}
			}
		})
	}
	wg.Wait()
	if n := errs.Load(); n > 0 {
		return fmt.Errorf("%d calls failed, the first: %w", n, first)
	}
	return nil
}
