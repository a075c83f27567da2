package lanevm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// collect copies the run's results out of the shared folder: the signed
// report to Out and the lane's own files to Out.lanec (each assembled
// under a temporary name and renamed into place, so a failed copy leaves
// neither), and the recorded trees to Record.
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

func (r *run) collectRecord() error {
	src := filepath.Join(r.cfg.share(), "out", "record")
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("the guest recorded no cgroup trees (%s)", src)
	}
	if err := os.MkdirAll(r.cfg.Record, 0o755); err != nil {
		return err
	}
	if err := os.CopyFS(r.cfg.Record, os.DirFS(src)); err != nil {
		return fmt.Errorf("copying the recorded trees to %s: %w", r.cfg.Record, err)
	}
	if log, err := os.ReadFile(filepath.Join(r.cfg.state(), "record.log")); err == nil {
		if err := os.WriteFile(filepath.Join(r.cfg.Record, "record.log"), log, 0o644); err != nil {
			return err
		}
	}
	r.logf("recorded cgroup v2 trees in %s", r.cfg.Record)
	return nil
}

func (r *run) collectOut() error {
	out := r.cfg.Out
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	// The report as the guest left it: complete, partial (a stopped
	// qualify writes what it has) or absent (an empty directory, which
	// verification refuses).
	report := filepath.Join(r.cfg.share(), "out", "report")
	err := intoPlace(out, func(tmp string) error {
		if _, err := os.Stat(report); err != nil {
			return nil
		}
		return os.CopyFS(tmp, os.DirFS(report))
	})
	if err != nil {
		return fmt.Errorf("copying the report to %s: %w", out, err)
	}
	// The lane's own files beside it: a signed report directory holds
	// only what its statement covers.
	err = intoPlace(out+".lanec", func(tmp string) error {
		if err := os.CopyFS(tmp, os.DirFS(r.cfg.state())); err != nil {
			return err
		}
		if console, err := os.ReadFile(Console(r.cfg.Work)); err == nil {
			if err := os.WriteFile(filepath.Join(tmp, "console.log"), bytes.ReplaceAll(console, []byte("\r"), nil), 0o644); err != nil {
				return err
			}
		}
		if build, err := os.ReadFile(filepath.Join(r.cfg.ImageDir, "BUILD")); err == nil {
			if err := os.WriteFile(filepath.Join(tmp, "image.txt"), build, 0o644); err != nil {
				return err
			}
		}
		f, err := os.OpenFile(filepath.Join(tmp, "timings"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		for _, t := range append(append([]Timing(nil), r.cfg.Timings...), r.res.Timings...) {
			fmt.Fprintln(f, t)
		}
		if err := f.Close(); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(tmp, "result.txt"), []byte(r.res.String()+"\n"), 0o644)
	})
	if err != nil {
		return fmt.Errorf("copying the lane's files to %s.lanec: %w", out, err)
	}
	return nil
}

// intoPlace fills a new temporary directory beside dst with fill and
// renames it to dst; on any failure it removes it.
func intoPlace(dst string, fill func(tmp string) error) error {
	tmp, err := os.MkdirTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".partial-")
	if err != nil {
		return err
	}
	if err := fill(tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.RemoveAll(tmp)
		return err
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
			if data, err := readBounded(filepath.Join(lanec, step+".rc"), 16); err == nil {
				r.logf("%s exit status %s", step, exitWord(data))
			}
		}
		if data, err := os.ReadFile(filepath.Join(lanec, "timings")); err == nil {
			for _, l := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
				r.logf("timing %s", l)
			}
		}
		if data, err := os.ReadFile(filepath.Join(lanec, "accel.txt")); err == nil {
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
