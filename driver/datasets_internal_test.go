package driver

import (
	"errors"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/sandboxapi"
)

// The per-image-mount advisory is accepted exactly once per dataset on the
// compute container and nowhere else; any other warning rejects with its
// text (docs/contract.md#datasets).
func TestAcceptableCreateWarnings(t *testing.T) {
	adv := ImageMountAdvisory
	for _, tc := range []struct {
		name     string
		warnings []string
		mounts   int
		ok       bool
	}{
		{"no warning, no dataset", nil, 0, true},
		{"no warning, two datasets (lane B adds none)", nil, 2, true},
		{"one advisory per dataset", []string{adv, adv}, 2, true},
		{"advisory without a dataset (export accessor)", []string{adv}, 0, false},
		{"fewer advisories than datasets", []string{adv}, 2, false},
		{"more advisories than datasets", []string{adv, adv, adv}, 2, false},
		{"another warning", []string{"Your kernel does not support swap limit capabilities"}, 0, false},
		{"another warning beside the advisories", []string{adv, "IPv4 forwarding is disabled"}, 2, false},
		{"advisory with different case", []string{"image mount is an experimental feature"}, 1, false},
		{"advisory with trailing text", []string{adv + "."}, 1, false},
	} {
		assert.Equal(t, acceptableCreateWarnings(tc.warnings, tc.mounts), tc.ok, tc.name)
	}
	err := error(&CreateWarningError{Role: sandboxapi.RoleCompute, Datasets: 1, Warnings: []string{"IPv4 forwarding is disabled"}})
	assert.ErrorContains(t, err, `["IPv4 forwarding is disabled"]`)
	var unsupported *sandboxapi.UnsupportedError
	assert.Assert(t, errors.As(err, &unsupported))
}

func TestParseSubpath(t *testing.T) {
	for _, ok := range []string{"corpus", "corpus/nested", "alias", "a b", "ümlaut/ß", strings.Repeat("x", 255)} {
		assert.NilError(t, parseSubpath(ok), ok)
	}
	for p, want := range map[string]string{
		"":                         "a workspace-relative path is required",
		"/etc":                     "absolute paths",
		"../etc":                   `".." component is not canonical`,
		"corpus/..":                `".." component is not canonical`,
		"./corpus":                 `"." component is not canonical`,
		"corpus/":                  "empty component",
		"a//b":                     "empty component",
		"a\x00b":                   "contains NUL",
		"a\nb":                     "control or invalid character U+000A",
		"tab\there":                "control or invalid character U+0009",
		"del\x7f":                  "control or invalid character U+007F",
		"\xff":                     "not valid UTF-8",
		strings.Repeat("x", 256):   "component of 256 bytes exceeds 255",
		strings.Repeat("ab/", 342): "1026 bytes exceed 1024",
	} {
		err := parseSubpath(p)
		assert.ErrorContains(t, err, want, "%q", p)
	}
}
