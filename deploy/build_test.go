package deploy

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

func command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	return cmd
}

// contextFilter says which paths of the repository .dockerignore keeps
// out of the build context, as BuildKit reads it.
func contextFilter() (func(rel string) (bool, error), error) {
	f, err := os.Open(filepath.Join(root, ".dockerignore"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf(".dockerignore: %w", err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return nil, fmt.Errorf(".dockerignore: %w", err)
	}
	return pm.MatchesOrParentMatches, nil
}

// copyContext copies the build context (the repository less what
// .dockerignore excludes) to dir.
func copyContext(dir string) error {
	ignored, err := contextFilter()
	if err != nil {
		return err
	}
	return filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return os.MkdirAll(dir, 0o755)
		}
		skip, err := ignored(filepath.ToSlash(rel))
		switch {
		case err != nil:
			return err
		case skip && e.IsDir():
			return filepath.SkipDir
		case skip:
			return nil
		}
		to := filepath.Join(dir, rel)
		return copyEntry(p, to, e)
	})
}

// copyEntry copies one entry of a walk: a directory is made, a symlink
// made again, a file copied.
func copyEntry(from, to string, e fs.DirEntry) error {
	switch {
	case e.IsDir():
		return os.MkdirAll(to, 0o755)
	case e.Type()&fs.ModeSymlink != 0:
		target, err := os.Readlink(from)
		if err != nil {
			return err
		}
		return os.Symlink(target, to)
	}
	return copyFile(from, to)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// buildAsWritten runs the Dockerfile's build stage on this machine, which
// has Go and a C compiler as the golang image has: the build context as
// .dockerignore leaves it, copied as the stage's COPY instructions lay it
// out, then each RUN in a shell with the stage's ENV, the path the final
// stage copies the gateway from moved under dir. It returns that path.
func buildAsWritten(src []byte, dir string) (string, error) {
	d, err := parseDockerfile(src)
	if err != nil {
		return "", err
	}
	// The stage and path the final stage takes the gateway from.
	var from string
	stage := -1
	for _, c := range commands[*instructions.CopyCommand](d.stages[len(d.stages)-1]) {
		if i, ok := d.stage(c.From); ok && c.From != "" && len(c.SourcePaths) == 1 && path.Base(c.SourcePaths[0]) == "gateway" {
			stage, from = i, c.SourcePaths[0]
		}
	}
	if stage < 0 {
		return "", errors.New("the final stage copies no gateway from a build stage")
	}
	context, work := filepath.Join(dir, "context"), filepath.Join(dir, "work")
	if err := copyContext(context); err != nil {
		return "", fmt.Errorf("the build context: %w", err)
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "out", path.Base(from))
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		// What the Dockerfile says, not what this machine has set.
		return strings.HasPrefix(kv, "CGO_ENABLED=") || strings.HasPrefix(kv, "GOFLAGS=")
	})
	for _, c := range d.stages[stage].Commands {
		switch c := c.(type) {
		case *instructions.WorkdirCommand:
			// The stage's WORKDIR is work/, wherever it is in the image.
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				env = append(env, kv.Key+"="+kv.Value)
			}
		case *instructions.CopyCommand:
			if c.From != "" {
				return "", fmt.Errorf("%s: the build stage copies from another stage", c)
			}
			for _, s := range c.SourcePaths {
				if err := copyInto(filepath.Join(context, s), filepath.Join(work, c.DestPath), s); err != nil {
					return "", fmt.Errorf("%s: %w", c, err)
				}
			}
		case *instructions.RunCommand:
			line := strings.ReplaceAll(strings.Join(c.CmdLine, " "), from, out)
			run := exec.Command("sh", "-c", line)
			if !c.PrependShell {
				run = exec.Command(c.CmdLine[0], c.CmdLine[1:]...)
			}
			run.Dir, run.Env = work, env
			if b, err := run.CombinedOutput(); err != nil {
				return "", fmt.Errorf("%s: %w\n%s", c, err, b)
			}
		default:
			return "", fmt.Errorf("%s: not run here; teach buildAsWritten", c)
		}
	}
	if _, err := os.Stat(out); err != nil {
		return "", fmt.Errorf("the build stage made no %s: %w", from, err)
	}
	return out, nil
}

// copyInto copies a file or a directory's contents from the build context
// to dest, as COPY does; name is the source as the Dockerfile spells it.
func copyInto(from, dest, name string) error {
	info, err := os.Stat(from)
	if err != nil {
		return fmt.Errorf("%s is not in the build context (.dockerignore?): %w", name, err)
	}
	if !info.IsDir() {
		if err := os.MkdirAll(dest, 0o755); err != nil {
			return err
		}
		return copyFile(from, filepath.Join(dest, filepath.Base(from)))
	}
	return filepath.WalkDir(from, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dest, rel)
		return copyEntry(p, to, e)
	})
}

// binaryProblems says what is wrong with the binary at bin for an image:
// it must be static (it runs on any base), stripped, and hold no path of
// the directory it was built in.
func binaryProblems(bin, buildDir string) ([]string, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var problems []string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			problems = append(problems, "it has a dynamic loader (PT_INTERP): not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		problems = append(problems, fmt.Sprintf("it needs %v: not static", libs))
	}
	for _, name := range []string{".symtab", ".debug_info", ".zdebug_info"} {
		if f.Section(name) != nil {
			problems = append(problems, fmt.Sprintf("it has %s: not stripped", name))
		}
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	if bytes.Contains(b, []byte(buildDir)) {
		problems = append(problems, fmt.Sprintf("it holds the build directory %s: no -trimpath", buildDir))
	}
	return problems, nil
}

func TestBuildAsWritten(t *testing.T) {
	problems, err := binaryProblems(gatewayBinary(t), built.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("the gateway binary: %s", p)
	}
}

// A binary built as go build makes it by default, with cgo on as in the
// golang image, has every problem binaryProblems looks for.
func TestBinaryChecksBite(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"go.mod":  "module probe\n\ngo 1.26\n",
		"main.go": "package main\n\nimport \"net\"\n\nfunc main() { net.LookupHost(\"localhost\") }\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := command("go", "build", "-o", "probe", ".")
	build.Dir = dir
	build.Env = append(build.Env, "CGO_ENABLED=1", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	problems, err := binaryProblems(filepath.Join(dir, "probe"), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dynamic loader", "needs", "not stripped", "no -trimpath"} {
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, want) }) {
			t.Errorf("problems %q, want one with %q", problems, want)
		}
	}
}

// The context holds the Go module and leaves out what the build does not
// read, so that editing a manifest or a test rebuilds nothing.
func TestBuildContext(t *testing.T) {
	ignored, err := contextFilter()
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{
		"go.mod": false, "go.sum": false, "cmd/gateway/main.go": false, "bridge/bridge.go": false,
		".git": true, "interop/node_modules": true, "interop/package.json": true, "k8s/base/deployment.yaml": true,
		"deploy/go.mod": true, "cmd/gateway/main_test.go": true, "README.md": true, "Dockerfile": true,
	} {
		if got, err := ignored(path); err != nil || got != want {
			t.Errorf("%s left out of the build context: %v, %v; want %v", path, got, err, want)
		}
	}
}
