package main

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"
)

// inheritedByChild tells whether the child gets the gateway's value of the
// variable name without being asked: what a program needs to run as it
// would in a shell, and nothing that could hold a secret. Everything else
// (tokens, cloud credentials, the GATEWAY_* configuration) stays with the
// gateway unless GATEWAY_CHILD_ENV names it.
func inheritedByChild(name string) bool {
	switch name {
	case "PATH": // a command given as "node" or "python3", and the interpreters scripts name in #!/usr/bin/env lines, are found through it
	case "HOME": // npm, pip and uv keep their caches and configuration under it; some tools refuse to start without it
	case "USER", "LOGNAME": // who the process runs as, for programs that ask the environment rather than the system
	case "SHELL": // what a program that runs shell commands starts
	case "LANG", "LANGUAGE": // the locale: character encoding of text, messages' language
	case "TZ": // local time in dates the program writes
	case "TMPDIR": // where temporary files go (a writable emptyDir under a read-only root filesystem)
	case "TERM": // some programs check it before writing colour or control sequences
	default:
		return strings.HasPrefix(name, "LC_") // the locale's parts: LC_ALL, LC_CTYPE, LC_TIME...
	}
	return true
}

// childEnvironment returns the child's environment, sorted by name: the
// variables of environ that inheritedByChild keeps, plus what named
// (GATEWAY_CHILD_ENV) asks for. An entry NAME copies that variable from
// environ; one that environ lacks is returned in missing, in the order
// named, for the caller to warn about. An entry NAME=value sets it (value
// may be empty and may hold '='), over an inherited value too. GATEWAY_*
// names in any letter case are refused (the gateway's configuration holds
// its secrets), and so are invalid names and a name given twice. Blank
// entries are skipped, and leading spaces, as left by "A, B", are ignored.
func childEnvironment(environ []string, named []string) (env []string, missing []string, err error) {
	have := make(map[string]string, len(environ))
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if _, dup := have[name]; !ok || dup {
			continue // like os.Getenv, the first of duplicates counts
		}
		have[name] = value
	}
	out := make(map[string]string)
	for name, value := range have {
		if inheritedByChild(name) {
			out[name] = value
		}
	}
	seen := make(map[string]bool, len(named))
	for _, entry := range named {
		entry = strings.TrimLeft(entry, " \t")
		if strings.TrimSpace(entry) == "" {
			continue
		}
		name, value, set := strings.Cut(entry, "=")
		if !set {
			name = strings.TrimSpace(name)
		}
		switch {
		case !validEnvName(name):
			return nil, nil, fmt.Errorf("GATEWAY_CHILD_ENV entry %q: %q is not a variable name", entry, name)
		case strings.HasPrefix(strings.ToUpper(name), "GATEWAY_"):
			return nil, nil, fmt.Errorf("GATEWAY_CHILD_ENV entry %q: the gateway's own configuration is never given to the child", entry)
		case seen[name]:
			return nil, nil, fmt.Errorf("GATEWAY_CHILD_ENV entry %q: %s is named twice", entry, name)
		}
		seen[name] = true
		switch v, ok := have[name]; {
		case set:
			out[name] = value
		case ok:
			out[name] = v
		default:
			missing = append(missing, name)
		}
	}
	names := slices.Sorted(maps.Keys(out))
	env = make([]string, len(names))
	for i, name := range names {
		env[i] = name + "=" + out[name]
	}
	return env, missing, nil
}

// validEnvName tells whether name matches [A-Za-z_][A-Za-z0-9_]*, the
// names a POSIX shell accepts, so that the child can read every variable
// it is given.
func validEnvName(name string) bool {
	if name == "" || ('0' <= name[0] && name[0] <= '9') {
		return false
	}
	for _, c := range []byte(name) {
		if !(c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// checkChildDir checks that the child's working directory exists and is a
// directory, so that a mistake stops the gateway at start rather than every
// start of the child. An empty dir means the gateway's own and needs no
// check.
func checkChildDir(dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("GATEWAY_CHILD_DIR: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("GATEWAY_CHILD_DIR: %w", &fs.PathError{Op: "stat", Path: dir, Err: syscall.ENOTDIR})
	}
	return nil
}
