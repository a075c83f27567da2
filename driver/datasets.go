package driver

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/qualbox/qualbox/sandboxapi"
)

// ImageMountAdvisory is the create warning Engines that mark image mounts
// experimental add once per `type: image` mount. It is the only create
// warning the driver accepts, exactly once per selected dataset on the
// compute container (docs/contract.md#datasets). Engines that do not mark
// the feature (the Moby v2.0.0-beta.24 build of lane B) add no warning.
const ImageMountAdvisory = "Image mount is an experimental feature"

// MaxSubpathBytes bounds a dataset subpath, in bytes.
const MaxSubpathBytes = 1024

// acceptableCreateWarnings reports whether warnings of a container create
// with imageMounts image mounts are acceptable: none, or exactly
// imageMounts copies of ImageMountAdvisory and nothing else. Any other
// warning, or the advisory a different number of times, is not.
func acceptableCreateWarnings(warnings []string, imageMounts int) bool {
	if len(warnings) == 0 {
		return true
	}
	return len(warnings) == imageMounts && !slices.ContainsFunc(warnings, func(w string) bool { return w != ImageMountAdvisory })
}

// CreateWarningError reports a container create the Engine answered with
// warnings other than exactly one ImageMountAdvisory per dataset. The
// container exists; the driver removes it by its exact ID. It unwraps to
// *sandboxapi.UnsupportedError.
type CreateWarningError struct {
	Role     sandboxapi.Role
	Datasets int
	Warnings []string
}

func (e *CreateWarningError) Error() string {
	return fmt.Sprintf("driver: Engine warned on %s container create with %d dataset image mount(s): %q (only %q once per dataset is accepted)",
		e.Role, e.Datasets, e.Warnings, ImageMountAdvisory)
}

func (e *CreateWarningError) Unwrap() error {
	return &sandboxapi.UnsupportedError{Message: e.Error()}
}

// parseSubpath checks a dataset subpath with the contract's relative-path
// rules (docs/contract.md#datasets, #workspace-files): present means
// non-empty, canonical, relative, valid UTF-8, no "." or ".." component, no
// component over sandboxapi.MaxNameBytes, and no control character
// (U+0000-U+001F, U+007F), at most MaxSubpathBytes in all. The Engine
// resolves symlinks inside the image and refuses targets outside it; this
// check is lexical only.
func parseSubpath(p string) error {
	if len(p) > MaxSubpathBytes {
		return fmt.Errorf("%d bytes exceed %d", len(p), MaxSubpathBytes)
	}
	if _, err := sandboxapi.ParseRelativePath(p); err != nil {
		var ve *sandboxapi.ValidationError
		if errors.As(err, &ve) && len(ve.Issues) > 0 {
			return errors.New(ve.Issues[0].Message)
		}
		return err
	}
	for i, r := range p {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return fmt.Errorf("%q: control or invalid character %U at byte %d", p, r, i)
		}
	}
	return nil
}

// DatasetSubpathError reports dataset subpaths the Engine could not mount
// from their images when it started the compute container: the subpath
// does not exist in the image, or resolves (through a symlink) outside it,
// or its symlinks cannot be resolved. The message names the datasets and
// subpaths only, and is the same for each of those causes: the Engine's own
// message names its host paths and reads differently when an absolute
// symlink's target exists on the Engine's host, so passing it on would let
// a dataset image probe the host (docs/contract.md#datasets). Datasets
// lists the datasets the Engine's reply names; when it names none of them
// exactly, every dataset with a subpath. It unwraps to a
// *sandboxapi.ValidationError with one issue per dataset, at the path
// Config validation uses ("Datasets[<i>].Subpath").
type DatasetSubpathError struct {
	Datasets []DatasetRef
}

// DatasetRef names one configured dataset: its index in Config.Datasets,
// its name and its subpath.
type DatasetRef struct {
	Index   int
	Name    string
	Subpath string
}

func (e *DatasetSubpathError) Error() string {
	parts := make([]string, 0, len(e.Datasets))
	for _, d := range e.Datasets {
		parts = append(parts, fmt.Sprintf("%q subpath %q", d.Name, d.Subpath))
	}
	which := "dataset "
	if len(parts) > 1 {
		which = "one of datasets "
	}
	return "driver: " + which + strings.Join(parts, ", ") + " does not resolve to a path inside its image"
}

func (e *DatasetSubpathError) Unwrap() error {
	ve := &sandboxapi.ValidationError{}
	for _, d := range e.Datasets {
		ve.Issues = append(ve.Issues, sandboxapi.Issue{
			Path:    []string{"Datasets[" + strconv.Itoa(d.Index) + "]", "Subpath"},
			Message: fmt.Sprintf("%q does not resolve to a path inside dataset image %q", d.Subpath, d.Name),
		})
	}
	return ve
}

// subpathRefusals are the Engine's words for an image mount subpath it
// cannot join to the image's root at container start (Moby's safepath:
// an escape, an inaccessible path, an unresolvable symlink). Each is
// followed by host paths.
var subpathRefusals = []string{
	"path concatenation escapes the base directory",
	"cannot access path ",
	"error while resolving symlinks in ",
}

// datasetSubpathFailure returns the *DatasetSubpathError for a compute
// container start the Engine refused because of a dataset subpath, and nil
// for any other failure. An Engine refusal is a 400, 404 or 500 reply
// (lane B's Moby answers an inaccessible subpath at the archive request
// with 500, an escape with 400) whose message carries one of
// subpathRefusals; a transport error is never one; the dataset is the one whose
// subpath the reply names (", subpath: <s>" for an escape, "/<s>: " or a
// trailing "/<s>" for an inaccessible path).
func datasetSubpathFailure(err error, datasets []Dataset) *DatasetSubpathError {
	if err == nil || !(cerrdefs.IsInvalidArgument(err) || cerrdefs.IsNotFound(err) || cerrdefs.IsInternal(err)) {
		return nil
	}
	msg := err.Error()
	if !slices.ContainsFunc(subpathRefusals, func(w string) bool { return strings.Contains(msg, w) }) {
		return nil
	}
	var named, all []DatasetRef
	for i, d := range datasets {
		if d.Subpath == nil {
			continue
		}
		ref := DatasetRef{Index: i, Name: d.Name, Subpath: *d.Subpath}
		all = append(all, ref)
		sp := *d.Subpath
		if strings.Contains(msg, ", subpath: "+sp) || strings.Contains(msg, "/"+sp+": ") || strings.HasSuffix(msg, "/"+sp) {
			named = append(named, ref)
		}
	}
	if len(all) == 0 {
		return nil
	}
	if len(named) == 0 {
		named = all
	}
	return &DatasetSubpathError{Datasets: named}
}
