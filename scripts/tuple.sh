#!/usr/bin/env bash
# Engine tuples (docs/lanes.md#engine-tuples): a Docker Engine release's
# dockerd with the containerd and runc it runs on, each built on this host
# from its release source and stamped with the version that release
# carries, for lane C's guest (scripts/lanec.sh, LANEC_TUPLE=NAME).
#
#   scripts/tuple.sh list          the tuple names, one per line, and their pins
#   scripts/tuple.sh build NAME    build NAME into $QUALBOX_TUPLES/NAME (default
#                                  /opt/qualbox-tuples) unless its VERSIONS
#                                  already equals the pins; prints the prefix
#   scripts/tuple.sh prefix NAME   print the prefix without building
#
# TUPLE_ARCH (amd64, the default, or arm64) is the architecture the binaries
# are built for: lane D's arm64 guest runs arm64 tuples, cross-built here
# (Go's GOARCH; runc, which needs cgo and libseccomp, with Debian's
# gcc-aarch64-linux-gnu and libseccomp-dev:arm64). An arm64 tuple's prefix
# is NAME-arm64 and each of its VERSIONS lines names GOARCH=arm64.
#
# Sources. dockerd: the moby/moby repository at the release's tag, checked
# against the commit pinned here (there is no Go module version for a
# Docker Engine release, and the module proxy refuses those commits), built
# from its vendor directory with the release's static build tags
# (netgo,osusergo,static_build, CGO off; docs/lanes.md#engine-tuples says
# what differs from the release's packaging). MOBY_GIT names the repository
# (default https://github.com/moby/moby.git; any clone or mirror holding
# the tag will do). containerd and runc: their Go modules at the release
# version through the module proxy, their go.sum hash recorded.
#
# Each prefix holds bin/{dockerd,containerd,containerd-shim-runc-v2,runc}
# and VERSIONS: one line per binary naming version, source, commit ("-"
# where the release's commit is not pinned here: the module hash names the
# source), Go version and build flags, and `store containerd` (the daemon
# uses the containerd image store). A build goes to a temporary directory
# renamed into place only when complete.
set -euo pipefail

ROOT=${QUALBOX_TUPLES:-/opt/qualbox-tuples}
CACHE=${QUALBOX_TUPLE_CACHE:-/var/cache/qualbox/tuples}
MOBY_GIT=${MOBY_GIT:-https://github.com/moby/moby.git}

die() {
	echo "tuple: $*" >&2
	exit 1
}

NAMES=(ref-29.1.3 ref-29.1.4 current-29.7.2)

ARCH=${TUPLE_ARCH:-amd64}
case $ARCH in
amd64) SUFFIX='' ARCHFLAG='' ;;
arm64) SUFFIX=-arm64 ARCHFLAG=' GOARCH=arm64' ;;
*)
	echo "tuple: TUPLE_ARCH must be amd64 or arm64, got '$ARCH'" >&2
	exit 2
	;;
esac

# pins NAME sets the tuple's pins: DOCKERD_VERSION DOCKERD_TAG DOCKERD_COMMIT
# CONTAINERD_VERSION CONTAINERD_COMMIT RUNC_VERSION RUNC_COMMIT.
pins() {
	case $1 in
	ref-29.1.3)
		# The reference's baseline: Docker Engine 29.1.3 with the containerd
		# and runc of its dataset composition.
		DOCKERD_VERSION=29.1.3 DOCKERD_TAG=docker-v29.1.3
		DOCKERD_COMMIT=fbf3ed25f893e6ce21336f1101590e40a13934f4
		CONTAINERD_VERSION=v2.2.2 CONTAINERD_COMMIT=301b2dac98f15c27117da5c8af12118a041a31d9
		RUNC_VERSION=v1.3.4 RUNC_COMMIT=d6d73eb8c60246978da649ffe75ce5c8bca8f856
		;;
	ref-29.1.4)
		# The reference's dataset composition: 29.1.4 (08440b6), containerd
		# 2.2.2, runc 1.3.4, the overlayfs containerd image store.
		DOCKERD_VERSION=29.1.4 DOCKERD_TAG=docker-v29.1.4
		DOCKERD_COMMIT=08440b6ee8b2ba6a8b099a27fe0a06fc6307cadb
		CONTAINERD_VERSION=v2.2.2 CONTAINERD_COMMIT=301b2dac98f15c27117da5c8af12118a041a31d9
		RUNC_VERSION=v1.3.4 RUNC_COMMIT=d6d73eb8c60246978da649ffe75ce5c8bca8f856
		;;
	current-29.7.2)
		# What a user installs today: the newest stable Docker Engine 29.x
		# release with the newest containerd and runc releases.
		DOCKERD_VERSION=29.7.2 DOCKERD_TAG=docker-v29.7.2
		DOCKERD_COMMIT=6a43e3d5afddf4111da0f864bbc7cae5d7e95001
		CONTAINERD_VERSION=v2.4.2 CONTAINERD_COMMIT=-
		RUNC_VERSION=v1.5.3 RUNC_COMMIT=-
		;;
	*) die "unknown tuple '$1' (known: ${NAMES[*]})" ;;
	esac
}

