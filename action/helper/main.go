package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
)

// maxEvidenceBytes bounds the evidence.json the verdict line reads
// (qualify verify has already applied its own limits).
const maxEvidenceBytes = 64 << 20

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) >= 3 && len(args) <= 4 && args[0] == "pubkey":
		given := ""
		if len(args) == 4 {
			given = args[3]
		}
		if err := pubkey(args[1], args[2], given); err != nil {
			fmt.Fprintf(stderr, "qualbox-action: %v\n", err)
			return 2
		}
		return 0
	case len(args) == 4 && args[0] == "verdict":
		word, line := verdictLine(args[1], args[2], args[3])
		fmt.Fprintf(stdout, "%s\n%s\n", word, line)
		return 0
	}
	fmt.Fprintln(stderr, "usage: helper pubkey SIGNING_KEY OUT [PUBLIC_KEY] | helper verdict DIR PROFILE VERIFY_STATUS")
	return 2
}

// pubkey writes the public half of the key at priv to out, or the file
// given after checking it is that public half.
func pubkey(priv, out, given string) error {
	key, err := attest.LoadPrivateKey(priv)
	if err != nil {
		return fmt.Errorf("signing-key: %w", err)
	}
	pub := key.Public().(ed25519.PublicKey)
	var data []byte
	if given == "" {
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			return err
		}
		data = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	} else {
		want, err := attest.LoadPublicKey(given)
		if err != nil {
			return fmt.Errorf("public-key: %w", err)
		}
		if !bytes.Equal(want, pub) {
			return fmt.Errorf("public-key (key ID %s) is not the public half of signing-key (key ID %s)", attest.KeyID(want), attest.KeyID(pub))
		}
		if data, err = os.ReadFile(given); err != nil {
			return fmt.Errorf("public-key: %w", err)
		}
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}

// kinds is the order the verdict line counts scenario verdicts in.
var kinds = []evidence.Kind{evidence.Passed, evidence.Failed, evidence.Flaky, evidence.Skipped, evidence.NotApplicable}

// verdictLine returns the verdict word for the action's verdict output
// (the run's verdict kind, "unverified" or "no-report") and the summary's
// first line for the report in dir; label names the run when the report
// cannot say (the manifest path).
func verdictLine(dir, label, verifyStatus string) (string, string) {
	data, err := readBounded(filepath.Join(dir, "evidence.json"))
	if err != nil {
		return "no-report", fmt.Sprintf("qualbox: NO REPORT %s (%v)", label, err)
	}
	if verifyStatus != "0" {
		return "unverified", fmt.Sprintf("qualbox: UNVERIFIED %s (qualify verify exited %s; the report's own verdict is not trusted)", label, verifyStatus)
	}
	var r evidence.Run
	if err := json.Unmarshal(data, &r); err != nil {
		return "unverified", fmt.Sprintf("qualbox: UNVERIFIED %s (evidence.json: %v)", label, err)
	}
	counts := map[evidence.Kind]int{}
	for _, s := range r.Scenarios {
		counts[s.Verdict.Kind]++
	}
	var parts []string
	for _, k := range kinds {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	line := fmt.Sprintf("qualbox: %s %s (%s)", strings.ToUpper(string(r.Verdict.Kind)), r.Profile, strings.Join(parts, ", "))
	if r.Interrupted {
		line += ", interrupted"
	}
	if r.Selection != nil {
		// A partial run (qualify run --only/--skip) passes only what it
		// ran; a gate refuses it for a required row.
		line += ", " + r.Selection.String()
	}
	return string(r.Verdict.Kind), line
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxEvidenceBytes+1))
	if err == nil && len(data) > maxEvidenceBytes {
		err = fmt.Errorf("%s: larger than %d bytes", path, maxEvidenceBytes)
	}
	return data, err
}
