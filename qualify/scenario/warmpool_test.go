package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/sandboxapi"
)

const testPolicyJSON = `{"resources":{"cpus":0.5,"memoryBytes":268435456,"pids":128},"temporaryStorage":{"homeBytes":16777216,"tempBytes":8388608},"network":{"kind":"isolated"},"deadlines":{"startupMs":60000,"cleanupMs":30000},"transfers":{"chunkBytes":65536,"metadataBatchBytes":1048576,"metadataMergeFanIn":16},"streams":{"maxOutputBytes":1048576,"maxBufferedInputBytes":65536,"maxBufferedOutputBytes":1048576,"highWaterMarkBytes":16384}}`

func TestWarmPoolParams(t *testing.T) {
	p, err := WarmPool{}.params(nil)
	assert.NilError(t, err)
	assert.DeepEqual(t, p, WarmPoolParams{Size: 4, IdleMs: 5000, Cases: WarmPoolCases})
	p, err = WarmPool{}.params(map[string]any{"size": 2, "idleMs": 1000, "cases": []any{"close", "death"}})
	assert.NilError(t, err)
	assert.DeepEqual(t, p, WarmPoolParams{Size: 2, IdleMs: 1000, Cases: []string{"close", "death"}})
	for _, tc := range []struct {
		params map[string]any
		err    string
	}{
		{map[string]any{"size": 1}, "params.size: want 2..16, got 1"},
		{map[string]any{"size": 17}, "params.size: want 2..16, got 17"},
		{map[string]any{"size": "four"}, "params.size: want int"},
		{map[string]any{"idleMs": 999}, "params.idleMs: want 1000..600000, got 999"},
		{map[string]any{"idleMs": 600001}, "params.idleMs: want 1000..600000"},
		{map[string]any{"cases": []any{"expiry", "nope"}}, `params.cases[1]: unknown "nope"`},
		{map[string]any{"cases": []any{"close", "close"}}, `params.cases[1]: "close" is listed twice`},
		{map[string]any{"cases": []any{}}, "params.cases: want at least one"},
		{map[string]any{"Size": 4}, "params.Size: unknown parameter"},
	} {
		assert.Check(t, is.ErrorContains(WarmPool{}.Validate(tc.params), tc.err), "%v", tc.params)
	}
}

func TestPoolChildArgsRoundTrip(t *testing.T) {
	pol, err := sandboxapi.ParsePolicy([]byte(testPolicyJSON))
	assert.NilError(t, err)
	c := ChildConfig{
		Profile: "linux-x64-cgroupv1", Endpoint: "unix:///var/run/docker.sock", ImageID: "sha256:" + strings.Repeat("a", 64),
		Namespace: "qualbox-qual-x", User: driver.User{UID: 65534, GID: 65534}, Policy: pol,
		SpillDir: "/tmp/s", MarkerFile: "/tmp/m.json", PoolSize: 4, RecordDir: "/tmp/records",
	}
	args, err := c.Args()
	assert.NilError(t, err)
	assert.Check(t, !strings.Contains(strings.Join(args, " "), "--checkpoint"), "%q", args)
	got, err := ParseChildArgs(args, nil)
	assert.NilError(t, err)
	want, _ := json.Marshal(c)
	back, _ := json.Marshal(got)
	assert.Equal(t, string(back), string(want))

	for _, tc := range []struct {
		args []string
		err  string
	}{
		{append(args[:len(args):len(args)], "--checkpoint", "exec"), "--record and --checkpoint do not apply to a pool child"},
		{append(args[:len(args)-2:len(args)-2], "--pool", "0"), "--pool: want 1..1024, got 0"},
		{append(args[:len(args)-2:len(args)-2], "--pool", "1025"), "--pool: want 1..1024, got 1025"},
		{append(args[:len(args)-4:len(args)-4], "--pool", "4"), "--records is required"},
	} {
		_, err := ParseChildArgs(tc.args, nil)
		assert.Check(t, is.ErrorContains(err, tc.err), "%q", tc.args)
	}
}

