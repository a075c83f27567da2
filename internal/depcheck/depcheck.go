package depcheck

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
)

// Module is the path of the repository's one module; every package's
// import path is Module + "/" + its directory.
const Module = "github.com/qualbox/qualbox"

// Rule says which import prefixes a package prefix must not reach,
// directly or transitively, and which packages under those prefixes it
// may reach all the same (Except, matched as package prefixes).
type Rule struct {
	Package   string
	Forbidden []string
	Except    []string
}

// Instruments are the harness packages the driver's tests use too: they
// ship inside cmd/qualify (the guest image, the fault proxy, the synthetic
// Engine, the dataset fixture, the hostile archive corpus), so they live
// under qualify/, yet they sit below the driver and import neither it nor
// the rest of qualify.
var Instruments = []string{
	Module + "/qualify/archivecorpus",
	Module + "/qualify/dataset",
	Module + "/qualify/faultproxy",
	Module + "/qualify/guest",
	Module + "/qualify/syntheticengine",
}

// Layering is the project's rule set. Tests are held to it like the code
// they test: a driver test that imports qualify/scenario is a layering
// error. Rules are matched by Package prefix, most specific first: an
// instrument is held to its own rule, not to the rule of qualify.
var Layering = layering()

func layering() []Rule {
	rules := []Rule{
		{Package: Module + "/sandboxapi", Forbidden: []string{"github.com/moby/", "github.com/docker/", Module + "/driver", Module + "/qualify", Module + "/profiles", Module + "/testbed", Module + "/cmd"}},
		{Package: Module + "/profiles", Forbidden: []string{"github.com/moby/", Module + "/driver", Module + "/qualify", Module + "/sandboxapi", Module + "/testbed", Module + "/cmd", Module + "/platforms"}},
		// The platform registry is data above the profiles it names: the
		// generator (internal/platformgen) and every layer's tests read it,
		// so it reaches nothing but profiles.
		{Package: Module + "/platforms", Forbidden: []string{"github.com/moby/", "github.com/docker/", Module + "/driver", Module + "/qualify", Module + "/sandboxapi", Module + "/testbed", Module + "/cmd", Module + "/internal"}},
		{Package: Module + "/testbed", Forbidden: []string{Module + "/driver", Module + "/qualify", Module + "/cmd"}},
	}
	for _, in := range Instruments {
		rules = append(rules, Rule{Package: in, Forbidden: []string{Module + "/driver", Module + "/qualify", Module + "/testbed", Module + "/cmd"}, Except: Instruments})
	}
	return append(rules,
		Rule{Package: Module + "/driver", Forbidden: []string{Module + "/qualify", Module + "/cmd"}, Except: Instruments},
		// The harness reports progress as events; drawing them on a
		// terminal is the command's (internal/termprogress).
		Rule{Package: Module + "/qualify", Forbidden: []string{Module + "/cmd", Module + "/internal/termprogress", "github.com/vbauerster/"}},
	)
}

// TestOnly lists packages that only tests may import: fixtures whose
// shortcuts (a shared image, a container library with its own labels) must
// never reach a shipped binary.
var TestOnly = []string{
	Module + "/driver/internal/enginetest",
	// Whether an Engine test runs, skips or fails (docs/lanes.md#engine-tests).
	Module + "/internal/testengine",
	// A stand-in for qemu that plays the guest's side of a lane run, for
	// the supervisor's tests (internal/lanevm).
	Module + "/internal/lanevm/fakeqemu",
	// Everything under testbed/ is test support; what ships lives under
	// the name of what ships it (Instruments).
	Module + "/testbed",
	// testcontainers-go starts test fixtures (qualify/guest run checks);
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
				d = d[:j]
			}
			// A test main depends on its package's external test package
			// (path_test), which is held to the package's rules.
			p.Deps[i] = strings.TrimSuffix(d, "_test")
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
		r, ok := ruleFor(p.ImportPath, rules)
		if ok {
			for _, d := range p.Deps {
				if slices.ContainsFunc(r.Except, func(e string) bool { return under(d, e) }) {
					continue
				}
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

// ruleFor returns the rule with the longest Package prefix of path.
func ruleFor(path string, rules []Rule) (Rule, bool) {
	var best Rule
	found := false
	for _, r := range rules {
		if under(path, r.Package) && (!found || len(r.Package) > len(best.Package)) {
			best, found = r, true
		}
	}
	return best, found
}

func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

// Shipped lists the main packages whose binaries leave the repository:
// `make release` builds cmd/qualify and cmd/observe, and the guest image
// carries the probe.
var Shipped = []string{
	Module + "/cmd/qualify",
	Module + "/cmd/observe",
	Module + "/qualify/guest/probe",
}

// Platforms are the GOOS/GOARCH pairs `make release` builds Shipped for;
// build constraints can make a package link different code on each.
var Platforms = []string{"linux/amd64", "linux/arm64", "darwin/arm64"}

// TestOnlyModules lists modules that the module requires only for its
// tests and for the TestOnly fixtures: no package of theirs may be linked
// into a Shipped binary. A module that go.mod requires and no shipped
// binary links belongs here. golang.org/x/mod is not: the gate reads
// module versions with its semver package (evidence.HarnessRequirement).
var TestOnlyModules = []string{
	"github.com/google/go-cmp",
	"github.com/stretchr/testify",
	"github.com/testcontainers/testcontainers-go",
	"go.uber.org/goleak",
	"gotest.tools/v3",
}

// Dep is one package a binary links: its import path and the path of the
// module that provides it ("" for the standard library).
type Dep struct{ ImportPath, Module string }

// ListDeps runs `go list -deps` on mains in dir for platform ("GOOS/GOARCH",
// with CGO_ENABLED=0 as `make release` builds) and returns, for each of
// mains, every package it links with that package's module. Errors name
// the go list invocation and carry its stderr.
func ListDeps(dir, platform string, mains ...string) (map[string][]Dep, error) {
	goos, goarch, ok := strings.Cut(platform, "/")
	if !ok || goos == "" || goarch == "" {
		return nil, fmt.Errorf("depcheck: platform %q is not GOOS/GOARCH", platform)
	}
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}}\t{{with .Module}}{{.Path}}{{end}}\t{{if not .DepOnly}}{{join .Deps \" \"}}{{end}}"}, mains...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("depcheck: go list -deps %s for %s: %w: %s", strings.Join(mains, " "), platform, err, stderrOf(err))
	}
	module := map[string]string{}
	roots := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			return nil, fmt.Errorf("depcheck: go list -deps for %s: unexpected line %q", platform, line)
		}
		module[f[0]] = f[1]
		if slices.Contains(mains, f[0]) {
			roots[f[0]] = strings.Fields(f[2])
		}
	}
	deps := map[string][]Dep{}
	for _, m := range mains {
		d, ok := roots[m]
		if !ok {
			return nil, fmt.Errorf("depcheck: go list -deps for %s did not list %s", platform, m)
		}
		for _, p := range d {
			deps[m] = append(deps[m], Dep{ImportPath: p, Module: module[p]})
		}
	}
	return deps, nil
}

