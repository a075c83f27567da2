package driver_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/qualify/dataset"
	"github.com/qualbox/qualbox/qualify/guest"
	"github.com/qualbox/qualbox/qualify/guest/facts"
	"github.com/qualbox/qualbox/sandboxapi"
)

// A dataset image of another architecture than the workload, attached
// whole and through an internal symlink alias (docs/contract.md#datasets).
// On an Engine without image mounts (lane A) admission refuses exactly the
// dataset rows; on one with them (lane B) the guest sees the image's
// content read-only and the image outlives the sandbox.
func TestDatasetMounts(t *testing.T) {
	cli := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	spec := dataset.Reference("arm64")
	img, err := dataset.Build(ctx, cli, spec)
	t.Cleanup(func() {
		if img.ID != "" {
			assert.Check(t, dataset.Remove(context.Background(), cli, img.ID))
		}
	})
	assert.NilError(t, err)
	alias := "alias"
	b := newBackend(t, func(c *driver.Config) {
		c.Datasets = []driver.Dataset{{Name: "ref", ImageID: img.ID}, {Name: "aliased", ImageID: img.ID, Subpath: &alias}}
	})
	adm, err := b.Admit(ctx)
	var admErr *driver.AdmissionError
	if errors.As(err, &admErr) {
		for _, c := range admErr.Failed {
			assert.Check(t, strings.HasPrefix(c.Name, "datasets: "), "a non-dataset row failed: %s: want %s, got %s", c.Name, c.Want, c.Got)
		}
		t.Logf("this Engine cannot attach datasets (checked): %v", err)
		return
	}
	assert.NilError(t, err)
	assert.Check(t, is.Contains(checkGot(adm, "datasets: Engine identity"), "admitted by "))

	sb := started(t, b, enginetest.Policy())
	r := run(t, sb, nil, "/bin/sh", "-c", guest.ProbePath+" tree /datasets/aliased; "+guest.ProbePath+" fill /datasets/ref/new 1")
	assert.Equal(t, r.exit.String(), sandboxapi.Exited(0).String(), "stderr: %s", r.stderr)
	lines := strings.Split(strings.TrimSpace(string(r.stdout)), "\n")
	assert.Equal(t, len(lines), 2, "%s", r.stdout)
	var tree, fill facts.Result
	assert.NilError(t, json.Unmarshal([]byte(lines[0]), &tree))
	assert.NilError(t, json.Unmarshal([]byte(lines[1]), &fill))
	want, ok := spec.Expected(alias)
	assert.Assert(t, ok)
	assert.DeepEqual(t, tree.Tree, want)
	assert.Equal(t, fill.Errno, "EROFS", "%+v", fill)

	destroyAndCheck(t, sb)
	in, err := cli.ImageInspect(ctx, img.ID)
	assert.NilError(t, err, "the borrowed dataset image must outlive the sandbox")
	assert.Equal(t, in.Architecture, "arm64")
}

func checkGot(a *driver.Admission, name string) string {
	for _, c := range a.Checks {
		if c.Name == name {
			return c.Got
		}
	}
	return ""
}
