package scenario

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/syntheticengine"
)

// laneDReports holds lane D's committed, signed reports of a real arm64
// Engine (docs/lanes.md#lane-d), one directory per run named by its start
// time; laneDKeys holds the committed public keys that may have signed them.
const (
	laneDReports = "../../reports/linux-arm64"
	laneDKeys    = "../../reports/keys"
)

// realArm64Engine returns the Engine facts lane D's newest report recorded,
// after verifying the report's signature with one of the committed keys:
// the synthetic Desktop Engine is checked against evidence, never against
// a file anyone could edit.
func realArm64Engine(t *testing.T) driver.EngineFacts {
	t.Helper()
	runs, err := filepath.Glob(filepath.Join(laneDReports, "*", "evidence.dsse.json"))
	assert.NilError(t, err)
	assert.Assert(t, len(runs) > 0, "no lane D report under %s", laneDReports)
	slices.Sort(runs)
	newest := filepath.Dir(runs[len(runs)-1])
	keys, err := filepath.Glob(filepath.Join(laneDKeys, "*.pub"))
	assert.NilError(t, err)
	var errs []string
	for _, k := range keys {
		key, err := attest.LoadPublicKey(k)
		assert.NilError(t, err)
		s, err := evidence.VerifyRun(context.Background(), newest, key)
		if err != nil {
			errs = append(errs, k+": "+err.Error())
			continue
		}
		assert.Equal(t, s.Run.Profile, "linux-arm64")
		return s.Run.Engine
	}
	t.Fatalf("%s verifies with none of the keys under %s: %v", newest, laneDKeys, errs)
	return driver.EngineFacts{}
}

// syntheticArm64Engine admits the native arm64 Desktop profile on the
// synthetic Engine as darwin/arm64 and returns the facts the driver read.
func syntheticArm64Engine(t *testing.T, shape syntheticengine.Shape) driver.EngineFacts {
	t.Helper()
	srv, err := syntheticengine.Start(t.TempDir(), shape)
	assert.NilError(t, err)
	defer srv.Close()
	_, adm, err := desktopAdmit(context.Background(), desktopEnv(t), srv, nativeArm64, syntheticengine.ImageArm64, true)
	assert.NilError(t, err)
	assert.Assert(t, adm != nil)
	return adm.Engine
}

// componentNames are the /version component names, without versions.
func componentNames(f driver.EngineFacts) []string {
	var out []string
	for _, c := range f.Components {
		name, _, _ := strings.Cut(c, " ")
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// drift lists where the synthetic arm64 Desktop Engine's replies differ
// from a real arm64 Engine of the same release, beyond what makes it
// Docker Desktop (operating system, linuxkit kernel, cgroupfs driver, no
// AppArmor, its own daemon ID, Go release and component commits): the
// architectures, the release and its API range, the image store, the
// component names and the security options other than AppArmor, and
// every fact the real Engine reports but the synthetic one leaves empty.
func drift(real, synth driver.EngineFacts) []string {
	var out []string
	same := func(name, r, s string) {
		if r != s {
			out = append(out, name+": real "+r+", synthetic "+s)
		}
	}
	same("/version Arch", real.Arch, synth.Arch)
	same("/info Architecture", real.Architecture, synth.Architecture)
	same("/version Os", real.Os, synth.Os)
	same("/info OSType", real.OSType, synth.OSType)
	same("/version Version", real.Version, synth.Version)
	same("/version GitCommit", real.GitCommit, synth.GitCommit)
	same("/version ApiVersion", real.APIVersion, synth.APIVersion)
	same("/version MinAPIVersion", real.MinAPIVersion, synth.MinAPIVersion)
	same("/info CgroupVersion", real.CgroupVersion, synth.CgroupVersion)
	same("/info Driver", real.StorageDriver, synth.StorageDriver)
	same("/info DriverStatus", strings.Join(flat(real.DriverStatus), " "), strings.Join(flat(synth.DriverStatus), " "))
	same("/version Components", strings.Join(componentNames(real), " "), strings.Join(componentNames(synth), " "))
	opts := func(f driver.EngineFacts) string {
		var o []string
		for _, s := range f.SecurityOptions {
			if !strings.HasPrefix(s, "name=apparmor") {
				o = append(o, s)
			}
		}
		slices.Sort(o)
		return strings.Join(o, " ")
	}
	same("/info SecurityOptions (AppArmor aside)", opts(real), opts(synth))
	for _, f := range []struct{ name, real, synth string }{
		{"/info ID", real.DaemonID, synth.DaemonID},
		{"/version KernelVersion", real.KernelVersion, synth.KernelVersion},
		{"/info OperatingSystem", real.OperatingSystem, synth.OperatingSystem},
		{"/info CgroupDriver", real.CgroupDriver, synth.CgroupDriver},
		{"/version GoVersion", real.GoVersion, synth.GoVersion},
		{"containerd commit", real.ContainerdCommit, synth.ContainerdCommit},
		{"runc commit", real.RuncCommit, synth.RuncCommit},
	} {
		if f.real != "" && f.synth == "" {
			out = append(out, f.name+": real "+f.real+", synthetic empty")
		}
	}
	return out
}

func flat(pairs [][2]string) []string {
	var out []string
	for _, p := range pairs {
		out = append(out, p[0]+"="+p[1])
	}
	return out
}

// The synthetic arm64 Desktop Engine answers as a real arm64 Engine of its
// release does (lane D's, recorded in a signed report), apart from what
// makes it Docker Desktop; the synthetic matrix cannot drift from a real
// arm64 Engine unnoticed.
func TestSyntheticArm64EngineMatchesARealOne(t *testing.T) {
	real := realArm64Engine(t)
	assert.Equal(t, real.Arch, "arm64")
	assert.Equal(t, real.Architecture, "aarch64")
	synth := syntheticArm64Engine(t, syntheticengine.Desktop())
	assert.DeepEqual(t, drift(real, synth), []string(nil))
}

// The comparison fails for the drift it exists to catch: the amd64 daemon
// variant's architectures, and a component the real Engine has removed.
func TestSyntheticArm64DriftIsCaught(t *testing.T) {
	real := realArm64Engine(t)
	var amd64 syntheticengine.Shape
	for _, v := range syntheticengine.Variants() {
		if v.Name == "amd64-daemon" {
			amd64 = v.Shape()
		}
	}
	assert.Assert(t, amd64.Name != "", "no amd64-daemon variant")
	got := drift(real, syntheticArm64Engine(t, amd64))
	assert.Check(t, is.Contains(strings.Join(got, "\n"), "/version Arch: real arm64, synthetic amd64"), "%v", got)
	assert.Check(t, is.Contains(strings.Join(got, "\n"), "/info Architecture: real aarch64, synthetic x86_64"), "%v", got)

	shape := syntheticengine.Desktop()
	shape.Version.Components = shape.Version.Components[:len(shape.Version.Components)-1]
	got = drift(real, syntheticArm64Engine(t, shape))
	assert.Check(t, is.Len(got, 1), "%v", got)
	assert.Check(t, is.Contains(strings.Join(got, "\n"), "/version Components"), "%v", got)

	// A fact the real Engine reports and the synthetic one leaves empty.
	shape = syntheticengine.Desktop()
	for _, c := range shape.Version.Components {
		if c.Name == "Engine" {
			delete(c.Details, "GoVersion")
		}
	}
	got = drift(real, syntheticArm64Engine(t, shape))
	assert.Check(t, is.DeepEqual(got, []string{"/version GoVersion: real " + real.GoVersion + ", synthetic empty"}))
}
