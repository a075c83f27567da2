package platforms

import (
	"fmt"
	"slices"
	"strings"
)

// Key is a public key the gate policies trust, and the rows it is
// trusted for: the `rows` of each policy trust entry whose `key` is a
// path ending in File (docs/qualification.md#gate). The entry's key path
// and window stay hand-written in the policy; its row list is generated
// from this.
type Key struct {
	// Signer is who holds the private half.
	Signer Signer
	// File is the public key's file name, e.g.
	// "qualbox-ed25519-2026-12-06.pub" (under reports/keys/ for the lane
	// host, .github/keys/ for CI).
	File string
	// Rows are the rows whose reports the key signed (or, for a new key,
	// is to sign), in matrix order. A retired key is trusted for these
	// only, frozen, so a row added to the registry later is never trusted
	// to an old key; its signer's newest key also for every row of the
	// signer that no key lists, a row added since included (TrustedRows).
	Rows []string
}

// Path returns the key's slash path from the repository root: under
// reports/keys/ for the lane host, .github/keys/ for CI, and "" for
// another signer.
func (k Key) Path() string {
	switch k.Signer {
	case LaneHost:
		return "reports/keys/" + k.File
	case CI:
		return ".github/keys/" + k.File
	}
	return ""
}

// keys are the signers' keys, each signer's oldest first: the last of a
// signer is its newest, the others are retired. A new campaign's key is a
// new last entry listing the rows it is to sign, and the key it replaces
// keeps the rows it signed.
var keys = []Key{
	// The 2026-11-29 campaign (lanes A and B).
	{Signer: LaneHost, File: "qualbox-ed25519.pub", Rows: []string{"lane-a", "lane-b"}},
	// The 2026-12-01 campaign (lanes A, B and C).
	{Signer: LaneHost, File: "qualbox-ed25519-2026-12-01.pub", Rows: []string{"lane-a", "lane-b", "lane-c"}},
	// The 2026-12-02 campaign (lanes A, B and C) and the 2026-12-03 one on
	// the same machine (lane C's tuple rows, lane D).
	{Signer: LaneHost, File: "qualbox-ed25519-2026-12-02.pub",
		Rows: []string{"lane-a", "lane-b", "lane-c", "ref-29.1.3", "ref-29.1.4", "current-29.7.2", "lane-d", "lane-d-emulated-amd64"}},
	// The 2026-12-06 campaign (lanes A, B, C and D, catalogue version
	// 11): the rows it signed (the tuple rows' committed reports are the
	// 2026-12-02 key's).
	{Signer: LaneHost, File: "qualbox-ed25519-2026-12-06.pub",
		Rows: []string{"lane-a", "lane-b", "lane-c", "lane-d", "lane-d-emulated-amd64", "lane-d-cgroupfs"}},
	// The repository secret QUALBOX_SIGNING_KEY: the hosted and Desktop
	// rows, none of which another key lists.
	{Signer: CI, File: "qualbox-ci-ed25519.pub"},
}

// Keys returns every key, each signer's oldest first. The result is a
// copy.
func Keys() []Key {
	out := slices.Clone(keys)
	for i := range out {
		out[i].Rows = slices.Clone(out[i].Rows)
	}
	return out
}

// Newest says whether k is the last key of its signer in keys.
func Newest(keys []Key, k Key) bool {
	i := slices.IndexFunc(keys, func(o Key) bool { return o.File == k.File })
	return i >= 0 && !slices.ContainsFunc(keys[i+1:], func(o Key) bool { return o.Signer == k.Signer })
}

// TrustedRows returns the names of the rows among entries that k, one
// of keys, is trusted for, in their order: k.Rows, and when k is its
// signer's newest key also every row of its signer that no key of keys
// lists (a row whose reports no key has signed yet).
func TrustedRows(keys []Key, k Key, entries []Entry) []string {
	newest := Newest(keys, k)
	var out []string
	for _, e := range entries {
		unlisted := !slices.ContainsFunc(keys, func(o Key) bool { return slices.Contains(o.Rows, e.Name) })
		if slices.Contains(k.Rows, e.Name) || newest && unlisted && e.Engine.Signer() == k.Signer {
			out = append(out, e.Name)
		}
	}
	return out
}

// CheckKeys returns *Error listing every inconsistency of keys with
// platforms: a key without signer or a file name NAME.pub, a file given
// twice, a retired key (not its signer's newest) without Rows, and a row
// that is not one of platforms' rows, is signed by another signer or is
// given twice.
func CheckKeys(keys []Key, platforms []Platform) error {
	signerOf := map[string]Signer{}
	for _, p := range platforms {
		for _, r := range p.Rows {
			signerOf[r.Name] = r.Engine.Signer()
		}
	}
	var problems []string
	add := func(k Key, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("key %s (%s): %s", k.File, k.Signer, fmt.Sprintf(format, args...)))
	}
	for i, k := range keys {
		switch {
		case k.Signer == "":
			add(k, "no signer")
		case k.File == "" || strings.ContainsAny(k.File, `/\`) || !strings.HasSuffix(k.File, ".pub"):
			add(k, "the file name must be NAME.pub, without a directory")
		case slices.ContainsFunc(keys[:i], func(o Key) bool { return o.File == k.File }):
			add(k, "given twice")
		case len(k.Rows) == 0 && !Newest(keys, k):
			add(k, "a retired key is trusted for the rows it signed, and none are listed: list them, or remove the key")
		}
		for j, name := range k.Rows {
			switch s, ok := signerOf[name]; {
			case !ok:
				add(k, "row %q is not a row of the registry", name)
			case s != k.Signer:
				add(k, "row %q is signed by %s", name, s)
			case slices.Contains(k.Rows[:j], name):
				add(k, "row %q is given twice", name)
			}
		}
	}
	if len(problems) > 0 {
		return &Error{Problems: problems}
	}
	return nil
}
