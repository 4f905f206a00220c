package main

import (
	"os"
	"testing"
)

// The gateway keeps a floor under the heap's goal by default: its
// collector's percent is raised above the runtime's 100 while the heap is
// small, and left alone with GATEWAY_HEAP_FLOOR_BYTES=0, with GOGC set, or
// with a floor the runtime's own least goal covers.
func TestHeapFloor(t *testing.T) {
	t.Parallel()
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC set: the gateways started here would inherit it")
	}
	for _, tc := range []struct {
		env    string
		raised bool
		want   float64 // when not raised
		why    string  // what the log says when not raised, if anything
	}{
		{"GATEWAY_LOG_LEVEL=info", true, 0, ""},
		{"GATEWAY_HEAP_FLOOR_BYTES=0", false, 100, ""},
		{"GOGC=150", false, 150, "GOGC is set: the runtime paces garbage collection throughout"},
		{"GATEWAY_HEAP_FLOOR_BYTES=4194304", false, 100, "the heap floor is not kept: the runtime's own least goal is as high"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Parallel()
			g := startGateway(t, []string{tc.env})
			p, ok := scrapeAt(t, g.URL+"/metrics").value("go_gc_gogc_percent", "")
			switch {
			case !ok:
				t.Fatal("no go_gc_gogc_percent in /metrics")
			case tc.raised && p <= 100:
				t.Errorf("go_gc_gogc_percent = %v, want it raised above 100", p)
			case !tc.raised && p != tc.want:
				t.Errorf("go_gc_gogc_percent = %v, want %v", p, tc.want)
			}
			const started = "the collector's heap goal is kept at the floor or above"
			switch {
			case tc.raised:
				g.Logs.Wait(t, logged(started))
			case tc.why != "":
				// Logged where the floor would have started.
				g.Logs.Wait(t, logged(tc.why))
				fallthrough
			default:
				if recs := g.Logs.Find(logged(started)); len(recs) != 0 {
					t.Errorf("the floor started: %v", recs)
				}
			}
		})
	}
}
