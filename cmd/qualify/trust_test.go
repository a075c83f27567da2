package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/internal/exitcode"
	"github.com/qualbox/qualbox/platforms"
	"github.com/qualbox/qualbox/qualify/attest"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/scenario"
)

const committedPolicy = "../../reports/gate-policy.yaml"

func keyID(t *testing.T, pub string) string {
	t.Helper()
	k, err := attest.LoadPublicKey(pub)
	assert.NilError(t, err)
	return attest.KeyID(k)
}

// The forger runs his own report, signs it with his own key and uploads
// the public key beside it, as the CI gate job used to pass with --key.
// With --policy, --key only narrows: his key is a usage error naming it,
// and without it his report is refused for want of a trusted signature.
func TestMergePolicyKeyNeverWidensTrust(t *testing.T) {
	dir := t.TempDir()
	manifestPath, report, forger := signedRun(t, dir, true)
	_, lane, err := attest.GenerateKey(filepath.Join(dir, "lane"))
	assert.NilError(t, err)
	policy := hermeticPolicy(t, dir, "policy.yaml", manifestPath, false, scenario.CatalogueVersion, trustLine(t, dir, lane, "hermetic"))

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"merge", "--policy", policy, "--key", forger, report}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Usage, stderr.String())
	assert.Check(t, is.Contains(stderr.String(), "--key "+forger+": key ID "+keyID(t, forger)+" is not trusted by gate policy "+policy))
	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), []string{"merge", "--policy", policy, report}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Failed)
	assert.Check(t, is.Contains(stderr.String(), "qualify merge: not passed: refused: "+report+": refused by the policy's trust: no signature by a key the policy trusts"))

	for _, args := range [][]string{{"merge", "--policy", policy, report}, {"merge", "--policy", policy, "--key", lane, report}, {"verify", "--policy", policy, report}} {
		stdout.Reset()
		stderr.Reset()
		code = run(context.Background(), args, &stdout, &stderr)
		assert.Equal(t, code, exitcode.Failed, "%v: %s", args, stderr.String())
		assert.Check(t, is.Contains(stderr.String(), "no signature by a key the policy trusts (trusted key IDs: "+keyID(t, lane)+")"), "%v", args)
	}

	// Narrowing does take a trusted key away: a policy trusting both keys
	// passes the report, and --key lane leaves only lane's entry.
	both := hermeticPolicy(t, dir, "both.yaml", manifestPath, false, scenario.CatalogueVersion,
		trustLine(t, dir, lane, "hermetic"), trustLine(t, dir, forger, "hermetic"))
	stderr.Reset()
	assert.Equal(t, run(context.Background(), []string{"merge", "--policy", both, report}, &stdout, &stderr), exitcode.OK, stderr.String())
	assert.Equal(t, run(context.Background(), []string{"merge", "--policy", both, "--key", lane, report}, &stdout, &stderr), exitcode.Failed)
	assert.Check(t, is.Contains(stderr.String(), "no signature by a key the policy trusts"))
}

// A key trusted for one row signs a report of another row: refused,
// naming the key ID and the row.
func TestVerifyPolicyRefusesAKeyNotBoundToTheRow(t *testing.T) {
	dir := t.TempDir()
	manifestPath, report, pub := signedRun(t, dir, true)
	policy := hermeticPolicy(t, dir, "policy.yaml", manifestPath, true, scenario.CatalogueVersion,
		trustLine(t, dir, pub, "other"), trustLine(t, dir, filepath.Join(dir, "spare.pub"), "hermetic"))
	_, spare, err := attest.GenerateKey(filepath.Join(dir, "spare"))
	assert.NilError(t, err)
	assert.NilError(t, os.Rename(spare, filepath.Join(dir, "spare.pub")))
	var stdout, stderr bytes.Buffer
	for _, cmd := range []string{"verify", "merge"} {
		stderr.Reset()
		code := run(context.Background(), []string{cmd, "--policy", policy, report}, &stdout, &stderr)
		assert.Equal(t, code, exitcode.Failed, stderr.String())
		assert.Check(t, is.Contains(stderr.String(), "signed by key "+keyID(t, pub)+" ("+pub+"), which is bound to rows other, not to row hermetic that its tuple matches"), cmd)
	}
}

