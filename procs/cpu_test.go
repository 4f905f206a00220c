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
	m.own(0)
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

// stat writes a /proc/stat with four CPUs that have each counted elapsed
// hundredths of a second, of which idle (idle and iowait) as given.
func (m machine) stat(elapsed int, idle [4]int) {
	var b strings.Builder
	fmt.Fprintf(&b, "cpu  %d 0 0 %d 0 0 0 0 0 0\n", 4*elapsed, idle[0]+idle[1]+idle[2]+idle[3])
	for i, v := range idle {
		// Busy time split between user, system and steal; iowait is
		// part of what a CPU leaves: half of the idle time here. Guest
		// time is in user time already.
		busy := elapsed - v
		fmt.Fprintf(&b, "cpu%d %d 0 %d %d %d 0 0 %d %d 0\n", i, busy-busy/2, busy/4, v-v/2, v/2, busy/2-busy/4, busy/2)
	}
	b.WriteString("intr 12345 0 0 1\nctxt 999\nbtime 1700000000\nprocesses 42\n")
	m.write("proc/stat", b.String())
}

// own writes the process's /proc/self/stat with ticks of CPU, user and
// system.
func (m machine) own(ticks int) {
	m.write("proc/self/stat", fmt.Sprintf("4242 (a (gate) way) S 1 4242 4242 0 -1 4194560 900 0 0 0 %d %d 0 0 20 0 9 0 123 0\n", ticks-ticks/3, ticks/3))
}

// readTick reads c at *at, and moves *at on by a 50ms tick.
func readTick(t *testing.T, c *cpuTime, at *time.Time, many bool) spareCPU {
	t.Helper()
	s, err := c.read(*at, many)
	if err != nil {
		t.Fatal(err)
	}
	*at = at.Add(50 * time.Millisecond)
	return s
}

// The idle time of the CPUs the process may run on, and only those, over
// the last three ticks, says whether a whole CPU was spare; with many
// threads, whether it would be with one.
func TestCPUTimeReadsTheAllowedCPUs(t *testing.T) {
	t.Parallel()
	m := newMachine(t, "1-2", "")
	elapsed, idle := 100, [4]int{100, 100, 100, 100}
	m.stat(elapsed, idle)
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
		elapsed += 5
		idle[0], idle[1], idle[2], idle[3] = idle[0]+5, idle[1]+both/2, idle[2]+both-both/2, idle[3]+5
		m.stat(elapsed, idle)
		got = append(got, readTick(t, c, &at, false).String())
	}
	// The first three read too short a time; then, of the last 150ms,
	// 140ms (0.93 CPU), 170ms, 160ms (1.07), 60ms, 80ms.
	if want := "[unread unread unread busy spare spare busy busy]"; fmt.Sprint(got) != want {
		t.Errorf("got %v, want %s", got, want)
	}
	// With many threads, what the process used beyond one CPU would be
	// left by one: 0.8 CPUs idle and 1.33 used is 1.13 spare with one.
	c.forget()
	own := 0
	for i := range window + 1 {
		elapsed, own = elapsed+5, own+6+i%2
		idle[1], idle[2] = idle[1]+2, idle[2]+2
		m.stat(elapsed, idle)
		m.own(own)
		many := i < window
		s := readTick(t, c, &at, many)
		if want := map[bool]spareCPU{true: spare, false: busy}[many]; i >= window-1 && s != want {
			t.Errorf("0.8 CPUs idle, the process using 1.33, many threads %v: %v, want %v", many, s, want)
		}
	}
	// A reading forgotten is no base for the next.
	c.forget()
	m.stat(elapsed+5, idle)
	if got, err := c.read(at, false); got != unread || err != nil {
		t.Errorf("after forget: %v (%v), want unread", got, err)
	}
}

