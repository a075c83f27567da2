package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"github.com/qualbox/qualbox/platforms"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify/evidence"
	"github.com/qualbox/qualbox/qualify/scenario"
)

const repoRoot = "../.."

// The committed manifests, gate policy rows, workflow matrices and
// actionlint labels are exactly what the registry generates: a file
// edited by hand, or a registry edited without regenerating, fails here
// naming the file, its first differing line and the command to run.
func TestCommittedFilesAreGenerated(t *testing.T) {
	repo := os.DirFS(repoRoot)
	files, err := generate(repo, platforms.All())
	assert.NilError(t, err)
	problems, err := check(repo, files)
	assert.NilError(t, err)
	for _, p := range problems {
		t.Errorf("%s\n\tplatforms/ is the source of these lines: edit it, then run `go run ./internal/platformgen` (make generate) from the repository root and commit what it writes", p)
	}
}

// The committed gate policies, loaded as the gate loads them, hold each
// row as the registry says: profile, requirement, tuple pins, the
// digest of its manifest and its required scenarios; and each trust
// entry lists exactly the rows its key is trusted for.
func TestGeneratedPoliciesLoad(t *testing.T) {
	for _, p := range policies {
		t.Run(p.File, func(t *testing.T) {
			lp, err := evidence.LoadPolicy(filepath.Join(repoRoot, p.File), scenario.Default())
			assert.NilError(t, err)
			var want []evidence.Row
			var in []platforms.Entry
			for _, e := range platforms.Rows() {
				req := p.Requirement(e.Row)
				if req == platforms.Absent {
					continue
				}
				sum, err := evidence.FileSHA256(filepath.Join(repoRoot, "manifests", e.Manifest))
				assert.NilError(t, err)
				tu := e.Tuple
				runtime := ""
				if p.PinRuntime {
					prof, err := profiles.Load(e.Profile)
					assert.NilError(t, err)
					runtime = prof.Runtime
				}
				pins := []string{sum}
				if p.Ran && e.ReleaseRan != nil {
					ran, err := evidence.FileSHA256(filepath.Join(repoRoot, ranDir, e.ReleaseRan.File))
					assert.NilError(t, err)
					pins = append(pins, ran)
				}
				want = append(want, evidence.Row{Name: e.Name, Informational: req == platforms.Informational, Profile: e.Profile,
					Engine: tu.Engine, EngineCommit: tu.EngineCommit, Containerd: tu.Containerd, Runc: tu.Runc, StorageDriver: tu.StorageDriver, Runtime: runtime,
					ControllerOS: tu.ControllerOS, ControllerArch: tu.ControllerArch, OperatingSystem: tu.OperatingSystem,
					Manifests: pins, Scenarios: e.Required()})
				in = append(in, e)
			}
			got := slices.Clone(lp.Requirement.Rows)
			for i := range got {
				got[i].Pinned = nil
			}
			assert.DeepEqual(t, got, want)
			// Each trust entry lists the rows of this policy its key is
			// trusted for (platforms.Keys).
			keys := platforms.Keys()
			for _, e := range lp.Trust {
				i := slices.IndexFunc(keys, func(k platforms.Key) bool { return k.File == filepath.Base(e.KeyFile) })
				if !assert.Check(t, i >= 0, "%s trusts %s, no key of platforms.Keys", p.File, e.KeyFile) {
					continue
				}
				assert.Check(t, is.DeepEqual(e.Rows, platforms.TrustedRows(keys, keys[i], in)), "key %s", e.KeyFile)
			}
		})
	}
}

