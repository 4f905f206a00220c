package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// peerStreamRun is what a peer did with the stream workloads: whether it
// relays progress to the call's stream and turns a client's disconnection
// into a cancellation the child reads, and how fast.
type peerStreamRun struct {
	ProgressEvents int        // of RelaySteps+1 the probe sent
	Missing        []int      `json:",omitempty"` // the first steps that never came (at most 10)
	AfterAnswer    int        // progress events that came after the answer (counted in ProgressEvents)
	Relay          latencySet // their relay latencies
	Cancels        int        // cancellations tried
	Cancel         latencySet // those the child read within peerCancelWait
	NotCancelled   int        // closes the child heard nothing of within peerCancelWait
}

// peerCancelWait is how long a peer has to tell the child of a client that
// closed before the close counts as not relayed.
const peerCancelWait = time.Second

// peerStreams runs the relay and cancellation workloads through a peer
// fronting the probe (the peer speaks 2025 to it, initialize first).
func peerStreams(ctx context.Context, t target, self string, sz streamSizes, ids *tags) (peerStreamRun, error) {
	var res peerStreamRun
	dir, err := os.MkdirTemp("", "gwstream")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	rep, err := listenReports(dir)
	if err != nil {
		return res, err
	}
	defer rep.Close()
	srv, err := startServer(ctx, t, []string{self, "probe", "-report", rep.path})
	if err != nil {
		return res, err
	}
	defer srv.stop()
	port := srv.port
	c, err := t.dial(ctx, "http://127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return res, err
	}
	defer c.Close()
	pc, ok := c.(*peerCaller)
	if !ok {
		return res, fmt.Errorf("%s: not a peer", t.name)
	}
	// The caller's headers (a session, the revision) serve the probe's
	// tools too; the tool's name is written per request.
	h := pc.header.Clone()
	h.Del("Mcp-Name")
	s := streamServer{addr: "127.0.0.1:" + strconv.Itoa(port), header: h, modern: pc.tail == modernTail}
	if err := s.echo(ctx); err != nil {
		return res, err
	}

	// Relay: the stream is read to its answer, whatever it carries; a peer
	// that answers JSON or drops the progress still answers.
	tag, id := ids.next("pr")
	started := rep.expect("started", tag)
	hs, err := s.post(ctx, id, holdArgs{tag: tag, every: sz.RelayEvery, steps: sz.RelaySteps})
	if err != nil {
		return res, err
	}
	defer hs.Close()
	if err := hs.headers(30 * time.Second); err != nil {
		return res, err
	}
	tl := newTally(tag, sz.RelaySteps)
	var lat []time.Duration
	for !tl.answered {
		data, at, err := hs.next(30 * time.Second)
		if err != nil {
			return res, fmt.Errorf("relay: %w", err)
		}
		st, progress, err := tl.add(data)
		if err != nil {
			return res, fmt.Errorf("relay: %w", err)
		}
		if progress {
			lat = append(lat, time.Duration(at-st.ns))
		}
	}
	// What comes after the answer, before the stream ends, came out of
	// order.
	for {
		data, _, err := hs.next(time.Second)
		if err != nil {
			break
		}
		if _, progress, err := tl.add(data); err == nil && progress {
			res.AfterAnswer++
		}
	}
	hs.Close()
	select {
	case <-started:
	default:
		return res, errors.New("relay: an answer came, but the probe reported no hold")
	}
	if tl.misrouted > 0 {
		return res, fmt.Errorf("relay: %d events of another call", tl.misrouted)
	}
	res.ProgressEvents = tl.events
	for step, ok := range tl.seen {
		if !ok && len(res.Missing) < 10 && tl.events > 0 {
			res.Missing = append(res.Missing, step)
		}
	}
	res.Relay = newLatencySet(lat, true)

	// Cancellation: the call is known to be in the child when the probe
	// reports it; the first close the child hears nothing of ends the
	// tries.
	var cancels []time.Duration
	for range sz.Peers {
		tag, id := ids.next("pc")
		started := rep.expect("started", tag)
		hs, err := s.post(ctx, id, holdArgs{tag: tag})
		if err != nil {
			return res, err
		}
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			rep.forget("started", tag)
			hs.Close()
			return res, fmt.Errorf("cancellation: the hold %s never reached the child", tag)
		}
		got := rep.expect("cancelled", tag)
		t0 := monoNow()
		hs.Close()
		res.Cancels++
		select {
		case ns := <-got:
			cancels = append(cancels, time.Duration(ns-t0))
			continue
		case <-time.After(peerCancelWait):
			rep.forget("cancelled", tag)
			res.NotCancelled++
		}
		break
	}
	res.Cancel = newLatencySet(cancels, true)
	return res, nil
}
