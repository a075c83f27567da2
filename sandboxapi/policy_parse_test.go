package sandboxapi

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gotest.tools/v3/assert"
)

const validPolicyJSON = `{
  "resources": {"cpus": 1.5, "memoryBytes": 536870912, "pids": 256},
  "temporaryStorage": {"homeBytes": 67108864, "tempBytes": 67108864},
  "network": {"kind": "isolated"},
  "deadlines": {"startupMs": 30000, "cleanupMs": 30000},
  "transfers": {"chunkBytes": 65536, "metadataBatchBytes": 1048576, "metadataMergeFanIn": 16},
  "streams": {"maxBufferedInputBytes": 1048576, "maxBufferedOutputBytes": 1048576, "highWaterMarkBytes": 65536}
}`

func validPolicy() Policy {
	return Policy{
		Resources:          Resources{CPUs: 1.5, MemoryBytes: 536870912, PIDs: 256},
		TemporaryStorage:   TemporaryStorage{HomeBytes: 67108864, TempBytes: 67108864},
		Network:            Network{Kind: NetworkIsolated},
		WorkspaceDiskQuota: WorkspaceDiskQuota{Kind: QuotaNotRequested},
		Execution:          Execution{Kind: ExecutionUntilStopped},
		Deadlines:          Deadlines{StartupMs: 30000, CleanupMs: 30000},
		Transfers:          TransferBuffers{ChunkBytes: 65536, MetadataBatchBytes: 1048576, MetadataMergeFanIn: 16},
		Streams:            StreamLimits{MaxBufferedInputBytes: 1048576, MaxBufferedOutputBytes: 1048576, HighWaterMarkBytes: 65536},
	}
}

func TestParsePolicyDefaults(t *testing.T) {
	p, err := ParsePolicy([]byte(validPolicyJSON))
	assert.NilError(t, err)
	assert.DeepEqual(t, p, validPolicy())
}

func TestParsePolicyRoundTrip(t *testing.T) {
	full := validPolicy()
	full.Network.Kind = NetworkOutbound
	full.WorkspaceDiskQuota = WorkspaceDiskQuota{Kind: QuotaRequired, Bytes: 1 << 30, Accounting: AccountingAllocatedBlocks}
	full.Execution = Execution{Kind: ExecutionDeadline, TimeoutMs: 60000}
	full.Streams.MaxStdinBytes = ptr[int64](0)
	full.Streams.MaxOutputBytes = ptr[int64](MaxSafeInteger)
	for name, p := range map[string]Policy{"defaults": validPolicy(), "full": full} {
		t.Run(name, func(t *testing.T) {
			data, err := json.Marshal(p)
			assert.NilError(t, err)
			got, err := ParsePolicy(data)
			assert.NilError(t, err)
			assert.DeepEqual(t, got, p)
			norm, err := p.Normalize()
			assert.NilError(t, err)
			assert.DeepEqual(t, norm, p)
		})
	}
}