# gov prints the Go release that builds the tuple: the local toolchain,
# as every build below runs with GOTOOLCHAIN=local.
gov() { GOTOOLCHAIN=local go env GOVERSION; }

# module_sum MOD@VERSION prints the module's go.sum hash (h1:...) and fails
# when the module proxy gives none.
module_sum() {
	local sum
	sum=$(GOTOOLCHAIN=local GOFLAGS='' go mod download -json "$1" | sed -n 's/^[[:space:]]*"Sum": "\(.*\)",\{0,1\}$/\1/p')
	[[ $sum =~ ^h1:[A-Za-z0-9+/=]+$ ]] || die "no go.sum hash for $1 from the module proxy"
	echo "$sum"
}

# stamp COMMIT VERSION prints the revision a binary is stamped with: the
# release's commit, or module-VERSION where none is pinned.
stamp() { if [ "$1" = - ]; then echo "module-$2"; else echo "$1"; fi; }

# versions NAME prints the VERSIONS file the pins of NAME produce.
versions() {
	pins "$1"
	local g csum rsum
	# Each value is computed apart from the echo, so a failure stops here.
	g=$(gov)
	csum=$(module_sum "github.com/containerd/containerd/v2@$CONTAINERD_VERSION")
	rsum=$(module_sum "github.com/opencontainers/runc@$RUNC_VERSION")
	echo "dockerd $DOCKERD_VERSION git moby/moby tag $DOCKERD_TAG commit $DOCKERD_COMMIT $g -mod=vendor tags netgo,osusergo,static_build$ARCHFLAG"
	echo "containerd $CONTAINERD_VERSION module github.com/containerd/containerd/v2@$CONTAINERD_VERSION $csum commit $CONTAINERD_COMMIT $g CGO_ENABLED=0$ARCHFLAG"
	echo "runc $RUNC_VERSION module github.com/opencontainers/runc@$RUNC_VERSION $rsum commit $RUNC_COMMIT $g CGO_ENABLED=1 tags seccomp$ARCHFLAG"
	echo "store containerd"
}

# moby_source NAME DIR extracts dockerd's release source into DIR after
# checking that the tag names the pinned commit.
moby_source() {
	pins "$1"
	local dir=$2 git=$CACHE/moby.git got
	[ -d "$git" ] || git init -q --bare "$git"
	echo "tuple: fetching $DOCKERD_TAG from $MOBY_GIT" >&2
	git -C "$git" fetch -q --depth 1 "$MOBY_GIT" "+refs/tags/$DOCKERD_TAG:refs/tags/$DOCKERD_TAG" ||
		die "cannot fetch tag $DOCKERD_TAG from $MOBY_GIT (set MOBY_GIT to a clone or mirror that has it)"
	got=$(git -C "$git" rev-parse "refs/tags/$DOCKERD_TAG^{commit}")
	[ "$got" = "$DOCKERD_COMMIT" ] || die "$MOBY_GIT tag $DOCKERD_TAG is commit $got, not the pinned $DOCKERD_COMMIT"
	mkdir -p "$dir"
	git -C "$git" archive "$DOCKERD_COMMIT" | tar -x -C "$dir"
}

