package mcp

import (
	"testing"

	"github.com/stdiomcp/gateway/jsonrpc"
)

// What the front door reads of every echo call, once the request is read.
//
//	go test -run '^$' -bench . -benchmem -count 6 ./mcp
const benchCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello from the bench"},` +
	`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`

func benchRead(b *testing.B, raw string) *Request {
	b.Helper()
	m, err := jsonrpc.Parse([]byte(raw))
	if err != nil {
		b.Fatal(err)
	}
	r, err := Read(m)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkRead is Read alone, on a request already parsed.
func BenchmarkRead(b *testing.B) {
	m, err := jsonrpc.Parse([]byte(benchCall))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		r, err := Read(m)
		if err != nil || !r.Modern() {
			b.Fatalf("Read: %v", err)
		}
	}
}

// BenchmarkTargets is what the policy and the audit line read of a call.
func BenchmarkTargets(b *testing.B) {
	r := benchRead(b, benchCall)
	b.ReportAllocs()
	for b.Loop() {
		ts, err := Targets(r)
		if err != nil || len(ts) != 1 || ts[0].Name != "echo" {
			b.Fatalf("Targets: %v, %v", ts, err)
		}
	}
}

// BenchmarkRequestString reads the strings a modern call's checks compare:
// the tool's name and the protocol version.
func BenchmarkRequestString(b *testing.B) {
	r := benchRead(b, benchCall)
	b.ReportAllocs()
	for b.Loop() {
		name, ok := r.String(ParamName)
		version, vok := r.MetaString(MetaProtocolVersion)
		if !ok || !vok || name != "echo" || version != Modern {
			b.Fatalf("String: %q %v, %q %v", name, ok, version, vok)
		}
	}
}
