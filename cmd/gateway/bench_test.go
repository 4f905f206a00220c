package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stdiomcp/gateway/bridge"
	"github.com/stdiomcp/gateway/jsonrpc"
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
		start := func(context.Context) (bridge.Transport, error) {
			return stdio.Start(stdio.Config{Path: gatewayBin, Args: []string{"demo"}})
		}
		br := bridge.New(start, bridge.Options{Era: bridge.EraLegacy})
		defer br.Close(context.Background())
		if err := br.WaitReady(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := range b.N {
			m, err := jsonrpc.Parse(fmt.Appendf(nil, call, i+1))
			if err != nil {
				b.Fatal(err)
			}
			c, err := br.Call(context.Background(), m, bridge.Caller{})
			if err != nil {
				b.Fatal(err)
			}
			if resp, err := c.Wait(); err != nil || !strings.Contains(string(resp), `"benchmark"`) {
				b.Fatalf("answer %s, %v", resp, err)
			}
		}
	})

	b.Run("gateway", func(b *testing.B) {
		g := startGateway(b, []string{"GATEWAY_LOG_LEVEL=info"})
		client := &http.Client{}
		defer client.CloseIdleConnections()
		b.ResetTimer()
		for i := range b.N {
			req, _ := http.NewRequest(http.MethodPost, g.URL+"/mcp", strings.NewReader(fmt.Sprintf(call, i+1)))
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
	})
}
