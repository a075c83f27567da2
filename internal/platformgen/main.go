package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/qualbox/qualbox/platforms"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("platformgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	checkOnly := fs.Bool("check", false, "write nothing; exit 1 naming each committed file that differs from what platforms/ generates")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: go run ./internal/platformgen [-check]   (from the repository root)")
		return 2
	}
	if mod, err := os.ReadFile("go.mod"); err != nil || !bytes.HasPrefix(mod, []byte("module github.com/qualbox/qualbox\n")) {
		fmt.Fprintln(stderr, "platformgen: run it from the root of the qualbox repository (no go.mod of github.com/qualbox/qualbox here)")
		return 2
	}
	if err := platforms.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	repo := os.DirFS(".")
	files, err := generate(repo, platforms.All())
	if err != nil {
		fmt.Fprintln(stderr, "platformgen:", err)
		return 1
	}
	problems, err := check(repo, files)
	if err != nil {
		fmt.Fprintln(stderr, "platformgen:", err)
		return 1
	}
	if *checkOnly {
		for _, p := range problems {
			fmt.Fprintln(stderr, p)
		}
		if len(problems) > 0 {
			fmt.Fprintln(stderr, "platformgen: run go run ./internal/platformgen (make generate) and commit what it writes")
			return 1
		}
		return 0
	}
	status := 0
	for _, f := range files {
		old, err := os.ReadFile(f.Path)
		if err == nil && bytes.Equal(old, f.Data) {
			continue
		}
		if err := writeFile(filepath.FromSlash(f.Path), f.Data); err != nil {
			fmt.Fprintln(stderr, "platformgen:", err)
			return 1
		}
		fmt.Fprintln(stdout, "wrote", f.Path)
	}
	for _, p := range problems {
		if p.Why != "missing" && p.Line == 0 {
			fmt.Fprintln(stderr, "platformgen:", p) // a stray manifest: not ours to remove
			status = 1
		}
	}
	return status
}

// writeFile replaces path with data whole: a temporary file in the same
// directory, synced and renamed into place, mode 0644.
func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