func TestParsePolicyIssues(t *testing.T) {
	tests := []struct {
		name  string
		path  string // field to change, dotted
		value any    // new value; del deletes, raw is JSON
		want  []string
	}{
		{"unknown top field", "extra", 1, []string{"extra"}},
		{"unknown nested field", "resources.gpus", 1, []string{"resources.gpus"}},
		{"string for integer", "resources.memoryBytes", "512", []string{"resources.memoryBytes"}},
		{"null for integer", "resources.memoryBytes", nil, []string{"resources.memoryBytes"}},
		{"array for object", "resources", raw(`[1]`), []string{"resources"}},
		{"null object", "network", nil, []string{"network"}},
		{"null default-able object", "execution", nil, []string{"execution"}},
		{"missing required", "resources.pids", del{}, []string{"resources.pids"}},
		{"missing object", "deadlines", del{}, []string{"deadlines"}},
		{"fraction", "resources.memoryBytes", raw(`1.5`), []string{"resources.memoryBytes"}},
		{"zero", "resources.pids", 0, []string{"resources.pids"}},
		{"negative", "temporaryStorage.homeBytes", -1, []string{"temporaryStorage.homeBytes"}},
		{"above safe integer", "resources.memoryBytes", raw(`9007199254740992`), []string{"resources.memoryBytes"}},
		{"beyond int64", "resources.memoryBytes", raw(`1e30`), []string{"resources.memoryBytes"}},
		{"infinite", "resources.cpus", raw(`1e999`), []string{"resources.cpus"}},
		{"zero cpus", "resources.cpus", 0, []string{"resources.cpus"}},
		{"bad network kind", "network.kind", "bridge", []string{"network.kind"}},
		{"network extra", "network.mode", "x", []string{"network.mode"}},
		{"quota without kind", "workspaceDiskQuota", raw(`{}`), []string{"workspaceDiskQuota.kind"}},
		{"quota not_requested with bytes", "workspaceDiskQuota", raw(`{"kind":"not_requested","bytes":1}`), []string{"workspaceDiskQuota.bytes"}},
		{"quota required missing bytes", "workspaceDiskQuota", raw(`{"kind":"required","accounting":"allocated_blocks"}`), []string{"workspaceDiskQuota.bytes"}},
		{"quota bad accounting", "workspaceDiskQuota", raw(`{"kind":"required","bytes":1,"accounting":"inodes"}`), []string{"workspaceDiskQuota.accounting"}},
		{"execution bad kind", "execution", raw(`{"kind":"forever"}`), []string{"execution.kind"}},
		{"execution deadline zero", "execution", raw(`{"kind":"deadline","timeoutMs":0}`), []string{"execution.timeoutMs"}},
		{"execution until_stopped timeout", "execution", raw(`{"kind":"until_stopped","timeoutMs":5}`), []string{"execution.timeoutMs"}},
		{"startup above max", "deadlines.startupMs", MaxStartupMs + 1, []string{"deadlines.startupMs"}},
		{"cleanup above max", "deadlines.cleanupMs", MaxCleanupMs + 1, []string{"deadlines.cleanupMs"}},
		{"chunk below min", "transfers.chunkBytes", 511, []string{"transfers.chunkBytes"}},
		{"chunk above max", "transfers.chunkBytes", MaxTransferChunkBytes + 1, []string{"transfers.chunkBytes"}},
		{"batch below min", "transfers.metadataBatchBytes", MinMetadataBatchBytes - 1, []string{"transfers.metadataBatchBytes"}},
		{"fan-in below min", "transfers.metadataMergeFanIn", 1, []string{"transfers.metadataMergeFanIn"}},
		{"fan-in above max", "transfers.metadataMergeFanIn", MaxMetadataMergeFanIn + 1, []string{"transfers.metadataMergeFanIn"}},
		{"stdin negative", "streams.maxStdinBytes", -1, []string{"streams.maxStdinBytes"}},
		{"output null", "streams.maxOutputBytes", nil, []string{"streams.maxOutputBytes"}},
		{"hwm above max", "streams.highWaterMarkBytes", MaxHighWaterMarkBytes + 1, []string{"streams.highWaterMarkBytes"}},
		{"hwm above input buffer", "streams.maxBufferedInputBytes", 1024, []string{"streams.highWaterMarkBytes"}},
		{"hwm above output buffer", "streams.maxBufferedOutputBytes", 1024, []string{"streams.highWaterMarkBytes"}},
		{"input buffer above max", "streams.maxBufferedInputBytes", MaxBufferedInputBytes + 1, []string{"streams.maxBufferedInputBytes"}},
		{"whole value array", "", raw(`[]`), []string{"(root)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePolicy(mutate(t, validPolicyJSON, tc.path, tc.value))
			assertPaths(t, err, tc.want...)
		})
	}
}

func TestParsePolicyReportsEveryIssue(t *testing.T) {
	data := mutate(t, validPolicyJSON, "resources", raw(`{"cpus":"1","memoryBytes":-1,"gpus":1}`))
	data = mutate(t, string(data), "streams.extra", true)
	_, err := ParsePolicy(data)
	assertPaths(t, err, "resources.gpus", "resources.cpus", "resources.pids", "streams.extra", "resources.memoryBytes")
}

