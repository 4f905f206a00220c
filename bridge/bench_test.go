package bridge

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/internal/demo"
	"github.com/stdiomcp/gateway/jsonrpc"
	"github.com/stdiomcp/gateway/mcp"
	"github.com/stdiomcp/gateway/stdio"
)

// demoChildEnv makes the test binary the demo MCP server instead of running
// the tests (see TestMain): a real child process for the benchmarks, with
// no build step.
const demoChildEnv = "_BRIDGE_TEST_DEMO_CHILD"

// runDemoChild serves the demo on stdio and exits, when the test binary
// was started as a child; otherwise it returns.
func runDemoChild() {
	if os.Getenv(demoChildEnv) == "" {
		return
	}
	err := demo.Run(context.Background(), nil, os.Stdin, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// startDemo starts the test binary as the demo server, on the transport
// the gateway uses. The benchmark imports stdio (package bridge does not):
// the per-call cost is measured over a real child's pipes.
func startDemo(context.Context) (Transport, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return stdio.Start(stdio.Config{Path: exe, Env: append(os.Environ(), demoChildEnv+"=1")})
}

// BenchmarkCall is one echo tools/call through the bridge to a real demo
// child, start to answer: what the bridge spends per call. Allocations are
// the bridge's and the transport's; ns/op includes the child's work and
// the waits for it, and cpu-ns/op is the CPU this process spent (the
// bridge, the transport, the scheduler and the collector, not the child).
// "serial" makes one call at a time; "parallel" keeps several in flight on
// the one child, as concurrent clients do.
//
//	go test -run '^$' -bench BenchmarkCall -benchmem -count 6 ./bridge
func BenchmarkCall(b *testing.B) {
	const body = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"benchmark"}}}`
	m, err := jsonrpc.Parse([]byte(body))
	if err != nil {
		b.Fatal(err)
	}
	// One request for every call: the bridge only reads it, and the
	// client's parsing is not the bridge's cost.
	req, err := mcp.Read(m)
	if err != nil {
		b.Fatal(err)
	}
	br := New(startDemo, strict(b, Options{Era: EraLegacy}))
	defer br.Close(context.Background())
	if err := br.WaitReady(context.Background()); err != nil {
		b.Fatal(err)
	}
	one := func() error {
		// A context of its own that can end, as an HTTP request's: the
		// call watches it.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		c, err := br.Call(ctx, req, Caller{})
		if err != nil {
			return err
		}
		resp, err := c.(*call).wait()
		if err != nil || !bytes.Contains(resp, []byte(`"benchmark"`)) || !bytes.HasPrefix(resp, []byte(`{"jsonrpc":"2.0","id":7,`)) {
			return fmt.Errorf("answer %s, %v", resp, err)
		}
		return nil
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if err := one(); err != nil {
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
				if err := one(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// reportCPU starts counting the CPU time of this process; the func it
// returns reports it per op as cpu-ns/op.
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
