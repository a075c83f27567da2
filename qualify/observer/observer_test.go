package observer_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/golden"

	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/observer"
)

const v2ID = "3f1c2b9a8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a3928170605f4e3"

func i64(v int64) *int64 { return &v }

func TestResolveV2Systemd(t *testing.T) {
	fsys := os.DirFS("testdata/v2-systemd")
	s, err := observer.Resolve(fsys, 4242)
	assert.NilError(t, err)
	dir := "sys/fs/cgroup/system.slice/docker-" + v2ID + ".scope"
	assert.DeepEqual(t, s, observer.Scope{
		PID: 4242, StartTime: 123456, Version: 2, ProcCgroup: "0::/system.slice/docker-" + v2ID + ".scope\n",
		Dirs: map[string]string{"memory": dir, "pids": dir, "cpu": dir},
	})
	snap := s.Read(fsys, "during")
	want := observer.Snapshot{
		Label: "during", Version: 2,
		MemoryLimitBytes: i64(268435456), MemorySwapLimitBytes: i64(0), MemoryUsageBytes: i64(1048576), PeakUsageBytes: i64(16777216),
		ShmemBytes: i64(8388608), MaxEvents: i64(37), OOMEvents: i64(2), OOMKills: i64(1),
		PidsMax: i64(128), PidsCurrent: i64(3), PidsMaxEvents: i64(14),
		CPUQuotaMicros: i64(50000), CPUPeriodMicros: i64(100000), Procs: []int{4242, 4250},
	}
	if d := cmp.Diff(want, snap, cmpopts.IgnoreFields(observer.Snapshot{}, "Time", "Files")); d != "" {
		t.Fatalf("snapshot (-want +got):\n%s", d)
	}
	assert.Equal(t, snap.Files[dir+"/memory.events"], "low 0\nhigh 0\nmax 37\noom 2\noom_kill 1\noom_group_kill 0")
	assert.Equal(t, len(snap.Errors), 0)

	a := s.Absence(fsys)
	assert.Assert(t, !a.OK())
	assert.Equal(t, a.String(), "occupied (keeper alive)")
	assert.DeepEqual(t, a.Dirs, map[string]string{dir: "procs: [4242 4250]"})
}

// The same PID resolved while running, checked against the tree after
// cleanup: the scope directory is gone.
func TestAbsenceV2Gone(t *testing.T) {
	s, err := observer.Resolve(os.DirFS("testdata/v2-systemd"), 4242)
	assert.NilError(t, err)
	a := s.Absence(os.DirFS("testdata/v2-gone"))
	assert.Assert(t, a.Gone && a.OK())
	assert.Equal(t, a.String(), "gone")
	snap := s.Read(os.DirFS("testdata/v2-gone"), "after")
	assert.Assert(t, snap.MemoryLimitBytes == nil && len(snap.Errors) > 0)
}

func TestV2UnlimitedAndEmpty(t *testing.T) {
	fsys := os.DirFS("testdata/v2-unlimited")
	s, err := observer.Resolve(fsys, 77)
	assert.NilError(t, err)
	assert.Equal(t, s.Dirs["memory"], "sys/fs/cgroup/docker/"+v2ID)
	snap := s.Read(fsys, "before")
	assert.Assert(t, snap.MemoryLimitBytes == nil && snap.MemorySwapLimitBytes == nil && snap.PidsMax == nil && snap.CPUQuotaMicros == nil)
	assert.DeepEqual(t, snap.CPUPeriodMicros, i64(100000))
	assert.DeepEqual(t, snap.OOMKills, i64(0))
	assert.Assert(t, !s.Absence(fsys).OK())
	a := s.Absence(os.DirFS("testdata/v2-unlimited-empty"))
	assert.Assert(t, !a.Gone && a.Empty && a.OK())
	assert.Equal(t, a.String(), "empty")
}

func TestResolveErrors(t *testing.T) {
	_, err := observer.Resolve(os.DirFS("testdata/v2-systemd"), 1)
	assert.Assert(t, errors.Is(err, os.ErrNotExist), "%v", err)
}