// The 2026-12-06 lane host key is trusted, in both policies, for the rows
// whose committed reports it signed (lanes A, B, C and D), not for the
// rows only an older key signed (lane C's tuple rows); the CI key, its
// signer's newest with no list of its own, for every hosted and Desktop
// row.
func TestKeysAreTrustedForTheirRowsOnly(t *testing.T) {
	for _, p := range policies {
		lp, err := evidence.LoadPolicy(filepath.Join(repoRoot, p.File), scenario.Default())
		assert.NilError(t, err)
		rows := map[string][]string{}
		for _, e := range lp.Trust {
			rows[filepath.Base(e.KeyFile)] = e.Rows
		}
		assert.Check(t, is.DeepEqual(rows["qualbox-ed25519-2026-12-06.pub"], []string{"lane-a", "lane-b", "lane-c", "lane-d", "lane-d-emulated-amd64", "lane-d-cgroupfs"}), p.File)
		if ci, ok := rows["qualbox-ci-ed25519.pub"]; ok {
			assert.Check(t, is.DeepEqual(ci, []string{"hosted-ubuntu", "hosted-ubuntu-arm", "desktop-native-arm64", "desktop-rosetta-amd64"}), p.File)
		}
	}
}

// A row added to the registry is trusted to its signer's newest key
// only, never to a retired one: a retired key's rows stay those it
// signed. When a newer key is added, the one it replaces keeps its rows.
func TestANewRowIsNotTrustedToARetiredKey(t *testing.T) {
	all := platforms.All()
	for _, add := range []struct {
		platform int
		row      platforms.Row
	}{{1, platforms.Row{Name: "ref-29.2.0", Manifest: "linux-x64.yaml", Engine: platforms.LaneC("ref-29.2.0"), Runner: all[1].Rows[1].Runner,
		DispatchOnly: true, Tuple: platforms.Tuple{Engine: "29.2.0"}, CIGate: platforms.Informational}},
		{1, platforms.Row{Name: "hosted-ubuntu-next", Manifest: all[1].Rows[4].Manifest, Engine: all[1].Rows[4].Engine, Runner: []string{"ubuntu-26.04"},
			Tuple: platforms.Tuple{OperatingSystem: "Ubuntu 26.04"}, CIGate: platforms.Informational}},
	} {
		all[add.platform].Rows = append(all[add.platform].Rows, add.row)
	}
	fsys := repoFiles(t)
	files, err := generate(fsys, all)
	assert.NilError(t, err)
	i := slices.IndexFunc(files, func(f file) bool { return f.Path == ".github/gate-policy.yaml" })
	assert.Assert(t, i >= 0)
	policy := string(files[i].Data)
	assert.Check(t, is.Contains(policy, "    rows: [lane-a, lane-b, lane-c, ref-29.1.3, ref-29.1.4, current-29.7.2, lane-d, lane-d-emulated-amd64] # frozen: signer lane-host\n"))
	assert.Check(t, is.Contains(policy, "    rows: [lane-a, lane-b, lane-c, ref-29.2.0, lane-d, lane-d-emulated-amd64, lane-d-cgroupfs] # generated: signer lane-host\n"))
	assert.Check(t, is.Contains(policy, "    rows: [hosted-ubuntu, hosted-ubuntu-next, hosted-ubuntu-arm, desktop-native-arm64, desktop-rosetta-amd64] # generated: signer ci\n"))

	// The lane host's next key, to sign lanes A, B and C and lane D, is
	// trusted for those and the new row; the 2026-12-06 key then keeps
	// the six it signed.
	keys := append(platforms.Keys(), platforms.Key{Signer: platforms.LaneHost, File: "qualbox-ed25519-next.pub", Rows: []string{"lane-a", "lane-b", "lane-c", "lane-d"}})
	replaceIn(t, fsys, ".github/gate-policy.yaml", "  - key: keys/qualbox-ci-ed25519.pub\n",
		"  - key: ../reports/keys/qualbox-ed25519-next.pub\n    rows: []\n  - key: keys/qualbox-ci-ed25519.pub\n")
	files, err = generateWith(fsys, all, keys)
	assert.NilError(t, err)
	policy = string(files[i].Data)
	assert.Check(t, is.Contains(policy, "    rows: [lane-a, lane-b, lane-c, lane-d, lane-d-emulated-amd64, lane-d-cgroupfs] # frozen: signer lane-host\n"))
	assert.Check(t, is.Contains(policy, "  - key: ../reports/keys/qualbox-ed25519-next.pub\n    rows: [lane-a, lane-b, lane-c, ref-29.2.0, lane-d] # generated: signer lane-host\n"))
}

