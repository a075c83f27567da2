package scenario

import (
	"errors"
	"fmt"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/qualify/dataset"
)

const dsID = "sha256:3cefecd23a478ffa95d45a8731acc44fe169fcf91c71485fe8b3b15eac7719ec"

// goodInventory is lane B's readback of a compute container with the
// scenario's two datasets (recorded from a run).
func goodInventory() MountInventory {
	return MountInventory{
		Requested: []mount.Mount{
			{Type: mount.TypeVolume, Source: "vol", Target: "/workspace", VolumeOptions: &mount.VolumeOptions{NoCopy: true}},
			{Type: mount.TypeImage, Source: dsID, Target: "/datasets/ref", ReadOnly: true},
			{Type: mount.TypeImage, Source: dsID, Target: "/datasets/aliased", ReadOnly: true, ImageOptions: &mount.ImageOptions{Subpath: "alias"}},
		},
		Effective: []container.MountPoint{
			{Type: mount.TypeVolume, Name: "vol", Destination: "/workspace", RW: true},
			{Type: mount.TypeImage, Name: dsID, Source: "/var/lib/x/1", Destination: "/datasets/ref", Propagation: mount.PropagationRPrivate},
			{Type: mount.TypeImage, Name: dsID, Source: "/var/lib/x/2", Destination: "/datasets/aliased", Propagation: mount.PropagationRPrivate},
		},
	}
}

var selected = []driver.Dataset{{Name: "ref", ImageID: dsID}, {Name: "aliased", ImageID: dsID, Subpath: ptr("alias")}}

// Each inventory check fails for the reason it exists: a writable, foreign,
// missing, unselected or re-pathed dataset mount.
func TestDatasetMountProblems(t *testing.T) {
	assert.DeepEqual(t, datasetMountProblems(goodInventory(), selected), []string(nil))
	for name, mutate := range map[string]func(*MountInventory){
		"effective read-write":   func(i *MountInventory) { i.Effective[1].RW = true },
		"requested read-write":   func(i *MountInventory) { i.Requested[1].ReadOnly = false },
		"another image":          func(i *MountInventory) { i.Effective[2].Name = "sha256:" + dsID[8:70] + "00" },
		"subpath dropped":        func(i *MountInventory) { i.Requested[2].ImageOptions = nil },
		"shared propagation":     func(i *MountInventory) { i.Effective[1].Propagation = mount.PropagationRShared },
		"missing effective":      func(i *MountInventory) { i.Effective = i.Effective[:2] },
		"bind instead of image":  func(i *MountInventory) { i.Effective[1].Type = mount.TypeBind },
		"unselected image mount": func(i *MountInventory) { i.Effective[2].Destination = "/datasets/other" },
	} {
		inv := goodInventory()
		mutate(&inv)
		assert.Check(t, len(datasetMountProblems(inv, selected)) > 0, name)
	}
	// The export accessor mounts no dataset: the compute inventory fails that.
	assert.Check(t, len(datasetMountProblems(goodInventory(), nil)) > 0)
}

func TestExportDatasetLeaks(t *testing.T) {
	spec := dataset.Reference("arm64")
	clean := []treeEntry{{Path: "private-a", Kind: "file"}}
	assert.DeepEqual(t, exportDatasetLeaks(clean, spec), []string(nil))
	leaked := append(clean, treeEntry{Path: "corpus/a.txt", Kind: "file"}, treeEntry{Path: "datasets/ref/readme.txt", Kind: "file"})
	assert.DeepEqual(t, exportDatasetLeaks(leaked, spec), []string{"corpus/a.txt", "datasets/ref/readme.txt"})
}

func TestDatasetsApplicable(t *testing.T) {
	onlyDatasets := &driver.AdmissionError{Profile: "p", Failed: []driver.Check{{Name: "datasets: API version", Want: ">= 1.48", Got: "1.41"}}}
	reason, ok := datasetsApplicable(fmt.Errorf("wrapped: %w", onlyDatasets))
	assert.Check(t, !ok)
	assert.Equal(t, reason, "wrapped: "+onlyDatasets.Error())
	mixed := &driver.AdmissionError{Profile: "p", Failed: []driver.Check{{Name: "datasets: API version"}, {Name: "/info CgroupDriver"}}}
	_, ok = datasetsApplicable(mixed)
	assert.Check(t, ok, "a non-dataset failure must fail the scenario, not excuse it")
	_, ok = datasetsApplicable(&driver.AdmissionError{Profile: "p", Failed: []driver.Check{{Name: "dataset ref", Got: "absent"}}})
	assert.Check(t, ok, "an absent dataset image is a failure, not an Engine limitation")
	_, ok = datasetsApplicable(errors.New("engine down"))
	assert.Check(t, ok)
	_, ok = datasetsApplicable(nil)
	assert.Check(t, ok)
}
