package evidence

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/pkg/twwidth"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// TableWidth is the width, in terminal columns, that GateTable keeps
// every line within: it wraps the legend and footnotes to it and splits a
// matrix too wide for it into panels of columns (a single column wider
// than it, which no report of a handful of words makes, stays whole).
const TableWidth = 120

// stateRow is the first body row of a gate matrix: each column's state.
const stateRow = "row state"

// note is one numbered footnote: a line, and items below it.
type note struct {
	head  string
	items []string
}

// notes numbers footnotes in the order first referenced; an identical
// footnote keeps its number.
type notes struct {
	list  []note
	index map[string]int
}

func (n *notes) add(head string, items []string) int {
	if n.index == nil {
		n.index = map[string]int{}
	}
	k := head + "\x00" + strings.Join(items, "\x00")
	if i, ok := n.index[k]; ok {
		return i
	}
	n.list = append(n.list, note{head, items})
	n.index[k] = len(n.list)
	return len(n.list)
}

// gateView is a GateResult prepared for display: each column's state
// text, each cell's text, with every reason and violation moved into
// numbered footnotes.
type gateView struct {
	g      *GateResult
	states []string
	cells  [][]string
	notes  notes
}

func viewOf(g *GateResult, clean func(string) string) *gateView {
	v := &gateView{g: g}
	for _, c := range g.Columns {
		s := string(c.State)
		if items := columnNote(c); len(items) > 0 {
			for i := range items {
				items[i] = clean(items[i])
			}
			s += fmt.Sprintf(" [%d]", v.notes.add(clean(c.Name)+" "+string(c.State)+":", items))
		}
		v.states = append(v.states, s)
	}
	for i := range g.Matrix.Scenarios {
		var row []string
		for _, c := range g.Matrix.Cells[i] {
			s := "-"
			if c.Runs > 0 {
				s = clean(string(c.Kind))
				if c.Runs > 1 {
					s += fmt.Sprintf(" %d/%d", c.Passed, c.Runs)
				}
				if c.Reason != "" {
					s += fmt.Sprintf(" [%d]", v.notes.add(clean(c.Reason), nil))
				}
			}
			row = append(row, s)
		}
		v.cells = append(v.cells, row)
	}
	return v
}

// columnNote is the footnote of a column's state: each refusal's
// problems, then every other violation that concerns it.
func columnNote(c GateColumn) []string {
	var items []string
	for _, r := range c.Refused {
		if c.Kind == KindRow && r.Claimed != nil {
			items = append(items, fmt.Sprintf("%s is refused; its unverified evidence.json claims this row's tuple (%s)", r.Dir, strings.ReplaceAll(r.Claimed.Label(), " · ", ", ")))
		}
		for _, p := range r.Problems {
			items = append(items, r.Dir+": "+p)
		}
	}
	for _, m := range c.Violations {
		if !strings.HasPrefix(m, "refused: ") {
			items = append(items, m)
		}
	}
	return items
}

func (v *gateView) header(clean func(string) string) []string {
	h := []string{"Scenario"}
	for _, c := range v.g.Columns {
		h = append(h, clean(c.Name))
	}
	return h
}

// render writes the matrix of the columns cols (indices into
// g.Columns, in order) as one table, the scenario column first.
func (v *gateView) render(w io.Writer, clean func(string) string, cols []int, opts ...tablewriter.Option) error {
	opts = append(opts,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignLeft),
	)
	pick := func(first string, all []string) []string {
		row := []string{first}
		for _, j := range cols {
			row = append(row, all[j])
		}
		return row
	}
	t := tablewriter.NewTable(w, opts...)
	h := v.header(clean)
	t.Header(pick(h[0], h[1:]))
	if err := t.Append(pick(stateRow, v.states)); err != nil {
		return err
	}
	for i, name := range v.g.Matrix.Scenarios {
		if err := t.Append(pick(clean(name), v.cells[i])); err != nil {
			return err
		}
	}
	return t.Render()
}

// allColumns is every column index of the view, in order.
func (v *gateView) allColumns() []int {
	out := make([]int, len(v.g.Columns))
	for j := range out {
		out[j] = j
	}
	return out
}

