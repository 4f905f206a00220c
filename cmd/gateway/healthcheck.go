package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/kelseyhightower/envconfig"
)

// healthcheck is `gateway healthcheck`, the container image's HEALTHCHECK,
// which has no curl to call. It asks the liveness route, not /readyz: a
// draining gateway answers 503 there by design, and draining is no fault.
// It returns nil on 200 and otherwise an error of one line, which main
// prints before exiting 1.
func healthcheck(ctx context.Context, args []string, stderr io.Writer) error {
	flags := flag.NewFlagSet("gateway healthcheck", flag.ContinueOnError)
	flags.SetOutput(stderr)
	timeout := flags.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := flags.Parse(args); err != nil {
		return errUsage
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "gateway healthcheck: unexpected argument %q\n", flags.Arg(0))
		return errUsage
	}
	// The same variables and defaults as the gateway it checks, which runs
	// in the same environment.
	var cfg Config
	if err := envconfig.Process(envPrefix, &cfg); err != nil {
		return fmt.Errorf("healthcheck: configuration: %w", err)
	}
	url, err := healthURL(cfg.Addr)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	// A proxy from the environment must not stand between the check and
	// the gateway beside it.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: GET %s: %s", url, resp.Status)
	}
	return nil
}

// healthURL is the address of /healthz for a gateway listening on addr. A
// gateway that listens on every interface (no host, 0.0.0.0, [::]) is
// reached on loopback.
func healthURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("GATEWAY_ADDR %q: %w", addr, err)
	}
	if port == "" {
		return "", fmt.Errorf("GATEWAY_ADDR %q has no port", addr)
	}
	switch ip := net.ParseIP(host); {
	case host == "", ip != nil && ip.Equal(net.IPv4zero):
		host = "127.0.0.1"
	case ip != nil && ip.IsUnspecified():
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}
