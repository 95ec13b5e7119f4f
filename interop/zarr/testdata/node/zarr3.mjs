// The interop tests' Zarr v3 reader and writer: zarrita, the JavaScript
// Zarr implementation (installed by `make interop-deps`).
//
//   node zarr3.mjs read STORE OUTDIR PATH...   each array's elements, C order
//                                              little-endian, to OUTDIR/<i>.bin;
//                                              metadata as JSON on stdout
//   node zarr3.mjs dump OUTDIR ARRAY...         the corpus measurement's reference
//                                              reading: every Zarr v3 array
//                                              directory ARRAY in scc's normal
//                                              form (see dump below)
//   node zarr3.mjs write STORE OUTDIR           writes a fixed set of arrays
//                                              with zarrita and their elements
//                                              to OUTDIR/<name>.bin
import * as zarr from "zarrita";
import FileSystemStore from "@zarrita/storage/fs";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

function bytesOf(data) {
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

async function read(storePath, out, paths) {
  const store = new FileSystemStore(storePath);
  const root = await zarr.open(zarr.root(store), { kind: "group" });
  const result = { attributes: root.attrs, arrays: [] };
  for (const [i, p] of paths.entries()) {
    const arr = await zarr.open(zarr.root(store).resolve(p), { kind: "array" });
    const chunk = await zarr.get(arr);
    // A zero-dimensional array reads as its one value.
    const data = arr.shape.length === 0 ? scalarArray(arr.dtype, chunk) : chunk.data;
    writeFileSync(join(out, `${i}.bin`), bytesOf(data));
    result.arrays.push({
      path: p, dtype: arr.dtype, shape: arr.shape, chunks: arr.chunks,
      attributes: arr.attrs,
    });
  }
  console.log(JSON.stringify(result, (k, v) => (typeof v === "bigint" ? v.toString() : v)));
}

async function write(storePath, out) {
  const store = new FileSystemStore(storePath);
  const root = await zarr.create(zarr.root(store), { attributes: { origin: "zarrita", n: 3 } });
  const specs = [
    { name: "f64", dtype: "float64", shape: [70, 50], chunks: [30, 20], ctor: Float64Array, fill: 1.5, codecs: [] },
    { name: "u16", dtype: "uint16", shape: [1000], chunks: [400], ctor: Uint16Array, fill: 0,
      codecs: [{ name: "numcodecs.shuffle", configuration: { elementsize: 2 } }] },
    { name: "grp/i32", dtype: "int32", shape: [30, 30, 30], chunks: [20, 20, 20], ctor: Int32Array, fill: -1,
      codecs: [{ name: "zstd", configuration: { level: 1, checksum: false } }] },
  ];
  for (const s of specs) {
    const arr = await zarr.create(root.resolve(s.name), {
      shape: s.shape, chunkShape: s.chunks, dtype: s.dtype, fillValue: s.fill,
      codecs: [{ name: "bytes", configuration: { endian: "little" } }, ...s.codecs],
      attributes: { units: "m", scale: 0.5 },
    });
    const n = s.shape.reduce((a, b) => a * b, 1);
    const data = new s.ctor(n);
    for (let i = 0; i < n; i++) data[i] = s.dtype.startsWith("float") ? (i % 1000) * 0.25 - 3 : Math.floor(i / 3) % 100 - (s.dtype.startsWith("int") ? 50 : 0);
    await zarr.set(arr, null, { data, shape: s.shape, stride: strides(s.shape) });
    writeFileSync(join(out, `${s.name.replaceAll("/", "_")}.bin`), bytesOf(data));
  }
}

// dump reads every array directory with zarrita; per array one JSON record
// {dir, ok, error, dtype, shape, form, dump}: form "bytes" is the elements
// little-endian in C order, "vlen" one base64 line per element (strings
// as UTF-8).
async function dump(out, dirs) {
  const res = [];
  for (const [i, d] of dirs.entries()) {
    const r = { dir: d, ok: false };
    try {
      const arr = await zarr.open(zarr.root(new FileSystemStore(d)), { kind: "array" });
      r.dtype = arr.dtype;
      r.shape = arr.shape;
      const chunk = await zarr.get(arr);
      const path = join(out, `${i}.bin`);
      let data = arr.shape.length === 0 ? scalarArray(arr.dtype, chunk) : chunk.data;
      if (Array.isArray(data)) {
        writeFileSync(path, data.map((s) => Buffer.from(String(s), "utf8").toString("base64") + "\n").join(""));
        r.form = "vlen";
      } else {
        writeFileSync(path, bytesOf(data));
        r.form = "bytes";
      }
      Object.assign(r, { ok: true, dump: path });
    } catch (e) {
      r.error = String(e && e.message ? e.message : e);
    }
    res.push(r);
  }
  console.log(JSON.stringify(res));
}

function scalarArray(dtype, v) {
  const ctors = { int8: Int8Array, int16: Int16Array, int32: Int32Array, int64: BigInt64Array,
    uint8: Uint8Array, uint16: Uint16Array, uint32: Uint32Array, uint64: BigUint64Array,
    float32: Float32Array, float64: Float64Array, bool: Uint8Array };
  return ctors[dtype].of(typeof v === "boolean" ? Number(v) : v);
}

function strides(shape) {
  const st = new Array(shape.length);
  let acc = 1;
  for (let d = shape.length - 1; d >= 0; d--) { st[d] = acc; acc *= shape[d]; }
  return st;
}

const [cmd, storePath, out, ...rest] = process.argv.slice(2);
if (cmd === "read") await read(storePath, out, rest);
else if (cmd === "write") await write(storePath, out);
else if (cmd === "dump") await dump(storePath, [out, ...rest]);
else { console.error("usage: zarr3.mjs read|write STORE OUTDIR [PATH...]"); process.exit(2); }
