package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestScaleWorkloads runs the large-result, workers and profile workloads
// at small sizes against the real gateway and the real Node child, and
// checks that what they measured is there and makes sense.
func TestScaleWorkloads(t *testing.T) {
	t.Parallel()
	node, dir := peerEnv(t)
	child := []string{node, filepath.Join(dir, "echo-server.mjs")}
	gw := buildGateway(t)
	// The subtests run in parallel, after this function has returned.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)

	const size, calls = 1 << 20, 2
	checkServer := func(t *testing.T, s bigServer) {
		t.Helper()
		if s.Error != "" || len(s.Calls) != calls {
			t.Errorf("%s: %d calls, %s", s.Name, len(s.Calls), s.Error)
		}
		if s.RSSStart <= 0 || s.Peak < s.RSSStart {
			t.Errorf("%s: RSS %d at the start, peak %d", s.Name, s.RSSStart, s.Peak)
		}
		for _, c := range s.Calls {
			if c.WireBytes < size || c.Elapsed <= 0 || c.RSSBefore <= 0 || (c.Peak != 0 && c.Peak < c.RSSBefore) || c.Peak > s.Peak {
				t.Errorf("%s: %+v", s.Name, c)
			}
		}
	}
	// The peers are measured on their own, at the same time as the rest:
	// nothing here is timed.
	for _, p := range peerTargets(node, dir) {
		t.Run("big "+p.name, func(t *testing.T) {
			t.Parallel()
			s, err := bigCalls(ctx, p, child, size, calls, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			checkServer(t, s)
		})
	}
	t.Run("big", func(t *testing.T) {
		t.Parallel()
		r, err := runBig(ctx, gw, child, nil, size, calls, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Servers) != 1 || r.Servers[0].Name != "gateway" || r.MaxMessageBytes <= size {
			t.Fatalf("%+v", r)
		}
		checkServer(t, r.Servers[0])
		md := string(renderBig(r))
		for _, want := range []string{"## A 1 MiB result", "| gateway | 2 |", "GATEWAY_MAX_MESSAGE_BYTES=2097152", "Target: the gateway's peak RSS under 2.5×", "| 2 | "} {
			if !strings.Contains(md, want) {
				t.Errorf("the section has no %q:\n%s", want, md)
			}
		}
		charts := t.TempDir()
		if _, err := drawBig(charts, "charts", r); err != nil {
			t.Fatal(err)
		}
		assertPNGs(t, charts, "big-memory.png", "big-time.png")
	})

	t.Run("workers", func(t *testing.T) {
		t.Parallel()
		r, err := runWorkers(ctx, gw, child, []int{1, 2}, 4, 2*time.Millisecond, 100*time.Millisecond, 300*time.Millisecond, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Runs) != 2 || r.Runs[0].Workers != 1 || r.Runs[1].Workers != 2 {
			t.Fatalf("%+v", r)
		}
		for _, run := range r.Runs {
			if l := run.Load; l.Calls == 0 || l.Errors != 0 || l.P50 <= 0 || l.P99 < l.P50 || l.CPU <= 0 || l.OwnCPU > l.CPU {
				t.Errorf("GATEWAY_WORKERS=%d: %+v", run.Workers, l)
			}
		}
		md := string(renderWorkers(r))
		for _, want := range []string{"## GATEWAY_WORKERS", "| 1 | ", "| 2 | ", "1.00×", fmt.Sprintf("of %.0f |", r.ceiling(1))} {
			if !strings.Contains(md, want) {
				t.Errorf("the section has no %q:\n%s", want, md)
			}
		}
		charts := t.TempDir()
		if _, err := drawWorkers(charts, "charts", r); err != nil {
			t.Fatal(err)
		}
		assertPNGs(t, charts, "workers.png")
	})

	t.Run("profile", func(t *testing.T) {
		t.Parallel()
		out := filepath.Join(t.TempDir(), "pprof")
		r, err := runProfiles(ctx, gw, child, []int{64, 1}, 100*time.Millisecond, time.Second, true, out)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Runs) != 2 {
			t.Fatalf("%+v", r)
		}
		for _, run := range r.Runs {
			if run.Load.Calls == 0 {
				t.Errorf("c=%d: no calls while profiling", run.Conc)
			}
			for _, f := range []string{run.CPUFile, run.AllocsFile} {
				if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
					t.Errorf("c=%d: profile %s: %v", run.Conc, f, err)
				}
			}
			for name, top := range map[string]profileTop{"cpu": run.CPU, "cpu cum": run.CPUCum, "alloc_space": run.AllocBytes, "alloc_objects": run.AllocCount} {
				if top.Total <= 0 || len(top.Entries) == 0 || len(top.Entries) > profileNodes {
					t.Errorf("c=%d, %s: %+v", run.Conc, name, top)
				}
			}
			// The path of every call runs through the gateway's own HTTP
			// handlers: with what they call, they are at the top.
			if !slices.ContainsFunc(run.CPUCum.Entries, func(e profileEntry) bool { return strings.HasPrefix(e.Name, "github.com/stdiomcp/gateway/") }) {
				t.Errorf("c=%d: no gateway function among the top by cumulative CPU: %+v", run.Conc, run.CPUCum.Entries)
			}
			// Sorted as asked.
			if !slices.IsSortedFunc(run.CPUCum.Entries, func(a, b profileEntry) int { return cmp.Compare(b.Cum, a.Cum) }) ||
				!slices.IsSortedFunc(run.AllocBytes.Entries, func(a, b profileEntry) int { return cmp.Compare(b.Flat, a.Flat) }) {
				t.Errorf("c=%d: a top out of order", run.Conc)
			}
		}
		md := string(renderProfiles(r))
		for _, want := range []string{"### Concurrency 64, 1 s", "### Concurrency 1, 1 s", "| `github.com/stdiomcp/gateway/", "Allocations, by the function"} {
			if !strings.Contains(md, want) {
				t.Errorf("the section has no %q:\n%s", want, md)
			}
		}
	})
}