// layout copies the committed policy, its keys and the manifests into a
// fresh directory with the repository's layout and returns the policy
// there; the committed reports stay where they are.
func layout(t *testing.T) (root, policy string) {
	t.Helper()
	root = t.TempDir()
	assert.NilError(t, os.CopyFS(filepath.Join(root, "reports", "keys"), os.DirFS("../../reports/keys")))
	assert.NilError(t, os.CopyFS(filepath.Join(root, "manifests"), os.DirFS("../../manifests")))
	assert.NilError(t, os.CopyFS(filepath.Join(root, "reports", "manifests"), os.DirFS("../../reports/manifests")))
	data, err := os.ReadFile(committedPolicy)
	assert.NilError(t, err)
	policy = filepath.Join(root, "reports", "gate-policy.yaml")
	assert.NilError(t, os.WriteFile(policy, data, 0o644))
	return root, policy
}

func editFile(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	assert.NilError(t, err)
	assert.Assert(t, bytes.Contains(data, []byte(old)), "%s has no %q", path, old)
	assert.NilError(t, os.WriteFile(path, bytes.Replace(data, []byte(old), []byte(new), 1), 0o644))
}

// Every committed report verifies under the committed policy's trust,
// each by the key bound to its row for its day.
func TestVerifyCommittedReportsUnderThePolicy(t *testing.T) {
	dirs, err := filepath.Glob("../../reports/linux-*/*/evidence.dsse.json")
	assert.NilError(t, err)
	assert.Assert(t, len(dirs) >= 9)
	for i := range dirs {
		dirs[i] = filepath.Dir(dirs[i])
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"verify", "--policy", committedPolicy}, dirs...), &stdout, &stderr)
	assert.Equal(t, code, exitcode.OK, "%s%s", stdout.String(), stderr.String())
	assert.Equal(t, strings.Count(stdout.String(), ": OK: "), len(dirs))
	assert.Check(t, is.Contains(stdout.String(), "reports/linux-x64/20261201T082451Z: OK: 57 subjects verified"))
	assert.Check(t, is.Contains(stdout.String(), "signed by key "+keyID(t, "../../reports/keys/qualbox-ed25519-2026-12-01.pub")))
}

// `make verify` trusts reports/gate-policy.yaml, not whatever lies in
// reports/keys: a key planted there beside a report it signed verifies
// nothing, though the old glob of reports/keys/*.pub accepted it.
func TestVerifyPolicyRefusesAPlantedKey(t *testing.T) {
	root, policy := layout(t)
	_, report, planted := signedRun(t, t.TempDir(), true)
	// signedRun's synthetic catalogue cannot parse the committed manifests.
	useGateScenarios(t, scenario.Default())
	plantedKey := filepath.Join(root, "reports", "keys", "qualbox-ed25519-planted.pub")
	data, err := os.ReadFile(planted)
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(plantedKey, data, 0o644))
	plantedReport := filepath.Join(root, "reports", "linux-x64-cgroupv1", "20261202T000000Z")
	assert.NilError(t, os.CopyFS(plantedReport, os.DirFS(report)))

	var stdout, stderr bytes.Buffer
	old := []string{"verify"}
	keys, err := filepath.Glob(filepath.Join(root, "reports", "keys", "*.pub"))
	assert.NilError(t, err)
	for _, k := range keys {
		old = append(old, "--key", k)
	}
	assert.Equal(t, run(context.Background(), append(old, plantedReport), &stdout, &stderr), exitcode.OK, "the glob trusted the planted key: %s", stderr.String())

	stdout.Reset()
	code := run(context.Background(), []string{"verify", "--policy", policy, plantedReport}, &stdout, &stderr)
	assert.Equal(t, code, exitcode.Failed, stderr.String())
	assert.Check(t, is.Contains(stderr.String(), plantedReport+": FAILED"))
	assert.Check(t, is.Contains(stderr.String(), "  evidence.dsse.json: no signature by a key the policy trusts (trusted key IDs: "+
		keyID(t, "../../reports/keys/qualbox-ed25519.pub")+", "+keyID(t, "../../reports/keys/qualbox-ed25519-2026-12-01.pub")+", "+keyID(t, "../../reports/keys/qualbox-ed25519-2026-12-02.pub")+", "+keyID(t, "../../reports/keys/qualbox-ed25519-2026-12-06.pub")+")"))
	assert.Check(t, is.Equal(stdout.String(), ""))

	// make verify runs exactly that.
	mk, err := os.ReadFile("../../Makefile")
	assert.NilError(t, err)
	i := bytes.Index(mk, []byte("\nverify:\n"))
	assert.Assert(t, i >= 0)
	recipe := string(mk[i : i+bytes.IndexByte(mk[i+9:], '\n')+9])
	assert.Check(t, is.Contains(recipe, "verify --policy reports/gate-policy.yaml"))
	assert.Check(t, !strings.Contains(recipe, "--key"), recipe)
}

