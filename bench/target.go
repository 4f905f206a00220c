// Command bench measures what a gateway adds to a stdio MCP server: the
// gateway beside the floors (a bare HTTP handler with no child; a bare
// relay of each call to the child and back; the child alone over stdio, no
// HTTP) and beside other gateways (supergateway, mcp-proxy) fronting the
// same child, under one load client. See BENCHMARKS.md at the repository's
// root for what it measured.
package main

import (
	"context"
	"os/exec"
)

// A target is one server under test: how to start it on a port in front of
// the echo child, and how a client calls it.
type target struct {
	name string
	// command is the server on 127.0.0.1:port with child (argv) as its
	// stdio child, when it has one, not yet started: startServer starts
	// it, keeping the end of its stderr, and waits for the port; the suite
	// measures the process tree from its pid, and stops it.
	command func(ctx context.Context, port int, child []string) *exec.Cmd
	// dial makes a client of the server at base (http://127.0.0.1:port):
	// it does what a session or handshake needs, once.
	dial func(ctx context.Context, base string) (caller, error)
}

// A caller makes echo calls on one target. Call sends text to the echo
// tool and checks the answer carries it back. Callers are used from many
// goroutines at once.
type caller interface {
	Call(ctx context.Context, text string) error
	Close() error
}
