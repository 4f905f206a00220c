package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
	"github.com/stdiomcp/gateway/stdio"
)

// BenchmarkCall measures one echo call three ways: written straight to the
// demo child's stdin (the baseline), through the bridge in this process
// (the multiplexer's share), and through the gateway binary over HTTP (what
// a client sees). The ratios to the baseline are the overhead:
//
//	go test -run '^$' -bench BenchmarkCall -count 10 ./cmd/gateway
func BenchmarkCall(b *testing.B) {
	const call = `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"benchmark"}}}`

	b.Run("direct", func(b *testing.B) {
		p, err := stdio.Start(stdio.Config{Path: gatewayBin, Args: []string{"demo"}})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		ctx := context.Background()
		roundTrip := func(msg string) string {
			if err := p.WriteMessage(ctx, []byte(msg)); err != nil {
				b.Fatal(err)
			}
			line, err := p.ReadMessage()
			if err != nil {
				b.Fatal(err)
			}
			return string(line)
		}
		roundTrip(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
		if err := p.WriteMessage(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := range b.N {
			if resp := roundTrip(fmt.Sprintf(call, i+1)); !strings.Contains(resp, `"benchmark"`) {
				b.Fatalf("answer %s", resp)
			}
		}
	})

	b.Run("bridge", func(b *testing.B) {
		br := demoBridge(b, bridge.Options{})
		defer br.Close(context.Background())
		b.ResetTimer()
		for i := range b.N {
			c := startCall(b, br, fmt.Sprintf(call, i+1))
			if resp, err := waitCall(c); err != nil || !strings.Contains(string(resp), `"benchmark"`) {
				b.Fatalf("answer %s, %v", resp, err)
			}
		}
	})

	b.Run("gateway", func(b *testing.B) {
		g := startGateway(b, []string{"GATEWAY_LOG_LEVEL=info"})
		echoCalls(b, g.URL)
	})
}

// BenchmarkBridgeCall is one echo tools/call through the bridge to the
// demo child, start to answer: what the bridge and the child's pipes cost
// a call, with no HTTP. Allocations are this process's; ns/op includes
// the child's work and the waits for it, and cpu-ns/op is the CPU this
// process spent (the bridge, the transport, the scheduler and the
// collector, not the child). "serial" makes one call at a time;
// "parallel" keeps several in flight on the one child, as concurrent
// clients do; "queued" has more clients than the child takes calls at
// once (GATEWAY_MAX_IN_FLIGHT), so that most calls wait their turn in the
// queue.
//
//	go test -run '^$' -bench BenchmarkBridgeCall -benchmem -count 6 ./cmd/gateway
func BenchmarkBridgeCall(b *testing.B) {
	const body = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"benchmark"}}}`
	// One request for every call: the bridge only reads it, and the
	// client's parsing is not the bridge's cost.
	req := readRequest(b, body)
	br := demoBridge(b, bridge.Options{})
	defer br.Close(context.Background())
	one := func(br *bridge.Bridge) error {
		// A context of its own that can end, as an HTTP request's: the
		// call watches it.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		c, err := br.Call(ctx, req, bridge.Caller{})
		if err != nil {
			return err
		}
		resp, err := waitCall(c)
		if err != nil || !strings.Contains(string(resp), `"benchmark"`) || !strings.HasPrefix(string(resp), `{"jsonrpc":"2.0","id":7,`) {
			return fmt.Errorf("answer %s, %v", resp, err)
		}
		return nil
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if err := one(br); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		b.SetParallelism(8) // 8 per core: calls overlap on the child
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := one(br); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("queued", func(b *testing.B) {
		br := demoBridge(b, bridge.Options{MaxInFlight: 2})
		defer br.Close(context.Background())
		b.ReportAllocs()
		defer reportCPU(b)()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := one(br); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkBridgeProgress is one progress notification of the demo
// child's through the bridge to its call's owner: read off the child's
// stdout, routed to its call by the token, the client's token put back,
// queued and taken. The child sends one a millisecond, so ns/op is its
// pace; allocs/op and cpu-ns/op are what this process spends on an
// event.
//
//	go test -run '^$' -bench BenchmarkBridgeProgress -benchmem -count 6 ./cmd/gateway
func BenchmarkBridgeProgress(b *testing.B) {
	br := demoBridge(b, bridge.Options{})
	defer br.Close(context.Background())
	b.ReportAllocs()
	defer reportCPU(b)()
	// One call of b.N steps: what it costs to start is not the events'.
	c := startCall(b, br, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"duration_ms":%d,"interval_ms":1},"_meta":{"progressToken":"bench"}}}`, b.N))
	events := 0
	var err error
	for done := false; !done; {
		<-c.Wake()
		var notes [][]byte
		notes, _, done, err = c.Take()
		for _, n := range notes {
			if !strings.Contains(string(n), `"progressToken":"bench"`) {
				b.Fatalf("event %s", n)
			}
		}
		events += len(notes)
	}
	if err != nil || events != b.N {
		b.Fatalf("%d events of %d, and %v", events, b.N, err)
	}
}

