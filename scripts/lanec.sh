#!/usr/bin/env bash
# Lane C (docs/lanes.md#lane-c): a Debian guest (12 by default, 13 with
# LANEC_SUITE=trixie, below) with a unified cgroup v2 hierarchy, systemd as
# PID 1 and AppArmor, booted under QEMU (KVM where it works, else the TCG
# emulator: LANEC_ACCEL), running an Engine tuple (LANEC_TUPLE, below) with
# the systemd cgroup driver. The controller (a static `qualify`) runs INSIDE
# the guest, so the observer reads the guest kernel's real cgroup v2 files.
#
#   scripts/lanec.sh deps
#       Install the host tools lane C needs (QEMU, debootstrap, e2fsprogs)
#       from Debian's packages when any is missing.
#   scripts/lanec.sh image
#       Assemble the guest (debootstrap on the host, every package installed
#       from the host side, never inside the guest) and cache it under
#       /var/cache/qualbox/lanec/<key>/, where <key> digests the package
#       list, this script's guest recipe, the guest's files it copies in
#       (scripts/lanec/guest/) and the tuple's VERSIONS. A cached image is
#       reused, so a second bring-up costs only the boot. Prints the cache
#       directory. The image holds its inputs record,
#       /etc/qualbox-image-inputs, which `run` signs into the report.
#   scripts/lanec.sh key [--versions FILE]
#       Print the cache keys `image` would use: `image KEY` (the bootable
#       image) and `base KEY` (the debootstrapped root it starts from), with
#       FILE as the tuple's VERSIONS (default: the tuple's own, built or
#       found first).
#   scripts/lanec.sh inputs [--versions FILE]
#       Print the lines of the image inputs record that the image key
#       digests, then `key KEY` (docs/lanes.md#image-inputs): a report whose
#       signed imageInputs differ ran an older image.
#   scripts/lanec.sh run [--manifest FILE] [--out DIR] [--signing-key FILE]
#                        [--no-conformance] [--record DIR]
#       Boot the guest, run `qualify run` on the manifest inside it (default
#       manifests/linux-x64.yaml), then the driver's real-Engine conformance
#       suite (`-test.run Conformance`, profile linux-x64), power the guest
#       off and bring the signed report out to DIR (default
#       reports/runs/<UTC timestamp>). Lane C's own files (console log,
#       conformance output, timings, result) go to DIR.lanec/ beside it.
#       Exit status: 0 when the guest ran both and both passed, 1 otherwise
#       (internal/lanevm's result), 2 on a bad argument or setting, 130
#       when interrupted. --record DIR also records the observer's cgroup
#       v2 trees (as `record`) in the same boot.
#   scripts/lanec.sh record DIR
#       Boot the guest and record real cgroup v2 trees (before, during OOM,
#       during pids exhaustion, after cleanup) into DIR, which must be
#       absent or empty (scripts/lanec-record-guest.sh runs inside the
#       guest).
#
# The guest's job is scripts/lanec-job.sh; the run itself (boot, bounds,
# progress, power-down, collecting the results, the exit status) is
# supervised by internal/lanevm's command, which this script builds and
# hands the run to once the image, the accelerator and the shared folder
# are ready.
#
# The Engine tuple (docs/lanes.md#engine-tuples), environment LANEC_TUPLE:
# `lane-b` (the default) is lane B's pinned dockerd and runc
# (scripts/engine.sh install-b) with Debian's containerd; any name of
# `scripts/tuple.sh list` (ref-29.1.3, ref-29.1.4, current-29.7.2) is that
# Docker Engine release's dockerd with its containerd, shim and runc, built
# by scripts/tuple.sh and replacing Debian's in the guest, with the
# containerd image store. Each tuple has its own cached image.
#
# Bounds (environment; internal/lanevm.BudgetFromEnv reads them, whole
# seconds): LANEC_BOOT_TIMEOUT (qemu start until the job unit starts,
# default 900), LANEC_ENGINE_TIMEOUT (then until the guest's Engine
# answers, default 900, plus 60 s for the guest to report it never did),
# LANEC_RUN_TIMEOUT (the job itself, default 2400), LANEC_STOP_GRACE (the
# power-down until qemu is killed, default 180), LANEC_DEADLINE (an
# absolute end for the guest, in seconds since the epoch: reached first,
# it stops the guest like a passed bound; CI sets it so that a stuck job
# still ends, with its diagnostics, inside CI's budget). Each phase's
# bound counts from the end of the one before. LANEC_SCENARIO_TIMEOUT is
# qualify's --scenario-timeout in the guest (default 10m: the slowest
# scenario takes about 70 s there, and one past its limit leaves its
# goroutine stacks in the report). The defaults allow for a host shared
# with other work: on an idle 2-core host the guest boots in about 20 s
# and dockerd is ready about 10 s later. On failure the guest's last
# console lines are printed. The qemu process is stopped by its PID on
# every path: first a power-down through the ACPI button, so that
# `qualify` inside gets SIGTERM and writes its partial report, then
# SIGTERM and, 10 s later, SIGKILL to that PID only.
#
# Architecture (docs/lanes.md#lane-d), environment LANEC_ARCH: amd64 (the
# default: lane C, qemu-system-x86_64) or arm64 (lane D: a Debian arm64
# guest under qemu-system-aarch64 `-M virt`, the Engine tuple, qualify, the
# probe and the driver's test binary all cross-built for arm64, default
# manifest manifests/linux-arm64.yaml). An arm64 root is debootstrapped in
# two stages, the second in a chroot through qemu-user (binfmt_misc with
# the F flag, from qemu-user-static); its kernel package is unpacked
# rather than installed (installing it would run mkinitramfs under
# emulation for half an hour) and booted with a small initramfs assembled
# here from the guest's busybox and the modules that mount /dev/vda. On an
# x86-64 host an arm64 guest runs under TCG only. LANEC_CGROUP_DRIVER
# (systemd, the default, or cgroupfs: the Docker Desktop VM's shape; lane
# D's default manifest is then manifests/linux-arm64-cgroupfs.yaml) is the
# guest dockerd's cgroup driver; `run` refuses a manifest whose profile
# admits another (docs/lanes.md#lane-d).
#
# Accelerator (docs/lanes.md#accelerator): LANEC_ACCEL=auto|kvm|tcg
# (default auto: KVM only when a probe boot of the guest's kernel under KVM
# reaches its root mount within LANEC_KVM_PROBE_TIMEOUT seconds, default
# 30; else TCG). The choice and why go to the log and DIR.lanec/accel.txt.
#   scripts/lanec.sh accel [--kernel FILE]
#       Print the accelerator run would choose (kvm or tcg; why on stderr)
#       with FILE (default: the cached guest's kernel) as the probe kernel.
#   scripts/lanec.sh probe [--kernel FILE] [--accel kvm|tcg]
#       Only the probe boot, under the given accelerator (default kvm);
#       exit status 0 when the kernel reached its root mount.
#
# The guest has no network device at all (-nic none); results travel over a
# 9p shared folder the host creates per run.
set -euo pipefail

ROOT_DIR=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${LANEC_CACHE:-/var/cache/qualbox/lanec}
# The Debian archive debootstrap reads: LANEC_MIRROR, else the first
# `debian` archive this host's apt is configured with (deb822 sources or
# sources.list), so the guest comes from the same archive as the host.
host_mirror() {
	{
		awk '/^URIs:/ {for (i = 2; i <= NF; i++) print $i}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true
		awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; break}}' /etc/apt/sources.list 2>/dev/null || true
	} | grep -E '/debian/?$' | head -n 1 || true
}
MIRROR=${LANEC_MIRROR:-$(host_mirror)}
# LANEC_SUITE: the guest's Debian release, bookworm (Debian 12, Linux 6.1,
# the default) or trixie (Debian 13, Linux 6.12: hierarchical pids.events
# and pids.events.local, which kernels before 6.11 lack).
SUITE=${LANEC_SUITE:-bookworm}
case $SUITE in
bookworm | trixie) ;;
*)
	echo "lanec: LANEC_SUITE must be bookworm or trixie, got '$SUITE'" >&2
	exit 2
	;;
