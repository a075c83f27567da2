package lanevm

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
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
}

// FinalLines caps what a log shows once the guest stopped (a goroutine
// dump can be long; the whole logs are copied beside the report).
const FinalLines = 300

// maxLookBytes bounds one look at a log.
const maxLookBytes = 4 << 20

// conformanceProgress are the conformance log's lines worth showing as
// they come: test starts and verdicts.
var conformanceProgress = regexp.MustCompile(`^(=== RUN|[[:space:]]*--- |ok|FAIL|PASS|panic)`)

// guestLogs are the logs the job writes: qualify prints whole lines (a
// scenario's start, one every 30 s while it runs, its verdict), all
// shown; of the conformance suite's -test.v output, the test starts and
// verdicts.
func guestLogs(share *shareFS) []*logTail {
	return []*logTail{
		{tag: "qualify", share: share, rel: "state/qualify.log"},
		{tag: "conformance", share: share, rel: "state/conformance.log", keep: conformanceProgress},
	}
}

// show writes to w the complete lines the log gained. final (the guest
// has stopped) shows every line, at most FinalLines, and a last line
// without its newline, marked as cut off. A log that is not a regular
// file is not shown (the copy out refuses it with its reason).
func (l *logTail) show(w io.Writer, final bool) {
	f, err := l.share.openFile(l.rel)
	if err != nil {
		return
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(io.NewSectionReader(f, l.offset, maxLookBytes), maxLookBytes))
	if err != nil || len(data) == 0 {
		return
	}
	complete := data
	var unfinished []byte
	if i := bytes.LastIndexByte(data, '\n'); i < len(data)-1 {
		complete, unfinished = data[:i+1], data[i+1:]
	}
	lines := bytes.SplitAfter(complete, []byte("\n"))
	if n := len(lines); n > 0 && len(lines[n-1]) == 0 {
		lines = lines[:n-1]
	}
	shown := 0
	for i, line := range lines {
		if final && shown == FinalLines {
			fmt.Fprintf(w, "  guest %s.log: %d more lines in the copy beside the report\n", l.tag, len(lines)-i)
			unfinished = nil
			break
		}
		l.offset += int64(len(line))
		text := bytes.TrimRight(line, "\r\n")
		if !final && l.keep != nil && !l.keep.Match(text) {
			continue
		}
		fmt.Fprintf(w, "  guest %s| %s\n", l.tag, text)
		shown++
	}
	if final && len(unfinished) > 0 {
		fmt.Fprintf(w, "  guest %s.log| %s (unfinished when the guest stopped)\n", l.tag, bytes.TrimRight(unfinished, "\r"))
	}
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
