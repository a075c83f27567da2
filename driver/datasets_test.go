package driver_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
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

// A dataset subpath the Engine cannot mount inside its image fails Start
// with *driver.DatasetSubpathError naming the dataset and subpath only,
// worded the same whether the path is missing from the image, climbs out
// of it, or is an absolute symlink whose target exists on the Engine's host
// or not (so an image cannot probe the host through the error), and
// nothing is left behind. A subpath naming a regular file mounts that file
// read-only (docs/contract.md#datasets).
func TestDatasetSubpathRefusals(t *testing.T) {
	cli := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	spec := dataset.Reference("amd64")
	spec.Entries = append(spec.Entries,
		dataset.Entry{Path: "hostetc", Symlink: "/etc"},
		dataset.Entry{Path: "hostabsent", Symlink: "/qualbox-no-such-host-path"})
	img, err := dataset.Build(ctx, cli, spec)
	t.Cleanup(func() {
		if img.ID != "" {
			assert.Check(t, dataset.Remove(context.Background(), cli, img.ID))
		}
	})
	assert.NilError(t, err)
	withSubpath := func(sub string) *driver.Backend {
		return newBackend(t, func(c *driver.Config) {
			c.Datasets = []driver.Dataset{{Name: "whole", ImageID: img.ID}, {Name: "sub", ImageID: img.ID, Subpath: &sub}}
		})
	}
	if _, err := withSubpath("corpus").Admit(ctx); err != nil {
		var admErr *driver.AdmissionError
		assert.Assert(t, errors.As(err, &admErr), "%v", err)
		t.Skipf("this Engine cannot attach datasets (TestDatasetMounts checks the refusal): %v", err)
	}

	var messages []string
	for _, sub := range []string{"escape", "hostetc", "hostabsent", "no-such-entry"} {
		t.Run(sub, func(t *testing.T) {
			res, err := withSubpath(sub).Reserve(sandboxapi.Request{Policy: enginetest.Policy()}, sandboxapi.InProcess())
			assert.NilError(t, err)
			t.Cleanup(func() { destroyAndCheck(t, res) })
			sb, err := res.Start(ctx)
			assert.Check(t, sb == nil)
			var de *driver.DatasetSubpathError
			assert.Assert(t, errors.As(err, &de), "%v", err)
			assert.DeepEqual(t, de.Datasets, []driver.DatasetRef{{Index: 1, Name: "sub", Subpath: sub}})
			var ve *sandboxapi.ValidationError
			assert.Assert(t, errors.As(err, &ve), "%v", err)
			assert.Equal(t, ve.Issues[0].PathString(), "Datasets[1].Subpath")
			msg := err.Error()
			for _, host := range []string{"/var/lib", "/etc", "qualbox-no-such-host-path", "base directory", "no such file"} {
				assert.Check(t, !strings.Contains(msg, host), "the error names the Engine's host (%q): %s", host, msg)
			}
			messages = append(messages, strings.ReplaceAll(msg, strconv.Quote(sub), `"<subpath>"`))
		})
	}
	assert.Assert(t, len(messages) == 4, "every refusal must be typed")
	for _, m := range messages[1:] {
		assert.Equal(t, m, messages[0], "the refusals must read the same whatever the cause")
	}

	t.Run("regular file", func(t *testing.T) {
		sb := started(t, withSubpath("readme.txt"), enginetest.Policy())
		r := run(t, sb, nil, "/bin/sh", "-c", "cat /datasets/sub; "+guest.ProbePath+" fill /datasets/sub 1")
		assert.Equal(t, r.exit.String(), sandboxapi.Exited(0).String(), "stderr: %s", r.stderr)
		out := string(r.stdout)
		assert.Check(t, strings.HasPrefix(out, "qualbox reference dataset\n"), "%s", out)
		var fill facts.Result
		assert.NilError(t, json.Unmarshal([]byte(strings.TrimPrefix(out, "qualbox reference dataset\n")), &fill), "%s", out)
		assert.Check(t, fill.Errno == "EROFS" || fill.Errno == "EACCES", "%+v", fill)
	})
}
