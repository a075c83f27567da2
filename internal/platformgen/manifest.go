package main

import (
	"fmt"
	"strings"

	"github.com/qualbox/qualbox/platforms"
)

// manifestBody is what every manifest has between its endpoint and its
// deadlines, and between its deadlines and its scenarios: the guest image
// built for the run, the workload user, the namespace and the sandbox
// policy (docs/contract.md).
const (
	manifestIdentity = `image: build
user:
  uid: 65534
  gid: 65534
namespace: qualbox-qual
`
	manifestResources = `policy:
  resources:
    cpus: 0.5
    memoryBytes: 268435456 # 256 MiB; memory+swap equals it
    pids: 128
  temporaryStorage:
    homeBytes: 16777216 # 16 MiB
    tempBytes: 8388608 # 8 MiB
  network:
    kind: isolated
`
	manifestLimits = `  transfers:
    chunkBytes: 65536
    metadataBatchBytes: 1048576
    metadataMergeFanIn: 16
  streams:
    maxOutputBytes: 1048576
    maxBufferedInputBytes: 65536
    maxBufferedOutputBytes: 1048576
    highWaterMarkBytes: 16384
`
)

// Where a run's report goes, as the manifest's comment says: a guest's
// run writes it to the folder scripts/lanec.sh shares with the guest.
const (
	outputDefault = "# output: reports/runs/<UTC timestamp> unless given here or with --output.\n"
	outputGuest   = "# output: given by scripts/lanec.sh (--output on the guest's shared folder).\n"
)

// renderManifest returns the manifest file of m for profile; guest says
// whether a guest row (scripts/lanec.sh) runs it.
func renderManifest(profile string, m platforms.Manifest, guest bool) ([]byte, error) {
	scenarios, err := m.Scenarios()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	comment(&b, "", m.About)
	endpoint := m.Endpoint
	if endpoint == "" {
		endpoint = platforms.DefaultEndpoint
	}
	fmt.Fprintf(&b, "profile: %s\nengine:\n  endpoint: %s\n", profile, endpoint)
	b.WriteString(manifestIdentity)
	if guest {
		b.WriteString(outputGuest)
	} else {
		b.WriteString(outputDefault)
	}
	b.WriteString(manifestResources)
	d := m.Deadlines
	if d.StartupMs == 0 {
		d.StartupMs = platforms.DefaultDeadlines.StartupMs
	}
	if d.CleanupMs == 0 {
		d.CleanupMs = platforms.DefaultDeadlines.CleanupMs
	}
	fmt.Fprintf(&b, "  deadlines:\n    startupMs: %d\n    cleanupMs: %d\n", d.StartupMs, d.CleanupMs)
	b.WriteString(manifestLimits)
	b.WriteString("scenarios:\n")
	for _, s := range scenarios {
		fmt.Fprintf(&b, "  - name: %s\n", s.Name)
		comment(&b, "    ", s.Note)
		if len(s.Params) > 0 {
			b.WriteString("    params:\n")
		}
		for _, p := range s.Params {
			comment(&b, "      ", p.Note)
			fmt.Fprintf(&b, "      %s: %s", p.Key, p.YAML)
			if p.Comment != "" {
				b.WriteString(" # " + p.Comment)
			}
			b.WriteString("\n")
		}
	}
	return []byte(b.String()), nil
}

// comment writes text as YAML comment lines at indent: "# line", or a
// lone "#" for an empty line. Empty text writes nothing.
func comment(b *strings.Builder, indent, text string) {
	if text == "" {
		return
	}
	for _, line := range strings.Split(text, "\n") {
		b.WriteString(indent + "#")
		if line != "" {
			b.WriteString(" " + line)
		}
		b.WriteString("\n")
	}
}
