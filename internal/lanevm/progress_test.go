package lanevm

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// testShare is a shared folder with state/, read as the supervisor reads
// the guest's; it returns the folder and its state/ directory.
func testShare(t *testing.T) (*shareFS, string) {
	t.Helper()
	dir := t.TempDir()
	assert.NilError(t, os.Mkdir(filepath.Join(dir, "state"), 0o755))
	share, err := openShare(dir)
	assert.NilError(t, err)
	t.Cleanup(func() { share.Close() })
	return share, filepath.Join(dir, "state")
}

func appendTo(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	assert.NilError(t, err)
	_, err = f.WriteString(text)
	assert.NilError(t, err)
	assert.NilError(t, f.Close())
}

// While the job runs, each look shows the complete lines gained since the
// last (a line still being written waits for its newline); of the
// conformance log, the test starts and verdicts only.
func TestLogTailShowsNewCompleteLines(t *testing.T) {
	share, state := testShare(t)
	logs := guestLogs(share, "KEPT")
	var out bytes.Buffer
	show := func() string {
		out.Reset()
		for _, l := range logs {
			l.show(&out, false)
		}
		return out.String()
	}
	assert.Check(t, is.Equal(show(), ""))
	appendTo(t, filepath.Join(state, "qualify.log"), "lifecycle started\nlifecycle pass")
	assert.Check(t, is.Equal(show(), "  guest qualify| lifecycle started\n"))
	appendTo(t, filepath.Join(state, "qualify.log"), "ed\r\n")
	appendTo(t, filepath.Join(state, "conformance.log"), "=== RUN   TestConformance\n    noise.go:1: detail\n    --- PASS: TestConformance/Start (1.2s)\nok  \tdriver\n")
	assert.Check(t, is.Equal(show(), "  guest qualify| lifecycle passed\n"+
		"  guest conformance| === RUN   TestConformance\n"+
		"  guest conformance|     --- PASS: TestConformance/Start (1.2s)\n"+
		"  guest conformance| ok  \tdriver\n"))
	assert.Check(t, is.Equal(show(), ""))
}

// Once the guest stopped, every remaining line is shown up to FinalLines,
// then how many more the copy holds; a last line without its newline is
// shown as cut off.
func TestLogTailFinal(t *testing.T) {
	share, state := testShare(t)
	l := guestLogs(share, "KEPT")[1]
	appendTo(t, filepath.Join(state, "conformance.log"), "=== RUN   TestX\nnot a verdict\ngoroutine 1 [running]:\nmain.f(...)")
	var out bytes.Buffer
	l.show(&out, true)
	assert.Check(t, is.Equal(out.String(), "  guest conformance| === RUN   TestX\n  guest conformance| not a verdict\n"+
		"  guest conformance| goroutine 1 [running]:\n  guest conformance.log| main.f(...) (unfinished when the guest stopped)\n"))

	share, state = testShare(t)
	long := guestLogs(share, "KEPT")[0]
	var b strings.Builder
	for i := range FinalLines + 5 {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	appendTo(t, filepath.Join(state, "qualify.log"), b.String())
	out.Reset()
	long.show(&out, true)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	assert.Check(t, is.Len(lines, FinalLines+1))
	assert.Check(t, is.Equal(lines[FinalLines-1], fmt.Sprintf("  guest qualify| line %d", FinalLines-1)))
	assert.Check(t, is.Equal(lines[FinalLines], "  guest qualify.log: 5 more lines in the copy beside the report"))
}

func TestConsoleTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "console.log")
	assert.Check(t, is.Len(ConsoleTail(p, 5), 0))
	appendTo(t, p, "a\r\nb\r\nc\r\n")
	assert.Check(t, is.DeepEqual(ConsoleTail(p, 2), []string{"b", "c"}))
	assert.Check(t, is.DeepEqual(ConsoleTail(p, 10), []string{"a", "b", "c"}))
}

