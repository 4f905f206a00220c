package jsonrpc

import (
	"strings"
	"testing"
)

// The lines of one echo call, as the gateway reads them: the client's
// request, a progress notification from the child, and the child's answer.
//
//	go test -run '^$' -bench . -benchmem -count 6 ./jsonrpc
var (
	benchRequest = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello from the bench"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	benchProgress = []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t1","progress":1,"total":3}}`)
	benchResponse = []byte(`{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":"hello from the bench"}]}}`)
	// A large answer is mostly the text of a string.
	benchLarge = []byte(`{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":"` +
		strings.Repeat("The quick brown fox jumps over the lazy dog. ", 1500) + `"}]}}`)
)

func BenchmarkParse(b *testing.B) {
	for _, bc := range []struct {
		name string
		line []byte
		kind Kind
	}{
		{"request", benchRequest, KindRequest},
		{"progress", benchProgress, KindNotification},
		{"response", benchResponse, KindResponse},
		{"large-response", benchLarge, KindResponse},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.line)))
			for b.Loop() {
				m, err := Parse(bc.line)
				if err != nil || m.Kind != bc.kind {
					b.Fatalf("Parse: %v, %+v", err, m)
				}
			}
		})
	}
}

// BenchmarkMembers reads the objects a call's request is made of: the
// envelope, its params and their _meta.
func BenchmarkMembers(b *testing.B) {
	m, err := Parse(benchRequest)
	if err != nil {
		b.Fatal(err)
	}
	meta := Get(m.Params, "_meta")
	for _, bc := range []struct {
		name string
		obj  []byte
		n    int
	}{
		{"envelope", benchRequest, 4},
		{"params", m.Params, 3},
		{"meta", meta, 2},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ms, err := Members(bc.obj)
				if err != nil || len(ms) != bc.n {
					b.Fatalf("Members: %v, %d members", err, len(ms))
				}
			}
		})
	}
}

// BenchmarkFind looks up the envelope's members among a request's, as a
// reader that has its members does.
func BenchmarkFind(b *testing.B) {
	members, err := Members(benchRequest)
	if err != nil {
		b.Fatal(err)
	}
	names := []string{"jsonrpc", "id", "method", "params", "result", "error"}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for _, name := range names {
			_, found, err := Find(members, name)
			if err != nil {
				b.Fatal(err)
			}
			if found {
				n++
			}
		}
		if n != 4 {
			b.Fatalf("found %d envelope members, want 4", n)
		}
	}
}

// BenchmarkLookup finds a member by its path: the progress token of a
// progress notification (as the bridge routes it), and a request's
// protocol version in params._meta.
func BenchmarkLookup(b *testing.B) {
	progress, err := Parse(benchProgress)
	if err != nil {
		b.Fatal(err)
	}
	request, err := Parse(benchRequest)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		obj  []byte
		path []string
		want string
	}{
		{"progress-token", progress.Params, []string{"progressToken"}, `"t1"`},
		{"meta-version", request.Params, []string{"_meta", "io.modelcontextprotocol/protocolVersion"}, `"2026-07-28"`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sp, ok, err := Lookup(bc.obj, bc.path...)
				if !ok || err != nil || string(bc.obj[sp.Start:sp.End]) != bc.want {
					b.Fatalf("Lookup: %v, %v", ok, err)
				}
			}
		})
	}
}

// BenchmarkSplice rewrites a request's id to the gateway's, and puts the
// client's back on the answer.
func BenchmarkSplice(b *testing.B) {
	request, err := Parse(benchRequest)
	if err != nil {
		b.Fatal(err)
	}
	response, err := Parse(benchResponse)
	if err != nil {
		b.Fatal(err)
	}
	gw, client := Int(17), request.ID
	b.Run("request", func(b *testing.B) {
		sp, _ := request.IDSpan()
		b.ReportAllocs()
		for b.Loop() {
			if out := Splice(benchRequest, Edit{sp, gw}); len(out) != len(benchRequest)+1 {
				b.Fatalf("Splice: %s", out)
			}
		}
	})
	b.Run("response", func(b *testing.B) {
		sp, _ := response.IDSpan()
		b.ReportAllocs()
		for b.Loop() {
			if out := Splice(benchResponse, Edit{sp, client}); len(out) != len(benchResponse)-1 {
				b.Fatalf("Splice: %s", out)
			}
		}
	})
}
