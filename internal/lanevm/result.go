package lanevm

import (
	"fmt"
	"strings"

	"github.com/qualbox/qualbox/internal/exitcode"
)

// Kind is how a guest run ended.
type Kind int

const (
	// GuestPassed: the guest reported that its job passed and powered
	// itself off in time.
	GuestPassed Kind = iota
	// GuestFailed: the guest reported that its job failed, or that it was
	// stopped when the host had not asked for it.
	GuestFailed
	// GuestHung: a phase outlasted its bound without the guest's mark; the
	// host powered the guest down.
	GuestHung
	// QEMUCrashed: qemu did not start, or exited before the guest reported,
	// or exited with a non-zero status after it did.
	QEMUCrashed
	// PowerDownSlow: the guest reported that its job passed but did not
	// power off within the stop grace, so qemu was killed by its PID.
	PowerDownSlow
	// DeadlineExceeded: the absolute deadline came before the job
	// reported; the host powered the guest down.
	DeadlineExceeded
	// BadStatus: the guest's state/job.status held none of the words the
	// job writes (a *StatusError).
	BadStatus
	// Interrupted: the supervisor got SIGINT, SIGTERM or SIGHUP and powered the
	// guest down.
	Interrupted
	// GuestIncomplete: the guest reported that its job passed, but the
	// shared folder lacks marks or files a passed job leaves (Missing).
	GuestIncomplete
)

var kindNames = [...]string{
	GuestPassed: "guest-passed", GuestFailed: "guest-failed", GuestHung: "guest-hung",
	QEMUCrashed: "qemu-crashed", PowerDownSlow: "power-down-slow",
	DeadlineExceeded: "deadline-exceeded", BadStatus: "bad-status", Interrupted: "interrupted",
	GuestIncomplete: "guest-incomplete",
}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// PowerDown says how qemu ended.
type PowerDown int

const (
	// NotRun: qemu never started.
	NotRun PowerDown = iota
	// OffByItself: qemu exited without being asked (the guest powered off
	// after its job, or crashed).
	OffByItself
	// OffOnRequest: qemu exited within the stop grace after the host's
	// ACPI power-down request.
	OffOnRequest
	// Killed: qemu outlasted the stop grace and was sent SIGTERM, then
	// SIGKILL after the kill grace if it was still there.
	Killed
)

func (p PowerDown) String() string {
	switch p {
	case OffByItself:
		return "exited by itself"
	case OffOnRequest:
		return "exited on the host's power-down request"
	case Killed:
		return "killed after the stop grace"
	}
	return "not started"
}

// Result is the outcome of one supervised guest run.
type Result struct {
	Kind Kind
	// Phase is the phase the run was in when it ended: for GuestHung the
	// one that outlasted its bound, for DeadlineExceeded and QEMUCrashed
	// the one under way.
	Phase string
	// Status is what the guest reported (NoStatus when nothing or garbage).
	Status GuestStatus
	// StatusErr is why a BadStatus run's status could not be read: a
	// *StatusError, or an *UnsafeFileError or *TooLargeError for what the
	// guest left in its place.
	StatusErr error
	// Missing names, for a GuestIncomplete run, what a passed job leaves
	// and the shared folder lacks ("state/started",
	// "out/report/evidence.dsse.json (a regular file)"), in a fixed order.
	Missing []string
	// QEMUExit is how qemu's process ended, as os/exec words it ("exit
	// status 1", "signal: killed"); empty when it did not start.
	QEMUExit string
	// StartErr is why qemu did not start.
	StartErr  error
	PowerDown PowerDown
	// Timings are the run's lines for DIR.lanec/timings.
	Timings []Timing
	// CollectErr is why copying the results out failed, if it did.
	CollectErr error
}

// Timing is one line of DIR.lanec/timings: "NAME SECONDS (SAYS)".
type Timing struct {
	Name    string
	Seconds int64
	Says    string
}

func (t Timing) String() string {
	return fmt.Sprintf("%s %d (%s)", t.Name, t.Seconds, t.Says)
}

// ExitStatus maps the result to the supervisor's exit status
// (internal/exitcode): 0 when the guest passed and its results were
// collected; 130 when interrupted; 4 when the results could not be copied
// out; 1 for every other kind. The guest's own words never become the
// status: they select one of these.
func (r Result) ExitStatus() int {
	switch {
	case r.Kind == Interrupted:
		return exitcode.Interrupted
	case r.CollectErr != nil:
		return exitcode.Internal
	case r.Kind == GuestPassed:
		return exitcode.OK
	}
	return exitcode.Failed
}

// String says what happened in one line: the text of the errors in it
// (which may name the guest's files) is escaped (control characters and
// newlines as Go escapes), so the line is one and cannot forge another.
func (r Result) String() string {
	var b strings.Builder
	if r.CollectErr != nil {
		// The first word is the outcome (exit status 4), never the
		// guest's own verdict, which follows.
		b.WriteString("collect-failed: ")
	}
	b.WriteString(r.Kind.String())
	switch r.Kind {
	case GuestPassed, GuestFailed:
		fmt.Fprintf(&b, ": the guest reported %s", r.Status)
	case GuestHung:
		fmt.Fprintf(&b, ": the %s phase outlasted its bound", r.Phase)
	case DeadlineExceeded:
		fmt.Fprintf(&b, ": LANEC_DEADLINE came in the %s phase", r.Phase)
	case QEMUCrashed:
		switch {
		case r.StartErr != nil:
			fmt.Fprintf(&b, ": qemu did not start: %v", r.StartErr)
		case r.Status != NoStatus:
			fmt.Fprintf(&b, ": qemu ended with %s after the guest reported %s", r.QEMUExit, r.Status)
		default:
			fmt.Fprintf(&b, ": qemu ended with %s in the %s phase, before the guest reported", r.QEMUExit, r.Phase)
		}
	case PowerDownSlow:
		fmt.Fprintf(&b, ": the guest reported %s but did not power off in time", r.Status)
	case BadStatus:
		fmt.Fprintf(&b, ": %v", r.StatusErr)
	case GuestIncomplete:
		fmt.Fprintf(&b, ": the guest reported %s, but its shared folder lacks %s", r.Status, strings.Join(r.Missing, ", "))
	case Interrupted:
		fmt.Fprintf(&b, ": in the %s phase", r.Phase)
	}
	if r.PowerDown != NotRun {
		fmt.Fprintf(&b, "; qemu %s", r.PowerDown)
	}
	if r.CollectErr != nil {
		fmt.Fprintf(&b, "; collecting the results failed: %v", r.CollectErr)
	}
	return escapeGuest([]byte(b.String()), 0)
}