// readRequest reads body as the HTTP side reads a client's request.
func readRequest(b *testing.B, body string) *mcp.Request {
	m, err := jsonrpc.Parse([]byte(body))
	if err != nil {
		b.Fatal(err)
	}
	req, err := mcp.Read(m)
	if err != nil {
		b.Fatal(err)
	}
	return req
}

// startCall reads body as a client's request and calls the bridge with it.
func startCall(b *testing.B, br *bridge.Bridge, body string) bridge.Call {
	c, err := br.Call(context.Background(), readRequest(b, body), bridge.Caller{})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// reportCPU starts counting the CPU time of this process; the func it
// returns reports it per op as cpu-ns/op.
// demoBridge is a bridge to the demo child, ready; the caller closes it.
func demoBridge(b *testing.B, opts bridge.Options) *bridge.Bridge {
	start := func(context.Context) (bridge.Transport, error) {
		return stdio.Start(stdio.Config{Path: gatewayBin, Args: []string{"demo"}})
	}
	opts.Era = bridge.EraLegacy
	br := bridge.New(start, opts)
	if err := br.WaitReady(context.Background()); err != nil {
		br.Close(context.Background())
		b.Fatal(err)
	}
	return br
}

func reportCPU(b *testing.B) func() {
	start := cpuTime(b)
	return func() {
		b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// waitCall waits for the call's end and returns its answer.
func waitCall(c bridge.Call) ([]byte, error) {
	for {
		<-c.Wake()
		if _, resp, done, err := c.Take(); done {
			return resp, err
		}
	}
}

// echoCalls times b.N echo calls to the gateway at url, one after another.
func echoCalls(b *testing.B, url string) {
	const call = `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"benchmark"}}}`
	client := &http.Client{}
	defer client.CloseIdleConnections()
	b.ResetTimer()
	for i := range b.N {
		req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(fmt.Sprintf(call, i+1)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), `"benchmark"`) {
			b.Fatalf("answer %s", body)
		}
	}
	b.StopTimer()
}

// BenchmarkBesideSlowCalls times echo calls while slow calls run on the
// same child, each streaming progress every 50 ms to a client that reads
// it: a slow tool must not hold up the others. The ratio of slow=32 to
// slow=0 is the cost of sharing the child:
//
//	go test -run '^$' -bench BenchmarkBesideSlowCalls -benchtime 3000x -count 6 ./cmd/gateway
func BenchmarkBesideSlowCalls(b *testing.B) {
	for _, slow := range []int{0, 32} {
		b.Run(fmt.Sprintf("slow=%d", slow), func(b *testing.B) {
			g := startGateway(b, []string{"GATEWAY_LOG_LEVEL=info"})
			g.WaitReady()
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel()
			for i := range slow {
				resp := rpc(b, ctx, g.URL, fmt.Sprintf(`{"jsonrpc":"2.0","id":"slow-%d","method":"tools/call","params":{"name":"slow","arguments":{"duration_ms":600000,"interval_ms":50},"_meta":{"progressToken":%d}}}`, i, i))
				events := newSSEReader(resp.Body)
				if ev := events.next(); !strings.Contains(ev, "notifications/progress") {
					b.Fatalf("first event of slow call %d = %q, want progress", i, ev)
				}
				wg.Go(func() {
					for events.next() != "" {
					}
				})
			}
			echoCalls(b, g.URL)
		})
	}
}

// BenchmarkLargeResult passes a tool result just under the 64 MiB line
// limit through the gateway binary, answered as JSON and as SSE, and
// reports the gateway's peak resident memory (VmHWM) next to its resident
// memory before the first call: the extra memory one such call costs.
//
//	go test -run '^$' -bench BenchmarkLargeResult -benchtime 5x -count 5 ./cmd/gateway
func BenchmarkLargeResult(b *testing.B) {
	const size = 64<<20 - 4<<10 // the text; the line around it stays under 64 MiB
	for _, mode := range []string{"json", "sse"} {
		b.Run(mode, func(b *testing.B) {
			// GOMEMLIMIT, when set for the benchmark, is passed on: it is
			// the knob that trades GC work for a lower peak.
			g := startGateway(b, []string{"GATEWAY_LOG_LEVEL=info"})
			g.WaitReady()
			meta := ""
			if mode == "sse" {
				meta = `,"_meta":{"progressToken":1}`
			}
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{"bytes":%d}%s}}`, size, meta)
			client := &http.Client{}
			defer client.CloseIdleConnections()
			before := procStatus(b, g.Cmd.Process.Pid, "VmRSS")
			b.SetBytes(size)
			b.ResetTimer()
			for range b.N {
				req, _ := http.NewRequest(http.MethodPost, g.URL+"/mcp", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || n < size {
					b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
				}
			}
			b.StopTimer()
			peak := procStatus(b, g.Cmd.Process.Pid, "VmHWM")
			b.ReportMetric(float64(before)/1024, "base-RSS-MiB")
			b.ReportMetric(float64(peak)/1024, "peak-RSS-MiB")
			b.ReportMetric(float64(peak-before)*1024/size, "extra-RSS/result")
		})
	}
}

// procStatus reads a kB field of /proc/<pid>/status.
func procStatus(b *testing.B, pid int, field string) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kb
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
