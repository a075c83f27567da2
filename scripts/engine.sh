#!/usr/bin/env bash
# Brings up the Docker Engine the tests and qualification runs need (lane A,
# docs/lanes.md#lane-a): Debian's docker.io at /var/run/docker.sock, plus Debian's
# static busybox for the guest image. Idempotent; never restarts or
# reconfigures an Engine that already answers.
#
#   scripts/engine.sh up     install if missing, start if not answering, wait
#   scripts/engine.sh down   stop the Engine only if this script started it
#   scripts/engine.sh status print whether the socket answers
#
# Lane B (docs/lanes.md#lane-b): a current Moby Engine built from its Go module
# beside lane A, with its own data root, exec root and socket.
#
#   scripts/engine.sh up-b | down-b | status-b
#   scripts/engine.sh restart-b [--live-restore]
#                                 stop lane B (by its pidfile) and start it
#                                 again, with live-restore on if asked; fails
#                                 if lane B still answers after the stop
#   scripts/engine.sh install-b   build the pinned binaries into /opt/qualbox-moby
#                                 only (lane C copies them into its guest)
set -euo pipefail

SOCKET=${QUALBOX_ENGINE_SOCKET:-/var/run/docker.sock}
STATE_DIR=/run/qualbox
PIDFILE=$STATE_DIR/dockerd-lane-a.pid
LOG=/var/log/qualbox-dockerd.log

answers() {
	curl -sf --max-time 3 --unix-socket "$SOCKET" http://engine/_ping >/dev/null 2>&1
}

