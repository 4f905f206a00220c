package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is the kernel's USER_HZ, in which /proc reports CPU time; it
// is 100 on every Linux the suite runs on (getconf CLK_TCK).
const clockTicks = 100

// procTree is a process and, at each reading, the descendants it has then
// (unless alone).
type procTree struct {
	pid   int
	alone bool
}

// cpuSeconds is the user and system CPU time the process and its live
// descendants have used (a descendant that exited is not counted: the
// servers under test keep theirs for the whole run).
func (p procTree) cpuSeconds() (float64, error) {
	total := 0.0
	for _, pid := range p.pids() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			if pid == p.pid {
				return 0, err
			}
			continue // exited meanwhile
		}
		// The command name may hold spaces and parentheses: the fields
		// start after its last ')'.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(fields) < 13 {
			return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
		}
		utime, _ := strconv.ParseFloat(fields[11], 64)
		stime, _ := strconv.ParseFloat(fields[12], 64)
		total += (utime + stime) / clockTicks
	}
	return total, nil
}

// peakRSS is the largest resident set the process itself has had
// (VmHWM), in bytes: its children are measured on their own.
func peakRSS(pid int) (int64, error) {
	return statusField(pid, "VmHWM:")
}

func statusField(pid int, name string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, name)
}

// pids is the process and its descendants, from /proc/*/task/*/children.
func (p procTree) pids() []int {
	out := []int{p.pid}
	if p.alone {
		return out
	}
	for i := 0; i < len(out) && i < 1024; i++ {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", out[i]))
		for _, t := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", out[i], t.Name()))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(f); err == nil {
					out = append(out, n)
				}
			}
		}
	}
	return out
}
