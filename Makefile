# qualbox: see README.md. Every target that needs a Docker Engine brings one
# up first (scripts/engine.sh, lane A of docs/lanes.md).
GO      ?= go
# One module, github.com/qualbox/qualbox, at the repository root (README.md,
# Install): ./... is every package.
PKGS    := ./...
MANIFEST ?= manifests/linux-x64-cgroupv1.yaml
# KEYS holds this machine's report signing key pair, generated on first use
# outside the repository: a private key never enters git. Which committed
# public key (reports/keys/) may sign which row, and when, is stated by the
# trust entries of reports/gate-policy.yaml only (docs/qualification.md#gate).
KEYS    ?= /var/lib/qualbox/keys
# Reports record the qualify build's VCS revision and dirty flag, and the
# shipped gate policies demand a clean revision: stamp it even where the
# environment sets GOFLAGS=-buildvcs=false. Run from a clean checkout, with
# OUT outside it (an untracked file makes the build "dirty"). go run stamps
# only with -buildvcs=true, which fails outside a checkout (a tarball).
QUALIFY_GOFLAGS ?= $(if $(wildcard .git),-buildvcs=true,-buildvcs=false)

.PHONY: cross fuzz generate release test test-hermetic test-lane-b test-lane-c test-lane-d qualify qualify-lane-b qualify-linux-x64 qualify-linux-arm64 lanec-image laned-image tuple engine engine-down engine-b engine-b-down bench bench-transfer lint verify verify-external verify-key gate matrix report-png

engine:
	@scripts/engine.sh up

engine-down:
	@scripts/engine.sh down

## engine-b: lane B, a current Moby Engine built from its Go module, at /run/qualbox-moby/docker.sock.
engine-b:
	@scripts/engine.sh up-b

engine-b-down:
	@scripts/engine.sh down-b

## test-lane-b: the driver's real-Engine tests (conformance, streams, faults, recovery) against lane B, then
## qualify's engine-restart tests, which restart lane B's daemon (docs/qualification.md#engine-restart).
LANE_B_ENV := QUALBOX_REQUIRE_ENGINE=1 QUALBOX_ENGINE_SOCKET=/run/qualbox-moby/docker.sock QUALBOX_ENGINE_RESTART="$(CURDIR)/scripts/engine.sh restart-b"
ENGINE_RESTART_TESTS := ^Test(EngineRestartLaneB|NegativeEngineRestart(Conflict|Leftover|DatasetContent|LiveRestoreNotOn|NotKept))$$
test-lane-b: engine-b
	$(LANE_B_ENV) $(GO) test -count=1 -timeout 30m ./driver/...
	$(LANE_B_ENV) $(GO) test -count=1 -timeout 30m -run '$(ENGINE_RESTART_TESTS)' ./qualify/

## test: vet and test every package, including the tests that need the real Engine; an Engine test
## that finds none fails (QUALBOX_REQUIRE_ENGINE=1, docs/lanes.md#engine-tests) instead of skipping.
test: engine
	$(GO) vet $(PKGS)
	QUALBOX_REQUIRE_ENGINE=1 $(GO) test -count=1 -timeout 60m $(PKGS)

## test-hermetic: vet and every test that needs no Docker Engine and no root; every Engine test skips
## without dialing (QUALBOX_NO_ENGINE=1, docs/lanes.md#engine-tests), even where an Engine answers.
test-hermetic:
	$(GO) vet $(PKGS)
	QUALBOX_NO_ENGINE=1 $(GO) test -count=1 -timeout 30m $(PKGS)

## qualify: build the guest image, run $(MANIFEST) against the real Engine, write and sign reports/runs/<timestamp>/.
qualify: engine $(KEYS)/qualbox-ed25519.key
	GOFLAGS=$(QUALIFY_GOFLAGS) $(GO) run ./cmd/qualify run --manifest $(MANIFEST) --signing-key $(KEYS)/qualbox-ed25519.key $(if $(OUT),--output $(OUT))

