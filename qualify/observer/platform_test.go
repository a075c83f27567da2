package observer

import (
	"errors"
	"testing"

	"gotest.tools/v3/assert"
)

func TestSupported(t *testing.T) {
	assert.NilError(t, supported("linux", "/"))
	assert.NilError(t, supported("darwin", "/tmp/recorded"), "a recorded tree can be read anywhere")
	err := supported("darwin", "/")
	var pe *UnsupportedPlatformError
	assert.Assert(t, errors.As(err, &pe))
	assert.ErrorContains(t, err, "on darwin the Engine runs them in a Linux VM")
}
