#!/bin/bash
# Runs INSIDE the lane C guest (`scripts/lanec.sh record DIR` puts it on the
# guest's shared folder and runs it after docker.service): records the real
# cgroup v2 files the observer (qualify/observer) reads, for one hardened
# workload, at four moments, as trees rooted at "/" under OUT:
#
#   OUT/v2-guest-before   limits set, keeper running
#   OUT/v2-guest-oom      after an exec allocating 128 MiB under 64 MiB was
#                         OOM-killed (keeper still running)
#   OUT/v2-guest-pids     after an exec's forks hit pids.max = 32
#   OUT/v2-guest-after    after `docker rm -f`: scope and /proc/<pid> gone
#
# plus OUT/LABEL, copied into each tree (command, date, kernel, Engine), and
# OUT/facts.json (the probe's own view inside the same workload).
# Usage: lanec-record-guest.sh OUT
set -euo pipefail
OUT=${1:?usage: $0 OUT}
BIN=/mnt/qualbox/bin
mkdir -p "$OUT"

# The workload image: Debian's static busybox plus the static probe,
# imported without a registry.
img=$(mktemp -d)
mkdir -p "$img/bin" "$img/usr/local/bin" "$img/tmp" "$img/home/sandbox" "$img/workspace" "$img/etc"
cp /bin/busybox "$img/bin/busybox"
for a in sh sleep cat; do ln -s busybox "$img/bin/$a"; done
cp "$BIN/qualbox-probe" "$img/usr/local/bin/qualbox-probe"
echo 'sandbox:x:65534:65534:sandbox:/home/sandbox:/bin/sh' >"$img/etc/passwd"
echo 'sandbox:x:65534:' >"$img/etc/group"
image=$(tar -C "$img" -c . | docker import -c 'ENV PATH=/usr/local/bin:/bin' -)
rm -rf "$img"

# The same hardening the driver requests (docs/contract.md#policy), with the
# memory and pids limits of the memory-exhaustion and pid-exhaustion
# scenarios.
id=$(docker create --read-only --cap-drop ALL --security-opt no-new-privileges:true \
	--cgroupns private --ipc private --network none --user 65534:65534 \
	--memory 64m --memory-swap 64m --pids-limit 32 --cpus 0.5 \
	--tmpfs /tmp:rw,nosuid,nodev,noexec,size=8m,mode=700,uid=65534,gid=65534 \
	"$image" /bin/sh -c 'while :; do sleep 3600; done')
cleanup() {
	docker rm -f "$id" >/dev/null 2>&1 || true
	docker image rm "$image" >/dev/null 2>&1 || true
}
trap cleanup EXIT
docker start "$id" >/dev/null
pid=$(docker inspect -f '{{.State.Pid}}' "$id")
scope=sys/fs/cgroup/system.slice/docker-$id.scope

# snap copies the observer's files (qualify/observer Resolve and Read) into
# OUT/NAME, keeping their paths; files that do not exist are left out.
snap() {
	local d=$OUT/$1 f
	mkdir -p "$d/proc/self"
	cat /proc/self/mountinfo >"$d/proc/self/mountinfo"
	if [ -d "/proc/$pid" ]; then
		mkdir -p "$d/proc/$pid"
		cat "/proc/$pid/cgroup" >"$d/proc/$pid/cgroup"
		cat "/proc/$pid/stat" >"$d/proc/$pid/stat"
		cat "/proc/$pid/mountinfo" >"$d/proc/$pid/mountinfo"
	fi
	if [ -d "/$scope" ]; then
		mkdir -p "$d/$scope"
		for f in cgroup.procs cgroup.controllers cgroup.type memory.max memory.swap.max memory.current \
			memory.peak memory.events memory.stat pids.max pids.current pids.events pids.events.local \
			cpu.max cpu.weight; do
			[ -r "/$scope/$f" ] && cat "/$scope/$f" >"$d/$scope/$f"
		done
		# The parent's pids counters tell the two semantics apart: from
		# Linux 6.11 its pids.events counts the scope's refusals too
		# (hierarchical) and its pids.events.local does not; before 6.11
		# it counts neither.
		local parent
		parent=$(dirname "$scope")
		for f in pids.events pids.events.local; do
			[ -r "/$parent/$f" ] && cat "/$parent/$f" >"$d/$parent/$f"
		done
	fi
	echo "recorded $1"
}

docker exec "$id" /usr/local/bin/qualbox-probe facts >"$OUT/facts.json"
snap v2-guest-before

# 128 MiB touched under a 64 MiB limit with swap 0: the kernel OOM-kills
# the exec (exit 137); the keeper survives.
set +e
docker exec "$id" /usr/local/bin/qualbox-probe alloc 128 >"$OUT/oom-exec.out" 2>/dev/null
echo "alloc exit $?" >>"$OUT/oom-exec.out"
set -e
snap v2-guest-oom

# 256 children each sleeping 60 s under pids.max 32: forks fail at the
# limit while the children hold it.
docker exec -d "$id" /usr/local/bin/qualbox-probe spawn 256 60
for _ in $(seq 1 60); do
	[ "$(cat "/$scope/pids.current")" -ge 32 ] && grep -q '^max [1-9]' "/$scope/pids.events" && break
	sleep 1
done
sleep 2
snap v2-guest-pids

docker rm -f "$id" >/dev/null
for _ in $(seq 1 30); do
	[ ! -d "/$scope" ] && break
	sleep 1
done
snap v2-guest-after
docker image rm "$image" >/dev/null
trap - EXIT

{
	echo "Recorded by scripts/lanec.sh record (scripts/lanec-record-guest.sh) inside the lane C guest"
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "kernel: $(uname -r) $(uname -v)"
	echo "cgroup: $(stat -fc %T /sys/fs/cgroup), controllers $(cat /sys/fs/cgroup/cgroup.controllers)"
	docker version --format 'engine: {{.Server.Version}} (API {{.Server.APIVersion}})'
	docker info --format 'cgroup driver: {{.CgroupDriver}}; security options: {{.SecurityOptions}}'
	echo "container: $id (keeper pid $pid)"
	echo "workload: docker create --read-only --cap-drop ALL --security-opt no-new-privileges:true --cgroupns private --ipc private --network none --user 65534:65534 --memory 64m --memory-swap 64m --pids-limit 32 --cpus 0.5"
	echo "oom: docker exec qualbox-probe alloc 128 ($(tail -n1 "$OUT/oom-exec.out"))"
	echo "pids: docker exec -d qualbox-probe spawn 256 60"
} >"$OUT/LABEL"
cat "$OUT/LABEL"
for d in v2-guest-before v2-guest-oom v2-guest-pids v2-guest-after; do
	cp "$OUT/LABEL" "$OUT/$d/LABEL"
done
