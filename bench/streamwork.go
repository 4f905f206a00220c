package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The stream workloads themselves, each run on a server of its own that
// fronts the probe: the gateway (see runStreams), and for the timed ones
// the stdio relay floor too (see floorStreams).

// relayAlone times each progress event of one stream, nothing else
// running.
func relayAlone(ctx context.Context, s streamServer, sz streamSizes, ids *tags) (latencySet, error) {
	tag, id := ids.next("r")
	h, err := s.open(ctx, id, holdArgs{tag: tag, every: sz.RelayEvery, steps: sz.RelaySteps}, 10*time.Second)
	if err != nil {
		return latencySet{}, err
	}
	defer h.Close()
	t := newTally(tag, sz.RelaySteps)
	var lat []time.Duration
	for !t.answered {
		data, at, err := h.next(10 * time.Second)
		if err != nil {
			return latencySet{}, fmt.Errorf("stream %s: %w", tag, err)
		}
		st, progress, err := t.add(data)
		if err != nil {
			return latencySet{}, err
		}
		if progress {
			lat = append(lat, time.Duration(at-st.ns))
		}
	}
	if t.misrouted > 0 || t.lost() > 0 {
		return latencySet{}, fmt.Errorf("stream %s: %d steps lost, %d events misrouted", tag, t.lost(), t.misrouted)
	}
	return newLatencySet(lat, true), nil
}

// cancelSamples times n cancellations one after another: a hold is opened
// and its first progress event read (it has reached the child); the
// client takes the time and closes the connection; the probe takes the
// time it reads notifications/cancelled for that call.
func cancelSamples(ctx context.Context, g *probeGateway, n int, ids *tags) (latencySet, error) {
	var lat []time.Duration
	for range n {
		tag, id := ids.next("c")
		h, err := g.srv.open(ctx, id, holdArgs{tag: tag}, 10*time.Second)
		if err != nil {
			return latencySet{}, err
		}
		if err := firstStep(h); err != nil {
			h.Close()
			return latencySet{}, err
		}
		got := g.rep.expect("cancelled", tag)
		t0 := monoNow()
		h.Close()
		select {
		case ns := <-got:
			if ns < t0 {
				return latencySet{}, fmt.Errorf("%s: the child read the cancellation %d ns before the client closed", tag, t0-ns)
			}
			lat = append(lat, time.Duration(ns-t0))
		case <-time.After(5 * time.Second):
			g.rep.forget("cancelled", tag)
			return latencySet{}, fmt.Errorf("%s: no cancellation reached the child within 5 s of closing", tag)
		case <-ctx.Done():
			return latencySet{}, ctx.Err()
		}
	}
	return newLatencySet(lat, true), nil
}

// firstStep reads a hold's first event, which must be its step 0.
func firstStep(h *holdStream) error {
	data, _, err := h.next(10 * time.Second)
	if err != nil {
		return fmt.Errorf("stream %s, its first event: %w", h.tag, err)
	}
	_, st, progress, err := decodeEvent(data)
	if err != nil || !progress || st.tag != h.tag || st.step != 0 {
		return fmt.Errorf("stream %s: %.200s is not its step 0 (%v)", h.tag, data, err)
	}
	return nil
}

