package evidence

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/qualbox/qualbox/profiles"
)

// ImageInputs is a run header's imageInputs parsed: what the virtual
// machine image the Engine and the controller ran in was assembled from,
// as lane C's and lane D's scripts/lanec.sh write it into the guest
// (/etc/qualbox-image-inputs; docs/lanes.md#image-inputs). Each field is
// one line "<name> <value>" of the record, in this order; the lines before
// key are what the image's cache key digests, those after it what the
// assembled root holds.
type ImageInputs struct {
	// Suite is the Debian release debootstrapped ("bookworm").
	Suite string
	// Arch is the guest's Debian architecture ("amd64", "arm64").
	Arch string
	// CgroupDriver is the guest dockerd's cgroup driver ("systemd",
	// "cgroupfs").
	CgroupDriver string
	// Emulate is the architecture whose executables the guest runs
	// through qemu-user, with the qemu-user-static version
	// ("amd64 1:7.2+dfsg-7+deb12u18"); "" without emulation.
	Emulate string
	// Packages are the Debian packages debootstrap was asked to include.
	Packages []string
	// RecipeSHA256 is the hex SHA-256 of the recipe's text: the shell
	// functions that configure the root, as bash prints them, the kernel
	// arguments and the image size.
	RecipeSHA256 string
	// KernelPackage is the kernel package named before the build (lane
	// D unpacks it: "linux-image-6.1.0-57-arm64 6.1.192-3"); "" where the
	// kernel comes with Packages (lane C).
	KernelPackage string
	// Tuple names the Engine tuple and TupleSHA256 is the hex SHA-256 of
	// its VERSIONS file, the run header's engineBuild.
	Tuple, TupleSHA256 string
	// Key is the image's cache key: the first 16 hex digits of the SHA-256
	// of every line before it, each with its newline.
	Key string
	// Kernel is the kernel package the root holds and its version
	// ("linux-image-6.1.0-57-arm64 6.1.192-3").
	Kernel string
	// DpkgSHA256 is the hex SHA-256 of the root's whole package list
	// (one "<package>:<arch> <version>" line each, sorted) and DpkgCount
	// its length.
	DpkgSHA256 string
	DpkgCount  int
	// Debs are "<package> <version>" of each of Packages as installed,
	// sorted by name.
	Debs []string
}

// ImageInputsError says why an image inputs record was refused: the
// 1-based line (0 for the record as a whole) and what was wrong.
type ImageInputsError struct {
	Line    int
	Problem string
}

func (e *ImageInputsError) Error() string {
	if e.Line == 0 {
		return "imageInputs: " + e.Problem
	}
	return fmt.Sprintf("imageInputs line %d: %s", e.Line, e.Problem)
}

var (
	hex64      = regexp.MustCompile(`^[0-9a-f]{64}$`)
	hex16      = regexp.MustCompile(`^[0-9a-f]{16}$`)
	debName    = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	debVersion = regexp.MustCompile(`^[0-9][A-Za-z0-9.+~:-]*$`)
	archName   = regexp.MustCompile(`^[a-z0-9]+$`)
)

// imageInputLine is one name of the record's grammar.
type imageInputLine struct {
	name             string
	required, repeat bool
}

// imageInputLines is the record's grammar: each name in order, whether
// it must be present, and whether it may repeat (deb).
var imageInputLines = []imageInputLine{
	{"suite", true, false}, {"arch", true, false}, {"cgroup-driver", true, false},
	{"emulate", false, false}, {"packages", true, false}, {"recipe", true, false},
	{"kernel-package", false, false}, {"tuple", true, false}, {"key", true, false},
	{"kernel", true, false}, {"dpkg", true, false}, {"deb", true, true},
}

// ParseImageInputs parses the lines of an image inputs record
// (ImageInputs): every name of the grammar in its order, each once but
// deb, values of their shapes, a key that is the digest of the lines
// before it and one deb line per package, sorted. It returns an
// *ImageInputsError naming the first line that is wrong.
func ParseImageInputs(lines []string) (*ImageInputs, error) {
	p := inputsParser{last: -1}
	for i, line := range lines {
		if why := p.line(line); why != "" {
			return nil, &ImageInputsError{i + 1, why}
		}
	}
	if m := missingInput(p.last+1, len(imageInputLines)); m != "" {
		return nil, &ImageInputsError{0, fmt.Sprintf("no %q line", m)}
	}
	var names []string
	for _, d := range p.in.Debs {
		n, _, _ := strings.Cut(d, " ")
		names = append(names, n)
	}
	if want := slices.Sorted(slices.Values(p.in.Packages)); !slices.Equal(names, want) {
		return nil, &ImageInputsError{0, fmt.Sprintf("deb lines name %s, want one per package, sorted: %s", strings.Join(names, " "), strings.Join(want, " "))}
	}
	return &p.in, nil
}

