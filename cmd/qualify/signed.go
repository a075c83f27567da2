package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/qualbox/qualbox/internal/cli"
	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// listFlag collects a repeated or comma-separated flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

func keygenCmd(args []string, stdout, stderr io.Writer) int {
	c := cli.New("qualify keygen", "--out DIR", "Generate an ed25519 key pair for signing reports and print the paths and key ID.")
	c.Details = `The private key is written with mode 0600 and never overwrites an
existing key; keep it out of the repository. The public key verifies the
reports (qualify verify --key, cosign verify-blob-attestation --key).`
	out := c.Flags.String("out", "", "`DIR` for qualbox-ed25519.key (0600) and qualbox-ed25519.pub")
	if code, done := c.Parse(args, stdout, stderr); done {
		return code
	}
	if *out == "" || c.Flags.NArg() > 0 {
		return c.UsageError(stderr, "--out DIR is required and no positional arguments are allowed")
	}
	for _, name := range []string{attest.PrivateKeyFile, attest.PublicKeyFile} {
		if p := filepath.Join(*out, name); exists(p) {
			fmt.Fprintf(stderr, "qualify keygen: %s exists: refusing to overwrite a key\n", p)
			return exitcode.Usage
		}
	}
	priv, pub, err := attest.GenerateKey(*out)
	if err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
		return exitcode.Internal
	}
	k, err := attest.LoadPublicKey(pub)
	if err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
		return exitcode.Internal
	}
	fmt.Fprintf(stdout, "private key: %s\npublic key:  %s\nkey id:      %s\n", priv, pub, attest.KeyID(k))
	return exitcode.OK
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func loadKeys(paths []string) ([]ed25519.PublicKey, error) {
	var keys []ed25519.PublicKey
	for _, p := range paths {
		k, err := attest.LoadPublicKey(p)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// verifyAny verifies dir against each key in turn and returns the first
// success, or the failure against the last key.
func verifyAny(ctx context.Context, dir string, keys []ed25519.PublicKey) (*evidence.Signed, error) {
	// The report is judged by the key that signed it: a key whose
	// signature does not verify only says "not mine", so its error is
	// reported only when no key's signature verifies.
	var first error
	for _, k := range keys {
		s, err := evidence.VerifyRun(ctx, dir, k)
		if err == nil {
			return s, nil
		}
		if !unsignedBy(err) {
			return nil, err
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// unsignedBy reports whether err says only that the key's signature does
// not verify the envelope.
func unsignedBy(err error) bool {
	var ve *attest.VerifyError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 {
		return false
	}
	p := ve.Problems[0]
	return p.File == attest.EnvelopeFile && strings.HasPrefix(p.Problem, "signature: no signature by key")
}

// verifyLine is one directory's outcome for --json.
type verifyLine struct {
	Dir      string           `json:"dir"`
	OK       bool             `json:"ok"`
	Subjects int              `json:"subjects,omitempty"`
	Verdict  string           `json:"verdict,omitempty"`
	Problems []attest.Problem `json:"problems,omitempty"`
	Error    string           `json:"error,omitempty"`
}

func verifyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := cli.New("qualify verify", "--key FILE [--key FILE...] [--json] DIR...",
		"Verify signed reports against trusted public keys, naming each failing file.")
	c.Details = `For each report DIR: the DSSE signature by one of the keys, every in-toto
subject's SHA-256, that no file was added, and the evidence schemas. A
verified report prints one OK line on stdout; a failing one prints FAILED
and its problems on stderr. With --json every report, passing or not, is
one JSON object per line on stdout.`
	fs := c.Flags
	var keyPaths listFlag
	fs.Var(&keyPaths, "key", "trusted ed25519 public key `FILE` (PEM PKIX); repeatable")
	asJSON := fs.Bool("json", false, "print one JSON object per report directory on stdout")
	if code, done := c.Parse(args, stdout, stderr); done {
		return code
	}
	if len(keyPaths) == 0 || fs.NArg() == 0 {
		return c.UsageError(stderr, "--key FILE and at least one report DIR are required")
	}
	keys, err := loadKeys(keyPaths)
	if err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
		return exitcode.Usage
	}
	code := exitcode.OK
	for _, dir := range fs.Args() {
		s, err := verifyAny(ctx, dir, keys)
		line := verifyLine{Dir: dir, OK: err == nil}
		if err != nil {
			code = exitcode.Failed
			line.Error = err.Error()
			var ve *attest.VerifyError
			if errors.As(err, &ve) {
				line.Problems = ve.Problems
			}
		} else {
			line.Subjects, line.Verdict = s.Subjects, s.Run.Verdict.String()
		}
		switch {
		case *asJSON:
			data, _ := json.Marshal(line)
			fmt.Fprintf(stdout, "%s\n", data)
		case err == nil:
			fmt.Fprintf(stdout, "%s: OK: %d subjects verified, signed run verdict %s, tuple %s, harness %s\n", dir, s.Subjects, s.Run.Verdict, s.Predicate.Tuple.Label(), s.Predicate.Harness)
		case line.Problems != nil:
			fmt.Fprintf(stderr, "%s: FAILED\n", dir)
			for _, p := range line.Problems {
				fmt.Fprintf(stderr, "  %s: %s\n", p.File, p.Problem)
			}
		default:
			fmt.Fprintf(stderr, "%s: FAILED: %v\n", dir, err)
		}
	}
	return code
}

func mergeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := cli.New("qualify merge", "--key FILE [--key FILE...] | --policy FILE [--require LIST --row SPEC... --manifest FILE... [--min-catalogue N]] [--markdown|--json] DIR...",
		"Verify several signed reports, print one matrix of scenarios by tuple, and gate a release on them.")
	c.Details = `Every DIR must verify against one of the keys. The matrix (a table, or
--markdown, or --json) goes to stdout; what keeps the gate shut goes to
stderr, one line each, and the exit status is 1 (docs/qualification.md#gate):
- always: a report whose signed run verdict is not passed, or a scenario
  that failed in any report;
- with a requirement (--policy FILE, or --require with --row and --manifest):
  a report without the required harness identity (reports made before
  reports carried one are refused), a report of no required row or with a
  manifest its row does not pin, a required row without such a report, or
  a required scenario that did not pass in every report.
A row SPEC is NAME=PROFILE[@ENGINE], ENGINE a prefix of the Engine version,
e.g. lane-b=linux-x64-cgroupv1@2.0.0-; --manifest pins apply to every row.
--min-catalogue defaults to this build's scenario catalogue version.`
	fs := c.Flags
	var keyPaths, require, manifests, rows listFlag
	fs.Var(&keyPaths, "key", "trusted ed25519 public key `FILE` (PEM PKIX); repeatable, one per signing host or lane")
	policyPath := fs.String("policy", "", "gate policy `FILE` (YAML: keys, harness, rows, scenarios; example reports/gate-policy.yaml)")
	fs.Var(&require, "require", "scenario names (`LIST`, comma-separated or repeated) that must pass in every report; needs --row and --manifest")
	fs.Var(&rows, "row", "required row `SPEC` NAME=PROFILE[@ENGINE]; repeatable")
	fs.Var(&manifests, "manifest", "manifest `FILE` the reports must have run (its SHA-256 is pinned); repeatable, e.g. one per lane")
	minCatalogue := fs.Int("min-catalogue", scenario.CatalogueVersion, "lowest scenario catalogue version `N` a required report may carry")
	markdown := fs.Bool("markdown", false, "print the matrix as Markdown")
	asJSON := fs.Bool("json", false, "print the matrix as JSON")
	if code, done := c.Parse(args, stdout, stderr); done {
		return code
	}
	cliRequirement := len(require) > 0 || len(rows) > 0 || len(manifests) > 0 || flagSet(fs, "min-catalogue")
	switch {
	case fs.NArg() == 0 || (*markdown && *asJSON):
		return c.UsageError(stderr, "at least one report DIR is required; --markdown and --json exclude each other")
	case *policyPath == "" && len(keyPaths) == 0:
		return c.UsageError(stderr, "--key FILE or --policy FILE is required")
	case *policyPath != "" && cliRequirement:
		return c.UsageError(stderr, "--policy states the rows, manifests, scenarios and harness minimum; do not combine it with --require, --row, --manifest or --min-catalogue")
	case cliRequirement && (len(require) == 0 || len(rows) == 0 || len(manifests) == 0):
		return c.UsageError(stderr, "a gate needs --require LIST, at least one --row SPEC and at least one --manifest FILE (or --policy FILE): scenario names alone can be met by one lane or by a manifest that weakened them")
	}
	var req *evidence.Requirement
	if *policyPath != "" {
		p, err := evidence.LoadPolicy(*policyPath, gateScenarios)
		if err != nil {
			fmt.Fprintf(stderr, "qualify merge: %v\n", err)
			return exitcode.Usage
		}
		keyPaths = append(p.KeyFiles, keyPaths...)
		req = &p.Requirement
	} else if cliRequirement {
		var err error
		if req, err = cliGate(require, rows, manifests, *minCatalogue); err != nil {
			return c.UsageError(stderr, err.Error())
		}
	}
	keys, err := loadKeys(keyPaths)
	if err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
		return exitcode.Usage
	}
	var reports []*evidence.Signed
	for _, dir := range fs.Args() {
		s, err := verifyAny(ctx, dir, keys)
		if err != nil {
			fmt.Fprintf(stderr, "qualify merge: %v\n", err)
			return exitcode.Failed
		}
		reports = append(reports, s)
	}
	m := evidence.Merge(reports)
	switch {
	case *asJSON:
		data, err := evidence.MarshalJSON(m)
		if err != nil {
			fmt.Fprintf(stderr, "qualify: %v\n", err)
			return exitcode.Internal
		}
		_, _ = stdout.Write(data)
	case *markdown:
		data, err := evidence.MatrixMarkdown(m)
		if err != nil {
			fmt.Fprintf(stderr, "qualify: %v\n", err)
			return exitcode.Internal
		}
		_, _ = stdout.Write(data)
	default:
		if err := evidence.MatrixTable(stdout, m); err != nil {
			fmt.Fprintf(stderr, "qualify: %v\n", err)
			return exitcode.Internal
		}
	}
	violations := evidence.Gate(m, reports, req)
	for _, l := range violations {
		fmt.Fprintf(stderr, "qualify merge: not passed: %s\n", l)
	}
	if len(violations) > 0 {
		return exitcode.Failed
	}
	return exitcode.OK
}

// gateScenarios validates the scenarios of the manifests a gate pins
// (--policy, --manifest): this build's catalogue. Tests substitute a
// registry of synthetic scenarios.
var gateScenarios manifest.Validator = scenario.Default()

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// cliGate builds the requirement of --require, --row, --manifest and
// --min-catalogue.
func cliGate(require, rows, manifests []string, minCatalogue int) (*evidence.Requirement, error) {
	if minCatalogue < 1 {
		return nil, fmt.Errorf("--min-catalogue %d: want >= 1", minCatalogue)
	}
	req := &evidence.Requirement{Scenarios: require, Harness: evidence.HarnessRequirement{MinimumCatalogueVersion: minCatalogue}}
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
		req.Rows = append(req.Rows, evidence.Row{Name: name, Profile: profile, Engine: engine, Manifests: pins, Pinned: pinned})
	}
	return req, nil
}
