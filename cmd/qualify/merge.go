package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/qualbox/qualbox/internal/cli"
	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/manifest"
)

// mergeCommand is qualify merge's help and flag set; its options are
// mergeOptions.
func mergeCommand() *cli.Command {
	c := cli.New("qualify merge", "--policy FILE [--key FILE...] | --key FILE [--key FILE...] [--require LIST --row SPEC... --manifest FILE...] [--markdown|--json|--junit|--test2json] [--ascii] [--html FILE] [--vsa FILE --vsa-key FILE [--vsa-verifier-id URI] [--vsa-resource-uri URI] [--vsa-policy-uri URI]] DIR...",
		"Verify several signed reports, print the gate's verdict and one matrix of scenarios by row, and gate a release on them.")
	c.Details = `With --policy FILE each DIR is admitted by one of the policy's trust
entries when its key's signature verifies the report, every policy row
the report's tuple matches is bound to that key, and its signed start and
end lie in the key's window. --key with --policy only narrows those
entries (a key the policy does not trust is a usage error naming its key
ID); it never adds one. Without --policy each DIR must verify against one
of the --key files. A DIR that does not verify or is not admitted is
refused: its row (or a column named by the DIR) shows refused, its
problems are a footnote, and the gate fails; the merge goes on.
The output (a table, or --markdown, or --json) goes to stdout and starts
with the verdict line, e.g. "GATE: FAILED (2 passed, 1 failed, 2 pending,
0 refused rows)"; its columns are the policy's rows in the policy's order
(without a requirement, the tuples ordered by label, each named by its
profile, else PROFILE@ENGINE, else its report's directory), each with
its state (passed, failed, pending, refused) and cells, and reasons are
numbered footnotes. The table is plain ASCII unless stdout is a UTF-8
terminal, or always with --ascii; Markdown is always ASCII-safe.
--junit and --test2json are for test reporters: JUnit XML with one
testsuite per row named (and classed) qualbox.ROW, its first case the
row's state, or the JSON events of go test (test2json) with one package
qualbox/ROW per row; neither starts with the verdict line. Every
violation goes to stderr, one line each, and the exit status is 1 unless
the gate passed (docs/qualification.md#gate):
- always: a refused report, a report whose signed run verdict is not
  passed, or a scenario that failed in any report;
- with a requirement (--policy FILE, or --require with --row and
  --manifest): a report whose harness identity is not exactly a pinned
  one (module, catalogue version and sha256, and with the policy's
  cleanRevision a clean VCS revision; reports made before reports carried
  one are refused), a report of no row or with a manifest its row does
  not pin, a required row without such a report, or a report in which a
  scenario its row requires, and the pinned manifest it ran lists, was
  not run or did not pass.
A policy row with required: false is informational: without a report it
is pending, and its violations are printed as "informational, not
gating" without failing the gate (a refused report fails it always).
A row SPEC is NAME=PROFILE[@ENGINE], ENGINE a prefix of the Engine version,
e.g. lane-b=linux-x64-cgroupv1@2.0.0-; --row rows are required;
--manifest pins and the --require scenarios apply to every row (each
scenario listed by a --manifest, else a usage error), and the
harness pin is this build's own module and scenario catalogue (version
and sha256).
With --policy, --vsa FILE also writes the gate as a SLSA Verification
Summary (https://slsa.dev/verification_summary/v1, PASSED or FAILED) in a
DSSE envelope signed with --vsa-key, naming the policy by digest, each
admitted report's envelopes and what was qualified
(docs/qualification.md#standard-attestations).`
	return c
}

// mergeOptions are the flags of qualify merge; its positional arguments
// are the report directories.
type mergeOptions struct {
	cli.Positional
	keyPaths, require, manifests, rows   listFlag
	policyPath                           string
	policySHA256                         string // of the policy bytes verifier parsed
	htmlOut                              string
	markdown, asJSON, ascii, junit, test bool
	vsa                                  vsaFlags
}

// AddFlags declares o's flags on fs.
func (o *mergeOptions) AddFlags(fs *flag.FlagSet) {
	fs.Var(&o.keyPaths, "key", "ed25519 public key `FILE` (PEM PKIX); repeatable, one per signing host or lane; with --policy it must be one the policy trusts")
	fs.StringVar(&o.policyPath, "policy", "", "gate policy `FILE` (YAML: trust, harness, rows; example reports/gate-policy.yaml)")
	fs.Var(&o.require, "require", "scenario names (`LIST`, comma-separated or repeated) that must pass in every report; needs --row and --manifest")
	fs.Var(&o.rows, "row", "required row `SPEC` NAME=PROFILE[@ENGINE]; repeatable")
	fs.Var(&o.manifests, "manifest", "manifest `FILE` the reports must have run (its SHA-256 is pinned); repeatable, e.g. one per lane")
	fs.BoolVar(&o.markdown, "markdown", false, "print the gate and matrix as Markdown (what make gate prints)")
	fs.BoolVar(&o.asJSON, "json", false, "print the gate (verdict, counts, row states, violations, matrix) as JSON")
	fs.BoolVar(&o.ascii, "ascii", false, "plain ASCII table (the default when stdout is not a UTF-8 terminal)")
	fs.BoolVar(&o.junit, "junit", false, "print the gate as JUnit XML for a test reporter: one testsuite per row, named and classed qualbox.ROW")
	fs.BoolVar(&o.test, "test2json", false, "print the gate as the JSON events of go test (test2json), one package qualbox/ROW per row")
	fs.StringVar(&o.htmlOut, "html", "", "also write the gate and every admitted report (checks, series plots) as one self-contained HTML page to `FILE` (refusing to overwrite it)")
	o.vsa.register(fs)
}

