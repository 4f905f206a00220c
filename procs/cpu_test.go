package procs

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// machine is a tree of the files cpuTime reads, for a test to change.
type machine struct {
	t    *testing.T
	root string
}

func newMachine(t *testing.T, allowed, cgroup string) machine {
	m := machine{t, t.TempDir()}
	m.write("proc/self/status", "Name:\tgateway\nCpus_allowed:\tf\nCpus_allowed_list:\t"+allowed+"\n")
	if cgroup != "" {
		m.write("proc/self/cgroup", cgroup)
	}
	return m
}

func (m machine) write(name, text string) {
	m.t.Helper()
	file := filepath.Join(m.root, name)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		m.t.Fatal(err)
	}
}

// stat writes a /proc/stat with four CPUs whose idle and iowait times,
// in hundredths of a second, are given.
func (m machine) stat(idle [4]int) {
	var b strings.Builder
	fmt.Fprintf(&b, "cpu  9000 0 900 %d 40 0 0 0 0 0\n", idle[0]+idle[1]+idle[2]+idle[3])
	for i, v := range idle {
		// iowait is part of what a CPU leaves: half of it here.
		fmt.Fprintf(&b, "cpu%d 2250 10 225 %d %d 0 5 0 0 0\n", i, v-v/2, v/2)
	}
	b.WriteString("intr 12345 0 0 1\nctxt 999\nbtime 1700000000\nprocesses 42\n")
	m.write("proc/stat", b.String())
}

// The idle time of the CPUs the process may run on, and only those, over
// the last three ticks, says whether a whole CPU was spare.
func TestCPUTimeReadsTheAllowedCPUs(t *testing.T) {
	t.Parallel()
	m := newMachine(t, "1-2", "")
	idle := [4]int{100, 100, 100, 100}
	m.stat(idle)
	c, err := newCPUTime(m.root)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1000, 0)
	// In each 50ms tick, CPUs 0 and 3 are idle throughout, which counts
	// for nothing; 1 and 2 are idle for as many hundredths as given,
	// between them.
	var got []string
	for _, both := range []int{0, 0, 4, 10, 3, 3, 0, 5} {
		idle[0], idle[1], idle[2], idle[3] = idle[0]+5, idle[1]+both/2, idle[2]+both-both/2, idle[3]+5
		m.stat(idle)
		got = append(got, c.read(at).String())
		at = at.Add(50 * time.Millisecond)
	}
	// The first three read too short a time; then, of the last 150ms,
	// 140ms (0.93 CPU), 170ms, 160ms (1.07), 60ms, 80ms.
	if want := "[unread unread unread busy spare spare busy busy]"; fmt.Sprint(got) != want {
		t.Errorf("got %v, want %s", got, want)
	}
	// A reading forgotten is no base for the next.
	c.forget()
	m.stat([4]int{110, 200, 200, 110})
	if got := c.read(at); got != unread {
		t.Errorf("after forget: %v, want unread", got)
	}
}

// Under a cgroup v2 quota, the CPU is spare only as far as the tightest
// quota on the way to the root leaves it unused, however idle the
// machine.
func TestCPUTimeReadsTheQuota(t *testing.T) {
	t.Parallel()
	m := newMachine(t, "0-3", "0::/pod/gateway\n")
	m.write("sys/fs/cgroup/pod/gateway/cpu.max", "max 100000\n")
	m.write("sys/fs/cgroup/pod/gateway/cpu.stat", "usage_usec 1\n")
	m.write("sys/fs/cgroup/pod/cpu.max", "250000 100000\n") // 2.5 CPUs, the tightest
	m.write("sys/fs/cgroup/pod/cpu.stat", "usage_usec 5000000\nuser_usec 4000000\n")
	m.write("sys/fs/cgroup/cpu.max", "400000 100000\n")
	m.write("sys/fs/cgroup/cpu.stat", "usage_usec 1\n")
	m.stat([4]int{0, 0, 0, 0})
	c, err := newCPUTime(m.root)
	if err != nil {
		t.Fatal(err)
	}
	if c.quota != 2.5 {
		t.Fatalf("quota %v CPUs, want 2.5", c.quota)
	}
	at := time.Unix(1000, 0)
	idle, usage := 0, 5_000_000
	var got []string
	// CPUs used in each 50ms tick, of the 2.5 the quota gives; the
	// machine is idle throughout.
	for _, used := range []float64{1.6, 1.6, 1.6, 1.6, 1.2, 1.2, 1.2, 2.0, 2.0} {
		idle += 5
		usage += int(used * 50_000)
		m.stat([4]int{idle, idle, idle, idle})
		m.write("sys/fs/cgroup/pod/cpu.stat", fmt.Sprintf("usage_usec %d\n", usage))
		got = append(got, c.read(at).String())
		at = at.Add(50 * time.Millisecond)
	}
	// Over the last three ticks: 1.6 CPUs used (0.9 spare), 1.47 (1.03
	// spare), 1.33, 1.2, 1.47, 1.73.
	if want := "[unread unread unread busy spare spare spare spare busy]"; fmt.Sprint(got) != want {
		t.Errorf("got %v, want %s", got, want)
	}
}

