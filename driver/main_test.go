package driver_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/qualbox/qualbox/driver/internal/enginetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := enginetest.RemoveImage(); err != nil {
		fmt.Fprintln(os.Stderr, "remove guest image:", err)
		code = 1
	}
	os.Exit(code)
}
