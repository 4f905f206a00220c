//go:build linux

package main

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// After hideEnviron the process is no longer dumpable, so its
// /proc/<pid>/environ is root's alone; its children are dumpable again.
func TestHideEnviron(t *testing.T) {
	if os.Getenv("GATEWAY_TEST_HIDE") == "1" {
		// In a process of its own: the flag is the whole process's.
		if err := hideEnviron(); err != nil {
			t.Fatal(err)
		}
		dumpable, _, _ := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_GET_DUMPABLE, 0, 0)
		child, err := exec.Command("grep", "-c", "x", "/proc/self/status").Output()
		t.Logf("dumpable=%d child=%v", dumpable, err == nil && len(child) > 0)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHideEnviron$", "-test.v")
	cmd.Env = append(os.Environ(), "GATEWAY_TEST_HIDE=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "dumpable=0 child=true") {
		t.Errorf("%v:\n%s", err, out)
	}
}
