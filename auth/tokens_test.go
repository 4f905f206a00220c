package auth_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stdiomcp/gateway/auth"
)

func TestStaticTokens(t *testing.T) {
	a, err := auth.New(auth.Options{Tokens: []string{"ci:s3cret-ci-token-0", "plain-token_0123"}})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Enabled() || a.Tokens() != 2 {
		t.Fatalf("Enabled %v Tokens %d", a.Enabled(), a.Tokens())
	}
	sum := sha256.Sum256([]byte("plain-token_0123"))
	for _, tc := range []struct {
		header, name string
		status       int
		code, reason string
	}{
		{"Bearer s3cret-ci-token-0", "ci", 0, "", ""},
		{"BEARER s3cret-ci-token-0", "ci", 0, "", ""},
		{"Bearer   s3cret-ci-token-0", "ci", 0, "", ""},
		{"Bearer plain-token_0123", "token-" + hex.EncodeToString(sum[:])[:8], 0, "", ""},
		{"", "", 401, "", "missing"},
		{"Bearer s3cret-ci-tokeN", "", 401, "invalid_token", "unknown_token"},
		{"Bearer s3cret-ci-token-0-and-more", "", 401, "invalid_token", "unknown_token"},
		{"Bearer ci:s3cret-ci-token-0", "", 400, "invalid_request", "malformed"},
		{"Token s3cret-ci-token-0", "", 401, "", "scheme"},
		{"Bearers3cret-ci-token-0", "", 401, "", "scheme"},
		{"Bearer s3cret-ci-token-0 s3cret-ci-token-0", "", 400, "invalid_request", "malformed"},
		{"Bearer s3cret-ci-token-0,other", "", 400, "invalid_request", "malformed"},
		{"Bearer " + strings.Repeat("A", 70<<10), "", 401, "invalid_token", "unknown_token"}, // no bound but the server's on headers
	} {
		id, e := authErr(t, a, tc.header)
		if tc.status == 0 {
			if e != nil || id.Name != tc.name || id.Kind != "token" || id.Scopes != nil || !id.Rules.Unrestricted() {
				t.Errorf("%.40q: identity %+v, error %v; want name %q", tc.header, id, e, tc.name)
			}
			continue
		}
		if e == nil {
			t.Errorf("%.40q accepted as %+v", tc.header, id)
			continue
		}
		if e.Status != tc.status || e.Code != tc.code || e.Reason != tc.reason {
			t.Errorf("%.40q: %d %q %q (%s), want %d %q %q", tc.header, e.Status, e.Code, e.Reason, e.Description, tc.status, tc.code, tc.reason)
		}
		if strings.Contains(e.Description, "s3cret") {
			t.Errorf("the description repeats the credential: %q", e.Description)
		}
	}
}

func TestNewRefusesBadTokens(t *testing.T) {
	dir := t.TempDir()
	n := 0
	file := func(content string) string {
		n++
		p := filepath.Join(dir, fmt.Sprintf("file%d", n))
		writeFile(t, p, content)
		return p
	}
	for _, tc := range []struct {
		name string
		opts auth.Options
		want string
	}{
		{"empty entry", auth.Options{Tokens: []string{"a:tok-0123456789ab-aaaa", ""}}, "entry 2: an empty token"},
		{"empty token after name", auth.Options{Tokens: []string{"a:"}}, "an empty token"},
		{"short token", auth.Options{Tokens: []string{"a:REPLACE-ME"}}, "it needs at least 16"},
		{"bad name", auth.Options{Tokens: []string{"bad name:tok-0123456789ab-aaaa-SECRET"}}, "not a token name"},
		{"duplicate name", auth.Options{Tokens: []string{"a:tok-0123456789ab-1111", "a:tok-0123456789ab-2222"}}, `"a" is used twice`},
		{"duplicate token", auth.Options{Tokens: []string{"a:tok-0123456789ab-SECRET", "b:tok-0123456789ab-SECRET"}}, "listed twice"},
		{"duplicate across env and file", auth.Options{Tokens: []string{"a:tok-0123456789ab-SECRET"}, TokensFile: file("b:tok-0123456789ab-SECRET\n")}, "line 1: the same token is listed twice"},
		{"character a header cannot carry", auth.Options{Tokens: []string{"a:tok SECRET"}}, "cannot carry"},
		{"file line", auth.Options{TokensFile: file("# comment\n\nok:tok-0123456789ab-1\n bad!:tok-0123456789ab-SECRET\n")}, "line 4: the part before ':'"},
		{"missing file", auth.Options{TokensFile: filepath.Join(dir, "absent")}, "no such file"},
		{"policy without credentials", auth.Options{PolicyFile: file(`{}`)}, "needs callers to apply to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := auth.New(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Fatalf("the error repeats a token: %v", err)
			}
		})
	}
}

