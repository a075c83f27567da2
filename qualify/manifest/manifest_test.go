package manifest_test

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/driver"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

const good = `profile: linux-x64-cgroupv1
engine:
  endpoint: unix:///var/run/docker.sock
image: build
namespace: qual
policy:
  resources: {cpus: 0.5, memoryBytes: 268435456, pids: 128}
  temporaryStorage: {homeBytes: 16777216, tempBytes: 8388608}
  network: {kind: isolated}
  deadlines: {startupMs: 60000, cleanupMs: 30000}
  transfers: {chunkBytes: 65536, metadataBatchBytes: 1048576, metadataMergeFanIn: 16}
  streams: {maxBufferedInputBytes: 65536, maxBufferedOutputBytes: 1048576, highWaterMarkBytes: 16384}
scenarios:
  - name: admission
  - name: lifecycle
    params: {exitCode: 3}
`

func TestParseGood(t *testing.T) {
	m, err := manifest.Parse("good.yaml", []byte(good), scenario.Default())
	assert.NilError(t, err)
	assert.Equal(t, m.Profile, "linux-x64-cgroupv1")
	assert.Equal(t, m.Image, manifest.ImageBuild)
	assert.Equal(t, m.User, driver.User{UID: 65534, GID: 65534})
	assert.Equal(t, m.Namespace, "qual")
	assert.Equal(t, m.Policy.Resources.MemoryBytes, int64(268435456))
	assert.Equal(t, string(m.Policy.Execution.Kind), "until_stopped")
	assert.DeepEqual(t, m.Scenarios, []manifest.Entry{
		{Name: "admission", Params: map[string]any{}},
		{Name: "lifecycle", Params: map[string]any{"exitCode": 3}},
	})
	assert.Equal(t, len(m.SHA256), 64)
}