func assertPNGs(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, name := range names {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() < 1000 {
			t.Errorf("chart %s: %v", name, err)
		}
	}
}

// checkBig refuses what is not the answer asked for.
func TestCheckBig(t *testing.T) {
	ok := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"xxxx"}],"resultType":"complete"}}`
	if err := checkBig([]byte(ok), 4); err != nil {
		t.Errorf("a good answer: %v", err)
	}
	for _, tc := range []struct{ msg, err string }{
		{ok, "a text of 4 bytes, want 5"},
		{strings.Replace(ok, "xxxx", "xxxxy", 1), "byte 4 of the text is not x"},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"nope"}}`, "error -32602: nope"},
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`, "not one text content"},
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"xxxxx`, "not JSON"},
	} {
		if err := checkBig([]byte(tc.msg), 5); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%.60s: got %v, want %q", tc.msg, err, tc.err)
		}
	}
}

// parseTop reads pprof's table, zero rows and inlined and generic names
// among it; a table it cannot read is an error.
func TestParseTop(t *testing.T) {
	out := `File: gateway
Type: alloc_objects
Duration: 1s, Total samples = 1322418
Showing nodes accounting for 424019, 32.06% of 1322418 total
Dropped 38 nodes (cum <= 6612)
      flat  flat%   sum%        cum   cum%
    118168  8.94%  8.94%     118168  8.94%  net/textproto.readMIMEHeader
     12000  1.00%  9.94%      15000  1.10%  slices.Grow[go.shape.[]log/slog.Attr,go.shape.struct { Key string }] (inline)
         0     0%  9.94%      65537  4.96%  github.com/stdiomcp/gateway/httpapi.New.func1
`
	top, err := parseTop([]byte(out), "")
	if err != nil {
		t.Fatal(err)
	}
	want := profileTop{Total: 1322418, Unit: "count", Entries: []profileEntry{
		{Name: "net/textproto.readMIMEHeader", Flat: 118168, FlatPct: 8.94, Cum: 118168, CumPct: 8.94},
		{Name: "slices.Grow[go.shape.[]log/slog.Attr,go.shape.struct { Key string }] (inline)", Flat: 12000, FlatPct: 1, Cum: 15000, CumPct: 1.1},
		{Name: "github.com/stdiomcp/gateway/httpapi.New.func1", Flat: 0, FlatPct: 0, Cum: 65537, CumPct: 4.96},
	}}
	if fmt.Sprint(top) != fmt.Sprint(want) {
		t.Errorf("got  %+v\nwant %+v", top, want)
	}
	cpu := "Showing nodes accounting for 50ms, 3.11% of 1610ms total\n      flat  flat%   sum%        cum   cum%\n      20ms  1.24%  1.24%     1360ms 84.47%  net/http.(*conn).serve\n"
	if top, err := parseTop([]byte(cpu), "ms"); err != nil || top.Total != 1610 || len(top.Entries) != 1 || top.Entries[0].Cum != 1360 {
		t.Errorf("cpu: %+v, %v", top, err)
	}
	for _, bad := range []string{"", "Showing nodes accounting for 1, 1% of 10 total\n", cpu + "garbage\n", strings.Replace(cpu, "1360ms", "1360s", 1)} {
		if top, err := parseTop([]byte(bad), "ms"); err == nil {
			t.Errorf("%q: read as %+v", bad, top)
		}
	}
}

