package evidence_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/guest/facts"
)

// probeReport signs a report whose second scenario, name, passed under
// catalogue version catalogue with the checks and observations edit
// gives it, and returns what VerifyRun says of it.
func probeReport(t *testing.T, name string, catalogue int, edit func(*evidence.Scenario)) error {
	t.Helper()
	return probeReportPosture(t, name, catalogue, true, edit)
}

// probeReportPosture is probeReport with the header's posture recorded
// or not.
func probeReportPosture(t *testing.T, name string, catalogue int, posture bool, edit func(*evidence.Scenario)) error {
	t.Helper()
	run, _ := fixedRun()
	h := *harnessV2
	h.CatalogueVersion = catalogue
	run.Harness = &h
	if posture {
		p := evidence.PostureOf(run, nil)
		run.Posture = &p
	}
	run.Scenarios = run.Scenarios[:2]
	sum := &run.Scenarios[1]
	sum.Name, sum.Dir, sum.Detail = name, "02-"+name, ""
	sum.Verdict = evidence.Verdict{Kind: evidence.Passed}
	run.Verdict = evidence.Verdict{Kind: evidence.Passed}
	files := scenarioFiles(run, nil)
	s := files[1]
	s.Checks = []evidence.Check{{Name: "c0", Want: "x", Got: "x", OK: true}}
	edit(s)
	sum.Checks, sum.Passed = len(s.Checks), s.PassedChecks()
	run.Tuple = evidence.TupleOf(run)
	dir, keys := t.TempDir(), t.TempDir()
	_, _, err := attest.GenerateKey(keys)
	assert.NilError(t, err)
	for _, f := range files {
		sub := filepath.Join(dir, fmt.Sprintf("%02d-%s", f.Index, f.Name))
		assert.NilError(t, os.Mkdir(sub, 0o755))
		assert.NilError(t, evidence.WriteJSON(filepath.Join(sub, "evidence.json"), f))
	}
	md, err := evidence.Markdown(run)
	assert.NilError(t, err)
	assert.NilError(t, evidence.WriteFile(filepath.Join(dir, "summary.md"), md))
	junit, err := evidence.JUnit(run, files)
	assert.NilError(t, err)
	assert.NilError(t, evidence.WriteFile(filepath.Join(dir, "junit.xml"), junit))
	assert.NilError(t, evidence.WriteJSON(filepath.Join(dir, "evidence.json"), run))
	key, err := attest.LoadPrivateKey(filepath.Join(keys, attest.PrivateKeyFile))
	assert.NilError(t, err)
	assert.NilError(t, evidence.SignRun(context.Background(), dir, key, run))
	_, err = evidence.VerifyRun(context.Background(), dir, pub(t, keys))
	return err
}

func wantRefused(t *testing.T, err error, want string) {
	t.Helper()
	if assert.Check(t, err != nil, "verified, want refused with %q", want) {
		assert.Check(t, strings.Contains(err.Error(), want), "got %v", err)
	}
}

// A key holder cannot pass isolation over a user namespace its own probe
// facts record as created: not by setting the check ok, not by dropping
// the check, not by dropping the facts under catalogue v9. The honest
// refusal verifies, and a report of an older catalogue need not have it.
func TestVerifyRefusesAUserNamespaceCreationPassedAsRefused(t *testing.T) {
	userns := func(o facts.Outcome, c *evidence.Check) func(*evidence.Scenario) {
		return func(s *evidence.Scenario) {
			s.Observed["facts"] = map[string]any{"machine": "x86_64", "userNamespace": o}
			if c != nil {
				s.Checks = append(s.Checks, *c)
			}
		}
	}
	created := facts.Outcome{OK: true}
	refused := facts.Outcome{Errno: "EPERM", Error: "operation not permitted"}
	check := func(got string, ok bool) *evidence.Check {
		return &evidence.Check{Name: "unprivileged user namespace refused", Want: "refused (EPERM, EACCES, ENOSPC, EUSERS)", Got: got, OK: ok}
	}
	wantRefused(t, probeReport(t, "isolation", 9, userns(created, check("EPERM", true))), "isolation passed, but its probe facts record the user namespace attempt as created")
	wantRefused(t, probeReport(t, "isolation", 9, userns(created, check("EPERM", true))), `check "unprivileged user namespace refused" got EPERM, but the probe facts it observed say created`)
	wantRefused(t, probeReport(t, "isolation", 9, userns(created, check("created", true))), `is ok true, but the probe facts' created is not a refusal`)
	wantRefused(t, probeReport(t, "isolation", 2, userns(created, nil)), "isolation passed, but its probe facts record the user namespace attempt as created")
	wantRefused(t, probeReport(t, "isolation", 9, userns(facts.Outcome{Errno: "EINVAL"}, check("EINVAL", true))), "EINVAL, not a refusal")
	wantRefused(t, probeReport(t, "isolation", 9, userns(refused, nil)), "isolation of catalogue v9 passed without its")
	wantRefused(t, probeReport(t, "isolation", 9, func(s *evidence.Scenario) {
		s.Observed["facts"] = map[string]any{"machine": "x86_64"}
		s.Checks = append(s.Checks, *check("EPERM", true))
	}), "its probe facts record no userNamespace attempt")

	assert.NilError(t, probeReport(t, "isolation", 9, userns(refused, check("EPERM", true))))
	assert.NilError(t, probeReport(t, "isolation", 8, func(*evidence.Scenario) {}))
}

