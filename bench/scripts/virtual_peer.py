#!/usr/bin/env python3
"""Virtual-dataset peer for scc's bench suite (scenario "virtual").

Writes the frames scc's writer processes wrote (read from a raw file the Go
side wrote, in frame order) into WRITERS HDF5 files the way they did: file
i holds frames i, i+WRITERS, ... as its frames 0, 1, ..., one frame per
chunk, shuffle + gzip level 1. Then builds an HDF5 virtual dataset over
them with h5py's VirtualLayout, frame g mapped to frame g // WRITERS of
file g % WRITERS (a strided mapping), and times reading the whole virtual
dataset in one read, PASSES times, each opening the file anew. Checks the
data read against the frames. Prints one JSON object on its last line.

usage: virtual_peer.py FRAMES_BIN WRITERS FRAMES_PER_WRITER HEIGHT WIDTH PASSES OUTDIR
"""
import json
import os
import statistics
import sys
import time

import numpy as np


def main():
    src = sys.argv[1]
    nw, per, h, w, passes = (int(x) for x in sys.argv[2:7])
    out = sys.argv[7]
    import h5py

    os.makedirs(out, exist_ok=True)
    total = nw * per
    frames = np.fromfile(src, dtype="<u2").reshape(total, h, w)
    names = []
    for i in range(nw):
        name = os.path.join(out, "w%d.h5" % i)
        with h5py.File(name, "w") as f:
            f.create_dataset("frames", data=frames[i::nw], maxshape=(None, h, w),
                             chunks=(1, h, w), shuffle=True, compression="gzip", compression_opts=1)
        names.append(name)
    layout = h5py.VirtualLayout(shape=(total, h, w), dtype="<u2", maxshape=(None, h, w))
    for i, name in enumerate(names):
        vs = h5py.VirtualSource(name, "frames", shape=(per, h, w))
        layout[i::nw] = vs
    vname = os.path.join(out, "v.h5")
    with h5py.File(vname, "w") as f:
        f.create_virtual_dataset("frames", layout, fillvalue=0)
    times = []
    verified = True
    for _ in range(passes):
        t0 = time.perf_counter()
        with h5py.File(vname, "r") as f:
            data = f["frames"][...]
        times.append(time.perf_counter() - t0)
        verified = verified and np.array_equal(data, frames)
    t = statistics.median(times)
    print(json.dumps({"version": h5py.__version__, "read_mibps": frames.nbytes / (1 << 20) / t, "verified": bool(verified)}))


if __name__ == "__main__":
    main()
