package fakeqemu

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Modes of the fake (FAKE_QEMU_MODE).
const (
	// Pass: the job runs and reports passed; the guest powers off.
	Pass = "pass"
	// Fail: the job reports failed; the guest powers off.
	Fail = "fail"
	// Garbage: the job writes FAKE_QEMU_STATUS (default "0; reboot\n") as
	// its status; the guest powers off.
	Garbage = "garbage"
	// HangBoot: the guest boots to its job, which never sees its Engine:
	// no mark after booted. The ACPI request powers it off.
	HangBoot = "hang-boot"
	// HangJob: the job starts and then shows nothing more. The ACPI
	// request powers it off with status stopped.
	HangJob = "hang-job"
	// Endless: the job prints a progress line every step and never ends;
	// the ACPI request stops it (status stopped, a partial report).
	Endless = "endless"
	// Crash: qemu exits with status 1 while the job runs, mid-line.
	Crash = "crash"
	// SlowPowerDown: the job reports passed, and the guest then neither
	// powers off nor heeds the ACPI request or SIGTERM.
	SlowPowerDown = "slow-power-down"
	// StoppedUnasked: the job reports stopped though nobody asked.
	StoppedUnasked = "stopped-unasked"
	// EngineFails: the guest's Engine never answers and the job reports
	// failed before it marks started, as the job does after its wait.
	EngineFails = "engine-fails"
	// EarlyPass: the job reports passed right after its booted mark,
	// with no started mark and no report.
	EarlyPass = "early-pass"
)

// Plant is the environment variable of a hostile guest's leavings: lines
// "KIND PATH [TARGET]", PATH relative to the shared folder, each put in
// place of whatever is at PATH once the job's status is written (in the
// modes whose job reaches its end: Pass, Fail, Garbage, StoppedUnasked,
// SlowPowerDown). KIND is symlink (to TARGET), fifo, socket, chardev
// (1:5, /dev/zero's numbers; root only), sparse (a file of TARGET bytes,
// all holes), write (a file holding TARGET and a newline), mkdir (an
// empty directory) or remove.
const Plant = "FAKE_QEMU_PLANT"

// NoReport, set to 1, makes the job leave no report.
const NoReport = "FAKE_QEMU_NO_REPORT"

// Enabled reports whether this process was started as the fake.
func Enabled() bool { return os.Getenv("FAKE_QEMU_MODE") != "" }

// Env returns the environment that makes a test binary the fake in mode,
// with its state in dir.
func Env(mode, dir string) []string {
	return []string{"FAKE_QEMU_MODE=" + mode, "FAKE_QEMU_STATE=" + dir}
}

type guest struct {
	share, console string
	powerdown      chan struct{}
	step           time.Duration
}

// Main runs the fake with args (os.Args[1:]) and returns its exit status.
func Main(args []string) int {
	mode, dir := os.Getenv("FAKE_QEMU_MODE"), os.Getenv("FAKE_QEMU_STATE")
	_ = os.WriteFile(filepath.Join(dir, "pid"), []byte(fmt.Sprintln(os.Getpid())), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "args"), []byte(strings.Join(args, "\n")+"\n"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "pgid"), []byte(fmt.Sprintln(syscall.Getpgrp())), 0o644)
	g := guest{powerdown: make(chan struct{}), step: 30 * time.Millisecond}
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "-virtfs":
			for _, opt := range strings.Split(args[i+1], ",") {
				if p, ok := strings.CutPrefix(opt, "path="); ok {
					g.share = p
				}
			}
		case "-serial":
			g.console = strings.TrimPrefix(args[i+1], "file:")
		}
	}
	if g.share == "" || g.console == "" {
		fmt.Fprintln(os.Stderr, "fake qemu: no -virtfs path= or -serial file:")
		return 1
	}
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "system_powerdown" {
				_ = os.WriteFile(filepath.Join(dir, "powerdown"), nil, 0o644)
				close(g.powerdown)
				return
			}
		}
	}()
	return g.play(mode)
}

func (g guest) state(name string) string { return filepath.Join(g.share, "state", name) }

func (g guest) consoleLine(s string) {
	f, err := os.OpenFile(g.console, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintf(f, "%s\r\n", s)
		f.Close()
	}
}

func (g guest) touch(name string) { _ = os.WriteFile(g.state(name), nil, 0o644) }

