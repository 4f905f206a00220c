package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// The official conformance suite, run through the gateway with the demo
// child in each era, for both requirement sets. Every scenario the suite
// runs must pass, the ones a requirement set does not score (the tasks
// extension, pending ones) included, with one exception: a legacy child
// speaks 2025, where the 2026 extensions do not exist, so with it the
// extension scenarios are run and reported but not required.
func TestConformance(t *testing.T) {
	nodeBin := node(t)
	suite := npmPackage(t, "@modelcontextprotocol/conformance/dist/index.js")
	for _, requirements := range []string{"2026-07-28", "2025-11-25"} {
		for _, era := range []string{"legacy", "modern"} {
			t.Run(requirements+"/"+era+"-child", func(t *testing.T) {
				t.Parallel()
				req := readRequirements(t, requirements)
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
				for _, name := range slices.Concat(req.scored, req.unscoredNames()) {
					if _, ran := results[name]; !ran {
						failed = append(failed, name+": did not run")
					}
				}
				var names, skipped, failing, reported []string
				for name := range results {
					names = append(names, name)
				}
				sort.Strings(names)
				for _, name := range names {
					excused := era == "legacy" && req.unscored[name] == "extension"
					fails, allSkipped := 0, true
					for _, c := range results[name] {
						if c.Status == "FAILURE" {
							fails++
							if !excused {
								failed = append(failed, name+": "+c.ID+": "+c.ErrorMessage)
							}
						}
						allSkipped = allSkipped && c.Status == "SKIPPED"
					}
					switch {
					case fails > 0 && excused:
						reported = append(reported, name)
					case fails > 0:
						failing = append(failing, name)
					}
					if allSkipped {
						skipped = append(skipped, name)
					}
				}
				t.Logf("%s requirements, %s child: %d scenarios run (%d scored), %d pass; required and failing: %v; skipped by the suite itself: %v",
					requirements, era, len(names), len(req.scored), len(names)-len(failing)-len(reported), failing, skipped)
				if len(reported) > 0 {
					t.Logf("not required of a legacy child (2026 extensions) and failing: %v", reported)
				}
				for _, f := range failed {
					t.Errorf("scenario failed: %s", f)
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

// requirementSet is what a requirement set says of the server scenarios:
// the ones it scores, and the ones it runs without scoring, with the
// reason (extension, pending, added-after-release).
type requirementSet struct {
	scored   []string
	unscored map[string]string
}

func (r requirementSet) unscoredNames() []string {
	var names []string
	for name := range r.unscored {
		names = append(names, name)
	}
	return names
}

// readRequirements reads the suite's own requirements file for a set.
func readRequirements(t *testing.T, set string) requirementSet {
	t.Helper()
	f, err := os.Open(npmPackage(t, "@modelcontextprotocol/conformance/requirements/"+set+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	req := requirementSet{unscored: map[string]string{}}
	section := ""
	var entry struct{ scenario, leg, reason string }
	flush := func() {
		if entry.leg == "server" {
			req.unscored[entry.scenario] = entry.reason
		}
		entry.scenario, entry.leg, entry.reason = "", "", ""
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line != "" && line[0] != ' ' && line[0] != '#':
			flush()
			section = strings.TrimSuffix(line, ":")
		case section == "server" && strings.HasPrefix(line, "  - "):
			req.scored = append(req.scored, strings.TrimSpace(strings.TrimPrefix(line, "  - ")))
		case section == "not_scored" && strings.HasPrefix(line, "  - scenario: "):
			flush()
			entry.scenario = strings.TrimSpace(strings.TrimPrefix(line, "  - scenario: "))
		case section == "not_scored" && strings.HasPrefix(line, "    leg: "):
			entry.leg = strings.TrimSpace(strings.TrimPrefix(line, "    leg: "))
		case section == "not_scored" && strings.HasPrefix(line, "    reason: "):
			entry.reason = strings.TrimSpace(strings.TrimPrefix(line, "    reason: "))
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(req.scored) == 0 {
		t.Fatalf("no server scenarios in the %s requirements", set)
	}
	return req
}
