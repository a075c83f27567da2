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
#       list, this script's guest recipe and the tuple's VERSIONS. A cached
#       image is reused, so a second bring-up costs only the boot. Prints
#       the cache directory.
#   scripts/lanec.sh run [--manifest FILE] [--out DIR] [--signing-key FILE]
#                        [--no-conformance] [--record DIR]
#       Boot the guest, run `qualify run` on the manifest inside it (default
#       manifests/linux-x64.yaml), then the driver's real-Engine conformance
#       suite (`-test.run Conformance`, profile linux-x64), power the guest
#       off and bring the signed report out to DIR (default
#       reports/runs/<UTC timestamp>). Lane C's own files (console log,
#       conformance output, timings) go to DIR.lanec/ beside it. Exit
#       status: 0 when the guest ran both and both passed, 1 otherwise.
#       --record DIR also
#       records the observer's cgroup v2 trees (as `record`) in the same boot.
#   scripts/lanec.sh record DIR
#       Boot the guest and record real cgroup v2 trees (before, during OOM,
#       during pids exhaustion, after cleanup) into DIR
#       (scripts/lanec-record-guest.sh runs inside the guest).
#
# The Engine tuple (docs/lanes.md#engine-tuples), environment LANEC_TUPLE:
# `lane-b` (the default) is lane B's pinned dockerd and runc
# (scripts/engine.sh install-b) with Debian's containerd; any name of
# `scripts/tuple.sh list` (ref-29.1.3, ref-29.1.4, current-29.7.2) is that
# Docker Engine release's dockerd with its containerd, shim and runc, built
# by scripts/tuple.sh and replacing Debian's in the guest, with the
# containerd image store. Each tuple has its own cached image.
#
# Bounds (seconds, environment): LANEC_BOOT_TIMEOUT (qemu start until the
# job unit starts, default 900), LANEC_ENGINE_TIMEOUT (then until the
# guest's Engine answers, default 900), LANEC_RUN_TIMEOUT (the job itself,
# default 2400), LANEC_STOP_GRACE (ACPI power-down until qemu is killed,
# default 180), LANEC_DEADLINE (an absolute end for the guest, in seconds
# since the epoch: reached first, it stops the guest like a timeout; CI
# sets it so that a stuck job still ends, with its diagnostics, inside CI's
# budget), LANEC_SCENARIO_TIMEOUT (qualify's --scenario-timeout in the
# guest, default 10m: the slowest scenario takes about 70 s there, and one
# past its limit leaves its goroutine stacks in the report). The defaults allow for a host shared with other work: on an
# idle 2-core host the guest boots in about 20 s and dockerd is ready
# about 10 s later. On failure the guest's
# last console lines are printed. The qemu process this script started is
# stopped by its PID on every exit path (EXIT, INT, TERM): first a graceful
# power-down, so that `qualify` inside gets SIGTERM and writes its partial
# report, then SIGTERM/SIGKILL to that PID only.
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
# (systemd, the default, or cgroupfs: the Docker Desktop VM's shape) is the
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
BOOT_TIMEOUT=${LANEC_BOOT_TIMEOUT:-900}
ENGINE_TIMEOUT=${LANEC_ENGINE_TIMEOUT:-900}
RUN_TIMEOUT=${LANEC_RUN_TIMEOUT:-2400}
SCENARIO_TIMEOUT=${LANEC_SCENARIO_TIMEOUT:-10m}
DEADLINE=${LANEC_DEADLINE:-}
if [ -n "$DEADLINE" ] && ! [[ $DEADLINE =~ ^[1-9][0-9]{9,11}$ ]]; then
	echo "lanec: LANEC_DEADLINE must be an absolute time in seconds since the epoch (date +%s), got '$DEADLINE'" >&2
	exit 2
fi
if ! [[ $SCENARIO_TIMEOUT =~ ^[1-9][0-9]*(ms|s|m|h)$ ]]; then
	echo "lanec: LANEC_SCENARIO_TIMEOUT must be a Go duration such as 10m or 90s, got '$SCENARIO_TIMEOUT'" >&2
	exit 2
fi
# past_deadline: LANEC_DEADLINE is set and has passed.
past_deadline() { [ -n "$DEADLINE" ] && (($(date +%s) >= DEADLINE)); }
PROGRESS_SHOWN=()
STOP_GRACE=${LANEC_STOP_GRACE:-180}
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

