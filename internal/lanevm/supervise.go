package lanevm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The guest's shape: two vCPUs and 4 GiB (docs/lanes.md#lane-c).
const (
	VCPUs  = "2"
	Memory = "4G"
)

// Config is one supervised run. The work directory holds the shared
// folder the guest mounts (share/, with the job's files and its state/
// and out/ directories), the serial console (console.log), qemu's own
// output (qemu.log) and, optionally, the host's own files for
// Out.lanec (host/, such as accel.txt), which the guest cannot reach.
type Config struct {
	// QEMU is the emulator to run (qemu-system-x86_64, qemu-system-aarch64).
	QEMU string
	// QEMUArgs are the machine and accelerator arguments (-M virt,
	// -accel tcg,thread=multi, -cpu ...); the supervisor adds the guest's
	// size, kernel, disk, shared folder, console and monitor.
	QEMUArgs []string
	// ImageDir holds the cached guest: vmlinuz, initrd.img, rootfs.img
	// (booted with -snapshot semantics: never written) and BUILD.
	ImageDir string
	// KernelArgs is the kernel command line.
	KernelArgs string
	// Work is the work directory.
	Work string
	// Out, when not empty, receives the signed report (share/out/report),
	// and Out + ".lanec" the lane's own files: the host's at its top, the
	// guest's state/ under guest/. Neither may exist yet.
	Out string
	// Record, when not empty, receives the recorded cgroup trees
	// (share/out/record) and the recording's log; it must be absent or
	// empty.
	Record string
	// Timings are the host's own lines for DIR.lanec/timings (image
	// assembly, accelerator choice), put before the run's.
	Timings []Timing
	// Env is added to the supervisor's environment for qemu (TMPDIR, the
	// directory of -snapshot's temporary file, is always Work).
	Env    []string
	Budget Budget
	// Poll is how often the shared folder is looked at (default 1 s).
	Poll time.Duration
	// Log receives the progress and diagnostic lines (default io.Discard).
	Log io.Writer
}

// ConfigError is a Config the supervisor cannot run; nothing was started.
type ConfigError struct{ Reason string }

func (e *ConfigError) Error() string { return e.Reason }

func (c Config) share() string { return filepath.Join(c.Work, "share") }

// Console is the serial console log of a run in work.
func Console(work string) string { return filepath.Join(work, "console.log") }