// CheckShipped returns one message per package of deps (what the shipped
// binary main links) that is under a testOnly package or comes from one of
// testOnlyModules, sorted.
func CheckShipped(main string, deps []Dep, testOnly, testOnlyModules []string) []string {
	var errs []string
	for _, d := range deps {
		for _, f := range testOnly {
			if under(d.ImportPath, f) {
				errs = append(errs, fmt.Sprintf("%s (shipped) links the test-only package %s", main, d.ImportPath))
			}
		}
		if d.Module != "" && slices.Contains(testOnlyModules, d.Module) {
			errs = append(errs, fmt.Sprintf("%s (shipped) links %s of the test-only module %s", main, d.ImportPath, d.Module))
		}
	}
	sort.Strings(errs)
	return slices.Compact(errs)
}

// CheckModuleLayout returns one message per way the repository at root
// stops being the one installable module: root/go.mod missing, unparsable
// or not declaring Module; a replace or exclude directive in it (`go
// install pkg@version` refuses a module whose go.mod has either, and a
// replace hides from consumers what the repository builds with); any
// other go.mod outside testdata (a sub-module, cut out of the module's
// zip); or a go.work file (it would make local builds differ from a
// consumer's). Messages name the file, relative to root, and the line.
// The error is for a walk that failed.
//
// The steps: root/go.mod (checkGoMod), then every other file of the
// tree (checkLayoutFiles); the messages are returned sorted.
func CheckModuleLayout(root string) ([]string, error) {
	errs, err := checkGoMod(root)
	if err != nil {
		return nil, err
	}
	files, err := checkLayoutFiles(root)
	if err != nil {
		return nil, err
	}
	errs = append(errs, files...)
	sort.Strings(errs)
	return errs, nil
}

// checkGoMod returns the messages for root/go.mod: missing, unparsable,
// or (goModProblems) its module and directives. The error is for a
// go.mod that exists but cannot be read.
func checkGoMod(root string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return []string{"go.mod: missing: the repository root must hold the module " + Module}, nil
	case err != nil:
		return nil, fmt.Errorf("depcheck: %w", err)
	}
	mf, err := modfile.Parse("go.mod", data, nil)
	if err != nil {
		return []string{fmt.Sprintf("go.mod: %v", err)}, nil
	}
	return goModProblems(mf), nil
}

// goModProblems returns the messages for a parsed go.mod: a module other
// than Module, and each replace and exclude directive.
func goModProblems(mf *modfile.File) []string {
	var errs []string
	if mf.Module == nil || mf.Module.Mod.Path != Module {
		got := "none"
		if mf.Module != nil {
			got = mf.Module.Mod.Path
		}
		errs = append(errs, fmt.Sprintf("go.mod: module is %s, want %s", got, Module))
	}
	for _, r := range mf.Replace {
		errs = append(errs, fmt.Sprintf("go.mod:%d: replace %s => %s: go install %s/cmd/qualify@<version> refuses a module with replace directives",
			r.Syntax.Start.Line, r.Old.Path, r.New.Path, Module))
	}
	for _, x := range mf.Exclude {
		errs = append(errs, fmt.Sprintf("go.mod:%d: exclude %s %s: go install %s/cmd/qualify@<version> refuses a module with exclude directives",
			x.Syntax.Start.Line, x.Mod.Path, x.Mod.Version, Module))
	}
	return errs
}

// checkLayoutFiles walks root (not .git or testdata directories below
// it) and returns a message for each go.mod other than root's and each
// go.work or go.work.sum. The error is for a walk that failed.
func checkLayoutFiles(root string) ([]string, error) {
	var errs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.IsDir():
		case d.Name() == "go.mod" && rel != "go.mod":
			errs = append(errs, fmt.Sprintf("%s: a sub-module: %s must be the repository's only module", filepath.ToSlash(rel), Module))
		case d.Name() == "go.work" || d.Name() == "go.work.sum":
			errs = append(errs, fmt.Sprintf("%s: a workspace file: local builds would resolve modules differently from go install", filepath.ToSlash(rel)))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("depcheck: walking %s: %w", root, err)
	}
	return errs, nil
}
