package lanevm_test

import (
	"errors"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/internal/lanevm"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// Without settings the budget is lane C's defaults; the engine phase adds
// the slack to the guest's own Engine wait; Longest is every bound summed.
func TestBudgetDefaults(t *testing.T) {
	b, err := lanevm.BudgetFromEnv(envOf(nil))
	assert.NilError(t, err)
	var names, marks []string
	for _, p := range b.Phases {
		names, marks = append(names, p.Name), append(marks, p.Mark)
	}
	assert.Check(t, is.DeepEqual(names, []string{"boot", "engine", "job"}))
	assert.Check(t, is.DeepEqual(marks, []string{"booted", "started", "job.status"}))
	assert.Check(t, is.Equal(b.Phases[0].Bound, 900*time.Second))
	assert.Check(t, is.Equal(b.EngineWait, 900*time.Second))
	assert.Check(t, is.Equal(b.Phases[1].Bound, 960*time.Second))
	assert.Check(t, is.Equal(b.Phases[2].Bound, 2400*time.Second))
	assert.Check(t, is.Equal(b.StopGrace, 180*time.Second))
	assert.Check(t, is.Equal(b.KillGrace, 10*time.Second))
	assert.Check(t, b.Deadline.IsZero())
	assert.Check(t, is.Equal(b.Longest(), (900+960+2400+180+10)*time.Second))
	assert.Check(t, is.Equal(b.String(), "boot 900 s (LANEC_BOOT_TIMEOUT), engine 960 s (LANEC_ENGINE_TIMEOUT + 60 s), job 2400 s (LANEC_RUN_TIMEOUT), power-down 180 s (LANEC_STOP_GRACE) + 10 s after SIGTERM; at most 4450 s"))
}

func TestBudgetFromSettings(t *testing.T) {
	b, err := lanevm.BudgetFromEnv(envOf(map[string]string{
		"LANEC_BOOT_TIMEOUT": "60", "LANEC_ENGINE_TIMEOUT": "30", "LANEC_RUN_TIMEOUT": "600",
		"LANEC_STOP_GRACE": "20", "LANEC_DEADLINE": "1800000000",
	}))
	assert.NilError(t, err)
	assert.Check(t, is.Equal(b.Phases[0].Bound, 60*time.Second))
	assert.Check(t, is.Equal(b.EngineWait, 30*time.Second))
	assert.Check(t, is.Equal(b.Phases[1].Bound, 90*time.Second))
	assert.Check(t, is.Equal(b.Phases[2].Bound, 600*time.Second))
	assert.Check(t, is.Equal(b.StopGrace, 20*time.Second))
	assert.Check(t, b.Deadline.Equal(time.Unix(1800000000, 0)))
	assert.Check(t, is.Contains(b.String(), "; LANEC_DEADLINE 2027-01-15T08:00:00Z"))
}

// A setting the budget cannot use is an *EnvError naming the variable,
// what it must hold and what it held.
func TestBudgetRefusesBadSettings(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"LANEC_BOOT_TIMEOUT", "0", "LANEC_BOOT_TIMEOUT must be whole seconds from 1 to 86400, got '0'"},
		{"LANEC_BOOT_TIMEOUT", "90s", "LANEC_BOOT_TIMEOUT must be whole seconds from 1 to 86400, got '90s'"},
		{"LANEC_ENGINE_TIMEOUT", "-5", "LANEC_ENGINE_TIMEOUT must be whole seconds from 1 to 86400, got '-5'"},
		{"LANEC_RUN_TIMEOUT", "0600", "LANEC_RUN_TIMEOUT must be whole seconds from 1 to 86400, got '0600'"},
		{"LANEC_STOP_GRACE", "86401", "LANEC_STOP_GRACE must be whole seconds from 1 to 86400, got '86401'"},
		{"LANEC_DEADLINE", "tomorrow", "LANEC_DEADLINE must be an absolute time in seconds since the epoch (date +%s), got 'tomorrow'"},
		{"LANEC_DEADLINE", "600", "LANEC_DEADLINE must be an absolute time in seconds since the epoch (date +%s), got '600'"},
	} {
		_, err := lanevm.BudgetFromEnv(envOf(map[string]string{tc.name: tc.value}))
		var ee *lanevm.EnvError
		assert.Check(t, errors.As(err, &ee), "%s=%s: %v", tc.name, tc.value, err)
		if ee != nil {
			assert.Check(t, is.Equal(ee.Var, tc.name))
			assert.Check(t, is.Equal(ee.Error(), tc.want))
		}
	}
}

// Every kind maps to one exit status of internal/exitcode; only a passed
// guest whose results were collected is 0.
func TestResultExitStatus(t *testing.T) {
	for kind, want := range map[lanevm.Kind]int{
		lanevm.GuestPassed:      exitcode.OK,
		lanevm.GuestFailed:      exitcode.Failed,
		lanevm.GuestHung:        exitcode.Failed,
		lanevm.QEMUCrashed:      exitcode.Failed,
		lanevm.PowerDownSlow:    exitcode.Failed,
		lanevm.DeadlineExceeded: exitcode.Failed,
		lanevm.BadStatus:        exitcode.Failed,
		lanevm.Interrupted:      exitcode.Interrupted,
	} {
		assert.Check(t, is.Equal(lanevm.Result{Kind: kind}.ExitStatus(), want), kind.String())
	}
	collectFailed := lanevm.Result{Kind: lanevm.GuestPassed, CollectErr: errors.New("disk full")}
	assert.Check(t, is.Equal(collectFailed.ExitStatus(), exitcode.Internal))
	assert.Check(t, is.Equal(lanevm.Result{Kind: lanevm.Interrupted, CollectErr: errors.New("disk full")}.ExitStatus(), exitcode.Interrupted))
}
