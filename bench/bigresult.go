package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A large result: one client asks the child's big tool for a text of a
// given size, one call at a time, through the gateway and the peers. What
// it measures is the time to the answer's last byte and how much memory
// the server needs to pass it on.

// bigResult is the large-result workload: each server's calls.
type bigResult struct {
	Bytes           int           // the text's size
	MaxMessageBytes int           // GATEWAY_MAX_MESSAGE_BYTES the gateway ran with
	Timeout         time.Duration // the most one call was given
	Servers         []bigServer
}

// bigServer is one server's calls, in order.
type bigServer struct {
	Name     string
	RSSStart int64 // VmRSS once it was ready, before the first call
	Peak     int64 // VmHWM: the largest resident set over all the calls
	Calls    []bigCall
	Error    string // why its calls stopped, when they did (a peer's; the gateway's fails the workload)
}

// bigCall is one call: from writing the request to reading the answer's
// last byte (the answer is checked after the clock stops).
type bigCall struct {
	Elapsed   time.Duration
	WireBytes int   // the HTTP body: the message and its framing
	RSSBefore int64 // VmRSS before the call
	Peak      int64 // VmHWM during the call (reset before it); 0 when the kernel cannot reset it
}

// bigLineSlack is what GATEWAY_MAX_MESSAGE_BYTES allows beyond the text:
// the envelope around it is about 100 bytes.
const bigLineSlack = 1 << 20

// runBig starts the gateway (gw) and then each peer in front of child,
// and has each answer calls calls to big for size bytes, each within
// timeout. The gateway must answer every one; a peer that fails is
// reported with what went wrong, and the others still run.
func runBig(ctx context.Context, gw string, child []string, peers []target, size, calls int, timeout time.Duration) (bigResult, error) {
	res := bigResult{Bytes: size, MaxMessageBytes: size + bigLineSlack, Timeout: timeout}
	s, err := bigCalls(ctx, gatewayTarget("gateway", gw, "GATEWAY_MAX_MESSAGE_BYTES="+strconv.Itoa(res.MaxMessageBytes)), child, size, calls, timeout)
	if err != nil {
		return res, fmt.Errorf("gateway: %w", err)
	}
	res.Servers = append(res.Servers, s)
	for _, p := range peers {
		s, err := bigCalls(ctx, p, child, size, calls, timeout)
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if err != nil {
			s.Error = err.Error()
		}
		res.Servers = append(res.Servers, s)
	}
	return res, nil
}

