package guest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
	"gotest.tools/v3/poll"

	"github.com/qualbox/qualbox/internal/testengine"
	"github.com/qualbox/qualbox/qualify/guest/facts"
)

// The driver's workload shape (docs/contract.md#profiles-and-admission).
var (
	keeper    = []string{"-c", "while :; do sleep 3600; done"}
	workEnv   = []string{"HOME=/home/sandbox", "TMPDIR=/tmp", "PATH=" + Path}
	memory    = int64(64 << 20)
	pids      = int64(64)
	tmpfsSize = int64(16 << 20)
)

func engineClient(t *testing.T) *client.Client {
	t.Helper()
	cli, err := client.New(client.WithHost("unix://" + testengine.Require(t)))
	assert.NilError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// buildImage builds the guest image and registers its removal by exact ID.
func buildImage(t *testing.T, ctx context.Context, cli *client.Client) Image {
	t.Helper()
	img, err := Build(ctx, cli, BuildOptions{})
	t.Cleanup(func() {
		if img.ID == "" {
			return
		}
		if err := Remove(context.Background(), cli, img.ID); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	assert.NilError(t, err)
	t.Logf("built %s in %v", img.ID, img.Elapsed)
	return img
}

func TestBuildAndProbeWorkload(t *testing.T) {
	cli := engineClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	img := buildImage(t, ctx, cli)

	assert.Check(t, imageIDPattern.MatchString(img.ID), img.ID)
	inspect, err := cli.ImageInspect(ctx, img.ID)
	assert.NilError(t, err)
	assert.Equal(t, inspect.ID, img.ID)
	assert.Equal(t, inspect.Os, "linux")
	assert.Equal(t, inspect.Architecture, "amd64")
	assert.DeepEqual(t, inspect.Config.Env, []string{"PATH=" + Path})
	assert.Check(t, is.Len(inspect.Config.Volumes, 0))
	assert.Check(t, is.Len(inspect.RepoTags, 0), "the image must stay untagged")

	tmpfsOptions := fmt.Sprintf("rw,nosuid,nodev,noexec,size=%d,mode=0700,uid=%d,gid=%d", tmpfsSize, SandboxUID, SandboxGID)
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image:      img.ID,
			User:       fmt.Sprintf("%d:%d", SandboxUID, SandboxGID),
			Entrypoint: []string{"/bin/sh"},
			Cmd:        keeper,
			Env:        workEnv,
			Healthcheck: &container.HealthConfig{
				Test: []string{"NONE"},
			},
		},
		HostConfig: &container.HostConfig{
			ReadonlyRootfs: true,
			CapDrop:        []string{"ALL"},
			SecurityOpt:    []string{"no-new-privileges:true"},
			IpcMode:        "private",
			CgroupnsMode:   "private",
			NetworkMode:    "none",
			RestartPolicy:  container.RestartPolicy{Name: "no"},
			Resources: container.Resources{
				NanoCPUs:   1e9,
				Memory:     memory,
				MemorySwap: memory,
				PidsLimit:  &pids,
			},
			Tmpfs: map[string]string{"/tmp": tmpfsOptions, "/home/sandbox": tmpfsOptions},
		},
	})
	t.Cleanup(func() {
		if created.ID == "" {
			return
		}
		if _, err := cli.ContainerRemove(context.Background(), created.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Errorf("cleanup: remove container %s: %v", created.ID, err)
		}
	})
	assert.NilError(t, err)
	_, err = cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{})
	assert.NilError(t, err)

	stdout, stderr, code := execProbe(t, ctx, cli, created.ID, "facts")
	assert.Equal(t, code, 0, "stderr: %s", stderr)
	var f facts.Facts
	assert.NilError(t, json.Unmarshal(stdout, &f), "stdout: %s", stdout)
	if os.Getenv("QUALBOX_PROBE_FACTS_OUT") != "" {
		assert.NilError(t, os.WriteFile(os.Getenv("QUALBOX_PROBE_FACTS_OUT"), stdout, 0o644))
	}
	t.Logf("facts: %s", stdout)

	assert.Check(t, is.Len(f.Errors, 0))
	assert.Check(t, is.DeepEqual(f.Identity, facts.Identity{UID: 65534, GID: 65534, EUID: 65534, EGID: 65534, Groups: []int{65534}}))
	assert.Check(t, is.Equal(f.Status.CapEff, "0000000000000000"))
	assert.Check(t, is.Equal(f.Status.CapPrm, "0000000000000000"))
	assert.Check(t, is.Equal(f.Status.CapBnd, "0000000000000000"))
	assert.Check(t, is.Equal(f.Status.NoNewPrivs, 1))
	assert.Check(t, is.Equal(f.Status.Seccomp, 2))

	mounts := map[string]facts.Mount{}
	for _, m := range f.Mounts {
		mounts[m.Path] = m
	}
	assert.Check(t, mounts["/"].ReadOnly, "%+v", mounts["/"])
	for _, p := range []string{"/tmp", "/home/sandbox"} {
		m := mounts[p]
		assert.Check(t, is.Equal(m.MountPoint, p))
		assert.Check(t, is.Equal(m.FSType, "tmpfs"))
		assert.Check(t, !m.ReadOnly && m.NoExec && m.NoSuid && m.NoDev, "%+v", m)
		assert.Check(t, is.Equal(m.SizeBytes, tmpfsSize))
		assert.Check(t, is.Equal(m.Mode, "700"))
		assert.Check(t, is.Equal(m.UID, "65534"))
		assert.Check(t, is.Equal(m.GID, "65534"))
	}
	assert.Check(t, is.Equal(mounts["/workspace"].MountPoint, "/"), "no volume in this test: / covers /workspace")

	assert.Assert(t, is.Len(f.Interfaces, 1))
	assert.Check(t, is.Equal(f.Interfaces[0].Name, "lo"))

	assert.Check(t, f.Cgroup.Version == 1 || f.Cgroup.Version == 2)
	assert.Check(t, is.DeepEqual(f.Cgroup.MemoryLimitBytes, &memory))
	assert.Check(t, is.DeepEqual(f.Cgroup.MemoryAndSwapLimitBytes, &memory))
	assert.Check(t, is.DeepEqual(f.Cgroup.PidsMax, &pids))
	assert.Check(t, is.DeepEqual(f.PID1Cmdline, append([]string{"/bin/sh"}, keeper...)))
	assert.Check(t, is.Equal(f.RootWrite.OK, false))
	assert.Check(t, is.Equal(f.RootWrite.Errno, "EROFS"))

	recordGuestFiles(t, ctx, cli, created.ID)

	// Workload actions run under the same confinement.
	out, stderr, code := execProbe(t, ctx, cli, created.ID, "fill", "/tmp/fill", fmt.Sprint(2*tmpfsSize))
	assert.Equal(t, code, 0, "stderr: %s", stderr)
	var r facts.Result
	assert.NilError(t, json.Unmarshal(out, &r), "%s", out)
	assert.Check(t, is.Equal(r.Errno, "ENOSPC"), "%+v", r)
	assert.Check(t, r.Done <= tmpfsSize && r.Done > tmpfsSize/2, "%+v", r)

	out, _, code = execProbe(t, ctx, cli, created.ID, "connect", "127.0.0.1:9", "1")
	assert.Equal(t, code, 0)
	r = facts.Result{}
	assert.NilError(t, json.Unmarshal(out, &r), "%s", out)
	assert.Check(t, is.Equal(r.Errno, "ECONNREFUSED"), "%+v", r)

	out, stderr, code = execProbe(t, ctx, cli, created.ID, "fork", "100", "5")
	assert.Equal(t, code, 0, "stderr: %s", stderr)
	r = facts.Result{}
	assert.NilError(t, json.Unmarshal(out, &r), "%s", out)
	assert.Check(t, is.Equal(r.Errno, "EAGAIN"), "%+v", r)
	assert.Check(t, r.Done > 0 && r.Done < pids, "%+v", r)

	// Beyond memory = memory+swap the kernel kills the probe mid-way; its
	// stderr progress tells how far it got.
	out, stderr, code = execProbe(t, ctx, cli, created.ID, "alloc", "128")
	assert.Check(t, is.Equal(code, 137), "stdout %s stderr %s", out, stderr)
	assert.Check(t, is.Len(out, 0))
	lines := strings.Split(strings.TrimSpace(string(stderr)), "\n")
	var last facts.Progress
	assert.NilError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
	assert.Check(t, last.Done > 8 && last.Done < 64, "%+v", last)

	out, _, code = execProbe(t, ctx, cli, created.ID, "write", "stdout", "1000")
	assert.Equal(t, code, 0)
	assert.Check(t, is.Equal(string(out[:1000]), strings.Repeat(facts.WritePattern, 1000/len(facts.WritePattern)+1)[:1000]))
}

