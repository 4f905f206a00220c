package main

import (
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stdiomcp/gateway/internal/gatewaytest"
)

func logged(msg string) func(gatewaytest.Record) bool {
	return func(r gatewaytest.Record) bool { return r["msg"] == msg }
}

// The gateway runs Go code on one thread while idle; once calls come in
// parallel, on the runtime's many if a CPU is spare for them, or on one
// still, saying so, if none is (which of the two depends on what else
// this machine runs meanwhile); and on one once they stop.
func TestThreadsFollowTheLoad(t *testing.T) {
	t.Parallel()
	if runtime.GOMAXPROCS(0) < 2 || os.Getenv("GOMAXPROCS") != "" {
		t.Skip("one CPU, or GOMAXPROCS set: the gateway does not adapt its threads")
	}
	g := startGateway(t, []string{"GATEWAY_LOG_LEVEL=debug"})
	if r := g.Logs.Wait(t, logged("one thread runs Go code while the load is light")); r["up_to"] != float64(runtime.GOMAXPROCS(0)) {
		t.Errorf("the gateway would go up to %v threads, want the runtime's %d", r["up_to"], runtime.GOMAXPROCS(0))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	defer client.CloseIdleConnections()
	for range 32 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodPost, g.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"load"}}}`))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			}
		})
	}
	many := logged("threads run Go code in parallel: goroutines waited to run")
	kept := logged("one thread runs Go code still: goroutines wait, but no CPU is spare")
	g.Logs.Wait(t, func(r gatewaytest.Record) bool { return many(r) || kept(r) })
	close(stop)
	wg.Wait()
	// One thread once the load has gone: at once, or after a move back
	// (the last tick of the load may have moved to many).
	toOne := func(r gatewaytest.Record) bool {
		return r["msg"] == "one thread runs Go code: the load is light" ||
			r["msg"] == "one thread runs Go code: no CPU was spare for the others"
	}
	for tries := 0; ; tries++ {
		before := len(g.Logs.Find(toOne))
		n, ok := scrapeAt(t, g.URL+"/metrics").value("go_sched_gomaxprocs_threads", "")
		if !ok {
			t.Fatal("no go_sched_gomaxprocs_threads in /metrics")
		}
		if n == 1 {
			break
		}
		if tries == 3 {
			t.Fatalf("go_sched_gomaxprocs_threads = %v once the load ended, want 1", n)
		}
		seen := 0
		g.Logs.Wait(t, func(r gatewaytest.Record) bool {
			if toOne(r) {
				seen++
			}
			return seen > before
		})
	}
}

// With GATEWAY_ADAPT_THREADS=false, or GOMAXPROCS set, Go code runs on
// as many threads as the runtime was told throughout.
func TestThreadsCanBeLeftToTheRuntime(t *testing.T) {
	t.Parallel()
	if os.Getenv("GOMAXPROCS") != "" {
		t.Skip("GOMAXPROCS set: the test's threads are not the runtime's own")
	}
	for _, tc := range []struct {
		env  string
		want int
	}{
		{"GATEWAY_ADAPT_THREADS=false", runtime.GOMAXPROCS(0)},
		{"GOMAXPROCS=3", 3}, // not the 1 nor the CPUs a governed gateway would have
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Parallel()
			g := startGateway(t, []string{tc.env})
			if n, ok := scrapeAt(t, g.URL+"/metrics").value("go_sched_gomaxprocs_threads", ""); !ok || n != float64(tc.want) {
				t.Errorf("go_sched_gomaxprocs_threads = %v (%v), want %d", n, ok, tc.want)
			}
			if recs := g.Logs.Find(logged("one thread runs Go code while the load is light")); len(recs) != 0 {
				t.Errorf("the threads were adapted: %v", recs)
			}
		})
	}
}
