"""A small Zarr v2 corpus written by zarr-python at test time (Debian's
python3-zarr; run with /usr/bin/python3), for the import corpus test.

  corpus.py STORE OUTDIR
  corpus.py draft-v3 STORE     a store in the draft of Zarr v3 zarr-python 2
                               writes (ZARR_V3_EXPERIMENTAL_API=1)

writes one store holding nested groups of arrays in C and Fortran order,
with zlib, zstd, lz4, gzip, blosc and no compressor, shuffle and delta
filters, fill values and unwritten chunks, big-endian and edge chunks, and
some data types scc does not hold; then reads every array back with
zarr-python and writes its elements (C order, little-endian) to
OUTDIR/<i>.bin. Prints a JSON list: {path, dtype, order, compressor,
filters, dump} per array.
"""
import json
import os
import sys

import numcodecs
import numpy as np
import zarr


def le(a):
    return np.ascontiguousarray(a.astype(a.dtype.newbyteorder("<"))).tobytes()


def main(store, out):
    root = zarr.open_group(store, mode="w")
    root.attrs.update({"corpus": "zarr-python " + zarr.__version__})
    comps = {
        "none": None,
        "zlib": numcodecs.Zlib(level=1),
        "zstd": numcodecs.Zstd(level=1),
        "lz4": numcodecs.LZ4(),
        "gzip": numcodecs.GZip(level=1),
        "blosc": numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE),
    }
    dtypes = ["<u2", ">i4", "<f8", "|u1", "<i8", ">f4"]
    shapes = [((37,), (10,)), ((13, 17), (5, 4)), ((6, 7, 9), (4, 3, 5))]
    made = []
    k = 0
    for order in ("C", "F"):
        for cname, comp in comps.items():
            for si, (shape, chunks) in enumerate(shapes):
                dt = np.dtype(dtypes[k % len(dtypes)])
                k += 1
                grp = root.require_group("order_%s/%s" % (order, cname))
                name = "a%d_%s" % (si, dt.str.replace("<", "le").replace(">", "be").replace("|", ""))
                fill = {"u": 7, "i": -3, "f": 0.5}[dt.kind]
                filters = [numcodecs.Shuffle(elementsize=dt.itemsize)] if k % 4 == 0 else None
                sep = "/" if k % 5 == 0 else "."
                a = grp.create_dataset(name, shape=shape, chunks=chunks, dtype=dt, order=order,
                                       fill_value=fill, compressor=comp, filters=filters,
                                       dimension_separator=sep)
                n = int(np.prod(shape))
                data = (np.arange(n) % 251).reshape(shape).astype(dt)
                # Leave the first chunk unwritten: it reads as the fill.
                sl = tuple(slice(min(c, s), s) for c, s in zip(chunks, shape))
                a[sl] = data[sl]
                a.attrs["units"] = "K"
                made.append(a)
    # Odd types: bool, complex, unicode (as variable-length strings),
    # structured (as compounds), float16 and delta are held.
    odd = root.require_group("odd")
    made.append(odd.create_dataset("complex", shape=(4,), chunks=(2,), dtype="<c8", compressor=None))
    made.append(odd.create_dataset("bool", shape=(4,), chunks=(2,), dtype="|b1", compressor=None))
    made.append(odd.create_dataset("unicode", shape=(4,), chunks=(2,), dtype="<U3", compressor=None))
    made.append(odd.create_dataset("structured", shape=(4,), chunks=(2,), dtype=[("x", "<i4"), ("y", "<f4")], compressor=None))
    made.append(odd.create_dataset("delta", shape=(4,), chunks=(2,), dtype="<i4", filters=[numcodecs.Delta(dtype="<i4")], compressor=None))
    made.append(odd.create_dataset("float16", shape=(4,), chunks=(2,), dtype="<f2", compressor=None))
    for a in made[-6:]:
        a[...] = 1
    res = []
    for i, a in enumerate(made):
        dump = os.path.join(out, "%d.bin" % i)
        if a.dtype.kind in "uifbcUV":
            with open(dump, "wb") as f:
                f.write(le(zarr.open_array(os.path.join(store, a.path), mode="r")[...]))
        res.append({"path": a.path, "dtype": str(a.dtype), "order": a.order,
                    "compressor": a.compressor.codec_id if a.compressor else "none",
                    "filters": [f.codec_id for f in (a.filters or [])], "dump": dump})
    print(json.dumps(res))


def draft_v3(store):
    g = zarr.open_group(store, mode="w", zarr_version=3, path="g")
    a = g.create_dataset("x", shape=(5,), chunks=(2,), dtype="<i4")
    a[:] = np.arange(5)


if __name__ == "__main__":
    if sys.argv[1] == "draft-v3":
        draft_v3(sys.argv[2])
    else:
        main(sys.argv[1], sys.argv[2])
