package stdio

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The test binary doubles as every fake child: TestMain runs one of these
// instead of the tests when childEnv names it.
const childEnv = "_STDIO_TEST_CHILD"

var children = map[string]func(args []string){
	// cat echoes each stdin line to stdout and exits at EOF.
	"cat": func([]string) {
		in := bufio.NewReaderSize(os.Stdin, 1<<20)
		for {
			line, err := in.ReadBytes('\n')
			os.Stdout.Write(line)
			if err != nil {
				return
			}
		}
	},
	// lines writes its arguments as stdout lines, separated by "\n", then
	// waits for stdin to close. An argument "big:N" writes a line of N bytes.
	"lines": func(args []string) {
		w := bufio.NewWriter(os.Stdout)
		for _, a := range args {
			if n, ok := strings.CutPrefix(a, "big:"); ok {
				size, _ := strconv.Atoi(n)
				w.WriteString(`{"id":7,"result":"`)
				w.WriteString(strings.Repeat("x", size-len(`{"id":7,"result":""}`)))
				w.WriteString(`"}` + "\n")
				continue
			}
			w.WriteString(a + "\n")
		}
		w.Flush()
		io.Copy(io.Discard, os.Stdin)
	},
	// stderr writes its arguments to stderr and exits.
	"stderr": func(args []string) {
		for _, a := range args {
			fmt.Fprintln(os.Stderr, a)
		}
	},
	// ignore-stdin keeps running after stdin closes, until SIGTERM.
	"ignore-stdin": func([]string) {
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		block()
	},
	// ignore-term survives stdin EOF and SIGTERM; only SIGKILL ends it.
	"ignore-term": func([]string) {
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		block()
	},
	// grandchild starts a sleeper that inherits stdout, prints its pid and
	// exits, leaving the sleeper holding the pipe. With "setsid" the sleeper
	// escapes the process group.
	"grandchild": func(args []string) {
		exe, _ := os.Executable()
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), childEnv+"=sleep")
		cmd.Stdout = os.Stdout
		if len(args) > 0 && args[0] == "setsid" {
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		}
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println(cmd.Process.Pid)
	},
	"sleep": func([]string) { block() },
	// noread never reads stdin.
	"noread": func([]string) {
		fmt.Println("ready")
		block()
	},
	// exit ends at once with the status in its first argument.
	"exit": func(args []string) {
		code, _ := strconv.Atoi(args[0])
		os.Exit(code)
	},
}

// block parks a child for good. A bare select{} would not do: with nothing
// else to run, the Go runtime calls it a deadlock and exits.
func block() { time.Sleep(24 * time.Hour) }

var (
	usedMu sync.Mutex
	used   = map[string]bool{}
)

func TestMain(m *testing.M) {
	if name := os.Getenv(childEnv); name != "" {
		children[name](os.Args[1:])
		os.Exit(0)
	}
	code := m.Run()
	// A child nobody runs any more is dead weight; say so on a full run.
	if code == 0 && !testing.Short() && !strings.Contains(strings.Join(os.Args, " "), "-test.run") {
		for name := range children {
			if !used[name] && name != "sleep" {
				fmt.Fprintf(os.Stderr, "fake child %q is never used\n", name)
				code = 1
			}
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// child returns a Config that runs the named fake child.
func child(t *testing.T, name string, args ...string) Config {
	t.Helper()
	if _, ok := children[name]; !ok {
		t.Fatalf("no fake child %q", name)
	}
	usedMu.Lock()
	used[name] = true
	usedMu.Unlock()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Config{Path: exe, Args: args, Env: append(os.Environ(), childEnv+"="+name)}
}

// start starts a child and makes sure it is stopped when the test ends.
func start(t *testing.T, cfg Config) *Process {
	t.Helper()
	p, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