// The committed keys are bound to their rows and days: narrow a key's
// rows or move its window in a copy of the policy and the committed
// reports it covered are refused, naming the key and the row or window.
func TestCommittedKeysAreBoundToRowsAndDays(t *testing.T) {
	_, policy := layout(t)
	// (lane-c goes to the older key, so that every row stays signable.)
	editFile(t, policy, "rows: [lane-a, lane-b]", "rows: [lane-a, lane-b, lane-c]")
	editFile(t, policy, "rows: [lane-a, lane-b, lane-c] # frozen: signer lane-host\n    notBefore: 2026-12-01", "rows: [lane-a, lane-b] # frozen: signer lane-host\n    notBefore: 2026-12-01")
	editFile(t, policy, "notBefore: 2026-11-29T00:00:00Z\n    notAfter: 2026-11-29T23:59:59Z", "notBefore: 2026-11-29T11:00:00Z\n    notAfter: 2026-11-29T23:59:59Z")
	newKey, oldKey := keyID(t, "../../reports/keys/qualbox-ed25519-2026-12-01.pub"), keyID(t, "../../reports/keys/qualbox-ed25519.pub")
	for dir, want := range map[string]string{
		"../../reports/linux-x64/20261201T082451Z": "signed by key " + newKey + " (" + filepath.Join(filepath.Dir(policy), "keys", "qualbox-ed25519-2026-12-01.pub") + "), which is bound to rows lane-a, lane-b, not to row lane-c that its tuple matches",
		"../../reports/linux-x64-cgroupv1/20261129T104556Z": "signed by key " + oldKey + " (" + filepath.Join(filepath.Dir(policy), "keys", "qualbox-ed25519.pub") +
			"), trusted from 2026-11-29T11:00:00Z to 2026-11-29T23:59:59Z, but its signed run time 2026-11-29T10:45:57.781164413Z to 2026-11-29T10:46:18.222212221Z falls outside that window",
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"verify", "--policy", policy, dir}, &stdout, &stderr)
		assert.Equal(t, code, exitcode.Failed, "%s: %s", dir, stderr.String())
		assert.Check(t, is.Contains(stderr.String(), want))
	}
}

