package qualify

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of an Engine build record (ReadEngineBuild). The record lands in
// every signed run header, so it is small and plain by construction; the
// bounds are the point, which is why this is not a general text reader.
const (
	MaxEngineBuildBytes = 16 << 10
	MaxEngineBuildLines = 64
)

// EngineBuildError says why an Engine build record was refused: the file
// and what was wrong with it.
type EngineBuildError struct {
	Path    string
	Problem string
}

func (e *EngineBuildError) Error() string {
	return fmt.Sprintf("engine build record %q: %s", e.Path, e.Problem)
}

// ReadEngineBuild reads how the Engine under qualification was built (for
// lane C, its Engine tuple's VERSIONS: one line per binary with version,
// source, commit, Go version and flags; docs/lanes.md#engine-tuples), for
// the run header's engineBuild. The file must be UTF-8 text of at most
// MaxEngineBuildBytes bytes and MaxEngineBuildLines non-empty lines with no
// control characters but tabs; it returns the non-empty lines, trimmed of
// trailing space, or an *EngineBuildError naming the file and the problem.
func ReadEngineBuild(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &EngineBuildError{path, err.Error()}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxEngineBuildBytes+1))
	if err != nil {
		return nil, &EngineBuildError{path, err.Error()}
	}
	if len(data) > MaxEngineBuildBytes {
		return nil, &EngineBuildError{path, fmt.Sprintf("more than %d bytes", MaxEngineBuildBytes)}
	}
	if !utf8.Valid(data) {
		return nil, &EngineBuildError{path, "not UTF-8 text"}
	}
	var lines []string
	for i, l := range bytes.Split(data, []byte("\n")) {
		line := strings.TrimRightFunc(string(l), unicode.IsSpace)
		if line == "" {
			continue
		}
		if j := strings.IndexFunc(line, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }); j >= 0 {
			return nil, &EngineBuildError{path, fmt.Sprintf("line %d has control character %q", i+1, line[j])}
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return nil, &EngineBuildError{path, "empty"}
	}
	if len(lines) > MaxEngineBuildLines {
		return nil, &EngineBuildError{path, fmt.Sprintf("%d lines, more than %d", len(lines), MaxEngineBuildLines)}
	}
	return lines, nil
}
