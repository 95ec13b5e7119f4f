#!/usr/bin/env python3
"""Random-read peer for scc's bench suite (scenario "randread").

Writes DATASETS datasets of FRAMES frames of SIDE x SIDE uint16 (one frame
per chunk, deflate level 1) from the raw frames the Go side wrote (untimed),
reopens them with a chunk cache of BUDGET bytes in total, and times reading
the (dataset, frame) sequence in SEQ (pairs of little-endian uint32), one
whole frame per read. Prints one JSON object on its last line.

h5py: HDF5 gives every open dataset its own chunk cache, so the budget is
split evenly: rdcc_nbytes = BUDGET / DATASETS.
zarr: one zarr.LRUStoreCache of BUDGET bytes over the directory store (it
caches encoded chunks; zarr-python 2 has no decoded-chunk cache).

usage: randread_peer.py {h5py|zarr} FRAMES_BIN DATASETS FRAMES SIDE SEQ BUDGET OUT
"""
import json
import sys
import time

import numpy as np


def main():
    kind, src = sys.argv[1], sys.argv[2]
    nds, nfr, side = (int(x) for x in sys.argv[3:6])
    seq = np.fromfile(sys.argv[6], dtype="<u4").reshape(-1, 2)
    budget = int(sys.argv[7])
    out = sys.argv[8]
    frames = np.fromfile(src, dtype="<u2").reshape(nds, nfr, side, side)
    names = ["frames%03d" % d for d in range(nds)]
    if kind == "h5py":
        import h5py

        with h5py.File(out, "w") as f:
            for d in range(nds):
                f.create_dataset(names[d], data=frames[d], chunks=(1, side, side),
                                 compression="gzip", compression_opts=1)
        version = h5py.__version__ + " (HDF5 " + h5py.version.hdf5_version + ")"
        f = h5py.File(out, "r", rdcc_nbytes=max(budget // nds, 1), rdcc_nslots=1021, rdcc_w0=0.75)
        arrs = [f[n] for n in names]
    elif kind == "zarr":
        import numcodecs
        import zarr

        g = zarr.open_group(zarr.DirectoryStore(out), mode="w")
        for d in range(nds):
            g.create_dataset(names[d], data=frames[d], chunks=(1, side, side),
                             compressor=numcodecs.Zlib(level=1))
        version = zarr.__version__
        store = zarr.LRUStoreCache(zarr.DirectoryStore(out), max_size=budget)
        g = zarr.open_group(store, mode="r")
        arrs = [g[n] for n in names]
    else:
        raise SystemExit("unknown peer " + kind)
    del frames
    t0 = time.perf_counter()
    total = 0
    for d, fr in seq:
        a = arrs[d][int(fr)]
        total += a.nbytes
    seconds = time.perf_counter() - t0
    print(json.dumps({"peer": kind, "version": version, "seconds": seconds,
                      "bytes": int(total), "reads": int(len(seq))}))


if __name__ == "__main__":
    main()