// execProbe runs the probe in the container as the sandbox user and returns
// its stdout, stderr and exit code.
func execProbe(t *testing.T, ctx context.Context, cli *client.Client, id string, args ...string) (stdout, stderr []byte, code int) {
	t.Helper()
	ex, err := cli.ExecCreate(ctx, id, client.ExecCreateOptions{
		User:         fmt.Sprintf("%d:%d", SandboxUID, SandboxGID),
		AttachStdout: true,
		AttachStderr: true,
		Env:          workEnv,
		Cmd:          append([]string{ProbePath}, args...),
	})
	assert.NilError(t, err)
	att, err := cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	assert.NilError(t, err)
	defer att.Close()
	var out, errOut bytes.Buffer
	_, err = stdcopy.StdCopy(&out, &errOut, att.Reader)
	assert.NilError(t, err)
	var exitCode int
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		res, err := cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			return poll.Error(err)
		}
		if res.Running {
			return poll.Continue("exec still running")
		}
		exitCode = res.ExitCode
		return poll.Success()
	}, poll.WithTimeout(30*time.Second), poll.WithDelay(50*time.Millisecond))
	return out.Bytes(), errOut.Bytes(), exitCode
}

// recordGuestFiles copies the kernel files the probe parses, as the sandbox
// sees them, into $QUALBOX_GUEST_RECORD (unset: nothing is recorded). The
// facts package's testdata was recorded this way.
func recordGuestFiles(t *testing.T, ctx context.Context, cli *client.Client, id string) {
	dir := os.Getenv("QUALBOX_GUEST_RECORD")
	if dir == "" {
		return
	}
	for src, dst := range map[string]string{
		"/proc/self/status":                                 "status",
		"/proc/self/mountinfo":                              "mountinfo",
		"/proc/self/cgroup":                                 "proc-self-cgroup",
		"/sys/fs/cgroup/memory/memory.limit_in_bytes":       "cgroupv1/memory/memory.limit_in_bytes",
		"/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes": "cgroupv1/memory/memory.memsw.limit_in_bytes",
		"/sys/fs/cgroup/pids/pids.max":                      "cgroupv1/pids/pids.max",
		"/sys/fs/cgroup/cpu/cpu.cfs_quota_us":               "cgroupv1/cpu/cpu.cfs_quota_us",
		"/sys/fs/cgroup/cpu/cpu.cfs_period_us":              "cgroupv1/cpu/cpu.cfs_period_us",
	} {
		ex, err := cli.ExecCreate(ctx, id, client.ExecCreateOptions{
			User: fmt.Sprintf("%d:%d", SandboxUID, SandboxGID), AttachStdout: true, AttachStderr: true,
			Env: workEnv, Cmd: []string{"/bin/cat", src},
		})
		assert.NilError(t, err)
		att, err := cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
		assert.NilError(t, err)
		var out bytes.Buffer
		_, err = stdcopy.StdCopy(&out, io.Discard, att.Reader)
		att.Close()
		assert.NilError(t, err)
		path := filepath.Join(dir, dst)
		assert.NilError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		assert.NilError(t, os.WriteFile(path, out.Bytes(), 0o644))
	}
}
