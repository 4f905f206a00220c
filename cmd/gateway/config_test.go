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
