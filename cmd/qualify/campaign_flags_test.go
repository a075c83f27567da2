package main

import (
	"bytes"
	"context"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/exitcode"
)

// run's --repeat and --parallel are bounded and refused before the Engine
// is contacted.
func TestRunCampaignFlagBounds(t *testing.T) {
	path := writeManifest(t, func(s string) string { return s })
	for _, args := range [][]string{{"--repeat", "0"}, {"--parallel", "0"}, {"--repeat", "1001"}, {"--parallel", "17"}, {"--repeat", "x"}} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"run", "--manifest", path}, args...), &stdout, &stderr)
		assert.Check(t, is.Equal(code, exitcode.Usage), "args %q", args)
		if args[1] != "x" {
			assert.Check(t, is.Contains(stderr.String(), "--repeat must be 1..1000 and --parallel 1..16"), "args %q", args)
		}
	}
}

// run's --scenario-timeout is bounded (1s to 24h) and refused before the
// Engine is contacted.
func TestRunScenarioTimeoutFlagBounds(t *testing.T) {
	path := writeManifest(t, func(s string) string { return s })
	for _, v := range []string{"0s", "999ms", "-1m", "25h", "10"} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"run", "--manifest", path, "--scenario-timeout", v}, &stdout, &stderr)
		assert.Check(t, is.Equal(code, exitcode.Usage), "--scenario-timeout %s", v)
		if v != "10" {
			assert.Check(t, is.Contains(stderr.String(), "--scenario-timeout must be 1s..24h0m0s, got "), "--scenario-timeout %s", v)
		}
	}
}
