package docscheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

const root = "../.."

// slug is GitHub's heading anchor: lower case, punctuation other than '-'
// dropped, spaces as '-'.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

var heading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)

// sections returns the anchors and the level-2 headings of a docs file.
func sections(t *testing.T, file string) (anchors map[string]bool, h2 []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, file))
	assert.NilError(t, err)
	anchors = map[string]bool{}
	inFence := false
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "```") {
			inFence = !inFence
		}
		if m := heading.FindStringSubmatch(l); m != nil && !inFence {
			anchors[slug(m[1])] = true
			if strings.HasPrefix(l, "## ") {
				h2 = append(h2, m[1])
			}
		}
	}
	return anchors, h2
}

func TestSlug(t *testing.T) {
	assert.Check(t, is.Equal(slug("Desktop (synthetic)"), "desktop-synthetic"))
	assert.Check(t, is.Equal(slug("Processes and streams"), "processes-and-streams"))
}

// The docs that comments cite keep the sections they are cited by.
func TestDocsSections(t *testing.T) {
	for file, want := range map[string][]string{
		"docs/contract.md":      {"Policy", "Errors", "Processes and streams", "Workspace files", "Recovery", "Datasets", "Profiles and admission", "Cleanup", "Pool"},
		"docs/lanes.md":         {"The project's hosts", "Lane A", "Lane B", "Lane C", "Lane D", "Engine tuples", "Desktop (synthetic)", "Hosted runners"},
		"docs/qualification.md": {"Profiles", "Rows", "Scenarios", "Evidence", "Gate"},
	} {
		_, h2 := sections(t, file)
		assert.Check(t, is.DeepEqual(h2, want), file)
	}
}

var citation = regexp.MustCompile(`docs/([a-z0-9-]+\.md)#([a-z0-9-]+)`)

// Every section citation in the tracked files resolves to a file and a
// heading in docs/.
func TestCitationsResolve(t *testing.T) {
	out, err := exec.Command("git", "-C", root, "ls-files").Output()
	assert.NilError(t, err)
	cache := map[string]map[string]bool{}
	checked := 0
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, "reports/") || strings.Contains(f, "/testdata/") {
			continue // signed evidence and recorded inputs are not edited
		}
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue // listed but absent in this checkout
		}
		for _, m := range citation.FindAllStringSubmatch(string(data), -1) {
			doc := "docs/" + m[1]
			anchors, ok := cache[doc]
			if !ok {
				if _, err := os.Stat(filepath.Join(root, doc)); err != nil {
					t.Errorf("%s cites %s, which does not exist", f, m[0])
					cache[doc] = nil
					continue
				}
				anchors, _ = sections(t, doc)
				cache[doc] = anchors
			}
			if anchors != nil && !anchors[m[2]] {
				t.Errorf("%s cites %s: no such section", f, m[0])
			}
			checked++
		}
	}
	assert.Check(t, checked > 10, "only %d citations found", checked)
}
