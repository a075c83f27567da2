package main

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// A generated region of a hand-written file is the lines between a BEGIN
// and an END marker line, each a YAML comment at the indentation the
// generated lines take:
//
//	# BEGIN generated NAME (platforms/: go run ./internal/platformgen)
//	...
//	# END generated NAME
//
// Everything outside the markers is the file's own.
const (
	beginMarker = "# BEGIN generated %s (platforms/: go run ./internal/platformgen)"
	endMarker   = "# END generated %s"
)

// RegionError says that a file's generated region cannot be found or is
// malformed.
type RegionError struct {
	File, Region, Problem string
}

var _ error = (*RegionError)(nil)

func (e *RegionError) Error() string {
	return fmt.Sprintf("%s: generated region %q: %s; its marker lines are\n\t"+beginMarker+"\n\t"+endMarker,
		e.File, e.Region, e.Problem, e.Region, e.Region)
}

// splice returns src with the lines of region replaced by body, each
// line of body indented like the BEGIN marker.
func splice(file string, src []byte, region string, body string) ([]byte, error) {
	lines := strings.SplitAfter(string(src), "\n")
	begin, end := fmt.Sprintf(beginMarker, region), fmt.Sprintf(endMarker, region)
	at := func(marker string) (int, error) {
		found := -1
		for i, l := range lines {
			if strings.TrimSpace(l) == marker {
				if found >= 0 {
					return 0, &RegionError{file, region, fmt.Sprintf("marker %q is on lines %d and %d", marker, found+1, i+1)}
				}
				found = i
			}
		}
		if found < 0 {
			return 0, &RegionError{file, region, fmt.Sprintf("no line %q", marker)}
		}
		return found, nil
	}
	b, err := at(begin)
	if err != nil {
		return nil, err
	}
	e, err := at(end)
	if err != nil {
		return nil, err
	}
	if e < b {
		return nil, &RegionError{file, region, fmt.Sprintf("the END marker (line %d) comes before the BEGIN marker (line %d)", e+1, b+1)}
	}
	indent := lines[b][:len(lines[b])-len(strings.TrimLeft(lines[b], " "))]
	var out bytes.Buffer
	for _, l := range lines[:b+1] {
		out.WriteString(l)
	}
	for _, l := range strings.SplitAfter(body, "\n") {
		if l != "" {
			out.WriteString(indent + l)
		}
	}
	for _, l := range lines[e:] {
		out.WriteString(l)
	}
	return out.Bytes(), nil
}

// generatedList matches a line that lists the rows a signer signs, e.g.
//
//	rows: [lane-a, lane-b] # generated: signer lane-host
var generatedList = regexp.MustCompile(`(?m)^(\s*rows: )\[[^\]\n]*\]( # generated: signer ([a-z-]+))$`)

// spliceSigners returns src with each signer row list replaced by the
// rows rows returns for its signer; it refuses a file without one, or a
// signer with no rows.
func spliceSigners(file string, src []byte, rows func(signer string) []string) ([]byte, error) {
	var problem error
	out := generatedList.ReplaceAllFunc(src, func(line []byte) []byte {
		m := generatedList.FindSubmatch(line)
		names := rows(string(m[3]))
		if len(names) == 0 && problem == nil {
			problem = fmt.Errorf("%s: signer %s signs no row of this policy: remove its trust entry, or the generated marker of its rows", file, m[3])
		}
		return fmt.Appendf(nil, "%s[%s]%s", m[1], strings.Join(names, ", "), m[2])
	})
	if problem != nil {
		return nil, problem
	}
	if !generatedList.Match(src) {
		return nil, fmt.Errorf("%s: no trust entry has a generated row list (a line `rows: [...] # generated: signer NAME`)", file)
	}
	return out, nil
}
