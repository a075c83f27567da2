package depcheck

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	assert.NilError(t, err)
	return root
}

// Every package of the workspace, and every test of it, keeps the layering.
func TestPackageLayering(t *testing.T) {
	pkgs, err := ListPackages(repoRoot(t), Module+"/...")
	assert.NilError(t, err)
	tests, checked := 0, map[string]bool{}
	for _, p := range pkgs {
		if p.Test {
			tests++
		}
		for _, r := range Layering {
			if under(p.ImportPath, r.Package) {
				checked[r.Package] = true
			}
		}
	}
	// A pattern that matched too little would check nothing and pass.
	assert.Check(t, is.Len(checked, len(Layering)), "rules with packages: %v", checked)
	assert.Check(t, tests > 20, "only %d test variants listed", tests)
	for _, e := range CheckPackages(pkgs, Layering, TestOnly) {
		t.Error(e)
	}
}

// The repository is one module, github.com/qualbox/qualbox, with no
// replace or exclude directive, no sub-module and no go.work file.
func TestModuleLayout(t *testing.T) {
	errs, err := CheckModuleLayout(repoRoot(t))
	assert.NilError(t, err)
	for _, e := range errs {
		t.Error(e)
	}
}

// What make release ships (cmd/qualify, cmd/observe, the guest probe)
// links no test-only package and nothing of a test-only module, on every
// platform it is built for.
func TestShippedBinariesLinkNoTestOnlyCode(t *testing.T) {
	for _, platform := range Platforms {
		deps, err := ListDeps(repoRoot(t), platform, Shipped...)
		assert.NilError(t, err)
		for _, main := range Shipped {
			// A listing that lost the module's own packages would check
			// nothing and pass.
			own := 0
			for _, d := range deps[main] {
				if d.Module == Module {
					own++
				}
			}
			assert.Check(t, own > 0, "%s on %s: no package of %s among %d deps", main, platform, Module, len(deps[main]))
			for _, e := range CheckShipped(main, deps[main], TestOnly, TestOnlyModules) {
				t.Errorf("%s: %s", platform, e)
			}
		}
	}
	// cmd/qualify talks to the Engine: its graph reaches the Engine client,
	// so the listing is the real one.
	deps, err := ListDeps(repoRoot(t), "linux/amd64", Module+"/cmd/qualify")
	assert.NilError(t, err)
	assert.Check(t, slices.Contains(deps[Module+"/cmd/qualify"], Dep{"github.com/moby/moby/client", "github.com/moby/moby/client"}))
}

// A test import that crosses the layering is caught: test variants are
// held to the rules too.
func TestCheckPackagesCatchesTestImport(t *testing.T) {
	pkgs := []Package{
		{ImportPath: Module + "/driver", Deps: []string{Module + "/sandboxapi"}},
		{ImportPath: Module + "/driver", Test: true, Deps: []string{Module + "/qualify/scenario"}},
		{ImportPath: Module + "/qualify/run", Deps: []string{Module + "/driver/internal/enginetest"}},
	}
	got := CheckPackages(pkgs, Layering, TestOnly)
	assert.DeepEqual(t, got, []string{
		Module + "/driver (test) depends on " + Module + "/qualify/scenario (forbidden: " + Module + "/qualify)",
		Module + "/qualify/run (non-test) depends on the test-only package " + Module + "/driver/internal/enginetest",
	})
}

