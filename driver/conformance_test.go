package driver_test

import (
	"testing"

	"github.com/qualbox/qualbox/driver/internal/enginetest"
	"github.com/qualbox/qualbox/sandboxapi"
	"github.com/qualbox/qualbox/sandboxapi/sandboxtest"
)

// TestConformance runs the backend-neutral sandboxapi suite against the
// Docker driver on the real Engine.
func TestConformance(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) sandboxapi.Backend {
		return newBackend(t)
	}, sandboxtest.Config{Shell: "/bin/sh", Request: sandboxapi.Request{Policy: enginetest.Policy()}})
}