// The probe's EPERM is a refusal only when its control, the same child
// without CLONE_NEWUSER, started: a key holder cannot pass isolation over
// facts whose control failed too (the child, not the clone, may have
// failed), whether the check reads the errno alone or is ok over the
// inconclusive reading. The honest pair verifies.
func TestVerifyRefusesAnInconclusiveUserNamespaceAttemptPassedAsRefused(t *testing.T) {
	withControl := func(control facts.Outcome, c evidence.Check) func(*evidence.Scenario) {
		return func(s *evidence.Scenario) {
			s.Observed["facts"] = map[string]any{"machine": "x86_64",
				"userNamespace":        facts.Outcome{Errno: "EPERM", Error: "fork/exec /usr/local/bin/qualbox-probe: operation not permitted"},
				"userNamespaceControl": control}
			s.Checks = append(s.Checks, c)
		}
	}
	check := func(got string) evidence.Check {
		return evidence.Check{Name: "unprivileged user namespace refused", Want: "refused (EPERM, EACCES, ENOSPC, EUSERS)", Got: got, OK: true}
	}
	failed := facts.Outcome{Errno: "EPERM", Error: "fork/exec /usr/local/bin/qualbox-probe: operation not permitted"}
	const inconclusive = "inconclusive: EPERM (the same child without CLONE_NEWUSER failed too: EPERM)"
	err := probeReport(t, "isolation", 10, withControl(failed, check("EPERM")))
	wantRefused(t, err, "isolation passed, but its probe facts record the user namespace attempt as "+inconclusive+", not a refusal")
	wantRefused(t, err, `check "unprivileged user namespace refused" got EPERM, but the probe facts it observed say `+inconclusive)
	wantRefused(t, probeReport(t, "isolation", 10, withControl(failed, check(inconclusive))), `is ok true, but the probe facts' `+inconclusive+` is not a refusal`)

	assert.NilError(t, probeReport(t, "isolation", 10, withControl(facts.Outcome{OK: true}, check("EPERM"))))
}

// A key holder cannot pass network-isolation over an Engine API its own
// probes record answering the sandbox: not by setting the check ok, not by
// dropping the check, and under catalogue v9 not by dropping both. The
// honest no-reply verifies.
func TestVerifyRefusesAnEngineAPIReplyPassedAsUnreachable(t *testing.T) {
	const url = "http://172.18.0.1:2375/_ping"
	answered := facts.Result{Action: "http", Address: url, Outcome: facts.Outcome{OK: true},
		HTTP: &facts.HTTPReply{Status: 200, APIVersion: "1.52", Server: "Docker/29.1.4 (linux)", Body: "OK"}}
	silent := facts.Result{Action: "http", Address: url, Outcome: facts.Outcome{Errno: "ECONNREFUSED", Error: "connection refused"}}
	metadata := facts.Result{Action: "http", Address: "http://169.254.169.254/latest/meta-data/", Outcome: facts.Outcome{Errno: "ETIMEDOUT"}}
	probes := func(c *evidence.Check, rs ...facts.Result) func(*evidence.Scenario) {
		return func(s *evidence.Scenario) {
			s.Observed["outbound: Engine API and metadata probes"] = rs
			if c != nil {
				s.Checks = append(s.Checks, *c)
			}
		}
	}
	check := func(ok bool) *evidence.Check {
		return &evidence.Check{Name: "outbound: no Engine API at the network's gateway 172.18.0.1 port 2375 (HTTP)",
			Want: "no Engine API reply from " + url, Got: "HTTP 200, Api-Version 1.52", OK: ok}
	}
	wantRefused(t, probeReport(t, "network-isolation", 9, probes(check(true), answered, metadata)), "network-isolation passed, but its probes record an Engine API reply from "+url)
	wantRefused(t, probeReport(t, "network-isolation", 9, probes(check(true), answered, metadata)), "is ok true, but the probe result for "+url+" is an Engine API reply")
	wantRefused(t, probeReport(t, "network-isolation", 2, probes(nil, answered, metadata)), "network-isolation passed, but its probes record an Engine API reply")
	wantRefused(t, probeReport(t, "network-isolation", 9, probes(check(true), metadata)), "hold no result for that URL")
	wantRefused(t, probeReport(t, "network-isolation", 9, probes(check(true), silent, answered, metadata)), "lists "+url+" twice")
	wantRefused(t, probeReport(t, "network-isolation", 9, func(*evidence.Scenario) {}), "network-isolation of catalogue v9 passed without its Engine API probes and checks")

	assert.NilError(t, probeReport(t, "network-isolation", 9, probes(check(true), silent, metadata)))
	assert.NilError(t, probeReport(t, "network-isolation", 8, func(*evidence.Scenario) {}))
}

// A run header of catalogue v9 or later without its posture (dropped by
// its key holder so that summary.md shows none) is refused; one of an
// older catalogue is not.
func TestVerifyRefusesACatalogueV9RunWithoutItsPosture(t *testing.T) {
	wantRefused(t, probeReportPosture(t, "lifecycle", 9, false, func(*evidence.Scenario) {}), "no posture, which a run of catalogue v9 records")
	assert.NilError(t, probeReportPosture(t, "lifecycle", 9, true, func(*evidence.Scenario) {}))
	assert.NilError(t, probeReportPosture(t, "lifecycle", 8, false, func(*evidence.Scenario) {}))
}
