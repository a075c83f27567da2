package main

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/qualbox/qualbox/platforms"
	"github.com/qualbox/qualbox/profiles"
	"github.com/qualbox/qualbox/qualify/manifest"
	"github.com/qualbox/qualbox/qualify/scenario"
)

// gatePolicy is one gate policy file and how it holds a row.
type gatePolicy struct {
	// File is the policy's path from the repository root.
	File string
	// Requirement returns how the policy holds the row.
	Requirement func(platforms.Row) platforms.Requirement
	// Note returns a comment line the policy adds below the row's About,
	// or "".
	Note func(platforms.Row) string
	// PinRuntime pins each row's OCI runtime, its profile's: only reports
	// that record the runtime (Run.Runtime) can match such a row, which
	// the committed reports made before it was recorded do not.
	PinRuntime bool
	// Ran pins, beside each row's manifest, the one its committed reports
	// ran (Row.ReleaseRan): the release gate over the committed reports.
	// The row's scenarios stay its whole required list; the gate requires
	// of a report only those its own pinned manifest lists or its
	// catalogue has (evidence.ScenarioAddedIn).
	Ran bool
}

// policies are the two gate policies: CI's, over each workflow run's
// reports, and the release gate over the committed reports.
var policies = []gatePolicy{
	{".github/gate-policy.yaml", func(r platforms.Row) platforms.Requirement { return r.CIGate }, func(r platforms.Row) string {
		if r.DispatchOnly {
			return "The workflow runs it only when dispatched."
		}
		return ""
	}, true, false},
	{"reports/gate-policy.yaml", func(r platforms.Row) platforms.Requirement { return r.ReleaseGate }, func(r platforms.Row) string {
		if r.ReleaseRan == nil {
			return ""
		}
		return fmt.Sprintf("Also pinned: %s/%s, which its committed\nreports ran; they predate %s, which the gate\nrequires of reports of the current manifest and\nof every report whose catalogue has them.",
			ranDir, r.ReleaseRan.File, strings.Join(r.ReleaseRan.Lacks, ", "))
	}, false, true},
}

// ranDir is where the manifests committed reports ran are kept
// (platforms.Ran), from the repository root.
const ranDir = "reports/manifests"

// checkRan returns an error unless repo holds e's ReleaseRan manifest,
// parsing as the harness parses it, and it runs exactly e's manifest's
// scenarios less the ones it lacks: the row's comment says what the
// pinned copy lacks, and a copy that is not the manifest less those is
// not what the committed reports ran.
func checkRan(repo fs.FS, e platforms.Entry) error {
	name := path.Join(ranDir, e.ReleaseRan.File)
	data, err := fs.ReadFile(repo, name)
	if err != nil {
		return fmt.Errorf("row %s: the manifest its committed reports ran: %w", e.Name, err)
	}
	m, err := manifest.Parse(name, data, scenario.Default())
	if err != nil {
		return fmt.Errorf("row %s: %w", e.Name, err)
	}
	var got, want []string
	for _, s := range m.Scenarios {
		got = append(got, s.Name)
	}
	for _, s := range e.Scenarios {
		if !slices.Contains(e.ReleaseRan.Lacks, s.Name) {
			want = append(want, s.Name)
		}
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("row %s: %s runs %s; its manifest %s less %s runs %s", e.Name, name, strings.Join(got, ", "),
			e.Manifest, strings.Join(e.ReleaseRan.Lacks, ", "), strings.Join(want, ", "))
	}
	return nil
}

