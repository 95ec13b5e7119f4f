# scc — make help lists the targets.
GO        ?= go
PKGS      ?= ./...
FUZZTIME  ?= 20s
BENCHTIME ?= 1x

.PHONY: help build test stress fuzz bench bench-peers demo lint tidy minio minio-run

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build every package and the scctl binary into bin/
	$(GO) build $(PKGS)
	$(GO) build -o bin/scctl ./cmd/scctl

test: minio ## vet, then every test under the race detector, then the cache again with its invariant assertions, then the allocation-count tests without -race (what CI runs)
	$(GO) vet $(PKGS)
	$(GO) vet -tags invariants ./cache/...
	$(GO) test -race -timeout 15m $(PKGS)
	$(GO) test -race -tags invariants -timeout 5m ./cache/...
	$(GO) test -count=1 -run 'Allocs|WithoutAllocation' ./engine/ ./cache/ # allocation counts skip under -race

stress: ## the long race stress suites (minutes)
	SCC_STRESS=long $(GO) test -race -timeout 60m -run 'Stress|Concurrent|Race' -v ./stress/... ./engine/... ./cache/... ./serialize/... ./resource/...

fuzz: ## run every fuzz target for FUZZTIME each
	@for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

bench: ## every benchmark once (BENCHTIME=1x); figures print beside their baselines
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -benchmem $(PKGS)

bench-peers: ## install the comparison peers (HDF5 tools, h5py, zarr) from Debian
	apt-get update && apt-get install -y hdf5-tools python3-h5py python3-zarr

demo: ## the main job on its embedded default: a concurrent ingest, read back and verified
	$(GO) run ./cmd/scctl ingest

lint: ## gofmt and vet
	@test -z "$$(gofmt -l .)" || (gofmt -l .; exit 1)
	$(GO) vet $(PKGS)

minio: ## build the pinned MinIO server the S3 tests run against (once; cached in ~/.cache/scc/minio-<version>)
	sh vfd/s3/testdata/build-minio.sh >/dev/null

minio-run: minio ## start a local MinIO on 127.0.0.1:9000 with bucket scc, for trying scctl on s3:// URLs
	$(GO) run ./vfd/s3/s3test/minio-run

tidy:
	$(GO) mod tidy
