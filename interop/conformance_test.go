package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// The official conformance suite, run through the gateway with the demo
// child in each era, for both requirement sets. Every scored scenario must
// pass; the scenarios a requirement set does not score (the tasks
// extension, pending ones) are run and reported in the log.
func TestConformance(t *testing.T) {
	nodeBin := node(t)
	suite := npmPackage(t, "@modelcontextprotocol/conformance/dist/index.js")
	for _, requirements := range []string{"2026-07-28", "2025-11-25"} {
		for _, era := range []string{"legacy", "modern"} {
			t.Run(requirements+"/"+era+"-child", func(t *testing.T) {
				t.Parallel()
				scored := scoredScenarios(t, requirements)
				g := startGateway(t, nil, "--", gatewayBin, "demo", "-era", era)
				out := t.TempDir()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, nodeBin, suite, "server", "--url", g.URL+"/mcp", "--requirements", requirements, "-o", out)
				report, err := cmd.CombinedOutput()
				if ctx.Err() != nil {
					t.Fatalf("the suite did not finish: %v\n%s", ctx.Err(), report)
				}
				_ = err // the suite exits non-zero for unscored failures too; the checks decide
				results := readChecks(t, out)
				var failed []string
				for _, name := range scored {
					checks, ran := results[name]
					if !ran {
						failed = append(failed, name+": did not run")
						continue
					}
					for _, c := range checks {
						if c.Status == "FAILURE" {
							failed = append(failed, name+": "+c.ID+": "+c.ErrorMessage)
						}
					}
				}
				var unscored []string
				for name, checks := range results {
					if contains(scored, name) {
						continue
					}
					for _, c := range checks {
						if c.Status == "FAILURE" {
							unscored = append(unscored, name)
							break
						}
					}
				}
				sort.Strings(unscored)
				t.Logf("%d scored scenarios, %d failing; not scored and failing: %v", len(scored), len(failed), unscored)
				for _, f := range failed {
					t.Errorf("scored scenario failed: %s", f)
				}
				if t.Failed() {
					t.Logf("suite output:\n%s", report)
				}
			})
		}
	}
}

type check struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

var resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T`)

// readChecks reads the suite's results: one directory per scenario run.
func readChecks(t *testing.T, out string) map[string][]check {
	t.Helper()
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	results := map[string][]check{}
	for _, e := range entries {
		m := resultDir.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(out, e.Name(), "checks.json"))
		if err != nil {
			t.Fatal(err)
		}
		var checks []check
		if err := json.Unmarshal(raw, &checks); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		results[m[1]] = append(results[m[1]], checks...)
	}
	return results
}

// scoredScenarios lists the server scenarios a requirement set scores,
// from the suite's own requirements file.
func scoredScenarios(t *testing.T, requirements string) []string {
	t.Helper()
	f, err := os.Open(npmPackage(t, "@modelcontextprotocol/conformance/requirements/"+requirements+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var scenarios []string
	inServer := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "server:":
			inServer = true
		case inServer && strings.HasPrefix(line, "  - "):
			scenarios = append(scenarios, strings.TrimSpace(strings.TrimPrefix(line, "  - ")))
		case inServer && strings.TrimSpace(line) != "":
			inServer = false
		}
	}
	if len(scenarios) == 0 {
		t.Fatalf("no server scenarios in the %s requirements", requirements)
	}
	return scenarios
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
