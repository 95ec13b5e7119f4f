# scc — make help lists the targets.
GO        ?= go
PKGS      ?= ./...
FUZZTIME  ?= 20s
BENCHTIME ?= 1x
# TAGS are the build tags of build and the scctl binary. A cgo build (Go's
# default wherever a C compiler is found) inflates DEFLATE and zlib chunks
# with libdeflate, compiled from the sources in engine/filter/internal, 2.4-3×
# faster than the pure-Go inflater (engine/filter BenchmarkInflateLibdeflate)
# that CGO_ENABLED=0 builds use. zstd runs with libzstd in a cgo build: the
# copy github.com/DataDog/zstd compiles from its bundled sources, or with
# TAGS=external_libzstd the system's (pkg-config libzstd; Debian's
# libzstd-dev). Neither is the default by speed: engine/filter
# BenchmarkZstdFloor decodes the same frames with both, taking turns, and
# measured them within 0.96-1.07x of each other (libzstd 1.5.7 bundled,
# Debian's 1.5.4), so the build needs no system package.
TAGS      ?=

.PHONY: help build test zstd-deps stress fuzz bench bench-peers demo lint tidy interop-deps hdf5 test-hdf5 interop-hdf5-deps bench-hdf5 fuzz-hdf5 corpus-hdf5 minio minio-run corpus-zarr

help: ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build every package and the scctl binary into bin/ (with cgo, DEFLATE inflates with the bundled libdeflate)
	@[ "$$($(GO) env CGO_ENABLED)" = 1 ] || echo 'make build: cgo is off (no C compiler found?): DEFLATE and zlib inflate with pure Go; install gcc (apt-get install gcc) for the faster bundled libdeflate'
	$(GO) build -tags '$(TAGS)' $(PKGS)
	$(GO) build -tags '$(TAGS)' -o bin/scctl ./cmd/scctl

test: interop-deps interop-hdf5-deps zstd-deps minio ## vet, then every test under the race detector with the invariant assertions compiled in, the filters again without cgo (the pure-Go inflater), then the allocation-count and page-fault-count tests without -race (what CI runs)
	$(GO) vet $(PKGS)
	$(GO) vet -tags invariants $(PKGS)
	CGO_ENABLED=0 $(GO) vet ./engine/filter/
	$(GO) test -race -tags invariants -timeout 15m $(PKGS) # with every package's assertions of impossible state compiled in (internal/invariants)
	CGO_ENABLED=0 $(GO) test -timeout 5m ./engine/filter/ # the pure-Go inflater; every other run links libdeflate
	$(GO) vet -tags external_libzstd ./engine/filter/...
	$(GO) test -tags external_libzstd -timeout 5m ./engine/filter/... # zstd with the system's libzstd (TAGS=external_libzstd) against the pure-Go codec
	$(GO) test -count=1 -run 'Allocs|WithoutAllocation|Prefault|PopulateCold|TransientFault|EncodeInPlace|WritesNoSharedMemory' ./engine/ ./cache/ ./internal/bufpool/ ./engine/filter/ # allocation and page-fault counts, and the checks that a hit writes no shared memory, skip under -race; the single-fault sweep runs every operation here, an eighth under -race
	$(MAKE) test-hdf5
	cd bench/peers && $(GO) vet ./... # the peers module (otter, ristretto) still builds against this tree

stress: minio ## the long race stress suites (minutes)
	SCC_STRESS=long $(GO) test -race -timeout 60m -run 'Stress|Concurrent|Race' -v ./stress/... ./engine/... ./cache/... ./serialize/... ./resource/...
	SCC_STRESS=long $(GO) test -race -timeout 20m -run 'TestVirtualWriterProcesses|TestVirtualFollow' -v ./engine/ ./vfd/s3/

fuzz: ## run every fuzz target for FUZZTIME each (.ci/fuzz; retries once a run that fails only by Go's deadline race, golang/go#75804); with cgo that includes libdeflate's against the pure-Go inflater
	GO=$(GO) FUZZTIME=$(FUZZTIME) bash .ci/fuzz

bench: ## every benchmark once (BENCHTIME=1x); figures print beside their baselines
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -benchmem $(PKGS)

# The interop tests read and write with the tools people use:
# zarr-python from Debian (run as /usr/bin/python3: a pyenv python3 on PATH
# lacks it) and zarrita from npm, pinned by its package-lock.json into a
# project-local node_modules. Installed once; later runs only check.
ZARR_NODE := interop/zarr/testdata/node
interop-deps: ## install the Zarr readers the interop tests use (Debian python3-zarr, python3-numpy as root; zarrita from npm into interop/zarr/testdata/node), once
	@/usr/bin/python3 -c 'import zarr, numcodecs, numpy' 2>/dev/null || \
	  { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y python3-zarr python3-numpy; }
	@/usr/bin/python3 -c 'import fsspec, aiohttp, xarray, dask' 2>/dev/null && command -v chromium >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y python3-fsspec python3-aiohttp python3-xarray python3-dask chromium; } # zarr-python, xarray and dask over HTTP, and the web page in a headless chromium (serve's interop tests)
	@test -f $(ZARR_NODE)/node_modules/zarrita/package.json || \
	  (cd $(ZARR_NODE) && npm ci --no-audit --no-fund)