func TestRecordStore(t *testing.T) {
	dir := t.TempDir()
	var tracked []sandboxapi.CleanupOwner
	refused := errors.New("refused")
	s := &recordStore{dir: dir, track: func(o sandboxapi.CleanupOwner) { tracked = append(tracked, o) },
		gate: func(r sandboxapi.RecoveryRecord) error {
			if r.SandboxID == "docker-refused" {
				return refused
			}
			return nil
		}}
	ctx := context.Background()
	rec := func(id string, phase sandboxapi.Phase) sandboxapi.RecoveryRecord {
		return sandboxapi.RecoveryRecord{Format: sandboxapi.RecoveryFormat, SandboxID: sandboxapi.SandboxID(id), Phase: phase}
	}
	assert.NilError(t, s.persist(ctx, rec("docker-a", sandboxapi.PhaseStarting)))
	assert.NilError(t, s.persist(ctx, rec("docker-a", sandboxapi.PhaseRunning)))
	assert.NilError(t, s.persist(ctx, rec("docker-b", sandboxapi.PhaseStarting)))
	assert.Check(t, errors.Is(s.persist(ctx, rec("docker-refused", sandboxapi.PhaseStarting)), refused))
	assert.Check(t, is.ErrorContains(s.persist(ctx, rec("../x", sandboxapi.PhaseStarting)), "is not a file name"))
	assert.Check(t, is.ErrorContains(s.persist(ctx, rec(".hidden", sandboxapi.PhaseStarting)), "is not a file name"))

	assert.Equal(t, s.count(), 3)
	assert.Assert(t, is.Len(tracked, 2), "one owner per sandbox, at its first record")
	assert.Equal(t, tracked[0].RecoveryRecord().Phase, sandboxapi.PhaseRunning, "the owner reports the latest record")
	assert.Check(t, tracked[0].Destroy(ctx) != nil, "a record-only owner destroys nothing")
	r, ok := s.latest("docker-a")
	assert.Check(t, ok && r.Phase == sandboxapi.PhaseRunning)
	_, err := os.Stat(filepath.Join(dir, "docker-refused.json"))
	assert.Check(t, errors.Is(err, os.ErrNotExist), "a refused record is not written")
}

func TestWithDaemonIDKeepsTheRest(t *testing.T) {
	out, err := withDaemonID("other")([]byte(`{"ID":"real","MemTotal":8589934592123,"NCPU":2,"Name":"<host>"}`))
	assert.NilError(t, err)
	var v map[string]any
	assert.NilError(t, json.Unmarshal(out, &v))
	assert.Equal(t, v["ID"], "other")
	assert.Equal(t, v["Name"], "<host>")
	assert.Check(t, strings.Contains(string(out), `"MemTotal":8589934592123`), "%s", out)
	_, err = withDaemonID("other")([]byte(`not json`))
	assert.Check(t, err != nil)
}

// blockingBackend's starts block until their context ends: the pool's
// start goroutine stays in Pool code until Close cancels it.
type blockingBackend struct{}

func (blockingBackend) Support() sandboxapi.Support { return sandboxapi.Support{BackendID: "blocking"} }
func (blockingBackend) Reserve(sandboxapi.Request, sandboxapi.RecoveryPolicy) (sandboxapi.Reservation, error) {
	return blockingReservation{}, nil
}

type blockingReservation struct{}

func (blockingReservation) ID() sandboxapi.SandboxID { return "blocking-1" }
func (blockingReservation) RecoveryRecord() sandboxapi.RecoveryRecord {
	return sandboxapi.RecoveryRecord{SandboxID: "blocking-1"}
}
func (blockingReservation) Stop(context.Context) error    { return nil }
func (blockingReservation) Destroy(context.Context) error { return nil }
func (blockingReservation) Start(ctx context.Context) (sandboxapi.Sandbox, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// poolGoroutines finds a goroutine running Pool code, and none once
// Close returned.
func TestPoolGoroutines(t *testing.T) {
	pol, err := sandboxapi.ParsePolicy([]byte(testPolicyJSON))
	assert.NilError(t, err)
	p, err := sandboxapi.NewPool(blockingBackend{}, sandboxapi.Request{Policy: pol}, sandboxapi.PoolOptions{
		Size: 1, MaxIdle: time.Hour, StartParallelism: 1, RetryDelay: time.Second,
	})
	assert.NilError(t, err)
	var running []string
	assert.Assert(t, waitUntil(context.Background(), 5*time.Second, func() bool {
		running = poolGoroutines()
		return len(running) > 0
	}), "no goroutine in Pool code while a start blocks")
	assert.Check(t, is.Contains(running[0], "sandboxapi.(*Pool)."))
	assert.NilError(t, p.Close(context.Background()))
	assert.Check(t, waitUntil(context.Background(), 200*time.Millisecond, func() bool {
		running = poolGoroutines()
		return len(running) == 0
	}), "after Close: %v", running)
}