func observation(t *testing.T) *observer.Observation {
	fsys := os.DirFS("testdata/v2-systemd")
	s, err := observer.Resolve(fsys, 4242)
	assert.NilError(t, err)
	o := &observer.Observation{Schema: observer.Schema, Container: v2ID, Scope: s}
	for _, l := range []string{"before", "during"} {
		snap := s.Read(fsys, l)
		snap.Time = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
		o.Snapshots = append(o.Snapshots, snap)
	}
	a := s.Absence(os.DirFS("testdata/v2-gone"))
	o.Absence = &a
	return o
}

func TestTableGolden(t *testing.T) {
	var buf bytes.Buffer
	assert.NilError(t, observer.Table(&buf, observation(t)))
	golden.Assert(t, buf.String(), "table.golden")
}

func TestSignedObservation(t *testing.T) {
	ctx := context.Background()
	o := observation(t)
	dir, keys := t.TempDir(), t.TempDir()
	_, _, err := attest.GenerateKey(keys)
	assert.NilError(t, err)
	assert.NilError(t, writeJSON(filepath.Join(dir, observer.ObservationFile), o))
	priv, err := attest.LoadPrivateKey(filepath.Join(keys, attest.PrivateKeyFile))
	assert.NilError(t, err)
	assert.NilError(t, observer.Sign(ctx, dir, priv, o))
	pub, err := attest.LoadPublicKey(filepath.Join(keys, attest.PublicKeyFile))
	assert.NilError(t, err)
	got, err := observer.Verify(ctx, dir, pub)
	assert.NilError(t, err)
	assert.Equal(t, got.Absence.String(), "gone")

	path := filepath.Join(dir, observer.ObservationFile)
	data, err := os.ReadFile(path)
	assert.NilError(t, err)
	data[len(data)/2] ^= 1
	assert.NilError(t, os.WriteFile(path, data, 0o644))
	_, err = observer.Verify(ctx, dir, pub)
	var ve *attest.VerifyError
	assert.Assert(t, errors.As(err, &ve))
	assert.Equal(t, ve.Problems[0].File, observer.ObservationFile)
}

// pids.events semantics: before Linux 6.11 pids.events "max" counts the
// forks refused to this cgroup's tasks; from 6.11 it is hierarchical (a
// refusal counts at the limiting cgroup and every ancestor) and
// pids.events.local "max" holds the count of this cgroup's own limit. The refusals of the
// sandbox's own limit are read from pids.events.local when the kernel has
// it, so a hierarchical count from a descendant's limit is never taken
// for the sandbox's; an unreadable pids.events.local is an error, an
// absent one is not.
func TestPidsEventsLocalSemantics(t *testing.T) {
	dir := "sys/fs/cgroup/system.slice/docker-" + v2ID + ".scope"
	tree := func(t *testing.T, local func(root string)) observer.Snapshot {
		t.Helper()
		root := t.TempDir()
		assert.NilError(t, os.CopyFS(root, os.DirFS("testdata/v2-systemd")))
		if local != nil {
			local(root)
		}
		s, err := observer.Resolve(os.DirFS(root), 4242)
		assert.NilError(t, err)
		return s.Read(os.DirFS(root), "during")
	}

	old := tree(t, nil)
	assert.Equal(t, len(old.Errors), 0, "%v", old.Errors)
	assert.Check(t, old.PidsMaxEventsLocal == nil)
	n, source := old.PidsLimitRefusals()
	assert.Equal(t, n, int64(14))
	assert.Equal(t, source, "pids.events max")

	// 6.11+ on a scope with child cgroups of their own limits: 14
	// refusals at this cgroup or below, 3 of them by its own limit.
	hier := tree(t, func(root string) {
		assert.NilError(t, os.WriteFile(filepath.Join(root, dir, "pids.events.local"), []byte("max 3\n"), 0o644))
	})
	assert.Equal(t, len(hier.Errors), 0, "%v", hier.Errors)
	n, source = hier.PidsLimitRefusals()
	assert.Equal(t, n, int64(3))
	assert.Equal(t, source, "pids.events.local max")
	assert.Equal(t, *hier.PidsMaxEvents, int64(14))
	assert.Equal(t, hier.Files[dir+"/pids.events.local"], "max 3")

	broken := tree(t, func(root string) {
		assert.NilError(t, os.Mkdir(filepath.Join(root, dir, "pids.events.local"), 0o755))
	})
	assert.Equal(t, len(broken.Errors), 1, "%v", broken.Errors)
	assert.Check(t, broken.PidsMaxEventsLocal == nil)
}
