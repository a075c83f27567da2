package evidence

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/qualbox/qualbox/qualify/guest/facts"
)

// Re-derivations of the isolation and network-isolation checks whose
// whole point is a refusal the sandbox met (docs/qualification.md#evidence):
// a verdict follows from each check's ok alone, so without these a key
// holder could record a created user namespace, or an Engine API that
// answered the sandbox, under a passed scenario whose own observations
// say otherwise.

// Check names and the catalogue version from which a passed scenario has them.
const (
	usernsCheck          = "unprivileged user namespace refused"
	engineAPICheckName   = "outbound: no Engine API at "
	engineAPICheckWant   = "no Engine API reply from "
	engineAPIProbesKey   = "outbound: Engine API and metadata probes"
	probeChecksCatalogue = 9
)

// claimsCatalogue reports whether r claims a catalogue version whose
// scenarios record these checks; the gate pins the catalogue digest, so a
// report claiming an older one does not pass a policy that pins this one.
func claimsCatalogue(r *Run, version int) bool {
	return r.Harness != nil && r.Harness.CatalogueVersion >= version
}

// observedAs decodes s.Observed[key] into out; ok is false when absent.
func observedAs(s *Scenario, key string, out any) (ok bool, err error) {
	v, ok := s.Observed[key]
	if !ok {
		return false, nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return true, err
	}
	return true, json.Unmarshal(data, out)
}

// usernsProblems re-derives isolation's user namespace check from the
// probe facts it observed, read as the scenario reads them
// (facts.ReadUserns): a passed isolation whose facts record the namespace
// created, refused with an errno that says nothing, or failed while the
// control child without CLONE_NEWUSER failed too (inconclusive) is
// refused whether or not the check is there; where the check is there its
// got must be that reading and its ok whether that is a refusal; and a
// passed isolation of catalogue version 9 or later must have both.
func usernsProblems(r *Run, s *Scenario) []string {
	if s.Name != "isolation" || engineless(r) {
		return nil
	}
	var f struct {
		UserNamespace        *facts.Outcome `json:"userNamespace"`
		UserNamespaceControl *facts.Outcome `json:"userNamespaceControl"`
	}
	if _, err := observedAs(s, "facts", &f); err != nil {
		return []string{fmt.Sprintf("observed facts do not decode: %v", err)}
	}
	passed := s.Verdict.Kind == Passed
	i := slices.IndexFunc(s.Checks, func(c Check) bool { return c.Name == usernsCheck })
	var out []string
	if f.UserNamespace == nil {
		if passed && (i >= 0 || claimsCatalogue(r, probeChecksCatalogue)) {
			out = append(out, fmt.Sprintf("isolation passed, but its probe facts record no userNamespace attempt for its %q check", usernsCheck))
		}
		return out
	}
	got, refused := facts.ReadUserns(f.UserNamespace, f.UserNamespaceControl)
	if passed && !refused {
		out = append(out, fmt.Sprintf("isolation passed, but its probe facts record the user namespace attempt as %s, not a refusal (%s while the same child without CLONE_NEWUSER starts)", got, strings.Join(facts.UsernsRefusals, ", ")))
	}
	if i < 0 {
		if passed && claimsCatalogue(r, probeChecksCatalogue) {
			out = append(out, fmt.Sprintf("isolation of catalogue v%d passed without its %q check", r.Harness.CatalogueVersion, usernsCheck))
		}
		return out
	}
	c := s.Checks[i]
	if c.Got != got {
		out = append(out, fmt.Sprintf("check %q got %s, but the probe facts it observed say %s", usernsCheck, c.Got, got))
	}
	if c.OK != refused {
		out = append(out, fmt.Sprintf("check %q is ok %t, but the probe facts' %s is %sa refusal", usernsCheck, c.OK, got, map[bool]string{true: "", false: "not "}[refused]))
	}
	return out
}

// engineAPIProblems re-derives network-isolation's Engine API checks from
// the probe results it observed: a passed network-isolation whose results
// record an Engine API reply (facts.HTTPReply.EngineAPI) from any address
// is refused, with or without a check for it; each check's ok must be
// that no Engine API replied from the URL its want names, which the
// results must hold; and a passed network-isolation of catalogue version
// 9 or later must have the results and at least one such check.
func engineAPIProblems(r *Run, s *Scenario) []string {
	if s.Name != "network-isolation" || engineless(r) {
		return nil
	}
	var rs []facts.Result
	has, err := observedAs(s, engineAPIProbesKey, &rs)
	if err != nil {
		return []string{fmt.Sprintf("observed %q does not decode: %v", engineAPIProbesKey, err)}
	}
	passed := s.Verdict.Kind == Passed
	byURL, out := engineAPIResults(rs, passed)
	checks, problems := engineAPICheckProblems(s.Checks, byURL)
	out = append(out, problems...)
	if passed && claimsCatalogue(r, probeChecksCatalogue) && (!has || checks == 0) {
		out = append(out, fmt.Sprintf("network-isolation of catalogue v%d passed without its Engine API probes and checks", r.Harness.CatalogueVersion))
	}
	return out
}

// engineAPIResults indexes the probe results rs by URL (an Engine API
// reply wins over another result for the same URL) and says where they
// list a URL twice with different outcomes or, when the scenario passed,
// record an Engine API reply.
func engineAPIResults(rs []facts.Result, passed bool) (map[string]facts.Result, []string) {
	var out []string
	byURL := map[string]facts.Result{}
	for _, res := range rs {
		if prev, dup := byURL[res.Address]; dup && prev.HTTP.EngineAPI() != res.HTTP.EngineAPI() {
			out = append(out, fmt.Sprintf("observed %q lists %s twice with different outcomes", engineAPIProbesKey, res.Address))
		}
		if _, dup := byURL[res.Address]; !dup || res.HTTP.EngineAPI() {
			byURL[res.Address] = res
		}
		if passed && res.HTTP.EngineAPI() {
			out = append(out, fmt.Sprintf("network-isolation passed, but its probes record an Engine API reply from %s (Api-Version %q, Server %q)", res.Address, res.HTTP.APIVersion, res.HTTP.Server))
		}
	}
	return byURL, out
}

// engineAPICheckProblems counts the Engine API checks among checks and
// says where one names a URL with no probe result, or is ok when that
// result is an Engine API reply (or not ok when it is not).
func engineAPICheckProblems(checks []Check, byURL map[string]facts.Result) (int, []string) {
	var out []string
	n := 0
	for _, c := range checks {
		if !strings.HasPrefix(c.Name, engineAPICheckName) {
			continue
		}
		n++
		url, ok := strings.CutPrefix(c.Want, engineAPICheckWant)
		res, found := byURL[url]
		switch {
		case !ok || !found:
			out = append(out, fmt.Sprintf("check %q wants %q, but the probes it observed hold no result for that URL", c.Name, c.Want))
		case c.OK == res.HTTP.EngineAPI():
			out = append(out, fmt.Sprintf("check %q is ok %t, but the probe result for %s %s an Engine API reply", c.Name, c.OK, url, map[bool]string{true: "is", false: "is not"}[res.HTTP.EngineAPI()]))
		}
	}
	return n, out
}