// openMany opens a hold of each args, sz.Openers at a time, and reads each
// one's first event (through first, or checked to be its step 0). On an
// error, what was opened is closed.
func openMany(ctx context.Context, s streamServer, args []holdArgs, ids []int64, openers int, first func(i int, data []byte) error) ([]*holdStream, error) {
	hs := make([]*holdStream, len(args))
	var next atomic.Int64
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range min(openers, len(args)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(args) || ctx.Err() != nil {
					return
				}
				h, err := s.open(ctx, ids[i], args[i], 30*time.Second)
				if err == nil {
					hs[i] = h
					if first == nil {
						err = firstStep(h)
					} else {
						var data []byte
						if data, _, err = h.next(30 * time.Second); err == nil {
							err = first(i, data)
						}
					}
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					next.Store(int64(len(args))) // the others stop
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		closeAll(hs)
		return nil, fmt.Errorf("opening %d streams (%d failed), the first: %w", len(args), len(errs), err)
	}
	return hs, nil
}

func closeAll(hs []*holdStream) {
	for _, h := range hs {
		if h != nil {
			h.Close()
		}
	}
}

// runningStreams is streams that send progress until closed, each read by a
// goroutine of its own.
type runningStreams struct {
	hs      []*holdStream
	ended   atomic.Int64 // streams that ended before they were closed
	closing atomic.Bool
	wg      sync.WaitGroup

	mu       sync.Mutex
	last     []int  // the last step each has read
	moved    []bool // each has read a step since arm
	pending  int    // streams not moved yet
	allMoved chan struct{}
}

func startRunning(ctx context.Context, s streamServer, n, everyMS, openers int, ids *tags) (*runningStreams, error) {
	args := make([]holdArgs, n)
	callIDs := make([]int64, n)
	for i := range args {
		tag, id := ids.next("b")
		args[i], callIDs[i] = holdArgs{tag: tag, every: everyMS}, id
	}
	hs, err := openMany(ctx, s, args, callIDs, openers, nil)
	if err != nil {
		return nil, err
	}
	r := &runningStreams{hs: hs, last: make([]int, n), moved: make([]bool, n), allMoved: make(chan struct{})}
	for i, h := range hs {
		r.wg.Go(func() {
			for {
				data, _, err := h.next(0)
				if err != nil {
					if !r.closing.Load() {
						r.ended.Add(1)
					}
					return
				}
				_, st, progress, err := decodeEvent(data)
				if err != nil || !progress || st.tag != h.tag || st.step <= r.lastStep(i) {
					r.ended.Add(1) // not what this stream should carry: counted as broken
					h.Close()
					return
				}
				r.step(i, st.step)
			}
		})
	}
	return r, nil
}

func (r *runningStreams) lastStep(i int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[i]
}

func (r *runningStreams) step(i, step int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last[i] = step
	if r.pending > 0 && !r.moved[i] {
		r.moved[i] = true
		if r.pending--; r.pending == 0 {
			close(r.allMoved)
		}
	}
}

// arm starts watching for every stream to read one more step; allMoved is
// closed once each has.
func (r *runningStreams) arm() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.moved)
	r.pending = len(r.hs)
}

func (r *runningStreams) close() {
	r.closing.Store(true)
	closeAll(r.hs)
	r.wg.Wait()
}

// cancelLoaded times cancellations with sz.Load streams sending progress
// every sz.LoadEvery ms meanwhile; they must all run throughout (each
// reads at least one more step after the samples began, and none ends),
// and each is cancelled at the end.
func cancelLoaded(ctx context.Context, g *probeGateway, sz streamSizes, ids *tags) (latencySet, error) {
	r, err := startRunning(ctx, g.srv, sz.Load, sz.LoadEvery, sz.Openers, ids)
	if err != nil {
		return latencySet{}, err
	}
	before := g.rep.count("cancelled")
	r.arm()
	lat, err := cancelSamples(ctx, g, sz.Samples, ids)
	if err == nil {
		select {
		case <-r.allMoved:
		case <-time.After(time.Duration(sz.LoadEvery)*time.Millisecond*20 + 5*time.Second):
			err = errors.New("some of the streams running sent no progress during the samples")
		}
		if e := r.ended.Load(); e > 0 {
			err = errors.Join(err, fmt.Errorf("of %d streams running, %d ended or carried something else", sz.Load, e))
		}
	}
	r.close()
	if err != nil {
		return latencySet{}, err
	}
	want := before + sz.Samples + sz.Load
	if got := g.rep.waitCount(ctx, "cancelled", want, 30*time.Second); got != want {
		return latencySet{}, fmt.Errorf("the child read %d cancellations, not %d", got-before, want-before)
	}
	return lat, nil
}

