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
