package lanevm

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Phase is one stretch of a guest run: it begins when the previous phase
// ended (the first when qemu starts) and ends when the guest creates Mark
// under the shared folder's state/ directory. A phase that lasts longer
// than Bound means the guest hung in it.
type Phase struct {
	// Name names the phase in logs and results: boot, engine, job.
	Name string
	// Mark is the file under state/ the guest creates when the phase is
	// over; the last phase's mark is StatusFile.
	Mark string
	// Bound is the longest the phase may take, counted from its start.
	Bound time.Duration
	// Setting says what sets Bound (an environment variable and any
	// fixed slack), for logs and docs/lanes.md.
	Setting string
	// Timing names the line in DIR.lanec/timings that records, in whole
	// seconds since qemu started, when the phase ended; empty for none.
	Timing string
	// Says is that line's explanation.
	Says string
}

// Budget is every time bound of one guest run, computed in one place
// (BudgetFromEnv): the phases in order, the power-down, and an absolute
// deadline that overrides them all.
type Budget struct {
	Phases []Phase
	// EngineWait is how long the guest's job itself waits for its Engine
	// to answer before it reports failure (LANEC_ENGINE_TIMEOUT); the
	// engine phase's Bound adds EngineSlack to it, so the guest's own
	// failure report, with docker.service's journal, comes first.
	EngineWait time.Duration
	// StopGrace is how long a guest may take to power off, after its job
	// reported or after the ACPI power-down request, before qemu gets
	// SIGTERM (LANEC_STOP_GRACE).
	StopGrace time.Duration
	// KillGrace is how long qemu may take to exit after SIGTERM before it
	// gets SIGKILL.
	KillGrace time.Duration
	// Deadline, when not zero, is an absolute end (LANEC_DEADLINE): reached
	// before the job reported, the guest is powered down as if a phase had
	// passed its bound, whatever the phases' bounds say.
	Deadline time.Time
}

// EngineSlack is what the engine phase's bound adds to the guest's own
// Engine wait: time for the job to print docker.service's journal and
// report failure, which beats the host's bound to it.
const EngineSlack = 60 * time.Second

// KillGrace is the time from qemu's SIGTERM to its SIGKILL.
const KillGrace = 10 * time.Second

// Defaults of the bounds, in seconds. They allow for a host shared with
// other work: on an idle 2-core host the guest boots in about 20 s and
// its Engine answers about 10 s later (docs/lanes.md#cost).
const (
	DefaultBootSeconds   = 900
	DefaultEngineSeconds = 900
	DefaultRunSeconds    = 2400
	DefaultStopSeconds   = 180
)

// maxBoundSeconds caps every bound: a day.
const maxBoundSeconds = 86400

// The state/ files the guest's job creates (scripts/lanec-job.sh).
const (
	// BootedMark: the job unit started (after docker.service).
	BootedMark = "booted"
	// StartedMark: the guest's Engine answered and the job's work began.
	StartedMark = "started"
	// StatusFile: the job's outcome, one word (ParseStatus); written last,
	// after the report was copied to the shared folder.
	StatusFile = "job.status"
)

// EnvError is an environment variable BudgetFromEnv cannot use.
type EnvError struct {
	Var, Value string
	// Want says what the variable must hold.
	Want string
}

func (e *EnvError) Error() string {
	return fmt.Sprintf("%s must be %s, got '%s'", e.Var, e.Want, e.Value)
}

var deadlinePattern = regexp.MustCompile(`^[1-9][0-9]{9,11}$`)