// What cannot be read is an error at the start, and a machine that does
// not say afterwards; no cgroup, or cgroup v1, is no quota.
func TestCPUTimeFailures(t *testing.T) {
	t.Parallel()
	m := newMachine(t, "0", "")
	if _, err := newCPUTime(m.root); err == nil {
		t.Error("no /proc/stat: no error")
	}
	m.stat([4]int{1, 1, 1, 1})
	if c, err := newCPUTime(m.root); err != nil || c.quota != 0 {
		t.Errorf("no /proc/self/cgroup: %v, quota %v", err, c.quota)
	}
	m.write("proc/self/cgroup", "4:memory:/x\n1:cpu:/x\n")
	if c, err := newCPUTime(m.root); err != nil || c.quota != 0 {
		t.Errorf("cgroup v1: %v, quota %v", err, c.quota)
	}
	m.write("proc/self/cgroup", "0::/x\n")
	m.write("sys/fs/cgroup/x/cpu.max", "lots 100000\n")
	if _, err := newCPUTime(m.root); err == nil {
		t.Error("a cpu.max that does not parse: no error")
	}
	m.write("sys/fs/cgroup/x/cpu.max", "50000 100000\n")
	if _, err := newCPUTime(m.root); err == nil {
		t.Error("a quota without cpu.stat: no error")
	}
	m.write("sys/fs/cgroup/x/cpu.stat", "usage_usec 10\n")
	c, err := newCPUTime(m.root)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(m.root, "proc/stat"))
	if got := c.read(time.Unix(2, 0)); got != spare {
		t.Errorf("/proc/stat gone: %v, want spare (blind)", got)
	}
	m.write("proc/self/status", "Name:\tgateway\n")
	if _, err := newCPUTime(m.root); err == nil {
		t.Error("no Cpus_allowed_list: no error")
	}
	for _, list := range []string{"", "1-", "3-1", "a", "0,,1"} {
		if _, err := cpuList(list); err == nil {
			t.Errorf("cpu list %q: no error", list)
		}
	}
	if got, err := cpuList("0-1,3"); err != nil || fmt.Sprint(got) != "[true true false true]" {
		t.Errorf("cpu list 0-1,3: %v, %v", got, err)
	}
}

// On this machine: with a goroutine spinning on each CPU the process may
// use, no CPU is spare.
func TestCPUTimeOnThisMachine(t *testing.T) {
	c, err := newCPUTime("/")
	if err != nil {
		t.Fatalf("this machine's CPU time: %v", err)
	}
	n := 0
	for _, ok := range c.allowed {
		if ok {
			n++
		}
	}
	prev := runtime.GOMAXPROCS(n)
	defer runtime.GOMAXPROCS(prev)
	var done atomic.Bool
	var wg sync.WaitGroup
	defer wg.Wait()
	defer done.Store(true)
	spinning := make(chan struct{}, n)
	for range n {
		wg.Go(func() {
			spinning <- struct{}{}
			for !done.Load() {
			}
		})
	}
	for range n {
		<-spinning
	}
	for range window - 1 {
		c.read(time.Now())
		<-time.After(100 * time.Millisecond)
	}
	if got := c.read(time.Now()); got != busy {
		t.Errorf("%d CPUs spinning for 300ms: %v, want busy", n, got)
	}
}