func TestParsePolicySyntax(t *testing.T) {
	for name, data := range map[string]string{
		"empty":     ``,
		"truncated": `{"resources":`,
		"trailing":  validPolicyJSON + `{}`,
		"deep":      strings.Repeat("[", 100) + strings.Repeat("]", 100),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParsePolicy([]byte(data))
			assertPaths(t, err, "(root)")
		})
	}
}

func TestParsePolicyDuplicateKey(t *testing.T) {
	data := strings.Replace(validPolicyJSON, `"pids": 256`, `"pids": 256, "pids": 1`, 1)
	_, err := ParsePolicy([]byte(data))
	assertPaths(t, err, "resources.pids")
}

func TestParsePolicyAcceptsIntegralNumbers(t *testing.T) {
	data := mutate(t, validPolicyJSON, "resources.pids", raw(`2.56e2`))
	p, err := ParsePolicy(data)
	assert.NilError(t, err)
	assert.Equal(t, p.Resources.PIDs, int64(256))
}

func TestParseRequest(t *testing.T) {
	req, err := ParseRequest([]byte(`{"policy":` + validPolicyJSON + `}`))
	assert.NilError(t, err)
	assert.DeepEqual(t, req, Request{Policy: validPolicy()})

	_, err = ParseRequest([]byte(`{"policy":` + string(mutate(t, validPolicyJSON, "resources.memoryBytes", "x")) + `,"other":1}`))
	assertPaths(t, err, "other", "policy.resources.memoryBytes")

	_, err = ParseRequest([]byte(`{}`))
	assertPaths(t, err, "policy")
}

func TestPolicyNormalize(t *testing.T) {
	zeroDefaults := validPolicy()
	zeroDefaults.WorkspaceDiskQuota = WorkspaceDiskQuota{}
	zeroDefaults.Execution = Execution{}
	got, err := zeroDefaults.Normalize()
	assert.NilError(t, err)
	assert.DeepEqual(t, got, validPolicy())

	limit := int64(5)
	withPtr := validPolicy()
	withPtr.Streams.MaxStdinBytes = &limit
	got, err = withPtr.Normalize()
	assert.NilError(t, err)
	assert.Assert(t, got.Streams.MaxStdinBytes != &limit, "Normalize must not share pointers")

	tests := []struct {
		name   string
		change func(p *Policy)
		want   []string
	}{
		{"nan cpus", func(p *Policy) { p.Resources.CPUs = math.NaN() }, []string{"resources.cpus"}},
		{"inf cpus", func(p *Policy) { p.Resources.CPUs = math.Inf(1) }, []string{"resources.cpus"}},
		{"zero memory", func(p *Policy) { p.Resources.MemoryBytes = 0 }, []string{"resources.memoryBytes"}},
		{"above safe", func(p *Policy) { p.TemporaryStorage.TempBytes = MaxSafeInteger + 1 }, []string{"temporaryStorage.tempBytes"}},
		{"no network", func(p *Policy) { p.Network = Network{} }, []string{"network.kind"}},
		{"quota bytes without kind", func(p *Policy) { p.WorkspaceDiskQuota = WorkspaceDiskQuota{Bytes: 5} }, []string{"workspaceDiskQuota.bytes"}},
		{"deadline without timeout", func(p *Policy) { p.Execution = Execution{Kind: ExecutionDeadline} }, []string{"execution.timeoutMs"}},
		{"zero deadlines", func(p *Policy) { p.Deadlines = Deadlines{} }, []string{"deadlines.startupMs", "deadlines.cleanupMs"}},
		{"zero transfers", func(p *Policy) { p.Transfers = TransferBuffers{} }, []string{"transfers.chunkBytes", "transfers.metadataBatchBytes", "transfers.metadataMergeFanIn"}},
		{"hwm too big", func(p *Policy) { p.Streams.MaxBufferedOutputBytes = 1 }, []string{"streams.highWaterMarkBytes"}},
		{"negative stdin", func(p *Policy) { p.Streams.MaxStdinBytes = ptr[int64](-1) }, []string{"streams.maxStdinBytes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := validPolicy()
			tc.change(&p)
			_, err := p.Normalize()
			assertPaths(t, err, tc.want...)
			_, err = Request{Policy: p}.Normalize()
			want := make([]string, len(tc.want))
			for i, w := range tc.want {
				want[i] = "policy." + w
			}
			assertPaths(t, err, want...)
		})
	}
}