## qualify-lane-b: the same catalogue against lane B (builds and starts it if needed).
qualify-lane-b: engine-b $(KEYS)/qualbox-ed25519.key
	GOFLAGS=$(QUALIFY_GOFLAGS) $(GO) run ./cmd/qualify run --manifest manifests/linux-x64-cgroupv1-lane-b.yaml --signing-key $(KEYS)/qualbox-ed25519.key $(if $(OUT),--output $(OUT))

## TUPLE: the Engine tuple lane C's guest runs (docs/lanes.md#engine-tuples): lane-b (default) or a
## name of `scripts/tuple.sh list`; `make tuple TUPLE=name` builds one without booting the guest.
TUPLE ?=
LANEC_ENV := $(if $(TUPLE),LANEC_TUPLE=$(TUPLE))

## qualify-linux-x64: lane C (docs/lanes.md#lane-c): boot the cached cgroup v2 + systemd + AppArmor
## guest under QEMU (KVM or TCG, LANEC_ACCEL=auto|kvm|tcg), run manifests/linux-x64.yaml and the driver's conformance suite inside it,
## write and sign reports/runs/<timestamp>/ (or OUT=). Builds the guest image on first use (minutes).
qualify-linux-x64: $(KEYS)/qualbox-ed25519.key
	$(LANEC_ENV) GOFLAGS=$(QUALIFY_GOFLAGS) scripts/lanec.sh run --signing-key $(KEYS)/qualbox-ed25519.key $(if $(OUT),--out $(OUT))

## test-lane-c: the same into $(LANEC_OUT), then verify the signed report with $(KEYS)/qualbox-ed25519.pub.
LANEC_OUT := $(or $(OUT),reports/runs/lanec-$(shell date -u +%Y%m%dT%H%M%SZ))
test-lane-c: $(KEYS)/qualbox-ed25519.key
	$(LANEC_ENV) GOFLAGS=$(QUALIFY_GOFLAGS) scripts/lanec.sh run --signing-key $(KEYS)/qualbox-ed25519.key --out $(LANEC_OUT)
	$(GO) run ./cmd/qualify verify --key $(KEYS)/qualbox-ed25519.pub $(LANEC_OUT)

## qualify-linux-arm64: lane D (docs/lanes.md#lane-d): the same in a Debian arm64 guest under
## qemu-system-aarch64 (TCG), everything inside it arm64 (the Engine tuple $(or $(TUPLE),ref-29.1.4),
## qualify, the probe, the guest image), manifests/linux-arm64.yaml (systemd cgroup driver). Builds the
## arm64 guest on first use (about 25 min).
## EMULATE=amd64: lane D runs linux/amd64 images through qemu-user (profile linux-arm64-emulated-amd64).
## CGROUP_DRIVER=cgroupfs: the guest's dockerd uses the cgroupfs driver, the Docker Desktop VM's
## (profile linux-arm64-cgroupfs, manifests/linux-arm64-cgroupfs.yaml).
EMULATE ?=
CGROUP_DRIVER ?=
LANED_ENV := LANEC_ARCH=arm64 $(if $(EMULATE),LANEC_EMULATE=$(EMULATE)) $(if $(CGROUP_DRIVER),LANEC_CGROUP_DRIVER=$(CGROUP_DRIVER)) $(LANEC_ENV)
qualify-linux-arm64: $(KEYS)/qualbox-ed25519.key
	$(LANED_ENV) GOFLAGS=$(QUALIFY_GOFLAGS) scripts/lanec.sh run --signing-key $(KEYS)/qualbox-ed25519.key $(if $(OUT),--out $(OUT))

