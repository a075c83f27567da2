package evidence

import (
	"fmt"
	"slices"
	"strings"
)

// Selection records that a run executed only some of its manifest's
// scenarios (qualify run --only or --skip; docs/qualification.md#partial-reports).
// Such a report is partial: every manifest entry is still listed in the
// run's Scenarios, those not selected as skipped with no directory and the
// reason NotSelectedReason, so indexes and directories are those of a
// complete run. Verification recomputes Skipped from Only or Skip; a gate
// refuses a partial report for a required row.
type Selection struct {
	// Only are the scenario names given to --only: exactly the manifest
	// entries with these names ran.
	Only []string `json:"only,omitempty"`
	// Skip are the scenario names given to --skip: every manifest entry
	// but those with these names ran. Exactly one of Only and Skip is set.
	Skip []string `json:"skip,omitempty"`
	// Skipped are the names of the manifest entries that were not run
	// because of the selection, in manifest order, each once; never empty.
	Skipped []string `json:"skipped"`
}

// Selected reports whether a manifest entry named name runs under s. A nil
// Selection selects everything.
func (s *Selection) Selected(name string) bool {
	switch {
	case s == nil:
		return true
	case len(s.Only) > 0:
		return slices.Contains(s.Only, name)
	}
	return !slices.Contains(s.Skip, name)
}

// Flag renders the selection as the flag that made it, e.g. "--only
// admission,lifecycle".
func (s *Selection) Flag() string {
	if len(s.Only) > 0 {
		return "--only " + strings.Join(s.Only, ",")
	}
	return "--skip " + strings.Join(s.Skip, ",")
}

// String renders "PARTIAL (--only admission): not run: a, b".
func (s *Selection) String() string {
	return fmt.Sprintf("PARTIAL (%s): not run: %s", s.Flag(), strings.Join(s.Skipped, ", "))
}

// NotSelectedReason is the verdict reason of a manifest entry a Selection
// did not select.
const NotSelectedReason = "not run: not selected"

// NewSelection returns the selection of the entries named (in manifest
// order) by names under --only (only true) or --skip (only false), or nil
// when it selects every entry (a complete run). It does not check that
// the names are entries: the caller refuses those first.
func NewSelection(names []string, only bool, entries []string) *Selection {
	s := &Selection{Skipped: []string{}}
	if only {
		s.Only = names
	} else {
		s.Skip = names
	}
	s.Skipped = skippedEntries(s, entries)
	if len(s.Skipped) == 0 {
		return nil
	}
	return s
}

// skippedEntries are the names among entries that s does not select, in
// order, each once.
func skippedEntries(s *Selection, entries []string) []string {
	out := []string{}
	for _, e := range entries {
		if !s.Selected(e) && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// selectionProblems says why r's Selection does not describe its
// scenario list: exactly one of only and skip, each name a listed
// scenario, Skipped what they leave out, and every scenario left out
// listed as not run for that reason (the crossCheck of a not-run
// scenario defers to it).
func selectionProblems(r *Run) []string {
	s := r.Selection
	if s == nil {
		return nil
	}
	var out []string
	if (len(s.Only) == 0) == (len(s.Skip) == 0) {
		out = append(out, fmt.Sprintf("selection has %d --only and %d --skip names: want exactly one of them", len(s.Only), len(s.Skip)))
	}
	var names []string
	for _, sum := range r.Scenarios {
		names = append(names, sum.Name)
	}
	for _, n := range append(slices.Clone(s.Only), s.Skip...) {
		if !slices.Contains(names, n) {
			out = append(out, fmt.Sprintf("selection names scenario %q, which the run does not list", n))
		}
	}
	if want := skippedEntries(s, names); !slices.Equal(s.Skipped, want) || len(want) == 0 {
		out = append(out, fmt.Sprintf("selection says skipped [%s], but %s leaves out [%s]", strings.Join(s.Skipped, " "), s.Flag(), strings.Join(want, " ")))
	}
	for _, sum := range r.Scenarios {
		notSelected := sum.Dir == "" && sum.Verdict == Verdict{Kind: Skipped, Reason: NotSelectedReason}
		switch sel := s.Selected(sum.Name); {
		case !sel && !notSelected:
			out = append(out, fmt.Sprintf("scenario %d %q is not selected by %s, but is not listed as %s", sum.Index, sum.Name, s.Flag(), NotSelectedReason))
		case sel && notSelected:
			out = append(out, fmt.Sprintf("scenario %d %q is selected by %s, but is listed as %s", sum.Index, sum.Name, s.Flag(), NotSelectedReason))
		}
	}
	return out
}