// Under cgroup v2 quotas, the CPU is spare only as far as every quota on
// the way to the root leaves it unused, however idle the machine: here
// the tightest, and then a looser one that busy siblings share.
func TestCPUTimeReadsTheQuotas(t *testing.T) {
	t.Parallel()
	m := newMachine(t, "0-3", "0::/pod/gateway\n")
	m.write("sys/fs/cgroup/pod/gateway/cpu.max", "max 100000\n")
	m.write("sys/fs/cgroup/pod/gateway/cpu.stat", "usage_usec 1\n")
	m.write("sys/fs/cgroup/pod/cpu.max", "250000 100000\n") // 2.5 CPUs, the tightest
	m.write("sys/fs/cgroup/pod/cpu.stat", "usage_usec 5000000\nuser_usec 4000000\n")
	m.write("sys/fs/cgroup/cpu.max", "400000 100000\n")
	m.write("sys/fs/cgroup/cpu.stat", "usage_usec 1\n")
	elapsed := 0
	m.stat(elapsed, [4]int{})
	c, err := newCPUTime(m.root)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c.quotas) != fmt.Sprintf("[{2.5 %s} {4 %s}]", filepath.Join(m.root, "sys/fs/cgroup/pod/cpu.stat"), filepath.Join(m.root, "sys/fs/cgroup/cpu.stat")) {
		t.Fatalf("quotas %v, want 2.5 CPUs (pod) and 4 (the root)", c.quotas)
	}
	at := time.Unix(1000, 0)
	usage, root := 5_000_000, 1
	var got []string
	// CPUs the pod used in each 50ms tick, of the 2.5 its quota gives,
	// and the whole tree under the root's 4; the machine is idle
	// throughout.
	for _, used := range [][2]float64{{1.6, 1.6}, {1.6, 1.6}, {1.6, 1.6}, {1.6, 1.6}, {1.2, 1.2}, {1.2, 1.2}, {1.2, 1.2}, {1.2, 3.5}, {1.2, 3.5}, {1.2, 3.5}} {
		elapsed += 5
		usage += int(used[0] * 50_000)
		root += int(used[1] * 50_000)
		m.stat(elapsed, [4]int{elapsed, elapsed, elapsed, elapsed})
		m.write("sys/fs/cgroup/pod/cpu.stat", fmt.Sprintf("usage_usec %d\n", usage))
		m.write("sys/fs/cgroup/cpu.stat", fmt.Sprintf("usage_usec %d\n", root))
		got = append(got, readTick(t, c, &at, false).String())
	}
	// Over the last three ticks, the pod used 1.6 CPUs (0.9 spare), 1.47
	// (1.03 spare), 1.33 and 1.2; then 1.2 while the whole tree used
	// 1.97, 2.73 and 3.5 of the root's 4 (0.5 spare).
	if want := "[unread unread unread busy spare spare spare spare spare busy]"; fmt.Sprint(got) != want {
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
	m.stat(1, [4]int{1, 1, 1, 1})
	for _, cgroup := range []string{"", "4:memory:/x\n1:cpu:/x\n"} { // none, v1
		if cgroup != "" {
			m.write("proc/self/cgroup", cgroup)
		}
		if c, err := newCPUTime(m.root); err != nil || len(c.quotas) != 0 {
			t.Errorf("cgroup %q: %v, %+v", cgroup, err, c)
		}
	}
	m.write("proc/self/cgroup", "0::/x\n")
	for _, max := range []string{"lots 100000\n", "-5 100000\n", "100000\n", "0 100000\n"} {
		m.write("sys/fs/cgroup/x/cpu.max", max)
		if _, err := newCPUTime(m.root); err == nil {
			t.Errorf("a cpu.max of %q: no error", max)
		}
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
	for range window - 1 {
		c.read(time.Unix(1, 0), false)
	}
	// Counters that never move (gVisor's /proc/stat is all zeros).
	if got, err := c.read(time.Unix(2, 0), false); got != spare || err == nil {
		t.Errorf("/proc/stat standing still: %v, %v; want spare (blind), and an error", got, err)
	}
	os.Remove(filepath.Join(m.root, "proc/stat"))
	if got, err := c.read(time.Unix(3, 0), false); got != spare || err == nil {
		t.Errorf("/proc/stat gone: %v, %v; want spare (blind), and an error", got, err)
	}
	// A /proc/stat with CPUs numbered its own way.
	m.write("proc/self/status", "Name:\tgateway\nCpus_allowed_list:\t8-9\n")
	m.stat(1, [4]int{1, 1, 1, 1})
	if _, err := newCPUTime(m.root); err == nil {
		t.Error("none of the allowed CPUs in /proc/stat: no error")
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
	if runtime.GOOS != "linux" {
		t.Skip("no /proc/stat")
	}
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
		c.read(time.Now(), false)
		<-time.After(100 * time.Millisecond)
	}
	if got, err := c.read(time.Now(), false); got != busy || err != nil {
		t.Errorf("%d CPUs spinning for 300ms: %v (%v), want busy", n, got, err)
	}
}
