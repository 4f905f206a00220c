package demo

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/stdiomcp/gateway/mcp"
)

// faults are ways the demo can misbehave, chosen with -fault, so that the
// gateway's tests can show what a user sees when a child does. Each one
// strikes on tools/call (or where it says), so tools/list still shows the
// gateway serving once it has recovered.
type faults map[string]bool

var faultNames = []string{
	"crash-on-call", // exit with status 3 on a tool call
	"hang-on-call",  // on a tool call, stop reading and writing for good (a wedge)
	"ignore-cancel", // take no notice of notifications/cancelled
	"garbage",       // write junk lines before every message
	"stderr-flood",  // write 8 MiB to stderr on a tool call, then answer
	"exit-on-probe", // exit when asked server/discover
	"ignore-term",   // ignore SIGTERM and stdin closing
	"grandchild",    // start a grandchild that holds stdout open
	"answer-twice",  // write every answer twice
}

func parseFaults(s string) (faults, error) {
	f := faults{}
	for name := range strings.SplitSeq(s, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		if !slices.Contains(faultNames, name) {
			return nil, fmt.Errorf("demo: unknown -fault %q (known: %s)", name, strings.Join(faultNames, ", "))
		}
		f[name] = true
	}
	return f, nil
}

// atStart applies the faults that act on the process as a whole.
func (f faults) atStart(out io.Writer, errOut io.Writer) error {
	if f["ignore-term"] {
		signal.Ignore(syscall.SIGTERM)
	}
	if f["grandchild"] {
		// A wrapper's leftover: it inherits stdout and outlives the demo.
		cmd := exec.Command("sleep", "3600")
		if file, ok := out.(*os.File); ok {
			cmd.Stdout = file
		}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("demo: start the grandchild: %w", err)
		}
		fmt.Fprintf(errOut, "demo: grandchild pid %d holds stdout\n", cmd.Process.Pid)
	}
	return nil
}

// atEnd runs when stdin has closed: a demo that ignores that never exits.
func (f faults) atEnd(errOut io.Writer) {
	if !f["ignore-term"] {
		return
	}
	fmt.Fprintln(errOut, "demo: stdin closed; not exiting (-fault ignore-term)")
	for {
		time.Sleep(time.Hour)
	}
}

// onMessage acts on a message before the demo handles it.
func (s *server) onMessage(m *message) {
	f := s.faults
	switch {
	case m.Method == mcp.MethodDiscover && f["exit-on-probe"]:
		fmt.Fprintln(s.errOut, "demo: exiting on server/discover (-fault exit-on-probe)")
		os.Exit(0)
	case m.Method != mcp.MethodToolsCall:
		return
	case f["crash-on-call"]:
		fmt.Fprintln(s.errOut, "demo: crashing on a tool call (-fault crash-on-call)")
		os.Exit(3)
	case f["hang-on-call"]:
		fmt.Fprintln(s.errOut, "demo: hanging on a tool call (-fault hang-on-call)")
		s.wmu.Lock() // nothing is written any more, and nothing read
		for {
			time.Sleep(time.Hour)
		}
	case f["stderr-flood"]:
		line := strings.Repeat("x", 1023) + "\n"
		for range 8 << 10 {
			io.WriteString(s.errOut, line)
		}
	}
}

// junk is what -fault garbage writes before every message: text, a cut-off
// message, bytes that are not UTF-8, and an answer to a request nobody
// made.
const junk = "this is not JSON\n" +
	`{"jsonrpc":"2.0","id":` + "\n" +
	"\xff\xfe\xfd\n" +
	`{"jsonrpc":"2.0","id":987654321,"result":{}}` + "\n"