// The echo child's spin and big tools, in both eras, and their listing
// with --all-tools.
func TestEchoServerMoreTools(t *testing.T) {
	t.Parallel()
	e := startEcho(t)
	big := strings.Repeat("x", 100000)
	e.ask(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{"bytes":100000}}}`, "1",
		`{"content":[{"type":"text","text":"`+big+`"}]}`, 0)
	e.ask(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big","arguments":{"bytes":3},`+modernMeta+`}}`, "2",
		`{"content":[{"type":"text","text":"xxx"}],"resultType":"complete"}`, 0)
	e.ask(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"big","arguments":{"bytes":0}}}`, "3",
		`{"content":[{"type":"text","text":""}]}`, 0)
	for i, args := range []string{`{}`, `{"bytes":1.5}`, `{"bytes":-1}`, `{"bytes":"3"}`, `{"bytes":268435457}`, `{"ms":-1}`} {
		e.ask(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"big","arguments":%s}}`, 10+i, args), fmt.Sprint(10+i), "", -32602)
	}
	for i, args := range []string{`{}`, `{"ms":"5"}`, `{"ms":-1}`, `{"ms":60001}`} {
		e.ask(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"spin","arguments":%s}}`, 20+i, args), fmt.Sprint(20+i), "", -32602)
	}
	for i, tc := range []struct{ args, meta, tail string }{{`{"ms":3}`, "", ` times in 3 ms`}, {`{"ms":0.5}`, "," + modernMeta, ` times in 0.5 ms`}} {
		id := 30 + i
		e.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"spin","arguments":%s%s}}`, id, tc.args, tc.meta))
		a := e.read()
		var r struct {
			Content    []struct{ Type, Text string }
			ResultType string
		}
		var rounds int
		switch err := json.Unmarshal(a.Result, &r); {
		case string(a.ID) != fmt.Sprint(id) || err != nil || len(r.Content) != 1 || !strings.HasSuffix(r.Content[0].Text, tc.tail):
			t.Errorf("spin %s: id %s, %s", tc.args, a.ID, a.Result)
		case func() error { _, err := fmt.Sscanf(r.Content[0].Text, "spun %d times", &rounds); return err }() != nil || rounds < 1:
			t.Errorf("spin %s: %q", tc.args, r.Content[0].Text)
		}
		if (tc.meta != "") != (r.ResultType == "complete") {
			t.Errorf("spin %s: resultType %q", tc.args, r.ResultType)
		}
	}

	cmd := exec.Command(testNode(t), "echo-server.mjs", "--all-tools")
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Result struct{ Tools []struct{ Name string } }
	}
	if err := json.Unmarshal(out, &a); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	var names []string
	for _, tool := range a.Result.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Equal(names, []string{"echo", "spin", "big"}) {
		t.Errorf("--all-tools lists %v", names)
	}
}
