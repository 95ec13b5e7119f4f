"""The interop tests' Zarr v2 reader and writer: zarr-python (Debian's
python3-zarr, installed by `make interop-deps`; run with /usr/bin/python3).

  zarr2.py read STORE OUTDIR PATH...   each array's elements (C order,
                                       little-endian) to OUTDIR/<i>.bin;
                                       metadata as JSON on stdout
  zarr2.py write STORE OUTDIR          writes a fixed set of arrays with
                                       zarr-python, elements to OUTDIR/<name>.bin
  zarr2.py copy SRC DST                zarr.copy_all from one store to another
                                       (the benchmark's baseline); prints seconds
"""
import json
import os
import sys
import time

import numcodecs
import numpy as np
import zarr


def le(a):
    return np.ascontiguousarray(a.astype(a.dtype.newbyteorder("<"))).tobytes()


def jsonable(v):
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return str(v)
    if isinstance(v, complex):
        return [jsonable(v.real), jsonable(v.imag)]
    if isinstance(v, bytes):
        return list(v)
    if isinstance(v, np.generic):
        return jsonable(v.item())
    return v


def read(store, out, paths):
    root = zarr.open_group(store, mode="r")
    res = {"attributes": dict(root.attrs), "arrays": []}
    for i, p in enumerate(paths):
        a = root[p]
        with open(os.path.join(out, "%d.bin" % i), "wb") as f:
            f.write(le(a[...]))
        res["arrays"].append({
            "path": p, "dtype": a.dtype.str, "shape": list(a.shape), "chunks": list(a.chunks),
            "fill_value": jsonable(a.fill_value), "attributes": dict(a.attrs),
            "compressor": a.compressor.get_config() if a.compressor else None,
            "filters": [f.get_config() for f in (a.filters or [])],
        })
    print(json.dumps(res))


def write(store, out):
    root = zarr.open_group(store, mode="w")
    root.attrs.update({"origin": "zarr-python", "version": zarr.__version__, "list": [1, 2, 3]})
    specs = [
        ("zlib_shuffle", "<u2", (370, 110), (80, 40), 7, [numcodecs.Shuffle(elementsize=2)], numcodecs.Zlib(level=3)),
        ("zstd", "<f8", (2000,), (600,), np.nan, None, numcodecs.Zstd(level=3)),
        ("lz4", "<i4", (50, 60, 7), (20, 30, 4), -3, None, numcodecs.LZ4()),
        ("gzip", "|u1", (1000,), (330,), 9, None, numcodecs.GZip(level=5)),
        ("raw_be", ">i2", (13,), (5,), 0, None, None),
        ("group/nested", "<f4", (90, 90), (40, 40), 0.5, [numcodecs.Shuffle(elementsize=4)], numcodecs.Zlib(level=1)),
    ]
    for name, dtype, shape, chunks, fill, filters, comp in specs:
        a = root.create_dataset(name, shape=shape, chunks=chunks, dtype=dtype, fill_value=fill,
                                filters=filters, compressor=comp)
        dt = np.dtype(dtype)
        # Smooth data, so that every chunk compresses (scc keeps a
        # compressed chunk only if it is smaller than the raw one).
        n = int(np.prod(shape))
        if dt.kind == "f":
            data = (np.arange(n) % 1000 * 0.25).reshape(shape).astype(dt)
        else:
            data = (np.arange(n) // 3 % 100).reshape(shape).astype(dt)
        # Leave the first chunk unwritten (it reads as the fill value).
        sl = tuple(slice(min(c, s), s) for c, s in zip(chunks, shape))
        a[sl] = data[sl]
        a.attrs.update({"units": "K", "scale": 0.25, "name": name})
        with open(os.path.join(out, name.replace("/", "_") + ".bin"), "wb") as f:
            f.write(le(a[...]))


def copy(src, dst):
    s = zarr.open_group(src, mode="r")
    d = zarr.open_group(dst, mode="w")
    t = time.perf_counter()
    zarr.copy_all(s, d)
    print(time.perf_counter() - t)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "read":
        read(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif cmd == "write":
        write(sys.argv[2], sys.argv[3])
    elif cmd == "copy":
        copy(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: zarr2.py read|write|copy ...")
