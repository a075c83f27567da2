package platforms

// BringUpKind says how a row's Engine is started (docs/lanes.md).
type BringUpKind int

const (
	// LaneA starts lane A's Engine on the runner: scripts/engine.sh up.
	LaneA BringUpKind = iota + 1
	// LaneB starts lane B's Moby module build beside it: scripts/engine.sh
	// up-b.
	LaneB
	// Guest boots lane C's (amd64) or lane D's (arm64) virtual machine
	// with an Engine tuple and runs the manifest inside it:
	// scripts/lanec.sh run, through make qualify-linux-x64 or
	// qualify-linux-arm64.
	Guest
	// Hosted installs a pinned docker-ce from Docker's apt repository on
	// a GitHub-hosted runner (docs/lanes.md#hosted-runners).
	Hosted
	// Desktop uses the Docker Desktop already running on the runner (the
	// Mac handoff, README.md).
	Desktop
)

// BringUp is how one row's Engine is started. Build one with EngineUp,
// EngineUpB, LaneC, LaneD, HostedDockerCE or DockerDesktop.
type BringUp struct {
	Kind BringUpKind
	// Tuple is a Guest's Engine tuple, a name of `scripts/tuple.sh list`
	// ("lane-b", "ref-29.1.4", ...; docs/lanes.md#engine-tuples).
	Tuple string
	// Arch is a Guest's architecture: "amd64" (lane C) or "arm64" (lane D).
	Arch string
	// Emulate is the image architecture a Guest runs through qemu-user
	// (binfmt_misc), or "".
	Emulate string
	// DockerCE is a Hosted row's docker-ce package version
	// ("5:29.1.3-1~ubuntu.24.04~noble").
	DockerCE string
}

// EngineUp is lane A's Engine: scripts/engine.sh up.
func EngineUp() BringUp { return BringUp{Kind: LaneA} }

// EngineUpB is lane B's Engine: scripts/engine.sh up-b.
func EngineUpB() BringUp { return BringUp{Kind: LaneB} }

// LaneC is lane C's amd64 guest on the named Engine tuple.
func LaneC(tuple string) BringUp { return BringUp{Kind: Guest, Tuple: tuple, Arch: "amd64"} }

// LaneD is lane D's arm64 guest on the named Engine tuple, running images
// of the emulate architecture through qemu-user unless emulate is "".
func LaneD(tuple, emulate string) BringUp {
	return BringUp{Kind: Guest, Tuple: tuple, Arch: "arm64", Emulate: emulate}
}

// HostedDockerCE installs docker-ce at version (an apt version string) on
// a hosted runner.
func HostedDockerCE(version string) BringUp { return BringUp{Kind: Hosted, DockerCE: version} }

// DockerDesktop is the Docker Desktop running on the runner.
func DockerDesktop() BringUp { return BringUp{Kind: Desktop} }

// Signer is who signs a row's reports; each is a trust entry of the gate
// policies.
type Signer string

const (
	// LaneHost is the self-hosted lane machine's key
	// (/var/lib/qualbox/keys, public half under reports/keys/).
	LaneHost Signer = "lane-host"
	// CI is the repository secret QUALBOX_SIGNING_KEY, whose public half is
	// .github/keys/qualbox-ci-ed25519.pub.
	CI Signer = "ci"
)

// Signer returns who signs the reports of a row brought up this way: the
// lane host for the lanes the project's own machine runs, the CI key for
// hosted runners and Desktop Macs.
func (b BringUp) Signer() Signer {
	switch b.Kind {
	case Hosted, Desktop:
		return CI
	}
	return LaneHost
}

// Job returns the job of .github/workflows/qualify.yml whose matrix runs
// a row brought up this way.
func (b BringUp) Job() string {
	switch b.Kind {
	case Guest:
		return "lane-c"
	case Desktop:
		return "report-desktop"
	}
	return "report"
}

// String describes the bring-up in a few words, e.g. "lane D's arm64
// guest on Engine tuple ref-29.1.4, amd64 images through qemu-user".
func (b BringUp) String() string {
	switch b.Kind {
	case LaneA:
		return "lane A's Engine (scripts/engine.sh up)"
	case LaneB:
		return "lane B's Engine beside lane A (scripts/engine.sh up-b)"
	case Guest:
		lane := "lane C"
		if b.Arch == "arm64" {
			lane = "lane D"
		}
		s := lane + "'s " + b.Arch + " guest on Engine tuple " + b.Tuple + " (scripts/lanec.sh)"
		if b.Emulate != "" {
			s += ", " + b.Emulate + " images through qemu-user"
		}
		return s
	case Hosted:
		return "docker-ce " + b.DockerCE + " from Docker's apt repository"
	case Desktop:
		return "the runner's Docker Desktop"
	}
	return b.Kind.String()
}

func (k BringUpKind) String() string {
	switch k {
	case LaneA:
		return "lane A (scripts/engine.sh up)"
	case LaneB:
		return "lane B (scripts/engine.sh up-b)"
	case Guest:
		return "guest (scripts/lanec.sh)"
	case Hosted:
		return "hosted docker-ce"
	case Desktop:
		return "Docker Desktop"
	}
	return "BringUpKind(?)"
}
