#!/usr/bin/env python3
"""Ingest peer for scc's bench suite (scenario "ingest").

Appends the same uint16 frames scc appends (read from a raw file written by
the Go side, so the data and therefore the compression work are identical)
to DATASETS datasets with deflate level 1, one frame per chunk, growing the
extent in batches of 32 frames and writing frames in the same interleaved
order as scc's writers take them. The time includes closing and an fsync of
everything written (scc's Flush syncs too). Prints one JSON object on its
last line.

usage: ingest_peer.py {h5py|zarr} FRAMES_BIN DATASETS FRAMES HEIGHT WIDTH OUT
"""
import json
import os
import sys
import time

import numpy as np

GROW = 32


def fsync_all(path):
    """fsync every file written (and the directories), as scc's Flush does,
    so that all three are timed to the same durability."""
    if os.path.isfile(path):
        paths = [path]
    else:
        paths = []
        for root, dirs, files in os.walk(path):
            paths += [os.path.join(root, f) for f in files]
            paths.append(root)
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def dir_size(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def main():
    kind, src = sys.argv[1], sys.argv[2]
    nds, nfr, h, w = (int(x) for x in sys.argv[3:7])
    out = sys.argv[7]
    frames = np.fromfile(src, dtype="<u2").reshape(nds, nfr, h, w)
    extent = [0] * nds
    t0 = time.perf_counter()
    if kind == "h5py":
        import h5py

        f = h5py.File(out, "w")
        dss = [
            f.create_dataset(
                "frames%03d" % d, shape=(0, h, w), maxshape=(None, h, w),
                chunks=(1, h, w), dtype="<u2", compression="gzip", compression_opts=1,
            )
            for d in range(nds)
        ]
        version = h5py.__version__ + " (HDF5 " + h5py.version.hdf5_version + ")"
    elif kind == "zarr":
        import numcodecs
        import zarr

        g = zarr.open_group(zarr.DirectoryStore(out), mode="w")
        dss = [
            g.create_dataset(
                "frames%03d" % d, shape=(0, h, w), chunks=(1, h, w), dtype="<u2",
                compressor=numcodecs.Zlib(level=1),
            )
            for d in range(nds)
        ]
        version = zarr.__version__
    else:
        raise SystemExit("unknown peer " + kind)
    for j in range(nds * nfr):
        d, fr = j % nds, j // nds
        if fr >= extent[d]:
            extent[d] = min(nfr, fr + GROW)
            dss[d].resize((extent[d], h, w))
        dss[d][fr] = frames[d, fr]
    if kind == "h5py":
        f.close()
    fsync_all(out)
    seconds = time.perf_counter() - t0
    print(json.dumps({
        "peer": kind, "version": version, "seconds": seconds,
        "bytes": int(frames.nbytes), "stored_bytes": dir_size(out),
    }))


if __name__ == "__main__":
    main()
