package main

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/qualbox/qualbox/platforms"
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

// A trust entry's row list is generated too: each line `rows: [...]`
// directly below a `- key: PATH` line is written from the registry's key
// whose File PATH ends in (platforms.Keys), with a marker saying which
// kind of list it is:
//
//	trust:
//	  - key: ../reports/keys/qualbox-ed25519-2026-12-06.pub
//	    rows: [lane-a, lane-b, lane-c] # generated: signer lane-host
//
// "generated" marks the signer's newest key, "frozen" a retired one,
// whose rows stay those it signed. The key path and window stay the
// file's own.
var (
	keyLine  = regexp.MustCompile(`^\s*- key: (\S+)\s*$`)
	rowsLine = regexp.MustCompile(`^(\s*)rows: \[`)
)

// TrustError says that a policy's trust entry cannot be generated: its
// key is not one of the registry's, its row list is not directly below
// its key, or it would list no row of the policy.
type TrustError struct {
	File    string
	Line    int
	Problem string
}

var _ error = (*TrustError)(nil)

func (e *TrustError) Error() string {
	return fmt.Sprintf("%s:%d: trust entry: %s (the keys and their rows are platforms/keys.go's)", e.File, e.Line, e.Problem)
}

// spliceTrust returns src with each trust entry's row list written from
// keys: rows returns the rows of this policy a key is trusted for. It
// refuses a file with no trust row list.
func spliceTrust(file string, src []byte, keys []platforms.Key, rows func(platforms.Key) []string) ([]byte, error) {
	lines := strings.SplitAfter(string(src), "\n")
	lists := 0
	for i, l := range lines {
		m := rowsLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		lists++
		var k *keyMatch
		if i > 0 {
			k = matchKey(lines[i-1], keys)
		}
		switch {
		case k == nil:
			return nil, &TrustError{file, i + 1, "a row list not directly below a `- key: PATH` line"}
		case !k.found:
			return nil, &TrustError{file, i, fmt.Sprintf("key %s is not a key of the registry", k.path)}
		}
		names := rows(k.key)
		if len(names) == 0 {
			return nil, &TrustError{file, i, fmt.Sprintf("key %s is trusted for no row of this policy: remove its entry", k.path)}
		}
		kind := "frozen"
		if platforms.Newest(keys, k.key) {
			kind = "generated"
		}
		eol := l[len(strings.TrimRight(l, "\n")):]
		lines[i] = fmt.Sprintf("%srows: [%s] # %s: signer %s%s", m[1], strings.Join(names, ", "), kind, k.key.Signer, eol)
	}
	if lists == 0 {
		return nil, fmt.Errorf("%s: no trust entry has a row list (a line `rows: [...]` below its `- key:` line)", file)
	}
	out := []byte(strings.Join(lines, ""))
	if err := checkTrust(file, out, keys, rows); err != nil {
		return nil, err
	}
	return out, nil
}

// checkTrust reads the trust entries of the policy file src, as the
// gate reads them, and refuses one the lines above did not write: its
// row list in another YAML form (a block list, a flow mapping), so that
// it is not the key's, or its key path not the registry key's file under
// its signer's directory (platforms.Key.Path), so that another public
// key could be trusted under a trusted key's name. file is src's slash
// path from the repository root.
func checkTrust(file string, src []byte, keys []platforms.Key, rows func(platforms.Key) []string) error {
	var doc struct {
		Trust []yaml.Node `yaml:"trust"`
	}
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for _, n := range doc.Trust {
		var e struct {
			Key  string   `yaml:"key"`
			Rows []string `yaml:"rows"`
		}
		if err := n.Decode(&e); err != nil {
			return &TrustError{file, n.Line, err.Error()}
		}
		i := slices.IndexFunc(keys, func(k platforms.Key) bool { return k.File == path.Base(e.Key) })
		if i < 0 {
			return &TrustError{file, n.Line, fmt.Sprintf("key %s is not a key of the registry", e.Key)}
		}
		k := keys[i]
		if got := path.Join(path.Dir(file), e.Key); got != k.Path() {
			return &TrustError{file, n.Line, fmt.Sprintf("key %s is %s, but signer %s's keys are under %s/", e.Key, got, k.Signer, path.Dir(k.Path()))}
		}
		if want := rows(k); !slices.Equal(e.Rows, want) {
			return &TrustError{file, n.Line, fmt.Sprintf("key %s: rows %v, but the key is trusted for %v: write its list as `rows: [...]` directly below its `- key: PATH` line", e.Key, e.Rows, want)}
		}
	}
	return nil
}

// keyMatch is a `- key: PATH` line and the registry key PATH names.
type keyMatch struct {
	path  string
	key   platforms.Key
	found bool
}

// matchKey returns the key line l names, or nil when l is no key line.
func matchKey(l string, keys []platforms.Key) *keyMatch {
	m := keyLine.FindStringSubmatch(l)
	if m == nil {
		return nil
	}
	k := &keyMatch{path: m[1]}
	if i := slices.IndexFunc(keys, func(o platforms.Key) bool { return path.Base(m[1]) == o.File }); i >= 0 {
		k.key, k.found = keys[i], true
	}
	return k
}