func TestNoAuthenticationConfigured(t *testing.T) {
	a, err := auth.New(auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := a.Authenticate(context.Background(), "")
	if a.Enabled() || err != nil || !id.Rules.Unrestricted() || id.Kind != "none" {
		t.Fatalf("Enabled %v, identity %+v, error %v", a.Enabled(), id, err)
	}
}

func TestReloadRevokesAndKeepsOnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "alpha:tok-0123456789ab-alpha\nbeta:tok-0123456789ab-beta\n")
	a, err := auth.New(auth.Options{TokensFile: path, Tokens: []string{"env:tok-0123456789ab-env"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, e := authErr(t, a, "Bearer tok-0123456789ab-beta"); e != nil {
		t.Fatal(e)
	}
	writeFile(t, path, "alpha:tok-0123456789ab-alpha\n")
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, e := authErr(t, a, "Bearer tok-0123456789ab-beta"); e == nil || e.Reason != "unknown_token" {
		t.Fatalf("revoked token: %+v", e)
	}
	if a.Tokens() != 2 {
		t.Fatalf("Tokens %d, want 2 (one from the file, one from the environment)", a.Tokens())
	}

	// A broken file keeps the previous set in force.
	writeFile(t, path, "alpha:tok-0123456789ab-alpha\nalpha:tok-0123456789ab-again\n")
	if err := a.Reload(); err == nil || !strings.Contains(err.Error(), "used twice") {
		t.Fatalf("Reload of a broken file: %v", err)
	}
	for _, tok := range []string{"tok-0123456789ab-alpha", "tok-0123456789ab-env"} {
		if _, e := authErr(t, a, "Bearer "+tok); e != nil {
			t.Fatalf("%s after a failed reload: %+v", tok, e)
		}
	}
	if _, e := authErr(t, a, "Bearer tok-0123456789ab-again"); e == nil {
		t.Fatal("a token from the refused file was accepted")
	}
}

// TestRunPollsTheFiles: Run notices a new file (a new inode, as a Secret
// mount's symlink swap gives), and a touch with the same content does not
// reload. OnReload is the event the test waits for.
func TestRunPollsTheFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	writeFile(t, path, "alpha:tok-0123456789ab-alpha\nbeta:tok-0123456789ab-beta\n")
	reloads := make(chan error, 10)
	a, err := auth.New(auth.Options{
		TokensFile: path,
		Poll:       5 * time.Millisecond,
		OnReload:   func(err error) { reloads <- err },
	})
	if err != nil {
		t.Fatal(err)
	}
	wait := polling(t, a, reloads)

	// Same content under a new inode: no reload; then a real change: one.
	writeFile(t, path, "alpha:tok-0123456789ab-alpha\nbeta:tok-0123456789ab-beta\n")
	writeFile(t, path, "alpha:tok-0123456789ab-alpha\n")
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if _, e := authErr(t, a, "Bearer tok-0123456789ab-beta"); e == nil {
		t.Fatal("the revoked token still works after the poll reloaded")
	}
	if a.Tokens() != 1 {
		t.Fatalf("Tokens %d after the reload", a.Tokens())
	}
	// A broken file is reported once and the set stays.
	writeFile(t, path, "alpha:tok-0123456789ab-alpha\n bad name:x\n")
	if err := wait(); err == nil {
		t.Fatal("a broken file reloaded without error")
	}
	writeFile(t, path, "gamma:tok-0123456789ab-gamma\n")
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if _, e := authErr(t, a, "Bearer tok-0123456789ab-gamma"); e != nil {
		t.Fatal(e)
	}
	select {
	case err := <-reloads:
		t.Fatalf("an extra reload (%v): the unchanged rewrite or the broken file was reloaded twice", err)
	default:
	}
}

// TestReloadUnderLoad: callers authenticate while the set is replaced; a
// token present in every version never fails, and -race checks the rest.
func TestReloadUnderLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "keep:tok-0123456789ab-keep\n")
	a, err := auth.New(auth.Options{TokensFile: path})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				id, err := a.Authenticate(context.Background(), "Bearer tok-0123456789ab-keep")
				if err != nil || id.Name != "keep" {
					errs <- fmt.Sprintf("identity %+v, error %v", id, err)
					return
				}
				a.Authenticate(context.Background(), "Bearer tok-0123456789ab-other")
			}
		})
	}
	for i := range 100 {
		content := "keep:tok-0123456789ab-keep\n"
		if i%2 == 0 {
			content += "other:tok-0123456789ab-other\n"
		}
		writeFile(t, path, content)
		if err := a.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("a token in every version failed: %s", e)
	}
}

