# qualbox: see README.md. Every target that needs a Docker Engine brings one
# up first (scripts/engine.sh, lane A of shared/ENGINES.md).
GO      ?= go
PKGS    := github.com/qualbox/qualbox/...
MANIFEST ?= manifests/linux-x64-cgroupv1.yaml
# KEYS holds the report signing key pair; the private key is git-ignored.
KEYS    ?= reports/keys

.PHONY: test qualify engine engine-down bench bench-transfer lint

engine:
	@scripts/engine.sh up

engine-down:
	@scripts/engine.sh down

## test: vet and test every module, including the tests that need the real Engine.
test: engine
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -timeout 60m $(PKGS)

## qualify: build the guest image, run $(MANIFEST) against the real Engine, write and sign reports/runs/<timestamp>/.
qualify: engine $(KEYS)/qualbox-ed25519.key
	$(GO) run ./cmd/qualify run --manifest $(MANIFEST) --signing-key $(KEYS)/qualbox-ed25519.key $(if $(OUT),--output $(OUT))

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

## verify: check every signed report under reports/ (DIRS=... to choose) against $(KEYS)/qualbox-ed25519.pub.
verify:
	$(GO) run ./cmd/qualify verify --key $(KEYS)/qualbox-ed25519.pub $(or $(DIRS),$(dir $(wildcard reports/*/*/evidence.dsse.json reports/runs/*/evidence.dsse.json)))