// cliRequirement reports whether the gate's requirement comes from
// --require, --row and --manifest.
func (o *mergeOptions) cliRequirement() bool {
	return len(o.require) > 0 || len(o.rows) > 0 || len(o.manifests) > 0
}

// Validate checks the flags and directories by themselves: a
// cli.UsageError naming what is wrong.
func (o *mergeOptions) Validate() error {
	if p := o.vsa.problem(o.policyPath); p != "" {
		return cli.UsageError(p)
	}
	switch {
	case len(o.Args) == 0:
		return cli.UsageError("at least one report DIR is required")
	case countTrue(o.markdown, o.asJSON, o.junit, o.test) > 1:
		return cli.UsageError("--markdown, --json, --junit and --test2json exclude each other")
	case o.policyPath == "" && len(o.keyPaths) == 0:
		return cli.UsageError("--key FILE or --policy FILE is required")
	case o.policyPath != "" && o.cliRequirement():
		return cli.UsageError("--policy states the trust, rows, manifests, scenarios and harness; do not combine it with --require, --row or --manifest")
	case o.cliRequirement() && (len(o.require) == 0 || len(o.rows) == 0 || len(o.manifests) == 0):
		return cli.UsageError("a gate needs --require LIST, at least one --row SPEC and at least one --manifest FILE (or --policy FILE): scenario names alone can be met by one lane or by a manifest that weakened them")
	}
	return nil
}

// verifier reads the policy, or the --key files and the --require, --row
// and --manifest gate, and returns the requirement (nil: none) and how a
// report directory is verified; a cli.UsageError or *cli.ExitError naming
// what is wrong.
func (o *mergeOptions) verifier(ctx context.Context) (*evidence.Requirement, func(dir string) (*evidence.Signed, error), error) {
	if o.policyPath != "" {
		p, trust, err := trustOf(o.policyPath, o.keyPaths)
		if err != nil {
			return nil, nil, cli.Exitf(exitcode.Usage, "qualify merge: %v", err)
		}
		o.policySHA256 = p.SHA256
		return &p.Requirement, func(dir string) (*evidence.Signed, error) {
			s, _, err := evidence.VerifyTrusted(ctx, dir, trust, p.Requirement.Rows)
			return s, err
		}, nil
	}
	var req *evidence.Requirement
	if o.cliRequirement() {
		var err error
		if req, err = cliGate(o.require, o.rows, o.manifests); err != nil {
			return nil, nil, cli.UsageError(err.Error())
		}
	}
	keys, err := loadKeys(o.keyPaths)
	if err != nil {
		return nil, nil, failed(exitcode.Usage, err)
	}
	return req, func(dir string) (*evidence.Signed, error) { return verifyAny(ctx, dir, keys) }, nil
}

// render renders the gate in the format the flags chose.
func (o *mergeOptions) render(g *evidence.GateResult, reports []*evidence.Signed, stdout io.Writer) ([]byte, error) {
	switch {
	case o.asJSON:
		return evidence.GateJSON(g)
	case o.markdown:
		return evidence.GateMarkdown(g)
	case o.junit:
		return evidence.GateJUnit(g, reports)
	case o.test:
		return evidence.GateTestEvents(g, reports)
	}
	var buf bytes.Buffer
	err := evidence.GateTable(&buf, g, o.ascii || !utf8Terminal(stdout))
	return buf.Bytes(), err
}

// Exec verifies every directory, judges the gate, prints it on stdout and
// its violations on stderr, and returns the exit status: exitcode.Failed
// unless the gate passed. An output it cannot render or write ends it
// with exitcode.Internal before the violations print.
func (o *mergeOptions) Exec(ctx context.Context, stdout, stderr io.Writer) (int, error) {
	req, verify, err := o.verifier(ctx)
	if err != nil {
		return 0, err
	}
	reports, refused := verifyAll(o.Args, verify)
	g := evidence.Judge(reports, refused, req)
	out, err := o.render(g, reports, stdout)
	if err != nil {
		return 0, failed(exitcode.Internal, err)
	}
	_, _ = stdout.Write(out)
	if err := o.writeFiles(ctx, g, reports); err != nil {
		return 0, err
	}
	printViolations(stderr, g.Violations)
	if !g.Passed {
		return exitcode.Failed, nil
	}
	return exitcode.OK, nil
}

