#!/bin/sh
# scripts/busybox.sh ARCH DIR: Debian's static busybox (package
# busybox-static) for linux/ARCH (amd64 or arm64), for the guest image
# archives of `make release` (README.md, Install). It downloads the
# package with apt-get, unpacks it with dpkg-deb into a temporary
# directory (nothing is installed on the host), copies bin/busybox to
# DIR/busybox-ARCH and prints that path on stdout; everything else (the
# package version, apt's output) goes to stderr. It needs a Debian host,
# as root: for a foreign ARCH it adds the dpkg architecture and updates
# the package lists. Elsewhere run it in
# debian:bookworm (the guest-images job of .github/workflows/qualify.yml):
#
#   docker run --rm -v "$PWD/bb:/out" -v "$PWD/scripts:/s:ro" debian:bookworm /s/busybox.sh arm64 /out
#   make release BUSYBOX_AMD64=bb/busybox-amd64 BUSYBOX_ARM64=bb/busybox-arm64
set -eu

if [ $# -ne 2 ]; then
	echo "usage: scripts/busybox.sh amd64|arm64 DIR" >&2
	exit 2
fi
arch=$1
dir=$2
case $arch in
amd64 | arm64) ;;
*)
	echo "busybox.sh: architecture $arch is not amd64 or arm64" >&2
	exit 2
	;;
esac
for tool in apt-get apt-cache dpkg dpkg-deb; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "busybox.sh: $tool is missing: run this on Debian (for example in debian:bookworm)" >&2
		exit 1
	fi
done
if [ "$arch" != "$(dpkg --print-architecture)" ] && ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
	dpkg --add-architecture "$arch" >&2
	apt-get update -qq >&2
fi
if ! apt-cache show "busybox-static:$arch" >/dev/null 2>&1; then
	apt-get update -qq >&2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -qq "busybox-static:$arch" >&2)
deb=$(find "$tmp" -maxdepth 1 -name "busybox-static_*_$arch.deb")
if [ -z "$deb" ]; then
	echo "busybox.sh: apt-get download busybox-static:$arch left no package" >&2
	exit 1
fi
dpkg-deb -x "$deb" "$tmp/root"
if [ ! -f "$tmp/root/bin/busybox" ]; then
	echo "busybox.sh: $(basename "$deb") has no bin/busybox" >&2
	exit 1
fi
mkdir -p "$dir"
cp "$tmp/root/bin/busybox" "$dir/busybox-$arch"
chmod 0755 "$dir/busybox-$arch"
echo "busybox.sh: busybox-static $(dpkg-deb -f "$deb" Version) ($arch) -> $dir/busybox-$arch" >&2
echo "$dir/busybox-$arch"
