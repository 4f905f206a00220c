//go:build !race

package gatewaytest

const raceEnabled = false
