package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestChildEnvironment(t *testing.T) {
	environ := []string{
		"PATH=/usr/local/bin:/usr/bin",
		"HOME=/home/gw",
		"USER=gw",
		"LOGNAME=gw",
		"SHELL=/bin/sh",
		"LANG=C.UTF-8",
		"LANGUAGE=en",
		"LC_ALL=C.UTF-8",
		"LC_TIME=de_DE.UTF-8",
		"TZ=Europe/Berlin",
		"TMPDIR=/scratch",
		"TERM=dumb",
		"GATEWAY_SECRET=0123456789abcdef0123456789abcdef",
		"GATEWAY_ADDR=0.0.0.0:8080",
		"GATEWAY_AUTH_TOKENS=ci:s3cret",
		"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI",
		"GITHUB_TOKEN=ghp_x",
		"KUBERNETES_SERVICE_HOST=10.96.0.1",
		"path=/lower/case/is/another/name",
		"API_KEY=k=v==",
		"EMPTY=",
		"NOEQUALS",
	}
	inherited := []string{
		"HOME=/home/gw", "LANG=C.UTF-8", "LANGUAGE=en", "LC_ALL=C.UTF-8", "LC_TIME=de_DE.UTF-8",
		"LOGNAME=gw", "PATH=/usr/local/bin:/usr/bin", "SHELL=/bin/sh", "TERM=dumb", "TMPDIR=/scratch",
		"TZ=Europe/Berlin", "USER=gw",
	}
	with := func(extra ...string) []string {
		return slices.Sorted(slices.Values(append(slices.Clone(inherited), extra...)))
	}
	tests := []struct {
		name        string
		named       []string
		want        []string
		wantMissing []string
		wantErr     string // a part of the error
	}{
		{name: "allow list only", want: inherited},
		{name: "a name copies the gateway's value", named: []string{"API_KEY", "EMPTY"},
			want: with("API_KEY=k=v==", "EMPTY=")},
		{name: "NAME=value, '=' inside the value", named: []string{"MODE=a=b=c"}, want: with("MODE=a=b=c")},
		{name: "NAME= sets an empty value", named: []string{"DEBUG="}, want: with("DEBUG=")},
		{name: "a value overrides an inherited one", named: []string{"PATH=/opt/bin"},
			want: slices.Sorted(slices.Values(append(slices.DeleteFunc(slices.Clone(inherited),
				func(s string) bool { return strings.HasPrefix(s, "PATH=") }), "PATH=/opt/bin")))},
		{name: "names are case-sensitive", named: []string{"path"}, want: with("path=/lower/case/is/another/name")},
		{name: "spaces after commas, blank entries", named: []string{"API_KEY", " EMPTY", "", "  ", " X=1 "},
			want: with("API_KEY=k=v==", "EMPTY=", "X=1 ")},
		{name: "missing names reported in order", named: []string{"NOT_SET", "API_KEY", "ALSO_NOT", "NOEQUALS"},
			want: with("API_KEY=k=v=="), wantMissing: []string{"NOT_SET", "ALSO_NOT", "NOEQUALS"}},
		{name: "GATEWAY_ name refused", named: []string{"GATEWAY_SECRET"}, wantErr: `"GATEWAY_SECRET"`},
		{name: "GATEWAY_ assignment refused", named: []string{"GATEWAY_ADDR=0.0.0.0:1"}, wantErr: `"GATEWAY_ADDR=0.0.0.0:1"`},
		{name: "gateway_ in lower case refused", named: []string{"gateway_secret"}, wantErr: `"gateway_secret"`},
		{name: "Gateway_ mixed case refused", named: []string{"Gateway_Secret_File=/x"}, wantErr: `"Gateway_Secret_File=/x"`},
		{name: "duplicate names refused", named: []string{"A=1", "B", "A"}, wantErr: `"A"`},
		{name: "duplicate assignments refused", named: []string{"A=1", "A=2"}, wantErr: `"A=2"`},
		{name: "name starting with a digit", named: []string{"1A=x"}, wantErr: `"1A=x"`},
		{name: "name with a dash", named: []string{"MY-VAR"}, wantErr: `"MY-VAR"`},
		{name: "name with a space before '='", named: []string{"A =1"}, wantErr: `"A =1"`},
		{name: "empty name", named: []string{"=value"}, wantErr: `"=value"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, missing, err := childEnvironment(environ, tt.named)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("childEnvironment(%q) error = %v, want one naming %s", tt.named, err, tt.wantErr)
				}
				if env != nil {
					t.Errorf("childEnvironment(%q) = %q with an error, want nil", tt.named, env)
				}
				return
			}
			if err != nil {
				t.Fatalf("childEnvironment(%q): %v", tt.named, err)
			}
			if !slices.Equal(env, tt.want) {
				t.Errorf("childEnvironment(%q) =\n%q\nwant\n%q", tt.named, env, tt.want)
			}
			if !slices.Equal(missing, tt.wantMissing) {
				t.Errorf("childEnvironment(%q) missing = %q, want %q", tt.named, missing, tt.wantMissing)
			}
			for _, kv := range env {
				if strings.HasPrefix(strings.ToUpper(kv), "GATEWAY_") || strings.Contains(kv, "SECRET") || strings.Contains(kv, "TOKEN") {
					t.Errorf("the child's environment holds %q", kv)
				}
			}
		})
	}
}

// The output is sorted by name, not as strings: "A" comes before "A1",
// though '=' sorts after '1'.
func TestChildEnvironmentSortedByName(t *testing.T) {
	env, _, err := childEnvironment([]string{"LC_A1=y", "LC_A=x", "PATH=/bin", "LC_=z"}, []string{"B=1", "A1=2", "A=3"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"A=3", "A1=2", "B=1", "LC_=z", "LC_A=x", "LC_A1=y", "PATH=/bin"}
	if !slices.Equal(env, want) {
		t.Errorf("childEnvironment = %q, want %q", env, want)
	}
}

// Of duplicates in environ the first counts, as for os.Getenv.
func TestChildEnvironmentDuplicateInEnviron(t *testing.T) {
	env, _, err := childEnvironment([]string{"HOME=/first", "HOME=/second", "K=1", "K=2"}, []string{"K"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"HOME=/first", "K=1"}; !slices.Equal(env, want) {
		t.Errorf("childEnvironment = %q, want %q", env, want)
	}
}

func TestCheckChildDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		dir    string
		wantIs error // nil: no error
	}{
		{"a directory", dir, nil},
		{"unset: the gateway's own", "", nil},
		{"missing", filepath.Join(dir, "nope"), fs.ErrNotExist},
		{"a file", file, syscall.ENOTDIR},
		{"below a file", filepath.Join(file, "sub"), syscall.ENOTDIR},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkChildDir(tt.dir)
			if tt.wantIs == nil {
				if err != nil {
					t.Fatalf("checkChildDir(%q): %v", tt.dir, err)
				}
				return
			}
			if !errors.Is(err, tt.wantIs) {
				t.Fatalf("checkChildDir(%q) = %v, want an error that is %v", tt.dir, err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), "GATEWAY_CHILD_DIR") || !strings.Contains(err.Error(), tt.dir) {
				t.Errorf("checkChildDir(%q) = %q, want it to name GATEWAY_CHILD_DIR and the path", tt.dir, err)
			}
		})
	}
}