func digestOf(token string) string {
	d := sha256.Sum256([]byte(token))
	return hex.EncodeToString(d[:])
}

// TestHashedTokens: an entry may hold the token's SHA-256 instead of the
// token, in the environment and in the file, named or not, in either letter
// case; the presented token is what authenticates.
func TestHashedTokens(t *testing.T) {
	const ci, file, upper, plain = "tok-0123456789ab-ci", "tok-0123456789ab-file", "tok-0123456789ab-upper", "tok-0123456789ab-plain"
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "# digests only\nsha256:"+digestOf(file)+"\nup:SHA256:"+strings.ToUpper(digestOf(upper))+"\n")
	a, err := auth.New(auth.Options{
		Tokens:     []string{"ci:sha256:" + digestOf(ci), plain},
		TokensFile: path,
	})
	if err != nil {
		t.Fatal(err)
	}
	if a.Tokens() != 4 {
		t.Fatalf("Tokens %d, want 4", a.Tokens())
	}
	for tok, name := range map[string]string{
		ci:    "ci",
		file:  "token-" + digestOf(file)[:8], // the name a plain entry of the same token gets
		upper: "up",
		plain: "token-" + digestOf(plain)[:8],
	} {
		if id, e := authErr(t, a, "Bearer "+tok); e != nil || id.Name != name || id.Kind != "token" {
			t.Errorf("%s: identity %+v, error %v; want name %q", tok, id, e, name)
		}
	}
	// The digest itself is no credential.
	for _, h := range []string{"Bearer " + digestOf(ci), "Bearer sha256:" + digestOf(ci)} {
		if _, e := authErr(t, a, h); e == nil {
			t.Errorf("%.30s... was accepted", h)
		}
	}
}

func TestHashedTokensRefused(t *testing.T) {
	const secret = "ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab1" // 63 digits
	for _, tc := range []struct {
		name  string
		entry []string
		want  string
	}{
		{"too short", []string{"sha256:" + secret}, "64 hex digits"},
		{"too long", []string{"ci:sha256:" + secret + "00"}, "64 hex digits"},
		{"not hex", []string{"ci:sha256:" + secret + "g"}, "64 hex digits"},
		{"empty", []string{"ci:sha256:"}, "64 hex digits"},
		{"the name sha256 is reserved", []string{"SHA256:" + secret + "0-plain-token"}, "64 hex digits"},
		// They would share the metrics' caller label with others.
		{"the name jwt is reserved", []string{"jwt:tok-0123456789ab-SECRET"}, `"jwt" is reserved`},
		{"the name anonymous is reserved", []string{"Anonymous:tok-0123456789ab-SECRET"}, `"Anonymous" is reserved`},
		{"the same token plain and hashed", []string{"a:tok-0123456789ab-SECRET", "b:sha256:" + digestOf("tok-0123456789ab-SECRET")}, "entry 2: the same token is listed twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := auth.New(auth.Options{Tokens: tc.entry})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret[:16]) || strings.Contains(err.Error(), "SECRET") {
				t.Fatalf("the error repeats the entry: %v", err)
			}
		})
	}
}