esac
B_PREFIX=/opt/qualbox-moby
TUPLE=${LANEC_TUPLE:-lane-b}
# Lane B's build is amd64 only: an arm64 guest runs a release tuple.
[ "${LANEC_ARCH:-amd64}" = amd64 ] || TUPLE=${LANEC_TUPLE:-ref-29.1.4}
if [ "$TUPLE" != lane-b ] && ! "$ROOT_DIR/scripts/tuple.sh" prefix "$TUPLE" >/dev/null; then
	echo "lanec: LANEC_TUPLE must be lane-b or a name of scripts/tuple.sh list, got '$TUPLE'" >&2
	exit 2
fi
# TUPLE_PREFIX holds the tuple's bin/ and VERSIONS once ensure_tuple ran.
TUPLE_PREFIX=
SCENARIO_TIMEOUT=${LANEC_SCENARIO_TIMEOUT:-10m}
if ! [[ $SCENARIO_TIMEOUT =~ ^[1-9][0-9]*(ms|s|m|h)$ ]]; then
	echo "lanec: LANEC_SCENARIO_TIMEOUT must be a Go duration such as 10m or 90s, got '$SCENARIO_TIMEOUT'" >&2
	exit 2
fi
IMAGE_BYTES=8G
ARCH=${LANEC_ARCH:-amd64}
case $ARCH in
amd64) QEMU=qemu-system-x86_64 QEMU_PKG=qemu-system-x86 CONSOLE=ttyS0 QEMU_MACHINE=() ;;
arm64)
	QEMU=qemu-system-aarch64 QEMU_PKG=qemu-system-arm CONSOLE=ttyAMA0
	QEMU_MACHINE=(-M virt -device virtio-rng-pci)
	;;
*)
	echo "lanec: LANEC_ARCH must be amd64 or arm64, got '$ARCH'" >&2
	exit 2
	;;
esac
HOST_ARCH=$(dpkg --print-architecture 2>/dev/null || echo unknown)
# LANEC_EMULATE=amd64 (lane D only): the guest also runs linux/amd64
# images, through qemu-user-static's qemu-x86_64 registered in binfmt_misc
# with the F flag (emulator_install); the guest image is amd64 (busybox
# and probe), loaded from an archive built here; default manifest
# manifests/linux-arm64-emulated-amd64.yaml.
EMULATE=${LANEC_EMULATE:-}
case $EMULATE in
'') ;;
amd64)
	if [ "$ARCH" != arm64 ]; then
		echo "lanec: LANEC_EMULATE=amd64 needs LANEC_ARCH=arm64, got '$ARCH'" >&2
		exit 2
	fi
	;;
*)
	echo "lanec: LANEC_EMULATE must be empty or amd64, got '$EMULATE'" >&2
	exit 2
	;;
esac
CGROUP_DRIVER=${LANEC_CGROUP_DRIVER:-systemd}
case $CGROUP_DRIVER in
systemd | cgroupfs) ;;
*)
	echo "lanec: LANEC_CGROUP_DRIVER must be systemd or cgroupfs, got '$CGROUP_DRIVER'" >&2
	exit 2
	;;
esac

# Guest packages (the same names in Debian 12 and 13). docker.io brings the docker CLI and its
# dependencies (containerd, runc, tini, iptables); its dockerd is not used.
PACKAGES=(systemd-sysv systemd udev dbus apparmor linux-image-amd64 containerd docker.io
	iproute2 kmod procps util-linux busybox-static)
if [ "$ARCH" = arm64 ]; then
	# The kernel is unpacked apart (arm64_kernel), not installed.
	kept=()
	for p in "${PACKAGES[@]}"; do [ "$p" = linux-image-amd64 ] || kept+=("$p"); done
	PACKAGES=("${kept[@]}")
fi
# Debian 13 ships the docker CLI apart from docker.io.
if [ "$SUITE" = trixie ]; then
	PACKAGES+=(docker-cli)
fi

KERNEL_ARGS="root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 apparmor=1 security=apparmor tsc=reliable"
[ "$ARCH" = amd64 ] || KERNEL_ARGS="root=/dev/vda rw console=$CONSOLE systemd.unified_cgroup_hierarchy=1 apparmor=1 security=apparmor"

log() { echo "lanec: $*" >&2; }

# WORK is a run's work directory (new_work); cleanup_work removes it unless
# LANEC_KEEP_WORK is set. Every EXIT trap of this script calls it.
WORK=
cleanup_work() { if [ -n "$WORK" ] && [ -z "${LANEC_KEEP_WORK:-}" ]; then rm -rf "$WORK"; fi; }
die() {
	echo "lanec: $*" >&2
	exit 1
}

# host_tools sets missing (host tools lane C lacks) and pkgs (the Debian
# packages that bring them).
host_tools() {
	missing=() pkgs=()
	command -v "$QEMU" >/dev/null 2>&1 || {
		missing+=("$QEMU")
		pkgs+=("$QEMU_PKG")
	}
	if [ "$ARCH" != "$HOST_ARCH" ]; then
		# The foreign root's second stage and the recipe run through
		# qemu-user; the initramfs is packed with cpio.
		command -v qemu-aarch64-static >/dev/null 2>&1 || {
			missing+=(qemu-aarch64-static)
			pkgs+=(qemu-user-static)
		}
		command -v update-binfmts >/dev/null 2>&1 || {
			missing+=(update-binfmts)
			pkgs+=(binfmt-support)
		}
		command -v cpio >/dev/null 2>&1 || {
			missing+=(cpio)
			pkgs+=(cpio)
		}
	fi
	command -v debootstrap >/dev/null 2>&1 || {
		missing+=(debootstrap)
		pkgs+=(debootstrap)
	}
	command -v mkfs.ext4 >/dev/null 2>&1 || {
		missing+=(mkfs.ext4)
		pkgs+=(e2fsprogs)
	}
}

