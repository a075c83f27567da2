package main

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/platforms"
	"github.com/qualbox/qualbox/profiles"
)

// workflowRow is one row of the qualification matrix as CI runs it.
type workflowRow struct{ Name, Profile, Manifest string }

// workflowRows collects every strategy.matrix.include entry with a row
// key from a workflow file.
func workflowRows(workflow []byte) ([]workflowRow, error) {
	var wf struct {
		Jobs map[string]struct {
			Strategy struct {
				Matrix struct {
					Include []map[string]any `yaml:"include"`
				} `yaml:"matrix"`
			} `yaml:"strategy"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(workflow, &wf); err != nil {
		return nil, err
	}
	var rows []workflowRow
	for job, j := range wf.Jobs {
		for _, inc := range j.Strategy.Matrix.Include {
			name, ok := inc["row"].(string)
			if !ok {
				continue
			}
			profile, _ := inc["profile"].(string)
			manifest, _ := inc["manifest"].(string)
			if profile == "" || manifest == "" {
				return nil, fmt.Errorf("job %s: row %s needs profile and manifest", job, name)
			}
			rows = append(rows, workflowRow{name, profile, manifest})
		}
	}
	sort.Slice(rows, func(i, k int) bool { return rows[i].Name < rows[k].Name })
	return rows, nil
}

// policyRow is the part of a gate policy row the drift check compares.
type policyRow struct {
	Name      string   `yaml:"name"`
	Profile   string   `yaml:"profile"`
	Manifests []string `yaml:"manifests"`
}

// checkRows returns every way the workflow's rows, the CI gate policy's
// rows (manifest paths relative to the policy's directory, policyDir
// relative to the repository) and the profiles drift apart.
func checkRows(workflow, policy []byte, policyDir string, profileNames []string) []string {
	var out []string
	rows, err := workflowRows(workflow)
	if err != nil {
		return []string{"workflow: " + err.Error()}
	}
	var pol struct {
		Rows []policyRow `yaml:"rows"`
	}
	if err := yaml.Unmarshal(policy, &pol); err != nil {
		return []string{"gate policy: " + err.Error()}
	}
	seen := map[string]bool{}
	covered := map[string]bool{}
	for _, r := range rows {
		if seen[r.Name] {
			out = append(out, fmt.Sprintf("workflow row %s appears twice", r.Name))
		}
		seen[r.Name] = true
		covered[r.Profile] = true
		if !slices.Contains(profileNames, r.Profile) {
			out = append(out, fmt.Sprintf("workflow row %s: profile %s is not in profiles/", r.Name, r.Profile))
		}
		i := slices.IndexFunc(pol.Rows, func(p policyRow) bool { return p.Name == r.Name })
		if i < 0 {
			out = append(out, fmt.Sprintf("workflow row %s is not a row of the gate policy", r.Name))
			continue
		}
		p := pol.Rows[i]
		var manifests []string
		for _, m := range p.Manifests {
			manifests = append(manifests, path.Clean(path.Join(policyDir, m)))
		}
		if p.Profile != r.Profile || !slices.Contains(manifests, r.Manifest) {
			out = append(out, fmt.Sprintf("row %s: workflow runs %s with %s, gate policy requires %s with %v", r.Name, r.Profile, r.Manifest, p.Profile, manifests))
		}
	}
	for _, p := range pol.Rows {
		if !seen[p.Name] {
			out = append(out, fmt.Sprintf("gate policy row %s has no workflow row", p.Name))
		}
	}
	for _, name := range profileNames {
		if !covered[name] {
			out = append(out, fmt.Sprintf("profile %s has no workflow row", name))
		}
	}
	return out
}

func readRepo(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile("../../" + name)
	assert.NilError(t, err)
	return data
}

// The workflow runs the registry's rows (platforms/, README.md "Adding a
// host row"), each with its profile and manifest; every profile has a CI
// row, every CI row a profile and a gate policy row with the same profile
// and manifest.
func TestWorkflowRowsMatchProfiles(t *testing.T) {
	workflow, policy := readRepo(t, ".github/workflows/qualify.yml"), readRepo(t, ".github/gate-policy.yaml")
	rows, err := workflowRows(workflow)
	assert.NilError(t, err)
	var want []workflowRow
	for _, e := range platforms.Rows() {
		want = append(want, workflowRow{e.Name, e.Profile, "manifests/" + e.Manifest})
	}
	sort.Slice(want, func(i, k int) bool { return want[i].Name < want[k].Name })
	assert.DeepEqual(t, rows, want)
	assert.Assert(t, len(rows) >= len(profiles.Names()), "rows: %v", rows)
	assert.DeepEqual(t, checkRows(workflow, policy, ".github", profiles.Names()), []string(nil))
}

// The check fails on deliberate drift: a profile without a row, a row of
// an unknown profile, a row the policy does not require, a policy row no
// job runs and a manifest that differs between the two.
func TestWorkflowRowDriftIsCaught(t *testing.T) {
	workflow, policy := readRepo(t, ".github/workflows/qualify.yml"), readRepo(t, ".github/gate-policy.yaml")
	names := profiles.Names()
	edit := func(data []byte, old, new string) []byte {
		t.Helper()
		assert.Assert(t, bytes.Contains(data, []byte(old)), "no %q", old)
		return bytes.Replace(data, []byte(old), []byte(new), 1)
	}
	withoutRosetta := edit(workflow, "          - row: desktop-rosetta-amd64\n", "          - skipped: desktop-rosetta-amd64\n")
	for _, tc := range []struct {
		name             string
		workflow, policy []byte
		profiles         []string
		want             string
	}{
		{"profile added without a row", workflow, policy, append(slices.Clone(names), "linux-riscv64"), "profile linux-riscv64 has no workflow row"},
		{"row removed", withoutRosetta, policy, names, "gate policy row desktop-rosetta-amd64 has no workflow row"},
		{"row removed, profile uncovered", withoutRosetta, policy, names, "profile desktop-apple-virtualization-rosetta-amd64 has no workflow row"},
		{"row of an unknown profile", edit(workflow, "profile: linux-x64\n", "profile: linux-x86\n"), policy, names, "profile linux-x86 is not in profiles/"},
		{"manifest drift", workflow, edit(policy, "[../manifests/linux-x64-cgroupv1-lane-b.yaml]", "[../manifests/linux-x64-cgroupv1.yaml]"), names, "row lane-b: workflow runs linux-x64-cgroupv1 with manifests/linux-x64-cgroupv1-lane-b.yaml"},
		{"row not in the policy", edit(workflow, "- row: lane-a\n", "- row: lane-z\n"), policy, names, "workflow row lane-z is not a row of the gate policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkRows(tc.workflow, tc.policy, ".github", tc.profiles)
			assert.Assert(t, slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, tc.want) }), "want %q in %v", tc.want, got)
		})
	}
}

// desktopRowProblems returns every way the workflow's Desktop rows stray
// from running their committed manifest with the guest image archive that
// the guest-images job built: a row whose arch is not its profile's image
// architecture, a job that does not need guest-images or whose steps do
// not pass --image-archive of the row's arch, and any sed in the workflow
// (a manifest edited on the runner no longer matches the gate's pin).
func desktopRowProblems(workflow []byte) []string {
	var wf struct {
		Jobs map[string]struct {
			Needs    []string `yaml:"needs"`
			Strategy struct {
				Matrix struct {
					Include []map[string]any `yaml:"include"`
				} `yaml:"matrix"`
			} `yaml:"strategy"`
			Steps []struct {
				Run string `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(workflow, &wf); err != nil {
		return []string{"workflow: " + err.Error()}
	}
	var out []string
	if regexp.MustCompile(`(^|[^A-Za-z0-9_-])sed\s`).Match(workflow) {
		out = append(out, "the workflow runs sed")
	}
	rows := 0
	for name, j := range wf.Jobs {
		var runs strings.Builder
		for _, s := range j.Steps {
			runs.WriteString(s.Run + "\n")
		}
		for _, inc := range j.Strategy.Matrix.Include {
			profile, _ := inc["profile"].(string)
			if !strings.HasPrefix(profile, "desktop-") {
				continue
			}
			rows++
			p, err := profiles.Load(profile)
			if err != nil {
				out = append(out, fmt.Sprintf("job %s: %v", name, err))
				continue
			}
			if arch, _ := inc["arch"].(string); arch != p.Image.Architecture {
				out = append(out, fmt.Sprintf("job %s row %v: arch %q, profile %s requires image architecture %s", name, inc["row"], arch, profile, p.Image.Architecture))
			}
			if !slices.Contains(j.Needs, "guest-images") {
				out = append(out, fmt.Sprintf("job %s runs Desktop rows but does not need guest-images", name))
			}
			if !strings.Contains(runs.String(), `--image-archive "$RUNNER_TEMP/guest-images/qualbox-guest-linux-$ARCH.tar"`) || !strings.Contains(runs.String(), `--manifest "${{ matrix.manifest }}"`) {
				out = append(out, fmt.Sprintf("job %s does not run the row's manifest with --image-archive of its arch", name))
			}
		}
	}
	if rows == 0 {
		out = append(out, "no Desktop rows")
	}
	return out
}

// The Desktop rows run their committed manifests with the release's guest
// image archive of their profile's architecture (README.md "Mac
// handoff"), and the check catches each way of straying.
func TestWorkflowDesktopRowsLoadTheArchive(t *testing.T) {
	workflow := readRepo(t, ".github/workflows/qualify.yml")
	assert.DeepEqual(t, desktopRowProblems(workflow), []string(nil))
	edit := func(old, new string) []byte {
		t.Helper()
		assert.Assert(t, bytes.Contains(workflow, []byte(old)), "no %q", old)
		return bytes.Replace(workflow, []byte(old), []byte(new), 1)
	}
	for _, tc := range []struct {
		name     string
		workflow []byte
		want     string
	}{
		{"arch swapped", edit("            arch: arm64\n", "            arch: amd64\n"), "row desktop-native-arm64: arch \"amd64\", profile desktop-apple-virtualization-native-arm64 requires image architecture arm64"},
		{"no needs", edit("    needs: [guest-images]\n", ""), "does not need guest-images"},
		{"no archive", edit(`--image-archive "$RUNNER_TEMP/guest-images/qualbox-guest-linux-$ARCH.tar"`, ""), "does not run the row's manifest with --image-archive"},
		{"sed on a manifest", edit("      - name: build qualify\n", "      - run: sed -i s/build/x/ manifests/x.yaml\n      - name: build qualify\n"), "the workflow runs sed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := desktopRowProblems(tc.workflow)
			assert.Assert(t, slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, tc.want) }), "want %q in %v", tc.want, got)
		})
	}
}