// forgeHarness copies the committed lane C report, rewrites its harness
// identity with edit (evidence.json and the summary's harness line) and
// re-signs it with a fresh key, which a copy of the committed policy
// trusts for lane C on that day: the forger is a key holder. It returns
// the policy and the forged report.
func forgeHarness(t *testing.T, edit func(h *evidence.Harness)) (policy, dir string) {
	t.Helper()
	root, policy := layout(t)
	dir = filepath.Join(t.TempDir(), "report")
	assert.NilError(t, os.CopyFS(dir, os.DirFS("../../reports/linux-x64/20261201T082451Z")))
	data, err := os.ReadFile(filepath.Join(dir, "evidence.json"))
	assert.NilError(t, err)
	var r evidence.Run
	assert.NilError(t, json.Unmarshal(data, &r))
	before := "- Harness: " + r.Harness.String()
	edit(r.Harness)
	assert.NilError(t, evidence.WriteJSON(filepath.Join(dir, "evidence.json"), &r))
	editFile(t, filepath.Join(dir, "summary.md"), before, "- Harness: "+r.Harness.String())
	priv, pub, err := attest.GenerateKey(filepath.Join(root, "forger"))
	assert.NilError(t, err)
	key, err := attest.LoadPrivateKey(priv)
	assert.NilError(t, err)
	assert.NilError(t, os.Remove(filepath.Join(dir, attest.EnvelopeFile)))
	_, err = attest.Sign(context.Background(), dir, key, evidence.PredicateType, evidence.PredicateOf(&r))
	assert.NilError(t, err)
	editFile(t, policy, "harness:", "  - {key: "+strconv.Quote(pub)+", rows: [lane-c], notBefore: 2026-12-01T00:00:00Z, notAfter: 2026-12-01T23:59:59Z}\nharness:")
	editFile(t, policy, "rows: [lane-a, lane-b, lane-c]", "rows: [lane-a, lane-b]")
	return policy, dir
}

// A key holder who forges the harness identity of a real report is
// refused by the committed policy's exact pin, naming what is wrong; the
// same report with a clean VCS revision added meets the pin: no line
// names its harness, and the only lines left are the rows it does not
// cover and its own row, lane-c, which has since pinned a newer manifest
// with more scenarios than this 2026-12-01 report ran.
func TestGateRefusesAForgedHarnessOfACommittedReport(t *testing.T) {
	clean := func(h *evidence.Harness) { h.VCSRevision = "0123456789abcdef0123456789abcdef01234567" }
	for _, tc := range []struct {
		name string
		edit func(h *evidence.Harness)
		want string
	}{
		// Below 9: a claimed v9 or later would be refused sooner, by
		// verification, for lacking that catalogue's probe checks.
		{"catalogue v6", func(h *evidence.Harness) { clean(h); h.CatalogueVersion = 6 }, "catalogue version 6 is not an accepted catalogue (accepted: v3 sha256 d315d7e1823fae2d0e4a87824f540c59c42411c454ff012b3f06dcf56f474bd6, v3 sha256 bbbba30b7482b69c1ed97dddf1c710daa67f3cce9ec0b38619b8aa3809aa3e79, v4 sha256 0907ad7eb87e98d9341e710d419ace7b64b69df9c77c2c545c344f3f339b5171, v5 sha256 4e3594baa1b8080a9a6efb39b5b2e5e033f971c38e81ffb5700665b0fcb29b5e, v11 sha256 65daf115a59120c77abedba058da7ecd32445d176ec750299248cfe1585cd50d, v11 sha256 dffc02a0cf5e4552eeb7f463b1e9025e21457deb5f319ed9fecf55d3526dafee)"},
		{"listed version, unknown digest", func(h *evidence.Harness) { clean(h); h.CatalogueSHA256 = strings.Repeat("0", 64) }, "catalogue sha256 " + strings.Repeat("0", 64) + " is not an accepted digest of catalogue version 3"},
		{"foreign module", func(h *evidence.Harness) { clean(h); h.Module = "example.com/qualbox" }, `module "example.com/qualbox" is not the required "github.com/qualbox/qualbox"`},
		{"dirty build", func(h *evidence.Harness) { clean(h); h.VCSModified = true }, "the build of VCS revision 0123456789abcdef0123456789abcdef01234567 has local modifications, and a clean VCS revision is required"},
		{"no VCS revision", func(h *evidence.Harness) {}, "the build carries no VCS revision and no module version, and a clean VCS revision is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy, dir := forgeHarness(t, tc.edit)
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"merge", "--policy", policy, dir}, &stdout, &stderr)
			assert.Equal(t, code, exitcode.Failed, stderr.String())
			assert.Check(t, is.Contains(stderr.String(), "qualify merge: not passed: report "+dir+": harness identity "), stderr.String())
			assert.Check(t, is.Contains(stderr.String(), tc.want))
		})
	}
	policy, dir := forgeHarness(t, clean)
	var stdout, stderr bytes.Buffer
	assert.Equal(t, run(context.Background(), []string{"merge", "--policy", policy, dir}, &stdout, &stderr), exitcode.Failed)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		assert.Check(t, !strings.Contains(l, "harness identity"), l)
		if !strings.Contains(l, "row lane-c (") {
			lines = append(lines, l)
		}
	}
	// Every other row the release gate requires has no report.
	var want []string
	for _, e := range platforms.Rows() {
		if e.ReleaseGate == platforms.Required && e.Name != "lane-c" {
			tu := e.Tuple
			row := evidence.Row{Name: e.Name, Profile: e.Profile, Engine: tu.Engine, EngineCommit: tu.EngineCommit, Containerd: tu.Containerd,
				Runc: tu.Runc, StorageDriver: tu.StorageDriver, ControllerOS: tu.ControllerOS, ControllerArch: tu.ControllerArch, OperatingSystem: tu.OperatingSystem}
			want = append(want, "qualify merge: not passed: "+row.String()+": no report with a pinned manifest")
		}
	}
	assert.Assert(t, len(want) >= 6)
	assert.Check(t, is.Contains(want[0], "row lane-a (profile linux-x64-cgroupv1, engine 20.10.)"))
	assert.DeepEqual(t, lines, want)
}