// inputsParser is ParseImageInputs' state between lines.
type inputsParser struct {
	in    ImageInputs
	last  int             // index into imageInputLines of the last name seen
	keyed strings.Builder // the lines before the key line, each with its newline
}

// missingInput is the first required name of imageInputLines[from:to],
// or "".
func missingInput(from, to int) string {
	for k := from; k < to; k++ {
		if imageInputLines[k].required {
			return imageInputLines[k].name
		}
	}
	return ""
}

// line takes one line of the record, or says why it is wrong.
func (p *inputsParser) line(line string) string {
	name, value, ok := strings.Cut(line, " ")
	if !ok || value == "" || strings.TrimSpace(value) != value || strings.Contains(value, "  ") {
		return fmt.Sprintf("want %q, got %q", "<name> <value>", line)
	}
	j := slices.IndexFunc(imageInputLines, func(g imageInputLine) bool { return g.name == name })
	switch {
	case j < 0:
		return fmt.Sprintf("unknown name %q", name)
	case j < p.last:
		return fmt.Sprintf("%q after %q", name, imageInputLines[p.last].name)
	case j == p.last && !imageInputLines[j].repeat:
		return fmt.Sprintf("a second %q", name)
	}
	if m := missingInput(p.last+1, j); m != "" {
		return fmt.Sprintf("%q before the required %q", name, m)
	}
	p.last = j
	if why := p.in.set(name, value); why != "" {
		return name + " " + why
	}
	switch {
	case name == "key":
		if want := imageKey(p.keyed.String()); value != want {
			return fmt.Sprintf("key %s, but the lines before it digest to %s", value, want)
		}
	case p.in.Key == "":
		p.keyed.WriteString(line + "\n")
	}
	return ""
}

// imageKey is the cache key of the record text before the key line.
func imageKey(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:8])
}

// inputPackage says whether v is "<Debian package> <version>".
func inputPackage(v string) bool {
	n, ver, ok := strings.Cut(v, " ")
	return ok && debName.MatchString(n) && debVersion.MatchString(ver)
}

// inputDigest is the hex of "sha256:<64 hex>", and whether v is that.
func inputDigest(v string) (string, bool) {
	h, ok := strings.CutPrefix(v, "sha256:")
	return h, ok && hex64.MatchString(h)
}

// inputSetters store one line's value by its name and say whether the
// value has the name's shape.
var inputSetters = map[string]func(in *ImageInputs, value string) bool{
	"suite": func(in *ImageInputs, v string) bool { in.Suite = v; return archName.MatchString(v) },
	"arch":  func(in *ImageInputs, v string) bool { in.Arch = v; return archName.MatchString(v) },
	"cgroup-driver": func(in *ImageInputs, v string) bool {
		in.CgroupDriver = v
		return v == "systemd" || v == "cgroupfs"
	},
	"emulate": func(in *ImageInputs, v string) bool {
		in.Emulate = v
		a, ver, _ := strings.Cut(v, " ")
		return archName.MatchString(a) && debVersion.MatchString(ver)
	},
	"packages": func(in *ImageInputs, v string) bool {
		in.Packages = strings.Split(v, " ")
		return !slices.ContainsFunc(in.Packages, func(p string) bool { return !debName.MatchString(p) }) &&
			len(slices.Compact(slices.Sorted(slices.Values(in.Packages)))) == len(in.Packages)
	},
	"recipe": func(in *ImageInputs, v string) (ok bool) { in.RecipeSHA256, ok = inputDigest(v); return ok },
	"kernel-package": func(in *ImageInputs, v string) bool {
		in.KernelPackage = v
		return inputPackage(v) && strings.HasPrefix(v, "linux-image-")
	},
	"tuple": func(in *ImageInputs, v string) bool {
		t, d, _ := strings.Cut(v, " ")
		in.Tuple = t
		h, ok := inputDigest(d)
		in.TupleSHA256 = h
		return ok && debName.MatchString(t)
	},
	"key": func(in *ImageInputs, v string) bool { in.Key = v; return hex16.MatchString(v) },
	"kernel": func(in *ImageInputs, v string) bool {
		in.Kernel = v
		return inputPackage(v) && strings.HasPrefix(v, "linux-image-")
	},
	"dpkg": func(in *ImageInputs, v string) bool {
		d, n, _ := strings.Cut(v, " ")
		h, ok := inputDigest(d)
		in.DpkgSHA256 = h
		count, cut := strings.CutSuffix(n, " packages")
		c, err := strconv.Atoi(count)
		in.DpkgCount = c
		return ok && cut && err == nil && c > 0
	},
	"deb": func(in *ImageInputs, v string) bool { in.Debs = append(in.Debs, v); return inputPackage(v) },
}