// concurrentStreams opens sz.Load holds gated on one key, releases them at
// once, and reads each one's sz.Steps progress events and answer, counting
// what is missing, repeated or another call's.
func concurrentStreams(ctx context.Context, g *probeGateway, sz streamSizes, ids *tags) (concurrentResult, error) {
	res := concurrentResult{Streams: sz.Load, StepsEach: sz.Steps}
	gate, _ := ids.next("gate")
	args := make([]holdArgs, sz.Load)
	callIDs := make([]int64, sz.Load)
	ts := make([]*tally, sz.Load)
	for i := range args {
		tag, id := ids.next("p")
		args[i], callIDs[i] = holdArgs{tag: tag, every: sz.Every, steps: sz.Steps, gate: gate}, id
		ts[i] = newTally(tag, sz.Steps)
	}
	m0, err := gatewayMetrics(ctx, g.admin)
	if err != nil {
		return res, err
	}
	hs, err := openMany(ctx, g.srv, args, callIDs, sz.Openers, func(i int, data []byte) error {
		_, _, err := ts[i].add(data)
		return err
	})
	if err != nil {
		return res, err
	}
	defer closeAll(hs)
	lat := make([][]time.Duration, len(hs))
	errs := make([]error, len(hs))
	var wg sync.WaitGroup
	for i, h := range hs {
		wg.Go(func() {
			for !ts[i].answered {
				data, at, err := h.next(30 * time.Second)
				if err != nil {
					errs[i] = fmt.Errorf("stream %s: %w", h.tag, err)
					return
				}
				st, progress, err := ts[i].add(data)
				if err != nil {
					errs[i] = err
					return
				}
				if progress {
					lat[i] = append(lat[i], time.Duration(at-st.ns))
				}
			}
		})
	}
	t0 := time.Now()
	released, err := g.srv.jsonCall(ctx, "release", []byte(`{"gate":"`+gate+`"}`))
	if err == nil && released != strconv.Itoa(sz.Load) {
		err = fmt.Errorf("release let %s holds go, not %d", released, sz.Load)
	}
	if err != nil {
		closeAll(hs)
		wg.Wait()
		return res, err
	}
	wg.Wait()
	res.Elapsed = time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	var all []time.Duration
	for i, t := range ts {
		res.Events += t.events
		res.Lost += t.lost()
		res.Misrouted += t.misrouted
		res.Repeated += t.repeated
		all = append(all, lat[i]...)
	}
	res.Relay = newLatencySet(all, false)
	m1, err := gatewayMetrics(ctx, g.admin)
	if err != nil {
		return res, err
	}
	res.Relayed = int(m1[fateKey("relayed")] - m0[fateKey("relayed")])
	res.Coalesced = int(m1[fateKey("coalesced")] - m0[fateKey("coalesced")])
	res.Dropped = int(m1[fateKey("dropped")] - m0[fateKey("dropped")])
	return res, nil
}

