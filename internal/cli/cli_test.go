package cli

import (
	"bytes"
	"runtime/debug"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

func TestVersionFromBuildInfo(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "6487fbe69e184284441136e9dad0c486a682bd25"},
		{Key: "vcs.time", Value: "2026-12-01T06:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	var b bytes.Buffer
	Version(&b, "qualify", info)
	assert.Equal(t, b.String(), "qualify version v0.3.0\nrevision: 6487fbe69e184284441136e9dad0c486a682bd25+dirty\ncommit time: 2026-12-01T06:00:00Z\ngo: go1.26.8\n")

	info.Settings[3].Value = "false"
	b.Reset()
	Version(&b, "qualify", info)
	assert.Check(t, is.Contains(b.String(), "revision: 6487fbe69e184284441136e9dad0c486a682bd25\n"))

	b.Reset()
	Version(&b, "observe", &debug.BuildInfo{GoVersion: "go1.26.8"})
	assert.Equal(t, b.String(), "observe version unknown\nrevision: unknown (built without VCS stamping, e.g. by go test or -buildvcs=false)\ngo: go1.26.8\n")
}

func TestFlagErrorsUseTwoDashes(t *testing.T) {
	c := New("tool sub", "[--n N]", "Do a thing.")
	c.Flags.Int("n", 0, "a `N`")
	for args, want := range map[string]string{
		"--bogus": "tool sub: flag provided but not defined: --bogus\n",
		"--n":     "tool sub: flag needs an argument: --n\n",
		"--n=x":   `tool sub: invalid value "x" for flag --n: parse error` + "\n",
	} {
		var stdout, stderr bytes.Buffer
		code, done := c.Parse([]string{args}, &stdout, &stderr)
		assert.Check(t, done && code == 2, args)
		assert.Check(t, is.Equal(stdout.String(), ""))
		assert.Check(t, is.Equal(stderr.String(), want+"usage: tool sub [--n N]\nRun 'tool sub --help' for details.\n"))
	}
}
