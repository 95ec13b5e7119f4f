"""Writes Blosc frames for the decoder's tests, compressed by the c-blosc
that numcodecs uses: numcodecs' Blosc codec for what zarr-python writes, and
the same library through ctypes for frames numcodecs' API cannot ask for
(sizes that are not a whole number of elements, forced split modes).

usage: gen.py OUTDIR [bench]
("bench": only a few large frames, one per compressor, for the benchmark)
Writes OUTDIR/cases.bin, each case's data followed by its frame, and
OUTDIR/manifest.json, the list of cases: parameters and where the data
(raw, nbytes long) and the frame (frame, cbytes long) start in cases.bin.
"""
import ctypes
import ctypes.util
import json
import os
import sys

import numpy as np
from numcodecs import blosc

out = sys.argv[1]
rng = np.random.default_rng(20261126)
cases = []
SHUFFLES = {"noshuffle": blosc.NOSHUFFLE, "shuffle": blosc.SHUFFLE, "bitshuffle": blosc.BITSHUFFLE}
CNAMES = blosc.list_compressors()


def data(kind, nbytes, ts):
    if kind == "random":
        return rng.integers(0, 256, nbytes, dtype=np.uint8).tobytes()
    if kind == "zeros":
        return bytes(nbytes)
    if kind == "far":  # a repeat 25000 bytes back: BloscLZ's 16-bit distances
        r = rng.integers(0, 256, 5000, dtype=np.uint8).tobytes()
        return (r + bytes(20000) + r + bytes(nbytes))[:nbytes]
    if kind == "runs":  # long matches, short matches, literals
        v = np.repeat(rng.integers(0, 6, nbytes // 37 + 1), 37)[:nbytes].astype(np.uint8)
        v[::101] = rng.integers(0, 256, len(v[::101]), dtype=np.uint8)
        return v.tobytes()
    # smooth: element k is 1000+3k, little-endian, in ts bytes
    nel = nbytes // ts + 1
    b = np.zeros((nel, max(ts, 8)), np.uint8)
    b[:, :8] = (np.arange(nel, dtype=np.uint64) * 3 + 1000).view(np.uint8).reshape(-1, 8)
    return b[:, :ts].tobytes()[:nbytes]


bundle = open(os.path.join(out, "cases.bin"), "wb")


def add(name, raw, frame, **params):
    # Only frames numcodecs reads back: c-blosc writes some it cannot read
    # (BLOSC_ALWAYS_SPLIT with more than 16 bytes per element).
    if raw and bytes(blosc.decompress(frame)) != raw:
        sys.exit("%s: numcodecs does not read its own frame back" % name)
    params.update(name=name, nbytes=len(raw), cbytes=len(frame), raw=bundle.tell())
    bundle.write(raw)
    params["frame"] = bundle.tell()
    bundle.write(frame)
    cases.append(params)


def codec(raw, ts, cname, clevel, shuffle, blocksize=0):
    """numcodecs' own path: the element size is the array's item size."""
    arr = np.frombuffer(raw, dtype="V%d" % ts) if ts > 1 else np.frombuffer(raw, np.uint8)
    return bytes(blosc.Blosc(cname=cname, clevel=clevel, shuffle=SHUFFLES[shuffle], blocksize=blocksize).encode(arr))


def numcodecs_case(kind, nbytes, ts, cname, clevel, shuffle, blocksize=0):
    nbytes -= nbytes % ts
    raw = data(kind, nbytes, ts)
    name = "nc-%s-%s-%s-c%d-t%d-n%d-b%d" % (cname, shuffle, kind, clevel, ts, nbytes, blocksize)
    add(name, raw, codec(raw, ts, cname, clevel, shuffle, blocksize),
        cname=cname, clevel=clevel, shuffle=shuffle, typesize=ts, blocksize=blocksize)


if sys.argv[2:] == ["bench"]:
    for cname in CNAMES:
        numcodecs_case("smooth", 4 << 20, 4, cname, 5, "shuffle")
        numcodecs_case("runs", 4 << 20, 4, cname, 5, "bitshuffle")
    bundle.close()
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(cases, f)
    sys.exit(0)

# Every compressor x shuffle x element size, from one element to many blocks.
for cname in CNAMES:
    for shuffle in SHUFFLES:
        for ts in (1, 2, 3, 4, 5, 8, 16, 17, 33):
            for nbytes in (ts, 20 * ts, 127, 128, 1000, 70000):
                numcodecs_case("smooth", max(nbytes, ts), ts, cname, 5, shuffle)
            numcodecs_case("random", 1000, ts, cname, 5, shuffle)
            numcodecs_case("runs", 20000, ts, cname, 5, shuffle)
        for ts in (1, 4, 17):  # incompressible: streams stored as they are, or the frame memcpyed
            numcodecs_case("random", 70000, ts, cname, 5, shuffle)
        # clevel 0 (memcpyed), the fastest and the strongest levels.
        for clevel in (0, 1, 9):
            numcodecs_case("smooth", 100000, 4, cname, clevel, shuffle)
            numcodecs_case("runs", 100000, 1, cname, clevel, shuffle)
        # Many small blocks and a short last block.
        for blocksize in (256, 1000, 4096):
            numcodecs_case("smooth", 50003, 4, cname, 5, shuffle, blocksize)
            numcodecs_case("runs", 50001, 3, cname, 5, shuffle, blocksize)
    # Several MB, many default-sized blocks.
    numcodecs_case("smooth", 1 << 20, 8, cname, 5, "shuffle")
    numcodecs_case("runs", 1 << 20, 2, cname, 9, "bitshuffle")
    numcodecs_case("zeros", 1 << 20, 4, cname, 5, "noshuffle")
    for clevel in (5, 9):
        numcodecs_case("far", 60000, 1, cname, clevel, "noshuffle", 65536)

# An empty buffer.
add("nc-empty", b"", codec(b"", 1, "lz4", 5, "shuffle"), cname="lz4", clevel=5, shuffle="shuffle", typesize=1, blocksize=0)

# The library numcodecs links, called directly.
lib = ctypes.CDLL(ctypes.util.find_library("blosc") or "libblosc.so.1")
lib.blosc_init()
SPLIT = {"always": 1, "never": 2, "auto": 3, "forward": 4}  # BLOSC_*_SPLIT


def raw_case(kind, nbytes, ts, cname, clevel, shuffle, blocksize=0, split="forward"):
    raw = data(kind, nbytes, ts)
    dest = ctypes.create_string_buffer(nbytes + 16)
    lib.blosc_set_splitmode(SPLIT[split])
    n = lib.blosc_compress_ctx(clevel, SHUFFLES[shuffle], ts, ctypes.c_size_t(nbytes), raw, dest,
                               ctypes.c_size_t(len(dest)), cname.encode(), ctypes.c_size_t(blocksize), 1)
    lib.blosc_set_splitmode(SPLIT["forward"])
    if n <= 0:
        sys.exit("blosc_compress_ctx %s: %d" % (cname, n))
    name = "lib-%s-%s-%s-c%d-t%d-n%d-b%d-%s" % (cname, shuffle, kind, clevel, ts, nbytes, blocksize, split)
    add(name, raw, dest.raw[:n], cname=cname, clevel=clevel, shuffle=shuffle, typesize=ts, blocksize=blocksize)


for cname in CNAMES:
    for shuffle in SHUFFLES:
        # Sizes that are not a whole number of elements: the bytes after the
        # last element of a block are not shuffled.
        for ts in (2, 4, 7, 8):
            for nbytes in (131, 1001, 4099, 20003):
                raw_case("smooth", nbytes, ts, cname, 5, shuffle)
            raw_case("smooth", 10007, ts, cname, 5, shuffle, blocksize=1000)
        # Element counts that are not a multiple of 8: bit shuffle copies.
        raw_case("smooth", 4 * 1003, 4, cname, 5, shuffle)
        for split in SPLIT:
            raw_case("smooth", 20000, 4, cname, 5, shuffle, split=split)
            raw_case("runs", 40000, 16, cname, 5, shuffle, split=split)
            if split != "always":  # c-blosc splits then, but does not read it back
                raw_case("runs", 40000, 17, cname, 5, shuffle, split=split)
        raw_case("smooth", 100000, 255, cname, 5, shuffle)

bundle.close()
with open(os.path.join(out, "manifest.json"), "w") as f:
    json.dump(cases, f)