// idleStreams opens sz.Idle holds that send nothing after their first
// event, and reads the resident memory of the gateway and of its child
// before and with them open; then closes them all, and checks that the
// child was told of each and that the gateway still serves.
func idleStreams(ctx context.Context, g *probeGateway, sz streamSizes, ids *tags) (idleResult, error) {
	res := idleResult{Streams: sz.Idle}
	child, err := g.childPid()
	if err != nil {
		return res, err
	}
	rss := func() (gw, ch int64, err error) {
		gw, err1 := statusField(g.proc.pid(), "VmRSS:")
		ch, err2 := statusField(child, "VmRSS:")
		return gw, ch, errors.Join(err1, err2)
	}
	m0, err := gatewayMetrics(ctx, g.admin)
	if err != nil {
		return res, err
	}
	if res.GatewayBefore, res.ChildBefore, err = rss(); err != nil {
		return res, err
	}
	args := make([]holdArgs, sz.Idle)
	callIDs := make([]int64, sz.Idle)
	for i := range args {
		tag, id := ids.next("i")
		args[i], callIDs[i] = holdArgs{tag: tag}, id
	}
	hs, err := openMany(ctx, g.srv, args, callIDs, sz.Openers, nil)
	if err != nil {
		return res, err
	}
	defer closeAll(hs)
	st, err := g.srv.stats(ctx)
	if err == nil && st.Held != sz.Idle {
		err = fmt.Errorf("the child holds %d calls, not %d", st.Held, sz.Idle)
	}
	if err != nil {
		return res, err
	}
	// Each stream leaves the gateway's HTTP server once it has been open
	// 100 ms (package detach), and the memory it gave up goes back to
	// the system as the runtime returns it: the streams are weighed once
	// they all left and the resident memory stopped falling.
	opened := time.Now()
	waitDetached(ctx, g.admin, sz.Idle, 30*time.Second)
	if res.GatewayPeak, err = statusField(g.proc.pid(), "VmHWM:"); err != nil {
		return res, err
	}
	// A collection now, as the runtime's own would come within two
	// minutes on an idle process: what the streams left behind as they
	// left the server is garbage, not what they cost.
	if err := collect(ctx, g.admin); err != nil {
		return res, err
	}
	if res.GatewayAfter, err = settledRSS(ctx, g.proc.pid(), 30*time.Second); err != nil {
		return res, err
	}
	res.Settle = time.Since(opened)
	if _, res.ChildAfter, err = rss(); err != nil {
		return res, err
	}
	m1, err := gatewayMetrics(ctx, g.admin)
	if err != nil {
		return res, err
	}
	res.StreamsOpenBefore, res.OpenAtPeak = int(m0["gateway_sse_streams_open"]), int(m1["gateway_sse_streams_open"])
	res.Detached = int(m1["gateway_sse_streams_detached"])
	res.GoroutinesBefore, res.GoroutinesAt = int(m0["go_goroutines"]), int(m1["go_goroutines"])
	res.StackBefore, res.StackAt = int64(m0["go_memstats_stack_inuse_bytes"]), int64(m1["go_memstats_stack_inuse_bytes"])
	res.HeapBefore, res.HeapAt = int64(m0["go_memstats_heap_inuse_bytes"]), int64(m1["go_memstats_heap_inuse_bytes"])
	before := g.rep.count("cancelled")
	closeAll(hs)
	res.Cancellations = g.rep.waitCount(ctx, "cancelled", before+sz.Idle, time.Minute) - before
	res.ServedAfter = g.srv.echo(ctx) == nil
	if st, err = g.srv.stats(ctx); err != nil {
		return res, err
	}
	res.ChildCancelled = st.Cancelled
	if res.Cancellations != sz.Idle || st.Held != 0 || !res.ServedAfter {
		return res, fmt.Errorf("after closing %d idle streams: %d cancellations reached the child, it holds %d calls, an echo answered: %v",
			sz.Idle, res.Cancellations, st.Held, res.ServedAfter)
	}
	return res, nil
}

// waitDetached polls the gateway's /metrics until n streams have left its
// HTTP server, or for at most limit (a gateway that keeps them never
// gets there).
func waitDetached(ctx context.Context, admin string, n int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		m, err := gatewayMetrics(ctx, admin)
		if err == nil && int(m["gateway_sse_streams_detached"]) >= n {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// collect has the gateway run a garbage collection: its admin server's
// heap profile does one first when asked.
func collect(ctx context.Context, admin string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("a collection: %w", err)
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// settledRSS reads pid's VmRSS every half second until it has stopped
// falling (three readings in a row within 1% of the lowest), or for at
// most limit; it returns the lowest.
func settledRSS(ctx context.Context, pid int, limit time.Duration) (int64, error) {
	low, err := statusField(pid, "VmRSS:")
	if err != nil {
		return 0, err
	}
	deadline, steady := time.Now().Add(limit), 0
	for steady < 3 && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return low, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		now, err := statusField(pid, "VmRSS:")
		if err != nil {
			return 0, err
		}
		if now < low-low/100 {
			steady = 0
		} else {
			steady++
		}
		low = min(low, now)
	}
	return low, nil
}
