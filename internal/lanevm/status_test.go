package lanevm_test

import (
	"errors"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/lanevm"
)

func TestParseStatus(t *testing.T) {
	for content, want := range map[string]lanevm.GuestStatus{
		"passed\n": lanevm.StatusPassed, "failed\n": lanevm.StatusFailed, "stopped\n": lanevm.StatusStopped,
	} {
		got, err := lanevm.ParseStatus([]byte(content))
		assert.Check(t, err)
		assert.Check(t, is.Equal(got, want))
	}
	for _, content := range []string{"", "\n", "0\n", "1\n", "143\n", "passed", "passed\r\n", " passed\n", "passed\n\n", "Passed\n", "none\n"} {
		got, err := lanevm.ParseStatus([]byte(content))
		var se *lanevm.StatusError
		assert.Check(t, errors.As(err, &se), "%q", content)
		assert.Check(t, is.Equal(got, lanevm.NoStatus), "%q", content)
	}
}

// Whatever the guest writes, ParseStatus returns a status only for the
// three words, and an error that keeps at most MaxStatusBytes of the
// content otherwise.
func FuzzParseStatus(f *testing.F) {
	for _, s := range []string{"passed\n", "failed\n", "stopped\n", "0\n", "", "passed"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		got, err := lanevm.ParseStatus(content)
		if err == nil {
			if s := string(content); s != "passed\n" && s != "failed\n" && s != "stopped\n" {
				t.Fatalf("%q parsed as %s", content, got)
			}
			return
		}
		var se *lanevm.StatusError
		if !errors.As(err, &se) || got != lanevm.NoStatus || len(se.Content) > lanevm.MaxStatusBytes {
			t.Fatalf("%q: %v, %v", content, got, err)
		}
	})
}
