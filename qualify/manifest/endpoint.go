package manifest

import (
	"fmt"
	"path"
	"strings"
)

// CheckEndpoint reports whether endpoint is an Engine socket a manifest
// may name (and `qualify run --endpoint` may substitute): exactly
// "unix://" followed by an absolute, clean socket path, e.g.
// unix:///var/run/docker.sock. The error quotes the value and says what
// is wanted; the caller names the field or flag.
func CheckEndpoint(endpoint string) error {
	p, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok || !strings.HasPrefix(p, "/") || path.Clean(p) != p {
		return fmt.Errorf("%q: want unix:///<absolute socket path>, e.g. unix:///var/run/docker.sock", endpoint)
	}
	return nil
}