// The driver's tests may use the harness's instruments, and only those;
// an instrument is held to its own rule, not to qualify's: it may reach
// another instrument but neither the driver nor the rest of the harness.
func TestCheckPackagesInstrumentsSitBelowTheDriver(t *testing.T) {
	pkgs := []Package{
		{ImportPath: Module + "/driver", Test: true, Deps: []string{Module + "/qualify/faultproxy", Module + "/qualify/guest/facts", Module + "/testbed/containers"}},
		{ImportPath: Module + "/driver/archive", Test: true, Deps: []string{Module + "/qualify/archivecorpus", Module + "/qualify/evidence"}},
		{ImportPath: Module + "/qualify/dataset", Deps: []string{Module + "/qualify/guest", Module + "/sandboxapi"}},
		{ImportPath: Module + "/qualify/syntheticengine", Deps: []string{Module + "/driver"}},
		{ImportPath: Module + "/qualify/guest", Test: true, Deps: []string{Module + "/qualify/manifest"}},
		{ImportPath: Module + "/qualify/scenario", Deps: []string{Module + "/driver", Module + "/qualify/guest"}},
	}
	assert.DeepEqual(t, CheckPackages(pkgs, Layering, TestOnly), []string{
		Module + "/driver/archive (test) depends on " + Module + "/qualify/evidence (forbidden: " + Module + "/qualify)",
		Module + "/qualify/guest (test) depends on " + Module + "/qualify/manifest (forbidden: " + Module + "/qualify)",
		Module + "/qualify/syntheticengine depends on " + Module + "/driver (forbidden: " + Module + "/driver)",
	})
}

// The platform registry sits just above the profiles: a registry that
// imports the harness (say, to validate scenario names) is caught, and
// so is a profile that reads the registry; the harness's tests may read
// it.
func TestCheckPackagesPlatformsSitAboveProfiles(t *testing.T) {
	pkgs := []Package{
		{ImportPath: Module + "/platforms", Deps: []string{Module + "/profiles", Module + "/qualify/scenario"}},
		{ImportPath: Module + "/profiles", Test: true, Deps: []string{Module + "/platforms"}},
		{ImportPath: Module + "/qualify/evidence", Test: true, Deps: []string{Module + "/platforms", Module + "/profiles"}},
		{ImportPath: Module + "/driver", Test: true, Deps: []string{Module + "/platforms"}},
	}
	assert.DeepEqual(t, CheckPackages(pkgs, Layering, TestOnly), []string{
		Module + "/platforms depends on " + Module + "/qualify/scenario (forbidden: " + Module + "/qualify)",
		Module + "/profiles (test) depends on " + Module + "/platforms (forbidden: " + Module + "/platforms)",
	})
}

// Every package under testbed/ is test support: a shipped binary linking
// any of them is refused, not only the ones listed by name.
func TestCheckShippedRefusesAnyTestbedPackage(t *testing.T) {
	q := Module + "/cmd/qualify"
	deps := []Dep{{Module + "/testbed/newfixture", Module}, {Module + "/qualify/faultproxy", Module}}
	assert.DeepEqual(t, CheckShipped(q, deps, TestOnly, TestOnlyModules), []string{
		q + " (shipped) links the test-only package " + Module + "/testbed/newfixture",
	})
}

// testcontainers-go may start test fixtures but never reach a non-test
// package.
func TestCheckPackagesKeepsTestcontainersInTests(t *testing.T) {
	tc := "github.com/testcontainers/testcontainers-go"
	pkgs := []Package{
		{ImportPath: Module + "/qualify/guest", Test: true, Deps: []string{tc, tc + "/wait"}},
		{ImportPath: Module + "/qualify/guest", Deps: []string{Module + "/qualify/guest/facts"}},
		{ImportPath: Module + "/qualify/scenario", Deps: []string{tc + "/wait"}},
	}
	assert.DeepEqual(t, CheckPackages(pkgs, Layering, TestOnly), []string{
		Module + "/qualify/scenario (non-test) depends on the test-only package " + tc,
	})
}