# deps installs the host tools lane C lacks from Debian's packages (what
# .ci/run calls on a fresh machine); it changes nothing when all are there.
deps() {
	local missing pkgs
	host_tools
	# An arm64 guest's kernel package comes from the host's arm64 lists.
	local lists=
	if [ "$ARCH" = arm64 ] && ! apt-cache show linux-image-arm64:arm64 >/dev/null 2>&1; then lists=1; fi
	[ ${#pkgs[@]} -gt 0 ] || [ -n "$lists" ] || return 0
	[ "$(id -u)" = 0 ] || die "installing ${pkgs[*]} needs root; run: sudo $0 deps"
	if [ -n "$lists" ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
		log "adding the arm64 architecture to dpkg (for the guest's kernel package)"
		dpkg --add-architecture arm64
	fi
	log "installing ${pkgs[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2
}

# need_tools fails with one line naming every missing host tool and the
# apt-get command that installs it.
need_tools() {
	local missing pkgs
	host_tools
	command -v go >/dev/null 2>&1 || die "missing: go (Go toolchain for the static qualify, probe and driver test binaries; put /usr/local/go/bin on PATH)"
	if [ ${#missing[@]} -gt 0 ]; then
		die "missing: ${missing[*]}; install with: apt-get install -y --no-install-recommends ${pkgs[*]}"
	fi
	[ "$(id -u)" = 0 ] || die "lane C needs root (debootstrap, chroot, mkfs); run: sudo $0 $*"
}

# GUEST_FILES is the tree of files guest_recipe copies into the root as
# they are (regular files, mode 0644): the unit files, fstab and the rest
# of the guest's configuration. Their paths and contents are part of the
# cache key (guest_files).
GUEST_FILES=$ROOT_DIR/scripts/lanec/guest

# guest_recipe configures the debootstrapped root $1 from the host side. Its
# text is part of the cache key: editing it rebuilds the image.
guest_recipe() {
	local r=$1 f
	# hostname, hosts, fstab (the 9p folder at /mnt/qualbox), the 9p and
	# dummy modules, containerd's configuration and its longer start
	# timeout, docker.service (the tuple's dockerd), qualbox-net.service (a
	# dummy interface and forwarding, for network-isolation),
	# qualbox-job.service (runs /mnt/qualbox/job.sh, then powers off) and
	# systemd's quiet status.
	while IFS= read -r -d '' f; do
		install -D -m 0644 "$GUEST_FILES/$f" "$r/$f"
	done < <(cd "$GUEST_FILES" && find . -type f -print0)
	mkdir -p "$r/mnt/qualbox"
	# The serial console carries the job's output (journal+console); a login
	# prompt on it interleaves and drops lines, so no getty runs there.
	chroot "$r" systemctl mask serial-getty@ttyS0.service getty@tty1.service \
		docker.socket systemd-timesyncd.service >/dev/null 2>&1
	# The tuple's runc replaces Debian's (diverted, so dpkg keeps it aside),
	# and so do its containerd and shim when it has them. containerd runs
	# as its own unit rather than supervised by dockerd (its configuration
	# and start timeout are among the guest files).
	chroot "$r" systemctl unmask containerd.service >/dev/null 2>&1
	chroot "$r" dpkg-divert --local --rename --divert /usr/sbin/runc.debian --add /usr/sbin/runc >/dev/null
	install -m 0755 "$TUPLE_PREFIX/bin/runc" "$r/usr/sbin/runc"
	local b
	for b in containerd containerd-shim-runc-v2; do
		[ -x "$TUPLE_PREFIX/bin/$b" ] || continue
		chroot "$r" dpkg-divert --local --rename --divert "/usr/bin/$b.debian" --add "/usr/bin/$b" >/dev/null
		install -m 0755 "$TUPLE_PREFIX/bin/$b" "$r/usr/bin/$b"
	done
	install -m 0755 "$TUPLE_PREFIX/bin/dockerd" "$r/usr/local/bin/dockerd"
	cp "$TUPLE_PREFIX/VERSIONS" "$r/etc/qualbox-tuple-VERSIONS"
	mkdir -p "$r/etc/docker"
	local features=
	if grep -qx 'store containerd' "$TUPLE_PREFIX/VERSIONS"; then
		features=',"features":{"containerd-snapshotter":true}'
	fi
	printf '{"exec-opts":["native.cgroupdriver=systemd"],"bridge":"none","iptables":false,"ip6tables":false%s}\n' \
		"$features" >"$r/etc/docker/daemon.json"
	chroot "$r" systemctl enable containerd.service docker.service qualbox-job.service >/dev/null 2>&1
	chroot "$r" passwd -d root >/dev/null
	rm -f "$r/etc/machine-id" && touch "$r/etc/machine-id"
	chroot "$r" apt-get clean
}

# guest_recipe_variant adapts the recipe's result to LANEC_ARCH and
# LANEC_CGROUP_DRIVER when either is not the default (its text joins the
# recipe digest only then): the console
# getty masked on the architecture's serial port, and dockerd's cgroup
# driver.
guest_recipe_variant() {
	local r=$1
	chroot "$r" systemctl mask "serial-getty@$CONSOLE.service" >/dev/null 2>&1
	sed -i "s/native.cgroupdriver=systemd/native.cgroupdriver=$CGROUP_DRIVER/" "$r/etc/docker/daemon.json"
	sed -i "s/systemd cgroup driver/$CGROUP_DRIVER cgroup driver/" "$r/etc/systemd/system/docker.service"
}

# variant says whether guest_recipe_variant applies.
variant() { [ "$ARCH" != amd64 ] || [ "$CGROUP_DRIVER" != systemd ]; }

# base_key digests what debootstrap produces: the suite, the package list
# and, for another architecture than amd64, that architecture.
base_key() {
	{
		printf '%s\n' "$SUITE" "${PACKAGES[@]}"
		[ "$ARCH" = amd64 ] || echo "arch $ARCH"
	} | sha256sum | cut -c1-16
}

# ensure_tuple builds (or finds) the Engine tuple and sets TUPLE_PREFIX.
ensure_tuple() {
	if [ "$TUPLE" = lane-b ]; then
		[ "$ARCH" = amd64 ] || die "LANEC_TUPLE=lane-b is amd64 only; name a tuple of scripts/tuple.sh list for LANEC_ARCH=$ARCH"
		"$ROOT_DIR/scripts/engine.sh" install-b
		TUPLE_PREFIX=$B_PREFIX
	else
		TUPLE_PREFIX=$(TUPLE_ARCH=$ARCH "$ROOT_DIR/scripts/tuple.sh" build "$TUPLE")
	fi
	log "Engine tuple $TUPLE: $(head -n 1 "$TUPLE_PREFIX/VERSIONS")"
}

# guest_files prints a digest line (SHA-256, path) for each file the
# image takes from the checked-in tree: GUEST_FILES and, for arm64, the
# initramfs's init.
guest_files() {
	(cd "$GUEST_FILES" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
	if [ "$ARCH" = arm64 ]; then sha256sum "$INITRAMFS_INIT" | sed "s|$ROOT_DIR/||"; fi
}

# recipe_text prints the text the image's recipe digest covers: the
# kernel arguments, the image size, the guest files (guest_files) and, as
# bash prints them, the shell functions that configure the root for this
# LANEC_ARCH, cgroup driver and emulation.
recipe_text() {
	printf '%s\n' "$KERNEL_ARGS" "$IMAGE_BYTES"
	declare -f guest_recipe
	guest_files
	if variant; then declare -f guest_recipe_variant; fi
	if [ "$ARCH" = arm64 ]; then declare -f arm64_kernel; fi
	if [ -n "$EMULATE" ]; then declare -f emulator_install; fi
}

# image_inputs VERSIONS prints the lines of the image inputs record
# (docs/lanes.md#image-inputs) that the image key digests: suite,
# architecture, cgroup driver, emulation, package list, recipe digest,
# lane D's kernel package, and the Engine tuple with the digest of its
# VERSIONS lines as `qualify run --engine-build` records them (trailing
# space and empty lines dropped). Needs package_versions.
image_inputs() {
	local versions=$1
	echo "suite $SUITE"
	echo "arch $ARCH"
	echo "cgroup-driver $CGROUP_DRIVER"
	[ -z "$EMULATE" ] || echo "emulate $EMULATE $QEMU_USER_PKG"
	echo "packages ${PACKAGES[*]}"
	echo "recipe sha256:$(recipe_text | sha256sum | cut -d' ' -f1)"
	[ "$ARCH" != arm64 ] || echo "kernel-package $ARM64_KERNEL_PKG"
	echo "tuple $TUPLE sha256:$(sed -e 's/[[:space:]]*$//' -e '/^$/d' "$versions" | sha256sum | cut -d' ' -f1)"
}

# cache_key VERSIONS is the image's key: the first 16 hex digits of the
# SHA-256 of image_inputs, which `qualify verify` recomputes from the
# signed record. It digests everything in the bootable image: the base's
# inputs, the recipe with the guest files, and the tuple.
cache_key() { image_inputs "$1" | sha256sum | cut -c1-16; }

# image_record ROOT KEY VERSIONS prints the whole image inputs record of
# the root assembled at ROOT under KEY: image_inputs, the key, then what
# the root holds: its kernel package, the digest and length of its
# package list and the version of each of PACKAGES
# (docs/lanes.md#image-inputs).
image_record() {
	local r=$1 list
	image_inputs "$3"
	echo "key $2"
	if [ "$ARCH" = arm64 ]; then
		echo "kernel $ARM64_KERNEL_PKG"
	else
		local k
		# A pattern also matches packages dpkg knows only by name (the
		# signed kernel's conflicting -unsigned one, "not-installed"):
		# the installed ones alone.
		# shellcheck disable=SC2016 # dpkg-query's own format fields
		k=$(chroot "$r" dpkg-query -W -f '${db:Status-Status} ${Package} ${Version}\n' 'linux-image-[0-9]*' | sed -n 's/^installed //p')
		[ "$(grep -c . <<<"$k")" = 1 ] || die "the $SUITE root holds not one kernel package but: ${k:-none}"
		echo "kernel $k"
	fi
	# shellcheck disable=SC2016 # dpkg-query's own format fields
	list=$(chroot "$r" dpkg-query -W -f '${Package}:${Architecture} ${Version}\n' | LC_ALL=C sort)
	echo "dpkg sha256:$(printf '%s\n' "$list" | sha256sum | cut -d' ' -f1) $(printf '%s\n' "$list" | wc -l) packages"
	# shellcheck disable=SC2016 # dpkg-query's own format fields
	chroot "$r" dpkg-query -W -f '${Package} ${Version}\n' "${PACKAGES[@]}" | LC_ALL=C sort | sed 's/^/deb /'
}

# build_base DEST debootstraps LANEC_SUITE for LANEC_ARCH with PACKAGES
# and writes the root as a tar to DEST (renamed into place when complete).
# A foreign architecture's second stage runs in the chroot through
# qemu-user.
build_base() {
	local dest=$1 t start
	start=$(date +%s)
	mkdir -p "$CACHE/debs"
	t=$(mktemp -d "$CACHE/base.XXXXXX")
	# shellcheck disable=SC2064 # expand t now: it is local
	trap "umount_chroot '$t/root'; rm -rf '$t'; cleanup_work" EXIT
	[ -n "$MIRROR" ] || die "no Debian archive in this host's apt sources; set LANEC_MIRROR to one"
	log "debootstrap $SUITE into $t/root (minutes)"
	local foreign=()
	[ "$ARCH" = "$HOST_ARCH" ] || foreign=(--arch="$ARCH" --foreign)
	if ! debootstrap "${foreign[@]}" --variant=minbase --cache-dir="$CACHE/debs" --include="$(
		IFS=,
		echo "${PACKAGES[*]}"
	)" "$SUITE" "$t/root" "$MIRROR" >"$t/debootstrap.log" 2>&1; then
		tail -n 20 "$t/debootstrap.log" >&2
		if grep -qiE 'Failed getting release file|Couldn.t download|Temporary failure|Could not resolve' "$t/debootstrap.log"; then
			die "Debian packages unreachable at $MIRROR (set LANEC_MIRROR to a reachable mirror)"
		fi
		die "debootstrap failed; log above"
	fi
	if [ ${#foreign[@]} -gt 0 ]; then
		ensure_binfmt
		log "debootstrap second stage in the $ARCH chroot through qemu-user (about 12 min)"
		if ! chroot "$t/root" /debootstrap/debootstrap --second-stage >"$t/debootstrap2.log" 2>&1; then
			tail -n 20 "$t/debootstrap2.log" >&2
			die "debootstrap's second stage failed; log above"
		fi
	fi
	umount_chroot "$t/root"
	tar --numeric-owner --xattrs --acls -C "$t/root" -cf "$t/base.tar" .
	mv "$t/base.tar" "$dest"
	log "debootstrap base cached as $dest after $(($(date +%s) - start)) s"
	rm -rf "$t"
	trap cleanup_work EXIT
}

# image builds (or finds) the cached guest and sets IMAGE_DIR. Two stages,
# each assembled under a temporary name and renamed into place when
# complete: the debootstrapped root as a tar (minutes; keyed by base_key),
# and the bootable image, the recipe applied to that root (keyed by
# cache_key), so that editing the recipe does not re-run debootstrap.
image() {
	need_tools image
	local key bkey base
	bkey=$(base_key)
	base=$CACHE/base-$bkey.tar
	package_versions
	# The base first: debootstrap needs no tuple, and a tuple build can
	# run meanwhile.
	[ -f "$base" ] || build_base "$base"
	ensure_tuple
	key=$(cache_key "$TUPLE_PREFIX/VERSIONS")
	IMAGE_DIR=$CACHE/$key
	if [ -f "$IMAGE_DIR/rootfs.img" ] && [ -f "$IMAGE_DIR/vmlinuz" ] && [ -f "$IMAGE_DIR/initrd.img" ]; then
		log "cached guest $IMAGE_DIR"
		return 0
	fi
	local tmp start
	start=$(date +%s)
	tmp=$(mktemp -d "$CACHE/build.XXXXXX")
	# shellcheck disable=SC2064 # expand tmp now: it is local
	trap "umount_chroot '$tmp/root'; rm -rf '$tmp'; cleanup_work" EXIT
	log "cached debootstrap base $base"
	mkdir -p "$tmp/root"
	tar --numeric-owner --xattrs --acls -C "$tmp/root" -xf "$base"
	[ "$ARCH" = "$HOST_ARCH" ] || ensure_binfmt
	guest_recipe "$tmp/root"
	if variant; then guest_recipe_variant "$tmp/root"; fi
	if [ -n "$EMULATE" ]; then emulator_install "$tmp/root" "$tmp/emulator"; fi
	mkdir -p "$tmp/out"
	if [ "$ARCH" = arm64 ]; then
		arm64_kernel "$tmp/root" "$tmp/out" "$tmp/kernel"
	else
		# The kernel package links /vmlinuz and /initrd.img to its files in
		# /boot; without those links, the newest of /boot.
		local kernel initrd
		kernel=$(readlink -f "$tmp/root/vmlinuz" 2>/dev/null || true)
		initrd=$(readlink -f "$tmp/root/initrd.img" 2>/dev/null || true)
		[ -f "$kernel" ] || kernel=$(find "$tmp/root/boot" -maxdepth 1 -name 'vmlinuz-*' | sort -V | tail -n 1)
		[ -f "$initrd" ] || initrd=$(find "$tmp/root/boot" -maxdepth 1 -name 'initrd.img-*' | sort -V | tail -n 1)
		if [ ! -f "$kernel" ] || [ ! -f "$initrd" ]; then die "no kernel or initrd in the $SUITE root"; fi
		cp "$kernel" "$tmp/out/vmlinuz"
		cp "$initrd" "$tmp/out/initrd.img"
	fi
	# What the image was assembled from, for the signed run header
	# (qualify run --image-inputs).
	image_record "$tmp/root" "$key" "$TUPLE_PREFIX/VERSIONS" >"$tmp/root/etc/qualbox-image-inputs"
	log "mkfs.ext4 -d onto a sparse $IMAGE_BYTES image"
	truncate -s "$IMAGE_BYTES" "$tmp/out/rootfs.img"
	mkfs.ext4 -q -L qualbox-lanec -d "$tmp/root" "$tmp/out/rootfs.img"
	{
		echo "key $key base $bkey"
		echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(($(date +%s) - start)) s"
		echo "packages ${PACKAGES[*]}"
		echo "tuple $TUPLE"
		echo "arch $ARCH cgroup driver $CGROUP_DRIVER"
		[ "$ARCH" != arm64 ] || echo "kernel package $ARM64_KERNEL_PKG (unpacked, own initramfs)"
		cat "$TUPLE_PREFIX/VERSIONS"
		# Lane D's kernel is unpacked, not installed: dpkg does not know it.
		local kpkg=(linux-image-amd64)
		[ "$ARCH" = amd64 ] || kpkg=()
		# shellcheck disable=SC2016 # dpkg-query's own format fields, not shell expansions
		chroot "$tmp/root" dpkg-query -W -f '${Package} ${Version}\n' "${kpkg[@]}" systemd apparmor containerd docker.io 2>/dev/null
	} >"$tmp/out/BUILD"
	rm -rf "$IMAGE_DIR"
	mv "$tmp/out" "$IMAGE_DIR"
	rm -rf "$tmp"
	trap cleanup_work EXIT
	log "guest image $IMAGE_DIR built in $(($(date +%s) - start)) s"
}

# package_versions sets what the cache key reads from this host's package
# lists: lane D's kernel package and, emulating, qemu-user-static's version.
package_versions() {
	[ "$ARCH" != arm64 ] || ARM64_KERNEL_PKG=$(arm64_kernel_pkg)
	if [ -n "$EMULATE" ]; then
		QEMU_USER_PKG=$(candidate_version "qemu-user-static:$ARCH")
		[ -n "$QEMU_USER_PKG" ] || die "no qemu-user-static:$ARCH in this host's package lists"
	fi
}

# key_command implements `key [--versions FILE]` and, as `key_command
# --inputs ...`, `inputs [--versions FILE]` (see the header).
key_command() {
	local versions='' inputs=
	if [ "${1:-}" = --inputs ]; then
		inputs=1
		shift
	fi
	while [ $# -gt 0 ]; do
		case $1 in
		--versions)
			[ $# -ge 2 ] || die "key: --versions needs a file"
			versions=$2
			shift 2
			;;
		*) die "key: unknown argument $1 (see the header of $0)" ;;
		esac
	done
	package_versions
	if [ -z "$versions" ]; then
		ensure_tuple >&2
		versions=$TUPLE_PREFIX/VERSIONS
	fi
	[ -f "$versions" ] || die "key: no VERSIONS file at $versions"
	if [ -n "$inputs" ]; then
		image_inputs "$versions"
		echo "key $(cache_key "$versions")"
		return 0
	fi
	echo "image $(cache_key "$versions")"
	echo "base $(base_key)"
}

# ensure_binfmt makes this host run $ARCH executables through qemu-user:
# binfmt_misc mounted and qemu-user-static's handler enabled, with the F
# flag (the interpreter is opened when registered, so a chroot needs no
# copy of it). Fails naming what is missing.
ensure_binfmt() {
	local h=/proc/sys/fs/binfmt_misc/qemu-aarch64
	mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc ||
		die "cannot mount binfmt_misc at /proc/sys/fs/binfmt_misc (an $ARCH root needs qemu-user through it)"
	[ -f "$h" ] || update-binfmts --enable qemu-aarch64 >&2 ||
		die "cannot enable qemu-user-static's qemu-aarch64 binfmt handler (update-binfmts --enable qemu-aarch64)"
	grep -qx enabled "$h" || echo 1 >"$h"
	grep -q '^flags: .*F' "$h" || die "the qemu-aarch64 binfmt handler lacks the F flag: $(grep flags "$h")"
}

# emulator_install ROOT TMP puts qemu-user-static's qemu-x86_64 (version
# QEMU_USER_PKG, for the guest's architecture) into ROOT and registers it
# at boot through systemd-binfmt with the F flag (the interpreter opened at
# registration, so containers need no copy of it). Only the one binary is
# unpacked: the package's own binfmt files would register every emulator.
emulator_install() {
	local r=$1 t=$2
	mkdir -p "$t"
	(cd "$t" && apt-get download -q -o APT::Sandbox::User=root "qemu-user-static:$ARCH=$QEMU_USER_PKG" >&2) ||
		die "cannot download qemu-user-static:$ARCH=$QEMU_USER_PKG"
	dpkg-deb --fsys-tarfile "$t"/qemu-user-static_*.deb | tar -x -C "$t" ./usr/bin/qemu-x86_64-static
	install -m 0755 "$t/usr/bin/qemu-x86_64-static" "$r/usr/bin/qemu-x86_64-static"
	mkdir -p "$r/etc/binfmt.d"
	printf '%s\n' ':qemu-x86_64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x3e\x00:\xff\xff\xff\xff\xff\xfe\xfe\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:/usr/bin/qemu-x86_64-static:F' \
		>"$r/etc/binfmt.d/qualbox-qemu-x86_64.conf"
}

# ARM64_KERNEL_PKG names the Debian arm64 kernel package lane D boots:
# the one linux-image-arm64 depends on in this host's arm64 package lists
# (dpkg --add-architecture arm64; apt-get update), with its version. The
# host's release must be LANEC_SUITE.
arm64_kernel_pkg() {
	local name ver host
	# Those lists are of the host's release: a guest of another suite
	# would boot that release's kernel under its own userland.
	host=$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release 2>/dev/null | tr -d '"')
	[ "$host" = "$SUITE" ] ||
		die "lane D takes its kernel package from this host's arm64 package lists, which are ${host:-of no named release}'s, not LANEC_SUITE=$SUITE's; run lane D on a Debian $SUITE host or with LANEC_SUITE=$host"
	name=$(apt-cache depends linux-image-arm64:arm64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9][^:]*\).*/\1/p' | head -n 1)
	[ -n "$name" ] || die "no linux-image-arm64 in this host's arm64 package lists (run: dpkg --add-architecture arm64 && apt-get update)"
	ver=$(candidate_version "$name:arm64")
	[ -n "$ver" ] || die "no installable $name:arm64 in this host's arm64 package lists"
	echo "$name $ver"
}

# candidate_version PKG prints the version apt would install of PKG (the
# one `apt-get download PKG` fetches, which is what goes into the image),
# or nothing when PKG has no candidate. `apt-cache show` is not used: it
# lists every known version in no promised order.
candidate_version() {
	apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: //p' | grep -v '^(none)$' | head -n 1 || true
}

# INITRAMFS_INIT is lane D's initramfs /init (arm64_kernel).
INITRAMFS_INIT=$ROOT_DIR/scripts/lanec/initramfs-init

# arm64_kernel ROOT OUT TMP unpacks the kernel package ARM64_KERNEL_PKG into
# ROOT (its modules, for 9p and the rest systemd loads), writes OUT/vmlinuz
# and OUT/initrd.img: an initramfs of the root's static busybox and the
# modules that mount /dev/vda (virtio_blk, virtio_pci, ext4, crc32c_generic
# with their dependencies in modules.dep order), whose /init mounts it and
# switches to it (INITRAMFS_INIT).
arm64_kernel() {
	local r=$1 out=$2 t=$3 name ver kver
	read -r name ver <<<"$ARM64_KERNEL_PKG"
	mkdir -p "$t/deb" "$t/initrd/bin" "$t/initrd/modules"
	(cd "$t/deb" && apt-get download -q -o APT::Sandbox::User=root "$name:arm64=$ver" >&2) || die "cannot download $name:arm64=$ver"
	# --keep-directory-symlink: the root's /lib is a symlink to usr/lib
	# (merged /usr), which a plain extraction of ./lib/modules replaces.
	dpkg-deb --fsys-tarfile "$t/deb"/*.deb | tar -x --keep-directory-symlink -C "$r"
	kver=${name#linux-image-}
	[ -d "$r/lib/modules/$kver" ] || die "$name unpacked no /lib/modules/$kver"
	chroot "$r" /sbin/depmod -a "$kver"
	cp "$r/boot/vmlinuz-$kver" "$out/vmlinuz"
	cp "$r/bin/busybox" "$t/initrd/bin/busybox"
	local -A seen=()
	local order=()
	# load_order PATH appends PATH's dependencies, then PATH, to order.
	load_order() {
		local m=$1 d deps
		[ -z "${seen[$m]:-}" ] || return 0
		seen[$m]=1
		deps=$(grep -m1 "^$m:" "$r/lib/modules/$kver/modules.dep" | cut -d: -f2)
		for d in $deps; do load_order "$d"; done
		order+=("$m")
	}
	local want m
	for want in virtio_blk virtio_pci ext4 crc32c_generic; do
		m=$(grep -m1 -E "/$want\.ko(\.xz)?:" "$r/lib/modules/$kver/modules.dep" | cut -d: -f1)
		if [ -n "$m" ]; then
			load_order "$m"
		elif ! grep -qE "/$want\.ko\$" "$r/lib/modules/$kver/modules.builtin"; then
			die "$name has no module $want and does not build it in: the initramfs could not mount /dev/vda"
		fi
	done
	: >"$t/initrd/modules/order"
	for m in "${order[@]}"; do
		case $m in
		*.xz) xz -dc "$r/lib/modules/$kver/$m" >"$t/initrd/modules/$(basename "$m" .xz)" ;;
		*) cp "$r/lib/modules/$kver/$m" "$t/initrd/modules/" ;;
		esac
		basename "${m%.xz}" >>"$t/initrd/modules/order"
	done
	install -m 0755 "$INITRAMFS_INIT" "$t/initrd/init"
	(cd "$t/initrd" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0 | gzip -9n) >"$out/initrd.img"
}

umount_chroot() {
	# debootstrap mounts /proc and /sys in the target while it works.
	local m
	for m in proc sys dev/pts dev; do
		if mountpoint -q "$1/$m" 2>/dev/null; then umount -l "$1/$m" || true; fi
	done
}

# --- the accelerator (docs/lanes.md#accelerator) ----------------------------
#
# LANEC_ACCEL chooses how QEMU runs the guest's vCPUs: tcg (the emulator,
# works everywhere), kvm (hardware virtualisation; an error when it does
# not work) or auto (the default: kvm when the probe below passes, else
# tcg). An openable /dev/kvm does not prove that KVM can run a stock
# kernel (a nested host module may abort or hang it), so kvm is only ever
# chosen after the guest's own kernel booted under it.
# LANEC_KVM_PROBE_TIMEOUT bounds that probe boot (seconds, default 30; a
# kernel under working KVM reaches the mark in 1-3 s).
ACCEL_MODE=${LANEC_ACCEL:-auto}
PROBE_TIMEOUT=${LANEC_KVM_PROBE_TIMEOUT:-30}
# PROBE_MARK is the serial console line that proves the probe kernel ran
# through its early boot to the root mount: with no root device and no
# initrd the kernel panics with it, and panic=-1 with -no-reboot ends qemu.
PROBE_MARK='VFS: Unable to mount root fs'
PROBE_PID=

# check_accel_mode fails with exit status 2 on a LANEC_ACCEL or
# LANEC_KVM_PROBE_TIMEOUT it cannot use.
check_accel_mode() {
	case $ACCEL_MODE in
	auto | kvm | tcg) ;;
	*)
		echo "lanec: LANEC_ACCEL must be auto, kvm or tcg, got '$ACCEL_MODE'" >&2
		exit 2
		;;
	esac
	if ! [[ $PROBE_TIMEOUT =~ ^[1-9][0-9]{0,3}$ ]]; then
		echo "lanec: LANEC_KVM_PROBE_TIMEOUT must be whole seconds from 1 to 9999, got '$PROBE_TIMEOUT'" >&2
		exit 2
	fi
}

# stop_probe kills the probe's qemu by its PID (SIGTERM, then SIGKILL after
# 5 s) and reaps it.
stop_probe() {
	[ -n "$PROBE_PID" ] || return 0
	local i
	kill -TERM "$PROBE_PID" 2>/dev/null || true
	for ((i = 0; i < 25; i++)); do
		kill -0 "$PROBE_PID" 2>/dev/null || break
		sleep 0.2
	done
	kill -KILL "$PROBE_PID" 2>/dev/null || true
	wait "$PROBE_PID" 2>/dev/null || true
	PROBE_PID=
}

# boot_probe KERNEL LOG QEMU_ARGS... boots KERNEL (a bzImage; no root fs,
# no initrd, 1 vCPU, 256 MiB) with the given accelerator arguments for at
# most PROBE_TIMEOUT seconds, writes its serial console and qemu's own
# output to LOG, and returns 0 when the console shows PROBE_MARK. It sets
# PROBE_WHY to one line saying what happened. The qemu it starts is
# killed by its PID on every path, an interruption included.
boot_probe() {
	local kernel=$1 plog=$2 dir t0 now rc saved
	shift 2
	PROBE_WHY=
	dir=$(mktemp -d "${TMPDIR:-/tmp}/qualbox-lanec-probe.XXXXXX")
	saved=$(trap -p EXIT INT TERM HUP)
	# An interruption also removes the caller's probe log, which is
	# written only once the probe ends.
	trap 'stop_probe; rm -rf "$dir" "$plog"' EXIT
	trap 'stop_probe; rm -rf "$dir" "$plog"; exit 130' INT TERM HUP
	t0=$(date +%s)
	# The guest architecture's emulator, machine and serial console: on an
	# arm64 host, lane D's kernel is probed under KVM as lane C's is on an
	# x86-64 one.
	"$QEMU" -name qualbox-lanec-probe -nodefaults -no-user-config -display none -no-reboot \
		"${QEMU_MACHINE[@]}" "$@" -smp 2 -m 256M -kernel "$kernel" -append "console=$CONSOLE panic=-1" \
		-nic none -serial "file:$dir/console.log" </dev/null >"$dir/qemu.log" 2>&1 &
	PROBE_PID=$!
	rc=1
	while :; do
		now=$(date +%s)
		# Liveness first, then the console: a mark printed just before
		# qemu exits (panic=-1 ends it right after) is then still read.
		local alive=1
		kill -0 "$PROBE_PID" 2>/dev/null || alive=0
		if grep -qF "$PROBE_MARK" "$dir/console.log" 2>/dev/null; then
			PROBE_WHY="the kernel printed '$PROBE_MARK' after $((now - t0)) s"
			rc=0
			break
		fi
		if [ "$alive" = 0 ]; then
			local qrc=0
			wait "$PROBE_PID" || qrc=$?
			PROBE_PID=
			PROBE_WHY="qemu exited with status $qrc after $((now - t0)) s before the kernel printed '$PROBE_MARK'"
			if [ -s "$dir/qemu.log" ]; then
				PROBE_WHY+=": $(tail -n 1 "$dir/qemu.log")"
			fi
			break
		fi
		if ((now - t0 >= PROBE_TIMEOUT)); then
			PROBE_WHY="the kernel did not print '$PROBE_MARK' within $PROBE_TIMEOUT s (qemu pid $PROBE_PID killed)"
			break
		fi
		sleep 0.2
	done
	stop_probe
	{
		echo "# $QEMU ${QEMU_MACHINE[*]:+${QEMU_MACHINE[*]} }$* (probe, $PROBE_WHY)"
		echo "## qemu output"
		cat "$dir/qemu.log" 2>/dev/null || true
		echo "## serial console"
		[ ! -f "$dir/console.log" ] || tr -d '\r' <"$dir/console.log"
	} >"$plog"
	rm -rf "$dir"
	trap - EXIT INT TERM HUP
	eval "$saved"
	return "$rc"
}

# choose_accel KERNEL [DIR] sets ACCEL (kvm or tcg), ACCEL_WHY (one line)
# and QEMU_ACCEL (qemu's accelerator and CPU arguments) from LANEC_ACCEL,
# probing KVM with KERNEL (the guest's own) unless LANEC_ACCEL=tcg. It logs
# the choice and, given DIR, writes it to DIR/accel.txt and the probe's
# output to DIR/accel-probe.log. LANEC_ACCEL=kvm with a failing probe is
# an error (exit status 1).
choose_accel() {
	local kernel=$1 dir=${2:-} plog
	check_accel_mode
	[ -f "$kernel" ] || die "accelerator probe: no kernel at $kernel"
	# Refused before the probe log exists, so that refusal leaves no file.
	if [ "$ARCH" != "$HOST_ARCH" ] && [ "$ACCEL_MODE" = kvm ]; then
		die "LANEC_ACCEL=kvm, but KVM cannot run an $ARCH guest on this $HOST_ARCH host"
	fi
	plog=$(mktemp "${TMPDIR:-/tmp}/qualbox-lanec-probe-log.XXXXXX")
	if [ "$ACCEL_MODE" = tcg ]; then
		ACCEL=tcg ACCEL_WHY="LANEC_ACCEL=tcg"
		echo "# no probe: LANEC_ACCEL=tcg" >"$plog"
	elif [ "$ARCH" != "$HOST_ARCH" ]; then
		ACCEL=tcg ACCEL_WHY="LANEC_ACCEL=$ACCEL_MODE; an $ARCH guest on an $HOST_ARCH host runs under TCG only"
		echo "# no probe: $ACCEL_WHY" >"$plog"
	elif boot_probe "$kernel" "$plog" -accel kvm -cpu host; then
		ACCEL=kvm ACCEL_WHY="LANEC_ACCEL=$ACCEL_MODE; KVM probe passed: $PROBE_WHY"
	elif [ "$ACCEL_MODE" = kvm ]; then
		[ -z "$dir" ] || cp "$plog" "$dir/accel-probe.log"
		sed 's/^/  probe| /' "$plog" | tail -n 20 >&2
		rm -f "$plog"
		die "LANEC_ACCEL=kvm, but KVM cannot run the guest's kernel: $PROBE_WHY"
	else
		ACCEL=tcg ACCEL_WHY="LANEC_ACCEL=auto; KVM probe failed: $PROBE_WHY"
	fi
	if [ "$ACCEL" = kvm ]; then
		QEMU_ACCEL=(-accel kvm -cpu host)
	elif [ "$ARCH" = arm64 ]; then
		# pauth-impdef: the IMPLEMENTATION DEFINED pointer-authentication
		# algorithm, fast to emulate (the architected QARMA5 default makes
		# arm64 code 1.1-1.6x slower under TCG; docs/lanes.md#lane-d).
		QEMU_ACCEL=(-accel "tcg,thread=multi" -cpu "max,pauth-impdef=on")
	else
		QEMU_ACCEL=(-accel "tcg,thread=multi" -cpu qemu64)
	fi
	log "accelerator $ACCEL ($ACCEL_WHY)"
	if [ -n "$dir" ]; then
		printf 'accel %s\nwhy %s\nqemu %s\n' "$ACCEL" "$ACCEL_WHY" "${QEMU_ACCEL[*]}" >"$dir/accel.txt"
		cp "$plog" "$dir/accel-probe.log"
	fi
	rm -f "$plog"
}

# accel_command implements `accel` and `probe` (see the header): $1 is
# which, the rest its arguments.
accel_command() {
	local cmd=$1 kernel='' accel=kvm
	shift
	while [ $# -gt 0 ]; do
		case $1 in
		--kernel | --accel)
			[ $# -ge 2 ] || die "$cmd: $1 needs a value"
			[ "$1" = --kernel ] || [ "$cmd" = probe ] || die "$cmd: unknown argument $1 (see the header of $0)"
			if [ "$1" = --kernel ]; then kernel=$2; else accel=$2; fi
			shift 2
			;;
		*) die "$cmd: unknown argument $1 (see the header of $0)" ;;
		esac
	done
	check_accel_mode
	command -v "$QEMU" >/dev/null 2>&1 ||
		die "missing: $QEMU; install with: apt-get install -y --no-install-recommends $QEMU_PKG"
	if [ -z "$kernel" ]; then
		image
		kernel=$IMAGE_DIR/vmlinuz
	fi
	[ -f "$kernel" ] || die "$cmd: no kernel at $kernel"
	[ "$cmd" = accel ] || [ "$accel" = tcg ] || [ "$ARCH" = "$HOST_ARCH" ] || die "probe: KVM cannot run an $ARCH kernel on this $HOST_ARCH host"
	if [ "$cmd" = accel ]; then
		choose_accel "$kernel"
		echo "$ACCEL"
		return 0
	fi
	local args plog rc=0
	case $accel in
	kvm) args=(-accel kvm -cpu host) ;;
	tcg)
		args=(-accel tcg -cpu qemu64)
		[ "$ARCH" = amd64 ] || args=(-accel tcg -cpu max)
		;;
	*)
		echo "lanec: probe --accel must be kvm or tcg, got '$accel'" >&2
		exit 2
		;;
	esac
	plog=$(mktemp "${TMPDIR:-/tmp}/qualbox-lanec-probe-log.XXXXXX")
	boot_probe "$kernel" "$plog" "${args[@]}" || rc=$?
	if [ "$rc" != 0 ]; then
		sed 's/^/  probe| /' "$plog" | tail -n 20 >&2
	fi
	rm -f "$plog"
	log "probe under $accel: $PROBE_WHY"
	return "$rc"
}

# --- running the guest ---------------------------------------------------
#
# The run is internal/lanevm's: this script assembles the image, fills the
# work directory's shared folder (the binaries, the job, its parameters),
# chooses the accelerator, then hands the run to internal/lanevm/supervise
# (exec), which boots, bounds, shows, stops, collects and exits with the
# run's status.

SUPERVISE=

# new_work makes the run's work directory (share/ is the guest's 9p folder;
# the supervisor adds its console and qemu logs) and removes it if this
# script ends before the supervisor takes it over (exec runs no EXIT trap).
new_work() {
	WORK=$(mktemp -d /tmp/qualbox-lanec.XXXXXX)
	chmod 700 "$WORK"
	# host/ holds the host's own files for DIR.lanec (accel.txt), apart
	# from the shared folder, which the guest controls.
	mkdir -p "$WORK/share/bin" "$WORK/share/params" "$WORK/share/state" "$WORK/share/out" "$WORK/host"
	trap cleanup_work EXIT
	trap 'log "interrupted"; exit 130' INT TERM HUP
}

# supervisor builds the supervisor (internal/lanevm/supervise) for this
# host into the work directory and checks the run's bounds with it: an
# unusable LANEC_* bound ends this script with exit status 2, a passed
# LANEC_DEADLINE with 1, before anything is assembled or booted.
supervisor() {
	command -v go >/dev/null 2>&1 || die "missing: go (Go toolchain for the supervisor and the static binaries; put /usr/local/go/bin on PATH)"
	SUPERVISE=$WORK/supervise
	(cd "$ROOT_DIR" && GOARCH=$(go env GOHOSTARCH) CGO_ENABLED=0 go build -trimpath -o "$SUPERVISE" ./internal/lanevm/supervise) ||
		die "cannot build the supervisor (internal/lanevm/supervise)"
	local budget rc=0
	budget=$("$SUPERVISE" budget) || rc=$?
	[ "$rc" = 0 ] || exit "$rc"
	log "bounds: $budget"
}

# boot_guest ARGS... chooses the accelerator and hands the run to the
# supervisor with ARGS (--out DIR, --record DIR) and TIMINGS; it does not
# return. The work directory is the supervisor's to remove from then on
# (kept with LANEC_KEEP_WORK).
boot_guest() {
	local t0 t timing=() keep=(--remove-work)
	t0=$(date +%s)
	choose_accel "$IMAGE_DIR/vmlinuz" "$WORK/host"
	TIMINGS+=("accel_s $(($(date +%s) - t0)) (choosing the accelerator: $ACCEL)")
	for t in "${TIMINGS[@]}"; do timing+=(--timing "$t"); done
	[ -z "${LANEC_KEEP_WORK:-}" ] || keep=()
	cp "$ROOT_DIR/scripts/lanec-job.sh" "$WORK/share/job.sh"
	exec "$SUPERVISE" run --qemu "$QEMU" --image "$IMAGE_DIR" --append "$KERNEL_ARGS" --work "$WORK" \
		"${keep[@]}" "${timing[@]}" "$@" -- "${QEMU_MACHINE[@]}" "${QEMU_ACCEL[@]}"
}

# guest_archive FILE writes the guest image archive for LANEC_EMULATE
# (Debian's static busybox of that architecture, the probe built for it),
# as make release does.
guest_archive() {
	local out=$1 t
	t=$(mktemp -d "$WORK/archive.XXXXXX")
	(cd "$t" && apt-get download -q -o APT::Sandbox::User=root "busybox-static:$EMULATE" >&2) || die "cannot download busybox-static:$EMULATE"
	dpkg-deb --fsys-tarfile "$t"/busybox-static_*.deb | tar -x -C "$t" ./bin/busybox
	(cd "$ROOT_DIR" && GOARCH=$EMULATE CGO_ENABLED=0 go build -trimpath -o "$t/probe" ./qualify/guest/probe)
	(cd "$ROOT_DIR" && go run ./internal/release/guestarchive -arch "$EMULATE" -busybox "$t/bin/busybox" -probe "$t/probe" -out "$out")
	log "guest image archive for linux/$EMULATE: $out"
}

build_static() {
	# Static binaries: the guest has no Go toolchain and only Debian's libc.
	local bin=$1
	mkdir -p "$bin"
	log "building static qualify, probe and driver test binaries"
	(cd "$ROOT_DIR" && GOARCH=$ARCH CGO_ENABLED=0 go build -trimpath -o "$bin/qualify" ./cmd/qualify)
	(cd "$ROOT_DIR" && GOARCH=$ARCH CGO_ENABLED=0 go build -trimpath -o "$bin/qualbox-probe" ./qualify/guest/probe)
	if [ -z "${NO_CONFORMANCE:-}" ]; then
		(cd "$ROOT_DIR" && GOARCH=$ARCH CGO_ENABLED=0 go test -c -trimpath -o "$bin/driver.test" ./driver)
	fi
}

run() {
	local manifest=$ROOT_DIR/manifests/linux-x64.yaml out='' key=/var/lib/qualbox/keys/qualbox-ed25519.key
	[ "$ARCH" = amd64 ] || manifest=$ROOT_DIR/manifests/linux-$ARCH.yaml
	[ "$ARCH" = amd64 ] || [ "$CGROUP_DRIVER" = systemd ] || manifest=$ROOT_DIR/manifests/linux-$ARCH-$CGROUP_DRIVER.yaml
	[ -z "$EMULATE" ] || manifest=$ROOT_DIR/manifests/linux-$ARCH-emulated-$EMULATE.yaml
	NO_CONFORMANCE=
	local record_dir=
	check_accel_mode
	while [ $# -gt 0 ]; do
		case $1 in
		--record) record_dir=$2 && shift 2 ;;
		--manifest) manifest=$2 && shift 2 ;;
		--out) out=$2 && shift 2 ;;
		--signing-key) key=$2 && shift 2 ;;
		--no-conformance) NO_CONFORMANCE=1 && shift ;;
		*) die "run: unknown argument $1 (see the header of $0)" ;;
		esac
	done
	[ -f "$manifest" ] || die "run: no manifest at $manifest"
	if [ -n "$EMULATE" ] && [ -z "$NO_CONFORMANCE" ]; then
		# The conformance suite builds its image from the guest's own
		# busybox, which is not the emulated architecture's.
		log "LANEC_EMULATE=$EMULATE: the conformance suite is not run (it runs in lane D without emulation)"
		NO_CONFORMANCE=1
	fi
	# The conformance suite runs under the manifest's profile.
	CONFORMANCE_PROFILE=$(sed -n 's/^profile: *\([A-Za-z0-9.-]*\) *$/\1/p' "$manifest" | head -n 1)
	[ -n "$CONFORMANCE_PROFILE" ] || die "run: $manifest names no profile"
	# A profile admits one cgroup driver: a guest dockerd with another
	# fails admission after a boot of minutes, so refuse it here.
	local pfile=$ROOT_DIR/profiles/profiles/$CONFORMANCE_PROFILE.yaml pdriver
	[ -f "$pfile" ] || die "run: $manifest names profile $CONFORMANCE_PROFILE, which has no $pfile"
	pdriver=$(sed -n '/^cgroup:/,/^[^ #]/s/^  driver: *\([a-z]*\).*/\1/p' "$pfile" | head -n 1)
	[ "$pdriver" = "$CGROUP_DRIVER" ] ||
		die "run: LANEC_CGROUP_DRIVER=$CGROUP_DRIVER, but profile $CONFORMANCE_PROFILE ($manifest) admits the ${pdriver:-unnamed} cgroup driver only; its admission would refuse the guest's Engine"
	[ -f "$key" ] || die "run: no signing key at $key (make keys, or --signing-key FILE)"
	out=${out:-$ROOT_DIR/reports/runs/$(date -u +%Y%m%dT%H%M%SZ)}
	[ ! -e "$out" ] || die "run: $out already exists"
	new_work
	supervisor
	TIMINGS=()
	local t0
	t0=$(date +%s)
	image
	TIMINGS+=("image_s $(($(date +%s) - t0)) (lanec.sh image, cache key $(basename "$IMAGE_DIR"))")
	local share=$WORK/share
	build_static "$share/bin"
	# The guest image: built in the guest from its own busybox and the
	# probe, or, emulating, an archive of the emulated architecture's
	# busybox and probe made here (the guest has neither).
	if [ -n "$EMULATE" ]; then
		guest_archive "$share/guest-$EMULATE.tar"
		echo "guest-$EMULATE.tar" >"$share/params/image-archive"
	fi
	echo "$SCENARIO_TIMEOUT" >"$share/params/scenario-timeout"
	[ -n "$NO_CONFORMANCE" ] || echo "$CONFORMANCE_PROFILE" >"$share/params/conformance-profile"
	install -m 0600 "$key" "$share/signing.key"
	cp "$manifest" "$share/manifest.yaml"
	local record=()
	if [ -n "$record_dir" ]; then
		install -m 0755 "$ROOT_DIR/scripts/lanec-record-guest.sh" "$share/record.sh"
		record=(--record "$record_dir")
	fi
	boot_guest --out "$out" "${record[@]}"
}

record() {
	local dest=${1:?usage: $0 record DIR}
	check_accel_mode
	new_work
	supervisor
	image
	local share=$WORK/share
	(cd "$ROOT_DIR" && GOARCH=$ARCH CGO_ENABLED=0 go build -trimpath -o "$share/bin/qualbox-probe" ./qualify/guest/probe)
	install -m 0755 "$ROOT_DIR/scripts/lanec-record-guest.sh" "$share/record.sh"
	TIMINGS=()
	boot_guest --record "$dest"
}

case "${1:-}" in
image)
	image
	echo "$IMAGE_DIR"
	;;
run)
	shift
	run "$@"
	;;
record)
	shift
	record "$@"
	;;
deps)
	deps
	;;
key)
	shift
	key_command "$@"
	;;
inputs)
	shift
	key_command --inputs "$@"
	;;
accel | probe)
	accel_command "$@"
	;;
*)
	echo "usage: $0 deps | image | key [--versions FILE] | inputs [--versions FILE] | run [--manifest FILE] [--out DIR] [--signing-key FILE] [--no-conformance] [--record DIR] | record DIR | accel [--kernel FILE] | probe [--kernel FILE] [--accel kvm|tcg]" >&2
	exit 2
	;;
esac
