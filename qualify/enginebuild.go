package qualify

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/qualbox/qualbox/qualify/evidence"
)

// Bounds of an operator's record (ReadEngineBuild, ReadImageInputs).
// The record lands in every signed run header, so it is small and plain
// by construction; the bounds are the point, which is why this is not a
// general text reader.
const (
	MaxEngineBuildBytes = 16 << 10
	MaxEngineBuildLines = 64
)

// RecordError says why an operator's record for the run header was
// refused: which record, the file and what was wrong with it.
type RecordError struct {
	// Record is "engine build record" or "image inputs record".
	Record  string
	Path    string
	Problem string
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("%s %q: %s", e.Record, e.Path, e.Problem)
}

// ReadEngineBuild reads how the Engine under qualification was built (for
// lane C, its Engine tuple's VERSIONS: one line per binary with version,
// source, commit, Go version and flags; docs/lanes.md#engine-tuples), for
// the run header's engineBuild. The file must be UTF-8 text of at most
// MaxEngineBuildBytes bytes and MaxEngineBuildLines non-empty lines with no
// control characters but tabs; it returns the non-empty lines, trimmed of
// trailing space, or a *RecordError naming the file and the problem.
func ReadEngineBuild(path string) ([]string, error) {
	return readRecord("engine build record", path)
}

// ReadImageInputs reads what the virtual machine image the run happens
// in was assembled from (lanes C and D: the guest's
// /etc/qualbox-image-inputs; docs/lanes.md#image-inputs), for the run
// header's imageInputs: a file within ReadEngineBuild's bounds whose
// lines parse as evidence.ParseImageInputs requires. It returns the
// lines, or a *RecordError naming the file and the problem (the line of
// an *evidence.ImageInputsError).
func ReadImageInputs(path string) ([]string, error) {
	const what = "image inputs record"
	lines, err := readRecord(what, path)
	if err != nil {
		return nil, err
	}
	if _, err := evidence.ParseImageInputs(lines); err != nil {
		return nil, &RecordError{what, path, err.Error()}
	}
	return lines, nil
}

// readRecord reads the record at path within the bounds above.
func readRecord(what, path string) ([]string, error) {
	fail := func(problem string) error { return &RecordError{what, path, problem} }
	f, err := os.Open(path)
	if err != nil {
		return nil, fail(err.Error())
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxEngineBuildBytes+1))
	if err != nil {
		return nil, fail(err.Error())
	}
	if len(data) > MaxEngineBuildBytes {
		return nil, fail(fmt.Sprintf("more than %d bytes", MaxEngineBuildBytes))
	}
	if !utf8.Valid(data) {
		return nil, fail("not UTF-8 text")
	}
	var lines []string
	for i, l := range bytes.Split(data, []byte("\n")) {
		line := strings.TrimRightFunc(string(l), unicode.IsSpace)
		if line == "" {
			continue
		}
		if j := strings.IndexFunc(line, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }); j >= 0 {
			return nil, fail(fmt.Sprintf("line %d has control character %q", i+1, line[j]))
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return nil, fail("empty")
	}
	if len(lines) > MaxEngineBuildLines {
		return nil, fail(fmt.Sprintf("%d lines, more than %d", len(lines), MaxEngineBuildLines))
	}
	return lines, nil
}
