package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Every curl command in the README's sh blocks runs against the gateway
// binary with the demo child, and answers with the status its example
// documents: 2xx, unless a "# expect: NNN" comment above it says
// otherwise. A block after "<!-- not run: why -->" is skipped; one after
// "<!-- gateway env: NAME=value ... -->" runs against a gateway started
// with those settings. It needs bash and curl 7.82 or later (--json).
func TestReadmeExamples(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			// As the interop tests: CI (GATEWAY_REQUIRE_INTEROP) has it.
			if os.Getenv("GATEWAY_REQUIRE_INTEROP") != "" {
				t.Fatalf("the README's examples need %s: %v", tool, err)
			}
			t.Skipf("the README's examples need %s: %v", tool, err)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	examples, err := curlExamples(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	byEnv := map[string][]curlExample{}
	var envs []string // in the README's order
	run := 0
	for _, ex := range examples {
		if ex.skip != "" {
			continue
		}
		if _, ok := byEnv[ex.env]; !ok {
			envs = append(envs, ex.env)
		}
		byEnv[ex.env] = append(byEnv[ex.env], ex)
		run++
	}
	// The REST section alone has more; a parser that finds none must fail.
	if run < 15 {
		t.Fatalf("found %d runnable curl commands in README.md, want at least 15", run)
	}
	for _, env := range envs {
		name := env
		if name == "" {
			name = "defaults"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			g := startGateway(t, strings.Fields(env))
			g.WaitReady()
			addr := strings.TrimPrefix(g.URL, "http://")
			for _, ex := range byEnv[env] {
				t.Run(fmt.Sprintf("line %d", ex.line), func(t *testing.T) {
					runCurl(t, ex, addr)
				})
			}
		})
	}
}

// curlExample is one curl command of the README.
type curlExample struct {
	line    int    // where it starts in README.md
	command string // continuation lines joined
	expect  int    // the status documented; 0: any 2xx
	skip    string // why the block is not run
	env     string // the gateway's settings for the block
}

var (
	notRunMark = regexp.MustCompile(`^<!-- not run: (.+) -->$`)
	envMark    = regexp.MustCompile(`^<!-- gateway env: (.+) -->$`)
	expectMark = regexp.MustCompile(`^#\s*expect:\s*(\d{3})\b`)
	curlWord   = regexp.MustCompile(`(^|[\s;&|(])curl\s`)
)

// curlExamples finds the curl commands in markdown's sh blocks, with what
// the comments around them say.
func curlExamples(markdown string) ([]curlExample, error) {
	var out []curlExample
	lines := strings.Split(markdown, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```sh" {
			continue
		}
		var skip, env string
		if i > 0 {
			mark := strings.TrimSpace(lines[i-1])
			if m := notRunMark.FindStringSubmatch(mark); m != nil {
				skip = m[1]
			}
			if m := envMark.FindStringSubmatch(mark); m != nil {
				env = m[1]
			}
		}
		expect, found := 0, 0
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			start := i
			cmd := strings.TrimSpace(lines[i])
			for strings.HasSuffix(cmd, `\`) && i+1 < len(lines) {
				i++
				cmd = strings.TrimSuffix(cmd, `\`) + " " + strings.TrimSpace(lines[i])
			}
			if m := expectMark.FindStringSubmatch(cmd); m != nil {
				expect, _ = strconv.Atoi(m[1])
				continue
			}
			if strings.HasPrefix(cmd, "#") || !curlWord.MatchString(cmd) {
				continue
			}
			out = append(out, curlExample{line: start + 1, command: cmd, expect: expect, skip: skip, env: env})
			expect = 0
			found++
		}
		if i == len(lines) {
			return nil, fmt.Errorf("README.md: an sh block is not closed")
		}
		if skip != "" && found == 0 {
			return nil, fmt.Errorf("README.md line %d: a block marked not run has no curl command", i)
		}
	}
	return out, nil
}

// statusLine is what runCurl has curl write to stderr after each transfer.
var statusLine = regexp.MustCompile(`(?m)^readme-test-status (\d{3})$`)

// runCurl runs one example with bash against the gateway at addr, and
// checks its exit status and each transfer's HTTP status.
func runCurl(t *testing.T, ex curlExample, addr string) {
	t.Helper()
	cmd := strings.NewReplacer("localhost:8080", addr, "127.0.0.1:8080", addr).Replace(ex.command)
	// Bounded, quiet but for errors, and each status on stderr, where a
	// pipe after curl cannot take it; the example's own options come
	// after these, so they win.
	loc := curlWord.FindStringIndex(cmd)
	at := loc[1] - 1
	cmd = cmd[:at] + ` -sS --max-time 30 -w '%{stderr}readme-test-status %{http_code}\n'` + cmd[at:]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", cmd)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	report := fmt.Sprintf("README.md line %d: %s\nstdout: %.2000s\nstderr: %.2000s", ex.line, cmd, stdout.String(), stderr.String())
	if err != nil {
		t.Fatalf("%v\n%s", err, report)
	}
	statuses := statusLine.FindAllStringSubmatch(stderr.String(), -1)
	if len(statuses) == 0 {
		t.Fatalf("no status (does the example set its own -w?)\n%s", report)
	}
	for _, m := range statuses {
		got, _ := strconv.Atoi(m[1])
		if ex.expect == 0 && (got < 200 || got > 299) || ex.expect != 0 && got != ex.expect {
			want := "2xx"
			if ex.expect != 0 {
				want = strconv.Itoa(ex.expect)
			}
			t.Errorf("status %d, want %s\n%s", got, want, report)
		}
	}
}