## test-lane-d: the same into $(LANED_OUT), then verify the signed report with $(KEYS)/qualbox-ed25519.pub.
LANED_OUT := $(or $(OUT),reports/runs/laned-$(shell date -u +%Y%m%dT%H%M%SZ))
test-lane-d: $(KEYS)/qualbox-ed25519.key
	$(LANED_ENV) GOFLAGS=$(QUALIFY_GOFLAGS) scripts/lanec.sh run --signing-key $(KEYS)/qualbox-ed25519.key --out $(LANED_OUT)
	$(GO) run ./cmd/qualify verify --key $(KEYS)/qualbox-ed25519.pub $(LANED_OUT)

## laned-image: assemble (or find cached) lane D's arm64 guest image.
laned-image:
	$(LANED_ENV) scripts/lanec.sh image

## tuple: build (or find) the Engine tuple $(TUPLE) under /opt/qualbox-tuples.
tuple:
	@test -n "$(TUPLE)" || { echo "make tuple: name one with TUPLE= (scripts/tuple.sh list)"; exit 2; }
	scripts/tuple.sh build $(TUPLE)

## lanec-image: assemble (or find cached) lane C's guest image under /var/cache/qualbox/lanec.
lanec-image:
	$(LANEC_ENV) scripts/lanec.sh image

## bench: every driver benchmark, BENCH_COUNT samples each (one sample per run, qualbox and its
## reference back to back in it); benchstat reads the Benchmark lines, and the run ends with one
## table of every measure: median, min, max, target, met. BENCH=regexp selects benchmarks.
BENCH       ?= .
BENCH_COUNT ?= 5
bench: engine
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchtime 1x -count $(BENCH_COUNT) -timeout 120m ./driver/

## bench-transfer: workspace import/export of 256 MiB in 10,000 files against `docker cp`, and peak RSS exporting 200,000 vs 10,000 files.
bench-transfer: engine
	$(GO) test -run '^$$' -bench 'BenchmarkImport$$|BenchmarkExport$$|BenchmarkExportPeakRSS$$' -benchtime 1x -count $(BENCH_COUNT) -timeout 60m ./driver/

## fuzz: every fuzz target (found with go test -list '^Fuzz') for FUZZTIME each (default 30s), keeping new
## interesting inputs in each package's testdata/fuzz/<Target>/ (FUZZKEEP=0 keeps none; FUZZ=regexp selects targets).
FUZZTIME ?= 30s
FUZZ     ?= .
FUZZKEEP ?= 1
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZ='$(FUZZ)' FUZZKEEP=$(FUZZKEEP) scripts/fuzz.sh

## cross: cmd/qualify and cmd/observe build for darwin/arm64, the Apple Silicon controller of the Mac handoff (README.md).
cross:
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/qualify
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/observe

## release: dist/qualify-<os>-<arch> and dist/observe-<os>-<arch> for linux/amd64, linux/arm64 and
## darwin/arm64 (CGO_ENABLED=0, -trimpath), built like `go install github.com/qualbox/qualbox/cmd/qualify@$(VERSION)`
## from the work tree packed at VERSION (internal/release); the guest image (probe + static busybox) as
## dist/qualbox-guest-linux-<arch>.tar for each arch with a BUSYBOX_<ARCH> (default: the host's
## /bin/busybox for the host's arch), its image ID in dist/GUEST-IMAGES; dist/SHA256SUMS over them all.
## Debian's static busybox for another arch, unpacked without installing it (needs Debian and root):
##   make release BUSYBOX_ARM64=$$(scripts/busybox.sh arm64 /var/cache/qualbox/busybox)
## `qualify run --image-archive dist/qualbox-guest-linux-<arch>.tar` runs with that image (README.md).
## VERSION defaults to git describe; without a tag that is made v0.0.0-g<commit>[-dirty].
VERSION ?= $(shell git describe --tags --always --dirty)
BUSYBOX_$(shell $(GO) env GOHOSTARCH | tr a-z A-Z) ?= $(wildcard /bin/busybox)
release:
	$(GO) run ./internal/release/mkrelease -version '$(VERSION)' -out dist \
		$(if $(BUSYBOX_AMD64),-busybox-amd64 '$(BUSYBOX_AMD64)') $(if $(BUSYBOX_ARM64),-busybox-arm64 '$(BUSYBOX_ARM64)')

