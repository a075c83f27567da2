package driver_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/qualbox/qualbox/driver/internal/enginetest"
)

// processCleanup holds fixtures shared by every run of a benchmark in this
// process (-count N), removed after all tests and benchmarks ran.
var processCleanup struct {
	mu  sync.Mutex
	fns []func() error
}

func atProcessExit(fn func() error) {
	processCleanup.mu.Lock()
	defer processCleanup.mu.Unlock()
	processCleanup.fns = append(processCleanup.fns, fn)
}

func TestMain(m *testing.M) {
	code := m.Run()
	processCleanup.mu.Lock()
	for i := len(processCleanup.fns) - 1; i >= 0; i-- {
		if err := processCleanup.fns[i](); err != nil {
			fmt.Fprintln(os.Stderr, "benchmark fixture cleanup:", err)
			code = 1
		}
	}
	processCleanup.mu.Unlock()
	writeResults(os.Stdout)
	if err := enginetest.RemoveImage(); err != nil {
		fmt.Fprintln(os.Stderr, "remove guest image:", err)
		code = 1
	}
	os.Exit(code)
}
