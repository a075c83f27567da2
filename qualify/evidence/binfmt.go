package evidence

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/qualbox/qualbox/profiles"
)

// BinfmtHandler is one enabled binfmt_misc handler of the host's kernel
// as its /proc/sys/fs/binfmt_misc/<name> file states it: the user-mode
// emulator through which an Engine there runs another architecture's
// images.
type BinfmtHandler struct {
	// Name is the handler's file name, for example "qemu-x86_64".
	Name string `json:"name"`
	// Interpreter is the absolute path of the emulator.
	Interpreter string `json:"interpreter"`
	// Flags are the handler's flags, for example "F" or "PF". F (fix
	// binary) opens the interpreter at registration, which is what lets
	// it run inside a container's mount namespace.
	Flags string `json:"flags"`
	// Offset is where Magic is matched, in bytes from the file's start.
	Offset int `json:"offset"`
	// Magic and Mask are the matched bytes and their mask, in lowercase
	// hex; Mask is empty when the handler has none (all bits count).
	Magic string `json:"magic"`
	Mask  string `json:"mask,omitempty"`
}

// elfMachines maps an ELF e_machine value to the GOARCH of the 64-bit
// little-endian executables this project's profiles name.
var elfMachines = map[uint16]string{0x3e: "amd64", 0xb7: "arm64"}

// ELFArchitecture returns the GOARCH ("amd64" or "arm64") of the
// executables h matches, derived from its magic and mask alone: a 64-bit
// little-endian ELF header at offset 0 whose e_machine bytes (18 and 19)
// the mask keeps whole. It returns "" for any other handler, or one whose
// magic or mask is not hex.
func (h BinfmtHandler) ELFArchitecture() string {
	magic, err := hex.DecodeString(h.Magic)
	if err != nil || h.Offset != 0 || len(magic) < 20 {
		return ""
	}
	mask := make([]byte, len(magic))
	for i := range mask {
		mask[i] = 0xff
	}
	if h.Mask != "" {
		if mask, err = hex.DecodeString(h.Mask); err != nil || len(mask) != len(magic) {
			return ""
		}
	}
	// \x7fELF and EI_CLASS 2 (64-bit), wholly kept; EI_DATA 1
	// (little-endian) as the magic states it, since qemu's handlers mask
	// its low bit; e_machine wholly kept.
	for i, b := range []byte{0x7f, 'E', 'L', 'F', 2} {
		if magic[i] != b || mask[i] != 0xff {
			return ""
		}
	}
	if magic[5] != 1 || mask[18] != 0xff || mask[19] != 0xff {
		return ""
	}
	return elfMachines[uint16(magic[18])|uint16(magic[19])<<8]
}

// String is the handler on one line: "<name> <interpreter> flags <flags>".
func (h BinfmtHandler) String() string {
	return h.Name + " " + h.Interpreter + " flags " + h.Flags
}

// emulationProblems checks that a passed isolation under a profile whose
// images are of another architecture than its daemon (amd64 images on an
// arm64 Engine) has the emulation on record: the run's host facts must
// list an enabled binfmt_misc handler with the F flag whose magic matches
// the image architecture's executables. What such a row stands for is
// the workload running as that architecture on that kernel; without the
// handler the verifier has no account of how it could. The rule goes by
// the profile, not by anything the report's signer chooses to record.
func emulationProblems(r *Run, s *Scenario) []string {
	if s.Name != "isolation" || s.Verdict.Kind != Passed || engineless(r) {
		return nil
	}
	prof, err := profiles.Load(r.Profile)
	if err != nil || prof.Image.Architecture == prof.Daemon.Architecture {
		return nil
	}
	img := prof.Image.Architecture
	var handlers []BinfmtHandler
	if r.Host != nil {
		handlers = r.Host.BinfmtHandlers
		if r.Host.BinfmtMisc == BinfmtDisabled {
			return []string{fmt.Sprintf("isolation passed under profile %s (%s images on a %s daemon), but the host's binfmt_misc is disabled, which runs no handler",
				prof.Name, img, prof.Daemon.Architecture)}
		}
	}
	if slices.ContainsFunc(handlers, func(h BinfmtHandler) bool {
		return strings.Contains(h.Flags, "F") && h.ELFArchitecture() == img
	}) {
		return nil
	}
	var have []string
	for _, h := range handlers {
		have = append(have, fmt.Sprintf("%s (flags %q, matches %q)", h.Name, h.Flags, h.ELFArchitecture()))
	}
	if len(have) == 0 {
		have = []string{"none"}
	}
	return []string{fmt.Sprintf("isolation passed under profile %s (%s images on a %s daemon), but the host facts list no enabled binfmt_misc handler with flag F for %s executables (handlers: %s)",
		prof.Name, img, prof.Daemon.Architecture, img, strings.Join(have, ", "))}
}

// BinfmtMisc states (Host.BinfmtMisc) in which the handler list is
// complete.
const (
	BinfmtEnabled  = "enabled"
	BinfmtDisabled = "disabled"
)

// binfmtProblems checks the host's binfmt_misc facts of a run with an
// Engine (docs/qualification.md#evidence). The lines of Binfmt must be
// BinfmtHandlers as String renders them, in order, since readers see
// the one and the verifier judges the other (but in reports made before
// the handlers were recorded, which have the lines only); no handler may be listed
// where binfmt_misc was not mounted. Under a native profile (images of
// the daemon's architecture) no enabled handler may run the daemon's
// own architecture's executables while binfmt_misc is enabled: uname(2)
// inside and outside the sandbox would then say that architecture on a
// kernel of another one, which ran the Engine, the controller and the
// workload through the emulator, so the report would not show the
// profile's kernel. Not mounted or unreadable, binfmt_misc says nothing
// either way, and that is what the report then records.
func binfmtProblems(r *Run) []string {
	if r.Host == nil || engineless(r) {
		return nil
	}
	h := r.Host
	var out []string
	var lines []string
	for _, b := range h.BinfmtHandlers {
		lines = append(lines, b.String())
	}
	// Reports made before binfmtHandlers and binfmtMisc were recorded
	// list the lines alone.
	if (len(h.BinfmtHandlers) > 0 || h.BinfmtMisc != "") && !slices.Equal(lines, h.Binfmt) {
		out = append(out, fmt.Sprintf("host binfmt %q, but its binfmtHandlers read %q", h.Binfmt, lines))
	}
	if h.BinfmtMisc == "not mounted" && len(h.BinfmtHandlers) > 0 {
		out = append(out, fmt.Sprintf("host binfmtMisc %q, but %d handlers are listed", h.BinfmtMisc, len(h.BinfmtHandlers)))
	}
	prof, err := profiles.Load(r.Profile)
	if err != nil || prof.Image.Architecture != prof.Daemon.Architecture || h.BinfmtMisc == BinfmtDisabled {
		return out
	}
	arch := prof.Daemon.Architecture
	for _, b := range h.BinfmtHandlers {
		if b.ELFArchitecture() == arch {
			out = append(out, fmt.Sprintf("the host's binfmt_misc handler %s runs %s executables, the daemon's own architecture, through %s under profile %s (images and daemon %s): uname(2) would say %s on a kernel of another architecture too, so the report does not show that the kernel is %s",
				b.Name, arch, b.Interpreter, prof.Name, arch, profiles.UnameMachine(arch), arch))
		}
	}
	return out
}
