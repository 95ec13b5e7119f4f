#!/usr/bin/env python3
"""zarr-python peer for scc's bench suite (scenario "zarrbench").

The public Zarr benchmark's workload (github.com/zarrs/zarr_benchmarks): a
uint16 array of N^3 elements, value (g2 + g1^2/32 + g0^3) mod 65536 over the
global coordinates, chunks of C^3, stored uncompressed and with zstd at
level 3 (no checksum). That benchmark generates its array with zarrs at
level 0, zstd's default, which is 3; numcodecs 0.11 turns a level of 0 or
less into its own default, 1 (zstd.pyx: `if level <= 0: level =
DEFAULT_CLEVEL`), so this peer is given numcodecs.Zstd(level=3): the same
frames scc writes at engine.Zstd(3), and the round trip encodes at the same
level on both sides.

usage:
  zarrbench_peer.py gen DIR N C [CODEC...]
      writes DIR/raw.zarr and DIR/zstd.zarr (untimed; only those named
      when CODECs are given) and prints versions.
  zarrbench_peer.py read_all STORE N C
  zarrbench_peer.py read_chunks STORE N C CONCURRENCY
  zarrbench_peer.py read_random STORE N C CONCURRENCY
      reads every chunk alone in a random order (the same one scc's
      read_inner row uses: a permutation fixed by its seed is not shared,
      so the order is numpy's, seeded; any order of every chunk once).
  zarrbench_peer.py roundtrip STORE N C OUT
      times one row, then verifies every element the row produced (untimed;
      read_chunks reads every chunk again to verify it, at the same
      concurrency), and prints {"seconds", "maxrss_kib"} on its last line.
      maxrss_kib is the process's peak RSS (getrusage) at the end of the
      timed part, before verification allocates anything. The read rows
      read into destinations allocated and written before the timer (out=,
      one per thread), as scc's rows and the pread floor do.
"""
import json
import queue
import resource
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np


def chunk_values(ci, c):
    g0 = np.arange(ci[0] * c, ci[0] * c + c, dtype=np.uint64)
    g1 = np.arange(ci[1] * c, ci[1] * c + c, dtype=np.uint64)
    g2 = np.arange(ci[2] * c, ci[2] * c + c, dtype=np.uint64)
    v = (g2[None, None, :] + (g1 * g1 // 32)[None, :, None] + (g0 ** 3)[:, None, None]) % 65536
    return v.astype("<u2")


def chunk_indices(n, c):
    g = n // c
    return [(i, j, k) for i in range(g) for j in range(g) for k in range(g)]


def sl(ci, c):
    return tuple(slice(i * c, (i + 1) * c) for i in ci)


def check(got, ci, c):
    if not np.array_equal(got, chunk_values(ci, c)):
        raise SystemExit("zarrbench_peer: chunk %s differs from the expected values" % (ci,))


def dests(k, shape):
    """k destination arrays of shape with every page written, in a queue
    the reading threads take them from and give them back to."""
    q = queue.SimpleQueue()
    for _ in range(k):
        b = np.empty(shape, dtype="<u2")
        b.fill(1)
        q.put(b)
    return q


def maxrss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def versions():
    import numcodecs
    import zarr

    lib = ""
    try:
        from numcodecs import zstd as nz

        lib = "%d.%d.%d" % (nz.MAJOR_VERSION_NUMBER, nz.MINOR_VERSION_NUMBER, nz.MICRO_VERSION_NUMBER)
    except Exception:
        pass
    return {"version": zarr.__version__, "numcodecs": numcodecs.__version__, "libzstd": lib}


def main():
    import numcodecs
    import zarr

    op = sys.argv[1]
    if op == "gen":
        d, n, c = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        only = set(sys.argv[5:])
        for name, comp in (("raw", None), ("zstd", numcodecs.Zstd(level=3))):
            if only and name not in only:
                continue
            a = zarr.open(zarr.DirectoryStore("%s/%s.zarr" % (d, name)), mode="w", shape=(n, n, n),
                          chunks=(c, c, c), dtype="<u2", compressor=comp, fill_value=0)
            for ci in chunk_indices(n, c):
                a[sl(ci, c)] = chunk_values(ci, c)
        print(json.dumps(versions()))
        return

    store, n, c = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    a = zarr.open(zarr.DirectoryStore(store), mode="r")
    idx = chunk_indices(n, c)
    if op == "read_all":
        v = dests(1, (n, n, n)).get()
        t0 = time.perf_counter()
        a.get_basic_selection(Ellipsis, out=v)
        el = time.perf_counter() - t0
        rss = maxrss()
        for ci in idx:
            check(v[sl(ci, c)], ci, c)
    elif op in ("read_chunks", "read_random"):
        # read_random reads the same chunks one by one in a shuffled order.
        conc = int(sys.argv[5])
        order = list(idx)
        if op == "read_random":
            np.random.default_rng(12).shuffle(order)
        bufs = dests(conc, (c, c, c))

        def read(ci):
            b = bufs.get()
            a.get_basic_selection(sl(ci, c), out=b)
            bufs.put(b)

        t0 = time.perf_counter()
        if conc == 1:
            for ci in order:
                read(ci)
        else:
            with ThreadPoolExecutor(max_workers=conc) as ex:
                list(ex.map(read, order))
        el = time.perf_counter() - t0
        rss = maxrss()

        def verify(ci):
            check(a[sl(ci, c)], ci, c)

        with ThreadPoolExecutor(max_workers=conc) as ex:
            list(ex.map(verify, order))
    elif op == "roundtrip":
        out = zarr.open(zarr.DirectoryStore(sys.argv[5]), mode="w", shape=a.shape, chunks=a.chunks,
                        dtype=a.dtype, compressor=a.compressor, fill_value=0)

        def copy(ci):
            out[sl(ci, c)] = a[sl(ci, c)]

        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=2) as ex:
            list(ex.map(copy, idx))
        el = time.perf_counter() - t0
        rss = maxrss()
        back = zarr.open(zarr.DirectoryStore(sys.argv[5]), mode="r")
        for ci in idx:
            check(back[sl(ci, c)], ci, c)
    else:
        raise SystemExit("zarrbench_peer: unknown operation %r" % op)
    print(json.dumps({"seconds": el, "maxrss_kib": rss}))


if __name__ == "__main__":
    main()
