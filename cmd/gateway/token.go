package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/stdiomcp/gateway/auth"
)

// runToken is `gateway token`: it makes a static token and the entry for
// GATEWAY_AUTH_TOKENS_FILE that holds only the token's SHA-256, so the file
// gives whoever reads it (the child runs as the gateway's user) nothing to
// call the gateway with. With -hash it converts an existing token, read
// from stdin so that it appears in no process list or shell history.
func runToken(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("gateway token", flag.ContinueOnError)
	flags.SetOutput(stderr)
	name := flags.String("name", "", "the token's name in logs, metrics and the policy file (default: derived from its hash)")
	hash := flags.Bool("hash", false, "read a token from stdin and print its entry instead of making one")
	if err := flags.Parse(args); err != nil {
		return errUsage
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "gateway token: unexpected argument %q\n", flags.Arg(0))
		return errUsage
	}
	if *hash {
		tok, err := readToken(stdin)
		if err != nil {
			return fmt.Errorf("token: %w", err)
		}
		line, err := auth.HashToken(*name, tok)
		if err != nil {
			return fmt.Errorf("token: %w", err)
		}
		fmt.Fprintln(stdout, line)
		return nil
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("token: %w", err)
	}
	tok := hex.EncodeToString(b[:])
	line, err := auth.HashToken(*name, tok)
	if err != nil {
		// Only the name can be wrong here.
		fmt.Fprintf(stderr, "gateway token: -name: %v\n", err)
		return errUsage
	}
	fmt.Fprintf(stdout, "token: %s   (give this to the client; it is not stored anywhere)\n", tok)
	fmt.Fprintf(stdout, "line:  %s   (put this in GATEWAY_AUTH_TOKENS_FILE)\n", line)
	return nil
}

// readToken reads one line, bounded: a token is a few KiB at most.
func readToken(r io.Reader) (string, error) {
	const limit = 8 << 10
	line, err := bufio.NewReaderSize(io.LimitReader(r, limit+1), limit+1).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the token from stdin: %w", err)
	}
	if len(line) > limit {
		return "", fmt.Errorf("the line on stdin is longer than %d bytes", limit)
	}
	tok := strings.TrimSpace(line)
	if tok == "" {
		return "", errors.New("no token on stdin")
	}
	return tok, nil
}
