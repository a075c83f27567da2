package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/qualbox/qualbox/platforms"
	"github.com/qualbox/qualbox/profiles"
)

// workflowFile is the CI workflow whose jobs' matrices list the rows.
const workflowFile = ".github/workflows/qualify.yml"

// workflowJobs are the jobs of workflowFile with a generated row matrix,
// each region named "<job> rows".
var workflowJobs = []string{"lane-c", "report", "report-desktop"}

// renderWorkflow returns the workflow src with each job's generated
// matrix entries made from entries (platforms.BringUp.Job picks the job).
func renderWorkflow(src []byte, entries []platforms.Entry) ([]byte, error) {
	bodies := map[string]*strings.Builder{}
	for _, j := range workflowJobs {
		bodies[j] = &strings.Builder{}
	}
	for _, e := range entries {
		b := bodies[e.Engine.Job()]
		p, err := profiles.Load(e.Profile)
		if err != nil {
			return nil, fmt.Errorf("row %s: %w", e.Name, err)
		}
		when := "every run"
		if e.DispatchOnly {
			when = "only when the workflow is dispatched"
		}
		comment(b, "", e.Engine.String()+", OCI runtime "+p.Runtime+"; "+when+".")
		fmt.Fprintf(b, "- row: %s\n  profile: %s\n  manifest: manifests/%s\n  runner: '%s'\n", e.Name, e.Profile, e.Manifest, runnerJSON(e.Runner))
		switch u := e.Engine; u.Kind {
		case platforms.Guest:
			target := "qualify-linux-x64"
			if u.Arch == "arm64" {
				target = "qualify-linux-arm64"
			}
			fmt.Fprintf(b, "  target: %s\n  tuple: %s\n", target, u.Tuple)
			if u.Emulate != "" {
				fmt.Fprintf(b, "  emulate: %s\n", u.Emulate)
			}
			// The guest's dockerd runs the profile's cgroup driver:
			// lanec.sh's default, systemd, unless told (LANEC_CGROUP_DRIVER),
			// and it refuses a profile of another.
			if d := p.Cgroup.Driver; d != "systemd" {
				fmt.Fprintf(b, "  cgroup-driver: %s\n", d)
			}
			fmt.Fprintf(b, "  dispatch-only: %t\n", e.DispatchOnly)
		case platforms.LaneA:
			b.WriteString("  engine: up\n")
		case platforms.LaneB:
			b.WriteString("  engine: up-b\n")
		case platforms.Hosted:
			fmt.Fprintf(b, "  engine: hosted\n  docker-ce: %s\n", scalar(u.DockerCE))
		case platforms.Desktop:
			fmt.Fprintf(b, "  arch: %s\n", p.Image.Architecture)
		}
	}
	out := src
	for _, j := range workflowJobs {
		if bodies[j].Len() == 0 {
			return nil, fmt.Errorf("%s: job %s runs no row: remove its matrix, or add a row it runs", workflowFile, j)
		}
		var err error
		if out, err = splice(workflowFile, out, j+" rows", bodies[j].String()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// runnerJSON is runs-on as the JSON the workflow's fromJSON reads: one
// label as a string, several as a list.
func runnerJSON(labels []string) string {
	q := make([]string, len(labels))
	for i, l := range labels {
		b, _ := json.Marshal(l) // a string always marshals
		q[i] = string(b)
	}
	if len(q) == 1 {
		return q[0]
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// actionlintFile lists the self-hosted runner labels actionlint accepts.
const actionlintFile = ".github/actionlint.yaml"

// standardLabels are the labels every self-hosted runner has
// (GitHub's docs: self-hosted runner labels), which actionlint knows.
var standardLabels = []string{"self-hosted", "linux", "windows", "macos", "x64", "arm", "arm64"}

// renderActionlint returns actionlint's configuration: the custom labels
// of every self-hosted row's runner, in row order.
func renderActionlint(entries []platforms.Entry) []byte {
	var b strings.Builder
	b.WriteString(`# Labels of the project's self-hosted runners (README.md "Adding a host row"),
# generated from the rows' runners in platforms/ by go run ./internal/platformgen.
self-hosted-runner:
  labels:
`)
	seen := map[string]bool{}
	for _, e := range entries {
		if !slices.Contains(e.Runner, "self-hosted") {
			continue // a GitHub-hosted runner's label
		}
		for _, l := range e.Runner {
			std := false
			for _, s := range standardLabels {
				std = std || strings.EqualFold(l, s)
			}
			if !std && !seen[l] {
				seen[l] = true
				fmt.Fprintf(&b, "    - %s\n", l)
			}
		}
	}
	return []byte(b.String())
}
