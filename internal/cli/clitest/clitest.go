package clitest

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

var (
	flagLine     = regexp.MustCompile(`^  --[a-z][a-z0-9-]*( [A-Z][A-Z0-9]*)?$`)
	synopsisFlag = regexp.MustCompile(`--([a-z][a-z0-9-]*)(?: ([A-Z][A-Z0-9]*))?`)
	oneDashFlag  = regexp.MustCompile(`(^|[\s(\[|,'"])-[a-z][a-z0-9]+(-[a-z0-9]+)*\b`)
)

// CheckHelp returns every way help breaks the conventions: a backquote
// left over from a misparsed flag usage (the flag package takes the first
// `name` in backquotes as the value name, so "`image: build`" on a bool
// flag would become its value), a long flag spelled with one dash, a flag
// line that is not "--name" or "--name VALUE", and a usage line whose
// flags or value names differ from the flags listed.
func CheckHelp(help string) []string {
	var problems []string
	if strings.Contains(help, "`") {
		problems = append(problems, "backquote in help text")
	}
	for _, m := range oneDashFlag.FindAllString(help, -1) {
		problems = append(problems, fmt.Sprintf("long flag with one dash: %q", strings.TrimSpace(m)))
	}
	lines := strings.Split(help, "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "usage: ") {
		return append(problems, "first line is not a usage line")
	}
	synopsis := map[string]string{}
	for _, m := range synopsisFlag.FindAllStringSubmatch(lines[0], -1) {
		synopsis[m[1]] = m[2]
	}
	listed, inFlags := map[string]string{}, false
	for _, l := range lines[1:] {
		switch {
		case l == "Flags:":
			inFlags = true
		case inFlags && strings.HasPrefix(l, "  --"):
			if !flagLine.MatchString(l) {
				problems = append(problems, fmt.Sprintf("flag line %q is not --name or --name VALUE", l))
			}
			name, value, _ := strings.Cut(strings.TrimPrefix(l, "  --"), " ")
			listed[name] = value
		case inFlags && (l == "" || !strings.HasPrefix(l, "  ")):
			inFlags = false
		}
	}
	for name, value := range synopsis {
		got, ok := listed[name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("usage line names --%s, which is not a listed flag", name))
		case got != value:
			problems = append(problems, fmt.Sprintf("usage line says --%s %s, the flag list --%s %s", name, value, name, got))
		}
	}
	for name := range listed {
		if _, ok := synopsis[name]; !ok {
			problems = append(problems, fmt.Sprintf("flag --%s is missing from the usage line", name))
		}
	}
	sort.Strings(problems)
	return problems
}
