package depcheck

import (
	"os"
	"path/filepath"
	"strings"
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

// The requirement graph between the workspace's modules follows the same
// layering and has no cycle.
func TestModuleGraph(t *testing.T) {
	edges, err := ModuleEdges(repoRoot(t), Module)
	assert.NilError(t, err)
	assert.Check(t, len(edges) >= 6, "edges: %v", edges)
	assert.Check(t, is.Nil(Cycle(edges)))
	for _, e := range CheckModules(edges, Layering) {
		t.Error(e)
	}
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

// A deliberately added module cycle, in real modules on disk, fails the
// check: two modules that require each other through replace directives.
func TestModuleCycleIsDetected(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		p := filepath.Join(dir, name)
		assert.NilError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		assert.NilError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	write("a/go.mod", "module example.test/x/a\n\ngo 1.26.0\n\nrequire example.test/x/b v0.0.0\n\nreplace example.test/x/b => ../b\n")
	write("b/go.mod", "module example.test/x/b\n\ngo 1.26.0\n\nrequire example.test/x/a v0.0.0\n\nreplace example.test/x/a => ../a\n")
	edges, err := ModuleEdges(dir, "example.test/x")
	assert.NilError(t, err)
	cycle := Cycle(edges)
	assert.Check(t, len(cycle) == 3, "cycle: %v", cycle)
	assert.Check(t, is.Equal(cycle[0], cycle[len(cycle)-1]))
	assert.Check(t, is.Contains(strings.Join(cycle, " "), "example.test/x/b"))

	// The project's own rules catch the same shape: driver requiring qualify.
	errs := CheckModules([]Edge{{Module + "/driver", Module + "/qualify"}, {Module + "/qualify", Module + "/driver"}}, Layering)
	assert.DeepEqual(t, errs, []string{"module " + Module + "/driver requires module " + Module + "/qualify (forbidden: " + Module + "/qualify)"})
}

func TestCycleOnAcyclicGraph(t *testing.T) {
	assert.Check(t, is.Nil(Cycle([]Edge{{"a", "b"}, {"b", "c"}, {"a", "c"}})))
	assert.DeepEqual(t, Cycle([]Edge{{"a", "b"}, {"b", "c"}, {"c", "b"}}), []string{"b", "c", "b"})
}

// testcontainers-go may start test fixtures but never reach a non-test
// package.
func TestCheckPackagesKeepsTestcontainersInTests(t *testing.T) {
	tc := "github.com/testcontainers/testcontainers-go"
	pkgs := []Package{
		{ImportPath: Module + "/testbed/guest", Test: true, Deps: []string{tc, tc + "/wait"}},
		{ImportPath: Module + "/testbed/guest", Deps: []string{Module + "/testbed/guest/facts"}},
		{ImportPath: Module + "/qualify/scenario", Deps: []string{tc + "/wait"}},
	}
	assert.DeepEqual(t, CheckPackages(pkgs, Layering, TestOnly), []string{
		Module + "/qualify/scenario (non-test) depends on the test-only package " + tc,
	})
}