// A shipped binary that links a fixture or a test-only module's package is
// refused, naming the binary, the package and the module.
func TestCheckShippedCatchesTestOnlyCode(t *testing.T) {
	q := Module + "/cmd/qualify"
	deps := []Dep{
		{Module + "/qualify", Module},
		{Module + "/testbed/containers", Module},
		{"gotest.tools/v3/assert", "gotest.tools/v3"},
		{"github.com/testcontainers/testcontainers-go/wait", "github.com/testcontainers/testcontainers-go"},
		{"fmt", ""},
	}
	assert.DeepEqual(t, CheckShipped(q, deps, TestOnly, TestOnlyModules), []string{
		q + " (shipped) links github.com/testcontainers/testcontainers-go/wait of the test-only module github.com/testcontainers/testcontainers-go",
		q + " (shipped) links gotest.tools/v3/assert of the test-only module gotest.tools/v3",
		q + " (shipped) links the test-only package " + Module + "/testbed/containers",
		q + " (shipped) links the test-only package github.com/testcontainers/testcontainers-go/wait",
	})
}

// A copy of the module layout with a replace directive come back, an
// exclude, a sub-module and a go.work file is refused once per cause, each
// message naming the file (and the go.mod line).
func TestCheckModuleLayoutCatchesSplitAndReplace(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		p := filepath.Join(dir, name)
		assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		assert.NilError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	write("go.mod", "module "+Module+"\n\ngo 1.26.0\n\nrequire example.test/x v1.0.0\n\nexclude example.test/y v1.2.0\n\nreplace example.test/x => ./x\n")
	write("driver/go.mod", "module "+Module+"/driver\n\ngo 1.26.0\n")
	write("driver/testdata/mod/go.mod", "module example.test/fixture\n") // testdata is not a sub-module
	write("go.work", "go 1.26.0\n\nuse .\n")
	errs, err := CheckModuleLayout(dir)
	assert.NilError(t, err)
	assert.DeepEqual(t, errs, []string{
		"driver/go.mod: a sub-module: " + Module + " must be the repository's only module",
		"go.mod:7: exclude example.test/y v1.2.0: go install " + Module + "/cmd/qualify@<version> refuses a module with exclude directives",
		"go.mod:9: replace example.test/x => ./x: go install " + Module + "/cmd/qualify@<version> refuses a module with replace directives",
		"go.work: a workspace file: local builds would resolve modules differently from go install",
	})

	// Another module path, or none at all, is named too.
	write("go.mod", "module example.test/fork\n\ngo 1.26.0\n")
	assert.NilError(t, os.Remove(filepath.Join(dir, "go.work")))
	assert.NilError(t, os.RemoveAll(filepath.Join(dir, "driver")))
	errs, err = CheckModuleLayout(dir)
	assert.NilError(t, err)
	assert.DeepEqual(t, errs, []string{"go.mod: module is example.test/fork, want " + Module})
	assert.NilError(t, os.Remove(filepath.Join(dir, "go.mod")))
	errs, err = CheckModuleLayout(dir)
	assert.NilError(t, err)
	assert.DeepEqual(t, errs, []string{"go.mod: missing: the repository root must hold the module " + Module})
}

// The harness stays free of terminal code: qualify reaching the progress
// display or mpb is a layering error; the command may.
func TestCheckPackagesKeepsTerminalCodeOutOfQualify(t *testing.T) {
	pkgs := []Package{
		{ImportPath: Module + "/qualify", Deps: []string{"github.com/vbauerster/mpb/v8"}},
		{ImportPath: Module + "/qualify/evidence", Deps: []string{Module + "/internal/termprogress"}},
		{ImportPath: Module + "/cmd/qualify", Deps: []string{Module + "/internal/termprogress", "github.com/vbauerster/mpb/v8"}},
		{ImportPath: Module + "/internal/termprogress", Deps: []string{Module + "/qualify", "github.com/vbauerster/mpb/v8"}},
	}
	assert.DeepEqual(t, CheckPackages(pkgs, Layering, TestOnly), []string{
		Module + "/qualify depends on github.com/vbauerster/mpb/v8 (forbidden: github.com/vbauerster/)",
		Module + "/qualify/evidence depends on " + Module + "/internal/termprogress (forbidden: " + Module + "/internal/termprogress)",
	})
}