// set stores one line's value, or says why its shape is wrong.
func (in *ImageInputs) set(name, value string) string {
	if set, known := inputSetters[name]; !known || !set(in, value) {
		return fmt.Sprintf("%q is not of its shape", value)
	}
	return ""
}

// RecordSHA256 is the hex SHA-256 of a record's lines as a file holding
// each with its newline: what the image inputs' tuple line states of the
// Engine tuple's VERSIONS, recorded as the run header's engineBuild.
func RecordSHA256(lines []string) string {
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n") + "\n"))
	return hex.EncodeToString(sum[:])
}

// imageInputsProblems checks a run header's imageInputs, where it has
// them, against the rest of the header (docs/lanes.md#image-inputs): the
// record's shape and key (ParseImageInputs); the guest's architecture
// against the Engine's and the controller's (the controller runs in the
// guest); its cgroup driver against the Engine's; the tuple digest
// against the engineBuild lines; the kernel package against the kernel
// the Engine and the host facts report (release and Debian version);
// the suite against the Engine's operating system; and emulation exactly
// where the profile's images are of another architecture than its
// daemon.
func imageInputsProblems(r *Run) []string {
	if len(r.ImageInputs) == 0 {
		return nil
	}
	in, err := ParseImageInputs(r.ImageInputs)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	add := func(format string, args ...any) { out = append(out, "imageInputs "+fmt.Sprintf(format, args...)) }
	in.checkEngine(r, add)
	in.checkKernel(r, add)
	in.checkEmulation(r, add)
	return out
}

// checkEngine checks the record's architecture, cgroup driver, tuple
// and suite against the header's controller, Engine and engineBuild.
func (in *ImageInputs) checkEngine(r *Run, add func(string, ...any)) {
	if in.Arch != r.Controller.Arch {
		add("arch %s, but the controller that ran in the guest is %s", in.Arch, r.Controller.Arch)
	}
	if in.Arch != r.Engine.Arch {
		add("arch %s, but the Engine's /version Arch is %q", in.Arch, r.Engine.Arch)
	}
	if in.CgroupDriver != r.Engine.CgroupDriver {
		add("cgroup-driver %s, but the Engine's /info CgroupDriver is %q", in.CgroupDriver, r.Engine.CgroupDriver)
	}
	if len(r.EngineBuild) == 0 {
		add("tuple %s sha256:%s, but the header has no engineBuild", in.Tuple, in.TupleSHA256)
	} else if got := RecordSHA256(r.EngineBuild); got != in.TupleSHA256 {
		add("tuple %s sha256:%s, but the header's engineBuild digests to sha256:%s", in.Tuple, in.TupleSHA256, got)
	}
	if !strings.Contains(r.Engine.OperatingSystem, "("+in.Suite+")") {
		add("suite %s, but the Engine's /info OperatingSystem is %q", in.Suite, r.Engine.OperatingSystem)
	}
}

// checkKernel checks the record's kernel package against the kernel the
// Engine and the host facts report (release and Debian version).
func (in *ImageInputs) checkKernel(r *Run, add func(string, ...any)) {
	pkg, ver, _ := strings.Cut(in.Kernel, " ")
	release := strings.TrimPrefix(pkg, "linux-image-")
	if release != r.Engine.KernelVersion {
		add("kernel %s, but the Engine's /info KernelVersion is %q", in.Kernel, r.Engine.KernelVersion)
	}
	if r.Host != nil {
		if release != r.Host.Kernel {
			add("kernel %s, but the host's kernel release is %q", in.Kernel, r.Host.Kernel)
		}
		if !strings.Contains(r.Host.KernelBuild+" ", " "+ver+" ") {
			add("kernel %s, but the host's kernel build line %q names no version %s", in.Kernel, r.Host.KernelBuild, ver)
		}
	}
	if in.KernelPackage != "" && in.KernelPackage != in.Kernel {
		add("kernel %s, but kernel-package %s", in.Kernel, in.KernelPackage)
	}
}

// checkEmulation requires an emulate line exactly where the profile's
// images are of another architecture than its daemon, naming that one.
func (in *ImageInputs) checkEmulation(r *Run, add func(string, ...any)) {
	prof, err := profiles.Load(r.Profile)
	if err != nil {
		return
	}
	emu, _, _ := strings.Cut(in.Emulate, " ")
	if img := prof.Image.Architecture; img != prof.Daemon.Architecture && emu != img {
		add("emulate %q, but profile %s runs %s images on a %s daemon", in.Emulate, prof.Name, img, prof.Daemon.Architecture)
	} else if img == prof.Daemon.Architecture && emu != "" {
		add("emulate %s, but profile %s runs its images natively", in.Emulate, prof.Name)
	}
}