// repoFiles is the part of the repository generate reads and check
// compares, as an in-memory file system.
func repoFiles(t *testing.T) fstest.MapFS {
	t.Helper()
	fsys := fstest.MapFS{}
	names, err := filepath.Glob(filepath.Join(repoRoot, "manifests", "*.yaml"))
	assert.NilError(t, err)
	for _, n := range names {
		fsys["manifests/"+filepath.Base(n)] = readFile(t, n)
	}
	ran, err := filepath.Glob(filepath.Join(repoRoot, filepath.FromSlash(ranDir), "*.yaml"))
	assert.NilError(t, err)
	for _, n := range ran {
		fsys[ranDir+"/"+filepath.Base(n)] = readFile(t, n)
	}
	for _, f := range []string{policies[0].File, policies[1].File, workflowFile, actionlintFile, "go.mod"} {
		fsys[f] = readFile(t, filepath.Join(repoRoot, filepath.FromSlash(f)))
	}
	return fsys
}

func readFile(t *testing.T, name string) *fstest.MapFile {
	t.Helper()
	data, err := os.ReadFile(name)
	assert.NilError(t, err)
	return &fstest.MapFile{Data: data, Mode: 0o644}
}

func replaceIn(t *testing.T, fsys fstest.MapFS, name, old, new string) {
	t.Helper()
	f := fsys[name]
	assert.Assert(t, f != nil, "no %s", name)
	assert.Assert(t, bytes.Contains(f.Data, []byte(old)), "%s has no %q", name, old)
	f.Data = bytes.Replace(f.Data, []byte(old), []byte(new), 1)
}

