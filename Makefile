# qualbox: see README.md. Every target that needs a Docker Engine brings one
# up first (scripts/engine.sh, lane A of shared/ENGINES.md).
GO      ?= go
PKGS    := github.com/qualbox/qualbox/...
MANIFEST ?= manifests/linux-x64-cgroupv1.yaml
# KEYS holds this machine's report signing key pair, generated on first use
# outside the repository: a private key never enters git. TRUSTED_KEY is the
# committed public key that verifies the committed reports under reports/.
KEYS    ?= /var/lib/qualbox/keys
TRUSTED_KEY ?= reports/keys/qualbox-ed25519.pub

.PHONY: test test-lane-b test-lane-c qualify qualify-lane-b qualify-linux-x64 lanec-image engine engine-down engine-b engine-b-down bench bench-transfer lint

engine:
	@scripts/engine.sh up

engine-down:
	@scripts/engine.sh down

## engine-b: lane B, a current Moby Engine built from its Go module, at /run/qualbox-moby/docker.sock.
engine-b:
	@scripts/engine.sh up-b

engine-b-down:
	@scripts/engine.sh down-b

## test-lane-b: the driver's real-Engine tests (conformance, streams, faults, recovery) against lane B.
test-lane-b: engine-b
	QUALBOX_ENGINE_SOCKET=/run/qualbox-moby/docker.sock $(GO) test -count=1 -timeout 30m ./driver/...

## test: vet and test every module, including the tests that need the real Engine.
test: engine
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -timeout 60m $(PKGS)

## qualify: build the guest image, run $(MANIFEST) against the real Engine, write and sign reports/runs/<timestamp>/.
qualify: engine $(KEYS)/qualbox-ed25519.key
	$(GO) run ./cmd/qualify run --manifest $(MANIFEST) --signing-key $(KEYS)/qualbox-ed25519.key $(if $(OUT),--output $(OUT))

## qualify-lane-b: the same catalogue against lane B (builds and starts it if needed).
qualify-lane-b: engine-b $(KEYS)/qualbox-ed25519.key
	$(GO) run ./cmd/qualify run --manifest manifests/linux-x64-cgroupv1-lane-b.yaml --signing-key $(KEYS)/qualbox-ed25519.key $(if $(OUT),--output $(OUT))

## qualify-linux-x64: lane C (docs/lanes.md#lane-c): boot the cached cgroup v2 + systemd + AppArmor
## guest under QEMU TCG, run manifests/linux-x64.yaml and the driver's conformance suite inside it,
## write and sign reports/runs/<timestamp>/ (or OUT=). Builds the guest image on first use (minutes).
qualify-linux-x64: $(KEYS)/qualbox-ed25519.key
	scripts/lanec.sh run --signing-key $(KEYS)/qualbox-ed25519.key $(if $(OUT),--out $(OUT))

## test-lane-c: the same into $(LANEC_OUT), then verify the signed report with $(KEYS)/qualbox-ed25519.pub.
LANEC_OUT := $(or $(OUT),reports/runs/lanec-$(shell date -u +%Y%m%dT%H%M%SZ))
test-lane-c: $(KEYS)/qualbox-ed25519.key
	scripts/lanec.sh run --signing-key $(KEYS)/qualbox-ed25519.key --out $(LANEC_OUT)
	$(GO) run ./cmd/qualify verify --key $(KEYS)/qualbox-ed25519.pub $(LANEC_OUT)

## lanec-image: assemble (or find cached) lane C's guest image under /var/cache/qualbox/lanec.
lanec-image:
	scripts/lanec.sh image

## bench: driver benchmarks; each prints its ratio against a reference measured in the same run.
bench: engine
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./driver/...

## bench-transfer: workspace import/export of 256 MiB in 10,000 files against `docker cp`, and peak RSS exporting 200,000 vs 10,000 files.
bench-transfer: engine
	$(GO) test -run '^$$' -bench 'BenchmarkImport$$|BenchmarkExport$$|BenchmarkExportPeakRSS$$' -benchtime 1x -timeout 30m ./driver/

## lint: formatting, vet and staticcheck across the workspace.
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)

## keys: the report signing key pair, generated on first use.
$(KEYS)/qualbox-ed25519.key:
	$(GO) run ./cmd/qualify keygen --out $(KEYS)

## verify: check the committed signed reports against $(TRUSTED_KEY); DIRS=... KEY=... for others
## (a local `make qualify` run verifies with KEY=$(KEYS)/qualbox-ed25519.pub).
verify:
	$(GO) run ./cmd/qualify verify --key $(or $(KEY),$(TRUSTED_KEY)) $(or $(DIRS),$(dir $(wildcard reports/linux-*/*/evidence.dsse.json)))
