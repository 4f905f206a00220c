package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stdiomcp/gateway/auth"
)

// tokenOutput runs `gateway token` and returns the token and the line it
// printed.
func tokenOutput(t *testing.T, args ...string) (tok, line string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := runToken(args, strings.NewReader(""), &out, &errOut); err != nil {
		t.Fatalf("gateway token %q: %v (stderr %q)", args, err, errOut.String())
	}
	for l := range strings.Lines(out.String()) {
		f := strings.Fields(l)
		switch {
		case len(f) >= 2 && f[0] == "token:":
			tok = f[1]
		case len(f) >= 2 && f[0] == "line:":
			line = f[1]
		}
	}
	if len(tok) != 64 || line == "" {
		t.Fatalf("gateway token printed %q", out.String())
	}
	return tok, line
}

func TestTokenCommandLineAuthenticatesTheToken(t *testing.T) {
	tok, line := tokenOutput(t, "-name", "ci")
	other, _ := tokenOutput(t)
	if tok == other {
		t.Fatal("two runs printed the same token")
	}
	if !strings.HasPrefix(line, "ci:sha256:") || strings.Contains(line, tok) {
		t.Fatalf("line %q", line)
	}
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Options{TokensFile: path})
	if err != nil {
		t.Fatal(err)
	}
	id, err := a.Authenticate(context.Background(), "Bearer "+tok)
	if err != nil || id.Name != "ci" {
		t.Fatalf("the printed token: identity %+v, error %v", id, err)
	}
	if _, err := a.Authenticate(context.Background(), "Bearer "+other); err == nil {
		t.Fatal("another run's token was accepted")
	}

	// -hash converts the token into the same entry.
	var out bytes.Buffer
	if err := runToken([]string{"-hash"}, strings.NewReader(tok+"\n"), &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(out.String()), strings.TrimPrefix(line, "ci:"); got != want {
		t.Fatalf("-hash printed %q, want %q", got, want)
	}
	out.Reset()
	if err := runToken([]string{"-hash", "-name", "ci"}, strings.NewReader(tok), &out, &bytes.Buffer{}); err != nil || strings.TrimSpace(out.String()) != line {
		t.Fatalf("-hash -name ci printed %q, %v; want %q", out.String(), err, line)
	}
}

func TestTokenCommandRefuses(t *testing.T) {
	for _, args := range [][]string{{"-nope"}, {"extra"}, {"-name", "bad name"}, {"-name"}} {
		var errOut bytes.Buffer
		if err := runToken(args, strings.NewReader(""), &bytes.Buffer{}, &errOut); !errors.Is(err, errUsage) {
			t.Errorf("gateway token %q: %v, want errUsage", args, err)
		}
	}
	for _, tc := range []struct{ stdin, want string }{
		{"", "no token on stdin"},
		{"\n", "no token on stdin"},
		{"SECRET-short\n", "at least 16"},
		{"SECRET with spaces-0123\n", "cannot carry"},
		{strings.Repeat("A", 9<<10), "longer than"},
	} {
		var out bytes.Buffer
		err := runToken([]string{"-hash"}, strings.NewReader(tc.stdin), &out, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "SECRET") || out.Len() > 0 {
			t.Errorf("-hash of %.20q: %v, printed %q; want an error containing %q", tc.stdin, err, out.String(), tc.want)
		}
	}
}
