package observer

import (
	"fmt"
	"runtime"
)

// UnsupportedPlatformError reports a controller that cannot read the
// cgroups of the Engine's containers: on macOS (and Windows) Docker
// Desktop runs them inside its own Linux VM, whose /proc and
// /sys/fs/cgroup the controller never sees (docs/lanes.md#desktop-synthetic).
type UnsupportedPlatformError struct {
	// GOOS is the controller's operating system, for example "darwin".
	GOOS string
}

func (e *UnsupportedPlatformError) Error() string {
	return fmt.Sprintf("the cgroup observer reads /proc and /sys/fs/cgroup of the host that runs the containers; "+
		"on %s the Engine runs them in a Linux VM out of this controller's reach, so observer-based checks cannot run here "+
		"(run them on a Linux host, or point --root at a recorded tree)", e.GOOS)
}

// Supported returns nil when the observer can read the live host
// filesystem rooted at root: on Linux always, elsewhere only for a
// recorded tree (root other than "/"). Otherwise it returns an
// *UnsupportedPlatformError.
func Supported(root string) error {
	return supported(runtime.GOOS, root)
}

func supported(goos, root string) error {
	if goos == "linux" || root != "/" {
		return nil
	}
	return &UnsupportedPlatformError{GOOS: goos}
}
