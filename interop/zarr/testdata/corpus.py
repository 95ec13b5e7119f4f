"""A small Zarr v2 corpus written by zarr-python at test time (Debian's
python3-zarr; run with /usr/bin/python3), for the import corpus test.

  corpus.py STORE OUTDIR
  corpus.py draft-v3 STORE     a store in the draft of Zarr v3 zarr-python 2
                               writes (ZARR_V3_EXPERIMENTAL_API=1)
  corpus.py dump OUTDIR ARRAY...
                               the corpus measurement's reference reading:
                               every Zarr v2 array directory ARRAY as
                               zarr-python reads it, in scc's normal form
                               (see dump below)

writes one store holding nested groups of arrays in C and Fortran order,
with zlib, zstd, lz4, gzip, blosc and no compressor, shuffle and delta
filters, fill values and unwritten chunks, big-endian and edge chunks, and
some data types scc does not hold; then reads every array back with
zarr-python and writes its elements (C order, little-endian) to
OUTDIR/<i>.bin. Prints a JSON list: {path, dtype, order, compressor,
filters, dump} per array.
"""
import base64
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


def cover(dt, off, m):
    if dt.fields is not None:
        for f in dt.fields.values():
            cover(f[0], off + f[1], m)
    elif dt.subdtype is not None:
        b, shp = dt.subdtype
        for i in range(int(np.prod(shp))):
            cover(b, off + i * b.itemsize, m)
    elif dt.kind != "V":
        m[off:off + dt.itemsize] = True


def normal(a, fill):
    """An array's elements in scc's normal form: ("bytes", little-endian C
    order, structured padding zeroed, datetimes as their int64) or
    ("vlen", one bytes per element: str as UTF-8, bytes as they are,
    arrays little-endian; an object element that is None or the array's
    fill value, as zarr-python reads unwritten elements, is the empty
    sequence, scc's variable-length fill)."""
    a = np.asarray(a)
    if a.dtype.kind == "U" or a.dtype.kind == "O":
        out = []
        for v in a.reshape(-1):
            if isinstance(v, str):
                out.append(v.encode("utf-8"))
            elif isinstance(v, (bytes, np.bytes_)):
                out.append(bytes(v))
            elif isinstance(v, np.ndarray):
                out.append(le(v))
            elif v is None or (fill is not None and not isinstance(fill, (str, bytes)) and v == fill):
                out.append(b"")
            else:
                raise TypeError("object element of type %s" % type(v).__name__)
        return "vlen", out
    if a.dtype.kind in "Mm":
        a = a.view("<i8") if a.dtype.byteorder != ">" else a.view(">i8")
    a = a.astype(a.dtype.newbyteorder("<"))
    b = np.frombuffer(np.ascontiguousarray(a).tobytes(), np.uint8).copy()
    if a.dtype.fields is not None and b.size:
        m = np.zeros(a.dtype.itemsize, bool)
        cover(a.dtype, 0, m)
        b = b.reshape(-1, a.dtype.itemsize)
        b[:, ~m] = 0
    return "bytes", b.tobytes()


def dump(out, dirs):
    """Reads every array directory with zarr-python; per array one JSON
    record {dir, ok, error, dtype, shape, form, dump}; the dump file holds
    the bytes, or for "vlen" one base64 line per element."""
    res = []
    for i, d in enumerate(dirs):
        r = {"dir": d, "ok": False}
        try:
            a = zarr.open_array(d, mode="r")
            r["dtype"] = str(a.dtype)
            r["shape"] = list(a.shape)
            form, data = normal(a[...], a.fill_value)
            path = os.path.join(out, "%d.bin" % i)
            with open(path, "wb") as f:
                if form == "vlen":
                    f.write(b"".join(base64.b64encode(v) + b"\n" for v in data))
                else:
                    f.write(data)
            r.update(ok=True, form=form, dump=path)
        except Exception as e:  # the reader's refusal is the measurement
            r["error"] = "%s: %s" % (type(e).__name__, e)
        res.append(r)
    print(json.dumps(res))


def draft_v3(store):
    g = zarr.open_group(store, mode="w", zarr_version=3, path="g")
    a = g.create_dataset("x", shape=(5,), chunks=(2,), dtype="<i4")
    a[:] = np.arange(5)


if __name__ == "__main__":
    if sys.argv[1] == "draft-v3":
        draft_v3(sys.argv[2])
    elif sys.argv[1] == "dump":
        dump(sys.argv[2], sys.argv[3:])
    else:
        main(sys.argv[1], sys.argv[2])