func TestShippedManifest(t *testing.T) {
	// Every shipped catalogue (lanes A and B: linux-x64-cgroupv1; lane C:
	// linux-x64) selects the whole registered catalogue, in one order.
	for _, path := range []string{"linux-x64-cgroupv1.yaml", "linux-x64-cgroupv1-lane-b.yaml", "linux-x64.yaml"} {
		m, err := manifest.Load("../../manifests/"+path, scenario.Default())
		assert.NilError(t, err)
		var names []string
		for _, s := range m.Scenarios {
			names = append(names, s.Name)
		}
		assert.DeepEqual(t, names, []string{"admission", "isolation", "lifecycle", "memory-exhaustion", "pid-exhaustion",
			"tmpfs-bounds", "stream-limits", "cancellation", "descendant-containment", "network-isolation",
			"lost-engine-replies", "exact-cleanup", "unsupported-quota", "transfer", "controller-death", "datasets", "desktop-admission",
			"warm-pool", "engine-restart"})
		sorted := slices.Sorted(slices.Values(names))
		assert.DeepEqual(t, sorted, scenario.Default().Names())
		t.Logf("%s: %d scenarios", path, len(names))
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(string) string
		field   string
		line    int
		message string
	}{
		{
			name:  "unknown top-level field",
			edit:  func(s string) string { return s + "colour: blue\n" },
			field: "colour", line: 17, message: "unknown field: allowed profile, engine, image, user, namespace, output, policy, scenarios",
		},
		{
			name:  "unknown nested field",
			edit:  func(s string) string { return strings.Replace(s, "engine:\n", "engine:\n  tls: true\n", 1) },
			field: "engine.tls", line: 3, message: "unknown field: allowed endpoint",
		},
		{
			name:  "bad scenario name",
			edit:  func(s string) string { return strings.Replace(s, "name: admission", "name: foo", 1) },
			field: "scenarios[0].name", line: 14, message: `unknown scenario "foo": allowed admission, cancellation, controller-death, datasets, descendant-containment, desktop-admission, engine-restart, exact-cleanup, isolation, lifecycle, lost-engine-replies, memory-exhaustion, network-isolation, pid-exhaustion, stream-limits, tmpfs-bounds, transfer, unsupported-quota`,
		},
		{
			name:  "bad scenario param",
			edit:  func(s string) string { return strings.Replace(s, "exitCode: 3", "exitcode: 3", 1) },
			field: "scenarios[1]", line: 16, message: "scenario lifecycle: params.exitcode: unknown parameter; allowed: exitCode",
		},
		{
			name:  "bad policy field path",
			edit:  func(s string) string { return strings.Replace(s, "pids: 128", "pids: 0", 1) },
			field: "policy.resources.pids", line: 7, message: "must be an integer from 1 to 9007199254740991, got 0",
		},
		{
			name: "unknown policy field",
			edit: func(s string) string {
				return strings.Replace(s, "network: {kind: isolated}", "network: {kind: isolated, dns: x}", 1)
			},
			field: "policy.network.dns", line: 9, message: "unknown field",
		},
		{
			name:  "bad image id",
			edit:  func(s string) string { return strings.Replace(s, "image: build", "image: sha256:ABC", 1) },
			field: "image", line: 4, message: `"sha256:ABC": want "build" or an exact image ID sha256:<64 lowercase hex>`,
		},
		{
			name:  "unknown profile",
			edit:  func(s string) string { return strings.Replace(s, "linux-x64-cgroupv1", "linux-x86", 1) },
			field: "profile", line: 1, message: `unknown profile "linux-x86": allowed`,
		},
		{
			name: "bad endpoint",
			edit: func(s string) string {
				return strings.Replace(s, "unix:///var/run/docker.sock", "tcp://localhost:2375", 1)
			},
			field: "engine.endpoint", line: 3, message: "want unix:///<absolute socket path>",
		},
		{
			name: "bad uid",
			edit: func(s string) string {
				return strings.Replace(s, "namespace: qual\n", "namespace: qual\nuser: {uid: 0, gid: 1}\n", 1)
			},
			field: "user.uid", line: 6, message: "want an integer from 1 to 262143",
		},
		{
			name: "missing policy",
			edit: func(s string) string {
				i := strings.Index(s, "policy:")
				j := strings.Index(s, "scenarios:")
				return s[:i] + s[j:]
			},
			field: "policy", message: "required",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := manifest.Parse("m.yaml", []byte(tc.edit(good)), scenario.Default())
			var merr *manifest.Error
			assert.Assert(t, errors.As(err, &merr), "got %v", err)
			assert.Equal(t, merr.File, "m.yaml")
			var found *manifest.Issue
			for i := range merr.Issues {
				if merr.Issues[i].Field == tc.field {
					found = &merr.Issues[i]
				}
			}
			assert.Assert(t, found != nil, "no issue for field %s in %v", tc.field, err)
			assert.Equal(t, found.Line, tc.line, "issue %+v", *found)
			assert.Check(t, is.Contains(found.Problem, tc.message))
			// The rendered error names file, line and field.
			loc := "m.yaml"
			if tc.line > 0 {
				loc += ":" + strconv.Itoa(tc.line)
			}
			assert.Check(t, is.Contains(err.Error(), loc+": "+tc.field+": "))
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := manifest.Load(t.TempDir()+"/absent.yaml", scenario.Default())
	assert.ErrorContains(t, err, "absent.yaml")
	assert.Assert(t, errors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), "no such file"))
}

func TestParseNotAMapping(t *testing.T) {
	_, err := manifest.Parse("m.yaml", []byte("- a\n- b\n"), scenario.Default())
	assert.ErrorContains(t, err, "manifest m.yaml: want one YAML mapping")
}

func TestIssuesInDocumentOrder(t *testing.T) {
	doc := strings.Replace(strings.Replace(good, "image: build", "image: latest", 1), "name: lifecycle", "name: bogus", 1)
	_, err := manifest.Parse("m.yaml", []byte(doc), scenario.Default())
	var merr *manifest.Error
	assert.Assert(t, errors.As(err, &merr))
	var fields []string
	for _, i := range merr.Issues {
		fields = append(fields, i.Field)
	}
	assert.Assert(t, cmp.Equal(fields, []string{"image", "scenarios[1].name"}), cmp.Diff([]string{"image", "scenarios[1].name"}, fields))
}
