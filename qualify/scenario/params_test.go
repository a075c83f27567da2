package scenario

import (
	"encoding/json"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/sandboxapi"
)

func TestTransferParams(t *testing.T) {
	p, err := Transfer{}.params(nil)
	assert.NilError(t, err)
	assert.DeepEqual(t, p.Cases, TransferCases)
	assert.DeepEqual(t, p.Hostile, HostileArchiveNames)
	for _, tc := range []struct {
		params map[string]any
		err    string
	}{
		{map[string]any{"cases": []any{"round-trip", "nope"}}, `params.cases[1]: unknown "nope"`},
		{map[string]any{"cases": []any{}}, "params.cases: want at least one"},
		{map[string]any{"hostile": []any{"fifo", "fifo"}}, `params.hostile[1]: "fifo" is listed twice`},
		{map[string]any{"largeFileBytes": -1}, "params.largeFileBytes: want 1..64 MiB"},
		{map[string]any{"bogus": 1}, "params.bogus: unknown parameter"},
	} {
		assert.Check(t, is.ErrorContains(Transfer{}.Validate(tc.params), tc.err), "%v", tc.params)
	}
}

func TestControllerDeathParams(t *testing.T) {
	p, err := ControllerDeath{}.params(map[string]any{"checkpoints": []any{0, 3, "3/before", "exec"}})
	assert.NilError(t, err)
	assert.DeepEqual(t, p.Checkpoints, []checkpoint{"0", "3", "3/before", "exec"})
	p, err = ControllerDeath{}.params(nil)
	assert.NilError(t, err)
	assert.Check(t, p.Checkpoints == nil, "default: discovered at run time")
	for _, tc := range []struct {
		params map[string]any
		err    string
	}{
		{map[string]any{"checkpoints": []any{-1}}, "want a non-negative index"},
		{map[string]any{"checkpoints": []any{"0/before"}}, "needs N >= 1"},
		{map[string]any{"checkpoints": []any{"later"}}, `want an index N, "N/before" or "exec"`},
		{map[string]any{"checkpoints": []any{1.5}}, `want an index N`},
		{map[string]any{"checkpoints": []any{2, 2}}, `params.checkpoints[1]: "2" is listed twice`},
		{map[string]any{"checkpoints": []any{}}, "want at least one checkpoint"},
	} {
		assert.Check(t, is.ErrorContains(ControllerDeath{}.Validate(tc.params), tc.err), "%v", tc.params)
	}
}

func TestChildArgsRoundTrip(t *testing.T) {
	data := []byte(`{"resources":{"cpus":0.5,"memoryBytes":268435456,"pids":128},"temporaryStorage":{"homeBytes":16777216,"tempBytes":8388608},"network":{"kind":"isolated"},"deadlines":{"startupMs":60000,"cleanupMs":30000},"transfers":{"chunkBytes":65536,"metadataBatchBytes":1048576,"metadataMergeFanIn":16},"streams":{"maxOutputBytes":1048576,"maxBufferedInputBytes":65536,"maxBufferedOutputBytes":1048576,"highWaterMarkBytes":16384}}`)
	pol, err := sandboxapi.ParsePolicy(data)
	assert.NilError(t, err)
	c := ChildConfig{
		Profile: "linux-x64-cgroupv1", Endpoint: "unix:///var/run/docker.sock", ImageID: "sha256:" + strings.Repeat("a", 64),
		Namespace: "qualbox-qual-x", User: driver.User{UID: 65534, GID: 65534}, Policy: pol,
		SpillDir: "/tmp/s", RecordFile: "/tmp/r.json", MarkerFile: "/tmp/m.json", Checkpoint: "3/before",
	}
	args, err := c.Args()
	assert.NilError(t, err)
	got, err := ParseChildArgs(args, nil)
	assert.NilError(t, err)
	want, _ := json.Marshal(c)
	back, _ := json.Marshal(got)
	assert.Equal(t, string(back), string(want))

	_, err = ParseChildArgs(append(args[:len(args)-1:len(args)-1], "soon"), nil)
	assert.Check(t, is.ErrorContains(err, `--checkpoint: checkpoint "soon"`))
	_, err = ParseChildArgs([]string{"--profile", "x"}, nil)
	assert.Check(t, is.ErrorContains(err, "is required"))
}
