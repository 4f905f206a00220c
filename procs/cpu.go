package procs

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// spareCPU says whether the last ticks left a CPU unused that the process
// could have had. A goroutine held up on one thread is helped by a second
// one only if a CPU is free to run it: on a machine whose CPUs are all
// busy (with the child, the clients, the neighbours), a second thread
// only adds wake-ups and switches, and takes CPU from the child.
type spareCPU int

const (
	spare  spareCPU = iota // a whole CPU or more was idle, or the machine does not say
	busy                   // less was
	unread                 // not read in this tick
)

func (s spareCPU) String() string { return [...]string{"spare", "busy", "unread"}[s] }

// wholeCPU is the idle time, in CPUs over the window, from which a second
// thread pays: the threads' wake-ups cost about 40 % more CPU per call
// (echo calls 64 at a time, 2 CPUs), so the second thread must find most
// of a CPU to run on to get more calls through than one. /proc/stat
// counts in hundredths of a second: three 50ms ticks on two CPUs read to
// within a seventh of a CPU.
const wholeCPU = 1.0

// cpuReader says, each tick, whether a CPU was spare; forget drops its
// last reading when no decision needs it (an idle process need not read
// /proc/stat twenty times a second).
type cpuReader interface {
	read(now time.Time) spareCPU
	forget()
}

// cpuTime reads the idle time of the CPUs the process may run on
// (/proc/stat, the CPUs in its affinity mask) and, under a cgroup v2 CPU
// quota, what the quota left unused (cpu.max and cpu.stat of the cgroup
// whose quota is the tightest). On cgroup v1 the quota is not read; the
// runtime's GOMAXPROCS, which Run moves to, does follow it.
type cpuTime struct {
	root    string // "/", or a test's tree
	allowed []bool // by CPU number
	quota   float64
	stat    string // the cpu.stat that goes with quota
	// The last readings, oldest first: what is spare is read over a few
	// ticks, since one tick of /proc/stat is too coarse and too noisy to
	// go by (a pipeline that one thread keeps short of CPU leaves a tenth
	// to a half of a CPU idle, and most of one in a tick now and then).
	readings []reading
}

type reading struct {
	at          time.Time
	idle, usage uint64 // in USER_HZ ticks, in µs
}

// window is how many readings what is spare is read over: three ticks.
const window = 4

// userHZ is the unit of /proc/stat's times: USER_HZ, 100 on every Linux
// architecture Go runs on.
const userHZ = 100

func newCPUTime(root string) (*cpuTime, error) {
	status, err := os.ReadFile(filepath.Join(root, "proc/self/status"))
	if err != nil {
		return nil, err
	}
	c := &cpuTime{root: root}
	for line := range strings.Lines(string(status)) {
		if list, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			if c.allowed, err = cpuList(strings.TrimSpace(list)); err != nil {
				return nil, fmt.Errorf("the affinity list, Cpus_allowed_list: %w", err)
			}
		}
	}
	if c.allowed == nil {
		return nil, errors.New("no Cpus_allowed_list in /proc/self/status")
	}
	if c.quota, c.stat, err = tightestQuota(root); err != nil {
		return nil, err
	}
	if _, _, err := c.times(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *cpuTime) forget() { c.readings = c.readings[:0] }

func (c *cpuTime) read(now time.Time) spareCPU {
	idle, usage, err := c.times()
	if err != nil {
		return spare // blind to the machine: as if it did not say
	}
	if len(c.readings) == window {
		c.readings = append(c.readings[:0], c.readings[1:]...)
	}
	c.readings = append(c.readings, reading{now, idle, usage})
	if len(c.readings) < window {
		return unread
	}
	first := c.readings[0]
	dt := now.Sub(first.at).Seconds()
	if dt <= 0 || idle < first.idle || usage < first.usage {
		c.readings = append(c.readings[:0], reading{now, idle, usage})
		return unread // a counter that went back: a reading to start from
	}
	free := float64(idle-first.idle) / (userHZ * dt)
	if c.quota > 0 {
		free = min(free, c.quota-float64(usage-first.usage)/(1e6*dt))
	}
	if free < wholeCPU {
		return busy
	}
	return spare
}

