package lanevm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// collect copies the run's results out of the shared folder: the signed
// report to Out and the lane's own files to Out.lanec, and the recorded
// trees to Record. Each is assembled under a temporary name beside its
// destination and renamed into place, Out and Out.lanec together, so a
// failed copy leaves none of them and nothing partial. Everything taken
// from the shared folder is read as sharefs.go says: a symlink, FIFO,
// socket or device the guest left fails the copy with an
// *UnsafeFileError, a file or tree past its bound with a *TooLargeError.
func (r *run) collect() error {
	if r.res.Kind != GuestPassed {
		r.consoleTail(60)
	}
	var errs []error
	if r.cfg.Record != "" {
		errs = append(errs, r.collectRecord())
	}
	if r.cfg.Out != "" {
		errs = append(errs, r.collectOut())
	}
	return errors.Join(errs...)
}

func (r *run) consoleTail(n int) {
	lines := ConsoleTail(Console(r.cfg.Work), n)
	if len(lines) == 0 {
		return
	}
	r.logf("last guest console lines:")
	for _, l := range lines {
		fmt.Fprintf(r.log, "  guest| %s\n", l)
	}
}

// collectRecord copies share/out/record and state/record.log to Record,
// which is absent or empty (Config.Check): rename(2) replaces an empty
// directory.
func (r *run) collectRecord() error {
	const src = "out/record"
	if _, err := r.share.stat(src); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("the guest recorded no cgroup trees (%s)", r.share.hostPath(src))
	}
	if err := os.MkdirAll(filepath.Dir(r.cfg.Record), 0o755); err != nil {
		return err
	}
	st, err := stage(r.cfg.Record)
	if err != nil {
		return err
	}
	defer st.discard()
	if err := r.share.copyTree(src, st.tmp); err != nil {
		return fmt.Errorf("copying the recorded trees to %s: %w", r.cfg.Record, err)
	}
	if log, err := r.share.readFile("state/record.log", MaxGuestFileBytes); err == nil {
		if err := os.WriteFile(filepath.Join(st.tmp, "record.log"), log, 0o644); err != nil {
			return err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("copying the recording's log to %s: %w", r.cfg.Record, err)
	}
	if err := placeAll(st); err != nil {
		return err
	}
	r.logf("recorded cgroup v2 trees in %s", r.cfg.Record)
	return nil
}

// collectOut copies the report to Out and the lane's files to
// Out.lanec: at its top the host's own (console.log, image.txt, timings,
// result.txt, and what scripts/lanec.sh left in the work directory's
// host/, such as accel.txt), and under guest/ the guest's state/ as it
// left it, so that nothing the guest wrote passes for the host's.
func (r *run) collectOut() error {
	out := r.cfg.Out
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	report, err := stage(out)
	if err != nil {
		return err
	}
	defer report.discard()
	lanec, err := stage(out + ".lanec")
	if err != nil {
		return err
	}
	defer lanec.discard()
	// The report as the guest left it: complete, partial (a stopped
	// qualify writes what it has) or absent (an empty directory, which
	// verification refuses).
	if _, err := r.share.stat("out/report"); !errors.Is(err, os.ErrNotExist) {
		if err := r.share.copyTree("out/report", report.tmp); err != nil {
			return fmt.Errorf("copying the report to %s: %w", out, err)
		}
	}
	// A signed report directory holds only what its statement covers:
	// the lane's files go beside it.
	if err := r.fillLanec(lanec.tmp); err != nil {
		return fmt.Errorf("copying the lane's files to %s.lanec: %w", out, err)
	}
	return placeAll(report, lanec)
}

// fillLanec writes the lane's files into dir (collectOut).
func (r *run) fillLanec(dir string) error {
	guest := filepath.Join(dir, "guest")
	if err := os.Mkdir(guest, 0o755); err != nil {
		return err
	}
	if err := r.share.copyTree("state", guest); err != nil {
		return err
	}
	if err := copyHostDir(filepath.Join(r.cfg.Work, "host"), dir); err != nil {
		return err
	}
	if err := copyConsole(Console(r.cfg.Work), filepath.Join(dir, "console.log")); err != nil {
		return err
	}
	if build, err := readBounded(filepath.Join(r.cfg.ImageDir, "BUILD"), MaxGuestFileBytes); err == nil {
		if err := os.WriteFile(filepath.Join(dir, "image.txt"), build, 0o644); err != nil {
			return err
		}
	}
	var timings bytes.Buffer
	for _, t := range append(append([]Timing(nil), r.cfg.Timings...), r.res.Timings...) {
		fmt.Fprintln(&timings, t)
	}
	if err := os.WriteFile(filepath.Join(dir, "timings"), timings.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "result.txt"), []byte(r.res.String()+"\n"), 0o644)
}

