package sandboxapi

import (
	"encoding/json"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
)

const validSpecJSON = `{"executable":"/bin/sh","args":["-c","echo hi"],"env":{"FOO":"bar"},"cwd":"/workspace"}`

func TestParseProcessSpecRoundTrip(t *testing.T) {
	spec, err := ParseProcessSpec([]byte(validSpecJSON))
	assert.NilError(t, err)
	assert.DeepEqual(t, spec, ProcessSpec{Executable: "/bin/sh", Args: []string{"-c", "echo hi"}, Env: map[string]string{"FOO": "bar"}, Cwd: "/workspace"})
	data, err := json.Marshal(spec)
	assert.NilError(t, err)
	assert.Equal(t, string(data), validSpecJSON)

	empty, err := ParseProcessSpec([]byte(`{"executable":"/","args":[],"env":{},"cwd":"/"}`))
	assert.NilError(t, err)
	assert.DeepEqual(t, empty, ProcessSpec{Executable: "/", Args: []string{}, Env: map[string]string{}, Cwd: "/"})
}

func TestParseProcessSpecIssues(t *testing.T) {
	tests := []struct {
		name  string
		path  string
		value any
		want  []string
	}{
		{"unknown field", "user", "root", []string{"user"}},
		{"missing args", "args", del{}, []string{"args"}},
		{"null env", "env", nil, []string{"env"}},
		{"args object", "args", raw(`{}`), []string{"args"}},
		{"arg number", "args.1", 3, []string{"args.1"}},
		{"arg NUL", "args.1", "a\x00b", []string{"args.1"}},
		{"relative executable", "executable", "bin/sh", []string{"executable"}},
		{"dot segment", "executable", "/bin/./sh", []string{"executable"}},
		{"dotdot segment", "cwd", "/workspace/..", []string{"cwd"}},
		{"empty segment", "cwd", "/a//b", []string{"cwd"}},
		{"trailing slash", "cwd", "/workspace/", []string{"cwd"}},
		{"NUL path", "executable", "/bin/s\x00h", []string{"executable"}},
		{"long path", "cwd", "/" + strings.Repeat("a", MaxPathBytes), []string{"cwd"}},
		{"empty executable", "executable", "", []string{"executable"}},
		{"env bad name", "env", raw(`{"1FOO":"x"}`), []string{"env.1FOO"}},
		{"env dash name", "env", raw(`{"A-B":"x"}`), []string{"env.A-B"}},
		{"env long name", "env", raw(`{"` + strings.Repeat("A", MaxIdentityBytes+1) + `":"x"}`), []string{"env." + strings.Repeat("A", MaxIdentityBytes+1)}},
		{"env NUL value", "env.FOO", "a\x00", []string{"env.FOO"}},
		{"env number value", "env.FOO", 1, []string{"env.FOO"}},
		{"env long value", "env.FOO", strings.Repeat("v", MaxEnvValueBytes+1), []string{"env.FOO"}},
		{"arg too long", "args.0", strings.Repeat("a", MaxRecipeBytes+1), []string{"args.0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseProcessSpec(mutate(t, validSpecJSON, tc.path, tc.value))
			assertPaths(t, err, tc.want...)
		})
	}
}

func TestProcessSpecCounts(t *testing.T) {
	base := ProcessSpec{Executable: "/bin/sh", Cwd: "/"}
	assert.NilError(t, base.Validate(), "nil Args and Env are empty")

	many := base
	many.Args = make([]string, MaxArgs+1)
	assertPaths(t, many.Validate(), "args")

	env := base
	env.Env = map[string]string{}
	for i := range MaxEnvEntries + 1 {
		env.Env["V"+itoa(i)] = ""
	}
	assertPaths(t, env.Validate(), "env")

	// Each argument fits, the aggregate JSON encoding does not.
	big := base
	big.Args = []string{strings.Repeat("a", MaxRecipeBytes/2), strings.Repeat("b", MaxRecipeBytes/2)}
	assertPaths(t, big.Validate(), "(root)")

	// Escapes count as JSON.stringify writes them: a control byte is six.
	exact := base
	exact.Args = []string{strings.Repeat("\x01", (MaxRecipeBytes-200)/6)}
	assert.NilError(t, exact.Validate())
	exact.Args = []string{strings.Repeat("\x01", MaxRecipeBytes/6)}
	assertPaths(t, exact.Validate(), "(root)")

	invalid := base
	invalid.Args = []string{"\xff"}
	assertPaths(t, invalid.Validate(), "args.0")
}

