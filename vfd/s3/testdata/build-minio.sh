#!/bin/sh
# Builds the pinned MinIO server that the S3 tests and `make minio-run` use,
# once, into a cache directory they reuse ($SCC_MINIO_DIR, default
# ~/.cache/scc/minio-<version>). `make minio` runs this, and `make test`
# (what .ci/run runs) depends on it.
#
# The version (vfd/s3/s3test/minio-version, which the Go harness embeds) is a
# module-proxy pseudo-version of MinIO's master branch: MinIO tags releases
# as RELEASE.<date>, which are not semantic versions, so the proxy serves its
# commits only as pseudo-versions. Its go.mod has no replace directives, so
# `go install module@version` accepts it, and it builds with go1.26. It
# supports conditional PUT (If-Match, If-None-Match), which the driver's
# commit protocol needs (FORMAT.md §16).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
MINIO_VERSION=$(cat "$here/../s3test/minio-version")
CACHE=${SCC_MINIO_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/scc/minio-$MINIO_VERSION}
if [ -x "$CACHE/minio" ]; then
	echo "$CACHE/minio"
	exit 0
fi
mkdir -p "$CACHE"
echo "building MinIO $MINIO_VERSION into $CACHE (several minutes on 2 cores)" >&2
GOBIN="$CACHE" GOFLAGS=-buildvcs=false nice -n 10 go install "github.com/minio/minio@$MINIO_VERSION" >&2
echo "$CACHE/minio"