// The CI policy gates reports this commit's qualify makes, so it pins this
// build's catalogue: a scenario change that does not update
// .github/gate-policy.yaml would leave every CI report refused.
func TestCIPolicyPinsThisBuildsCatalogue(t *testing.T) {
	p, err := evidence.LoadPolicy("../../.github/gate-policy.yaml", scenario.Default())
	assert.NilError(t, err)
	want := evidence.Catalogue{Version: scenario.CatalogueVersion, SHA256: scenario.CatalogueSHA256}
	assert.Check(t, slices.Contains(p.Requirement.Harness.Catalogues, want),
		"add %s to .github/gate-policy.yaml harness.catalogues (pinned: %v)", want, p.Requirement.Harness.Catalogues)
}

// make gate (reports/gate-policy.yaml) and the CI gate job
// (.github/gate-policy.yaml) apply the same trust to the lane rows: the
// same row definitions, and the lane keys CI trusts are trusted locally
// with the same rows and window, the newest local one among them. A row
// matched differently would bind a report to other keys in CI than here.
// The one difference allowed: a committed row may also pin the manifest a
// committed report of that row ran (its scenarios stay the same: the gate
// requires of a report only those its own pinned manifest lists).
func TestLaneRowsAndTrustAgreeAcrossPolicies(t *testing.T) {
	local, err := evidence.LoadPolicy(committedPolicy, scenario.Default())
	assert.NilError(t, err)
	ci, err := evidence.LoadPolicy("../../.github/gate-policy.yaml", scenario.Default())
	assert.NilError(t, err)
	ran := committedTuples(t)
	lanes := map[string]bool{}
	for _, r := range local.Requirement.Rows {
		lanes[r.Name] = true
		i := slices.IndexFunc(ci.Requirement.Rows, func(c evidence.Row) bool { return c.Name == r.Name })
		if !assert.Check(t, i >= 0, "CI policy has no row %s", r.Name) {
			continue
		}
		c := ci.Requirement.Rows[i]
		// The committed policy may also pin a manifest a committed report
		// of the row ran (reports/manifests/); the required scenarios are
		// the same (the gate requires of a report only those its own
		// pinned manifest lists). Nothing else may differ.
		for _, d := range r.Manifests {
			if slices.Contains(c.Manifests, d) {
				continue
			}
			assert.Check(t, slices.ContainsFunc(ran, func(tu evidence.Tuple) bool { return tu.ManifestSHA256 == d && r.Matches(tu) }),
				"row %s: reports/gate-policy.yaml pins manifest sha256 %s, which neither CI's row pins nor a committed report of the row ran", r.Name, d)
		}
		r.Manifests = slices.DeleteFunc(slices.Clone(r.Manifests), func(d string) bool { return !slices.Contains(c.Manifests, d) })
		r.Pinned, c.Pinned = nil, nil
		// CI pins the OCI runtime its own runs' reports record; the
		// committed reports predate it, so the release gate cannot.
		if r.Runtime == "" {
			assert.Check(t, is.Equal(c.Runtime, "runc"), "row %s", r.Name)
			c.Runtime = ""
		}
		// CI may hold a required row informational (a row its workflow
		// runs only when dispatched), never the reverse.
		if c.Informational && !r.Informational {
			c.Informational = false
		}
		assert.Check(t, is.DeepEqual(c, r), "row %s differs between the policies", r.Name)
	}
	type binding struct {
		KeyID               string
		Rows                []string
		NotBefore, NotAfter time.Time
	}
	of := func(e evidence.TrustEntry) binding { return binding{e.KeyID, e.Rows, e.NotBefore, e.NotAfter} }
	var newest binding
	for _, e := range local.Trust {
		if e.NotAfter.After(newest.NotAfter) {
			newest = of(e)
		}
	}
	found := false
	for _, e := range ci.Trust {
		if !slices.ContainsFunc(e.Rows, func(r string) bool { return lanes[r] }) {
			continue
		}
		b := of(e)
		found = found || is.DeepEqual(b, newest)().Success()
		assert.Check(t, slices.ContainsFunc(local.Trust, func(l evidence.TrustEntry) bool { return is.DeepEqual(of(l), b)().Success() }),
			"CI trusts %s for lane rows %v from %s to %s, which reports/gate-policy.yaml does not", b.KeyID, b.Rows, b.NotBefore, b.NotAfter)
	}
	assert.Check(t, found, "CI does not trust the newest lane key of reports/gate-policy.yaml (%s)", newest.KeyID)
}