// verifyAll verifies each of dirs. A report that does not verify or is
// not admitted is refused: shown in its row's column and failing the
// gate, without ending the merge.
func verifyAll(dirs []string, verify func(dir string) (*evidence.Signed, error)) ([]*evidence.Signed, []evidence.Refusal) {
	var reports []*evidence.Signed
	var refused []evidence.Refusal
	for _, dir := range dirs {
		s, err := verify(dir)
		if err != nil {
			refused = append(refused, evidence.RefusalOf(dir, err))
			continue
		}
		reports = append(reports, s)
	}
	return reports, refused
}

// writeFiles writes the files the flags ask for: --html, then --vsa. A
// failure is an *cli.ExitError with exitcode.Internal.
func (o *mergeOptions) writeFiles(ctx context.Context, g *evidence.GateResult, reports []*evidence.Signed) error {
	if o.htmlOut != "" {
		if err := writeHTML(o.htmlOut, g, reports); err != nil {
			return cli.Exitf(exitcode.Internal, "qualify merge: --html: %v", err)
		}
	}
	if o.vsa.out != "" {
		if err := o.vsa.write(ctx, o.policyPath, o.policySHA256, g, reports); err != nil {
			return cli.Exitf(exitcode.Internal, "qualify merge: %v", err)
		}
	}
	return nil
}

// printViolations prints each of the gate's violations on one line of w,
// saying which are informational.
func printViolations(w io.Writer, violations []evidence.GateViolation) {
	for _, v := range violations {
		if v.Blocking {
			fmt.Fprintf(w, "qualify merge: not passed: %s\n", v.Message)
		} else {
			fmt.Fprintf(w, "qualify merge: informational, not gating: %s\n", v.Message)
		}
	}
}

// countTrue counts the true values of bs.
func countTrue(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// utf8Terminal reports whether w is a terminal (a character device) whose
// locale, the first of LC_ALL, LC_CTYPE and LANG that is set, says UTF-8:
// only then does the gate table use box drawing and "·".
func utf8Terminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	for _, k := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if v := strings.ToLower(os.Getenv(k)); v != "" {
			return strings.Contains(v, "utf-8") || strings.Contains(v, "utf8")
		}
	}
	return false
}

// cliGate builds the requirement of --require, --row and --manifest: the
// harness pin is this build's own module and scenario catalogue.
func cliGate(require, rows, manifests []string) (*evidence.Requirement, error) {
	h := qualify.HarnessIdentity()
	req := &evidence.Requirement{Harness: evidence.HarnessRequirement{Module: h.Module,
		Catalogues: []evidence.Catalogue{{Version: h.CatalogueVersion, SHA256: h.CatalogueSHA256}}}}
	var pins []string
	var pinned []*manifest.Manifest
	for _, p := range manifests {
		m, err := manifest.Load(p, gateScenarios)
		if err != nil {
			return nil, fmt.Errorf("--manifest: %v", err)
		}
		pins, pinned = append(pins, m.SHA256), append(pinned, m)
	}
	known := profiles.Names()
	for _, spec := range rows {
		name, rest, ok := strings.Cut(spec, "=")
		profile, engine, _ := strings.Cut(rest, "@")
		switch {
		case !ok || name == "" || profile == "":
			return nil, fmt.Errorf("--row %q: want NAME=PROFILE[@ENGINE]", spec)
		case !slices.Contains(known, profile):
			return nil, fmt.Errorf("--row %q: profile %q: want one of %s", spec, profile, strings.Join(known, ", "))
		case slices.ContainsFunc(req.Rows, func(r evidence.Row) bool { return r.Name == name }):
			return nil, fmt.Errorf("--row %q: row %s given twice", spec, name)
		}
		row := evidence.Row{Name: name, Profile: profile, Engine: engine, Manifests: pins, Pinned: pinned, Scenarios: require}
		if s := evidence.UnpinnedScenario(row); s != "" {
			return nil, fmt.Errorf("--require %s: no --manifest lists it, so no report would owe it", s)
		}
		req.Rows = append(req.Rows, row)
	}
	return req, nil
}

// writeHTML writes the gate's HTML page (evidence.GateHTML) to path,
// refusing to overwrite a file; path holds the whole page or nothing
// (writeNewFile).
func writeHTML(path string, g *evidence.GateResult, reports []*evidence.Signed) error {
	page, err := evidence.GateHTML(g, reports)
	if err != nil {
		return err
	}
	return writeNewFile(path, page, 0o644)
}