func TestHashToken(t *testing.T) {
	const tok = "tok-0123456789ab-hash"
	line, err := auth.HashToken("ci", tok)
	if err != nil || line != "ci:sha256:"+digestOf(tok) {
		t.Fatalf("HashToken = %q, %v", line, err)
	}
	if line, err := auth.HashToken("", tok); err != nil || line != "sha256:"+digestOf(tok) {
		t.Fatalf("HashToken without a name = %q, %v", line, err)
	}
	a, err := auth.New(auth.Options{Tokens: []string{line}})
	if err != nil {
		t.Fatal(err)
	}
	if id, e := authErr(t, a, "Bearer "+tok); e != nil || id.Name != "ci" {
		t.Fatalf("identity %+v, error %v", id, e)
	}
	for _, tc := range []struct{ name, token, want string }{
		{"ci", "SECRET-short", "at least 16"},
		{"ci", "SECRET with space-0123", "cannot carry"},
		{"bad name", "tok-0123456789ab-SECRET", "token name"},
		{"Sha256", "tok-0123456789ab-SECRET", "token name"},
		{"jwt", "tok-0123456789ab-SECRET", "token name"},
	} {
		if _, err := auth.HashToken(tc.name, tc.token); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("HashToken(%q, ...): %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// count returns how many records of the level have a message that contains
// msg.
func (r *records) count(level slog.Level, msg string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.list {
		if rec.Level == level && strings.Contains(rec.Message, msg) {
			n++
		}
	}
	return n
}

// TestReloadOfAMissingTokensFile: a tokens file that is gone holds no
// tokens; the environment's stay.
func TestReloadOfAMissingTokensFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "alpha:tok-0123456789ab-alpha\n")
	logs := &records{}
	a, err := auth.New(auth.Options{TokensFile: path, Tokens: []string{"env:tok-0123456789ab-env"}, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err != nil {
		t.Fatalf("Reload with the file gone: %v", err)
	}
	if _, e := authErr(t, a, "Bearer tok-0123456789ab-alpha"); e == nil || e.Reason != "unknown_token" {
		t.Fatalf("a token of the deleted file: %+v", e)
	}
	if _, e := authErr(t, a, "Bearer tok-0123456789ab-env"); e != nil || a.Tokens() != 1 {
		t.Fatalf("the environment's token: %+v, Tokens %d", e, a.Tokens())
	}
	if logs.count(slog.LevelWarn, "the tokens file is gone") != 1 {
		t.Error("no warning that the tokens file is gone")
	}
	writeFile(t, path, "alpha:tok-0123456789ab-alpha\n")
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, e := authErr(t, a, "Bearer tok-0123456789ab-alpha"); e != nil {
		t.Fatalf("the file is back, its token is not: %+v", e)
	}
}

// TestRunPollsAMissingAndABrokenFile: polling treats a deleted file as
// empty, and keeps the set through a broken file, with an error for each
// broken version.
func TestRunPollsAMissingAndABrokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "alpha:tok-0123456789ab-alpha\n")
	logs := &records{}
	reloads := make(chan error, 10)
	a, err := auth.New(auth.Options{
		TokensFile: path,
		Poll:       5 * time.Millisecond,
		Logger:     slog.New(logs),
		OnReload:   func(err error) { reloads <- err },
	})
	if err != nil {
		t.Fatal(err)
	}
	wait := polling(t, a, reloads)

	for i, broken := range []string{"alpha:tok-0123456789ab-alpha\nbad name:x\n", "alpha:short\n"} {
		writeFile(t, path, broken)
		if err := wait(); err == nil {
			t.Fatal("a broken file reloaded without error")
		}
		if _, e := authErr(t, a, "Bearer tok-0123456789ab-alpha"); e != nil {
			t.Fatalf("the previous set did not stay: %+v", e)
		}
		if n := logs.count(slog.LevelError, "reload failed"); n != i+1 {
			t.Fatalf("%d errors logged after %d broken versions", n, i+1)
		}
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if _, e := authErr(t, a, "Bearer tok-0123456789ab-alpha"); e == nil {
		t.Fatal("a token of the deleted file still works")
	}
	if logs.count(slog.LevelWarn, "the tokens file is gone") != 1 {
		t.Error("no warning that the tokens file is gone")
	}

	writeFile(t, path, "beta:tok-0123456789ab-beta\n")
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if _, e := authErr(t, a, "Bearer tok-0123456789ab-beta"); e != nil {
		t.Fatal(e)
	}
	select {
	case err := <-reloads:
		t.Fatalf("an extra reload (%v)", err)
	default:
	}
	if logs.count(slog.LevelWarn, "the tokens file is gone") != 1 {
		t.Error("the warning was repeated while the file stayed gone")
	}
}

// Changed is closed by a reload that succeeds, and only by one.
func TestChangedOnReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("a:tok-0123456789ab-aaaa\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Options{TokensFile: path})
	if err != nil {
		t.Fatal(err)
	}
	first := a.Changed()
	if err := os.WriteFile(path, []byte("a:tok-0123456789ab-aaaa\nb:"), 0o600); err != nil {
		t.Fatal(err)
	}
	if a.Reload() == nil {
		t.Fatal("a broken file reloaded")
	}
	select {
	case <-first:
		t.Fatal("a failed reload signalled a change")
	default:
	}
	if err := os.WriteFile(path, []byte("b:tok-0123456789ab-bbbb\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first:
	default:
		t.Fatal("a reload did not signal the change")
	}
	if a.Changed() == first {
		t.Error("the next change has the same channel")
	}
}

// polling runs a's Run until the test ends, and returns a wait for the next
// reload that OnReload reports on reloads.
func polling(t *testing.T, a *auth.Authenticator, reloads <-chan error) func() error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		a.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return func() error {
		t.Helper()
		select {
		case err := <-reloads:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("no reload within 10s")
			return nil
		}
	}
}
