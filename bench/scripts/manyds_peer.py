#!/usr/bin/env python3
"""Many-datasets peer for scc's bench suite (scenario "manyds").

Creates N small appendable chunked datasets (uint16, shape (16, 64),
maxshape (None, 64), chunks (16, 64), one chunk written each), reopens the
file, and measures the resident set size that opening all of them (handles
kept, nothing read) adds, per dataset: what HDF5 plus h5py's objects cost.
Prints one JSON object on its last line.

usage: manyds_peer.py N OUT
"""
import gc
import json
import os
import sys

import h5py
import numpy as np


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main():
    n, out = int(sys.argv[1]), sys.argv[2]
    names = ["series%06d" % i for i in range(n)]
    buf = np.zeros((16, 64), dtype="<u2")
    with h5py.File(out, "w") as f:
        for i, name in enumerate(names):
            ds = f.create_dataset(name, shape=(16, 64), maxshape=(None, 64),
                                  chunks=(16, 64), dtype="<u2")
            buf[0, 0] = i & 0xFF
            ds[...] = buf
    f = h5py.File(out, "r")
    gc.collect()
    before = rss()
    handles = [f[name] for name in names]
    gc.collect()
    after = rss()
    per = (after - before) / n
    print(json.dumps({"peer": "h5py",
                      "version": h5py.__version__ + " (HDF5 " + h5py.version.hdf5_version + ")",
                      "datasets": n, "bytes_per_dataset": per, "bytes": after - before,
                      "seconds": 0}))
    del handles
    f.close()


if __name__ == "__main__":
    main()