// panels splits the columns into runs of consecutive columns whose table
// (the scenario column repeated in each) is at most width columns wide,
// as tablewriter draws it: a border, then each column's widest text plus
// one space either side and a border. A column too wide for any panel
// gets one of its own.
func (v *gateView) panels(clean func(string) string, width int) [][]int {
	h := v.header(clean)
	widths := make([]int, len(h))
	for k, s := range h {
		widths[k] = twwidth.Width(s)
	}
	grow := func(k int, s string) {
		widths[k] = max(widths[k], twwidth.Width(s))
	}
	grow(0, stateRow)
	for j, s := range v.states {
		grow(j+1, s)
	}
	for i, name := range v.g.Matrix.Scenarios {
		grow(0, clean(name))
		for j, s := range v.cells[i] {
			grow(j+1, s)
		}
	}
	var out [][]int
	var cur []int
	used := 1 + widths[0] + 3
	for j := range v.g.Columns {
		if len(cur) > 0 && used+widths[j+1]+3 > width {
			out = append(out, cur)
			cur, used = nil, 1+widths[0]+3
		}
		cur = append(cur, j)
		used += widths[j+1] + 3
	}
	if len(cur) > 0 || len(out) == 0 {
		out = append(out, cur) // no column at all: the scenarios alone
	}
	return out
}

// role is how a column's legend line names its kind.
func role(c GateColumn) string {
	switch {
	case c.Kind == KindRow && c.Informational:
		return "informational row"
	case c.Kind == KindRow:
		return "required row"
	case c.Kind == KindTuple:
		return "tuple"
	case len(c.Refused) > 0:
		return "refused report"
	}
	return "report of no row"
}