# The Zarr corpus measurement: every array under CORPUS read by the reference
# reader (zarr-python 2 for v2, zarrita for v3), imported alone and compared
# element by element; a summary table on stdout, the markdown report in
# REPORT. Not part of `make test`: the public corpora are not in the tree.
CORPUS ?=
# Each corpus target has its own default report (a target-specific value:
# one global REPORT ?= per target would give both the first one's).
corpus-zarr: REPORT ?= corpus-zarr.md
corpus-zarr: interop-deps ## measure the Zarr bridge on a corpus of public stores: make corpus-zarr CORPUS=dir [REPORT=corpus-zarr.md]
	@test -n "$(CORPUS)" -a -d "$(CORPUS)" || { echo 'make corpus-zarr: CORPUS=dir names a directory of Zarr stores'; exit 2; }
	SCC_ZARR_CORPUS=$(abspath $(CORPUS)) SCC_ZARR_CORPUS_REPORT=$(abspath $(REPORT)) $(GO) test -count=1 -timeout 60m -run '^TestZarrCorpusMeasure$$' -v ./interop/zarr/

zstd-deps: ## install libzstd-dev, the system libzstd a TAGS=external_libzstd build links (Debian, as root), once
	@pkg-config --exists libzstd 2>/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libzstd-dev pkg-config; }

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

# ---- HDF5 interop: the cgo module interop/hdf5 (its own go.mod), so the
# main module stays pure Go (CGO_ENABLED=0 builds it).
# The filter plugins decode chunks compressed by filters libhdf5 itself lacks (LZ4, BZip2,
# Bitshuffle and LZF from bitshuffle, Blosc, ZFP); the bridge finds them in HDF5_PLUGIN_PATH, or
# in Debian's plugin directory when that is unset. Not hdf5-plugin-lzf: Debian 12's cannot be
# loaded (it lacks liblzf's symbols). python3-hdf5plugin lets h5py write such files in tests.
HDF5_PLUGINS = hdf5-filter-plugin bitshuffle hdf5-filter-plugin-blosc-serial hdf5-filter-plugin-zfp-serial python3-hdf5plugin
HDF5_DEPS = libhdf5-dev pkg-config hdf5-tools python3-h5py python3-numpy $(HDF5_PLUGINS)
HDF5_SIZE ?= 1GiB

interop-hdf5-deps: ## install libhdf5-dev, its filter plugins and the readers the HDF5 tests use (h5dump, h5py, hdf5plugin; Debian, as root)
	@dpkg -s $(HDF5_DEPS) >/dev/null 2>&1 || { apt-get update && apt-get install -y --no-install-recommends $(HDF5_DEPS); }

hdf5: ## build bin/scc-hdf5, the HDF5 export/import binary `scctl hdf5` runs (needs interop-hdf5-deps)
	cd interop/hdf5 && $(GO) build -o ../../bin/scc-hdf5 ./cmd/scc-hdf5

test-hdf5: ## vet and test interop/hdf5 under -race; files are checked by h5py and h5dump (a missing reader fails)
	cd interop/hdf5 && $(GO) vet ./... && $(GO) test -race -timeout 10m ./...

fuzz-hdf5: ## run every fuzz target of interop/hdf5 (the zlib wrapper inflating scc's raw deflate chunks, the LZ4 chunk reframing, the zstd/deflate chunks decoded without a plugin, the type mapping both ways) for FUZZTIME each
	cd interop/hdf5 && for p in $$($(GO) list ./...); do for t in $$($(GO) test -list '^Fuzz' $$p | grep '^Fuzz'); do $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$p || exit 1; done; done

# corpus-hdf5 measures the import over a directory of HDF5 files (public test
# corpora, not shipped): h5py's reading of every file against the bridge's
# whole-file import. Not part of test: CI has no corpora.
corpus-hdf5: REPORT ?= bin/corpus-hdf5.md
corpus-hdf5: ## measure the HDF5 import over CORPUS=dir against h5py; summary on stdout, the full report in REPORT (default bin/corpus-hdf5.md)
	@test -n "$(CORPUS)" || { echo 'usage: make corpus-hdf5 CORPUS=dir [REPORT=bin/corpus-hdf5.md]'; exit 2; }
	@mkdir -p $(dir $(abspath $(REPORT)))
	cd interop/hdf5 && SCC_HDF5_CORPUS=$(abspath $(CORPUS)) SCC_HDF5_CORPUS_REPORT=$(abspath $(REPORT)) $(GO) test -count=1 -run '^TestCorpusMeasure$$' -timeout 3h

bench-hdf5: ## export/import HDF5_SIZE of shuffle+zlib data beside h5py's copy (under flock /tmp/scc-bench.lock)
	cd interop/hdf5 && flock /tmp/scc-bench.lock $(GO) test -run '^$$' -bench BenchmarkExportImport -benchtime 1x -timeout 30m . -args -hdf5.size $(HDF5_SIZE)