// bigCalls starts t and makes its calls; what was measured comes back
// with the error that ended them.
func bigCalls(ctx context.Context, t target, child []string, size, calls int, timeout time.Duration) (s bigServer, err error) {
	s.Name = t.name
	start := startTarget
	if t.name == "gateway" {
		start = startGateway
	}
	r, err := start(ctx, t, child)
	if err != nil {
		return s, err
	}
	defer r.stop()
	pid := r.cmd.Process.Pid
	defer func() {
		// Also when a call failed: how much memory it took on the way
		// is part of what happened.
		if peak, err := peakRSS(pid); err == nil {
			s.Peak = max(s.Peak, peak)
		}
	}()
	tools, err := dialTools(ctx, t, r.base, &http.Transport{DisableCompression: true})
	if err != nil {
		return s, err
	}
	defer tools.Close()
	if s.RSSStart, err = statusField(pid, "VmRSS:"); err != nil {
		return s, err
	}
	buf := new(bytes.Buffer)
	buf.Grow(size + 64<<10)
	args := `{"bytes":` + strconv.Itoa(size) + `}`
	for i := range calls {
		var c bigCall
		resettable := resetPeakRSS(pid) == nil
		if c.RSSBefore, err = statusField(pid, "VmRSS:"); err != nil {
			return s, err
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		msg, wire, elapsed, err := tools.call(cctx, "big", args, buf)
		cancel()
		if err != nil {
			if cctx.Err() != nil && ctx.Err() == nil {
				err = fmt.Errorf("no answer within %v (%d bytes read): %w", timeout, wire, err)
			}
			return s, fmt.Errorf("call %d of %d: %w", i+1, calls, err)
		}
		peak, err := peakRSS(pid)
		if err != nil {
			return s, err
		}
		if resettable {
			// The kernel folds a growth into VmHWM lazily: a resident set
			// that grew and shrank again between readings may read a peak
			// below the RSS seen at the start, which was a part of it.
			c.Peak = max(peak, c.RSSBefore)
		}
		s.Peak = max(s.Peak, peak)
		c.Elapsed, c.WireBytes = elapsed, wire
		if err := checkBig(msg, size); err != nil {
			return s, fmt.Errorf("call %d of %d: %w", i+1, calls, err)
		}
		s.Calls = append(s.Calls, c)
	}
	return s, nil
}

// resetPeakRSS sets the process's VmHWM back to its current resident set
// (Linux 4.0 and later), so that the next reading is the peak of what
// came since.
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// checkBig checks that msg is a result with one text content of size
// bytes of "x", as the child's big tool answers.
func checkBig(msg []byte, size int) error {
	var m struct {
		Result *struct {
			Content []struct{ Type, Text string }
		}
		Error *struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return fmt.Errorf("big: the answer is not JSON (%d bytes): %w", len(msg), err)
	}
	switch {
	case m.Error != nil:
		return fmt.Errorf("big: error %d: %s", m.Error.Code, m.Error.Message)
	case m.Result == nil || len(m.Result.Content) != 1 || m.Result.Content[0].Type != "text":
		return fmt.Errorf("big: not one text content: %.200s", msg)
	case len(m.Result.Content[0].Text) != size:
		return fmt.Errorf("big: a text of %d bytes, want %d", len(m.Result.Content[0].Text), size)
	}
	if i := bytes.IndexFunc([]byte(m.Result.Content[0].Text), func(r rune) bool { return r != 'x' }); i >= 0 {
		return fmt.Errorf("big: byte %d of the text is not x", i)
	}
	return nil
}

// medianElapsed is the median time of s's calls.
func (s bigServer) medianElapsed() time.Duration {
	var ts []time.Duration
	for _, c := range s.Calls {
		ts = append(ts, c.Elapsed)
	}
	return median(ts)
}

// bigPeakTarget is the bound on the gateway's peak resident set,
// as a multiple of the result's size.
const bigPeakTarget = 2.5

// renderBig is the workload's section of the report.
func renderBig(r bigResult) []byte {
	var b bytes.Buffer
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("## A %s result\n\n", sizeName(int64(r.Bytes)))
	p("One client calls the child's `big` tool (one text content of %s bytes) %d times through each server,\n", thousands(int64(r.Bytes)), maxCalls(r))
	p("one call at a time, each within %v: the time from writing the request to reading the answer's last byte\n", r.Timeout)
	p("(the answer is decoded and its size checked after the clock stops), and the server's resident memory\n")
	p("(its own process, not its child): before the first call, and its peak (VmHWM, reset before each call)\n")
	p("over the calls. The gateway runs with `GATEWAY_MAX_MESSAGE_BYTES=%d` (the text plus 1 MiB for the\n", r.MaxMessageBytes)
	p("envelope: the default, 64 MiB, is the longest line, and the line is longer than the text).\n\n")
	p("| server | calls | time per call (median) | slowest | MiB/s | RSS before | peak RSS | peak / result |\n")
	p("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, s := range r.Servers {
		if len(s.Calls) > 0 {
			t := s.medianElapsed()
			slowest := slices.MaxFunc(s.Calls, func(a, b bigCall) int { return int(a.Elapsed - b.Elapsed) }).Elapsed
			p("| %s | %d | %s | %s | %.3g | %s | %s | %.2f× |\n", s.Name, len(s.Calls), roundLong(t), roundLong(slowest),
				float64(r.Bytes)/(1<<20)/t.Seconds(), mibs(s.RSSStart), mibs(s.Peak), float64(s.Peak)/float64(r.Bytes))
		}
		if s.Error != "" {
			p("| %s | failed after %d | %s | | | %s | %s | %.2f× |\n", s.Name, len(s.Calls), cell(s.Error), mibs(s.RSSStart), mibs(s.Peak), float64(s.Peak)/float64(r.Bytes))
		}
	}
	p("\n")
	if len(r.Servers) > 0 && r.Servers[0].Name == "gateway" && r.Bytes > 0 {
		gw := r.Servers[0]
		ratio := float64(gw.Peak) / float64(r.Bytes)
		verdict := "met"
		if ratio >= bigPeakTarget {
			verdict = "not met"
		}
		p("Target: the gateway's peak RSS under %.1f× the result's size (%s): %s (%s, %.2f×)",
			bigPeakTarget, mibs(int64(bigPeakTarget*float64(r.Bytes))), verdict, mibs(gw.Peak), ratio)
		if len(gw.Calls) > 1 && gw.Calls[0].Peak > 0 {
			p("; the first call, on a gateway that had passed no large answer before, peaked at %s (%.2f×)",
				mibs(gw.Calls[0].Peak), float64(gw.Calls[0].Peak)/float64(r.Bytes))
		}
		p(".\n\n")
		p("The gateway's calls one by one:\n\n| call | time | RSS before | peak RSS |\n| --- | --- | --- | --- |\n")
		for i, c := range gw.Calls {
			peak := "(not reset)"
			if c.Peak > 0 {
				peak = mibs(c.Peak)
			}
			p("| %d | %s | %s | %s |\n", i+1, roundLong(c.Elapsed), mibs(c.RSSBefore), peak)
		}
		p("\n")
	}
	return b.Bytes()
}

// drawBig draws the workload's charts into dir and returns the Markdown
// that shows them (rel: dir as the report names it).
func drawBig(dir, rel string, r bigResult) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var peak, took []series
	for _, s := range r.Servers {
		if len(s.Calls) == 0 {
			continue
		}
		peak = append(peak, series{name: s.Name, values: []float64{float64(s.Peak) / (1 << 20)}})
		took = append(took, series{name: s.Name, values: []float64{s.medianElapsed().Seconds() * 1000}})
	}
	label := []string{"a " + sizeName(int64(r.Bytes)) + " result"}
	var md bytes.Buffer
	for _, ch := range []struct {
		file, title, unit string
		ss                []series
	}{
		{"big-memory.png", "Peak resident memory of the server passing one large result (lower is better)", "MiB", peak},
		{"big-time.png", "Time to the last byte of one large result (lower is better)", "ms", took},
	} {
		if err := barChart(filepath.Join(dir, ch.file), ch.title, ch.unit, label, ch.ss, true); err != nil {
			return "", fmt.Errorf("%s: %w", ch.file, err)
		}
		fmt.Fprintf(&md, "![%s](%s/%s)\n\n", ch.title, rel, ch.file)
	}
	return md.String(), nil
}

func maxCalls(r bigResult) int {
	n := 0
	for _, s := range r.Servers {
		n = max(n, len(s.Calls))
	}
	return n
}

// roundLong is round, in seconds from 10 s up.
func roundLong(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return round(d)
}

func mibs(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// sizeName is a size in the largest binary unit that divides it, or in
// bytes.
func sizeName(b int64) string {
	switch {
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}

// thousands writes n with commas between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// cell is text fit for a Markdown table cell: one line, no pipes, short.
func cell(s string) string {
	s = strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
	if len(s) > 300 {
		s = strings.ToValidUTF8(s[:300], "") + "…"
	}
	return s
}
