package fakeqemu

import (
	"bufio"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
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
)

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

func (g guest) report(partial bool) {
	dir := filepath.Join(g.share, "out", "report")
	_ = os.MkdirAll(dir, 0o755)
	body := `{"verdict":"passed"}`
	if partial {
		body = `{"verdict":"interrupted"}`
	}
	_ = os.WriteFile(filepath.Join(dir, "evidence.json"), []byte(body+"\n"), 0o644)
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

func (g guest) play(mode string) int {
	g.consoleLine("Linux version 6.1.0-fake (fake qemu, not a kernel)")
	if !g.wait(2) {
		return g.off()
	}
	g.touch("booted")
	g.consoleLine("lanec-job: booted; docker.service active")
	if mode == HangBoot {
		<-g.powerdown
		return g.off()
	}
	if mode == EngineFails {
		g.consoleLine("lanec-job: the Engine never answered at /var/run/docker.sock within 1 s")
		g.status("failed\n")
		g.wait(1)
		return g.off()
	}
	if !g.wait(2) {
		return g.off()
	}
	g.touch("started")
	for i := 1; ; i++ {
		if mode == HangJob {
			<-g.powerdown
			return g.stopped()
		}
		g.appendLog("qualify.log", fmt.Sprintf("scenario %d started\n", i))
		if mode == Crash && i == 2 {
			g.appendLog("qualify.log", "scenario 2 half a li")
			fmt.Fprintln(os.Stderr, "qemu-system-x86_64: fake fatal error (not QEMU)")
			return 1
		}
		if !g.wait(1) {
			return g.stopped()
		}
		g.appendLog("qualify.log", fmt.Sprintf("scenario %d passed\n", i))
		if mode != Endless && i == 3 {
			break
		}
	}
	g.report(false)
	if _, err := os.Stat(filepath.Join(g.share, "record.sh")); err == nil {
		rec := filepath.Join(g.share, "out", "record", "v2-guest-before")
		_ = os.MkdirAll(rec, 0o755)
		_ = os.WriteFile(filepath.Join(rec, "LABEL"), []byte("recorded by the fake qemu (not a kernel)\n"), 0o644)
		g.appendLog("record.log", "recorded v2-guest-before\n")
	}
	g.appendLog("qualify.rc", "0\n")
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
	if mode == SlowPowerDown {
		signal.Ignore(syscall.SIGTERM)
		g.consoleLine("systemd-shutdown: waiting for a process that never ends")
		time.Sleep(time.Hour)
		return 0
	}
	g.wait(1)
	return g.off()
}
