package main

import (
	"fmt"
	"net/http"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/stdiomcp/gateway/internal/gatewaytest"
)

// gatewayBin is the gateway built once for the whole run.
var gatewayBin string

func TestMain(m *testing.M) {
	gatewaytest.Child()
	dir, err := os.MkdirTemp("", "gateway-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if gatewayBin, err = gatewaytest.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		// Idle keep-alive connections of the shared client are not leaks.
		http.DefaultClient.CloseIdleConnections()
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

type (
	gateway   = gatewaytest.Gateway
	logRecord = gatewaytest.Record
)

func startGateway(t testing.TB, env []string, args ...string) *gateway {
	return gatewaytest.Start(t, gatewayBin, env, args...)
}

func startWithChild(t testing.TB, child string, env ...string) *gateway {
	childEnv, args := gatewaytest.ChildCommand(t, child)
	return startGateway(t, append(childEnv, env...), args...)
}

var (
	rpc          = gatewaytest.RPC
	rpcJSON      = gatewaytest.RPCJSON
	demoReceived = gatewaytest.DemoReceived
)
