package main

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
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
	fs := flag.NewFlagSet("qualify keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "`directory` for qualbox-ed25519.key (0600) and qualbox-ed25519.pub")
	if err := fs.Parse(args); err != nil || *out == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "qualify keygen: --out DIR is required")
		return exitUsage
	}
	priv, pub, err := attest.GenerateKey(*out)
	if err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
		return exitFailed
	}
	k, err := attest.LoadPublicKey(pub)
	if err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "private key: %s\npublic key:  %s\nkey id:      %s\n", priv, pub, attest.KeyID(k))
	return exitOK
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
	fs := flag.NewFlagSet("qualify verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var keyPaths listFlag
	fs.Var(&keyPaths, "key", "trusted ed25519 public key `file` (PEM PKIX); repeatable")
	asJSON := fs.Bool("json", false, "print one JSON object per directory on stdout")
	if err := fs.Parse(args); err != nil || len(keyPaths) == 0 || fs.NArg() == 0 {
		fmt.Fprintln(stderr, "qualify verify: --key PUB and at least one report DIR are required")
		return exitUsage
	}
	keys, err := loadKeys(keyPaths)
	if err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
		return exitUsage
	}
	code := exitOK
	for _, dir := range fs.Args() {
		s, err := verifyAny(ctx, dir, keys)
		line := verifyLine{Dir: dir, OK: err == nil}
		if err != nil {
			code = exitFailed
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
			fmt.Fprintf(stdout, "%s: OK: %d subjects verified, signed run verdict %s, tuple %s\n", dir, s.Subjects, s.Run.Verdict, s.Predicate.Tuple.Label())
		case line.Problems != nil:
			fmt.Fprintf(stdout, "%s: FAILED\n", dir)
			for _, p := range line.Problems {
				fmt.Fprintf(stdout, "  %s: %s\n", p.File, p.Problem)
			}
		default:
			fmt.Fprintf(stdout, "%s: FAILED: %v\n", dir, err)
		}
	}
	return code
}

func mergeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("qualify merge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var keyPaths, require, manifests listFlag
	fs.Var(&keyPaths, "key", "trusted ed25519 public key `file` (PEM PKIX); repeatable, one per signing host or lane")
	fs.Var(&require, "require", "`scenarios` (comma-separated or repeated) that must pass under every tuple for exit 0")
	fs.Var(&manifests, "manifest", "manifest `file` the reports must have run (its SHA-256 is pinned); repeatable, e.g. one per lane")
	markdown := fs.Bool("markdown", false, "print the matrix as Markdown")
	asJSON := fs.Bool("json", false, "print the matrix as JSON")
	if err := fs.Parse(args); err != nil || len(keyPaths) == 0 || fs.NArg() == 0 || (*markdown && *asJSON) {
		fmt.Fprintln(stderr, "qualify merge: --key PUB and at least one report DIR are required; --markdown and --json exclude each other")
		return exitUsage
	}
	keys, err := loadKeys(keyPaths)
	if err != nil {
		fmt.Fprintf(stderr, "qualify: %v\n", err)
		return exitUsage
	}
	var reports []*evidence.Signed
	for _, dir := range fs.Args() {
		s, err := verifyAny(ctx, dir, keys)
		if err != nil {
			fmt.Fprintf(stderr, "qualify merge: %v\n", err)
			return exitFailed
		}
		reports = append(reports, s)
	}
	m := evidence.Merge(reports)
	switch {
	case *asJSON:
		data, err := evidence.MarshalJSON(m)
		if err != nil {
			fmt.Fprintf(stderr, "qualify: %v\n", err)
			return exitFailed
		}
		_, _ = stdout.Write(data)
	case *markdown:
		data, err := evidence.MatrixMarkdown(m)
		if err != nil {
			fmt.Fprintf(stderr, "qualify: %v\n", err)
			return exitFailed
		}
		_, _ = stdout.Write(data)
	default:
		if err := evidence.MatrixTable(stdout, m); err != nil {
			fmt.Fprintf(stderr, "qualify: %v\n", err)
			return exitFailed
		}
	}
	var pins []string
	for _, p := range manifests {
		data, err := os.ReadFile(p)
		if err != nil {
			fmt.Fprintf(stderr, "qualify merge: --manifest: %v\n", err)
			return exitUsage
		}
		sum := sha256.Sum256(data)
		pins = append(pins, hex.EncodeToString(sum[:]))
	}
	failed := false
	for _, l := range m.PinManifests(pins) {
		fmt.Fprintf(stderr, "qualify merge: %s\n", l)
		failed = true
	}
	for _, l := range m.Gate(require) {
		fmt.Fprintf(stderr, "qualify merge: not passed: %s\n", l)
		failed = true
	}
	if failed {
		return exitFailed
	}
	return exitOK
}
