// Package depcheck keeps the module layering of docs/architecture.md: the
// contract (sandboxapi), the profile data (profiles) and the test bed
// (testbed) at the bottom, the driver above them, the harness (qualify)
// above the driver, and the commands (cmd) on top. It checks package
// imports, test imports included, and the requirement edges between the
// workspace's modules, and reports any cycle among those modules.
package depcheck

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Module is the root module path; every other module of the workspace is
// Module + "/" + its directory.
const Module = "github.com/qualbox/qualbox"

// Rule says which import prefixes a package prefix must not reach,
// directly or transitively.
type Rule struct {
	Package   string
	Forbidden []string
}

// Layering is the project's rule set. Tests are held to it like the code
// they test: a driver test that imports qualify is a layering error.
var Layering = []Rule{
	{Module + "/sandboxapi", []string{"github.com/moby/", "github.com/docker/", Module + "/driver", Module + "/qualify", Module + "/profiles", Module + "/testbed", Module + "/cmd"}},
	{Module + "/profiles", []string{"github.com/moby/", Module + "/driver", Module + "/qualify", Module + "/sandboxapi", Module + "/testbed", Module + "/cmd"}},
	{Module + "/testbed", []string{Module + "/driver", Module + "/qualify", Module + "/cmd"}},
	{Module + "/driver", []string{Module + "/qualify", Module + "/cmd"}},
	{Module + "/qualify", []string{Module + "/cmd"}},
}

// TestOnly lists packages that only tests may import: fixtures whose
// shortcuts (a shared image, a container library with its own labels) must
// never reach a shipped binary.
var TestOnly = []string{
	Module + "/driver/internal/enginetest",
	Module + "/testbed/containers",
	// testcontainers-go starts test fixtures (testbed/guest run checks);
	// its labels and lifecycle are fine for a fixture, never for a shipped
	// binary.
	"github.com/testcontainers/testcontainers-go",
}

// Package is one entry of `go list -test`: a package, or a test variant of
// it, with its transitive dependencies.
type Package struct {
	ImportPath string
	Test       bool // a test variant or test main
	Deps       []string
}

// ListPackages runs `go list -test` on pattern in dir and returns every
// package and test variant with its dependencies.
func ListPackages(dir, pattern string) ([]Package, error) {
	cmd := exec.Command("go", "list", "-test", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, pattern)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -test %s: %w: %s", pattern, err, stderrOf(err))
	}
	var pkgs []Package
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		// A test variant prints as "path [path.test]", which splits into two
		// fields before the dependencies.
		fields := strings.Fields(line)
		p := Package{ImportPath: fields[0], Deps: fields[1:]}
		if len(fields) > 1 && strings.HasPrefix(fields[1], "[") {
			p.Test, p.Deps = true, fields[2:]
		}
		if strings.HasSuffix(p.ImportPath, ".test") || strings.HasSuffix(p.ImportPath, "_test") {
			p.Test = true
			p.ImportPath = strings.TrimSuffix(strings.TrimSuffix(p.ImportPath, ".test"), "_test")
		}
		for i, d := range p.Deps {
			// Dependencies compiled for a test carry the same suffix.
			if j := strings.Index(d, " ["); j >= 0 {
				p.Deps[i] = d[:j]
			}
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

// CheckPackages returns one message per broken rule, sorted.
func CheckPackages(pkgs []Package, rules []Rule, testOnly []string) []string {
	seen := map[string]bool{}
	var errs []string
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			errs = append(errs, s)
		}
	}
	for _, p := range pkgs {
		// A test-only package may build on another: testbed/containers
		// wraps testcontainers-go, and only tests import either.
		fixture := slices.ContainsFunc(testOnly, func(f string) bool { return under(p.ImportPath, f) })
		for _, d := range p.Deps {
			for _, f := range testOnly {
				if !p.Test && !fixture && under(d, f) {
					add(fmt.Sprintf("%s (non-test) depends on the test-only package %s", p.ImportPath, f))
				}
			}
		}
		for _, r := range rules {
			if !under(p.ImportPath, r.Package) {
				continue
			}
			for _, d := range p.Deps {
				for _, b := range r.Forbidden {
					if d == b || strings.HasPrefix(d, b) && (strings.HasSuffix(b, "/") || strings.HasPrefix(d, b+"/")) {
						kind := ""
						if p.Test {
							kind = " (test)"
						}
						add(fmt.Sprintf("%s%s depends on %s (forbidden: %s)", p.ImportPath, kind, d, b))
					}
				}
			}
		}
	}
	sort.Strings(errs)
	return errs
}

func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// Edge is one requirement between two modules of the workspace.
type Edge struct{ From, To string }

// ModuleEdges runs `go mod graph` (workspace mode off) in every module
// directory under root that has a go.mod and returns the requirement edges
// whose both ends are modules under prefix.
func ModuleEdges(root, prefix string) ([]Edge, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			dirs = append(dirs, filepath.Dir(p))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	seen := map[Edge]bool{}
	var edges []Edge
	for _, dir := range dirs {
		cmd := exec.Command("go", "mod", "graph")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go mod graph in %s: %w: %s", dir, err, stderrOf(err))
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 2 {
				continue
			}
			e := Edge{modPath(f[0]), modPath(f[1])}
			if under(e.From, prefix) && under(e.To, prefix) && !seen[e] {
				seen[e] = true
				edges = append(edges, e)
			}
		}
	}
	return edges, nil
}

func modPath(s string) string {
	if i := strings.Index(s, "@"); i >= 0 {
		return s[:i]
	}
	return s
}

// Cycle returns one cycle among edges as a path that starts and ends at the
// same module, or nil when the graph is acyclic.
func Cycle(edges []Edge) []string {
	next := map[string][]string{}
	var nodes []string
	for _, e := range edges {
		if _, ok := next[e.From]; !ok {
			nodes = append(nodes, e.From)
		}
		next[e.From] = append(next[e.From], e.To)
	}
	sort.Strings(nodes)
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var found []string
	var visit func(n string) bool
	visit = func(n string) bool {
		color[n] = grey
		stack = append(stack, n)
		for _, m := range next[n] {
			switch color[m] {
			case grey:
				for i, s := range stack {
					if s == m {
						found = append(append([]string{}, stack[i:]...), m)
						return true
					}
				}
			case white:
				if visit(m) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
		return false
	}
	for _, n := range nodes {
		if color[n] == white && visit(n) {
			return found
		}
	}
	return nil
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

// CheckModules returns one message per requirement edge that a rule
// forbids (the driver module requiring the qualify module, say), sorted.
func CheckModules(edges []Edge, rules []Rule) []string {
	var errs []string
	for _, e := range edges {
		for _, r := range rules {
			if e.From != r.Package {
				continue
			}
			for _, b := range r.Forbidden {
				if under(e.To, b) {
					errs = append(errs, fmt.Sprintf("module %s requires module %s (forbidden: %s)", e.From, e.To, b))
				}
			}
		}
	}
	sort.Strings(errs)
	return errs
}