// Check returns a *ConfigError naming the first thing wrong with c. The
// steps, in order: the required fields (checkFields), the budget
// (checkBudget), the guest image and work directory (checkDirs), and the
// outputs not yet written (checkOutputs).
func (c Config) Check() error {
	for _, step := range []func() error{c.checkFields, c.checkBudget, c.checkDirs, c.checkOutputs} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// badConfig returns a *ConfigError with the formatted reason.
func badConfig(format string, a ...any) error {
	return &ConfigError{Reason: fmt.Sprintf(format, a...)}
}

// checkFields checks that qemu, the work and image directories and the
// budget's phases are given.
func (c Config) checkFields() error {
	switch {
	case c.QEMU == "":
		return badConfig("no qemu to run")
	case c.Work == "":
		return badConfig("no work directory")
	case c.ImageDir == "":
		return badConfig("no guest image directory")
	case len(c.Budget.Phases) == 0:
		return badConfig("a budget without phases")
	}
	return nil
}

// checkBudget checks every phase's mark and bound, that the last phase
// ends at StatusFile, and the graces.
func (c Config) checkBudget() error {
	for _, p := range c.Budget.Phases {
		if p.Bound <= 0 || p.Mark == "" {
			return badConfig("phase %q needs a mark and a positive bound", p.Name)
		}
	}
	if last := c.Budget.Phases[len(c.Budget.Phases)-1]; last.Mark != StatusFile {
		return badConfig("the last phase %q must end at %s, not %s", last.Name, StatusFile, last.Mark)
	}
	if c.Budget.StopGrace <= 0 || c.Budget.KillGrace <= 0 {
		return badConfig("the stop and kill graces must be positive")
	}
	return nil
}

// checkDirs checks that qemu can take the image and work directories'
// paths, that the image's files are there, and that the work directory
// has share/.
func (c Config) checkDirs() error {
	// qemu's option syntax splits -drive and -virtfs values at commas.
	for _, p := range []string{c.ImageDir, c.Work} {
		if strings.ContainsAny(p, ",\n") {
			return badConfig("%s has a comma or newline, which qemu's -drive and -virtfs options cannot take", p)
		}
	}
	for _, f := range []string{"vmlinuz", "initrd.img", "rootfs.img"} {
		if _, err := os.Stat(filepath.Join(c.ImageDir, f)); err != nil {
			return badConfig("guest image %s: %v", c.ImageDir, err)
		}
	}
	if info, err := os.Stat(c.share()); err != nil || !info.IsDir() {
		return badConfig("work directory %s has no share/ for the guest", c.Work)
	}
	return nil
}

// checkOutputs checks that Out and its .lanec directory do not exist yet
// and that the record directory, if given, is absent or empty.
func (c Config) checkOutputs() error {
	if c.Out != "" {
		for _, p := range []string{c.Out, c.Out + ".lanec"} {
			if _, err := os.Lstat(p); err == nil {
				return badConfig("%s already exists", p)
			}
		}
	}
	if c.Record != "" {
		if entries, err := os.ReadDir(c.Record); err == nil && len(entries) > 0 {
			return badConfig("record directory %s is not empty", c.Record)
		} else if err != nil && !errors.Is(err, os.ErrNotExist) {
			return badConfig("record directory: %v", err)
		}
	}
	return nil
}

// Args is qemu's command line for c, after the executable.
func (c Config) Args() []string {
	args := []string{"-name", "qualbox-lanec", "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot"}
	args = append(args, c.QEMUArgs...)
	return append(args,
		"-smp", VCPUs, "-m", Memory,
		"-kernel", filepath.Join(c.ImageDir, "vmlinuz"),
		"-initrd", filepath.Join(c.ImageDir, "initrd.img"),
		"-append", c.KernelArgs,
		// snapshot=on keeps the cached root pristine: the guest's writes go
		// to a temporary file (in TMPDIR) that qemu deletes.
		"-drive", "file="+filepath.Join(c.ImageDir, "rootfs.img")+",if=virtio,format=raw,snapshot=on",
		"-virtfs", "local,path="+c.share()+",mount_tag=qualbox,security_model=none,id=qualbox",
		"-nic", "none",
		"-serial", "file:"+Console(c.Work),
		// The human monitor on qemu's stdin: system_powerdown is the ACPI
		// power button.
		"-monitor", "stdio",
	)
}

// run is one supervision's state; its steps are the methods below, in
// the order Supervise calls them.
type run struct {
	cfg   Config
	log   io.Writer
	res   Result
	start time.Time
	// phase indexes cfg.Budget.Phases; phaseStart is when it began.
	phase      int
	phaseStart time.Time
	cmd        *exec.Cmd
	monitor    io.WriteCloser
	kill       context.CancelFunc
	// exited is closed once qemu's process is reaped (cmd.ProcessState).
	exited chan struct{}
	logs   []*logTail
	// stopAsked: the host asked the guest to power down.
	stopAsked bool
	// share reads the guest's shared folder (sharefs.go); reqs is what a
	// passed job must have left there, fixed before the guest booted.
	share *shareFS
	reqs  []requirement
	// placedOut: the report and the lane's files are in place (collect).
	placedOut bool
}

// logf writes one line of the supervisor's, "lanec: " and the formatted
// text, escaped (escapeGuest) so that no text of the guest's in it can
// end the line or start another.
func (r *run) logf(format string, a ...any) {
	fmt.Fprintf(r.log, "lanec: %s\n", escapeGuest([]byte(fmt.Sprintf(format, a...)), 0))
}

func (r *run) since() int64 { return int64(time.Since(r.start) / time.Second) }

// Supervise runs the guest of cfg to its end and returns what happened;
// it returns only after qemu is gone. A Config that fails Check is
// returned as an error with nothing started. Cancelling ctx (SIGINT,
// SIGTERM, SIGHUP) powers the guest down like a passed bound, and the run's
// Kind is Interrupted.
func Supervise(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Check(); err != nil {
		return Result{}, err
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	share, err := openShare(cfg.share())
	if err != nil {
		return Result{}, err
	}
	defer share.Close()
	// Where the display of the guest's logs, should it reach its
	// bounds, says the whole logs are.
	kept := strconv.Quote(share.hostPath("state")) + " (the shared folder: without a report directory they are not copied out)"
	if cfg.Out != "" {
		kept = strconv.Quote(filepath.Join(cfg.Out+".lanec", "guest"))
	}
	r := &run{cfg: cfg, log: cfg.Log, logs: guestLogs(share, kept), share: share}
	if r.log == nil {
		r.log = io.Discard
	}
	if err := r.prepare(); err != nil {
		return Result{}, err
	}
	r.reqs = requirements(share, cfg.Budget.Phases)
	if r.boot(ctx) {
		r.watch(ctx)
		r.stop()
		r.conclude()
	}
	r.res.CollectErr = r.collect()
	r.summary()
	return r.res, nil
}

// prepare writes what the guest's job reads from the host, before the
// guest boots and within the shared folder (os.Root): the Engine wait of
// the budget (share/params/engine-timeout, whole seconds).
func (r *run) prepare() error {
	for _, d := range []string{"state", "params", "out"} {
		if err := r.share.root.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	wait := strconv.FormatInt(int64(r.cfg.Budget.EngineWait/time.Second), 10) + "\n"
	return r.share.root.WriteFile("params/engine-timeout", []byte(wait), 0o644)
}

// boot starts qemu unless the deadline has passed; it reports whether
// qemu runs.
func (r *run) boot(ctx context.Context) bool {
	r.res.Phase = r.cfg.Budget.Phases[0].Name
	if d := r.cfg.Budget.Deadline; !d.IsZero() && !time.Now().Before(d) {
		r.logf("LANEC_DEADLINE passed before the guest booted")
		r.res.Kind = DeadlineExceeded
		return false
	}
	if ctx.Err() != nil {
		r.res.Kind = Interrupted
		return false
	}
	qlog, err := os.OpenFile(filepath.Join(r.cfg.Work, "qemu.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		r.res.Kind, r.res.StartErr = QEMUCrashed, err
		return false
	}
	defer qlog.Close()
	// qemu's own context is cancelled only to kill it: an interruption
	// first asks the guest to power down (stop).
	kctx, kill := context.WithCancel(context.Background())
	cmd := exec.CommandContext(kctx, r.cfg.QEMU, r.cfg.Args()...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = r.cfg.Budget.KillGrace
	cmd.Env = append(append(os.Environ(), r.cfg.Env...), "TMPDIR="+r.cfg.Work)
	// Its own process group: a terminal's Ctrl-C reaches the supervisor,
	// which powers the guest down, and not qemu, which would quit at once
	// and lose the partial report. Should the supervisor die, qemu dies
	// with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stdout, cmd.Stderr = qlog, qlog
	monitor, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		kill()
		r.res.Kind, r.res.StartErr = QEMUCrashed, err
		r.logf("qemu did not start: %v", err)
		return false
	}
	r.cmd, r.monitor, r.kill = cmd, monitor, kill
	r.start, r.phaseStart = time.Now(), time.Now()
	r.exited = make(chan struct{})
	go func() {
		_ = cmd.Wait() // how it ended is in cmd.ProcessState
		close(r.exited)
	}()
	r.logf("booting the guest (qemu pid %d, %s); console %s", cmd.Process.Pid, strings.Join(r.cfg.QEMUArgs, " "), Console(r.cfg.Work))
	r.logf("budget: %s", r.cfg.Budget)
	return true
}

// exists reports whether the guest made the mark name under state/, a
// regular file (sharefs.go).
func (r *run) exists(name string) bool { return r.share.isFile("state/" + name) }

// watch follows the phases until the guest reports, qemu exits, a bound
// or the deadline passes, or ctx is cancelled; it sets the result's Kind
// and Phase for all but the report, which conclude reads.
func (r *run) watch(ctx context.Context) {
	tick := time.NewTicker(r.cfg.Poll)
	defer tick.Stop()
	phases := r.cfg.Budget.Phases
	for {
		// Marks the guest made since the last look, in order; the status
		// may come early (the job reports failure when its Engine never
		// answers).
		for r.phase < len(phases)-1 && r.exists(phases[r.phase].Mark) {
			r.endPhase()
		}
		r.res.Phase = phases[r.phase].Name
		r.showProgress(false)
		if r.exists(StatusFile) {
			if r.phase == len(phases)-1 {
				r.endPhase()
			} else {
				r.logf("the job reported in the %s phase after %d s", phases[r.phase].Name, r.since())
			}
			return
		}
		select {
		case <-r.exited:
			r.res.Kind = QEMUCrashed
			return
		default:
		}
		now := time.Now()
		if d := r.cfg.Budget.Deadline; !d.IsZero() && !now.Before(d) {
			r.logf("LANEC_DEADLINE passed in the %s phase (%d s after qemu started)", phases[r.phase].Name, r.since())
			r.res.Kind, r.stopAsked = DeadlineExceeded, true
			return
		}
		if p := phases[r.phase]; now.Sub(r.phaseStart) > p.Bound {
			r.logf("the guest did not end its %s phase within %s (%s)", p.Name, secondsOf(p.Bound), p.Setting)
			r.res.Kind, r.stopAsked = GuestHung, true
			return
		}
		select {
		case <-ctx.Done():
			r.logf("interrupted in the %s phase", phases[r.phase].Name)
			r.res.Kind, r.stopAsked = Interrupted, true
			return
		case <-r.exited:
		case <-tick.C:
		}
	}
}

// endPhase records the end of the current phase and begins the next.
func (r *run) endPhase() {
	p := r.cfg.Budget.Phases[r.phase]
	if p.Timing != "" {
		r.res.Timings = append(r.res.Timings, Timing{Name: p.Timing, Seconds: r.since(), Says: p.Says})
	}
	switch p.Mark {
	case BootedMark:
		r.logf("guest booted after %d s; waiting for its Engine", r.since())
	case StartedMark:
		r.logf("job started after %d s", r.since())
	case StatusFile:
		r.logf("the job reported after %d s; waiting for the guest to power off", r.since())
	}
	if r.phase < len(r.cfg.Budget.Phases)-1 {
		r.phase++
	}
	r.phaseStart = time.Now()
}

func (r *run) showProgress(final bool) {
	for _, l := range r.logs {
		l.show(r.log, final)
	}
}

// stop waits for qemu to exit, asking the guest to power down through the
// ACPI power button, for at most the stop grace; then it kills qemu by
// its PID (SIGTERM, and SIGKILL after the kill grace) and reaps it.
func (r *run) stop() {
	defer r.kill()
	if r.stopAsked {
		r.logf("powering the guest down (qemu pid %d)", r.cmd.Process.Pid)
	}
	select {
	case <-r.exited:
		r.res.PowerDown = OffByItself
		r.afterExit()
		return
	default:
	}
	// A guest whose job reported powers off by itself; the request
	// changes nothing then, and stops one whose job is stuck in its stop.
	_, _ = io.WriteString(r.monitor, "system_powerdown\n")
	grace := time.NewTimer(r.cfg.Budget.StopGrace)
	defer grace.Stop()
	select {
	case <-r.exited:
		r.res.PowerDown = OffOnRequest
		if !r.stopAsked {
			r.res.PowerDown = OffByItself
		}
	case <-grace.C:
		r.logf("the guest did not power off within %s (LANEC_STOP_GRACE); killing qemu pid %d", secondsOf(r.cfg.Budget.StopGrace), r.cmd.Process.Pid)
		r.res.PowerDown = Killed
		r.kill()
		<-r.exited
	}
	r.afterExit()
}

func (r *run) afterExit() {
	r.res.Timings = append(r.res.Timings, Timing{Name: "guest_s", Seconds: r.since(), Says: "qemu start to power-off"})
	r.res.QEMUExit = "exit status 0"
	if r.cmd.ProcessState != nil {
		r.res.QEMUExit = r.cmd.ProcessState.String()
	}
	r.showProgress(true)
}

// conclude reads the guest's status, now that qemu is gone and nothing
// writes it any more, and settles the Kind: a reason the host stopped the
// guest for (a bound, the deadline, an interruption) stands; else the
// guest's word decides, read strictly, then how qemu ended.
func (r *run) conclude() {
	data, err := r.share.readHead("state/"+StatusFile, MaxStatusBytes+1)
	switch {
	case err == nil:
		r.res.Status, r.res.StatusErr = ParseStatus(data)
	case !errors.Is(err, os.ErrNotExist):
		r.res.StatusErr = fmt.Errorf("reading the guest's %s: %w", StatusFile, err)
	}
	if r.stopAsked {
		return
	}
	switch {
	case r.res.StatusErr != nil:
		r.res.Kind = BadStatus
	case r.res.Status == NoStatus:
		r.res.Kind = QEMUCrashed
	case r.res.Status == StatusFailed, r.res.Status == StatusStopped:
		r.res.Kind = GuestFailed
	case r.incomplete():
		r.res.Kind = GuestIncomplete
	case r.res.PowerDown == Killed:
		r.res.Kind = PowerDownSlow
	case !r.cmd.ProcessState.Success():
		r.res.Kind = QEMUCrashed
	default:
		r.res.Kind = GuestPassed
	}
}

// incomplete reports whether the guest's passed status lacks what a
// passed job leaves (requirements), and records what is missing.
func (r *run) incomplete() bool {
	r.res.Missing = r.share.missing(r.reqs)
	return len(r.res.Missing) > 0
}

// readBounded reads at most n bytes of path.
func readBounded(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}
