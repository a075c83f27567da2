package driver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify/syntheticengine"
	"github.com/qualbox/qualbox/sandboxapi"
)

const (
	nativeProfile  = "desktop-apple-virtualization-native-arm64"
	rosettaProfile = "desktop-apple-virtualization-rosetta-amd64"
)

var appleSilicon = profiles.Platform{OS: "darwin", Architecture: "arm64"}

// syntheticDesktop serves shape on a synthetic Engine (no Docker Desktop
// runs) and returns it with a backend of profile whose workload image is
// imageID. The socket lives in a short temporary directory: sockaddr_un
// paths are limited to about 100 bytes.
func syntheticDesktop(t *testing.T, shape syntheticengine.Shape, profile, imageID string, datasets ...Dataset) (*syntheticengine.Server, *Backend) {
	t.Helper()
	dir, err := os.MkdirTemp("", "qb-synth-")
	assert.NilError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	srv, err := syntheticengine.Start(dir, shape)
	assert.NilError(t, err)
	t.Cleanup(func() { assert.Check(t, srv.Close()) })
	b, err := New(Config{
		Profile: profile, Endpoint: srv.Endpoint(), Namespace: "synthetic",
		// Never created: a Desktop profile on this controller must be
		// rejected before the spill directory is looked at.
		SpillDirectory: filepath.Join(dir, "no-such-spill"),
		ImageID:        imageID, User: User{UID: 65534, GID: 65534}, Datasets: datasets,
	})
	assert.NilError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return srv, b
}

func failedNames(a *Admission) []string {
	var out []string
	for _, c := range a.Failed() {
		out = append(out, c.Name)
	}
	return out
}

// Both Desktop profiles against every synthetic shape, with the controller
// played as darwin/arm64: the recorded Desktop daemon is admitted, each
// negative shape fails exactly its own rows.
func TestDesktopAdmissionMatrixOnSyntheticEngine(t *testing.T) {
	want := map[string][]string{
		"desktop":               nil,
		"rootless":              {"rootless/userns"},
		"userns":                {"rootless/userns"},
		"no-memory-limit":       {"/info MemoryLimit"},
		"no-swap-limit":         {"/info SwapLimit"},
		"no-pids-limit":         {"/info PidsLimit"},
		"no-cpu-cfs-period":     {"/info CpuCfsPeriod"},
		"no-cpu-cfs-quota":      {"/info CpuCfsQuota"},
		"amd64-daemon":          {"/version Arch", "/info Architecture"},
		"systemd-cgroup-driver": {"/info CgroupDriver"},
		"apparmor":              {"AppArmor"},
		"cgroup-v1":             {"/info CgroupVersion"},
		"no-builtin-seccomp":    {"seccomp"},
		"no-cgroupns":           {"cgroupns"},
		"not-desktop":           {"/info OperatingSystem"},
		"api-1.51":              {"API version range"},
		"min-api-1.53":          {"API version range"},
		"no-images":             {"image"},
	}
	for _, p := range []struct{ profile, image, wrongImage string }{
		{nativeProfile, syntheticengine.ImageArm64, syntheticengine.ImageAmd64},
		{rosettaProfile, syntheticengine.ImageAmd64, syntheticengine.ImageArm64},
	} {
		for _, v := range syntheticengine.Variants() {
			t.Run(p.profile+"/"+v.Name, func(t *testing.T) {
				exp, ok := want[v.Name]
				assert.Assert(t, ok, "variant %s has no expectation", v.Name)
				_, b := syntheticDesktop(t, v.Shape(), p.profile, p.image)
				adm, err := b.AdmitAs(context.Background(), appleSilicon)
				assert.Assert(t, adm != nil, "%v", err)
				assert.DeepEqual(t, failedNames(adm), exp)
				assert.Equal(t, adm.Controller, "darwin/arm64 (played by "+runtimeTuple()+" for a synthetic Engine)")
				if exp == nil {
					assert.NilError(t, err)
					return
				}
				var admErr *AdmissionError
				assert.Assert(t, errors.As(err, &admErr), "%v", err)
				var unsupported *sandboxapi.UnsupportedError
				assert.Check(t, errors.As(err, &unsupported))
			})
		}
		t.Run(p.profile+"/wrong-image-architecture", func(t *testing.T) {
			_, b := syntheticDesktop(t, syntheticengine.Desktop(), p.profile, p.wrongImage)
			adm, err := b.AdmitAs(context.Background(), appleSilicon)
			assert.Assert(t, adm != nil, "%v", err)
			assert.DeepEqual(t, failedNames(adm), []string{"image Architecture"})
		})
	}
}

// Exact error text of one shape: the row, what the profile wants and what
// the synthetic daemon reported.
func TestDesktopRootlessErrorText(t *testing.T) {
	_, b := syntheticDesktop(t, syntheticengine.Variants()[1].Shape(), nativeProfile, syntheticengine.ImageArm64)
	_, err := b.AdmitAs(context.Background(), appleSilicon)
	assert.Error(t, err, `driver: Engine does not match profile desktop-apple-virtualization-native-arm64: rootless/userns: want none in SecurityOptions, got ["name=rootless"]`)
}

