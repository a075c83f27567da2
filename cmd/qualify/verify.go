package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/qualbox/qualbox/internal/cli"
	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// verifyCommand is qualify verify's help and flag set; its options are
// verifyOptions.
func verifyCommand() *cli.Command {
	c := cli.New("qualify verify", "--policy FILE [--key FILE...] | --key FILE [--key FILE...] [--json] DIR...",
		"Verify signed reports against a gate policy's trust entries, or against named public keys, naming each failing file.")
	c.Details = `For each report DIR: the DSSE signature by one of the keys, every in-toto
subject's SHA-256, that no file was added, and the evidence schemas.
With --policy FILE the keys are the policy's trust entries only, and the
report must also match one of the policy's rows, every row it matches
must be bound to the key that signed it, and its signed start and end
must lie in that key's window (docs/qualification.md#gate); --key then
only narrows the policy's entries, and a key the policy does not trust is
a usage error. Without --policy, --key names the keys to check integrity
against (no row binding, no window). A verified report prints one OK
line on stdout, then its runtime posture as this qualify reads it from
the report's Engine facts with its own advisory list, each advisory the
report's recorded posture leaves out marked "not recorded by the report"
(docs/qualification.md#posture); a failing one prints FAILED and its
problems on stderr. With --json every report, passing or not, is one
JSON object per line on stdout, a verified one with that posture.`
	return c
}

// verifyOptions are the flags of qualify verify; its positional arguments
// are the report directories.
type verifyOptions struct {
	cli.Positional
	keyPaths   listFlag
	policyPath string
	asJSON     bool
}

// AddFlags declares o's flags on fs.
func (o *verifyOptions) AddFlags(fs *flag.FlagSet) {
	fs.Var(&o.keyPaths, "key", "ed25519 public key `FILE` (PEM PKIX); repeatable; with --policy it must be one the policy trusts")
	fs.StringVar(&o.policyPath, "policy", "", "gate policy `FILE` whose trust entries and rows decide (example reports/gate-policy.yaml)")
	fs.BoolVar(&o.asJSON, "json", false, "print one JSON object per report directory on stdout")
}

// Validate requires --policy or --key, and at least one report directory.
func (o *verifyOptions) Validate() error {
	if (len(o.keyPaths) == 0 && o.policyPath == "") || len(o.Args) == 0 {
		return cli.UsageError("--policy FILE or --key FILE, and at least one report DIR, are required")
	}
	return nil
}

// Exec verifies every report directory, printing each outcome, and
// returns exitcode.Failed when any failed. A policy or key that cannot be
// loaded is an *cli.ExitError with exitcode.Usage.
func (o *verifyOptions) Exec(ctx context.Context, stdout, stderr io.Writer) (int, error) {
	verify, err := o.verifier(ctx)
	if err != nil {
		return 0, err
	}
	code := exitcode.OK
	for _, dir := range o.Args {
		s, signer, err := verify(dir)
		if err != nil {
			code = exitcode.Failed
		}
		o.print(stdout, stderr, outcomeOf(dir, s, err), s, signer)
	}
	return code, nil
}

// verifyFunc verifies one report directory and returns it with a
// description of its signer ("" without --policy).
type verifyFunc func(dir string) (s *evidence.Signed, signer string, err error)

// verifier returns how a directory is verified: by the trust entries of
// --policy (narrowed by --key), else against the --key files.
func (o *verifyOptions) verifier(ctx context.Context) (verifyFunc, error) {
	if o.policyPath != "" {
		p, trust, err := trustOf(o.policyPath, o.keyPaths)
		if err != nil {
			return nil, cli.Exitf(exitcode.Usage, "qualify verify: %v", err)
		}
		return func(dir string) (*evidence.Signed, string, error) {
			s, e, err := evidence.VerifyTrusted(ctx, dir, trust, p.Requirement.Rows)
			if err != nil {
				return nil, "", err
			}
			return s, fmt.Sprintf(", signed by %s for rows %s", e, strings.Join(e.Rows, ", ")), nil
		}, nil
	}
	keys, err := loadKeys(o.keyPaths)
	if err != nil {
		return nil, failed(exitcode.Usage, err)
	}
	return func(dir string) (*evidence.Signed, string, error) {
		s, err := verifyAny(ctx, dir, keys)
		return s, "", err
	}, nil
}

// verifyLine is one directory's outcome for --json.
type verifyLine struct {
	Dir      string `json:"dir"`
	OK       bool   `json:"ok"`
	Subjects int    `json:"subjects,omitempty"`
	Verdict  string `json:"verdict,omitempty"`
	// Posture is the verified report's posture as this build reads it
	// (evidence.ReadPosture), not its record alone.
	Posture  *evidence.PostureReading `json:"posture,omitempty"`
	Problems []attest.Problem         `json:"problems,omitempty"`
	Error    string                   `json:"error,omitempty"`
}

// outcomeOf is the verifyLine of dir verified as s, or failing with err:
// the problems of an *attest.VerifyError or an *evidence.TrustError (the
// latter as problems of the envelope).
func outcomeOf(dir string, s *evidence.Signed, err error) verifyLine {
	line := verifyLine{Dir: dir, OK: err == nil}
	if err == nil {
		line.Subjects, line.Verdict, line.Posture = s.Subjects, s.Run.Verdict.String(), evidence.ReadPosture(s.Run)
		return line
	}
	line.Error = err.Error()
	var ve *attest.VerifyError
	var te *evidence.TrustError
	switch {
	case errors.As(err, &ve):
		line.Problems = ve.Problems
	case errors.As(err, &te):
		for _, p := range te.Problems {
			line.Problems = append(line.Problems, attest.Problem{File: attest.EnvelopeFile, Problem: p})
		}
	}
	return line
}

// print prints one directory's outcome: with --json the line on stdout;
// else OK and what was verified on stdout, with the posture's lines
// indented below it, or FAILED and its problems (or error) on stderr.
func (o *verifyOptions) print(stdout, stderr io.Writer, line verifyLine, s *evidence.Signed, signer string) {
	switch {
	case o.asJSON:
		data, _ := json.Marshal(line)
		fmt.Fprintf(stdout, "%s\n", data)
	case line.OK:
		fmt.Fprintf(stdout, "%s: OK: %d subjects verified, signed run verdict %s, tuple %s, harness %s%s\n", line.Dir, s.Subjects, s.Run.Verdict, s.Predicate.Tuple.Label(), s.Predicate.Harness, signer)
		if line.Posture != nil {
			for _, l := range line.Posture.Lines() {
				fmt.Fprintf(stdout, "  %s\n", l)
			}
		}
	case line.Problems != nil:
		fmt.Fprintf(stderr, "%s: FAILED\n", line.Dir)
		for _, p := range line.Problems {
			fmt.Fprintf(stderr, "  %s: %s\n", p.File, p.Problem)
		}
	default:
		fmt.Fprintf(stderr, "%s: FAILED: %s\n", line.Dir, line.Error)
	}
}
