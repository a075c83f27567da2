package driver

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

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
