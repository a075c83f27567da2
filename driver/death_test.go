package driver_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/sandboxapi"
)

// The child controller of the controller-death faults is this test binary
// re-executed with -test.run=^TestControllerChild$ and these variables.
const (
	// childEnv is the child's working directory: record.json (the latest
	// durable record), count (persist calls so far) and blocked (marker).
	childEnv = "QUALBOX_FAULT_CHILD_DIR"
	// childBlockEnv says where the child blocks: "N/before" (persist call N,
	// before the record is durable), "N/after" (after it is durable, before
	// the effect it precedes), "exec" (after the exec printed its output),
	// or empty (run the whole lifecycle and exit).
	childBlockEnv = "QUALBOX_FAULT_CHILD_BLOCK"
)

// recordFile is the child's durable record file in dir, written with
// sandboxapi.PersistToFile.
func recordFile(dir string) string { return filepath.Join(dir, "record.json") }

// publish writes a marker file through a rename, so the polling parent
// reads the old content or the new, never a partial one.
func publish(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

// blockForever marks the child as blocked at point and never returns; the
// parent kills it.
func blockForever(dir, point string) {
	if err := publish(dir, "blocked", []byte(point)); err != nil {
		panic(err)
	}
	for {
		time.Sleep(time.Hour)
	}
}

// TestControllerChild is the child controller of TestFaults/controller-death:
// reserve, start, exec `echo ready; sleep 1000`, destroy, persisting every
// record atomically to a file, and blocking where childBlockEnv says.
func TestControllerChild(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		t.Skip("runs only as the child controller of TestFaults/controller-death")
	}
	block := os.Getenv(childBlockEnv)
	blockAt, when := 0, ""
	if n, w, ok := strings.Cut(block, "/"); ok {
		var err error
		blockAt, err = strconv.Atoi(n)
		assert.NilError(t, err)
		when = w
	}
	var mu sync.Mutex
	calls := 0
	toFile := sandboxapi.PersistToFile(recordFile(dir))
	persist := func(ctx context.Context, r sandboxapi.RecoveryRecord) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == blockAt && when == "before" {
			blockForever(dir, block)
		}
		if err := toFile(ctx, r); err != nil {
			return err
		}
		if err := publish(dir, "count", []byte(strconv.Itoa(calls))); err != nil {
			return err
		}
		if calls == blockAt && when == "after" {
			blockForever(dir, block)
		}
		return nil
	}
	ctx := context.Background()
	res, err := newBackend(t).Reserve(sandboxapi.Request{Policy: faultPolicy(false)}, sandboxapi.Persisted(persist))
	assert.NilError(t, err)
	assert.NilError(t, toFile(ctx, res.RecoveryRecord()))
	sb, err := res.Start(ctx)
	assert.NilError(t, err)
	assert.NilError(t, execReady(ctx, sb))
	if block == "exec" {
		blockForever(dir, block)
	}
	assert.NilError(t, sb.Destroy(ctx))
}

// childRun is one child controller run.
type childRun struct {
	dir    string
	killed bool
	output string
}

// runChild starts the child controller and, when block is set, waits until
// it blocks there and kills it with SIGKILL.
func runChild(t *testing.T, image, block string) childRun {
	t.Helper()
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	assert.NilError(t, os.Mkdir(tmp, 0o700))
	cmd := exec.Command(os.Args[0], "-test.run=^TestControllerChild$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, childBlockEnv+"="+block, "QUALBOX_TEST_IMAGE="+image, "TMPDIR="+tmp)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	assert.NilError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	run := childRun{dir: dir}
	deadline := time.After(90 * time.Second)
	for {
		select {
		case err := <-exited:
			run.output = out.String()
			if block != "" {
				t.Fatalf("child exited before blocking at %s: %v\n%s", block, err, run.output)
			}
			assert.NilError(t, err, "child output:\n%s", run.output)
			return run
		case <-deadline:
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("child did not block at %s within 90s:\n%s", block, out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if block == "" {
			continue
		}
		if got, err := os.ReadFile(filepath.Join(dir, "blocked")); err == nil && string(got) == block {
			assert.NilError(t, cmd.Process.Signal(syscall.SIGKILL))
			<-exited
			run.killed, run.output = true, out.String()
			return run
		}
	}
}

func readRecordFile(t *testing.T, dir string) sandboxapi.RecoveryRecord {
	t.Helper()
	rec, err := sandboxapi.ReadRecoveryRecordFile(recordFile(dir))
	assert.NilError(t, err)
	return rec
}

// computeAfterDeath reports the compute container's state after the kill,
// looked up by exact name, and fails if it was started but is not running:
// controller death never stops compute.
func computeAfterDeath(t *testing.T, rec sandboxapi.RecoveryRecord) string {
	t.Helper()
	cli := enginetest.Client(t)
	for _, r := range rec.Resources {
		if r.Role != sandboxapi.RoleCompute {
			continue
		}
		in, err := cli.ContainerInspect(context.Background(), r.Name, client.ContainerInspectOptions{})
		if err != nil {
			return "compute absent"
		}
		st := in.Container.State
		if st == nil {
			t.Errorf("compute %s has no state", in.Container.ID)
			return "compute ?"
		}
		started := st.StartedAt != "" && !strings.HasPrefix(st.StartedAt, "0001-")
		switch {
		case st.Running:
			return "compute running"
		case started:
			t.Errorf("compute %s was started but is %s after controller death", in.Container.ID, st.Status)
			return "compute " + string(st.Status) + " (STOPPED)"
		}
		return "compute created"
	}
	return "no compute"
}

// testControllerDeath kills a child controller at every checkpoint, before
// and after the record is durable, and once mid-exec; a fresh in-process
// controller recovers from the record file.
func testControllerDeath(t *testing.T, table *faultTable, checkpoints []string) {
	image := enginetest.Image(t)
	normal := runChild(t, image, "")
	count, err := os.ReadFile(filepath.Join(normal.dir, "count"))
	assert.NilError(t, err)
	assert.Equal(t, string(count), strconv.Itoa(len(checkpoints)), "the child's lifecycle has the reference checkpoints")
	assert.Check(t, len(leftovers(t, readRecordFile(t, normal.dir))) == 0)

	var points []string
	for n := 1; n <= len(checkpoints); n++ {
		points = append(points, fmt.Sprintf("%d/before", n), fmt.Sprintf("%d/after", n))
	}
	points = append(points, "exec")
	for _, block := range points {
		point := "mid-exec, after output"
		if n, when, ok := strings.Cut(block, "/"); ok {
			i, _ := strconv.Atoi(n)
			point = fmt.Sprintf("%s durable #%d (%s)", when, i, checkpoints[i-1])
		}
		t.Run(point, func(t *testing.T) {
			run := runChild(t, image, block)
			rec := readRecordFile(t, run.dir)
			row := faultRow{group: "controller death", point: "SIGKILL " + point}
			row.outcome = fmt.Sprintf("killed in phase %s, %s", rec.Phase, computeAfterDeath(t, rec))
			toFile := sandboxapi.PersistToFile(recordFile(run.dir))
			d := &durable{records: []sandboxapi.RecoveryRecord{rec}, hook: func(_ int, r sandboxapi.RecoveryRecord) {
				assert.Check(t, toFile(context.Background(), r))
			}}
			r := recoverFresh(t, d)
			row.recovery = r.String()
			if r.advanced {
				assert.DeepEqual(t, readRecordFile(t, run.dir), d.latest())
			}
			table.close(t, row, d.all()...)
		})
	}
}
