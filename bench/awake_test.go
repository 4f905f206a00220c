package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Each spinner spins with every thread of it at SCHED_IDLE on its own
// CPU; stop ends them all, and says so when one had ended before.
func TestKeepAwake(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cpus, err := allowedCPUs()
	if err != nil || len(cpus) == 0 {
		t.Fatalf("%v %v", cpus, err)
	}
	before := spinnerPids(t)
	sp, err := keepAwake(t.Context(), self, cpus)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.stop() })
	running := spinnerPids(t)
	if len(running) != len(before)+len(cpus) {
		t.Fatalf("spinners: %d before, %d with %d started", len(before), len(running), len(cpus))
	}
	var on []string
	for _, c := range sp.cmds {
		for _, st := range threadStats(t, c.Process.Pid) {
			if st.policy != "5" {
				t.Errorf("spinner %d: thread %s has policy %s, not SCHED_IDLE (5)", c.Process.Pid, st.tid, st.policy)
			}
			if st.cpus != c.Args[2] {
				t.Errorf("spinner %d: thread %s may run on CPUs %q, not %s alone", c.Process.Pid, st.tid, st.cpus, c.Args[2])
			}
		}
		on = append(on, c.Args[2])
	}
	if want := strings.Fields(strings.Trim(fmt.Sprint(cpus), "[]")); !slices.Equal(on, want) {
		t.Errorf("spinners on CPUs %v, want %v", on, want)
	}
	// One that ends while it is needed is reported.
	if err := sp.cmds[0].Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-sp.exited[0].done
	if err := sp.stop(); err == nil || !strings.Contains(err.Error(), "spinner 1 of "+strconv.Itoa(len(cpus))+" ended while it was needed: signal: terminated") {
		t.Errorf("stop after a spinner ended: %v", err)
	}
	if after := spinnerPids(t); len(after) != len(before) {
		t.Errorf("spinners left after stop: %v (before: %v)", after, before)
	}
}

// A spinner that cannot spin fails keepAwake with its exit status, and
// leaves none running.
func TestKeepAwakeFails(t *testing.T) {
	before := spinnerPids(t)
	_, err := keepAwake(t.Context(), "/bin/false", []int{0, 0})
	if err == nil || !strings.Contains(err.Error(), "spinner 1 of 2 (CPU 0)") || !strings.Contains(err.Error(), "exit status 1") {
		t.Errorf("%v, want the first spinner's exit", err)
	}
	if after := spinnerPids(t); len(after) != len(before) {
		t.Errorf("spinners left: %v (before: %v)", after, before)
	}
	for _, args := range [][]string{nil, {"x"}, {"-1"}, {"0", "1"}} {
		if err := serveSpin(args); err == nil {
			t.Errorf("bench spin %q: no error", args)
		}
	}
}

// spinnerPids are the processes of this binary running "spin".
func spinnerPids(t *testing.T) []int {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err != nil {
			continue // gone meanwhile
		}
		args := strings.Split(string(b), "\x00")
		if len(args) >= 2 && args[0] == self && args[1] == "spin" {
			pid, _ := strconv.Atoi(filepath.Base(d))
			pids = append(pids, pid)
		}
	}
	return pids
}

type threadStat struct{ tid, policy, cpus string }

// threadStats reads each of pid's threads' policy (field 41 of its stat)
// and the CPUs it may run on.
func threadStats(t *testing.T, pid int) []threadStat {
	t.Helper()
	dirs, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("the threads of %d: %v", pid, err)
	}
	var out []threadStat
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		// The fields after the command, which is in parentheses.
		rest := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(rest) < 39 {
			t.Fatalf("%s/stat: %q", d, b)
		}
		st := threadStat{tid: filepath.Base(d), policy: rest[38]}
		status, err := os.ReadFile(d + "/status")
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(status)) {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				st.cpus = strings.TrimSpace(v)
			}
		}
		out = append(out, st)
	}
	return out
}
