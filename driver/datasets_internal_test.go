package driver

import (
	"errors"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
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

// engineReply is an Engine error reply as the moby client returns it: the
// daemon's message, classified by its HTTP status through errdefs.
type engineReply struct {
	msg   string
	class error
}

func (e engineReply) Error() string { return e.msg }
func (e engineReply) Unwrap() error { return e.class }

// datasetSubpathFailure maps only the Engine's subpath refusals, at 400,
// 404 or 500, to the typed error, and names the dataset whose subpath the reply
// names (every dataset with a subpath when it names none); anything else
// stays the caller's to classify. The live refusals are
// TestDatasetSubpathRefusals's, on an Engine with image mounts.
func TestDatasetSubpathFailure(t *testing.T) {
	a, b := "corpus/nested", "link"
	ds := []Dataset{{Name: "whole"}, {Name: "first", Subpath: &a}, {Name: "second", Subpath: &b}}
	escape := "error while mounting volume '': path concatenation escapes the base directory, base: /var/lib/docker/rootfs/overlayfs/abc, subpath: link"
	absent := "cannot access path /var/lib/docker/rootfs/overlayfs/abc/corpus/nested: lstat /var/lib/docker/rootfs/overlayfs/abc/corpus/nested: no such file or directory"
	for _, tc := range []struct {
		name  string
		err   error
		want  []DatasetRef
		typed bool
	}{
		{"escape names its subpath", engineReply{escape, cerrdefs.ErrInvalidArgument}, []DatasetRef{{2, "second", "link"}}, true},
		{"inaccessible names its subpath", engineReply{absent, cerrdefs.ErrNotFound}, []DatasetRef{{1, "first", "corpus/nested"}}, true},
		{"unattributed names every subpath", engineReply{"error while resolving symlinks in combined path \"/x/y\": too many links", cerrdefs.ErrInvalidArgument},
			[]DatasetRef{{1, "first", "corpus/nested"}, {2, "second", "link"}}, true},
		{"another 400", engineReply{"invalid mount config", cerrdefs.ErrInvalidArgument}, nil, false},
		{"a missing container", engineReply{"No such container: abc", cerrdefs.ErrNotFound}, nil, false},
		{"inaccessible at a 500", engineReply{absent, cerrdefs.ErrInternal}, []DatasetRef{{1, "first", "corpus/nested"}}, true},
		{"the words at an unclassified status", engineReply{escape, cerrdefs.ErrUnknown}, nil, false},
		{"no reply", errors.New(escape), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := datasetSubpathFailure(tc.err, ds)
			if !tc.typed {
				assert.Check(t, got == nil, "%v", got)
				return
			}
			assert.Assert(t, got != nil)
			assert.DeepEqual(t, got.Datasets, tc.want)
			for _, host := range []string{"/var/lib", "base directory", "no such file", "too many links"} {
				assert.Check(t, !strings.Contains(got.Error(), host), "%s", got)
			}
			var ve *sandboxapi.ValidationError
			assert.Assert(t, errors.As(got, &ve))
			assert.Equal(t, len(ve.Issues), len(tc.want))
		})
	}
	assert.Check(t, datasetSubpathFailure(engineReply{escape, cerrdefs.ErrInvalidArgument}, ds[:1]) == nil, "no dataset has a subpath")
}
