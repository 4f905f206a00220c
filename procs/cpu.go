package procs

import (
	"bytes"
	"errors"
	"fmt"
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
// (echo calls 64 at a time, 2 CPUs), and with half a CPU to run on two
// threads got fewer calls through than one. /proc/stat
// counts in hundredths of a second: three 50ms ticks on two CPUs read to
// within a seventh of a CPU.
const wholeCPU = 1.0

// cpuReader says, each tick, whether a CPU was spare (many: whether one
// would be, on one thread); forget drops its readings when no decision
// needs them (an idle process need not read /proc/stat twenty times a
// second), or when they were taken with another number of threads.
type cpuReader interface {
	read(now time.Time, many bool) (spareCPU, error)
	forget()
}

// cpuTime reads the idle time of the CPUs the process may run on
// (/proc/stat, the CPUs in its affinity mask) and, under cgroup v2 CPU
// quotas, what each quota from the process's cgroup up to the root left
// unused (cpu.max, cpu.stat): a looser quota shared with busy siblings
// may leave less than a tighter one. On cgroup v1 the quota is not read;
// the runtime's GOMAXPROCS, which Run moves to, does follow it.
type cpuTime struct {
	root    string // "/", or a test's tree
	allowed []bool // by CPU number
	quotas  []quota
	// The last readings, oldest first: what is spare is read over a few
	// ticks, since one tick of /proc/stat is too coarse and too noisy to
	// go by (a pipeline that one thread keeps short of CPU leaves a tenth
	// to a half of a CPU idle, and most of one in a tick now and then).
	readings []reading
}

type quota struct {
	cpus float64
	stat string // the cgroup's cpu.stat
}

type reading struct {
	at          time.Time
	idle, total uint64   // the allowed CPUs' USER_HZ ticks: idle, all
	cpus        int      // the allowed CPUs /proc/stat has a line for
	usage       []uint64 // µs, by quota
	own         uint64   // the process's USER_HZ ticks of CPU
}

// window is how many readings what is spare is read over: three ticks.
const window = 4

// userHZ is the unit of /proc's times: USER_HZ, 100 on every Linux
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
	if c.quotas, err = quotas(root); err != nil {
		return nil, err
	}
	if _, err := c.times(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *cpuTime) forget() { c.readings = c.readings[:0] }

func (c *cpuTime) read(now time.Time, many bool) (spareCPU, error) {
	r, err := c.times()
	if err != nil {
		return spare, err // blind to the machine: as if it did not say
	}
	r.at = now
	if len(c.readings) == window {
		c.readings = append(c.readings[:0], c.readings[1:]...)
	}
	c.readings = append(c.readings, r)
	if len(c.readings) < window {
		return unread, nil
	}
	first := c.readings[0]
	dt := now.Sub(first.at).Seconds()
	if dt <= 0 || r.idle < first.idle || r.total < first.total || r.own < first.own || r.cpus != first.cpus {
		c.readings = append(c.readings[:0], r)
		return unread, nil // a counter that went back: a reading to start from
	}
	if r.total == first.total {
		return spare, errors.New("/proc/stat: the CPUs' times do not move")
	}
	// Idle CPUs, as a share of the ticks the allowed CPUs counted: no
	// clock of this process's own to get wrong.
	free := float64(r.cpus) * float64(r.idle-first.idle) / float64(r.total-first.total)
	for i, q := range c.quotas {
		if r.usage[i] < first.usage[i] {
			c.readings = append(c.readings[:0], r)
			return unread, nil
		}
		free = min(free, q.cpus-float64(r.usage[i]-first.usage[i])/(1e6*dt))
	}
	if many {
		// What one thread would leave: what the process uses beyond one
		// CPU's worth. A little less in truth (one thread still has the
		// runtime's background work and syscalls beside it), which
		// leans towards keeping many.
		free += max(0, float64(r.own-first.own)/(userHZ*dt)-1)
	}
	if free < wholeCPU {
		return busy, nil
	}
	return spare, nil
}

// times reads the allowed CPUs' idle time (iowait included: a CPU waiting
// on a disk runs whatever is ready) and all their time, the quotas'
// cgroups' usage, and the process's own CPU time.
func (c *cpuTime) times() (r reading, err error) {
	stat, err := os.ReadFile(filepath.Join(c.root, "proc/stat"))
	if err != nil {
		return r, err
	}
	for line := range bytes.Lines(stat) {
		rest, ok := bytes.CutPrefix(line, []byte("cpu"))
		if !ok || len(rest) == 0 || rest[0] < '0' || rest[0] > '9' {
			continue // the total line, or another counter
		}
		f := strings.Fields(string(rest))
		if len(f) < 6 {
			return r, fmt.Errorf("/proc/stat: short line %q", line)
		}
		n, err := strconv.Atoi(f[0])
		if err != nil {
			return r, fmt.Errorf("/proc/stat: %w", err)
		}
		if n >= len(c.allowed) || !c.allowed[n] {
			continue
		}
		r.cpus++
		// user nice system idle iowait irq softirq steal; then guest
		// time, counted in user time already.
		for i, s := range f[1:min(len(f), 9)] {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return r, fmt.Errorf("/proc/stat: %w", err)
			}
			r.total += v
			if i == 3 || i == 4 {
				r.idle += v
			}
		}
	}
	if r.cpus == 0 {
		// A /proc/stat that numbers the CPUs its own way (LXCFS).
		return r, errors.New("/proc/stat has none of the CPUs of the affinity list")
	}
	for _, q := range c.quotas {
		u, err := usageOf(q.stat)
		if err != nil {
			return r, err
		}
		r.usage = append(r.usage, u)
	}
	if r.own, err = ownTicks(filepath.Join(c.root, "proc/self/stat")); err != nil {
		return r, err
	}
	return r, nil
}

// ownTicks reads a /proc/PID/stat's user and system time.
func ownTicks(file string) (uint64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: the fields are
	// counted from after it. utime and stime are the 14th and 15th.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("%s: %q", file, b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("%s: %q", file, b)
	}
	var ticks uint64
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", file, err)
		}
		ticks += v
	}
	return ticks, nil
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

// quotas finds, from the process's cgroup v2 up to the root of the
// hierarchy, every CPU quota. A level whose cpu.max cannot be read is
// passed over; one whose quota cannot be followed is an error. No cgroup
// v2: none.
func quotas(root string) ([]quota, error) {
	b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return nil, nil // no cgroups to read: the machine's CPUs alone
	}
	var group string
	found := false
	for line := range strings.Lines(string(b)) {
		if g, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			group, found = g, true
		}
	}
	if !found {
		return nil, nil
	}
	var qs []quota
	mount := filepath.Join(root, "sys/fs/cgroup")
	for dir := path.Clean("/" + group); ; dir = path.Dir(dir) {
		q, err := quotaOf(filepath.Join(mount, dir, "cpu.max"))
		var perr *os.PathError
		switch {
		case errors.As(err, &perr):
			// Not ours to read: the runtime's own number follows it.
		case err != nil:
			return nil, err
		case q > 0:
			stat := filepath.Join(mount, dir, "cpu.stat")
			if _, err := usageOf(stat); err != nil {
				return nil, err
			}
			qs = append(qs, quota{q, stat})
		}
		if dir == "/" {
			break
		}
	}
	return qs, nil
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
	quota, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	period, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	if quota == 0 || period == 0 {
		return 0, fmt.Errorf("%s: %q", file, b)
	}
	return float64(quota) / float64(period), nil
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