func TestRecipeBytesMatchesEncoding(t *testing.T) {
	spec := ProcessSpec{Executable: "/bin/sh", Args: []string{"-c", `printf "x\n" <&0 \ `}, Env: map[string]string{"A": "1", "B": "\t"}, Cwd: "/w"}
	data, err := marshalCompact(spec)
	assert.NilError(t, err)
	assert.Equal(t, spec.recipeBytes(), len(data))
}

func TestParseExit(t *testing.T) {
	good := map[string]Exit{
		`{"kind":"exited","code":0}`:                        Exited(0),
		`{"kind":"exited","code":255}`:                      Exited(255),
		`{"kind":"signaled","signal":"SIGKILL"}`:            Signaled("SIGKILL"),
		`{"kind":"unavailable","reason":"sandbox_stopped"}`: Unavailable(),
	}
	for data, want := range good {
		t.Run(data, func(t *testing.T) {
			got, err := ParseExit([]byte(data))
			assert.NilError(t, err)
			assert.DeepEqual(t, got, want)
			out, err := json.Marshal(got)
			assert.NilError(t, err)
			assert.Equal(t, string(out), data)
		})
	}
	bad := []struct {
		data string
		want []string
	}{
		{`{"kind":"exited"}`, []string{"code"}},
		{`{"kind":"exited","code":256}`, []string{"code"}},
		{`{"kind":"exited","code":-1}`, []string{"code"}},
		{`{"kind":"exited","code":1.5}`, []string{"code"}},
		{`{"kind":"exited","code":"1"}`, []string{"code"}},
		{`{"kind":"exited","code":1,"signal":"SIGKILL"}`, []string{"signal"}},
		{`{"kind":"signaled","signal":"KILL"}`, []string{"signal"}},
		{`{"kind":"signaled","signal":"SIGkill"}`, []string{"signal"}},
		{`{"kind":"signaled","signal":"SIG` + strings.Repeat("A", 62) + `"}`, []string{"signal"}},
		{`{"kind":"unavailable","reason":"gone"}`, []string{"reason"}},
		{`{"kind":"crashed"}`, []string{"kind"}},
		{`{}`, []string{"kind"}},
		{`null`, []string{"(root)"}},
	}
	for _, tc := range bad {
		t.Run(tc.data, func(t *testing.T) {
			_, err := ParseExit([]byte(tc.data))
			assertPaths(t, err, tc.want...)
		})
	}
}

func TestExitValidateAndString(t *testing.T) {
	assert.NilError(t, Exited(7).Validate())
	assert.Equal(t, Exited(7).String(), "exited with code 7")
	assert.Equal(t, Signaled("SIGKILL").String(), "killed by SIGKILL")
	assert.Equal(t, Unavailable().String(), "unavailable: sandbox_stopped")
	assertPaths(t, Exit{Kind: ExitExited, Code: 300}.Validate(), "code")
	assertPaths(t, Exit{Kind: ExitSignaled, Signal: "SIGTERM", Code: 1}.Validate(), "code")
	assertPaths(t, Exit{Kind: ExitUnavailable}.Validate(), "reason")
	assertPaths(t, Exit{}.Validate(), "kind")
	_, err := json.Marshal(Exit{})
	assert.ErrorContains(t, err, "cannot marshal")
}

func TestIdentities(t *testing.T) {
	good := []string{"a", "docker-1", "ns.with_dots", "é", strings.Repeat("x", MaxNamespaceBytes)}
	for _, s := range good {
		_, err := ParseNamespace(s)
		assert.NilError(t, err, s)
		_, err = ParseSandboxID(s)
		assert.NilError(t, err, s)
		_, err = ParseProcessID(s)
		assert.NilError(t, err, s)
	}
	bad := []string{"", "a b", "a/b", `a\b`, "a\x00", "a\tb", "a\x7f", "\xff", strings.Repeat("x", MaxIdentityBytes+1)}
	for _, s := range bad {
		_, err := ParseSandboxID(s)
		assertPaths(t, err, "(root)")
		_, err = ParseProcessID(s)
		assertPaths(t, err, "(root)")
		_, err = ParseNamespace(s)
		assertPaths(t, err, "(root)")
	}
	_, err := ParseNamespace(strings.Repeat("x", MaxNamespaceBytes+1))
	assertPaths(t, err, "(root)")
	assert.Assert(t, ValidIdentity(strings.Repeat("x", 5), 5))
	assert.Assert(t, !ValidIdentity(strings.Repeat("x", 6), 5))
}