build() {
	local name=$1 prefix want tmp
	pins "$name"
	command -v go >/dev/null 2>&1 || die "missing: go (put /usr/local/go/bin on PATH)"
	prefix=$ROOT/$name$SUFFIX
	mkdir -p "$ROOT" "$CACHE"
	# One build or check of a tuple at a time: lanec.sh copies from a
	# prefix that another build must not replace meanwhile.
	exec 9>"$ROOT/.lock"
	flock 9
	want=$(versions "$name")
	if [ "$(cat "$prefix/VERSIONS" 2>/dev/null)" = "$want" ] &&
		[ -x "$prefix/bin/dockerd" ] && [ -x "$prefix/bin/containerd" ] &&
		[ -x "$prefix/bin/containerd-shim-runc-v2" ] && [ -x "$prefix/bin/runc" ]; then
		echo "$prefix"
		return 0
	fi
	# The installs below empty GOBIN, but an empty variable does not
	# override the go env file's GOBIN (go env -w), with which go install
	# refuses a cross build and installs elsewhere than the GOPATH read.
	local filebin
	filebin=$(GOBIN='' GOTOOLCHAIN=local go env GOBIN)
	[ -z "$filebin" ] || die "the go env file sets GOBIN=$filebin (go env -w); unset it (go env -u GOBIN) to build tuples"
	# runc's cgo toolchain: the host's, or for arm64 Debian's cross
	# compiler and arm64 libseccomp (its pkg-config files apart from the
	# host's).
	# The host's libseccomp by architecture: a plain libseccomp-dev is
	# satisfied by the arm64 copy an arm64 tuple installs.
	local cc=() debs=("libseccomp-dev:$(dpkg --print-architecture)" pkg-config)
	if [ "$ARCH" = arm64 ]; then
		debs=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross libseccomp-dev:arm64 pkg-config)
		cc=(GOARCH=arm64 CC=aarch64-linux-gnu-gcc PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig)
	fi
	if ! dpkg -s "${debs[@]}" >/dev/null 2>&1; then
		if [ "$ARCH" = arm64 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
			dpkg --add-architecture arm64
		fi
		apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${debs[@]}" >&2
	fi
	tmp=$(mktemp -d "$ROOT/.build-$name.XXXXXX")
	# shellcheck disable=SC2064 # expand tmp now: it is local
	trap "rm -rf '$tmp'" EXIT
	echo "tuple: building $name into $prefix (minutes)" >&2
	moby_source "$name" "$tmp/src"
	mkdir -p "$tmp/prefix/bin"
	# The release's stamps: Version without "v", GitCommit the short commit
	# (what `docker version` of the release shows).
	(cd "$tmp/src" && GOARCH=$ARCH GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=vendor go build -trimpath \
		-tags netgo,osusergo,static_build \
		-ldflags "-X github.com/moby/moby/v2/dockerversion.Version=$DOCKERD_VERSION -X github.com/moby/moby/v2/dockerversion.GitCommit=${DOCKERD_COMMIT:0:7}" \
		-o "$tmp/prefix/bin/dockerd" ./cmd/dockerd) >&2
	# go install refuses GOBIN for a cross build, and go build takes no
	# @version: install into a GOPATH of the build's own (the module cache
	# stays the shared one), whose bin/ (bin/linux_arm64/ for a cross
	# build) is then moved into the prefix.
	local gobin=$tmp/gopath/bin mc
	[ "$ARCH" = "$(GOTOOLCHAIN=local go env GOHOSTARCH)" ] || gobin=$gobin/linux_$ARCH
	mc=$(GOTOOLCHAIN=local go env GOMODCACHE)
	GOPATH=$tmp/gopath GOMODCACHE=$mc GOBIN='' GOARCH=$ARCH GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS='' go install -trimpath \
		-ldflags "-X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION -X github.com/containerd/containerd/v2/version.Revision=$(stamp "$CONTAINERD_COMMIT" "$CONTAINERD_VERSION")" \
		"github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD_VERSION" \
		"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" >&2
	env "${cc[@]}" GOPATH="$tmp/gopath" GOMODCACHE="$mc" GOBIN='' GOTOOLCHAIN=local CGO_ENABLED=1 GOFLAGS='' go install -trimpath -tags seccomp \
		-ldflags "-X main.version=${RUNC_VERSION#v} -X main.gitCommit=$(stamp "$RUNC_COMMIT" "$RUNC_VERSION")" \
		"github.com/opencontainers/runc@$RUNC_VERSION" >&2
	mv "$gobin/containerd" "$gobin/containerd-shim-runc-v2" "$gobin/runc" "$tmp/prefix/bin/"
	chmod -R u+w "$tmp/gopath"
	echo "$want" >"$tmp/prefix/VERSIONS"
	# The old prefix is moved aside, not deleted, until the new one is in
	# place: a failed rename leaves the last good tuple.
	if [ -e "$prefix" ]; then
		mv -T "$prefix" "$tmp/old"
	fi
	if ! mv -T "$tmp/prefix" "$prefix"; then
		[ ! -e "$tmp/old" ] || mv -T "$tmp/old" "$prefix"
		die "cannot move the build of $name into $prefix"
	fi
	rm -rf "$tmp"
	trap - EXIT
	echo "$prefix"
}

case ${1:-} in
list)
	for n in "${NAMES[@]}"; do
		pins "$n"
		echo "$n dockerd $DOCKERD_VERSION ($DOCKERD_COMMIT) containerd $CONTAINERD_VERSION runc $RUNC_VERSION"
	done
	;;
build)
	[ $# -eq 2 ] || die "usage: $0 build NAME"
	build "$2"
	;;
prefix)
	[ $# -eq 2 ] || die "usage: $0 prefix NAME"
	pins "$2"
	echo "$ROOT/$2$SUFFIX"
	;;
*)
	echo "usage: $0 list | build NAME | prefix NAME" >&2
	exit 2
	;;
esac
