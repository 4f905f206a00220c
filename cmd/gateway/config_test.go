package main

import (
	"bytes"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestSplitCommand(t *testing.T) {
	tests := map[string][]string{
		`node server.js`:                {"node", "server.js"},
		`  npx   -y  pkg  `:             {"npx", "-y", "pkg"},
		`python -c "print('a b')"`:      {"python", "-c", "print('a b')"},
		`sh -c 'echo "$HOME"'`:          {"sh", "-c", `echo "$HOME"`},
		`a\ b c`:                        {"a b", "c"},
		`""`:                            {""},
		`/opt/my\"server --flag=x`:      {`/opt/my"server`, "--flag=x"},
		`cmd 'it''s'`:                   {"cmd", "its"},
		`cmd "back\\slash" 'no\escape'`: {"cmd", `back\slash`, `no\escape`},
	}
	for in, want := range tests {
		got, err := splitCommand(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("splitCommand(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`"open`, `'open`, `trailing\`} {
		if _, err := splitCommand(bad); err == nil {
			t.Errorf("splitCommand(%s) accepted an unterminated quote or escape", bad)
		}
	}
}

// Every setting is listed by gateway -h and in the README, and nothing else is.
func TestEverySettingIsDocumented(t *testing.T) {
	var help bytes.Buffer
	usage(&help)
	name := regexp.MustCompile(`GATEWAY_[A-Z_]+[A-Z]`)
	inHelp := uniq(name.FindAllString(help.String(), -1))
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// The README's configuration table: rows that start with a variable.
	row := regexp.MustCompile("(?m)^\\| `(GATEWAY_[A-Z_]+)` \\|")
	var inReadme []string
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		inReadme = append(inReadme, m[1])
	}
	inReadme = uniq(inReadme)
	fields := reflect.TypeOf(Config{}).NumField()
	if len(inHelp) != fields || !slices.Equal(inHelp, inReadme) {
		t.Errorf("Config has %d fields\n-h lists %d: %v\nREADME lists %d: %v", fields, len(inHelp), inHelp, len(inReadme), inReadme)
	}
	for _, v := range inHelp {
		if !strings.Contains(help.String(), v+" ") {
			t.Errorf("-h lists %s without a default column", v)
		}
	}
}

func uniq(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

func TestValidate(t *testing.T) {
	t.Setenv("GATEWAY_ERA", "legacy")
	t.Setenv("GATEWAY_LOG_LEVEL", "loud")
	t.Setenv("GATEWAY_RESTART_DELAY_MIN", "1m")
	t.Setenv("GATEWAY_RESTART_DELAY_MAX", "1s")
	t.Setenv("GATEWAY_MAX_BODY_BYTES", "0")
	_, err := loadConfig()
	for _, want := range []string{"GATEWAY_LOG_LEVEL", "GATEWAY_RESTART_DELAY_MAX", "GATEWAY_MAX_BODY_BYTES"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("loadConfig error %v does not mention %s", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "GATEWAY_ERA") {
		t.Errorf("a valid GATEWAY_ERA was refused: %v", err)
	}
}

// The key comes from GATEWAY_SECRET or a file, is long enough, and each
// use gets a key of its own that replicas with the same secret share.
func TestKeys(t *testing.T) {
	secret := "a secret that replicas share, at least 32 bytes"
	file := t.TempDir() + "/secret"
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fromEnv, err := loadKeys(Config{Secret: secret})
	if err != nil || !fromEnv.shared {
		t.Fatalf("GATEWAY_SECRET: %+v, %v", fromEnv, err)
	}
	fromFile, err := loadKeys(Config{SecretFile: file})
	if err != nil || !bytes.Equal(fromFile.session, fromEnv.session) || !bytes.Equal(fromFile.requestState, fromEnv.requestState) {
		t.Errorf("GATEWAY_SECRET_FILE with a final newline derives other keys than GATEWAY_SECRET (%v)", err)
	}
	if bytes.Equal(fromEnv.session, fromEnv.requestState) || bytes.Contains(fromEnv.session, []byte(secret)) {
		t.Error("the session key is the requestState key, or the secret itself")
	}
	r1, _ := loadKeys(Config{})
	r2, _ := loadKeys(Config{})
	if r1.shared || len(r1.session) != 32 || bytes.Equal(r1.session, r2.session) {
		t.Error("without a secret, each process does not get a random key of its own")
	}
	rotating, err := loadKeys(Config{Secret: "the next secret, at least 32 bytes long", SecretAcceptFile: file})
	if err != nil || !bytes.Equal(rotating.accepted.session, fromEnv.session) || !bytes.Equal(rotating.accepted.requestState, fromEnv.requestState) ||
		bytes.Equal(rotating.session, fromEnv.session) {
		t.Errorf("GATEWAY_SECRET_ACCEPT_FILE does not accept the other secret's keys, or signs with them (%v)", err)
	}
	for name, cfg := range map[string]Config{
		"accept without a secret": {SecretAccept: secret},
		"accept too short":        {Secret: secret, SecretAccept: "short"},
		"accept twice":            {Secret: secret, SecretAccept: secret, SecretAcceptFile: file},
		"too short":               {Secret: "short"},
		"both":                    {Secret: secret, SecretFile: file},
		"no file":                 {SecretFile: file + ".missing"},
		"empty file":              {SecretFile: os.DevNull},
		"short file":              {SecretFile: writeFile(t, "short\n")},
		"only spaces":             {SecretFile: writeFile(t, "  \n")},
	} {
		if _, err := loadKeys(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	f := t.TempDir() + "/f"
	if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// A variable the gateway no longer reads is an error, not silently ignored.
func TestRetiredSetting(t *testing.T) {
	t.Setenv("GATEWAY_SESSION_IDLE_TIMEOUT", "30m")
	if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), "GATEWAY_SESSION_TTL") {
		t.Errorf("loadConfig error %v does not name the replacement", err)
	}
}
