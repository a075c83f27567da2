package scenario

import (
	"testing"
	"testing/fstest"
)

// The catalogue digest covers every non-test source and changes with any
// byte of one; test files do not move it.
func TestCatalogueDigest(t *testing.T) {
	base := fstest.MapFS{
		"a.go": {Data: []byte("package scenario\n")},
		"b.go": {Data: []byte("package scenario // b\n")},
	}
	d := catalogueDigest(base)
	if d != catalogueDigest(base) || len(d) != 64 {
		t.Fatalf("digest %q is not a stable SHA-256", d)
	}
	withTest := fstest.MapFS{"a.go": base["a.go"], "b.go": base["b.go"], "b_test.go": {Data: []byte("package scenario\n")}}
	if catalogueDigest(withTest) != d {
		t.Error("a test file changed the catalogue digest")
	}
	edited := fstest.MapFS{"a.go": base["a.go"], "b.go": {Data: []byte("package scenario // c\n")}}
	if catalogueDigest(edited) == d {
		t.Error("an edited scenario source kept the catalogue digest")
	}
	// Moving bytes between files is an edit too.
	moved := fstest.MapFS{"a.go": {Data: []byte("package scenario\npackage scenario")}, "b.go": {Data: []byte(" // b\n")}}
	if catalogueDigest(moved) == d {
		t.Error("bytes moved between files kept the catalogue digest")
	}
	if CatalogueSHA256 == "" || CatalogueSHA256 == catalogueDigest(fstest.MapFS{}) {
		t.Errorf("the embedded catalogue digest %q covers no sources", CatalogueSHA256)
	}
}
