package lanevm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// collect copies the run's results out of the shared folder: the signed
// report to Out and the lane's own files to Out.lanec, and the recorded
// trees to Record. Each is assembled under a temporary name beside its
// destination (Out and Out.lanec together: a failed copy of either
// leaves neither); then the run's result is final, with any failure of
// the copies in CollectErr, and is written as Out.lanec/result.txt;
// then what was assembled is synced and renamed into place (place), so
// result.txt, the exit status and the placed files agree. Everything
// taken from the shared folder is read as sharefs.go says: a symlink,
// FIFO, socket or device the guest left fails the copy with an
// *UnsafeFileError, a file or tree past its bound with a
// *TooLargeError.
func (r *run) collect() error {
	if r.res.Kind != GuestPassed {
		r.consoleTail(60)
	}
	// In the order of placement: the report last, so that its presence
	// says the rest is there (place).
	var ready []*staged
	var errs []error
	var record, report, lanec *staged
	if r.cfg.Record != "" {
		var err error
		if record, err = r.stageRecord(); err != nil {
			errs = append(errs, err)
		} else {
			defer record.discard()
			ready = append(ready, record)
		}
	}
	if r.cfg.Out != "" {
		var err error
		if report, lanec, err = r.stageOut(); err != nil {
			errs = append(errs, err)
		} else {
			defer report.discard()
			defer lanec.discard()
		}
	}
	r.res.CollectErr = errors.Join(errs...)
	if lanec != nil {
		result := filepath.Join(lanec.tmp, "result.txt")
		if err := os.WriteFile(result, []byte(r.res.String()+"\n"), 0o644); err != nil {
			// Nothing placed may then say how the run ended.
			return errors.Join(append(errs, err)...)
		}
		ready = append(ready, lanec, report)
	}
	if err := place(ready...); err != nil {
		return errors.Join(append(errs, err)...)
	}
	r.placedOut = report != nil
	if record != nil {
		r.logf("recorded cgroup v2 trees in %s", r.cfg.Record)
	}
	return r.res.CollectErr
}

func (r *run) consoleTail(n int) {
	lines := ConsoleTail(Console(r.cfg.Work), n)
	if len(lines) == 0 {
		return
	}
	r.logf("last guest console lines:")
	for _, l := range lines {
		fmt.Fprintf(r.log, "  guest| %s\n", escapeGuest([]byte(l), MaxShownLineBytes))
	}
}

// stageRecord assembles share/out/record and state/record.log for
// Record, which is absent or empty (Config.Check): rename(2) replaces an
// empty directory.
func (r *run) stageRecord() (*staged, error) {
	const src = "out/record"
	if _, err := r.share.stat(src); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("the guest recorded no cgroup trees (%q)", r.share.hostPath(src))
	}
	if err := os.MkdirAll(filepath.Dir(r.cfg.Record), 0o755); err != nil {
		return nil, err
	}
	st, err := stage(r.cfg.Record)
	if err != nil {
		return nil, err
	}
	if err := r.fillRecord(st.tmp); err != nil {
		st.discard()
		return nil, err
	}
	return st, nil
}

func (r *run) fillRecord(dir string) error {
	if err := r.share.copyTree("out/record", dir); err != nil {
		return fmt.Errorf("copying the recorded trees to %q: %w", r.cfg.Record, err)
	}
	if log, err := r.share.readFile("state/record.log", MaxGuestFileBytes); err == nil {
		return os.WriteFile(filepath.Join(dir, "record.log"), log, 0o644)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("copying the recording's log to %q: %w", r.cfg.Record, err)
	}
	return nil
}

// stageOut assembles the report for Out and the lane's files for
// Out.lanec, all but result.txt (collect): at its top the host's own
// (console.log, image.txt, timings, and what scripts/lanec.sh left in
// the work directory's host/, such as accel.txt), and under guest/ the
// guest's state/ as it left it, so that nothing the guest wrote passes
// for the host's. Both or neither.
func (r *run) stageOut() (report, lanec *staged, err error) {
	out := r.cfg.Out
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, nil, err
	}
	if report, err = stage(out); err != nil {
		return nil, nil, err
	}
	if lanec, err = stage(out + ".lanec"); err != nil {
		report.discard()
		return nil, nil, err
	}
	if err := r.fillOut(report.tmp, lanec.tmp); err != nil {
		report.discard()
		lanec.discard()
		return nil, nil, err
	}
	return report, lanec, nil
}

func (r *run) fillOut(report, lanec string) error {
	// The report as the guest left it: complete, partial (a stopped
	// qualify writes what it has) or absent (an empty directory, which
	// verification refuses).
	if _, err := r.share.stat("out/report"); !errors.Is(err, os.ErrNotExist) {
		if err := r.share.copyTree("out/report", report); err != nil {
			return fmt.Errorf("copying the report to %q: %w", r.cfg.Out, err)
		}
	}
	// A signed report directory holds only what its statement covers:
	// the lane's files go beside it.
	if err := r.fillLanec(lanec); err != nil {
		return fmt.Errorf("copying the lane's files to %q: %w", r.cfg.Out+".lanec", err)
	}
	return nil
}

// fillLanec writes the lane's files but result.txt into dir (stageOut).
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
	return os.WriteFile(filepath.Join(dir, "timings"), timings.Bytes(), 0o644)
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

// place makes each staged directory durable and renames it to its
// destination, in order; if one fails, it removes those it already put
// in place, so either all are there, complete, or none. Before the
// renames every file and directory of the staged trees is fsynced, and
// after them the destinations' parent directories, so a crash (power
// loss) never leaves a renamed directory whose files are empty or
// partial. A SIGKILL between two renames leaves the earlier ones in
// place without the later ones (and the later ones' .partial-
// directories beside them): collect places the report last, so a report
// directory is there only with everything else a run places.
func place(all ...*staged) error {
	for _, s := range all {
		if err := os.Chmod(s.tmp, 0o755); err != nil {
			return err
		}
		if err := syncTree(s.tmp); err != nil {
			return err
		}
	}
	for i, s := range all {
		done := all[:i]
		err := os.Rename(s.tmp, s.dst)
		if err == nil {
			done = all[:i+1]
			err = syncPath(filepath.Dir(s.dst))
		}
		if err != nil {
			for _, d := range done {
				_ = os.RemoveAll(d.dst)
			}
			return err
		}
	}
	return nil
}

// syncTree fsyncs every file and directory under dir, a tree the
// supervisor made (stage), and dir itself.
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return fmt.Errorf("syncing %q: not a regular file or directory", p)
		}
		return syncPath(p)
	})
}

// syncPath fsyncs the file or directory at p.
func syncPath(p string) error {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// summary logs where the results went, the exit statuses the job
// recorded, the timings and the result.
func (r *run) summary() {
	if r.placedOut {
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
					r.logf("timing%s %s", t.tag, l) // logf escapes the guest's text
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