# guest_recipe configures the debootstrapped root $1 from the host side. Its
# text is part of the cache key: editing it rebuilds the image.
guest_recipe() {
	local r=$1
	echo qualbox-lanec >"$r/etc/hostname"
	printf '127.0.0.1 localhost qualbox-lanec\n' >"$r/etc/hosts"
	cat >"$r/etc/fstab" <<-'EOF'
		/dev/vda / ext4 rw,errors=remount-ro 0 1
		qualbox /mnt/qualbox 9p trans=virtio,version=9p2000.L,msize=524288,nofail 0 0
	EOF
	mkdir -p "$r/mnt/qualbox"
	printf '9p\n9pnet_virtio\ndummy\n' >"$r/etc/modules-load.d/qualbox.conf"
	# The serial console carries the job's output (journal+console); a login
	# prompt on it interleaves and drops lines, so no getty runs there.
	chroot "$r" systemctl mask serial-getty@ttyS0.service getty@tty1.service \
		docker.socket systemd-timesyncd.service >/dev/null 2>&1
	# The tuple's runc replaces Debian's (diverted, so dpkg keeps it aside),
	# and so do its containerd and shim when it has them. containerd runs
	# as its own unit rather than supervised by dockerd: dockerd gives a
	# containerd it starts itself 15 s to come up, too little for an
	# emulated CPU on a shared host. Its CRI gRPC service is off, as in the
	# configuration dockerd writes for a managed containerd (containerd 2.x
	# still loads its CRI image and runtime plugins).
	chroot "$r" systemctl unmask containerd.service >/dev/null 2>&1
	printf 'version = 2\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n' >"$r/etc/containerd/config.toml"
	mkdir -p "$r/etc/systemd/system/containerd.service.d"
	printf '[Service]\nTimeoutStartSec=600\n' >"$r/etc/systemd/system/containerd.service.d/qualbox.conf"
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
	# Debian's docker.service is replaced whole: no socket activation, the
	# tuple's binary.
	cat >"$r/etc/systemd/system/docker.service" <<-'EOF'
		[Unit]
		Description=Docker Engine (lane C's Engine tuple, systemd cgroup driver)
		After=local-fs.target qualbox-net.service apparmor.service containerd.service
		Wants=qualbox-net.service containerd.service
		StartLimitIntervalSec=0
		[Service]
		Type=notify
		ExecStart=/usr/local/bin/dockerd -H unix:///var/run/docker.sock --containerd=/run/containerd/containerd.sock
		Environment=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
		Delegate=yes
		KillMode=process
		LimitNOFILE=infinity
		LimitNPROC=infinity
		TasksMax=infinity
		# Under TCG on a busy host dockerd can miss its own containerd start
		# deadline; systemd tries again.
		Restart=on-failure
		RestartSec=5
		TimeoutStartSec=600
		TimeoutStopSec=120
		[Install]
		WantedBy=multi-user.target
	EOF
	# network-isolation needs a non-loopback IPv4 address on the host (a
	# documentation-range dummy: still no route anywhere) and forwarding on,
	# or `outbound` creates fail with "IPv4 forwarding is disabled".
	cat >"$r/etc/systemd/system/qualbox-net.service" <<-'EOF'
		[Unit]
		Description=qualbox dummy interface 192.0.2.1/24 (no route anywhere)
		Before=docker.service
		[Service]
		Type=oneshot
		RemainAfterExit=yes
		ExecStart=/sbin/ip link add qualbox0 type dummy
		ExecStart=/sbin/ip addr add 192.0.2.1/24 dev qualbox0
		ExecStart=/sbin/ip link set qualbox0 up
	EOF
	echo 'net.ipv4.ip_forward=1' >"$r/etc/sysctl.d/90-qualbox.conf"
	# The job: whatever the host put at /mnt/qualbox/job.sh, after the Engine,
	# with its output on the console; the guest powers off when it ends. On
	# power-down (the host's ACPI request) systemd sends SIGTERM to the job
	# before it stops docker.service.
	cat >"$r/etc/systemd/system/qualbox-job.service" <<-'EOF'
		[Unit]
		Description=qualbox lane C job
		After=docker.service qualbox-net.service systemd-sysctl.service
		Wants=docker.service
		RequiresMountsFor=/mnt/qualbox
		SuccessAction=poweroff
		FailureAction=poweroff
		[Service]
		Type=oneshot
		ExecStart=/bin/bash /mnt/qualbox/job.sh
		StandardOutput=journal+console
		StandardError=journal+console
		TimeoutStartSec=infinity
		TimeoutStopSec=150
		# SIGTERM to the job's shell only, whose trap stops qualify (SIGTERM,
		# then SIGQUIT) and the conformance binary (SIGQUIT, for its stacks);
		# SIGKILL to all that is left at the stop timeout.
		KillMode=mixed
		[Install]
		WantedBy=multi-user.target
	EOF
	chroot "$r" systemctl enable containerd.service docker.service qualbox-job.service >/dev/null 2>&1
	chroot "$r" passwd -d root >/dev/null
	# Log the kernel and systemd quietly: the job's lines are what matter.
	mkdir -p "$r/etc/systemd/system.conf.d"
	printf '[Manager]\nShowStatus=error\n' >"$r/etc/systemd/system.conf.d/qualbox.conf"
	rm -f "$r/etc/machine-id" && touch "$r/etc/machine-id"
	chroot "$r" apt-get clean
}

# guest_recipe_variant adapts the recipe's result to LANEC_ARCH and
# LANEC_CGROUP_DRIVER when either is not the default (its text joins the
# cache key only then, so lane C's images keep their keys): the console
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

# cache_key digests everything in the bootable image: the base, the guest
# recipe's text, the kernel arguments, the image size and the tuple's
# VERSIONS.
cache_key() {
	{
		base_key
		printf '%s\n' "$KERNEL_ARGS" "$IMAGE_BYTES"
		declare -f guest_recipe
		if variant; then
			echo "arch $ARCH cgroup driver $CGROUP_DRIVER"
			declare -f guest_recipe_variant
		fi
		if [ "$ARCH" = arm64 ]; then
			declare -f arm64_kernel
			echo "$ARM64_KERNEL_PKG"
		fi
		if [ -n "$EMULATE" ]; then
			declare -f emulator_install
			echo "emulate $EMULATE $QEMU_USER_PKG"
		fi
		cat "$TUPLE_PREFIX/VERSIONS"
	} | sha256sum | cut -c1-16
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
	trap "umount_chroot '$t/root'; rm -rf '$t'" EXIT
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
	trap - EXIT
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
	[ "$ARCH" != arm64 ] || ARM64_KERNEL_PKG=$(arm64_kernel_pkg)
	if [ -n "$EMULATE" ]; then
		QEMU_USER_PKG=$(candidate_version "qemu-user-static:$ARCH")
		[ -n "$QEMU_USER_PKG" ] || die "no qemu-user-static:$ARCH in this host's package lists"
	fi
	# The base first: debootstrap needs no tuple, and a tuple build can
	# run meanwhile.
	[ -f "$base" ] || build_base "$base"
	ensure_tuple
	key=$(cache_key)
	IMAGE_DIR=$CACHE/$key
	if [ -f "$IMAGE_DIR/rootfs.img" ] && [ -f "$IMAGE_DIR/vmlinuz" ] && [ -f "$IMAGE_DIR/initrd.img" ]; then
		log "cached guest $IMAGE_DIR"
		return 0
	fi
	local tmp start
	start=$(date +%s)
	tmp=$(mktemp -d "$CACHE/build.XXXXXX")
	# shellcheck disable=SC2064 # expand tmp now: it is local
	trap "umount_chroot '$tmp/root'; rm -rf '$tmp'" EXIT
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
	trap - EXIT
	log "guest image $IMAGE_DIR built in $(($(date +%s) - start)) s"
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

# arm64_kernel ROOT OUT TMP unpacks the kernel package ARM64_KERNEL_PKG into
# ROOT (its modules, for 9p and the rest systemd loads), writes OUT/vmlinuz
# and OUT/initrd.img: an initramfs of the root's static busybox and the
# modules that mount /dev/vda (virtio_blk, virtio_pci, ext4, crc32c_generic
# with their dependencies in modules.dep order), whose /init mounts it and
# switches to it.
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
	cat >"$t/initrd/init" <<-'EOF'
		#!/bin/busybox sh
		/bin/busybox --install -s /bin
		mkdir -p /proc /sys /dev /root
		mount -t proc proc /proc
		mount -t sysfs sysfs /sys
		mount -t devtmpfs devtmpfs /dev
		for m in $(cat /modules/order); do insmod "/modules/$m" || echo "initramfs: insmod $m failed"; done
		i=0
		while [ ! -b /dev/vda ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
		if ! mount -t ext4 -o rw /dev/vda /root; then
			echo "initramfs: cannot mount /dev/vda"
			poweroff -f
		fi
		umount /proc /sys
		mount --move /dev /root/dev
		exec switch_root /root /sbin/init
	EOF
	chmod 0755 "$t/initrd/init"
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
	dir=$(mktemp -d /tmp/qualbox-lanec-probe.XXXXXX)
	saved=$(trap -p EXIT INT TERM HUP)
	trap 'stop_probe; rm -rf "$dir"' EXIT
	trap 'stop_probe; rm -rf "$dir"; exit 130' INT TERM HUP
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
		if grep -qF "$PROBE_MARK" "$dir/console.log" 2>/dev/null; then
			PROBE_WHY="the kernel printed '$PROBE_MARK' after $((now - t0)) s"
			rc=0
			break
		fi
		if ! kill -0 "$PROBE_PID" 2>/dev/null; then
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
	plog=$(mktemp /tmp/qualbox-lanec-probe-log.XXXXXX)
	if [ "$ACCEL_MODE" = tcg ]; then
		ACCEL=tcg ACCEL_WHY="LANEC_ACCEL=tcg"
		echo "# no probe: LANEC_ACCEL=tcg" >"$plog"
	elif [ "$ARCH" != "$HOST_ARCH" ]; then
		[ "$ACCEL_MODE" != kvm ] || die "LANEC_ACCEL=kvm, but KVM cannot run an $ARCH guest on this $HOST_ARCH host"
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
	plog=$(mktemp /tmp/qualbox-lanec-probe-log.XXXXXX)
	boot_probe "$kernel" "$plog" "${args[@]}" || rc=$?
	if [ "$rc" != 0 ]; then
		sed 's/^/  probe| /' "$plog" | tail -n 20 >&2
	fi
	rm -f "$plog"
	log "probe under $accel: $PROBE_WHY"
	return "$rc"
}

# --- running the guest ---------------------------------------------------

QEMU_PID=
WORK=
MON_READER=

console_tail() {
	if [ -f "$WORK/console.log" ]; then
		echo "lanec: last guest console lines:" >&2
		tail -n "${1:-40}" "$WORK/console.log" | tr -d '\r' | sed 's/^/  guest| /' >&2
	fi
}

# show_progress prints the complete lines the guest's qualify and
# conformance logs gained since the last call (the 9p folder is uncached,
# so the guest's writes are visible at once): a log that runs long or is
# cut off shows how far the job got. qualify prints whole lines: one when
# a scenario starts, one every 30 s while it runs and one with its
# verdict; of the conformance log the test start and verdict lines are
# shown. `show_progress final`, after the guest stopped, also shows a
# last line without its newline (a log cut off mid-line), and at most 300
# further lines per log (a goroutine dump can be long; the whole logs are
# copied beside the report).
show_progress() {
	local final=${1:-} i f n from to tag
	local files=("$WORK/share/state/qualify.log" "$WORK/share/state/conformance.log")
	for i in 0 1; do
		f=${files[$i]}
		[ -f "$f" ] || continue
		n=$(wc -l <"$f")
		from=$((${PROGRESS_SHOWN[$i]:-0} + 1))
		to=$n
		if [ -n "$final" ] && ((to - from >= 300)); then
			to=$((from + 299))
		fi
		if ((to >= from)); then
			if [ "$i" = 0 ] || [ -n "$final" ]; then
				tag=qualify
				[ "$i" = 0 ] || tag=conformance
				sed -n "${from},${to}p" "$f" | sed "s/^/  guest $tag| /" >&2
			else
				sed -n "${from},${to}p" "$f" | grep -E '^(=== RUN|[[:space:]]*--- |ok|FAIL|PASS|panic)' |
					sed 's/^/  guest conformance| /' >&2 || true
			fi
			PROGRESS_SHOWN[i]=$to
		fi
		if [ -n "$final" ]; then
			if ((to < n)); then
				echo "  guest ${f##*/}: $((n - to)) more lines in the copy beside the report" >&2
			elif [ -s "$f" ] && [ "$(tail -c 1 "$f" | od -An -c | tr -d ' ')" != '\n' ]; then
				echo "  guest ${f##*/}| $(tail -n 1 "$f") (unfinished when the guest stopped)" >&2
			fi
		fi
	done
}

qemu_alive() { [ -n "$QEMU_PID" ] && kill -0 "$QEMU_PID" 2>/dev/null; }

# stop_guest powers the guest down through the ACPI power button (systemd
# stops the job with SIGTERM, so qualify writes its partial report), waits
# up to STOP_GRACE seconds, then kills the qemu process by its PID.
stop_guest() {
	qemu_alive || return 0
	log "powering the guest down (qemu pid $QEMU_PID)"
	echo system_powerdown >"$WORK/mon.in" 2>/dev/null || true
	local i
	for ((i = 0; i < STOP_GRACE; i++)); do
		qemu_alive || return 0
		sleep 1
	done
	log "guest did not power off within $STOP_GRACE s; killing qemu pid $QEMU_PID"
	kill -TERM "$QEMU_PID" 2>/dev/null || true
	for ((i = 0; i < 10; i++)); do
		qemu_alive || return 0
		sleep 1
	done
	kill -KILL "$QEMU_PID" 2>/dev/null || true
}

cleanup_run() {
	local rc=$?
	trap - EXIT INT TERM
	if qemu_alive; then
		stop_guest
		show_progress final || true
		console_tail
		rc=1
	fi
	if [ -n "$QEMU_PID" ]; then wait "$QEMU_PID" 2>/dev/null || true; fi
	if [ -n "$MON_READER" ]; then kill "$MON_READER" 2>/dev/null || true; fi
	if [ -n "${COLLECT:-}" ]; then "$COLLECT" || true; fi
	if [ -n "$WORK" ] && [ -z "${LANEC_KEEP_WORK:-}" ]; then rm -rf "$WORK"; fi
	exit "$rc"
}

# boot_job boots the cached guest with $WORK/share as its 9p folder (which
# holds job.sh), waits for the job to start and end within the bounds, and
# returns the job's exit status from share/state/job.rc.
boot_job() {
	mkfifo "$WORK/mon.in" "$WORK/mon.out"
	cat "$WORK/mon.out" >"$WORK/monitor.log" &
	MON_READER=$!
	mkdir -p "$WORK/share/state"
	local t0 now
	t0=$(date +%s)
	choose_accel "$IMAGE_DIR/vmlinuz" "$WORK/share/state"
	TIMINGS+=("accel_s $(($(date +%s) - t0)) (choosing the accelerator: $ACCEL)")
	t0=$(date +%s)
	if past_deadline; then
		log "LANEC_DEADLINE passed before the guest booted"
		return 1
	fi
	log "booting the guest under ${ACCEL^^} (${QEMU_ACCEL[*]}, 2 vCPUs, 4 GiB); console $WORK/console.log"
	# -snapshot keeps the cached root pristine: the guest's writes go to a
	# temporary file qemu deletes.
	TMPDIR=$WORK "$QEMU" -name qualbox-lanec -nodefaults -no-user-config -display none -no-reboot \
		"${QEMU_MACHINE[@]}" "${QEMU_ACCEL[@]}" -smp 2 -m 4G \
		-kernel "$IMAGE_DIR/vmlinuz" -initrd "$IMAGE_DIR/initrd.img" -append "$KERNEL_ARGS" \
		-drive "file=$IMAGE_DIR/rootfs.img,if=virtio,format=raw,snapshot=on" \
		-virtfs "local,path=$WORK/share,mount_tag=qualbox,security_model=none,id=qualbox" \
		-nic none -serial "file:$WORK/console.log" -monitor "pipe:$WORK/mon" \
		</dev/null >"$WORK/qemu.log" 2>&1 &
	QEMU_PID=$!
	echo "$ENGINE_TIMEOUT" >"$WORK/share/state/engine-timeout"
	local booted=
	while [ ! -f "$WORK/share/state/started" ] && [ ! -f "$WORK/share/state/job.rc" ]; do
		if ! qemu_alive; then
			cat "$WORK/qemu.log" >&2
			console_tail
			die "qemu exited before the job started"
		fi
		now=$(date +%s)
		if [ -z "$booted" ] && [ -f "$WORK/share/state/booted" ]; then
			booted=$((now - t0))
			TIMINGS+=("boot_s $booted (qemu start to the job unit, after docker.service)")
			log "guest booted after $booted s; waiting for its Engine"
		fi
		if [ -z "$booted" ] && ((now - t0 > BOOT_TIMEOUT)); then
			log "the guest did not boot to its job within $BOOT_TIMEOUT s"
			stop_guest
			console_tail 60
			return 1
		fi
		if ((now - t0 > BOOT_TIMEOUT + ENGINE_TIMEOUT + 60)); then
			log "the guest's Engine did not answer within $ENGINE_TIMEOUT s"
			stop_guest
			console_tail 60
			return 1
		fi
		if [ -n "$DEADLINE" ] && ((now >= DEADLINE)); then
			log "LANEC_DEADLINE passed before the job started"
			stop_guest
			console_tail 60
			return 1
		fi
		sleep 1
	done
	TIMINGS+=("ready_s $(($(date +%s) - t0)) (qemu start to Engine ready and job start)")
	log "job started after $(($(date +%s) - t0)) s"
	PROGRESS_SHOWN=()
	while qemu_alive; do
		show_progress
		if [ -f "$WORK/share/state/job.rc" ]; then
			# The job ended and the guest is powering off: no deadline
			# applies any more, only the power-down bound.
			stop_guest
			break
		fi
		now=$(date +%s)
		if ((now - t0 > BOOT_TIMEOUT + ENGINE_TIMEOUT + RUN_TIMEOUT)); then
			log "the job did not finish within $RUN_TIMEOUT s"
			stop_guest
			show_progress final
			console_tail 60
			return 1
		fi
		if [ -n "$DEADLINE" ] && ((now >= DEADLINE)); then
			log "LANEC_DEADLINE passed while the job ran ($((now - t0)) s after qemu started)"
			stop_guest
			show_progress final
			console_tail 60
			return 1
		fi
		sleep 2
	done
	wait "$QEMU_PID" || true
	QEMU_PID=
	show_progress
	TIMINGS+=("guest_s $(($(date +%s) - t0)) (qemu start to power-off)")
	if [ ! -f "$WORK/share/state/job.rc" ]; then
		log "the guest powered off without recording the job's exit status"
		console_tail 60
		return 1
	fi
	return "$(cat "$WORK/share/state/job.rc")"
}

new_work() {
	WORK=$(mktemp -d /tmp/qualbox-lanec.XXXXXX)
	chmod 700 "$WORK"
	trap cleanup_run EXIT
	trap 'log "interrupted"; exit 130' INT TERM
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
	TIMINGS=()
	local t0
	t0=$(date +%s)
	! past_deadline || die "run: LANEC_DEADLINE passed before the guest image was assembled"
	image
	TIMINGS+=("image_s $(($(date +%s) - t0)) (lanec.sh image, cache key $(basename "$IMAGE_DIR"))")
	new_work
	local share=$WORK/share
	build_static "$share/bin"
	# The guest image: built in the guest from its own busybox and the
	# probe, or, emulating, an archive of the emulated architecture's
	# busybox and probe made here (the guest has neither).
	IMAGE_FLAGS="--probe bin/qualbox-probe"
	if [ -n "$EMULATE" ]; then
		guest_archive "$share/guest-$EMULATE.tar"
		IMAGE_FLAGS="--image-archive /mnt/qualbox/guest-$EMULATE.tar"
	fi
	install -m 0600 "$key" "$share/signing.key"
	cp "$manifest" "$share/manifest.yaml"
	mkdir -p "$share/out" "$share/state"
	[ -z "$record_dir" ] || install -m 0755 "$ROOT_DIR/scripts/lanec-record-guest.sh" "$share/record.sh"
	cat >"$share/job.sh" <<-EOF
		#!/bin/bash
		# Lane C job: runs inside the guest (qualbox-job.service).
		set -u
		S=/mnt/qualbox/state
		$(declare -f guest_job_common)
		guest_job_common
		# Work on the guest's own disk (sockets, spill files); the report is
		# copied to the shared folder when qualify ends, also on SIGTERM.
		W=/var/lib/qualbox-lanec
		mkdir -p \$W && cp -a /mnt/qualbox/bin /mnt/qualbox/manifest.yaml /mnt/qualbox/signing.key \$W/ && cd \$W
		export TMPDIR=/var/tmp
		rc=0
		echo "lanec-job: qualify run \$(date -u +%T)"
		t=\$(date +%s)
		# qualify runs in the background so that the job's SIGTERM (guest
		# power-down) reaches it and it writes its partial report. The
		# tuple's VERSIONS (how each Engine binary was built) goes into the
		# signed run header.
		./bin/qualify run --manifest manifest.yaml --output \$W/report --signing-key signing.key \\
			--engine-build /etc/qualbox-tuple-VERSIONS \\
			$IMAGE_FLAGS --scenario-timeout $SCENARIO_TIMEOUT >\$S/qualify.log 2>&1 &
		q=\$!
		# On power-down: SIGTERM, so qualify cancels and writes its partial
		# report; if it still runs 110 s later (systemd kills the unit at
		# 150 s), SIGQUIT, so its log gets every goroutine's stack.
		stop_qualify() {
			kill -TERM \$q 2>/dev/null
			for i in \$(seq 110); do kill -0 \$q 2>/dev/null || return 0; sleep 1; done
			echo "lanec-job: qualify still running 110 s after SIGTERM; SIGQUIT for its goroutine stacks"
			kill -QUIT \$q 2>/dev/null
		}
		trap 'stop_qualify; wait \$q; echo 143 >\$S/qualify.rc; cp -a \$W/report /mnt/qualbox/out/; echo 143 >\$S/job.rc; exit 143' TERM
		wait \$q || rc=\$?
		trap - TERM
		echo \$rc >\$S/qualify.rc
		cp -a \$W/report /mnt/qualbox/out/ 2>/dev/null
		echo "qualify_s \$((\$(date +%s) - t))" >>\$S/timings
		echo "lanec-job: qualify exited \$rc"
		tail -n 30 \$S/qualify.log
		if [ -z "${NO_CONFORMANCE}" ]; then
			echo "lanec-job: driver conformance \$(date -u +%T)"
			t=\$(date +%s)
			crc=0
			QUALBOX_REQUIRE_ENGINE=1 QUALBOX_ENGINE_SOCKET=/var/run/docker.sock QUALBOX_TEST_PROFILE=$CONFORMANCE_PROFILE \\
				QUALBOX_PROBE_BINARY=\$W/bin/qualbox-probe \\
				./bin/driver.test -test.run '^TestConformance\$' -test.v -test.count=1 -test.timeout 40m \\
				>\$S/conformance.log 2>&1 &
			q=\$!
			# On power-down: SIGQUIT, so the test binary prints every
			# goroutine's stack into its log before it exits.
			trap 'kill -QUIT \$q 2>/dev/null; wait \$q; echo 143 >\$S/conformance.rc; echo 143 >\$S/job.rc; exit 143' TERM
			wait \$q || crc=\$?
			trap - TERM
			echo \$crc >\$S/conformance.rc
			echo "conformance_s \$((\$(date +%s) - t))" >>\$S/timings
			echo "lanec-job: conformance exited \$crc"
			grep -E '^(--- |ok|FAIL|PASS)' \$S/conformance.log | tail -n 40
			[ \$crc = 0 ] || rc=1
		fi
		if [ -f /mnt/qualbox/record.sh ]; then
			echo "lanec-job: recording cgroup v2 trees \$(date -u +%T)"
			(cd /mnt/qualbox && bash ./record.sh out/record >\$S/record.log 2>&1) || rc=1
			tail -n 12 \$S/record.log
		fi
		[ \$rc = 0 ] || rc=1
		echo \$rc >\$S/job.rc
	EOF
	COLLECT=collect_run
	OUT_DIR=$out
	local jrc=0
	boot_job || jrc=$?
	if [ -n "$record_dir" ] && [ -d "$share/out/record" ]; then
		mkdir -p "$record_dir"
		cp -a "$share/out/record/." "$record_dir/"
		log "recorded cgroup v2 trees in $record_dir"
	fi
	collect_run
	COLLECT=
	print_run_summary "$jrc" "$out"
	[ "$jrc" = 0 ]
}

# guest_job_common runs first in every job inside the guest: it marks the
# job booted, waits (bounded by state/engine-timeout seconds) until the
# Engine answers, records what the guest is and marks the job started. If
# the Engine never answers it prints docker.service's journal and fails.
guest_job_common() {
	local i bound
	# Debian 12's docker CLI speaks API 1.41 by default, below Docker
	# Engine 29's minimum (1.44): name a version every tuple serves. Only
	# the CLI reads this; qualify and the driver pin their own.
	export DOCKER_API_VERSION=1.44
	touch "$S/booted"
	echo "lanec-job: booted; docker.service $(systemctl is-active docker.service)"
	bound=$(cat "$S/engine-timeout")
	for ((i = 0; i < bound; i += 2)); do
		docker version >/dev/null 2>&1 && break
		# The journal so far, for the host to read while it waits.
		((i % 30 == 0)) && journalctl --no-pager -b -u containerd.service -u docker.service >"$S/docker-journal.txt" 2>&1
		sleep 2
	done
	journalctl --no-pager -b -u containerd.service -u docker.service >"$S/docker-journal.txt" 2>&1
	if ! docker version >/dev/null 2>&1; then
		echo "lanec-job: the Engine never answered at /var/run/docker.sock within $bound s"
		systemctl status --no-pager docker.service | tail -n 20
		tail -n 30 "$S/docker-journal.txt"
		echo 1 >"$S/job.rc"
		exit 1
	fi
	{
		echo "kernel $(uname -r) $(uname -v)"
		echo "cgroup $(stat -fc %T /sys/fs/cgroup) controllers $(cat /sys/fs/cgroup/cgroup.controllers)"
		echo "lsm $(cat /sys/kernel/security/lsm)"
		echo "systemd $(systemctl --version | head -n1)"
		sed 's/^/tuple /' /etc/qualbox-tuple-VERSIONS
		docker version --format 'engine {{.Server.Version}} api {{.Server.APIVersion}}'
		docker version --format '{{range .Server.Components}}component {{.Name}} {{.Version}} {{index .Details "GitCommit"}}{{println}}{{end}}'
		docker info --format 'storage {{.Driver}} {{.DriverStatus}}'
		docker info --format 'cgroup {{.CgroupVersion}} {{.CgroupDriver}} securityOptions {{.SecurityOptions}}'
		grep -c . /sys/kernel/security/apparmor/profiles | sed 's/^/apparmor profiles loaded: /'
		grep docker-default /sys/kernel/security/apparmor/profiles
		echo "uptime $(cut -d' ' -f1 /proc/uptime) s at Engine ready"
	} >"$S/guest.txt" 2>&1
	cat "$S/guest.txt"
	touch "$S/started"
}

collect_run() {
	[ -n "${OUT_DIR:-}" ] && [ -n "$WORK" ] || return 0
	local share=$WORK/share
	mkdir -p "$(dirname "$OUT_DIR")"
	if [ -d "$share/out/report" ]; then
		cp -a "$share/out/report" "$OUT_DIR"
	else
		mkdir -p "$OUT_DIR"
	fi
	# Lane C's own files go beside the report: a signed report directory
	# holds only what its statement covers.
	mkdir -p "$OUT_DIR.lanec"
	cp -a "$share/state/." "$OUT_DIR.lanec/" 2>/dev/null || true
	[ -f "$WORK/console.log" ] && tr -d '\r' <"$WORK/console.log" >"$OUT_DIR.lanec/console.log"
	cp "$IMAGE_DIR/BUILD" "$OUT_DIR.lanec/image.txt"
	printf '%s\n' "${TIMINGS[@]}" >>"$OUT_DIR.lanec/timings"
	OUT_DIR=
}

print_run_summary() {
	local jrc=$1 out=$2 f
	log "report: $out"
	for f in qualify conformance; do
		[ -f "$out.lanec/$f.rc" ] && log "$f exit status $(cat "$out.lanec/$f.rc")"
	done
	sed 's/^/lanec: timing /' "$out.lanec/timings" >&2 || true
	[ ! -f "$out.lanec/accel.txt" ] || sed -n 's/^accel /lanec: accelerator /p' "$out.lanec/accel.txt" >&2
	log "job exit status $jrc"
}

record() {
	local dest=${1:?usage: $0 record DIR}
	check_accel_mode
	image
	new_work
	local share=$WORK/share
	mkdir -p "$share/bin" "$share/out"
	(cd "$ROOT_DIR" && GOARCH=$ARCH CGO_ENABLED=0 go build -trimpath -o "$share/bin/qualbox-probe" ./qualify/guest/probe)
	install -m 0755 "$ROOT_DIR/scripts/lanec-record-guest.sh" "$share/record.sh"
	cat >"$share/job.sh" <<-EOF
		#!/bin/bash
		set -u
		cd /mnt/qualbox
		S=/mnt/qualbox/state
		$(declare -f guest_job_common)
		guest_job_common
		rc=0
		bash ./record.sh out >state/record.log 2>&1 || rc=\$?
		tail -n 30 state/record.log
		echo \$rc >\$S/job.rc
	EOF
	TIMINGS=()
	local jrc=0
	boot_job || jrc=$?
	mkdir -p "$dest"
	cp -a "$share/out/." "$dest/"
	cp "$share/state/record.log" "$dest/record.log" 2>/dev/null || true
	log "recorded trees in $dest (job exit status $jrc)"
	[ "$jrc" = 0 ]
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
accel | probe)
	accel_command "$@"
	;;
*)
	echo "usage: $0 deps | image | run [--manifest FILE] [--out DIR] [--signing-key FILE] [--no-conformance] | record DIR | accel [--kernel FILE] | probe [--kernel FILE] [--accel kvm|tcg]" >&2
	exit 2
	;;
esac