// Datasets on the Desktop daemon: the recorded Engine 29.1.4 with the
// containerd image store is admitted by the stable-release rule.
func TestDesktopDatasetsAdmittedByStableRelease(t *testing.T) {
	shape := syntheticengine.Desktop()
	ds := "sha256:" + strings.Repeat("d", 64)
	img := shape.Images[syntheticengine.ImageAmd64]
	img.ID = ds
	shape.Images[ds] = img
	_, b := syntheticDesktop(t, shape, nativeProfile, syntheticengine.ImageArm64, Dataset{Name: "ref", ImageID: ds})
	adm, err := b.AdmitAs(context.Background(), appleSilicon)
	assert.NilError(t, err)
	for _, c := range adm.Checks {
		if c.Name == "datasets: Engine identity" {
			assert.Equal(t, c.Got, `Version "29.1.4"; admitted by stable-release`)
			return
		}
	}
	t.Fatal("no datasets: Engine identity row")
}

// On this (non-darwin) controller a Desktop profile is rejected before the
// spill directory or the Engine is touched, in every entry point: start,
// admission, reconcile and cleanup (docs/contract.md#profiles-and-admission).
func TestDesktopProfileRejectedBeforeSpillOrEngine(t *testing.T) {
	if hostController().matches(mustProfile(t, nativeProfile)) {
		t.Skip("this controller is darwin/arm64: the Desktop profiles are admissible here")
	}
	ctx := context.Background()
	for _, profile := range []string{nativeProfile, rosettaProfile} {
		t.Run(profile, func(t *testing.T) {
			srv, b := syntheticDesktop(t, syntheticengine.Desktop(), profile, syntheticengine.ImageArm64)
			wantMsg := "profile " + profile + " requires a darwin/arm64 controller, this one is " + runtimeTuple()

			// Admission: only the controller row, no Engine facts.
			adm, err := b.Admit(ctx)
			assert.Error(t, err, "driver: Engine does not match profile "+profile+": controller: want darwin/arm64, got "+runtimeTuple())
			assert.Equal(t, len(adm.Checks), 1)
			assert.Equal(t, adm.Engine.DaemonID, "")

			// Start: the missing spill directory is never reported.
			res, err := b.Reserve(sandboxapi.Request{Policy: enginetest.Policy()}, sandboxapi.InProcess())
			assert.NilError(t, err)
			_, err = res.Start(ctx)
			assert.ErrorContains(t, err, wantMsg)
			assert.Check(t, !strings.Contains(err.Error(), "spill"), "%v", err)

			// Reconcile and cleanup of a record whose compute create was
			// dispatched (so cleanup would have to ask the Engine).
			rec := dispatchedRecord(t, b)
			_, err = b.Reconcile(ctx, rec)
			assert.ErrorContains(t, err, wantMsg)
			owner := b.cleanupOwner(rec)
			assert.ErrorContains(t, owner.Stop(ctx), wantMsg)
			assert.ErrorContains(t, owner.Destroy(ctx), wantMsg)

			assert.Check(t, is.Len(srv.Requests(), 0), "the synthetic Engine was reached: %q", srv.Requests())
		})
	}
}

// The seam plays the platform for the whole backend in internal tests:
// with darwin/arm64 played, reconcile gets past the controller and reaches
// the synthetic Engine's /version and /info.
func TestPlayedControllerReachesTheEngine(t *testing.T) {
	srv, b := syntheticDesktop(t, syntheticengine.Desktop(), nativeProfile, syntheticengine.ImageArm64)
	b.controller = controllerPlatform{Platform: appleSilicon, played: true}
	rec := dispatchedRecord(t, b)
	_, err := b.Reconcile(context.Background(), rec)
	// The synthetic Engine replays admission only: the container lookup
	// that follows is refused.
	assert.ErrorContains(t, err, "synthetic Engine replays admission only")
	reqs := strings.Join(srv.Requests(), "\n")
	assert.Check(t, is.Contains(reqs, "/version"))
	assert.Check(t, is.Contains(reqs, "/info"))
}

func mustProfile(t *testing.T, name string) profiles.Profile {
	t.Helper()
	p, err := profiles.Load(name)
	assert.NilError(t, err)
	return p
}

// dispatchedRecord is a record of b whose compute create was dispatched
// against the synthetic daemon: cleanup or reconcile must ask the Engine.
func dispatchedRecord(t *testing.T, b *Backend) sandboxapi.RecoveryRecord {
	t.Helper()
	norm, err := sandboxapi.Request{Policy: enginetest.Policy()}.Normalize()
	assert.NilError(t, err)
	rec := newRecoveryRecord(&b.cfg, b.ns, b.profile.BackendRevision, norm.Policy)
	rec.Phase = sandboxapi.PhaseStarting
	rec.Authority = sandboxapi.Authority{Kind: sandboxapi.AuthorityVerified, BackendIdentity: syntheticengine.Desktop().Info.ID}
	for i := range rec.Resources {
		if rec.Resources[i].Role == sandboxapi.RoleCompute {
			rec.Resources[i].Identity = sandboxapi.ResourceIdentity{Kind: sandboxapi.IdentityCreating}
		}
	}
	assert.NilError(t, rec.Validate())
	return rec
}
