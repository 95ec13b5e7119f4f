// zarrita peer for scc's bench suite (scenario "zarrbench", sharded
// variant): reads the whole array "a" of a Zarr v3 store (the sharded
// file's export) with zarr.get, timed, then checks every element against
// the workload's formula (g2 + g1^2/32 + g0^3) mod 65536, untimed, and
// prints {"seconds", "maxrss_kib"} on its last line.
//
//   node zarrbench_zarrita.mjs STORE N
import * as zarr from "zarrita";
import FileSystemStore from "@zarrita/storage/fs";

const [storePath, nArg] = process.argv.slice(2);
const n = Number(nArg);
const store = new FileSystemStore(storePath);
const arr = await zarr.open(zarr.root(store).resolve("a"), { kind: "array" });
const t0 = process.hrtime.bigint();
const chunk = await zarr.get(arr);
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
const maxrss = process.resourceUsage().maxRSS; // KiB
const data = chunk.data;
if (data.length !== n * n * n) {
  console.error(`zarrbench_zarrita: ${data.length} elements, want ${n * n * n}`);
  process.exit(1);
}
let i = 0;
for (let g0 = 0; g0 < n; g0++) {
  const c0 = Number((BigInt(g0) ** 3n) % 65536n);
  for (let g1 = 0; g1 < n; g1++) {
    const c1 = Math.floor((g1 * g1) / 32);
    for (let g2 = 0; g2 < n; g2++, i++) {
      if (data[i] !== (g2 + c1 + c0) % 65536) {
        console.error(`zarrbench_zarrita: element (${g0}, ${g1}, ${g2}) is ${data[i]}`);
        process.exit(1);
      }
    }
  }
}
console.log(JSON.stringify({ seconds, maxrss_kib: maxrss }));