// Every kind of hand edit of a generated file is caught, naming the file
// and its first differing line; an edit of a policy's or the workflow's
// own, hand-written lines is not an edit of generated lines.
func TestHandEditsAreCaught(t *testing.T) {
	for _, tc := range []struct {
		name      string
		edit      func(t *testing.T, fsys fstest.MapFS)
		path, why string
		line      string // the committed line check reports
	}{
		{"manifest param", func(t *testing.T, fsys fstest.MapFS) {
			replaceIn(t, fsys, "manifests/linux-x64.yaml", "allocMiB: 128", "allocMiB: 64")
		}, "manifests/linux-x64.yaml", "edited by hand", "      allocMiB: 64"},
		{"manifest comment", func(t *testing.T, fsys fstest.MapFS) {
			replaceIn(t, fsys, "manifests/linux-x64-cgroupv1.yaml", "with a guest image built", "with a guest image made")
		}, "manifests/linux-x64-cgroupv1.yaml", "edited by hand", "# socket, with a guest image made for the run and removed afterwards."},
		{"policy row", func(t *testing.T, fsys fstest.MapFS) {
			replaceIn(t, fsys, "reports/gate-policy.yaml", "  - name: lane-d\n    profile: linux-arm64\n    required: true\n", "  - name: lane-d\n    profile: linux-arm64\n    required: false\n")
		}, "reports/gate-policy.yaml", "edited by hand", "    required: false"},
		{"policy trust rows", func(t *testing.T, fsys fstest.MapFS) {
			replaceIn(t, fsys, ".github/gate-policy.yaml", ", desktop-rosetta-amd64] # generated: signer ci", "] # generated: signer ci")
		}, ".github/gate-policy.yaml", "edited by hand", "    rows: [hosted-ubuntu, hosted-ubuntu-arm, desktop-native-arm64] # generated: signer ci"},
		// Every trust entry's row list is the registry's (platforms.Keys),
		// the retired keys' frozen lists included, marked or not.
		{"retired trust rows widened", func(t *testing.T, fsys fstest.MapFS) {
			replaceIn(t, fsys, "reports/gate-policy.yaml", "    rows: [lane-a, lane-b, lane-c] # frozen: signer lane-host\n    notBefore: 2026-12-01",
				"    rows: [lane-a, lane-b, lane-c, ref-29.1.4] # frozen: signer lane-host\n    notBefore: 2026-12-01")
		}, "reports/gate-policy.yaml", "edited by hand", "    rows: [lane-a, lane-b, lane-c, ref-29.1.4] # frozen: signer lane-host"},
		{"newest trust rows widened, marker dropped", func(t *testing.T, fsys fstest.MapFS) {
			replaceIn(t, fsys, ".github/gate-policy.yaml", "    rows: [lane-a, lane-b, lane-c, lane-d, lane-d-emulated-amd64, lane-d-cgroupfs] # generated: signer lane-host\n",
				"    rows: [lane-a, lane-b, lane-c, ref-29.1.4, lane-d, lane-d-emulated-amd64, lane-d-cgroupfs]\n")
		}, ".github/gate-policy.yaml", "edited by hand", "    rows: [lane-a, lane-b, lane-c, ref-29.1.4, lane-d, lane-d-emulated-amd64, lane-d-cgroupfs]"},
		{"oldest trust rows narrowed", func(t *testing.T, fsys fstest.MapFS) {
			replaceIn(t, fsys, "reports/gate-policy.yaml", "    rows: [lane-a, lane-b] # frozen: signer lane-host\n", "    rows: [lane-a] # frozen: signer lane-host\n")
		}, "reports/gate-policy.yaml", "edited by hand", "    rows: [lane-a] # frozen: signer lane-host"},
		{"workflow row", func(t *testing.T, fsys fstest.MapFS) {
			replaceIn(t, fsys, workflowFile, "            tuple: ref-29.1.3\n", "            tuple: ref-29.1.4\n")
		}, workflowFile, "edited by hand", "            tuple: ref-29.1.4"},
		{"actionlint label", func(t *testing.T, fsys fstest.MapFS) {
			replaceIn(t, fsys, actionlintFile, "    - qualbox-desktop\n", "")
		}, actionlintFile, "edited by hand", ""},
		{"stray manifest", func(t *testing.T, fsys fstest.MapFS) {
			fsys["manifests/linux-x64-weakened.yaml"] = &fstest.MapFile{Data: fsys["manifests/linux-x64.yaml"].Data}
		}, "manifests/linux-x64-weakened.yaml", "not generated by any platform", ""},
		{"missing manifest", func(t *testing.T, fsys fstest.MapFS) {
			delete(fsys, "manifests/linux-arm64.yaml")
		}, "manifests/linux-arm64.yaml", "missing", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := repoFiles(t)
			files, err := generate(fsys, platforms.All())
			assert.NilError(t, err)
			problems, err := check(fsys, files)
			assert.NilError(t, err)
			assert.DeepEqual(t, problems, []Problem(nil))

			tc.edit(t, fsys)
			files, err = generate(fsys, platforms.All())
			assert.NilError(t, err)
			problems, err = check(fsys, files)
			assert.NilError(t, err)
			assert.Assert(t, is.Len(problems, 1), "%v", problems)
			p := problems[0]
			assert.Check(t, is.Equal(p.Path, tc.path))
			assert.Check(t, is.Contains(p.Why, tc.why))
			if tc.line != "" {
				assert.Check(t, is.Equal(p.Got, tc.line))
				assert.Check(t, p.Line > 0 && p.Want != p.Got, "%+v", p)
			}
		})
	}

	// The hand-written parts of a policy and of the workflow are theirs.
	fsys := repoFiles(t)
	replaceIn(t, fsys, ".github/gate-policy.yaml", "maxReportAge: 24h", "maxReportAge: 12h")
	replaceIn(t, fsys, workflowFile, "timeout-minutes: 90", "timeout-minutes: 80")
	files, err := generate(fsys, platforms.All())
	assert.NilError(t, err)
	problems, err := check(fsys, files)
	assert.NilError(t, err)
	assert.DeepEqual(t, problems, []Problem(nil))
}