func TestSupportValidate(t *testing.T) {
	good := Support{BackendID: "docker", BackendRevision: "qualbox-1", NetworkModes: []NetworkKind{NetworkIsolated, NetworkOutbound}}
	assert.NilError(t, good.Validate())
	tests := []struct {
		name   string
		change func(s *Support)
		want   []string
	}{
		{"empty id", func(s *Support) { s.BackendID = "" }, []string{"backendId"}},
		{"separator revision", func(s *Support) { s.BackendRevision = "a/b" }, []string{"backendRevision"}},
		{"no modes", func(s *Support) { s.NetworkModes = nil }, []string{"networkModes"}},
		{"duplicate mode", func(s *Support) { s.NetworkModes = []NetworkKind{NetworkIsolated, NetworkIsolated} }, []string{"networkModes.1"}},
		{"unknown mode", func(s *Support) { s.NetworkModes = []NetworkKind{"bridge"} }, []string{"networkModes.0"}},
		{"three modes", func(s *Support) { s.NetworkModes = append(s.NetworkModes, NetworkIsolated) }, []string{"networkModes", "networkModes.2"}},
		{"quota true", func(s *Support) { s.WorkspaceDiskQuota = true }, []string{"workspaceDiskQuota"}},
		{"allowlist true", func(s *Support) { s.NetworkAllowlist = true }, []string{"networkAllowlist"}},
		{"termination true", func(s *Support) { s.IndependentProcessTermination = true }, []string{"independentProcessTermination"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			s.NetworkModes = append([]NetworkKind(nil), good.NetworkModes...)
			tc.change(&s)
			assertPaths(t, s.Validate(), tc.want...)
		})
	}
}

func TestEffectivePolicyValidate(t *testing.T) {
	p := validPolicy()
	good := EffectivePolicy{
		BackendIdentity: "engine-1", Isolation: IsolationContainer, Resources: p.Resources,
		TemporaryStorage: p.TemporaryStorage, Network: p.Network, NonRoot: true, ReadOnlyRoot: true,
		WorkspaceDiskQuota: WorkspaceDiskQuota{Kind: QuotaNotRequested},
	}
	assert.NilError(t, good.Validate())
	bad := good
	bad.BackendIdentity = "has space"
	bad.Isolation = "chroot"
	bad.Resources.PIDs = 0
	bad.NonRoot = false
	bad.ReadOnlyRoot = false
	bad.WorkspaceDiskQuota = WorkspaceDiskQuota{Kind: QuotaRequired, Bytes: 1, Accounting: AccountingAllocatedBlocks}
	got := issuePaths(t, bad.Validate())
	want := []string{"backendIdentity", "isolation", "resources.pids", "nonRoot", "readOnlyRoot", "workspaceDiskQuota"}
	assert.DeepEqual(t, got, want)
}

func TestIssueMessagesAreBounded(t *testing.T) {
	// A hostile object with many unknown fields yields a bounded error.
	var b strings.Builder
	b.WriteString("{")
	for i := range 1000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"f` + itoa(i) + `":1`)
	}
	b.WriteString("}")
	_, err := ParsePolicy([]byte(b.String()))
	paths := issuePaths(t, err)
	assert.Equal(t, len(paths), maxIssues+1)
	assert.Assert(t, cmp.Equal(paths[len(paths)-1], "(root)"))
}
