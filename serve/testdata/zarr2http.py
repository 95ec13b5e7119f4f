"""The serve interop test's Zarr v2 reader: zarr-python 2 through fsspec's
HTTP filesystem, as a notebook would open a served file.

    python3 zarr2http.py URL OUTDIR

Opens the store at URL with its consolidated metadata, writes each array's
elements (C order, little-endian) to OUTDIR/<i>.bin, and prints the tree as
JSON: the root's and groups' attributes, and each array's path, shape,
chunks, dtype and attributes. One array is also opened without the
consolidated metadata, reading its own .zarray."""
import json
import os
import sys

import fsspec
import zarr

url, out = sys.argv[1], sys.argv[2]
store = fsspec.get_mapper(url)
root = zarr.open_consolidated(store, mode="r")
result = {"attributes": dict(root.attrs), "groups": {}, "arrays": []}


def visit(path, node):
    if isinstance(node, zarr.Array):
        data = node[...]
        i = len(result["arrays"])
        with open(os.path.join(out, f"{i}.bin"), "wb") as f:
            f.write(data.astype(data.dtype.newbyteorder("<")).tobytes(order="C"))
        result["arrays"].append({
            "path": path, "shape": list(node.shape), "chunks": list(node.chunks),
            "dtype": node.dtype.str, "attributes": dict(node.attrs),
        })
    else:
        result["groups"][path] = dict(node.attrs)


root.visititems(visit)
# Without the consolidated metadata: the array's own documents.
first = result["arrays"][0]["path"]
plain = zarr.open_group(store, mode="r")[first]
result["plain"] = {"path": first, "shape": list(plain.shape),
                   "equal": plain[...].tobytes() == root[first][...].tobytes()}
print(json.dumps(result))