// A file whose generated region lost its markers, or whose trust entry
// names a key the registry does not have or keeps its row list away from
// its key, cannot be generated: the error names the file and the region,
// and shows the marker lines, or names the file, the line and the key.
func TestMissingMarkersAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name, file, old, new, want string
	}{
		{"no END", "reports/gate-policy.yaml", "  # END generated rows\n", "", `reports/gate-policy.yaml: generated region "rows": no line "# END generated rows"`},
		{"two BEGIN", workflowFile, "          # BEGIN generated report rows (platforms/: go run ./internal/platformgen)\n",
			"          # BEGIN generated report rows (platforms/: go run ./internal/platformgen)\n          # BEGIN generated report rows (platforms/: go run ./internal/platformgen)\n",
			`generated region "report rows": marker "# BEGIN generated report rows (platforms/: go run ./internal/platformgen)" is on lines`},
		{"no BEGIN", ".github/gate-policy.yaml", "  # BEGIN generated rows (platforms/: go run ./internal/platformgen)\n", "", `no line "# BEGIN generated rows`},
		{"a trust key not of the registry", ".github/gate-policy.yaml", "  - key: keys/qualbox-ci-ed25519.pub\n", "  - key: keys/qualbox-ci-ed25519-2027.pub\n",
			"trust entry: key keys/qualbox-ci-ed25519-2027.pub is not a key of the registry"},
		{"a trust row list away from its key", "reports/gate-policy.yaml", "    rows: [lane-a, lane-b] # frozen: signer lane-host\n    notBefore: 2026-11-29T00:00:00Z\n",
			"    notBefore: 2026-11-29T00:00:00Z\n    rows: [lane-a, lane-b] # frozen: signer lane-host\n",
			"trust entry: a row list not directly below a `- key: PATH` line"},
		{"no row of the policy for a trusted key", "reports/gate-policy.yaml", "harness:\n",
			"  - key: ../.github/keys/qualbox-ci-ed25519.pub\n    rows: []\n    notBefore: 2026-12-02T00:00:00Z\n    notAfter: 2027-12-02T00:00:00Z\nharness:\n",
			"trust entry: key ../.github/keys/qualbox-ci-ed25519.pub is trusted for no row of this policy: remove its entry"},
		{"no trust row list at all", "reports/gate-policy.yaml", "    rows: [", "    signs: [",
			"reports/gate-policy.yaml: no trust entry has a row list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := repoFiles(t)
			replaceIn(t, fsys, tc.file, tc.old, tc.new)
			if tc.name == "no trust row list at all" {
				f := fsys[tc.file]
				f.Data = bytes.ReplaceAll(f.Data, []byte(tc.old), []byte(tc.new))
			}
			_, err := generate(fsys, platforms.All())
			assert.ErrorContains(t, err, tc.want)
			var re *RegionError
			if errors.As(err, &re) {
				assert.Check(t, is.Contains(err.Error(), "# END generated "+re.Region))
			}
			// A trust entry's error names the file and the line: the key
			// line of an unknown key, the misplaced row list.
			var te *TrustError
			if strings.HasPrefix(tc.name, "a trust") && assert.Check(t, errors.As(err, &te), "%T", err) {
				lines := strings.Split(string(fsys[tc.file].Data), "\n")
				assert.Check(t, is.Equal(te.File, tc.file))
				assert.Assert(t, te.Line > 0 && te.Line <= len(lines), "%d", te.Line)
				at := map[string]string{"a trust key not of the registry": "- key: keys/qualbox-ci-ed25519-2027.pub",
					"a trust row list away from its key": "rows: [lane-a, lane-b]"}[tc.name]
				assert.Check(t, is.Contains(lines[te.Line-1], at))
			}
		})
	}
}

