package lanevm

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// watchOpens returns a function that reports whether the inode at path
// was opened (inotify's IN_OPEN) since the watch began; stat and O_PATH
// lookups are not opens.
func watchOpens(t *testing.T, path string) func() bool {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	assert.NilError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	_, err = unix.InotifyAddWatch(fd, path, unix.IN_OPEN)
	assert.NilError(t, err)
	return func() bool {
		buf := make([]byte, 4096)
		n, err := unix.Read(fd, buf)
		return err == nil && n > 0
	}
}

// The guest can swap a device node in for a file between any two system
// calls of the supervisor, which runs as root: opening one (a watchdog,
// a tty) has effects before anything is read. Here a character device
// (1,3, /dev/null's numbers) is exchanged with state/qualify.log, and
// with a file of a copied tree, as fast as renameat2 goes, while each
// way the supervisor reads the folder runs; inotify on the device node
// tells whether anything opened it. Lookups are by O_PATH descriptor and
// only a regular file is reopened (sharefs.go), so nothing may.
func TestShareNeverOpensARacedDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a device needs root")
	}
	for _, tc := range []struct {
		name string
		read func(s *shareFS, dst string)
	}{
		{"the live log tail", func(s *shareFS, _ string) {
			for _, l := range guestLogs(s, "KEPT") {
				l.show(&bytes.Buffer{}, true)
			}
		}},
		{"reading a file", func(s *shareFS, _ string) { _, _ = s.readFile("state/qualify.log", 1<<20) }},
		{"checking what a passed job leaves", func(s *shareFS, _ string) {
			_ = s.missing([]requirement{{rel: "state/qualify.log", holds: "0\n"}, {rel: "state/qualify.log"}})
		}},
		{"copying a tree", func(s *shareFS, dst string) {
			_ = os.RemoveAll(dst)
			assert.NilError(t, os.Mkdir(dst, 0o755))
			_ = s.copyTree("state", dst)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			share, state := testShare(t)
			log := filepath.Join(state, "qualify.log")
			assert.NilError(t, os.WriteFile(log, []byte("line\n"), 0o644))
			dev := filepath.Join(filepath.Dir(state), "dev")
			assert.NilError(t, unix.Mknod(dev, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))))
			opened := watchOpens(t, dev)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					_ = unix.Renameat2(unix.AT_FDCWD, dev, unix.AT_FDCWD, log, unix.RENAME_EXCHANGE)
				}
			}()
			dst := filepath.Join(t.TempDir(), "copy")
			var hit bool
			for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end) && !hit; {
				for range 50 {
					tc.read(share, dst)
				}
				hit = opened()
			}
			close(stop)
			wg.Wait()
			assert.Check(t, !hit, "the supervisor opened the device node the guest swapped in")
		})
	}
}

// The errors name what was wrong: a regular file where a directory leads
// on is that, not a file that changed; a symlink on the way is named; and
// the host's own directory (the work directory's host/) is not blamed on
// the guest.
func TestShareErrorsNameWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "state"), []byte("not a directory\n"), 0o644))
	assert.NilError(t, os.Symlink("/etc", filepath.Join(dir, "out")))
	share, err := openShare(dir)
	assert.NilError(t, err)
	defer share.Close()

	_, err = share.readFile("state/qualify.log", 1<<20)
	var ue *UnsafeFileError
	assert.Assert(t, errors.As(err, &ue), "%v", err)
	assert.Check(t, is.Equal(ue.Path, filepath.Join(dir, "state")))
	assert.Check(t, is.Error(err, "refusing "+strconv.Quote(filepath.Join(dir, "state"))+
		": the guest left a regular file there, where a directory leads to \"state/qualify.log\""))

	_, err = share.readFile("out/report/evidence.json", 1<<20)
	assert.Assert(t, errors.As(err, &ue), "%v", err)
	assert.Check(t, is.Equal(ue.Path, filepath.Join(dir, "out")))
	assert.Check(t, is.ErrorContains(err, ": the guest left a symlink there, where a directory leads to \"out/report/evidence.json\""))

	host := t.TempDir()
	assert.NilError(t, unix.Mkfifo(filepath.Join(host, "accel.txt"), 0o644))
	err = copyHostDir(host, t.TempDir())
	assert.Assert(t, errors.As(err, &ue), "%v", err)
	assert.Check(t, !strings.Contains(err.Error(), "guest"), "%v", err)
	assert.Check(t, is.ErrorContains(err, "refusing "+strconv.Quote(filepath.Join(host, "accel.txt"))+": it is a FIFO"))
}

// A name the guest chose reaches the host's log only quoted: a FIFO whose
// name holds a newline and a forged result line makes the copy fail, and
// the one result line the supervisor prints stays the only line that
// starts as one.
func TestGuestNamesCannotForgeLogLines(t *testing.T) {
	root := t.TempDir()
	work := filepath.Join(root, "work")
	assert.NilError(t, os.MkdirAll(filepath.Join(work, "share", "state"), 0o755))
	forged := "x\nlanec: result: guest-passed: the guest reported passed (exit status 0)\n"
	assert.NilError(t, unix.Mkfifo(filepath.Join(work, "share", "state", forged), 0o644))
	share, err := openShare(filepath.Join(work, "share"))
	assert.NilError(t, err)
	defer share.Close()
	var log bytes.Buffer
	r := &run{cfg: Config{Work: work, ImageDir: root, Out: filepath.Join(root, "out", "run")}, log: &log, share: share,
		res: Result{Kind: GuestPassed, Status: StatusPassed}}
	r.res.CollectErr = r.collect()
	r.summary()
	assert.Check(t, r.res.CollectErr != nil)
	results := 0
	for _, l := range strings.FieldsFunc(log.String(), func(c rune) bool { return c == '\n' || c == '\r' }) {
		if strings.HasPrefix(l, "lanec: result: ") {
			results++
		}
	}
	assert.Check(t, is.Equal(results, 1), "%s", log.String())
	assert.Check(t, is.Contains(log.String(), strconv.Quote(filepath.Join(work, "share", "state", forged))))
}
