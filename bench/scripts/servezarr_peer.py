#!/usr/bin/env python3
"""zarr-python over HTTP for scc's bench suite (scenario "serve").

zarr-python 2 reads random chunks of the public Zarr benchmark's array
("a" in the store at URL: uint16, N^3, chunks of C^3) through fsspec's HTTP
filesystem, as a notebook reading a served file would, one chunk at a
time. Opening the store is not timed; each chunk read is checked against
the benchmark's formula (untimed).

usage:
  servezarr_peer.py URL N C COUNT SEED
      prints {"seconds", "chunks", "zarr", "fsspec"} on its last line.
"""
import json
import random
import sys
import time

import fsspec
import numpy as np
import zarr


def chunk_values(ci, c):
    g0 = np.arange(ci[0] * c, ci[0] * c + c, dtype=np.uint64)
    g1 = np.arange(ci[1] * c, ci[1] * c + c, dtype=np.uint64)
    g2 = np.arange(ci[2] * c, ci[2] * c + c, dtype=np.uint64)
    v = (g2[None, None, :] + (g1 * g1 // 32)[None, :, None] + (g0 ** 3)[:, None, None]) % 65536
    return v.astype("<u2")


def main():
    url, n, c, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    a = zarr.open_group(fsspec.get_mapper(url), mode="r")["a"]
    if a.shape != (n, n, n) or a.chunks != (c, c, c):
        raise SystemExit(f"unexpected array: shape {a.shape}, chunks {a.chunks}")
    g = n // c
    rng = random.Random(seed)
    picks = [(rng.randrange(g), rng.randrange(g), rng.randrange(g)) for _ in range(count)]
    got = []
    t0 = time.perf_counter()
    for ci in picks:
        got.append(a[ci[0] * c:(ci[0] + 1) * c, ci[1] * c:(ci[1] + 1) * c, ci[2] * c:(ci[2] + 1) * c])
    seconds = time.perf_counter() - t0
    for ci, v in zip(picks, got):
        if not np.array_equal(v, chunk_values(ci, c)):
            raise SystemExit(f"chunk {ci}: other values than the benchmark's")
    print(json.dumps({"seconds": seconds, "chunks": count, "zarr": zarr.__version__, "fsspec": fsspec.__version__}))


main()
