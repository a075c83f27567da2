package evidence

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/qualbox/qualbox/qualify/attest"
)

// TrustEntry is one public key a gate policy trusts, and for what
// (docs/qualification.md#gate): a report verified by Key is accepted only
// when every row of the policy its signed tuple matches is one of Rows,
// and its signed start and end times both fall in [NotBefore, NotAfter].
type TrustEntry struct {
	// KeyFile is the PEM PKIX ed25519 public key file the entry names.
	KeyFile string
	Key     ed25519.PublicKey
	// KeyID is attest.KeyID(Key), the name of the key in every message.
	KeyID string
	// Rows are names of the policy's rows the key may sign reports for.
	Rows []string
	// NotBefore and NotAfter bound the signed run times, inclusive.
	NotBefore, NotAfter time.Time
}

// String is e.g. "key 2b1f... (keys/lane.pub)".
func (e *TrustEntry) String() string { return fmt.Sprintf("key %s (%s)", e.KeyID, e.KeyFile) }

// TrustError is a report whose signature verified against no trust entry
// that admits it: Problems say, for each trusted key that signed it, why
// the key may not sign it (the row, the window), or that no trusted key
// signed it at all. They concern attest.EnvelopeFile, the signature.
type TrustError struct {
	Dir      string
	Problems []string
}

func (e *TrustError) Error() string {
	return fmt.Sprintf("%s: refused by the policy's trust: %s", e.Dir, strings.Join(e.Problems, "; "))
}

// VerifyTrusted verifies the report in dir (VerifyRun) against every
// trust entry and returns it with the first entry that admits it: its
// key's signature verifies, its signed tuple matches exactly one row of
// rows and that row is bound to the key, its run recorded an Engine
// (EnginelessProblem), and its signed start and end lie in the key's
// window. A report that fails verification against the key that signed it
// returns that *attest.VerifyError; one that no entry admits a *TrustError
// naming each signing key's ID and what it may not sign (a report that
// matches no row of rows, or several, is refused too, so a policy's trust
// never covers a tuple outside its rows and one run never stands for two).
func VerifyTrusted(ctx context.Context, dir string, trust []TrustEntry, rows []Row) (*Signed, *TrustEntry, error) {
	var problems []string
	for i := range trust {
		e := &trust[i]
		s, err := VerifyRun(ctx, dir, e.Key)
		if NotSignedBy(err) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		why := e.admits(s, rows)
		if len(why) == 0 {
			return s, e, nil
		}
		problems = append(problems, why...)
	}
	if problems == nil {
		ids := make([]string, len(trust))
		for i := range trust {
			ids[i] = trust[i].KeyID
		}
		problems = []string{fmt.Sprintf("no signature by a key the policy trusts (trusted key IDs: %s)", strings.Join(ids, ", "))}
	}
	return nil, nil, &TrustError{Dir: dir, Problems: problems}
}

// admits returns why e may not sign s, nil when it may.
func (e *TrustEntry) admits(s *Signed, rows []Row) []string {
	var out []string
	start, end := s.Predicate.Start, s.Predicate.End
	if start.Before(e.NotBefore) || end.After(e.NotAfter) || end.Before(start) {
		out = append(out, fmt.Sprintf("signed by %s, trusted from %s to %s, but its signed run time %s to %s falls outside that window",
			e, e.NotBefore.Format(time.RFC3339), e.NotAfter.Format(time.RFC3339), start.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano)))
	}
	if why := EnginelessProblem(s); why != "" {
		// Checked before the rows: a row without an engine prefix would
		// match the blank tuple, and a hermetic run qualifies no host.
		return append(out, fmt.Sprintf("signed by %s, but %s", e, why))
	}
	var matched []string
	for _, r := range rows {
		if !r.Matches(s.Predicate.Tuple) {
			continue
		}
		matched = append(matched, r.Name)
		if !slices.Contains(e.Rows, r.Name) {
			out = append(out, fmt.Sprintf("signed by %s, which is bound to rows %s, not to row %s that its tuple matches", e, strings.Join(e.Rows, ", "), r.Name))
		}
	}
	switch {
	case len(matched) == 0:
		out = append(out, fmt.Sprintf("signed by %s, but its tuple (%s) matches no row of the policy", e, s.Predicate.Tuple.Label()))
	case len(matched) > 1:
		out = append(out, fmt.Sprintf("signed by %s, but %s", e, multipleRowsProblem(s.Predicate.Tuple, matched)))
	}
	return out
}

// EnginelessProblem says why a verified report made without an Engine (no
// Engine facts and no admission: a hermetic run) cannot satisfy any row
// of a gate, or "" when it recorded an Engine (docs/qualification.md#gate).
// Such a report qualified no host: its blank tuple would otherwise match
// every row that sets no engine, operating system or cgroup prefix.
func EnginelessProblem(s *Signed) string {
	if !engineless(s.Run) {
		return ""
	}
	return fmt.Sprintf("its run recorded no Engine facts and no admission (a run without an Engine, tuple %s): it qualified no host, so it satisfies no row", s.Predicate.Tuple.Label())
}

// multipleRowsProblem is the refusal of a tuple that matches every row
// named in rows (two or more): one run qualifies one row, else a single
// report would meet two required rows (say, two lanes) at once.
func multipleRowsProblem(t Tuple, rows []string) string {
	return fmt.Sprintf("its tuple (%s) matches %d rows (%s): a report must match exactly one row, so one run cannot stand for several", t.Label(), len(rows), strings.Join(rows, ", "))
}

// NotSignedBy reports whether err (from VerifyRun) says only that the
// key's signature does not verify the envelope: "not mine", as opposed to
// a report its signer's key finds broken.
func NotSignedBy(err error) bool {
	var ve *attest.VerifyError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 {
		return false
	}
	p := ve.Problems[0]
	return p.File == attest.EnvelopeFile && strings.HasPrefix(p.Problem, "signature: no signature by key")
}
