package archive_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/driver/archive"
	"github.com/qualbox/qualbox/qualify/archivecorpus"
)

// Every hostile body is rejected by the validator itself, for its own
// reason and naming its entry.
func TestHostilesAreRejectedByValidate(t *testing.T) {
	cases, err := archivecorpus.Hostiles()
	assert.NilError(t, err)
	assert.Equal(t, len(cases), len(archivecorpus.HostileNames))
	reasons := map[string]bool{}
	for i, c := range cases {
		assert.Check(t, is.Equal(c.Name, archivecorpus.HostileNames[i]))
		assert.Check(t, len(c.Body) > 0, c.Name)
		assert.Check(t, !reasons[c.Reason], "reason %q repeats", c.Reason)
		reasons[c.Reason] = true
		_, err := archive.Validate(bytes.NewReader(c.Body))
		var ae *archive.Error
		if !assert.Check(t, errors.As(err, &ae), "%s: %v", c.Name, err) {
			continue
		}
		assert.Check(t, is.ErrorContains(err, c.Reason), c.Name)
		if c.Entry != "" {
			assert.Check(t, is.ErrorContains(err, fmt.Sprintf("%q", c.Entry)), c.Name)
		}
	}
}

func TestHostilesSelectsByName(t *testing.T) {
	cases, err := archivecorpus.Hostiles("fifo", "dotdot")
	assert.NilError(t, err)
	assert.DeepEqual(t, []string{cases[0].Name, cases[1].Name}, []string{"fifo", "dotdot"})
	_, err = archivecorpus.Hostiles("fifo", "nope")
	assert.Check(t, is.ErrorContains(err, `unknown hostile archive "nope"`))
}

func TestTarIsReadableByArchiveTar(t *testing.T) {
	data := archivecorpus.Tar(archivecorpus.Ent{Name: "d/", Type: tar.TypeDir}, archivecorpus.Ent{Name: "d/f", Body: "hello"})
	hdrs, err := archive.Validate(bytes.NewReader(data))
	assert.NilError(t, err)
	assert.DeepEqual(t, hdrs, []archive.Header{{Name: "d", Dir: true, Mode: 0o755}, {Name: "d/f", Mode: 0o644, Size: 5, Offset: archive.BlockSize}})
}

func TestHeadersCarryValidChecksums(t *testing.T) {
	for name, b := range map[string][]byte{
		"raw":        archivecorpus.RawHeader("a", '0', "00000000000\x00", nil),
		"gnu sparse": archivecorpus.GNUSparseHeader("s"),
	} {
		assert.Check(t, is.Len(b, archive.BlockSize), name)
		assert.Check(t, archive.CheckHead(b), name)
	}
	_, err := archive.Validate(bytes.NewReader(append(archivecorpus.GNUSparseHeader("s"), make([]byte, 2*archive.BlockSize)...)))
	assert.Check(t, is.ErrorContains(err, "sparse"))
}
