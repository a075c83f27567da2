#!/bin/bash
# The job of a lane C or lane D guest (docs/lanes.md#running-lane-c). It runs
# INSIDE the guest as qualbox-job.service (scripts/lanec/guest/etc/systemd/
# system/qualbox-job.service), from the 9p shared folder /mnt/qualbox where
# scripts/lanec.sh put it as job.sh beside the run's files; internal/lanevm
# supervises the guest from the host. Each step runs when the host put its
# input on the folder:
#
#   always                   wait for the Engine (params/engine-timeout
#                            seconds), record the guest's facts (state/guest.txt)
#   manifest.yaml            qualify run, signed with signing.key
#                            (params/scenario-timeout; params/image-archive, a
#                            guest image archive on the folder, else the probe)
#   params/conformance-profile  the driver's conformance suite under that profile
#   record.sh                record cgroup v2 trees into out/record
#
# It marks state/booted when it starts and state/started when the Engine
# answers, and ends by writing state/job.status: one line, `passed`,
# `failed`, or `stopped` when a power-down's SIGTERM cut it short. The host
# reads that line strictly (internal/lanevm.ParseStatus) and believes
# `passed` only beside the marks, the step exit statuses (qualify.rc,
# conformance.rc) holding 0 and the report's evidence.dsse.json, all
# regular files (docs/lanes.md#running-lane-c).
set -u
M=/mnt/qualbox
S=$M/state
P=$M/params

# param NAME prints the first line of params/NAME, or nothing.
param() { if [ -f "$P/$1" ]; then head -n 1 "$P/$1"; fi; }

# status WORD writes the job's outcome whole: a new file renamed over.
status() { echo "$1" >"$S/job.status.new" && mv "$S/job.status.new" "$S/job.status"; }

# Debian 12's docker CLI speaks API 1.41 by default, below Docker Engine
# 29's minimum (1.44): name a version every tuple serves. Only the CLI
# reads this; qualify and the driver pin their own.
export DOCKER_API_VERSION=1.44
touch "$S/booted"
echo "lanec-job: booted; docker.service $(systemctl is-active docker.service)"
bound=$(param engine-timeout)
bound=${bound:-900}
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
	status failed
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

# Work on the guest's own disk (sockets, spill files); the report is copied
# to the shared folder when qualify ends, also on SIGTERM.
W=/var/lib/qualbox-lanec
if ! { mkdir -p "$W" && cp -a "$M/bin" "$W/" && cd "$W"; }; then
	status failed
	exit 1
fi
export TMPDIR=/var/tmp
rc=0

if [ -f "$M/manifest.yaml" ]; then
	cp -a "$M/manifest.yaml" "$M/signing.key" "$W/"
	echo "lanec-job: qualify run $(date -u +%T)"
	t=$(date +%s)
	image=(--probe bin/qualbox-probe)
	archive=$(param image-archive)
	[ -z "$archive" ] || image=(--image-archive "$M/$archive")
	timeout=$(param scenario-timeout)
	# qualify runs in the background so that the job's SIGTERM (guest
	# power-down) reaches it and it writes its partial report. The tuple's
	# VERSIONS (how each Engine binary was built) and what the image was
	# assembled from go into the signed run header.
	./bin/qualify run --manifest manifest.yaml --output "$W/report" --signing-key signing.key \
		--engine-build /etc/qualbox-tuple-VERSIONS --image-inputs /etc/qualbox-image-inputs \
		"${image[@]}" --scenario-timeout "${timeout:-10m}" >"$S/qualify.log" 2>&1 &
	q=$!
	# On power-down: SIGTERM, so qualify cancels and writes its partial
	# report; if it still runs 110 s later (systemd kills the unit at
	# 150 s), SIGQUIT, so its log gets every goroutine's stack.
	stop_qualify() {
		kill -TERM "$q" 2>/dev/null
		for _ in $(seq 110); do
			kill -0 "$q" 2>/dev/null || return 0
			sleep 1
		done
		echo "lanec-job: qualify still running 110 s after SIGTERM; SIGQUIT for its goroutine stacks"
		kill -QUIT "$q" 2>/dev/null
	}
	trap 'stop_qualify; wait "$q"; echo 143 >"$S/qualify.rc"; cp -a "$W/report" "$M/out/"; status stopped; exit 143' TERM
	wait "$q" || rc=$?
	trap - TERM
	echo "$rc" >"$S/qualify.rc"
	cp -a "$W/report" "$M/out/" 2>/dev/null
	echo "qualify_s $(($(date +%s) - t))" >>"$S/timings"
	echo "lanec-job: qualify exited $rc"
	tail -n 30 "$S/qualify.log"
fi

profile=$(param conformance-profile)
if [ -n "$profile" ]; then
	echo "lanec-job: driver conformance $(date -u +%T)"
	t=$(date +%s)
	crc=0
	QUALBOX_REQUIRE_ENGINE=1 QUALBOX_ENGINE_SOCKET=/var/run/docker.sock QUALBOX_TEST_PROFILE=$profile \
		QUALBOX_PROBE_BINARY=$W/bin/qualbox-probe \
		./bin/driver.test -test.run '^TestConformance$' -test.v -test.count=1 -test.timeout 40m \
		>"$S/conformance.log" 2>&1 &
	q=$!
	# On power-down: SIGQUIT, so the test binary prints every goroutine's
	# stack into its log before it exits.
	trap 'kill -QUIT "$q" 2>/dev/null; wait "$q"; echo 143 >"$S/conformance.rc"; status stopped; exit 143' TERM
	wait "$q" || crc=$?
	trap - TERM
	echo "$crc" >"$S/conformance.rc"
	echo "conformance_s $(($(date +%s) - t))" >>"$S/timings"
	echo "lanec-job: conformance exited $crc"
	grep -E '^(--- |ok|FAIL|PASS)' "$S/conformance.log" | tail -n 40
	[ "$crc" = 0 ] || rc=1
fi

if [ -f "$M/record.sh" ]; then
	echo "lanec-job: recording cgroup v2 trees $(date -u +%T)"
	(cd "$M" && bash ./record.sh out/record >"$S/record.log" 2>&1) || rc=1
	tail -n 12 "$S/record.log"
fi

if [ "$rc" = 0 ]; then status passed; else status failed; fi
