package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A spinner spins on a thread at SCHED_IDLE, and stop ends every one.
func TestKeepAwake(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before := spinners(t)
	stop, err := keepAwake(ctx, self, 2)
	if err != nil {
		t.Fatal(err)
	}
	running := spinners(t)
	for _, pid := range running {
		if !hasIdleThread(t, pid) {
			t.Errorf("spinner %d has no thread at SCHED_IDLE", pid)
		}
	}
	stop()
	after := spinners(t)
	if len(running) != len(before)+2 {
		t.Fatalf("spinners: %d before, %d with two started", len(before), len(running))
	}
	if len(after) != len(before) {
		t.Errorf("spinners left after stop: %v (before: %v)", after, before)
	}
}

// spinners are the processes of this binary running "spin".
func spinners(t *testing.T) []int {
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

// hasIdleThread reports whether one of pid's threads has the SCHED_IDLE
// policy (5): field 41 of its stat.
func hasIdleThread(t *testing.T, pid int) bool {
	t.Helper()
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			t.Fatal(err)
		}
		// The fields after the command, which is in parentheses.
		rest := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(rest) > 38 && rest[38] == "5" {
			return true
		}
	}
	return false
}