// copyHostDir copies the host's own files for DIR.lanec (the work
// directory's host/, which the guest cannot reach) into dst, if there
// are any. It reads them as it reads the shared folder, which costs
// little and keeps one way of copying; its errors do not blame the
// guest.
func copyHostDir(src, dst string) error {
	host, err := openShare(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	defer host.Close()
	host.host = true
	return host.copyTree(".", dst)
}

// copyConsole copies the serial console without the carriage returns the
// guest's console writes; of a console longer than MaxConsoleBytes, the
// end, after a line saying how much was left out.
func copyConsole(src, dst string) error {
	f, err := os.Open(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	var head []byte
	from := max(info.Size()-MaxConsoleBytes, 0)
	if from > 0 {
		head = fmt.Appendf(nil, "lanec: the console's first %d bytes are not copied (lanevm.MaxConsoleBytes)\n", from)
	}
	data, err := io.ReadAll(io.NewSectionReader(f, from, MaxConsoleBytes))
	if err != nil {
		return err
	}
	return os.WriteFile(dst, append(head, bytes.ReplaceAll(data, []byte("\r"), nil)...), 0o644)
}

// staged is a directory assembled under a temporary name beside dst.
type staged struct{ tmp, dst string }

// stage makes a new temporary directory beside dst.
func stage(dst string) (*staged, error) {
	tmp, err := os.MkdirTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".partial-")
	if err != nil {
		return nil, err
	}
	return &staged{tmp: tmp, dst: dst}, nil
}

// discard removes the temporary directory if it is still there (not
// renamed into place).
func (s *staged) discard() { _ = os.RemoveAll(s.tmp) }

// placeAll renames each staged directory to its destination, in order;
// if one fails, it removes those it already put in place, so either all
// are there, complete, or none.
func placeAll(all ...*staged) error {
	for i, s := range all {
		err := os.Chmod(s.tmp, 0o755)
		if err == nil {
			err = os.Rename(s.tmp, s.dst)
		}
		if err != nil {
			for _, done := range all[:i] {
				_ = os.RemoveAll(done.dst)
			}
			return err
		}
	}
	return nil
}

// summary logs where the results went, the exit statuses the job
// recorded, the timings and the result.
func (r *run) summary() {
	if r.cfg.Out != "" && r.res.CollectErr == nil {
		lanec := r.cfg.Out + ".lanec"
		r.logf("report: %s", r.cfg.Out)
		for _, step := range []string{"qualify", "conformance"} {
			if data, err := readBounded(filepath.Join(lanec, "guest", step+".rc"), 16); err == nil {
				r.logf("%s exit status %s", step, exitWord(data))
			}
		}
		for _, t := range []struct{ file, tag string }{{"timings", ""}, {"guest/timings", " (guest)"}} {
			if data, err := readBounded(filepath.Join(lanec, t.file), 4096); err == nil && len(data) > 0 {
				for _, l := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
					r.logf("timing%s %s", t.tag, l)
				}
			}
		}
		if data, err := readBounded(filepath.Join(lanec, "accel.txt"), MaxGuestFileBytes); err == nil {
			for _, l := range strings.Split(string(data), "\n") {
				if a, ok := strings.CutPrefix(l, "accel "); ok {
					r.logf("accelerator %s", a)
				}
			}
		}
	}
	r.logf("result: %s (exit status %d)", r.res, r.res.ExitStatus())
}

// exitWord shows an exit status the guest recorded: a number from 0 to
// 255 as it is, anything else quoted as the data it is.
func exitWord(data []byte) string {
	s := strings.TrimSuffix(string(data), "\n")
	if n, err := strconv.Atoi(s); err == nil && n >= 0 && n <= 255 && strconv.Itoa(n) == s {
		return s
	}
	return "unreadable: " + strconv.Quote(s)
}
