//go:build !linux

package qualify

import (
	"context"

	"github.com/qualbox/qualbox/qualify/evidence"
)

// HostFacts returns nil: host facts are read on Linux controllers only
// (hostfacts_linux.go).
func HostFacts(ctx context.Context, root string) *evidence.Host { return nil }
