package driver

import (
	"fmt"
	"runtime"

	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/sandboxapi"
)

// controllerPlatform is the controller platform admission compares with a
// profile's `controller`. played is set when a test plays another platform
// than the one it runs on; evidence then says so.
type controllerPlatform struct {
	profiles.Platform
	played bool
}

// hostController is this process's platform.
func hostController() controllerPlatform {
	return controllerPlatform{Platform: profiles.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}}
}

func (c controllerPlatform) tuple() string { return c.OS + "/" + c.Architecture }

// String is the platform as evidence records it.
func (c controllerPlatform) String() string {
	if c.played {
		return fmt.Sprintf("%s (played by %s for a synthetic Engine)", c.tuple(), runtimeTuple())
	}
	return c.tuple()
}

// matches reports whether the controller is the profile's.
func (c controllerPlatform) matches(prof profiles.Profile) bool {
	return c.OS == prof.Controller.OS && c.Architecture == prof.Controller.Architecture
}

// checkController rejects a controller whose OS/architecture differs from
// the profile's before anything else happens: no spill directory check and
// no Engine request (docs/contract.md#profiles-and-admission). A Desktop
// profile on a Linux, Intel Mac or Windows controller ends here.
func checkController(prof profiles.Profile, c controllerPlatform) error {
	if !c.matches(prof) {
		return &sandboxapi.UnsupportedError{Message: fmt.Sprintf("profile %s requires a %s/%s controller, this one is %s",
			prof.Name, prof.Controller.OS, prof.Controller.Architecture, c)}
	}
	return nil
}

// controllerCheck is the admission table's controller row.
func controllerCheck(f *admissionFacts) (string, string, bool) {
	return f.prof.Controller.OS + "/" + f.prof.Controller.Architecture, f.controller.String(), f.controller.matches(f.prof)
}