// GateTable renders the gate for a terminal: the GATE line, a legend (each
// column's kind, state and reports with their tuples and postures as this
// build reads them, PostureReading.Brief), the matrix with
// each column's state in its first row (in panels of consecutive columns,
// each led by the scenario column, when one table would be wider than
// TableWidth), and numbered footnotes for every reason and violation, all
// within TableWidth columns. With ascii the output is plain ASCII (ASCII
// borders, no "·", other characters escaped as \uXXXX); control
// characters from reports are always escaped.
func GateTable(w io.Writer, g *GateResult, ascii bool) error {
	clean := func(s string) string { return escapeText(s, ascii) }
	label := func(t Tuple) string {
		l := t.Label()
		if ascii {
			l = strings.ReplaceAll(l, " · ", ", ")
		}
		return clean(l)
	}
	v := viewOf(g, clean)
	var buf bytes.Buffer
	buf.WriteString(g.Line() + "\n\n")
	for j, c := range g.Columns {
		head := fmt.Sprintf("%s (%s): %s", clean(c.Name), role(c), v.states[j])
		if c.State == StatePending {
			head += ", no report"
		}
		writeWrapped(&buf, head, "", "    ")
		for _, r := range c.Reports {
			writeWrapped(&buf, fmt.Sprintf("report %s, run verdict %s", clean(r.Dir), clean(r.RunVerdict.String())), "  ", "      ")
			writeWrapped(&buf, label(r.Tuple), "    ", "      ")
			if r.Posture != nil {
				for _, l := range r.Posture.Brief() {
					writeWrapped(&buf, clean(l), "    ", "      ")
				}
			}
		}
		if c.Kind == KindRow {
			for _, r := range c.Refused {
				writeWrapped(&buf, "refused report "+clean(r.Dir), "  ", "      ")
			}
		}
	}
	buf.WriteString("\n")
	var opts []tablewriter.Option
	if ascii {
		opts = append(opts, tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleASCII)})))
	}
	// Too many columns for one table within TableWidth: consecutive
	// panels of columns, each with the scenario column, as wide data
	// frames are printed.
	for k, cols := range v.panels(clean, TableWidth) {
		if k > 0 {
			buf.WriteString("\n")
		}
		if err := v.render(&buf, clean, cols, opts...); err != nil {
			return err
		}
	}
	if len(v.notes.list) > 0 {
		buf.WriteString("\n")
	}
	for i, n := range v.notes.list {
		tag := fmt.Sprintf("[%d] ", i+1)
		writeWrapped(&buf, tag+n.head, "", strings.Repeat(" ", len(tag)))
		for _, it := range n.items {
			writeWrapped(&buf, it, strings.Repeat(" ", len(tag))+"- ", strings.Repeat(" ", len(tag)+2))
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// GateMarkdown renders the gate as Markdown, always ASCII-safe: the GATE
// line, a legend listing every column's kind, state and reports with
// their full tuples and postures (PostureReading.Brief), the matrix (each
// column's state first) and the numbered notes. Text from reports is
// escaped (non-ASCII and control characters as \uXXXX, "&", "<", ">" as
// entities, "|" in cells).
func GateMarkdown(g *GateResult) ([]byte, error) {
	v := viewOf(g, mdText)
	var buf bytes.Buffer
	buf.WriteString(g.Line() + "\n\n")
	buf.WriteString("# qualbox qualification matrix\n\n")
	for j, c := range g.Columns {
		head := fmt.Sprintf("- **%s** (%s): %s", mdText(c.Name), role(c), v.states[j])
		if c.State == StatePending {
			head += ", no report"
		}
		writeWrapped(&buf, head, "", "  ")
		for _, r := range c.Reports {
			text := fmt.Sprintf("report `%s` (run verdict %s): %s", mdCode(r.Dir), mdText(r.RunVerdict.String()), mdText(strings.Join(r.Tuple.Lines(), "; ")))
			writeWrapped(&buf, text, "  - ", "    ")
			if r.Posture != nil {
				writeWrapped(&buf, mdText(strings.Join(r.Posture.Brief(), "; ")), "    - ", "      ")
			}
		}
		if c.Kind == KindRow {
			for _, r := range c.Refused {
				writeWrapped(&buf, fmt.Sprintf("refused report `%s`", mdCode(r.Dir)), "  - ", "    ")
			}
		}
	}
	buf.WriteString("\n")
	cell := func(s string) string { return strings.ReplaceAll(mdText(s), "|", `\|`) }
	if err := v.render(&buf, cell, v.allColumns(), tablewriter.WithRenderer(renderer.NewMarkdown())); err != nil {
		return nil, err
	}
	if len(v.notes.list) > 0 {
		buf.WriteString("\nNotes:\n\n")
	}
	for i, n := range v.notes.list {
		writeWrapped(&buf, fmt.Sprintf("- [%d] %s", i+1, n.head), "", "  ")
		for _, it := range n.items {
			writeWrapped(&buf, it, "  - ", "    ")
		}
	}
	return []byte(strings.TrimRight(buf.String(), "\n") + "\n"), nil
}

// GateJSON renders the gate as one indented JSON object whose first line
// carries the GATE line: {"gate": "GATE: ...", "verdict": "passed" or
// "failed", then GateResult's fields (passed, counts, columns with their
// states, reports, refusals and violations, every violation, and the
// matrix).
func GateJSON(g *GateResult) ([]byte, error) {
	verdict := "failed"
	if g.Passed {
		verdict = "passed"
	}
	data, err := MarshalJSON(struct {
		Gate    string `json:"gate"`
		Verdict string `json:"verdict"`
		*GateResult
	}{g.Line(), verdict, g})
	if err != nil {
		return nil, err
	}
	// Indented JSON starts "{\n  \"gate\"": join the first two lines so
	// that the first line says the verdict, as the other renderings do.
	return append([]byte("{"), bytes.TrimPrefix(data, []byte("{\n  "))...), nil
}

// writeWrapped writes text wrapped at TableWidth columns on spaces: the
// first line after first, the others after cont. A word longer than a
// line stays whole.
func writeWrapped(buf *bytes.Buffer, text, first, cont string) {
	line := first
	empty := true
	for _, word := range strings.Fields(text) {
		if !empty && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > TableWidth {
			buf.WriteString(line + "\n")
			line, empty = cont, true
		}
		if !empty {
			line += " "
		}
		line += word
		empty = false
	}
	buf.WriteString(line + "\n")
}

// escapeText escapes control characters, invalid UTF-8 and (with ascii)
// every non-ASCII character as \uXXXX, so that a report cannot move the
// terminal's cursor or smuggle characters into ASCII output.
func escapeText(s string, ascii bool) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\ufffd"):
			b.WriteString(`\ufffd`)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && (ascii || !unicode.IsPrint(r))):
			if r > 0xffff {
				fmt.Fprintf(&b, `\U%08x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// mdText is text from a report made safe for Markdown: ASCII, with "&",
// "<" and ">" as entities (a reason such as "<major>.<minor>" would
// otherwise be taken for HTML).
func mdText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(escapeText(s, true))
}

// mdCode is a directory for a Markdown code span: ASCII, no backquote.
func mdCode(s string) string {
	return strings.ReplaceAll(escapeText(s, true), "`", "'")
}
