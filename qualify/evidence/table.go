package evidence

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

var tableHeader = []string{"#", "Scenario", "Verdict", "Checks", "Duration", "Detail"}

// maxDetail bounds the Detail column so the table stays readable; the full
// text is in the evidence JSON.
const maxDetail = 72

func tableRows(r *Run) [][]string {
	rows := make([][]string, 0, len(r.Scenarios))
	for _, s := range r.Scenarios {
		detail := s.Detail
		if s.Verdict.Reason != "" && detail == "" {
			detail = s.Verdict.Reason
		}
		if len(detail) > maxDetail {
			detail = detail[:maxDetail-3] + "..."
		}
		checks := "-"
		if s.Checks > 0 {
			checks = fmt.Sprintf("%d/%d", s.Passed, s.Checks)
		}
		rows = append(rows, []string{
			fmt.Sprint(s.Index), s.Name, string(s.Verdict.Kind), checks,
			FormatDuration(time.Duration(s.DurationMs) * time.Millisecond), detail,
		})
	}
	return rows
}

// FormatDuration renders d with one decimal of seconds, e.g. "1.8s".
func FormatDuration(d time.Duration) string {
	return fmt.Sprintf("%.1fs", d.Seconds())
}

func renderTable(w io.Writer, r *Run, opts ...tablewriter.Option) error {
	opts = append(opts,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignLeft),
	)
	t := tablewriter.NewTable(w, opts...)
	t.Header(tableHeader)
	for _, row := range tableRows(r) {
		if err := t.Append(row); err != nil {
			return err
		}
	}
	return t.Render()
}

// Table renders the run's scenarios as a plain-text table followed by a
// one-line run verdict.
func Table(w io.Writer, r *Run) error {
	var buf bytes.Buffer
	for _, l := range TupleOf(r).Lines() {
		fmt.Fprintf(&buf, "%s\n", l)
	}
	if r.Posture != nil {
		for _, l := range r.Posture.Brief() {
			fmt.Fprintf(&buf, "%s\n", l)
		}
	}
	if c := r.Campaign; c != nil {
		fmt.Fprintf(&buf, "Campaign: %s\n", c)
	}
	if err := renderTable(&buf, r); err != nil {
		return err
	}
	if c := r.Campaign; c != nil {
		for _, t := range c.Scenarios {
			fmt.Fprintf(&buf, "%s\n", t)
		}
	}
	fmt.Fprintf(&buf, "%s: %s in %s\n", r.Profile, r.Verdict, FormatDuration(r.Timing.Duration()))
	if r.Selection != nil {
		fmt.Fprintf(&buf, "%s\n", r.Selection)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// Markdown renders summary.md: the run header and the same table in
// Markdown.
func Markdown(r *Run) ([]byte, error) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# qualbox qualification: %s\n\n", r.Profile)
	fmt.Fprintf(&buf, "- Verdict: **%s**\n", r.Verdict)
	if r.Selection != nil {
		fmt.Fprintf(&buf, "- Coverage: **PARTIAL** (%s): not run: %s\n", r.Selection.Flag(), strings.Join(r.Selection.Skipped, ", "))
	}
	fmt.Fprintf(&buf, "- Manifest: `%s` (sha256 `%s`)\n", r.Manifest.Path, r.Manifest.SHA256)
	fmt.Fprintf(&buf, "- Controller: %s/%s, %s\n", r.Controller.OS, r.Controller.Arch, r.Controller.GoVersion)
	e := r.Engine
	fmt.Fprintf(&buf, "- Engine: %s (API %s, commit %s) at `%s`\n", e.Version, e.APIVersion, e.GitCommit, r.Endpoint)
	fmt.Fprintf(&buf, "- Host: kernel %s, %s, cgroup v%s/%s, storage %s\n", e.KernelVersion, e.OperatingSystem, e.CgroupVersion, e.CgroupDriver, e.StorageDriver)
	fmt.Fprintf(&buf, "- containerd %s, runc %s\n", e.ContainerdCommit, e.RuncCommit)
	if r.Posture != nil {
		fmt.Fprintf(&buf, "- Posture (docs/qualification.md#posture):\n")
		for _, l := range r.Posture.Lines() {
			fmt.Fprintf(&buf, "  - %s\n", mdText(l))
		}
	}
	fmt.Fprintf(&buf, "- Tuple: %s\n", TupleOf(r).Label())
	fmt.Fprintf(&buf, "- Image: `%s` (%s)\n", r.Image.ID, r.Image.Source)
	if r.Harness != nil {
		fmt.Fprintf(&buf, "- Harness: %s\n", r.Harness)
	}
	fmt.Fprintf(&buf, "- Time: %s to %s (%s)\n", r.Timing.Start.Format(time.RFC3339), r.Timing.End.Format(time.RFC3339), FormatDuration(r.Timing.Duration()))
	if c := r.Campaign; c != nil {
		fmt.Fprintf(&buf, "- Campaign: %s (each round's start order is in evidence.json)\n", c)
	}
	if r.Interrupted {
		fmt.Fprintf(&buf, "- Interrupted: the run was cancelled by a signal\n")
	}
	buf.WriteString("\n")
	if err := renderTable(&buf, r, tablewriter.WithRenderer(renderer.NewMarkdown())); err != nil {
		return nil, err
	}
	if c := r.Campaign; c != nil && len(c.Scenarios) > 0 {
		buf.WriteString("\nPasses per scenario:\n\n")
		for _, t := range c.Scenarios {
			fmt.Fprintf(&buf, "- %s\n", t)
		}
	}
	return []byte(strings.TrimRight(buf.String(), "\n") + "\n"), nil
}
