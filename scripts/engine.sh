#!/usr/bin/env bash
# Brings up the Docker Engine the tests and qualification runs need (lane A in
# shared/ENGINES.md): Debian's docker.io at /var/run/docker.sock, plus Debian's
# static busybox for the guest image. Idempotent; never restarts or
# reconfigures an Engine that already answers.
#
#   scripts/engine.sh up     install if missing, start if not answering, wait
#   scripts/engine.sh down   stop the Engine only if this script started it
#   scripts/engine.sh status print whether the socket answers
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

case "${1:-up}" in
up) up ;;
down) down ;;
status) if answers; then echo "answers: $SOCKET"; else echo "no answer: $SOCKET"; exit 1; fi ;;
*) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
