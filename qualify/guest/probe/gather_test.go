package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/qualify/guest/facts"
)

// The control runs only when the attempt failed, without CLONE_NEWUSER
// and after it; an attempt that started has none.
func TestUsernsAttemptRunsTheControlOnlyAfterAFailure(t *testing.T) {
	for _, tc := range []struct {
		name             string
		attempt, control facts.Outcome
		flags            []uintptr
		got              string
		refused          bool
	}{
		{"created", facts.Outcome{OK: true}, facts.Outcome{}, []uintptr{syscall.CLONE_NEWUSER}, "created", false},
		{"clone refused", facts.Outcome{Errno: "EPERM"}, facts.Outcome{OK: true},
			[]uintptr{syscall.CLONE_NEWUSER, 0}, "EPERM", true},
		{"child failed either way", facts.Outcome{Errno: "EACCES"}, facts.Outcome{Errno: "EACCES"},
			[]uintptr{syscall.CLONE_NEWUSER, 0}, "inconclusive: EACCES (the same child without CLONE_NEWUSER failed too: EACCES)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var flags []uintptr
			attempt, control := usernsAttempt(func(f uintptr) facts.Outcome {
				flags = append(flags, f)
				if f&syscall.CLONE_NEWUSER != 0 {
					return tc.attempt
				}
				return tc.control
			})
			assert.Check(t, is.DeepEqual(flags, tc.flags))
			assert.Check(t, is.DeepEqual(attempt, tc.attempt))
			assert.Check(t, (control == nil) == (len(tc.flags) == 1))
			got, refused := facts.ReadUserns(&attempt, control)
			assert.Check(t, is.Equal(got, tc.got))
			assert.Check(t, is.Equal(refused, tc.refused))
		})
	}
}

// On this kernel, a child whose exec fails after the clone (a file
// without an execute bit, which even root may not exec) is reported with
// EACCES, an errno that reads as a refused user namespace on its own.
// With or without CLONE_NEWUSER (created or refused here, whatever this
// host allows), the control fails the same way, so the attempt reads as
// inconclusive, never as a refusal. A child that starts is OK, and one
// that starts and then fails says how.
func TestStartChildFailureAfterTheCloneIsNotARefusal(t *testing.T) {
	noexec := filepath.Join(t.TempDir(), "not-executable")
	assert.NilError(t, os.WriteFile(noexec, []byte("#!/bin/sh\nexit 0\n"), 0o644))
	o := startChild(noexec, 0)
	assert.Check(t, is.Equal(o.OK, false))
	assert.Check(t, is.Equal(o.Errno, "EACCES"), "%+v", o)

	attempt, control := usernsAttempt(func(flags uintptr) facts.Outcome { return startChild(noexec, flags) })
	assert.Assert(t, control != nil, "attempt %+v", attempt)
	assert.Check(t, is.Equal(control.Errno, "EACCES"), "%+v", control)
	got, refused := facts.ReadUserns(&attempt, control)
	assert.Check(t, !refused, got)
	assert.Check(t, is.Contains(got, "inconclusive: "))

	sh := "/bin/sh"
	if _, err := os.Stat(sh); err != nil {
		t.Skipf("no %s to start: %v", sh, err)
	}
	assert.Check(t, is.DeepEqual(startChild(sh, 0, "-c", "exit 0"), facts.Outcome{OK: true}))
	assert.Check(t, is.DeepEqual(startChild(sh, 0, "-c", "exit 3"), facts.Outcome{OK: true, Error: "child: exit status 3"}))
}
