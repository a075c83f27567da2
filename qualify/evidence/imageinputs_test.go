package evidence_test

import (
	"errors"
	"slices"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify/evidence"
)

// A record parses into its fields; each way a record can be out of
// shape is an *ImageInputsError naming the line (0: the record) and
// what is wrong with it.
func TestParseImageInputs(t *testing.T) {
	build := []string{"dockerd 29.1.4 git moby/moby tag docker-v29.1.4", "store containerd"}
	rec := laneDRecord(build)
	in, err := evidence.ParseImageInputs(rec.lines())
	assert.NilError(t, err)
	assert.Check(t, is.Equal(in.Arch, "arm64"))
	assert.Check(t, is.Equal(in.CgroupDriver, "systemd"))
	assert.Check(t, is.Equal(in.Key, laneDKeyOf(rec)))
	assert.Check(t, is.Equal(in.TupleSHA256, evidence.RecordSHA256(build)))
	assert.Check(t, is.Equal(in.Kernel, "linux-image-6.1.0-57-arm64 6.1.192-3"))
	assert.Check(t, is.Equal(in.DpkgCount, 187))
	assert.Check(t, is.Len(in.Debs, 12))

	swap := func(ls []string, i, j int) []string { ls = slices.Clone(ls); ls[i], ls[j] = ls[j], ls[i]; return ls }
	for _, tc := range []struct {
		name  string
		lines []string
		line  int
		want  string
	}{
		{"unknown name", append(rec.lines(), "colour blue"), 23, `unknown name "colour"`},
		{"out of order", append(rec.lines(), "arch arm64"), 23, `"arch" after "deb"`},
		{"swapped", imageRecord{swap(rec.head, 0, 1), rec.tail}.lines(), 1, `"arch" before the required "suite"`},
		{"repeated", imageRecord{append([]string{"suite bookworm"}, rec.head...), rec.tail}.lines(), 2, `a second "suite"`},
		{"required line missing", rec.set("recipe", "").lines(), 5, `"kernel-package" before the required "recipe"`},
		{"digest not hex", rec.set("recipe", "sha256:xyz").lines(), 5, `recipe "sha256:xyz" is not of its shape`},
		{"unknown cgroup driver", rec.set("cgroup-driver", "none").lines(), 3, `cgroup-driver "none" is not of its shape`},
		{"package listed twice", rec.set("packages", "systemd systemd").lines(), 4, `packages "systemd systemd" is not of its shape`},
		{"two spaces", rec.set("arch", "arm64  x").lines(), 2, `want "<name> <value>"`},
		{"no value", rec.set("arch", " ").lines(), 2, `want "<name> <value>"`},
		{"package count not a number", rec.set("dpkg", "sha256:"+evidence.RecordSHA256(nil)+" many packages").lines(), 10, "is not of its shape"},
		{"no key", append(slices.Clone(rec.head), rec.tail...), 8, `"kernel" before the required "key"`},
		{"deb lines unsorted", imageRecord{rec.head, swap(rec.tail, 2, 3)}.lines(), 0, "deb lines name busybox-static apparmor containerd"},
		{"empty record", nil, 0, `no "suite" line`},
	} {
		_, err := evidence.ParseImageInputs(tc.lines)
		var ie *evidence.ImageInputsError
		if !assert.Check(t, errors.As(err, &ie), "%s: %v", tc.name, err) {
			continue
		}
		assert.Check(t, is.Equal(ie.Line, tc.line), tc.name)
		assert.Check(t, is.Contains(ie.Problem, tc.want), tc.name)
	}
}

// laneDKeyOf is rec's key as its lines render it.
func laneDKeyOf(rec imageRecord) string { return rec.lines()[len(rec.head)][len("key "):] }
