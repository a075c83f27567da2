// Package depcheck keeps the module layering of shared/DESIGN.md:
// sandboxapi <- driver <- qualify <- cmd, profiles read by driver and
// qualify, and the contract free of Docker.
package depcheck

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/qualbox/qualbox"

// forbidden maps a package prefix to import prefixes its non-test code
// must not reach, directly or transitively.
var forbidden = map[string][]string{
	module + "/sandboxapi": {"github.com/moby/", "github.com/docker/", module + "/driver", module + "/qualify", module + "/profiles"},
	module + "/profiles":   {"github.com/moby/", module + "/driver", module + "/qualify", module + "/sandboxapi"},
	module + "/driver":     {module + "/qualify", module + "/cmd"},
	module + "/qualify":    {module + "/cmd"},
}

// fixture is the driver's real-Engine test fixture package. It borrows the
// guest image from qualify, so it is exempt from the driver's rule, and in
// exchange no non-test package may depend on it.
const fixture = module + "/driver/internal/enginetest"

func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps=false", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, deps := fields[0], fields[1:]
		for _, d := range deps {
			if d == fixture {
				t.Errorf("%s depends on the test fixture %s", pkg, fixture)
			}
		}
		if pkg == fixture {
			continue
		}
		for prefix, bad := range forbidden {
			if pkg != prefix && !strings.HasPrefix(pkg, prefix+"/") {
				continue
			}
			checked++
			for _, d := range deps {
				for _, b := range bad {
					if strings.HasPrefix(d, b) {
						t.Errorf("%s depends on %s (forbidden: %s)", pkg, d, b)
					}
				}
			}
		}
	}
	if checked < 5 {
		t.Fatalf("checked only %d packages; the go list pattern matched too little", checked)
	}
}
