package sandboxapi

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// validationIssues asserts err is a *ValidationError within the issue bound
// whose paths are no deeper than the nesting bound, and returns its issues.
func validationIssues(t *testing.T, err error, data []byte) []Issue {
	t.Helper()
	var verr *ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("rejection is %T, not *ValidationError: %v\ninput: %q", err, err, data)
	}
	if len(verr.Issues) == 0 || len(verr.Issues) > maxIssues+1 {
		t.Fatalf("%d issues, want 1..%d\ninput: %q", len(verr.Issues), maxIssues+1, data)
	}
	for _, is := range verr.Issues {
		if len(is.Path) > maxDepth+2 {
			t.Fatalf("issue path %v deeper than the nesting bound\ninput: %q", is.Path, data)
		}
		if is.Message == "" {
			t.Fatalf("issue at %v has no message\ninput: %q", is.Path, data)
		}
	}
	return verr.Issues
}

// rootSyntax reports whether issues is a single whole-input JSON problem,
// whose wording (decoder offsets) depends on the enclosing document.
func rootSyntax(issues []Issue) bool {
	return len(issues) == 1 && len(issues[0].Path) == 0 && strings.HasPrefix(issues[0].Message, "invalid JSON")
}

// FuzzParsePolicy: ParsePolicy and ParseRequest never panic and reject with
// a *ValidationError; a policy's issues are the issues of the same policy
// inside a request, under "policy." (docs/contract.md#policy); an accepted
// policy is normalized idempotently and survives a marshal/parse round
// trip, alone and inside a request.
func FuzzParsePolicy(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		p, perr := ParsePolicy(data)
		wrapped := append(append([]byte(`{"policy":`), data...), '}')
		r, rerr := ParseRequest(wrapped)
		if _, err := ParseRequest(data); err != nil {
			validationIssues(t, err, data)
		}

		if perr != nil {
			pis := validationIssues(t, perr, data)
			if rerr == nil {
				t.Fatalf("policy rejected (%v) but accepted inside a request\ninput: %q", perr, data)
			}
			ris := validationIssues(t, rerr, wrapped)
			if rootSyntax(pis) || rootSyntax(ris) {
				if !rootSyntax(pis) && !strings.Contains(ris[0].Message, errTooDeep.Error()) {
					t.Fatalf("only the request is malformed JSON: %v\ninput: %q", rerr, data)
				}
				return
			}
			want := make([]Issue, len(pis))
			for i, is := range pis {
				want[i] = is
				if is.Message != "further issues omitted" {
					want[i].Path = append([]string{"policy"}, is.Path...)
				}
			}
			if diff := cmp.Diff(want, ris); diff != "" {
				t.Fatalf("request issues are not the policy's under \"policy\" (-policy +request):\n%s\ninput: %q", diff, data)
			}
			return
		}
		if rerr != nil {
			t.Fatalf("policy accepted but rejected inside a request: %v\ninput: %q", rerr, data)
		}
		if diff := cmp.Diff(p, r.Policy); diff != "" {
			t.Fatalf("request policy differs (-policy +request):\n%s", diff)
		}
		again, err := p.Normalize()
		if err != nil {
			t.Fatalf("accepted policy does not normalize: %v\ninput: %q", err, data)
		}
		if diff := cmp.Diff(p, again); diff != "" {
			t.Fatalf("normalization is not idempotent (-parsed +normalized):\n%s\ninput: %q", diff, data)
		}
		if _, err := r.Normalize(); err != nil {
			t.Fatalf("accepted request does not normalize: %v", err)
		}
		out, err := json.Marshal(Request{Policy: p})
		if err != nil {
			t.Fatalf("marshal accepted policy: %v", err)
		}
		back, err := ParseRequest(out)
		if err != nil {
			t.Fatalf("re-parse of %s: %v\ninput: %q", out, err, data)
		}
		if diff := cmp.Diff(p, back.Policy); diff != "" {
			t.Fatalf("round trip differs (-first +again):\n%s\ninput: %q", diff, data)
		}
	})
}

// FuzzParseProcessSpec: ParseProcessSpec never panics and rejects with a
// *ValidationError whose paths name spec fields (docs/contract.md#processes-and-streams);
// an accepted spec validates, is within every bound, round-trips through
// JSON, and its counted JSON size is what an encoder writes.
func FuzzParseProcessSpec(f *testing.F) {
	fields := []string{"executable", "args", "env", "cwd"}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseProcessSpec(data)
		if err != nil {
			var top map[string]any
			_ = json.Unmarshal(data, &top)
			for _, is := range validationIssues(t, err, data) {
				if len(is.Path) == 0 || slices.Contains(fields, is.Path[0]) {
					continue
				}
				if _, inInput := top[is.Path[0]]; !inInput {
					t.Fatalf("issue path %v names neither a spec field nor an input key\ninput: %q", is.Path, data)
				}
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted spec is invalid: %v\ninput: %q", err, data)
		}
		if len(s.Args) > MaxArgs || len(s.Env) > MaxEnvEntries || !ValidGuestPath(s.Executable) || !ValidGuestPath(s.Cwd) {
			t.Fatalf("accepted spec escapes the bounds\ninput: %q", data)
		}
		out, err := marshalCompact(s)
		if err != nil {
			t.Fatalf("marshal accepted spec: %v", err)
		}
		// encoding/json writes U+2028 and U+2029 as 6-byte escapes where
		// JSON.stringify writes their 3 UTF-8 bytes.
		n := len(out) - 3*(strings.Count(string(out), `\u2028`)+strings.Count(string(out), `\u2029`))
		if got := s.recipeBytes(); got != n {
			t.Fatalf("recipeBytes %d, encoded spec %d bytes: %s", got, n, out)
		}
		if n > MaxRecipeBytes {
			t.Fatalf("accepted spec encodes to %d bytes, bound %d", n, MaxRecipeBytes)
		}
		again, err := ParseProcessSpec(out)
		if err != nil {
			t.Fatalf("re-parse of %s: %v\ninput: %q", out, err, data)
		}
		if diff := cmp.Diff(s, again); diff != "" {
			t.Fatalf("round trip differs (-first +again):\n%s\ninput: %q", diff, data)
		}
	})
}

// A malformed document is one root issue: duplicates seen before the
// syntax error or trailing data are not reported as if the structure held.
func TestMalformedJSONIsOneRootIssue(t *testing.T) {
	for _, data := range []string{`{"":10, "":0`, `{"a":1,"a":2}{}`} {
		_, err := ParsePolicy([]byte(data))
		issues := validationIssues(t, err, []byte(data))
		if !rootSyntax(issues) {
			t.Errorf("%q: issues %v, want one root syntax issue", data, issues)
		}
	}
}
