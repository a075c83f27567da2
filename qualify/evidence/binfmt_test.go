package evidence

import (
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// The architecture of a handler comes from its magic and mask as the
// kernel shows them (these are Debian's qemu-user handlers for x86_64 and
// aarch64); a handler whose mask leaves e_machine open, or whose magic is
// not a 64-bit ELF header at offset 0, matches no architecture.
func TestBinfmtELFArchitecture(t *testing.T) {
	amd64 := BinfmtHandler{Name: "qemu-x86_64", Flags: "F", Magic: "7f454c4602010100000000000000000002003e00", Mask: "fffffffffffefe00fffffffffffffffffeffffff"}
	arm64 := BinfmtHandler{Name: "qemu-aarch64", Flags: "PF", Magic: "7f454c460201010000000000000000000200b700", Mask: "ffffffffffffff00fffffffffffffffffeffffff"}
	assert.Check(t, is.Equal(amd64.ELFArchitecture(), "amd64"))
	assert.Check(t, is.Equal(arm64.ELFArchitecture(), "arm64"))
	open := amd64
	open.Mask = "fffffffffffefe00fffffffffffffffffeff00ff"
	assert.Check(t, is.Equal(open.ELFArchitecture(), ""), "e_machine not kept")
	moved := amd64
	moved.Offset = 1
	assert.Check(t, is.Equal(moved.ELFArchitecture(), ""), "offset 1")
	bad := amd64
	bad.Magic = "zz"
	assert.Check(t, is.Equal(bad.ELFArchitecture(), ""), "not hex")
}

// A passed isolation under the emulated profile needs the emulation on
// record: an F handler for amd64 executables. Without one, or with the
// handler lacking F, or for another architecture, it is refused; a native
// profile needs none.
func TestEmulationProblems(t *testing.T) {
	amd64 := BinfmtHandler{Name: "qemu-x86_64", Flags: "F", Magic: "7f454c4602010100000000000000000002003e00", Mask: "fffffffffffefe00fffffffffffffffffeffffff"}
	iso := &Scenario{Name: "isolation", Verdict: Verdict{Kind: Passed}}
	run := func(profile string, hs ...BinfmtHandler) *Run {
		return &Run{Profile: profile, Host: &Host{BinfmtHandlers: hs}, Admission: Admission{OK: true}}
	}
	assert.Check(t, is.Len(emulationProblems(run("linux-arm64-emulated-amd64", amd64), iso), 0))
	noF := amd64
	noF.Flags = "P"
	arm := BinfmtHandler{Name: "qemu-aarch64", Flags: "F", Magic: "7f454c460201010000000000000000000200b700", Mask: "ffffffffffffff00fffffffffffffffffeffffff"}
	for _, hs := range [][]BinfmtHandler{nil, {noF}, {arm}} {
		got := emulationProblems(run("linux-arm64-emulated-amd64", hs...), iso)
		assert.Check(t, is.Len(got, 1), "%v", hs)
		assert.Check(t, strings.Contains(strings.Join(got, ""), "no enabled binfmt_misc handler with flag F for amd64 executables"), "%v", got)
	}
	assert.Check(t, is.Len(emulationProblems(run("linux-arm64"), iso), 0), "native arm64 needs no handler")
	failed := &Scenario{Name: "isolation", Verdict: Verdict{Kind: Failed}}
	assert.Check(t, is.Len(emulationProblems(run("linux-arm64-emulated-amd64"), failed), 0), "a failed isolation claims nothing")
}

// Under a native profile, an enabled handler for the daemon's own
// architecture's executables refuses the report unless binfmt_misc as a
// whole is disabled; a handler for another architecture, or one under a
// profile that emulates, does not. The handler lines readers see must be
// the handlers the verifier judges.
func TestBinfmtProblems(t *testing.T) {
	amd64 := BinfmtHandler{Name: "qemu-x86_64", Interpreter: "/usr/bin/qemu-x86_64-static", Flags: "F", Magic: "7f454c4602010100000000000000000002003e00", Mask: "fffffffffffefe00fffffffffffffffffeffffff"}
	arm64 := BinfmtHandler{Name: "qemu-aarch64", Interpreter: "/usr/libexec/qemu-binfmt/aarch64-binfmt-P", Flags: "PF", Magic: "7f454c460201010000000000000000000200b700", Mask: "ffffffffffffff00fffffffffffffffffeffffff"}
	run := func(profile, state string, hs ...BinfmtHandler) *Run {
		h := &Host{BinfmtMisc: state, BinfmtHandlers: hs}
		for _, b := range hs {
			h.Binfmt = append(h.Binfmt, b.String())
		}
		return &Run{Profile: profile, Host: h, Admission: Admission{OK: true}}
	}
	for _, tc := range []struct {
		name string
		r    *Run
		want string
	}{
		{"arm64 handler on a native arm64 row", run("linux-arm64", "enabled", amd64, arm64),
			"the host's binfmt_misc handler qemu-aarch64 runs arm64 executables, the daemon's own architecture, through /usr/libexec/qemu-binfmt/aarch64-binfmt-P under profile linux-arm64 (images and daemon arm64): uname(2) would say aarch64 on a kernel of another architecture too, so the report does not show that the kernel is arm64"},
		{"state not recorded", run("linux-arm64", "", arm64), "handler qemu-aarch64 runs arm64 executables"},
		{"state unreadable", run("linux-arm64", "unreadable (qemu-foo: EACCES)", arm64), "handler qemu-aarch64 runs arm64 executables"},
		{"x86_64 handler on a native amd64 row", run("linux-x64", "enabled", amd64), "handler qemu-x86_64 runs amd64 executables, the daemon's own architecture"},
		{"lines without their handlers", &Run{Profile: "linux-arm64", Admission: Admission{OK: true}, Host: &Host{BinfmtMisc: "enabled", BinfmtHandlers: []BinfmtHandler{amd64}}},
			`host binfmt [], but its binfmtHandlers read ["qemu-x86_64 /usr/bin/qemu-x86_64-static flags F"]`},
		{"handlers where none is mounted", run("linux-arm64-emulated-amd64", "not mounted", amd64), `host binfmtMisc "not mounted", but 1 handlers are listed`},
	} {
		got := binfmtProblems(tc.r)
		assert.Check(t, is.Len(got, 1), "%s: %v", tc.name, got)
		assert.Check(t, is.Contains(strings.Join(got, "\n"), tc.want), tc.name)
	}
	for _, tc := range []struct {
		name string
		r    *Run
	}{
		{"binfmt_misc disabled", run("linux-arm64", "disabled", arm64)},
		{"another architecture's handler", run("linux-arm64", "enabled", amd64)},
		{"no handler", run("linux-arm64", "enabled")},
		{"emulating profile", run("linux-arm64-emulated-amd64", "enabled", amd64, arm64)},
		{"lines only, as reports made before the handlers", &Run{Profile: "linux-arm64", Admission: Admission{OK: true}, Host: &Host{Binfmt: []string{amd64.String()}}}},
		{"no Engine", &Run{Profile: "linux-arm64", Host: run("linux-arm64", "enabled", arm64).Host}},
		{"no host facts", &Run{Profile: "linux-arm64", Admission: Admission{OK: true}}},
	} {
		assert.Check(t, is.Len(binfmtProblems(tc.r), 0), tc.name)
	}
}

// A passed isolation under an emulating profile with binfmt_misc
// disabled as a whole ran no emulator, whatever handlers are listed.
func TestEmulationProblemsBinfmtDisabled(t *testing.T) {
	amd64 := BinfmtHandler{Name: "qemu-x86_64", Flags: "F", Magic: "7f454c4602010100000000000000000002003e00", Mask: "fffffffffffefe00fffffffffffffffffeffffff"}
	iso := &Scenario{Name: "isolation", Verdict: Verdict{Kind: Passed}}
	r := &Run{Profile: "linux-arm64-emulated-amd64", Host: &Host{BinfmtMisc: "disabled", BinfmtHandlers: []BinfmtHandler{amd64}}, Admission: Admission{OK: true}}
	assert.Check(t, is.DeepEqual(emulationProblems(r, iso), []string{"isolation passed under profile linux-arm64-emulated-amd64 (amd64 images on a arm64 daemon), but the host's binfmt_misc is disabled, which runs no handler"}))
	r.Host.BinfmtMisc = "enabled"
	assert.Check(t, is.Len(emulationProblems(r, iso), 0))
}