func (g guest) appendLog(name, text string) {
	f, err := os.OpenFile(g.state(name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err == nil {
		f.WriteString(text)
		f.Close()
	}
}

// status writes the job's status as the job does: a new file renamed
// into place.
func (g guest) status(content string) {
	_ = os.WriteFile(g.state("job.status.new"), []byte(content), 0o644)
	_ = os.Rename(g.state("job.status.new"), g.state("job.status"))
}

// report writes a report as qualify does: evidence.json and, last, its
// envelope evidence.dsse.json (neither signed nor valid: a fake).
func (g guest) report(partial bool) {
	if os.Getenv(NoReport) == "1" {
		return
	}
	dir := filepath.Join(g.share, "out", "report")
	_ = os.MkdirAll(dir, 0o755)
	body := `{"verdict":"passed"}`
	if partial {
		body = `{"verdict":"interrupted"}`
	}
	_ = os.WriteFile(filepath.Join(dir, "evidence.json"), []byte(body+"\n"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "evidence.dsse.json"), []byte(`{"payloadType":"fake (not signed)"}`+"\n"), 0o644)
}

// plant puts the Plant lines' entries in place; a line it cannot carry
// out ends the fake with status 3, so a test never passes on a plant
// that did not happen.
func (g guest) plant() {
	for _, line := range strings.Split(os.Getenv(Plant), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if err := g.plantOne(f); err != nil {
			fmt.Fprintf(os.Stderr, "fake qemu: plant %q: %v\n", line, err)
			os.Exit(3)
		}
	}
}

func (g guest) plantOne(f []string) error {
	if len(f) < 2 {
		return fmt.Errorf("want KIND PATH [TARGET]")
	}
	path := filepath.Join(g.share, f[1])
	if err := os.RemoveAll(path); err != nil {
		return err
	}
	switch f[0] {
	case "remove":
		return nil
	case "symlink":
		if len(f) != 3 {
			return fmt.Errorf("a symlink needs a target")
		}
		return os.Symlink(f[2], path)
	case "fifo":
		return syscall.Mkfifo(path, 0o644)
	case "chardev":
		return syscall.Mknod(path, syscall.S_IFCHR|0o644, 1<<8|5)
	case "sparse":
		// A file of TARGET bytes that takes no disk: holes.
		if len(f) != 3 {
			return fmt.Errorf("a sparse file needs a size")
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			return err
		}
		return os.Truncate(path, size)
	case "mkdir":
		return os.Mkdir(path, 0o755)
	case "write":
		// A small file holding TARGET and a newline.
		if len(f) != 3 {
			return fmt.Errorf("a written file needs its content")
		}
		return os.WriteFile(path, []byte(f[2]+"\n"), 0o644)
	case "socket":
		// A socket's path is bound relative to its directory: a test's
		// temporary directories can outgrow sun_path's 108 bytes.
		if err := os.Chdir(filepath.Dir(path)); err != nil {
			return err
		}
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Base(path), Net: "unix"})
		if err != nil {
			return err
		}
		l.SetUnlinkOnClose(false)
		return l.Close()
	}
	return fmt.Errorf("unknown kind %q", f[0])
}

// wait sleeps n steps; it reports false when the ACPI request came first.
func (g guest) wait(n int) bool {
	select {
	case <-time.After(time.Duration(n) * g.step):
		return true
	case <-g.powerdown:
		return false
	}
}

// off is the guest's power-down: its console's last line, exit status 0
// (qemu's with -no-reboot).
func (g guest) off() int {
	g.consoleLine("reboot: Power down")
	return 0
}

// stopped is the job's SIGTERM path: a partial report, status stopped.
func (g guest) stopped() int {
	g.appendLog("qualify.log", "qualify: interrupted; partial report written\n")
	g.report(true)
	g.appendLog("qualify.rc", "143\n")
	g.status("stopped\n")
	return g.off()
}

// play is the guest's run in mode: boot (booted), then the Engine
// (started), the job's steps and its status, then the power-off.
func (g guest) play(mode string) int {
	g.consoleLine("Linux version 6.1.0-fake (fake qemu, not a kernel)")
	if !g.wait(2) {
		return g.off()
	}
	g.touch("booted")
	g.consoleLine("lanec-job: booted; docker.service active")
	switch mode {
	case HangBoot:
		<-g.powerdown
		return g.off()
	case EarlyPass:
		g.status("passed\n")
		g.wait(1)
		return g.off()
	case EngineFails:
		g.consoleLine("lanec-job: the Engine never answered at /var/run/docker.sock within 1 s")
		g.status("failed\n")
		g.wait(1)
		return g.off()
	}
	if !g.wait(2) {
		return g.off()
	}
	g.touch("started")
	if code, done := g.scenarios(mode); done {
		return code
	}
	g.finish(mode)
	if mode == SlowPowerDown {
		signal.Ignore(syscall.SIGTERM)
		g.consoleLine("systemd-shutdown: waiting for a process that never ends")
		time.Sleep(time.Hour)
		return 0
	}
	g.wait(1)
	return g.off()
}

// scenarios is qualify's run: a progress line per scenario, three (or
// endless). done says the guest's run ended there, with code.
func (g guest) scenarios(mode string) (code int, done bool) {
	for i := 1; ; i++ {
		if mode == HangJob {
			<-g.powerdown
			return g.stopped(), true
		}
		g.appendLog("qualify.log", fmt.Sprintf("scenario %d started\n", i))
		if mode == Crash && i == 2 {
			g.appendLog("qualify.log", "scenario 2 half a li")
			fmt.Fprintln(os.Stderr, "qemu-system-x86_64: fake fatal error (not QEMU)")
			return 1, true
		}
		if !g.wait(1) {
			return g.stopped(), true
		}
		g.appendLog("qualify.log", fmt.Sprintf("scenario %d passed\n", i))
		if mode != Endless && i == 3 {
			return 0, false
		}
	}
}

// finish is the job's end: the report, the recording when the shared
// folder has record.sh, the step exit statuses, the status in mode's
// way, and then the Plant lines.
func (g guest) finish(mode string) {
	g.report(false)
	if _, err := os.Stat(filepath.Join(g.share, "record.sh")); err == nil {
		rec := filepath.Join(g.share, "out", "record", "v2-guest-before")
		_ = os.MkdirAll(rec, 0o755)
		_ = os.WriteFile(filepath.Join(rec, "LABEL"), []byte("recorded by the fake qemu (not a kernel)\n"), 0o644)
		g.appendLog("record.log", "recorded v2-guest-before\n")
	}
	g.appendLog("qualify.rc", "0\n")
	if _, err := os.Stat(filepath.Join(g.share, "params", "conformance-profile")); err == nil {
		g.appendLog("conformance.rc", "0\n")
	}
	g.appendLog("timings", "qualify_s 1\n")
	switch mode {
	case Fail:
		g.status("failed\n")
	case Garbage:
		s, ok := os.LookupEnv("FAKE_QEMU_STATUS")
		if !ok {
			s = "0; reboot\n"
		}
		g.status(s)
	case StoppedUnasked:
		g.status("stopped\n")
	default:
		g.status("passed\n")
	}
	g.plant()
}