// times reads the allowed CPUs' idle time (iowait included: a CPU waiting
// on a disk runs whatever is ready) and the quota's cgroup's usage.
func (c *cpuTime) times() (idle, usage uint64, err error) {
	stat, err := os.ReadFile(filepath.Join(c.root, "proc/stat"))
	if err != nil {
		return 0, 0, err
	}
	var ticks uint64
	for line := range bytes.Lines(stat) {
		rest, ok := bytes.CutPrefix(line, []byte("cpu"))
		if !ok || len(rest) == 0 || rest[0] < '0' || rest[0] > '9' {
			continue // the total line, or another counter
		}
		f := strings.Fields(string(rest))
		if len(f) < 6 {
			return 0, 0, fmt.Errorf("/proc/stat: short line %q", line)
		}
		n, err := strconv.Atoi(f[0])
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		if n >= len(c.allowed) || !c.allowed[n] {
			continue
		}
		for _, s := range f[4:6] {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("/proc/stat: %w", err)
			}
			ticks += v
		}
	}
	if c.stat != "" {
		if usage, err = usageOf(c.stat); err != nil {
			return 0, 0, err
		}
	}
	return ticks, usage, nil
}

// cpuList parses a CPU list such as "0-3,8,10-11".
func cpuList(s string) ([]bool, error) {
	var cpus []bool
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, err
		}
		b, err := strconv.Atoi(hi)
		if err != nil {
			return nil, err
		}
		if a < 0 || b < a || b >= 1<<16 {
			return nil, fmt.Errorf("bad range %q", part)
		}
		for len(cpus) <= b {
			cpus = append(cpus, false)
		}
		for i := a; i <= b; i++ {
			cpus[i] = true
		}
	}
	return cpus, nil
}

// tightestQuota finds, from the process's cgroup v2 up to the root of
// the hierarchy, the smallest CPU quota, in CPUs, and the cpu.stat of the
// cgroup that sets it. No quota (or cgroup v1): 0 and "".
func tightestQuota(root string) (cpus float64, stat string, err error) {
	b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0, "", nil // no cgroups to read: the machine's CPUs alone
	}
	var group string
	found := false
	for line := range strings.Lines(string(b)) {
		if g, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			group, found = g, true
		}
	}
	if !found {
		return 0, "", nil
	}
	mount := filepath.Join(root, "sys/fs/cgroup")
	for dir := path.Clean("/" + group); ; dir = path.Dir(dir) {
		q, err := quotaOf(filepath.Join(mount, dir, "cpu.max"))
		if err != nil {
			return 0, "", err
		}
		if q > 0 && (cpus == 0 || q < cpus) {
			cpus, stat = q, filepath.Join(mount, dir, "cpu.stat")
		}
		if dir == "/" {
			break
		}
	}
	if stat != "" {
		if _, err := usageOf(stat); err != nil {
			return 0, "", err
		}
	}
	return cpus, stat, nil
}

// quotaOf reads a cpu.max ("max 100000", "150000 100000"): the quota in
// CPUs, 0 for none or no file.
func quotaOf(file string) (float64, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, fmt.Errorf("%s: %q", file, b)
	}
	if f[0] == "max" {
		return 0, nil
	}
	quota, err1 := strconv.ParseFloat(f[0], 64)
	period, err2 := strconv.ParseFloat(f[1], 64)
	if err := errors.Join(err1, err2); err != nil || quota <= 0 || period <= 0 || math.IsInf(quota, 0) {
		return 0, fmt.Errorf("%s: %q", file, b)
	}
	return quota / period, nil
}

// usageOf reads usage_usec from a cpu.stat.
func usageOf(file string) (µs uint64, err error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			if µs, err = strconv.ParseUint(strings.TrimSpace(v), 10, 64); err != nil {
				return 0, fmt.Errorf("%s: %w", file, err)
			}
			return µs, nil
		}
	}
	return 0, fmt.Errorf("%s: no usage_usec", file)
}
