package lanevm

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// logTail shows the lines one of the guest's logs on the shared folder
// gained since the last look (the 9p folder is uncached, so the guest's
// writes are visible at once).
type logTail struct {
	tag   string
	share *shareFS
	// rel is the log's path under the shared folder.
	rel string
	// keep selects the lines shown while the job runs; nil shows all.
	keep *regexp.Regexp
	// offset is the byte offset of the first line not yet consumed.
	offset int64
	// shown is what the run's logs have written so far, shared by them.
	shown *shownBudget
}

// FinalLines caps what a log shows once the guest stopped (a goroutine
// dump can be long; the whole logs are copied beside the report).
const FinalLines = 300

// The guest's logs, shown on the host's log as they come, are bounded
// over a whole run, all logs together: past either bound the display
// stops with one line saying so and where the whole logs are kept. A
// run's logs show a few thousand lines (one per scenario and per test
// verdict); the bounds keep a guest printing newlines from flooding the
// host's log.
const (
	// MaxShownBytes bounds the bytes the display writes over a run.
	MaxShownBytes = 4 << 20
	// MaxShownLines bounds the lines it writes over a run.
	MaxShownLines = 50000
	// MaxShownLineBytes bounds what is shown of one line of a log
	// (bytes of the guest's text); the rest is cut, saying how much.
	MaxShownLineBytes = 4096
)

// maxLookBytes bounds one look at a log.
const maxLookBytes = 4 << 20

// shownBudget is what the display of a run's logs has written.
type shownBudget struct {
	bytes, lines int
	// spent: a bound was reached and said so; nothing more is shown.
	spent bool
	// kept says where the whole logs are kept, for the line that ends
	// the display.
	kept string
}

// conformanceProgress are the conformance log's lines worth showing as
// they come: test starts and verdicts.
var conformanceProgress = regexp.MustCompile(`^(=== RUN|[[:space:]]*--- |ok|FAIL|PASS|panic)`)

// guestLogs are the logs the job writes: qualify prints whole lines (a
// scenario's start, one every 30 s while it runs, its verdict), all
// shown; of the conformance suite's -test.v output, the test starts and
// verdicts. kept says where the whole logs are kept (the display's last
// line, should it reach its bounds).
func guestLogs(share *shareFS, kept string) []*logTail {
	shown := &shownBudget{kept: kept}
	return []*logTail{
		{tag: "qualify", share: share, rel: "state/qualify.log", shown: shown},
		{tag: "conformance", share: share, rel: "state/conformance.log", keep: conformanceProgress, shown: shown},
	}
}

// show writes to w the complete lines the log gained, each prefixed with
// "  guest TAG| " and escaped (escapeGuest), so no line of the guest's
// passes for the supervisor's. final (the guest has stopped) shows every
// line, at most FinalLines, and a last line without its newline, marked
// as cut off. A log that is not a regular file is not shown (the copy
// out refuses it with its reason). Within MaxShownBytes and
// MaxShownLines a run.
func (l *logTail) show(w io.Writer, final bool) {
	if l.shown.spent {
		return
	}
	data := l.look()
	if len(data) == 0 {
		return
	}
	complete := data
	var unfinished []byte
	if i := bytes.LastIndexByte(data, '\n'); i < len(data)-1 && (i >= 0 || len(data) < maxLookBytes) {
		// A look of maxLookBytes without a newline is one line, cut.
		complete, unfinished = data[:i+1], data[i+1:]
	}
	lines := bytes.SplitAfter(complete, []byte("\n"))
	if n := len(lines); n > 0 && len(lines[n-1]) == 0 {
		lines = lines[:n-1]
	}
	shown := 0
	for i, line := range lines {
		if final && shown == FinalLines {
			l.write(w, fmt.Sprintf("  guest %s.log: %d more lines in the copy beside the report\n", l.tag, len(lines)-i))
			return
		}
		l.offset += int64(len(line))
		text := bytes.TrimRight(line, "\r\n")
		if !final && l.keep != nil && !l.keep.Match(text) {
			continue
		}
		if !l.write(w, fmt.Sprintf("  guest %s| %s\n", l.tag, escapeGuest(text, MaxShownLineBytes))) {
			return
		}
		shown++
	}
	if final && len(unfinished) > 0 {
		l.write(w, fmt.Sprintf("  guest %s.log| %s (unfinished when the guest stopped)\n", l.tag, escapeGuest(bytes.TrimRight(unfinished, "\r"), MaxShownLineBytes)))
	}
}

// look reads what the log holds from the offset on, at most
// maxLookBytes; nothing if it is not a regular file.
func (l *logTail) look() []byte {
	f, err := l.share.openFile(l.rel)
	if err != nil {
		return nil
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, l.offset, maxLookBytes))
	if err != nil {
		return nil
	}
	return data
}

// write writes line to w if the run's display bounds allow it; else it
// writes, once, the line that ends the display, and reports false.
func (l *logTail) write(w io.Writer, line string) bool {
	b := l.shown
	if b.bytes+len(line) > MaxShownBytes || b.lines+1 > MaxShownLines {
		b.spent = true
		fmt.Fprintf(w, "  guest logs: the rest is not shown (over %d bytes or %d lines, lanevm.MaxShownBytes and MaxShownLines); the whole logs are kept in %s\n",
			MaxShownBytes, MaxShownLines, b.kept)
		return false
	}
	b.bytes += len(line)
	b.lines++
	_, _ = io.WriteString(w, line)
	return true
}

// escapeGuest returns text, which the guest wrote, as one line that
// cannot pass for anything else on the host's log: control characters
// (a carriage return, an escape sequence, a newline), other unprintable
// runes (U+2028, U+0085) and bytes that are not UTF-8 are written as Go
// escapes (\r, \x1b, \u2028, \xff); tabs are kept. At most max bytes of
// text are shown (0: no bound), then how many more there were.
func escapeGuest(text []byte, max int) string {
	var b strings.Builder
	rest := 0
	if max > 0 && len(text) > max {
		text, rest = text[:max], len(text)-max
	}
	for len(text) > 0 {
		r, n := utf8.DecodeRune(text)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, text[0])
		case r == '\t' || unicode.IsPrint(r):
			b.Write(text[:n])
		default:
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		}
		text = text[n:]
	}
	if rest > 0 {
		fmt.Fprintf(&b, " ... (%d more bytes)", rest)
	}
	return b.String()
}

// ConsoleTail returns the last n lines of a serial console log, without
// the carriage returns the guest's console writes.
func ConsoleTail(path string, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	const window = 256 << 10
	info, err := f.Stat()
	if err != nil {
		return nil
	}
	from := max(info.Size()-window, 0)
	data, err := io.ReadAll(io.NewSectionReader(f, from, window))
	if err != nil {
		return nil
	}
	data = bytes.ReplaceAll(data, []byte("\r"), nil)
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if from > 0 && len(lines) > 1 {
		lines = lines[1:] // cut by the window
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, string(l))
	}
	if len(out) == 1 && out[0] == "" {
		return nil
	}
	return out
}
