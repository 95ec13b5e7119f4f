// The serve interop test's Zarr v3 reader: zarrita over HTTP (FetchStore),
// as a browser page would read a served file. Run with the module
// resolution of interop/zarr/testdata/node (node --input-type=module -e).
//
//   URL OUTDIR PATH...   each array's elements, C order little-endian, to
//                        OUTDIR/<i>.bin; metadata as JSON on stdout, and
//                        for an array zarrita cannot read, its error
import * as zarr from "zarrita";
import FetchStore from "@zarrita/storage/fetch";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

const [url, out, ...paths] = process.argv.slice(1);
const store = new FetchStore(url);
const root = await zarr.open(zarr.root(store), { kind: "group" });
const result = { attributes: root.attrs, arrays: [] };
for (const [i, p] of paths.entries()) {
  try {
    const arr = await zarr.open(zarr.root(store).resolve(p), { kind: "array" });
    const chunk = await zarr.get(arr);
    const d = chunk.data;
    writeFileSync(join(out, `${i}.bin`), Buffer.from(d.buffer, d.byteOffset, d.byteLength));
    result.arrays.push({ path: p, dtype: arr.dtype, shape: arr.shape, chunks: arr.chunks, attributes: arr.attrs });
  } catch (e) {
    result.arrays.push({ path: p, error: String(e) });
  }
}
console.log(JSON.stringify(result, (k, v) => (typeof v === "bigint" ? v.toString() : v)));