## generate: write what the platform registry (platforms/) generates: manifests/*.yaml, the rows of both gate
## policies, the row matrices of .github/workflows/qualify.yml and .github/actionlint.yaml's runner labels
## (internal/platformgen; README.md "Adding a host row"). Commit what it writes.
generate:
	$(GO) run ./internal/platformgen

## lint: formatting, vet, staticcheck across the module, and no function outside tests over cyclomatic
## complexity 19 (gocyclo), so each reads as steps (docs/architecture.md).
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)
	$(GO) run github.com/fzipp/gocyclo/cmd/gocyclo@v0.6.0 -over 19 $$(git ls-files '*.go' | grep -v '_test\.go$$')

## keys: the report signing key pair, generated on first use.
$(KEYS)/qualbox-ed25519.key:
	$(GO) run ./cmd/qualify keygen --out $(KEYS)

## verify: check the committed signed reports against the trust entries and rows of reports/gate-policy.yaml
## (a file in reports/keys that the policy does not name is trusted for nothing); DIRS=... for others.
## A local `make qualify` run is checked for integrity only with `make verify-key KEY=$(KEYS)/qualbox-ed25519.pub DIRS=...`.
verify:
	$(GO) run ./cmd/qualify verify --policy reports/gate-policy.yaml $(or $(DIRS),$(dir $(wildcard reports/linux-*/*/evidence.dsse.json)))

## verify-external: the standard attestations checked by independent tools: cosign verify-blob-attestation
## for both statements of a run, slsa-verifier verify-vsa for merge --vsa's summary, each refusing a
## one-byte change (docs/qualification.md#standard-attestations). Builds both tools from the module proxy
## into /var/cache/qualbox/tools on first use (about 19 minutes cold), hence not part of `make test`.
verify-external:
	QUALBOX_EXTERNAL_TOOLS=$$(scripts/external-tools.sh) $(GO) test -count=1 -run 'TestCosignVerifiesReportStatements|TestSLSAVerifierVerifiesTheSummary' -v ./cmd/qualify/

## verify-key: integrity of DIRS against the one public key KEY the caller names (no policy, no row binding).
verify-key:
	$(GO) run ./cmd/qualify verify --key $(KEY) $(DIRS)

## gate: the release gate of reports/gate-policy.yaml over the newest committed report of each directory
## under reports/ (GATE_DIRS=... for others); prints the GATE line and matrix as Markdown and exits 0
## only when every required row passed and no report was refused.
GATE_DIRS ?= $(foreach d,$(wildcard reports/linux-*),$(lastword $(sort $(dir $(wildcard $(d)/*/evidence.dsse.json)))))
gate:
	@$(GO) run ./cmd/qualify merge --policy reports/gate-policy.yaml --markdown $(GATE_DIRS)

## matrix: regenerate reports/matrix.md as exactly what `make gate` prints, passed or failed
## (cmd/qualify TestMatrixMarkdownIsTheGate compares them); run it after committing new reports.
matrix:
	$(GO) run ./cmd/qualify merge --policy reports/gate-policy.yaml --markdown $(GATE_DIRS) > reports/matrix.md.new || true
	head -n 1 reports/matrix.md.new | grep -q '^GATE: ' && mv reports/matrix.md.new reports/matrix.md || { rm -f reports/matrix.md.new; exit 1; }

## report-png: docs/report.png, headless Chromium's screenshot of the report.html of a real run
## (memory-exhaustion and pid-exhaustion on lane A), taken by qualify's TestReportPagesRenderInABrowser.
report-png: engine
	QUALBOX_REQUIRE_ENGINE=1 QUALBOX_REPORT_PNG=$(CURDIR)/docs/report.png $(GO) test -count=1 -run '^TestReportPagesRenderInABrowser$$' ./qualify/
