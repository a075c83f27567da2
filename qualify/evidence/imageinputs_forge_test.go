package evidence_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"

	"github.com/qualbox/qualbox/qualify/evidence"
)

// imageRecord is an image inputs record (docs/lanes.md#image-inputs) in
// two parts: the lines its key digests and the lines after the key.
type imageRecord struct{ head, tail []string }

// lines renders the record with its key computed here, apart from the
// verifier's code: the first 16 hex digits of the SHA-256 of the head
// lines, each with its newline.
func (rec imageRecord) lines() []string {
	sum := sha256.Sum256([]byte(strings.Join(rec.head, "\n") + "\n"))
	out := slices.Clone(rec.head)
	out = append(out, "key "+hex.EncodeToString(sum[:8]))
	return append(out, rec.tail...)
}

// set replaces the line named name (in head or tail) with "name value";
// an empty value removes it.
func (rec imageRecord) set(name, value string) imageRecord {
	edit := func(ls []string) []string {
		var out []string
		for _, l := range ls {
			if n, _, _ := strings.Cut(l, " "); n == name {
				if value == "" {
					continue
				}
				l = name + " " + value
			}
			out = append(out, l)
		}
		return out
	}
	return imageRecord{edit(rec.head), edit(rec.tail)}
}

// laneDRecord is the record lane D's guest image would hold for the
// committed linux-arm64 report whose Engine build lines are engineBuild.
func laneDRecord(engineBuild []string) imageRecord {
	return imageRecord{
		head: []string{
			"suite bookworm",
			"arch arm64",
			"cgroup-driver systemd",
			"packages systemd-sysv systemd udev dbus apparmor containerd docker.io iproute2 kmod procps util-linux busybox-static",
			"recipe sha256:" + strings.Repeat("5e", 32),
			"kernel-package linux-image-6.1.0-57-arm64 6.1.192-3",
			"tuple ref-29.1.4 sha256:" + evidence.RecordSHA256(engineBuild),
		},
		tail: []string{
			"kernel linux-image-6.1.0-57-arm64 6.1.192-3",
			"dpkg sha256:" + strings.Repeat("d0", 32) + " 187 packages",
			"deb apparmor 3.0.8-3",
			"deb busybox-static 1:1.35.0-4+b3",
			"deb containerd 1.6.20~ds1-1+deb12u3",
			"deb dbus 1.14.10-1~deb12u1",
			"deb docker.io 20.10.24+dfsg1-1+deb12u1+b6",
			"deb iproute2 6.1.0-3",
			"deb kmod 30+20221128-1",
			"deb procps 2:4.0.2-3",
			"deb systemd 252.39-1~deb12u2",
			"deb systemd-sysv 252.39-1~deb12u2",
			"deb udev 252.39-1~deb12u2",
			"deb util-linux 2.38.1-5+deb12u3",
		},
	}
}

// laneDKey is laneDRecord's key for the committed report's engineBuild.
const laneDKey = "752529c0498f26ee"

// A lane report's imageInputs, the operator's record of the guest image
// it ran in, is checked against the rest of its signed header: a record
// that agrees verifies; one whose key is not its lines' digest, or that
// names another architecture, cgroup driver, Engine tuple, kernel,
// Debian release or emulation than the header shows, is refused.
func TestImageInputsAgreeWithTheRunHeader(t *testing.T) {
	const report = "linux-arm64/20261203T125319Z"
	t.Run("agreeing record", func(t *testing.T) {
		dir, keys := committedCopy(t, report)
		editRun(t, dir, func(r *evidence.Run) {
			r.ImageInputs = laneDRecord(r.EngineBuild).lines()
			assert.Equal(t, r.ImageInputs[7], "key "+laneDKey)
		})
		resign(t, dir, keys)
		_, err := evidence.VerifyRun(context.Background(), dir, pub(t, keys))
		assert.NilError(t, err)
	})
	for _, tc := range []struct {
		name string
		edit func(r *evidence.Run)
		want string
	}{
		{"recipe edited, key kept", func(r *evidence.Run) {
			kept := laneDRecord(r.EngineBuild).lines()[7]
			r.ImageInputs = laneDRecord(r.EngineBuild).set("recipe", "sha256:"+strings.Repeat("00", 32)).lines()
			r.ImageInputs[7] = kept
		}, "imageInputs line 8: key " + laneDKey + ", but the lines before it digest to "},
		{"another cgroup driver", func(r *evidence.Run) {
			r.ImageInputs = laneDRecord(r.EngineBuild).set("cgroup-driver", "cgroupfs").lines()
		}, `imageInputs cgroup-driver cgroupfs, but the Engine's /info CgroupDriver is "systemd"`},
		{"another architecture", func(r *evidence.Run) {
			r.ImageInputs = laneDRecord(r.EngineBuild).set("arch", "amd64").lines()
		}, `imageInputs arch amd64, but the Engine's /version Arch is "arm64"`},
		{"another tuple", func(r *evidence.Run) {
			r.ImageInputs = laneDRecord([]string{"stamped dockerd v2.0.0-beta.24 runc v1.3.4"}).lines()
		}, "but the header's engineBuild digests to sha256:"},
		{"no engineBuild", func(r *evidence.Run) {
			r.ImageInputs, r.EngineBuild = laneDRecord(r.EngineBuild).lines(), nil
		}, "but the header has no engineBuild"},
		{"another kernel", func(r *evidence.Run) {
			r.ImageInputs = laneDRecord(r.EngineBuild).set("kernel-package", "linux-image-6.1.0-58-arm64 6.1.193-1").set("kernel", "linux-image-6.1.0-58-arm64 6.1.193-1").lines()
		}, `imageInputs kernel linux-image-6.1.0-58-arm64 6.1.193-1, but the host's kernel build line "#1 SMP Debian 6.1.192-3 (2026-11-26)" names no version 6.1.193-1`},
		{"another Debian release", func(r *evidence.Run) {
			r.ImageInputs = laneDRecord(r.EngineBuild).set("suite", "trixie").lines()
		}, `imageInputs suite trixie, but the Engine's /info OperatingSystem is "Debian GNU/Linux 12 (bookworm)"`},
		{"emulation under a native profile", func(r *evidence.Run) {
			rec := laneDRecord(r.EngineBuild)
			rec.head = slices.Insert(rec.head, 3, "emulate amd64 1:7.2+dfsg-7+deb12u18")
			r.ImageInputs = rec.lines()
		}, "imageInputs emulate amd64 1:7.2+dfsg-7+deb12u18, but profile linux-arm64 runs its images natively"},
		{"a package's version left out", func(r *evidence.Run) {
			r.ImageInputs = laneDRecord(r.EngineBuild).set("deb", "").lines()
		}, `imageInputs: no "deb" line`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, keys := committedCopy(t, report)
			editRun(t, dir, tc.edit)
			refused(t, dir, keys, "evidence.json", tc.want)
		})
	}
}
