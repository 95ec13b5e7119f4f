"""The serve live interop test's xarray reader: xarray.open_zarr through
fsspec's HTTP filesystem, polled while a writer appends.

    python3 xrlive.py URL ARRAY

For each line read from stdin, opens the store at URL again (its
consolidated metadata) and prints one JSON line: the variable's shape and
its last frame (the last index along the first dimension) as hex, C order
little-endian."""
import json
import sys

import fsspec
import xarray as xr

url, name = sys.argv[1], sys.argv[2]
store = fsspec.get_mapper(url)
for _ in sys.stdin:
    v = xr.open_zarr(store, consolidated=True, mask_and_scale=False)[name]
    last = v[v.shape[0] - 1].values if v.shape[0] else None
    print(json.dumps({"shape": list(v.shape),
                      "last": "" if last is None else last.astype(last.dtype.newbyteorder("<")).tobytes().hex()}),
          flush=True)