// BudgetFromEnv reads the bounds of docs/lanes.md#running-lane-c from
// getenv: LANEC_BOOT_TIMEOUT, LANEC_ENGINE_TIMEOUT, LANEC_RUN_TIMEOUT and
// LANEC_STOP_GRACE (whole seconds, 1 to 86400; the Default*Seconds when
// empty) and LANEC_DEADLINE (seconds since the epoch, 10 to 12 digits, or
// empty for none). A value it cannot use is an *EnvError.
func BudgetFromEnv(getenv func(string) string) (Budget, error) {
	secs := func(name string, def int) (time.Duration, error) {
		v := getenv(name)
		if v == "" {
			return time.Duration(def) * time.Second, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxBoundSeconds || strconv.Itoa(n) != v {
			return 0, &EnvError{Var: name, Value: v, Want: fmt.Sprintf("whole seconds from 1 to %d", maxBoundSeconds)}
		}
		return time.Duration(n) * time.Second, nil
	}
	boot, err := secs("LANEC_BOOT_TIMEOUT", DefaultBootSeconds)
	if err != nil {
		return Budget{}, err
	}
	engine, err := secs("LANEC_ENGINE_TIMEOUT", DefaultEngineSeconds)
	if err != nil {
		return Budget{}, err
	}
	job, err := secs("LANEC_RUN_TIMEOUT", DefaultRunSeconds)
	if err != nil {
		return Budget{}, err
	}
	stop, err := secs("LANEC_STOP_GRACE", DefaultStopSeconds)
	if err != nil {
		return Budget{}, err
	}
	b := NewBudget(boot, engine, job, stop)
	if v := getenv("LANEC_DEADLINE"); v != "" {
		if !deadlinePattern.MatchString(v) {
			return Budget{}, &EnvError{Var: "LANEC_DEADLINE", Value: v, Want: "an absolute time in seconds since the epoch (date +%s)"}
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return Budget{}, &EnvError{Var: "LANEC_DEADLINE", Value: v, Want: "an absolute time in seconds since the epoch (date +%s)"}
		}
		b.Deadline = time.Unix(n, 0)
	}
	return b, nil
}

// NewBudget is lane C's phases with the given bounds: boot (qemu start
// until the job unit starts), engine (until the guest's Engine answers:
// engineWait, which the guest also gets, plus EngineSlack) and job (until
// the job reports), then stopGrace for the power-down and KillGrace after
// SIGTERM. It has no deadline.
func NewBudget(boot, engineWait, job, stopGrace time.Duration) Budget {
	return Budget{
		Phases: []Phase{
			{Name: "boot", Mark: BootedMark, Bound: boot, Setting: "LANEC_BOOT_TIMEOUT",
				Timing: "boot_s", Says: "qemu start to the job unit, after docker.service"},
			{Name: "engine", Mark: StartedMark, Bound: engineWait + EngineSlack, Setting: "LANEC_ENGINE_TIMEOUT + 60 s",
				Timing: "ready_s", Says: "qemu start to Engine ready and job start"},
			{Name: "job", Mark: StatusFile, Bound: job, Setting: "LANEC_RUN_TIMEOUT"},
		},
		EngineWait: engineWait,
		StopGrace:  stopGrace,
		KillGrace:  KillGrace,
	}
}

// Longest is the longest a run can last from qemu's start when no
// deadline cuts it short: every phase's bound, the power-down grace and
// the kill grace.
func (b Budget) Longest() time.Duration {
	d := b.StopGrace + b.KillGrace
	for _, p := range b.Phases {
		d += p.Bound
	}
	return d
}

// String is the budget in one line, for the log.
func (b Budget) String() string {
	var parts []string
	for _, p := range b.Phases {
		parts = append(parts, fmt.Sprintf("%s %s (%s)", p.Name, secondsOf(p.Bound), p.Setting))
	}
	s := strings.Join(parts, ", ") + fmt.Sprintf(", power-down %s (LANEC_STOP_GRACE) + %s after SIGTERM; at most %s",
		secondsOf(b.StopGrace), secondsOf(b.KillGrace), secondsOf(b.Longest()))
	if !b.Deadline.IsZero() {
		s += fmt.Sprintf("; LANEC_DEADLINE %s", b.Deadline.UTC().Format(time.RFC3339))
	}
	return s
}

// secondsOf shows a bound in whole seconds, as the LANEC_* variables
// give them; a bound below a second (tests) as a duration.
func secondsOf(d time.Duration) string {
	if d%time.Second != 0 {
		return d.String()
	}
	return strconv.FormatInt(int64(d/time.Second), 10) + " s"
}
