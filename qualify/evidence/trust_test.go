package evidence_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// trustRows are lane A (cgroup v1, Engine 20.10) and lane C (linux-x64
// on Debian), as in reports/gate-policy.yaml.
var trustRows = []evidence.Row{
	{Name: "lane-a", Profile: "linux-x64-cgroupv1", Engine: "20.10."},
	{Name: "lane-c", Profile: "linux-x64", OperatingSystem: "Debian"},
}

// entry trusts the key in keys for rows over the day of fixedRun's start.
func entry(t *testing.T, keys string, rows ...string) evidence.TrustEntry {
	t.Helper()
	k := pub(t, keys)
	return evidence.TrustEntry{KeyFile: filepath.Join(keys, attest.PublicKeyFile), Key: k, KeyID: attest.KeyID(k), Rows: rows,
		NotBefore: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2026, 11, 29, 23, 59, 59, 0, time.UTC)}
}

func trustProblems(t *testing.T, err error) string {
	t.Helper()
	var te *evidence.TrustError
	assert.Assert(t, errors.As(err, &te), "want *evidence.TrustError, got %v", err)
	return strings.Join(te.Problems, "\n")
}

// laneC makes r a linux-x64 run whose recorded Engine facts meet that
// profile (cgroup v2/systemd, AppArmor, builtin seccomp, cgroupns, API
// 1.52 in range), as lane C's Engine records them.
func laneC(r *evidence.Run) {
	r.Profile = "linux-x64"
	e := &r.Engine
	e.APIVersion, e.MinAPIVersion = "1.52", "1.24"
	e.CgroupVersion, e.CgroupDriver = "2", "systemd"
	e.SecurityOptions = []string{"name=apparmor", "name=seccomp,profile=builtin", "name=cgroupns"}
	r.Tuple = evidence.TupleOf(r)
}

// A key is trusted for its rows and its window only: the forger holds a
// trusted key and signs a report its entry does not cover.
func TestVerifyTrustedBindsKeysToRowsAndWindows(t *testing.T) {
	ctx := context.Background()

	// The honest case: lane A's key signs a lane A report of its day.
	dir, keys := signedReport(t, nil)
	s, e, err := evidence.VerifyTrusted(ctx, dir, []evidence.TrustEntry{entry(t, keys, "lane-a")}, trustRows)
	assert.NilError(t, err)
	assert.Equal(t, s.Predicate.Tuple.Profile, "linux-x64-cgroupv1")
	assert.DeepEqual(t, e.Rows, []string{"lane-a"})

	// Lane A's host key signs a lane C-shaped report.
	dir, keys = signedReport(t, laneC)
	a := entry(t, keys, "lane-a")
	_, _, err = evidence.VerifyTrusted(ctx, dir, []evidence.TrustEntry{a}, trustRows)
	assert.Check(t, is.Contains(trustProblems(t, err), "signed by key "+a.KeyID+" ("+a.KeyFile+"), which is bound to rows lane-a, not to row lane-c that its tuple matches"))

	// A report signed after the key's window (the key was retired on the
	// 29th; the run claims the 30th).
	dir, keys = signedReport(t, func(r *evidence.Run) {
		r.Timing = evidence.NewTiming(r.Timing.Start.Add(24*time.Hour), r.Timing.End.Add(24*time.Hour))
	})
	a = entry(t, keys, "lane-a")
	_, _, err = evidence.VerifyTrusted(ctx, dir, []evidence.TrustEntry{a}, trustRows)
	assert.Check(t, is.Contains(trustProblems(t, err), "signed by key "+a.KeyID+" ("+a.KeyFile+"), trusted from 2026-11-29T00:00:00Z to 2026-11-29T23:59:59Z, but its signed run time 2026-11-30T10:00:00Z to 2026-11-30T10:00:02.5Z falls outside that window"))

	// One that started before the window and ended inside it.
	dir, keys = signedReport(t, func(r *evidence.Run) {
		r.Timing = evidence.NewTiming(time.Date(2026, 11, 28, 23, 59, 0, 0, time.UTC), r.Timing.End)
	})
	_, _, err = evidence.VerifyTrusted(ctx, dir, []evidence.TrustEntry{entry(t, keys, "lane-a")}, trustRows)
	assert.Check(t, is.Contains(trustProblems(t, err), "its signed run time 2026-11-28T23:59:00Z to 2026-11-29T10:00:02.5Z falls outside that window"))

	// A report of no row of the policy, signed by a trusted key.
	dir, keys = signedReport(t, func(r *evidence.Run) { r.Engine.Version = "24.0.7" })
	_, _, err = evidence.VerifyTrusted(ctx, dir, []evidence.TrustEntry{entry(t, keys, "lane-a")}, trustRows)
	assert.Check(t, is.Contains(trustProblems(t, err), "matches no row of the policy"))

	// A report signed only by a key the policy does not list.
	dir, _ = signedReport(t, nil)
	_, otherKeys := signedReport(t, nil)
	b := entry(t, otherKeys, "lane-a")
	_, _, err = evidence.VerifyTrusted(ctx, dir, []evidence.TrustEntry{b}, trustRows)
	assert.Check(t, is.Equal(trustProblems(t, err), "no signature by a key the policy trusts (trusted key IDs: "+b.KeyID+")"))

	// A tampered report is judged by its signer's key: the digest
	// mismatch, not a trust problem.
	dir, keys = signedReport(t, nil)
	edit(t, filepath.Join(dir, "summary.md"), "- Verdict:", "- Verdict :")
	_, _, err = evidence.VerifyTrusted(ctx, dir, []evidence.TrustEntry{b, entry(t, keys, "lane-a")}, trustRows)
	assert.Check(t, is.Contains(problems(t, err)[0].Problem, "sha256 mismatch"))
}
