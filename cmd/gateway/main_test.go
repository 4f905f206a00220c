package main

import (
	"testing"

	"github.com/stdiomcp/gateway/internal/gatewaytest"
)

// gatewayBin is the gateway built once for the whole run.
var gatewayBin string

func TestMain(m *testing.M) { gatewaytest.Main(m, &gatewayBin) }

type (
	gateway   = gatewaytest.Gateway
	logRecord = gatewaytest.Record
	received  = gatewaytest.Received
)

func startGateway(t testing.TB, env []string, args ...string) *gateway {
	return gatewaytest.Start(t, gatewayBin, env, args...)
}

var (
	rpc              = gatewaytest.RPC
	rpcJSON          = gatewaytest.RPCJSON
	demoReceived     = gatewaytest.DemoReceived
	demoReceivedArgs = gatewaytest.DemoReceivedArgs
)