// A registry entry whose parameters the harness refuses, or that breaks
// the registry's own rules, generates nothing and is named.
func TestInvalidRegistryGeneratesNothing(t *testing.T) {
	all := platforms.All()
	all[1].Manifests[0].Overrides = append(all[1].Manifests[0].Overrides, platforms.Override{Scenario: "memory-exhaustion",
		Params: []platforms.Param{{Key: "memoryBytes", YAML: "lots"}, {Key: "allocMiB", YAML: "128"}}})
	_, err := generate(repoFiles(t), all)
	assert.ErrorContains(t, err, "platform linux-x64 generates a manifest the harness refuses: manifest manifests/linux-x64.yaml:")
	assert.ErrorContains(t, err, "memoryBytes")

	all = platforms.All()
	all[0].Rows[0].CIGate = platforms.Absent
	_, err = generate(repoFiles(t), all)
	var pe *platforms.Error
	assert.Assert(t, errors.As(err, &pe), "%v", err)
}

// A row's release-ran manifest must be there and run exactly the row's
// manifest less what it lacks: a stale Lacks list, or a file that is not
// what the committed reports ran, generates nothing and names the row.
func TestReleaseRanMustMatchTheReports(t *testing.T) {
	all := platforms.All()
	var row *platforms.Row
	for i, r := range all[1].Rows {
		if r.Name == "ref-29.1.4" {
			row = &all[1].Rows[i]
		}
	}
	assert.Assert(t, row != nil && row.ReleaseRan != nil, "ref-29.1.4 has a release-ran manifest")
	row.ReleaseRan.Lacks = []string{"desktop-admission", "engine-restart"}
	_, err := generate(repoFiles(t), all)
	assert.ErrorContains(t, err, "row ref-29.1.4: reports/manifests/linux-x64.yaml runs admission,")
	assert.ErrorContains(t, err, "less desktop-admission, engine-restart runs admission,")

	fsys := repoFiles(t)
	delete(fsys, ranDir+"/linux-x64.yaml")
	_, err = generate(fsys, platforms.All())
	assert.ErrorContains(t, err, ": the manifest its committed reports ran: open reports/manifests/linux-x64.yaml")
}

// The command run from a copy of the repository's generated files: -check
// names a hand-edited file and the command to run; the command rewrites
// that file alone, after which -check passes. Outside the repository root
// it refuses to run.
func TestCommandRestoresAHandEdit(t *testing.T) {
	dir := t.TempDir()
	fsys := repoFiles(t)
	assert.NilError(t, os.CopyFS(dir, fsys))
	t.Chdir(dir)
	edited := filepath.Join("manifests", "linux-arm64.yaml")
	data, err := os.ReadFile(edited)
	assert.NilError(t, err)
	assert.NilError(t, os.WriteFile(edited, bytes.Replace(data, []byte("pids: 32"), []byte("pids: 4096"), 1), 0o644))

	var stdout, stderr bytes.Buffer
	assert.Equal(t, run([]string{"-check"}, &stdout, &stderr), 1)
	assert.Check(t, is.Contains(stderr.String(), "manifests/linux-arm64.yaml: not what platforms/ generates (edited by hand?) (line "))
	assert.Check(t, is.Contains(stderr.String(), `committed "      pids: 4096"`))
	assert.Check(t, is.Contains(stderr.String(), "run go run ./internal/platformgen (make generate) and commit what it writes"))

	stdout.Reset()
	stderr.Reset()
	assert.Equal(t, run(nil, &stdout, &stderr), 0, stderr.String())
	assert.Check(t, is.Equal(stdout.String(), "wrote manifests/linux-arm64.yaml\n"))
	restored, err := os.ReadFile(edited)
	assert.NilError(t, err)
	assert.Check(t, bytes.Equal(restored, data))
	st, err := os.Stat(edited)
	assert.NilError(t, err)
	assert.Check(t, is.Equal(st.Mode().Perm(), os.FileMode(0o644)))
	entries, err := os.ReadDir("manifests")
	assert.NilError(t, err)
	for _, e := range entries {
		assert.Check(t, !strings.HasPrefix(e.Name(), "."), "a temporary file is left: %s", e.Name())
	}
	assert.Equal(t, run([]string{"-check"}, &stdout, &stderr), 0, stderr.String())

	t.Chdir(t.TempDir())
	stderr.Reset()
	assert.Equal(t, run(nil, &stdout, &stderr), 2)
	assert.Check(t, is.Contains(stderr.String(), "run it from the root of the qualbox repository"))
}

