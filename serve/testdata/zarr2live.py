"""The serve live interop test's reader: zarr-python 2 through fsspec's
HTTP filesystem, polled while a writer appends.

    python3 zarr2live.py URL ARRAY

For each line read from stdin, opens the store at URL again (its
consolidated metadata) and prints one JSON line: the array's shape and
its last frame (the last index along the first dimension) as hex, C order
little-endian."""
import json
import sys

import fsspec
import zarr

url, name = sys.argv[1], sys.argv[2]
store = fsspec.get_mapper(url)
for _ in sys.stdin:
    arr = zarr.open_consolidated(store, mode="r")[name]
    last = arr[arr.shape[0] - 1] if arr.shape[0] else None
    print(json.dumps({"shape": list(arr.shape),
                      "last": "" if last is None else last.astype(last.dtype.newbyteorder("<")).tobytes().hex()}),
          flush=True)
