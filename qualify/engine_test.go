package qualify_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/skip"

	"github.com/qualbox/qualbox/internal/testengine"
	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/guest"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

const shippedManifest = "../manifests/linux-x64-cgroupv1.yaml"

// engineClient returns a client of the shipped manifest's Engine, or nil
// when nothing answers there.
func engineClient(t *testing.T, endpoint string) *client.Client {
	t.Helper()
	cli, err := client.New(client.WithHost(endpoint))
	assert.NilError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		return nil
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestRealEngineEndToEnd runs the shipped manifest's whole catalogue through
// the runner against the Engine, with an image built for the test, and
// checks every scenario passed and nothing the run created remains.
func TestRealEngineEndToEnd(t *testing.T) {
	reg := scenario.Default()
	m, err := manifest.Load(shippedManifest, reg)
	assert.NilError(t, err)
	socket := testengine.Require(t)
	skip.If(t, m.Endpoint != "unix://"+socket, "the shipped manifest names %s, the test Engine is at %s", m.Endpoint, socket)
	cli := engineClient(t, m.Endpoint)
	assert.Assert(t, cli != nil, "the Engine at %s stopped answering", m.Endpoint)
	_, err = os.Stat(guest.DefaultBusybox)
	skip.If(t, err != nil, "Debian's static busybox is not installed at %s (make engine installs it)", guest.DefaultBusybox)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	img, err := guest.Build(ctx, cli, guest.BuildOptions{})
	assert.NilError(t, err)
	removed := false
	t.Cleanup(func() {
		if !removed {
			assert.Check(t, guest.Remove(context.Background(), cli, img.ID))
		}
	})

	keys := t.TempDir()
	_, pubPath, err := attest.GenerateKey(keys)
	assert.NilError(t, err)
	priv, err := attest.LoadPrivateKey(filepath.Join(keys, attest.PrivateKeyFile))
	assert.NilError(t, err)
	out := filepath.Join(t.TempDir(), "run")
	run, err := qualify.Run(ctx, qualify.Config{
		Manifest: m, Output: out, Registry: reg, Engine: cli, ImageID: img.ID, ImageSource: "build", SigningKey: priv,
		RemoveImage: func(ctx context.Context) error {
			removed = true
			return guest.Remove(ctx, cli, img.ID)
		},
		Stderr: testWriter{t},
	})
	assert.NilError(t, err)
	assert.Equal(t, qualify.ExitCode(run.Run, nil), 0)
	assert.Equal(t, run.Verdict.Kind, evidence.Passed)
	assert.Equal(t, run.Engine.CgroupVersion, "1")
	assert.Assert(t, run.Admission.OK, "header admission: %s", run.Admission.Error)
	assert.Assert(t, run.Image.Removed != nil && *run.Image.Removed, "image removal: %s", run.Image.RemoveError)
	_, err = cli.ImageInspect(ctx, img.ID)
	assert.Assert(t, cerrdefs.IsNotFound(err), "image %s still present: %v", img.ID, err)

	names := map[string]bool{}
	for _, sum := range run.Scenarios {
		names[sum.Name] = true
		switch {
		case sum.Name == "datasets" && sum.Verdict.Kind == evidence.NotApplicable:
			// An Engine without image mounts (lane A) refuses datasets at
			// admission, and the reason names the refused rows.
			assert.Check(t, strings.Contains(sum.Verdict.Reason, "datasets:"), "%s: %s", sum.Name, sum.Verdict)
		case sum.Name == "engine-restart":
			// Lane A's manifest gives no restart command: its Engine is
			// shared and never restarted.
			assert.Check(t, sum.Verdict.Kind == evidence.NotApplicable && sum.Verdict.Reason == scenario.NoRestartCommand, "%s: %s", sum.Name, sum.Verdict)
		default:
			assert.Check(t, sum.Verdict.Kind == evidence.Passed, "%s: %s: %s", sum.Name, sum.Verdict, sum.Detail)
		}
		ev := readJSON[evidence.Scenario](t, filepath.Join(out, sum.Dir, qualify.EvidenceFile))
		assert.Check(t, len(ev.CleanupErrors) == 0, "%s cleanup: %v", sum.Name, ev.CleanupErrors)
		if sum.Name == "isolation" || sum.Name == "lifecycle" {
			assert.Check(t, len(ev.Resources) == 3, "%s resources: %+v", sum.Name, ev.Resources)
		}
		// Independently of the runner's own check: every recorded
		// container and volume is gone, looked up by its exact ID.
		for _, r := range ev.Resources {
			assert.Check(t, r.Identity != "planned" || r.Absent != nil, "%s: %+v", sum.Name, r)
			absent, probe, err := scenario.CheckAbsent(ctx, cli, r)
			assert.NilError(t, err)
			assert.Check(t, absent, "%s: %s", sum.Name, probe)
			assert.Check(t, r.Absent != nil && *r.Absent, "%s: runner recorded %s %s as present", sum.Name, r.Role, r.ID)
		}
	}
	// The signed envelope verifies, and a one-byte change is named.
	pub, err := attest.LoadPublicKey(pubPath)
	assert.NilError(t, err)
	signed, err := evidence.VerifyRun(ctx, out, pub)
	assert.NilError(t, err)
	assert.Equal(t, signed.Predicate.Tuple.CgroupVersion, "1")
	path := filepath.Join(out, run.Scenarios[1].Dir, qualify.EvidenceFile)
	data, err := os.ReadFile(path)
	assert.NilError(t, err)
	data[10] ^= 1
	assert.NilError(t, os.WriteFile(path, data, 0o644))
	_, err = evidence.VerifyRun(ctx, out, pub)
	assert.ErrorContains(t, err, run.Scenarios[1].Dir+"/evidence.json: sha256 mismatch")

	want := map[string]bool{}
	for _, e := range m.Scenarios {
		want[e.Name] = true
	}
	assert.DeepEqual(t, names, want)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