// Forger: a trust entry whose row list the generator does not write (a
// block list, a flow mapping), or whose key path names a file of the
// registry's name outside its signer's key directory, would keep a hand
// edit past TestCommittedFilesAreGenerated: widening a key's rows, adding
// a retired key back for a row, or trusting another public key under a
// trusted key's name. Each is refused, naming the file, line and key.
func TestTrustEntriesTheGeneratorDoesNotWriteAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name, file, old, new, want string
	}{
		{"block list", "reports/gate-policy.yaml",
			"    rows: [lane-a, lane-b, lane-c] # frozen: signer lane-host\n",
			"    rows:\n      - lane-a\n      - lane-b\n      - lane-c\n      - lane-d\n",
			"key keys/qualbox-ed25519-2026-12-01.pub: rows [lane-a lane-b lane-c lane-d], but the key is trusted for [lane-a lane-b lane-c]"},
		{"flow mapping", "reports/gate-policy.yaml",
			"  - key: keys/qualbox-ed25519-2026-12-06.pub\n",
			"  - {key: keys/qualbox-ed25519.pub, rows: [lane-d], notBefore: 2026-12-06T00:00:00Z, notAfter: 2026-12-06T23:59:59Z}\n  - key: keys/qualbox-ed25519-2026-12-06.pub\n",
			"key keys/qualbox-ed25519.pub: rows [lane-d], but the key is trusted for [lane-a lane-b]"},
		{"another directory", ".github/gate-policy.yaml",
			"  - key: ../reports/keys/qualbox-ed25519-2026-12-06.pub\n",
			"  - key: keys/qualbox-ed25519-2026-12-06.pub\n",
			"key keys/qualbox-ed25519-2026-12-06.pub is .github/keys/qualbox-ed25519-2026-12-06.pub, but signer lane-host's keys are under reports/keys/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := repoFiles(t)
			replaceIn(t, fsys, tc.file, tc.old, tc.new)
			_, err := generate(fsys, platforms.All())
			var te *TrustError
			assert.Assert(t, errors.As(err, &te), "%v", err)
			assert.Check(t, is.Equal(te.File, tc.file))
			assert.Check(t, te.Line > 0)
			assert.Check(t, is.Contains(te.Problem, tc.want))
		})
	}
}

// The key directories hold exactly the registry's keys, each under its
// signer's directory: a public key dropped beside them that no policy
// names, or a registry key without its file, fails here naming it.
func TestKeyDirectoriesHoldTheRegistrysKeys(t *testing.T) {
	var got, want []string
	for _, dir := range []string{"reports/keys", ".github/keys"} {
		names, err := filepath.Glob(filepath.Join(repoRoot, filepath.FromSlash(dir), "*"))
		assert.NilError(t, err)
		for _, n := range names {
			got = append(got, dir+"/"+filepath.Base(n))
		}
	}
	for _, k := range platforms.Keys() {
		want = append(want, k.Path())
	}
	slices.Sort(got)
	slices.Sort(want)
	assert.Check(t, is.DeepEqual(got, want))
}