// renderPolicy returns the policy file src with its generated rows region
// made from entries and its trust entries' row lists from keys (each
// key's rows among the policy's); repo holds the manifests committed
// reports ran (checkRan).
func renderPolicy(p gatePolicy, repo fs.FS, src []byte, entries []platforms.Entry, keys []platforms.Key) ([]byte, error) {
	var b strings.Builder
	var in []platforms.Entry
	for _, e := range entries {
		req := p.Requirement(e.Row)
		if req == platforms.Absent {
			continue
		}
		in = append(in, e)
		comment(&b, "", e.About)
		comment(&b, "", p.Note(e.Row))
		fmt.Fprintf(&b, "- name: %s\n  profile: %s\n  required: %t\n", e.Name, e.Profile, req == platforms.Required)
		t := e.Tuple
		if t.Engine != "" {
			fmt.Fprintf(&b, "  engine: %s\n", strconv.Quote(t.Engine))
		}
		runtime := ""
		if p.PinRuntime {
			prof, err := profiles.Load(e.Profile)
			if err != nil {
				return nil, fmt.Errorf("row %s: %w", e.Name, err)
			}
			runtime = prof.Runtime
		}
		for _, f := range [][2]string{
			{"engineCommit", t.EngineCommit}, {"containerd", t.Containerd}, {"runc", t.Runc}, {"storageDriver", t.StorageDriver},
			{"runtime", runtime}, {"operatingSystem", t.OperatingSystem}, {"controllerOS", t.ControllerOS}, {"controllerArch", t.ControllerArch},
		} {
			if f[1] != "" {
				fmt.Fprintf(&b, "  %s: %s\n", f[0], scalar(f[1]))
			}
		}
		rel, err := relPath(path.Dir(p.File), path.Join("manifests", e.Manifest))
		if err != nil {
			return nil, err
		}
		pins := []string{scalar(rel)}
		if p.Ran && e.ReleaseRan != nil {
			if err := checkRan(repo, e); err != nil {
				return nil, err
			}
			ran, err := relPath(path.Dir(p.File), path.Join(ranDir, e.ReleaseRan.File))
			if err != nil {
				return nil, err
			}
			pins = append(pins, scalar(ran))
		}
		fmt.Fprintf(&b, "  manifests: [%s]\n", strings.Join(pins, ", "))
		b.WriteString(flowList("  scenarios: ", e.Required()))
	}
	if len(in) == 0 {
		return nil, fmt.Errorf("%s: no row of the registry is in this policy", p.File)
	}
	out, err := splice(p.File, src, "rows", b.String())
	if err != nil {
		return nil, err
	}
	return spliceTrust(p.File, out, keys, func(k platforms.Key) []string { return platforms.TrustedRows(keys, k, in) })
}

// flowList writes key and items as a YAML flow sequence, wrapped before
// 100 columns with continuation lines indented two more than key.
func flowList(key string, items []string) string {
	const width = 100
	indent := strings.Repeat(" ", len(key)-len(strings.TrimLeft(key, " "))+2)
	var b strings.Builder
	line := key + "["
	for i, it := range items {
		word := it
		if i < len(items)-1 {
			word += ","
		} else {
			word += "]"
		}
		switch {
		case strings.HasSuffix(line, "["):
			line += word
		case len(line)+1+len(word) > width:
			b.WriteString(line + "\n")
			line = indent + word
		default:
			line += " " + word
		}
	}
	return b.String() + line + "\n"
}

// scalar returns s as a YAML scalar: plain when YAML reads it back as the
// same string, else quoted.
func scalar(s string) string {
	out, err := yaml.Marshal(s)
	if err != nil {
		return strconv.Quote(s)
	}
	return strings.TrimSuffix(string(out), "\n")
}

// relPath returns the slash path of target relative to the directory
// dir, both relative to the repository root.
func relPath(dir, target string) (string, error) {
	if dir == "." || dir == "" {
		return target, nil
	}
	up := strings.Repeat("../", strings.Count(dir, "/")+1)
	if strings.Contains(dir, "..") {
		return "", fmt.Errorf("policy directory %q leaves the repository", dir)
	}
	if below, ok := strings.CutPrefix(target, dir+"/"); ok {
		return below, nil
	}
	return up + target, nil
}