// committedTuples are the tuples of every committed report.
func committedTuples(t *testing.T) []evidence.Tuple {
	t.Helper()
	files, err := filepath.Glob("../../reports/linux-*/*/evidence.json")
	assert.NilError(t, err)
	var out []evidence.Tuple
	for _, f := range files {
		data, err := os.ReadFile(f)
		assert.NilError(t, err)
		var r evidence.Run
		assert.NilError(t, json.Unmarshal(data, &r))
		out = append(out, r.Tuple)
	}
	return out
}

// The CI gate job runs the policy's merge with no --key: trust comes from
// .github/gate-policy.yaml alone, as for make gate.
func TestCIGateJobUsesThePolicyOnly(t *testing.T) {
	wf, err := os.ReadFile("../../.github/workflows/qualify.yml")
	assert.NilError(t, err)
	i := bytes.Index(wf, []byte("\n  gate:\n"))
	assert.Assert(t, i >= 0, "qualify.yml has no gate job")
	job := string(wf[i:])
	assert.Check(t, is.Contains(job, "go run ./cmd/qualify merge --policy .github/gate-policy.yaml "))
	for _, line := range strings.Split(job, "\n") {
		if l := strings.TrimSpace(line); !strings.HasPrefix(l, "#") {
			assert.Check(t, !strings.Contains(l, "--key"), "the gate job passes --key: %s", l)
		}
	}
	mk, err := os.ReadFile("../../Makefile")
	assert.NilError(t, err)
	assert.Check(t, is.Contains(string(mk), "merge --policy reports/gate-policy.yaml"))
}