install_packages() {
	local need=()
	command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
	[ -x /bin/busybox ] && file_is_static /bin/busybox || need+=(busybox-static)
	command -v curl >/dev/null 2>&1 || need+=(curl)
	if [ ${#need[@]} -gt 0 ]; then
		echo "engine: installing ${need[*]}" >&2
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
	fi
}

file_is_static() {
	# A static ELF has no PT_INTERP program header.
	! LC_ALL=C readelf -l "$1" 2>/dev/null | grep -q 'Requesting program interpreter'
}

up() {
	install_packages
	if answers; then
		echo "engine: $SOCKET answers" >&2
		return 0
	fi
	if [ "$(id -u)" != 0 ]; then
		echo "engine: no Engine answers at $SOCKET and starting one needs root; run: sudo scripts/engine.sh up" >&2
		return 1
	fi
	mkdir -p "$STATE_DIR"
	echo "engine: starting dockerd at $SOCKET (log $LOG)" >&2
	setsid dockerd --host "unix://$SOCKET" >"$LOG" 2>&1 </dev/null &
	echo $! >"$PIDFILE"
	for _ in $(seq 1 120); do
		if answers; then
			echo "engine: ready" >&2
			return 0
		fi
		if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
			echo "engine: dockerd exited; last log lines:" >&2
			tail -n 20 "$LOG" >&2
			return 1
		fi
		sleep 0.5
	done
	echo "engine: dockerd did not answer at $SOCKET within 60 s; see $LOG" >&2
	return 1
}

down() {
	if [ -f "$PIDFILE" ]; then
		pid=$(cat "$PIDFILE")
		if kill -0 "$pid" 2>/dev/null; then
			echo "engine: stopping dockerd (pid $pid) started by this script" >&2
			kill "$pid"
			for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
		fi
		rm -f "$PIDFILE"
	fi
}

# Lane B pins: the module versions docs/lanes.md#lane-b describes.
MOBY_VERSION=v2.0.0-beta.24
RUNC_VERSION=v1.3.4
B_PREFIX=/opt/qualbox-moby
B_SOCKET=/run/qualbox-moby/docker.sock
B_PIDFILE=/run/qualbox-moby/docker.pid
B_LOG=/var/log/qualbox-moby.log

answers_b() {
	curl -sf --max-time 3 --unix-socket "$B_SOCKET" http://engine/_ping >/dev/null 2>&1
}

install_b() {
	install_packages
	# The host's own architecture by name: `dpkg -s libseccomp-dev` is
	# also satisfied by another architecture's copy (lane D's tuple
	# installs libseccomp-dev:arm64), whose headers runc cannot link here.
	local seccomp
	seccomp=libseccomp-dev:$(dpkg --print-architecture)
	if ! dpkg -s "$seccomp" pkg-config >/dev/null 2>&1; then
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$seccomp" pkg-config >&2
	fi
	mkdir -p "$B_PREFIX/bin"
	# Rebuild when the recorded versions differ from the pins.
	if [ "$(cat "$B_PREFIX/VERSIONS" 2>/dev/null)" != "stamped dockerd $MOBY_VERSION runc $RUNC_VERSION" ] ||
		[ ! -x "$B_PREFIX/bin/dockerd" ] || [ ! -x "$B_PREFIX/bin/runc" ]; then
		echo "engine-b: building dockerd $MOBY_VERSION and runc $RUNC_VERSION into $B_PREFIX/bin (minutes)" >&2
		# Stamp the module versions: unstamped, /version says "library-import"
		# and /info has no runc commit, and reports would carry no identity.
		GOBIN="$B_PREFIX/bin" CGO_ENABLED=0 go install \
			-ldflags "-X github.com/moby/moby/v2/dockerversion.Version=${MOBY_VERSION#v} -X github.com/moby/moby/v2/dockerversion.GitCommit=module-$MOBY_VERSION" \
			"github.com/moby/moby/v2/cmd/dockerd@$MOBY_VERSION" >&2
		GOBIN="$B_PREFIX/bin" CGO_ENABLED=1 go install -tags seccomp \
			-ldflags "-X main.version=${RUNC_VERSION#v} -X main.gitCommit=module-$RUNC_VERSION" \
			"github.com/opencontainers/runc@$RUNC_VERSION" >&2
		echo "stamped dockerd $MOBY_VERSION runc $RUNC_VERSION" >"$B_PREFIX/VERSIONS"
	fi
}

up_b() {
	local extra=()
	case "${1:-}" in
	"") ;;
	--live-restore) extra=(--live-restore) ;;
	*)
		echo "engine-b: unknown option $1 (known: --live-restore)" >&2
		return 2
		;;
	esac
	install_b
	if answers_b; then
		echo "engine-b: $B_SOCKET answers" >&2
		return 0
	fi
	mkdir -p /run/qualbox-moby /var/lib/qualbox-moby
	echo "engine-b: starting dockerd $MOBY_VERSION at $B_SOCKET ${extra[*]} (log $B_LOG)" >&2
	PATH="$B_PREFIX/bin:$PATH" setsid dockerd --data-root /var/lib/qualbox-moby --exec-root /run/qualbox-moby/exec \
		--host "unix://$B_SOCKET" --pidfile "$B_PIDFILE" --bridge none --iptables=false --ip6tables=false "${extra[@]}" \
		>"$B_LOG" 2>&1 </dev/null &
	for _ in $(seq 1 120); do
		if answers_b; then
			echo "engine-b: ready" >&2
			return 0
		fi
		sleep 0.5
	done
	echo "engine-b: dockerd did not answer at $B_SOCKET within 60 s; see $B_LOG" >&2
	tail -n 20 "$B_LOG" >&2
	return 1
}

down_b() {
	if [ -f "$B_PIDFILE" ]; then
		pid=$(cat "$B_PIDFILE")
		if kill -0 "$pid" 2>/dev/null; then
			echo "engine-b: stopping dockerd (pid $pid)" >&2
			kill "$pid"
			for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
		fi
	fi
}

case "${1:-up}" in
up-b) up_b ;;
install-b) install_b ;;
down-b) down_b ;;
restart-b)
	down_b
	if answers_b; then
		echo "engine-b: $B_SOCKET still answers after stopping the dockerd of $B_PIDFILE: not restarted" >&2
		exit 1
	fi
	up_b "${2:-}"
	;;
status-b) if answers_b; then echo "answers: $B_SOCKET"; else echo "no answer: $B_SOCKET"; exit 1; fi ;;
up) up ;;
down) down ;;
status) if answers; then echo "answers: $SOCKET"; else echo "no answer: $SOCKET"; exit 1; fi ;;
*) echo "usage: $0 up|down|status|up-b|down-b|restart-b [--live-restore]|status-b|install-b" >&2; exit 2 ;;
esac