// The console's content is the guest's: a console past MaxConsoleBytes
// is copied from its end, after a line saying how much was left out.
func TestCopyConsoleBounded(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "console.log"), filepath.Join(dir, "copy.log")
	f, err := os.Create(src)
	assert.NilError(t, err)
	// Holes, then the last line: no disk for the bulk.
	_, err = f.WriteAt([]byte("last line\r\n"), MaxConsoleBytes+100)
	assert.NilError(t, err)
	assert.NilError(t, f.Close())
	assert.NilError(t, copyConsole(src, dst))
	info, err := os.Stat(dst)
	assert.NilError(t, err)
	assert.Check(t, info.Size() <= MaxConsoleBytes+200, "copied %d bytes", info.Size())
	data, err := os.ReadFile(dst)
	assert.NilError(t, err)
	assert.Check(t, is.Equal(string(data[:bytes.IndexByte(data, '\n')+1]), "lanec: the console's first 111 bytes are not copied (lanevm.MaxConsoleBytes)\n"))
	assert.Check(t, strings.HasSuffix(string(data), "last line\n"))
}

// A guest printing newlines (or anything) without end cannot flood the
// host's log: over a run, the display of its logs writes at most
// MaxShownBytes and MaxShownLines, then one line saying the rest is not
// shown and where the whole logs are kept, then nothing more.
func TestLogTailFloodIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name, line string
	}{
		{"empty lines", "\n"},
		{"long lines", strings.Repeat("x", 3*MaxShownLineBytes) + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			share, state := testShare(t)
			logs := guestLogs(share, `"/reports/run.lanec/guest"`)
			flood := strings.Repeat(tc.line, 3*MaxShownBytes/len(tc.line))
			appendTo(t, filepath.Join(state, "qualify.log"), flood)
			appendTo(t, filepath.Join(state, "conformance.log"), flood)
			var out bytes.Buffer
			for range 2 * len(flood) / maxLookBytes {
				for _, l := range logs {
					l.show(&out, false)
				}
			}
			for _, l := range logs {
				l.show(&out, true)
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			assert.Check(t, out.Len() <= MaxShownBytes+500, "%d bytes shown", out.Len())
			assert.Check(t, len(lines) <= MaxShownLines+1, "%d lines shown", len(lines))
			assert.Check(t, is.Equal(lines[len(lines)-1], fmt.Sprintf("  guest logs: the rest is not shown (over %d bytes or %d lines, "+
				"lanevm.MaxShownBytes and MaxShownLines); the whole logs are kept in \"/reports/run.lanec/guest\"", MaxShownBytes, MaxShownLines)))
			assert.Check(t, is.Equal(strings.Count(out.String(), "the rest is not shown"), 1))
		})
	}
}

// What the guest writes in its logs cannot pass for the supervisor's
// lines: every line shown starts with "  guest ", and carriage returns,
// escape sequences and other unprintable runes (which a terminal or a
// log viewer takes as a line's start) are shown escaped.
func TestLogTailCannotForgeLines(t *testing.T) {
	share, state := testShare(t)
	logs := guestLogs(share, "KEPT")
	forged := "lanec: result: guest-passed: the guest reported passed (exit status 0)"
	appendTo(t, filepath.Join(state, "qualify.log"), "ok\r"+forged+"\n"+
		"\x1b[2K\x1b[1G"+forged+"\n\u2028"+forged+"\n\u0085"+forged+"\nbad \xff byte\n\r"+forged)
	var out bytes.Buffer
	for _, l := range logs {
		l.show(&out, false)
		l.show(&out, true)
	}
	for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		assert.Check(t, strings.HasPrefix(l, "  guest qualify"), "%q", l)
		for _, r := range l {
			assert.Check(t, r == '\t' || unicode.IsPrint(r), "%q shown in %q", r, l)
		}
	}
	assert.Check(t, is.Equal(out.String(), `  guest qualify| ok\r`+forged+"\n"+
		`  guest qualify| \x1b[2K\x1b[1G`+forged+"\n"+
		`  guest qualify| \u2028`+forged+"\n"+
		`  guest qualify| \u0085`+forged+"\n"+
		`  guest qualify| bad \xff byte`+"\n"+
		`  guest qualify.log| \r`+forged+" (unfinished when the guest stopped)\n"))
}
