package driver

import (
	"testing"

	"gotest.tools/v3/assert"
)

// Both SecurityOptions spellings of AppArmor count as present: Engine
// 29.1.3 sends "name=apparmor", Moby v2 builds send
// "name=apparmor,profile=default" (docs/lanes.md, lane C). An exact-string
// match would call the second absent and fail linux-x64 admission.
func TestSecurityOptionName(t *testing.T) {
	for opt, want := range map[string]string{
		"name=apparmor":                 "apparmor",
		"name=apparmor,profile=default": "apparmor",
		"name=seccomp,profile=builtin":  "seccomp",
		"profile=default,name=cgroupns": "cgroupns",
		"name=apparmorx":                "apparmorx",
		"apparmor":                      "",
		"":                              "",
	} {
		assert.Equal(t, securityOptionName(opt), want, opt)
	}
}
