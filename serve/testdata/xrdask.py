"""The serve interop test's xarray and dask readers, through fsspec's HTTP
filesystem, as a notebook would open a served file.

    python3 xrdask.py URL OUTDIR NAME...

For each dataset NAME: dask.array.from_zarr reads it (computed), written
to OUTDIR/<i>.dask.bin; xarray.open_zarr opens its group with the
consolidated metadata and reads it as a variable, written to
OUTDIR/<i>.xr.bin (C order, little-endian). Prints per dataset the shapes
each saw, the variable's attributes (xarray's own _ARRAY_DIMENSIONS taken
out, and _FillValue, which xarray adds from the fill value, given apart as
its repr) and its dimension names, as JSON."""
import json
import os
import sys

import dask.array as da
import fsspec
import xarray as xr

url, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
store = fsspec.get_mapper(url)
result = []


def write(path, data):
    with open(path, "wb") as f:
        f.write(data.astype(data.dtype.newbyteorder("<")).tobytes(order="C"))


groups = {}
for i, name in enumerate(names):
    group, _, var = name.rpartition("/")
    a = da.from_zarr(store, component=name)
    write(os.path.join(out, f"{i}.dask.bin"), a.compute())
    if group not in groups:
        groups[group] = xr.open_zarr(store, group=group or None, consolidated=True, mask_and_scale=False)
    v = groups[group][var]
    write(os.path.join(out, f"{i}.xr.bin"), v.values)
    attrs = dict(v.attrs)
    fill = attrs.pop("_FillValue", None)
    result.append({"path": name, "dask_shape": list(a.shape), "xr_shape": list(v.shape),
                   "dims": list(v.dims), "attributes": attrs, "fill": repr(fill), "chunks": [c[0] if c else 0 for c in v.chunks or []]})


def plain(o):
    # numpy scalars and arrays xarray puts in attributes (_FillValue)
    return o.tolist() if hasattr(o, "tolist") else str(o)


print(json.dumps(result, default=plain))
