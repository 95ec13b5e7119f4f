package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/engine/filter"
	"github.com/scc-dev/scc/internal/memcopy"
	"github.com/scc-dev/scc/interop/zarr"
)

// The sharded variant of the public Zarr benchmark: the same array and
// chunks (the shards), each chunk stored as inner chunks of Inner³
// (engine.DatasetSpec.InnerChunk), zstd level 3. Its rows are the
// unsharded ones (read_all, read_chunks, roundtrip) and read_inner:
// every inner chunk read alone, in a random order, as a reader of small
// pieces of a large array does. Beside them: zarr-python 2 (which has no
// sharding) reading the same values as unsharded chunks and as chunks of
// the inner size, zarrita reading the file's own Zarr v3 sharded export,
// the codec alone on the inner chunks, the pread floor, and the figures
// the public benchmark published for its sharded array (another machine,
// another array: labelled so).

// shardInner is the inner chunk side of the sharded variant: Options.
// InnerChunk, else a quarter of the chunk side (64³ in 256³).
func shardInner(o Options, c ZarrBenchConfig) int {
	if o.InnerChunk > 0 {
		return o.InnerChunk
	}
	return max(c.Chunk/4, 1)
}

// innerConfig is the workload seen as chunks of the inner size: its
// chunk k is the k-th inner chunk of the array's inner grid (C order).
func innerConfig(c ZarrBenchConfig, inner int) ZarrBenchConfig {
	return ZarrBenchConfig{Side: c.Side, Chunk: inner}
}

// zarrbenchPublished is what github.com/LDeakin/zarr_benchmarks published
// for its sharded array (measurements/benchmark_read_*.md, May 2025): an
// AMD Ryzen 5900X, page cache cleared before each run, a 1024×2048×2048
// uint16 array (8.59 GB decoded) in 256³ shards of 32³ inner chunks,
// blosclz level 9 with bit shuffling. Seconds per row.
var zarrbenchPublished = struct {
	bytes                   float64
	readAll                 map[string]float64
	readChunks, readInner   map[int]map[string]float64
	roundtrip               map[string]float64
	machine, array, sources string
}{
	bytes:   1024 * 2048 * 2048 * 2,
	readAll: map[string]float64{"zarrs": 1.61, "tensorstore": 2.05},
	readChunks: map[int]map[string]float64{
		1: {"zarrs": 2.42, "tensorstore": 2.81}, 2: {"zarrs": 1.65, "tensorstore": 2.23},
		4: {"zarrs": 1.31, "tensorstore": 1.92}, 8: {"zarrs": 1.16, "tensorstore": 1.79},
	},
	readInner: map[int]map[string]float64{
		1: {"zarrs": 10.06, "tensorstore": 30.35}, 2: {"zarrs": 5.33, "tensorstore": 19.86},
		4: {"zarrs": 2.80, "tensorstore": 15.61}, 8: {"zarrs": 1.40, "tensorstore": 14.04},
	},
	roundtrip: map[string]float64{"zarrs": 2.84, "tensorstore": 3.75},
	machine:   "another machine (AMD Ryzen 5900X, 12 cores, page cache cleared)",
	array:     "1024×2048×2048 uint16 in 256³ shards of 32³ inner chunks, blosclz 9 + bitshuffle",
	sources:   "LDeakin/zarr_benchmarks measurements, May 2025",
}

// published returns the published seconds of row at conc.
func published(row string, conc int) map[string]float64 {
	p := zarrbenchPublished
	switch row {
	case "read_all":
		return p.readAll
	case "read_chunks":
		return p.readChunks[conc]
	case "read_inner":
		return p.readInner[conc]
	case "roundtrip":
		return p.roundtrip
	}
	return nil
}

// writeShardedZarrBenchFile writes the array with sharded chunks.
func writeShardedZarrBenchFile(ctx context.Context, path string, c ZarrBenchConfig, inner int, rmp []byte) error {
	f, err := engine.Create(ctx, path, &engine.Options{NoSync: true})
	if err != nil {
		return err
	}
	defer f.Close(ctx)
	if _, err := f.CreateDataset(ctx, "a", shardedSpec(c, inner)); err != nil {
		return err
	}
	ds, err := f.OpenDataset(ctx, "a", nil)
	if err != nil {
		return err
	}
	buf := make([]byte, c.chunkBytes())
	for k := range c.chunks() {
		fillZarrChunk(buf, rmp, c, k)
		if err := ds.Write(ctx, c.box(k), buf); err != nil {
			return err
		}
	}
	if err := f.Flush(ctx); err != nil {
		return err
	}
	return f.Close(ctx)
}

func shardedSpec(c ZarrBenchConfig, inner int) engine.DatasetSpec {
	s, n, in := uint64(c.Side), uint64(c.Chunk), uint64(inner)
	return engine.DatasetSpec{Type: engine.Uint16, Shape: []uint64{s, s, s}, Chunk: []uint64{n, n, n},
		InnerChunk: []uint64{in, in, in}, Filters: []engine.Filter{engine.Zstd(3)}}
}

// innerOrder is every inner chunk of the array once, in a random order
// fixed by the seed (the same for every row and every peer).
func innerOrder(ic ZarrBenchConfig) []int {
	order := make([]int, ic.chunks())
	for i := range order {
		order[i] = i
	}
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	return order
}

// sccShardRow runs one row of the sharded variant in this process, as
// sccZarrRow does.
func sccShardRow(ctx context.Context, path, row string, conc int, c ZarrBenchConfig, inner int, rmp []byte, out string) (zarrRow, error) {
	if row != "read_inner" && row != "roundtrip" {
		return sccZarrRow(ctx, path, row, conc, c, rmp, out, nil)
	}
	cc, err := cache.New(zarrCacheConfig)
	if err != nil {
		return zarrRow{}, err
	}
	defer cc.Close()
	f, err := engine.Open(ctx, path, &engine.Options{Cache: cc, ReadOnly: true})
	if err != nil {
		return zarrRow{}, err
	}
	defer f.Close(ctx)
	ds, err := f.OpenDataset(ctx, "a", nil)
	if err != nil {
		return zarrRow{}, err
	}
	rss := resetPeakRSS()
	var res zarrRow
	if rss {
		res.BaseRSS = procStatus("VmRSS:")
	}
	var verify func() error
	ic := innerConfig(c, inner)
	var dests [][]byte
	if row == "read_inner" {
		dests = destBufs(conc, ic.chunkBytes())
	} else {
		dests = destBufs(conc, c.chunkBytes())
	}
	runtime.GC() // as sccZarrRow: earlier rows' garbage is not this row's work
	cpu0 := cpuSeconds()
	t0 := time.Now()
	switch row {
	case "read_inner":
		order := innerOrder(ic)
		read := func(k int, buf []byte) error { return ds.Read(ctx, ic.box(order[k]), buf) }
		if err := eachChunk(ctx, ic, dests, read); err != nil {
			return res, err
		}
		res.Seconds = time.Since(t0).Seconds()
		verify = func() error {
			return eachChunk(ctx, ic, dests, func(k int, buf []byte) error {
				if err := read(k, buf); err != nil {
					return err
				}
				return verifyZarrChunk(buf, rmp, ic, order[k])
			})
		}
	case "roundtrip":
		of, err := engine.Create(ctx, out, &engine.Options{Cache: cc, NoSync: true})
		if err != nil {
			return res, err
		}
		defer of.Close(ctx)
		ods, err := of.CreateDataset(ctx, "a", shardedSpec(c, inner))
		if err != nil {
			return res, err
		}
		err = eachChunk(ctx, c, dests, func(k int, buf []byte) error {
			if err := ds.Read(ctx, c.box(k), buf); err != nil {
				return err
			}
			return ods.Write(ctx, c.box(k), buf)
		})
		if err == nil {
			err = of.Flush(ctx)
		}
		if err != nil {
			return res, err
		}
		res.Seconds = time.Since(t0).Seconds()
		verify = func() error {
			return eachChunk(ctx, c, dests[:1], func(k int, buf []byte) error {
				if err := ods.Read(ctx, c.box(k), buf); err != nil {
					return err
				}
				return verifyZarrChunk(buf, rmp, c, k)
			})
		}
	}
	if cpu1 := cpuSeconds(); cpu0 > 0 && cpu1 > cpu0 {
		res.CPUSeconds = cpu1 - cpu0
	}
	if rss {
		res.PeakRSS = peakRSS()
	}
	return res, verify()
}

// treeSize is the bytes of the regular files under dir.
func treeSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	return n, err
}

// exportSharded writes the sharded file's Zarr v3 export (its shards are
// the file's chunks with the index rewritten) and returns its size beside
// the file's.
func exportSharded(ctx context.Context, path, store string) (file, export int64, err error) {
	f, err := engine.Open(ctx, path, &engine.Options{ReadOnly: true})
	if err != nil {
		return 0, 0, err
	}
	defer f.Close(ctx)
	rep, err := zarr.Export(ctx, f, store, zarr.Options{Version: 3})
	if err != nil {
		return 0, 0, err
	}
	if d := rep.Datasets; len(d) != 1 || d[0].Copied != d[0].Chunks {
		return 0, 0, fmt.Errorf("export copied %+v, want every shard", rep.Datasets)
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	export, err = treeSize(store)
	return st.Size(), export, err
}

// zarritaRow times zarrita reading the whole exported array (its
// read_all), or "" reason when zarrita cannot be run.
func zarritaRow(ctx context.Context, p *Peers, dir, store string, c ZarrBenchConfig) (*zarrPeerRow, error) {
	src, err := scripts.ReadFile("scripts/zarrbench_zarrita.mjs")
	if err != nil {
		return nil, err
	}
	script := filepath.Join(dir, "zarrbench_zarrita.mjs")
	if err := os.WriteFile(script, src, 0o644); err != nil {
		return nil, err
	}
	// Node resolves the script's imports from node_modules beside it.
	link := filepath.Join(dir, "node_modules")
	os.Remove(link)
	if err := os.Symlink(filepath.Join(p.Zarrita, "node_modules"), link); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, p.Node, "--max-old-space-size=16384", script, store, fmt.Sprint(c.Side))
	cmd.Dir = dir
	var v zarrPeerRow
	if err := runJSON(cmd, "zarrbench_zarrita.mjs", &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// runShardedZarrBench runs the sharded variant's rows; unsharded holds
// zarr-python's zstd rows of the unsharded array, by key ("zstd/read_all",
// "zstd/read_chunks/c1", ...), nil where it did not run.
func runShardedZarrBench(ctx context.Context, o Options, p *Peers, r *Report, c ZarrBenchConfig, dir string, rmp []byte, peer *zarrPeerVersions, unsharded map[string]*zarrPeerRow) error {
	inner := shardInner(o, c)
	if inner < 2 || c.Chunk%inner != 0 {
		return fmt.Errorf("bench: zarrbench: inner chunk side %d does not divide the chunk side %d", inner, c.Chunk)
	}
	ic := innerConfig(c, inner)
	path := filepath.Join(dir, "sharded.scc")
	if err := writeShardedZarrBenchFile(ctx, path, c, inner, rmp); err != nil {
		return err
	}
	defer os.Remove(path)
	o.logf("   sharded: %d³ chunks of %d³ inner chunks (%d per chunk), zstd level 3", c.Chunk, inner, (c.Chunk/inner)*(c.Chunk/inner)*(c.Chunk/inner))

	// The file beside its own Zarr v3 sharded export.
	store := filepath.Join(dir, "sharded-export.zarr")
	fileBytes, exportBytes, err := exportSharded(ctx, path, store)
	if err != nil {
		return fmt.Errorf("sharded export: %w", err)
	}
	o.logf("   sharded file %s, its Zarr v3 sharded export %s (file/export %.4f)", HumanBytes(fileBytes), HumanBytes(exportBytes), float64(fileBytes)/float64(exportBytes))
	r.add(Figure{Scenario: "zarrbench", Key: "sharded/size", Metric: "sharded file size beside its own Zarr v3 sharded export",
		Unit: "MiB", SCC: float64(fileBytes) / mib, Peer: "Zarr v3 sharded export (scctl export)", PeerValue: ptr(float64(exportBytes) / mib),
		Target: &Target{Kind: "ratio", Value: 1 / 1.02},
		Note:   "the whole .scc file (superblock, metadata, chunk index, free space) beside the store's files (zarr.json documents and shards: the chunks' inner frames byte for byte with Zarr's index)"})

	// zarr-python 2 has no sharding: the same values in chunks of the
	// inner size are its form of "read any inner chunk alone".
	var innerStore string
	if peer != nil {
		sub := filepath.Join(dir, "inner")
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		var v zarrPeerVersions
		if err := runScript(ctx, p, dir, "zarrbench_peer.py", &v, "gen", sub, fmt.Sprint(c.Side), fmt.Sprint(inner), "zstd"); err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("zarrbench: peer zarr, %d³ chunks: %v", inner, err))
		} else {
			innerStore = filepath.Join(sub, "zstd.zarr")
			defer os.RemoveAll(sub)
		}
	}

	reps := o.size(3, 3, 1)
	cores := runtime.GOMAXPROCS(0)
	cf, allCores, placed, err := shardCodecFloor(ic, rmp, reps, cores)
	if err != nil {
		return fmt.Errorf("zstd codec floor of the inner chunks: %w", err)
	}
	codecNote := fmt.Sprintf("codec alone on the same %d³ frames %.3f s on 1 goroutine, %.3f s on all %d cores", inner, cf.Seconds, allCores, cores)
	o.logf("   zstd codec on all %d cores with each inner chunk then copied into its place in one array buffer: %.3f s", cores, placed)
	o.logf("   zstd %s (perfect scaling would be %.3f s)", codecNote, cf.Seconds/float64(cores))

	// zarrita, the JavaScript reader, reads the export's shards.
	var zr *zarrPeerRow
	if p.Node != "" && p.Zarrita != "" {
		for range reps {
			v, err := zarritaRow(ctx, p, dir, store, c)
			if err != nil {
				r.Errors = append(r.Errors, fmt.Sprintf("zarrbench: zarrita on the sharded export: %v", err))
				zr = nil
				break
			}
			if zr == nil || v.Seconds < zr.Seconds {
				zr = v
			}
		}
	} else {
		r.missing("zarrita (node and interop/zarr/testdata/node: make interop-deps)")
	}
	os.RemoveAll(store)

	type rowSpec struct {
		row  string
		conc int
	}
	rows := []rowSpec{{"read_all", cores}, {"read_chunks", 1}, {"read_chunks", 2}, {"read_chunks", 4}, {"read_chunks", 8},
		{"read_inner", 1}, {"read_inner", 2}, {"read_inner", 4}, {"read_inner", 8}, {"roundtrip", 2}}
	for _, rs := range rows {
		key, metric := "sharded/"+rs.row, rs.row+" zstd, sharded"
		ukey := "zstd/" + rs.row
		switch rs.row {
		case "read_all":
			metric += " (one call, one buffer)"
		case "read_chunks", "read_inner":
			key += fmt.Sprintf("/c%d", rs.conc)
			ukey += fmt.Sprintf("/c%d", rs.conc)
			metric += fmt.Sprintf(", concurrency %d", rs.conc)
		case "roundtrip":
			metric += ", 2 workers, new sharded array flushed (no fsync)"
		}
		if rs.row == "read_inner" {
			metric = fmt.Sprintf("read every %d³ inner chunk alone, random order, zstd, sharded, concurrency %d", inner, rs.conc)
		}
		var res zarrRow
		var floor float64
		var pr *zarrPeerRow
		peerFailed := false
		for rep := range reps {
			out := filepath.Join(dir, "out-sharded.scc")
			one, err := sccShardRow(ctx, path, rs.row, rs.conc, c, inner, rmp, out)
			os.Remove(out)
			if err != nil {
				return fmt.Errorf("scc %s: %w", key, err)
			}
			if rep == 0 || one.Seconds < res.Seconds {
				res.Seconds = one.Seconds
			}
			if one.CPUSeconds > 0 && (res.CPUSeconds == 0 || one.CPUSeconds < res.CPUSeconds) {
				res.CPUSeconds = one.CPUSeconds
			}
			if one.PeakRSS > res.PeakRSS {
				res.PeakRSS, res.BaseRSS = one.PeakRSS, one.BaseRSS
			}
			if rs.row != "roundtrip" {
				pieces := c.chunks()
				if rs.row == "read_inner" {
					pieces = ic.chunks()
				}
				fl, err := preadFloor(path, pieces, rs.conc, rs.row == "read_all")
				if err != nil {
					return fmt.Errorf("pread floor %s: %w", key, err)
				}
				if rep == 0 || fl < floor {
					floor = fl
				}
			}
			if rs.row != "read_inner" || innerStore == "" || peerFailed {
				continue
			}
			var v zarrPeerRow
			if err := runScript(ctx, p, dir, "zarrbench_peer.py", &v, "read_random", innerStore, fmt.Sprint(c.Side), fmt.Sprint(inner), fmt.Sprint(rs.conc)); err != nil {
				r.Errors = append(r.Errors, fmt.Sprintf("zarrbench: peer zarr %s: %v", key, err))
				pr, peerFailed = nil, true
				continue
			}
			if pr == nil || v.Seconds < pr.Seconds {
				pr = &v
			}
		}
		peerName := "zarr-python"
		if peer != nil {
			peerName = "zarr " + peer.Version
		}
		note := fmt.Sprintf("%d³ array, %d³ chunks of %d³ inner chunks, best of %d, every element verified (untimed)", c.Side, c.Chunk, inner, reps)
		if rs.row != "roundtrip" {
			note += "; " + destNote
		}
		t := Figure{Scenario: "zarrbench", Key: key, Metric: metric, Unit: "s", SCC: res.Seconds, Note: note}
		switch rs.row {
		case "read_inner":
			// zarr-python on chunks of the inner size, read in the same
			// order: no sharding, every piece its own file.
			t.Peer = peerName + ", unsharded " + fmt.Sprintf("%d³", inner) + " chunks"
			if pr != nil {
				t.PeerValue = ptr(pr.Seconds)
			}
			t.Target = &Target{Kind: "ratio", Value: 2}
		default:
			t.Peer = peerName + ", unsharded " + fmt.Sprintf("%d³", c.Chunk) + " chunks"
			if u := unsharded[ukey]; u != nil {
				t.PeerValue = ptr(u.Seconds)
			}
			if rs.row == "read_chunks" && rs.conc == 1 {
				t.Target = &Target{Kind: "ratio", Value: 1.5}
			}
		}
		line := fmt.Sprintf("   %-24s scc %.3f s (peak RSS %s, +%s in the row)", key, res.Seconds, rssString(res.PeakRSS), rssDelta(res))
		if t.PeerValue != nil {
			line += fmt.Sprintf(", %s %.3f s", t.Peer, *t.PeerValue)
		}
		if floor > 0 {
			line += fmt.Sprintf(", pread floor %.3f s", floor)
		}
		if rs.row != "roundtrip" {
			// The codec's own floor beside every read row, measured in
			// this run: a target below it cannot be met on this
			// machine's cores whatever the reader does.
			line += fmt.Sprintf(", codec floor %.3f s on 1 goroutine, %.3f s on %d cores", cf.Seconds, allCores, cores)
			t.Note += "; " + codecNote
		}
		if rs.row == "read_all" && zr != nil {
			line += fmt.Sprintf(", zarrita on the export %.3f s", zr.Seconds)
		}
		r.add(t)
		o.logf("%s", line)
		if floor > 0 {
			f := Figure{Scenario: "zarrbench", Key: key + "/floor", Metric: metric + ", beside pread of the same file",
				Unit: "s", SCC: res.Seconds, Peer: "pread floor", PeerValue: ptr(floor),
				Note: "the file's bytes read with pread at the same concurrency"}
			r.add(f)
		}
		if rs.row == "read_all" {
			// Within 1.3× of what neither the disk nor the codec can
			// beat: the larger of the pread floor and the codec alone
			// on every core.
			best := max(floor, allCores)
			r.add(Figure{Scenario: "zarrbench", Key: key + "/bound", Metric: metric + ", beside max(codec alone on every core, pread floor)",
				Unit: "s", SCC: res.Seconds, Peer: "max(codec floor on all cores, pread floor)", PeerValue: ptr(best),
				Target: &Target{Kind: "ratio", Value: 1 / 1.3},
				Note:   fmt.Sprintf("%s; pread floor %.3f s", codecNote, floor)})
			// What the codec floor leaves out: a read of the whole array
			// also writes it into the caller's buffer, each inner chunk's
			// rows to their strided places (2 GiB at full size).
			r.add(Figure{Scenario: "zarrbench", Key: key + "/placed", Metric: metric + ", beside the codec on every core placing each inner chunk in one array buffer",
				Unit: "s", SCC: res.Seconds, Peer: "codec on all cores + copy into the array", PeerValue: ptr(placed),
				Note: fmt.Sprintf("the same frames decoded on all %d cores, each inner chunk then copied row by row into its place in one buffer of the whole array, written before the timer (non-temporal stores, as scc's scatter); no engine", cores)})
			if zr != nil {
				r.add(Figure{Scenario: "zarrbench", Key: key + "/zarrita", Metric: metric + ", beside zarrita reading the file's Zarr v3 sharded export",
					Unit: "s", SCC: res.Seconds, Peer: "zarrita (node), zarr.get of the whole array", PeerValue: ptr(zr.Seconds),
					Note: "the export's shards are the file's chunks with the index rewritten; zarrita decodes them on one thread"})
			}
		}
		if rs.row != "roundtrip" {
			codecFigure(r, ic, key, metric, res, pr, cf)
		}
		if pub := published(rs.row, rs.conc); pub != nil && res.Seconds > 0 {
			gbs := float64(c.arrayBytes()) / res.Seconds / 1e9
			for _, impl := range []string{"zarrs", "tensorstore"} {
				s, ok := pub[impl]
				if !ok {
					continue
				}
				r.add(Figure{Scenario: "zarrbench", Key: key + "/published-" + impl, Metric: metric + ", decoded GB/s beside the published " + impl + " figure",
					Unit: "GB/s", HigherIsBetter: true, SCC: gbs, Peer: impl + " (published, " + zarrbenchPublished.machine + ")",
					PeerValue: ptr(zarrbenchPublished.bytes / s / 1e9),
					Note: fmt.Sprintf("published %.2f s for %s (%s); not measured here, another machine and array: a scale, not a race", s,
						zarrbenchPublished.array, zarrbenchPublished.sources)})
			}
		}
	}
	return nil
}

// shardedKeys lists the figure keys of the sharded variant's timed rows.
func shardedKeys() []string {
	var out []string
	for _, row := range []string{"read_all", "read_chunks/c1", "read_chunks/c2", "read_chunks/c4", "read_chunks/c8",
		"read_inner/c1", "read_inner/c2", "read_inner/c4", "read_inner/c8", "roundtrip"} {
		out = append(out, "sharded/"+row)
	}
	return out
}

// shardCodecFloor is the codec alone on the inner chunks' frames (c is
// the workload seen as chunks of the inner size): what zstdCodecFloor
// measures, each frame decoded into a reused buffer on one goroutine, and
// the same frames on cores goroutines at once, each with its buffer,
// taking the next frame as it is free: the most a reader of the sharded
// chunks could decode on this machine, memory bandwidth and all. placed
// is the second with each decoded inner chunk then copied into its place
// in one buffer of the whole array, as a one-call read must. Best of reps
// each.
func shardCodecFloor(c ZarrBenchConfig, rmp []byte, reps, cores int) (one codecFloor, all, placed float64, err error) {
	pl, err := filter.NewPipeline([]filter.Spec{{ID: filter.Zstd, Level: 3}}, 2)
	if err != nil {
		return codecFloor{}, 0, 0, err
	}
	n := c.chunks()
	frames := make([][]byte, n)
	masks := make([]uint32, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, cores)
	// Across workers: the frames are the one-time cost (4,096 of them at
	// full size), not measured.
	run := func(work func(buf []byte, k int) error) {
		next.Store(0)
		for w := range cores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, c.chunkBytes())
				for {
					k := int(next.Add(1) - 1)
					if k >= n {
						return
					}
					if err := work(buf, k); err != nil {
						errs[w] = err
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	run(func(buf []byte, k int) error {
		fillZarrChunk(buf, rmp, c, k)
		var err error
		frames[k], masks[k], err = pl.Encode(buf)
		return err
	})
	if err := errors.Join(errs...); err != nil {
		return codecFloor{}, 0, 0, err
	}
	decode := func(buf []byte, k int) error {
		out, err := pl.DecodeVerifiedTo(buf, frames[k], masks[k], len(buf))
		if err == nil && len(out) != len(buf) {
			err = fmt.Errorf("decoded %d bytes, want %d", len(out), len(buf))
		}
		return err
	}
	buf := make([]byte, c.chunkBytes())
	for rep := range reps {
		t0 := time.Now()
		for k := range frames {
			if err := decode(buf, k); err != nil {
				return codecFloor{}, 0, 0, err
			}
		}
		if el := time.Since(t0).Seconds(); rep == 0 || el < one.Seconds {
			one.Seconds = el
		}
		t0 = time.Now()
		run(decode)
		if err := errors.Join(errs...); err != nil {
			return codecFloor{}, 0, 0, err
		}
		if el := time.Since(t0).Seconds(); rep == 0 || el < all {
			all = el
		}
	}
	// The last chunk decoded is checked, so the loops decoded real data.
	if err := verifyZarrChunk(buf, rmp, c, n-1); err != nil {
		return codecFloor{}, 0, 0, err
	}

	// Decode and place: each inner chunk's rows (its last side) go to
	// their places in arr, as scc's scatter puts them.
	arr := destBufs(1, int(c.arrayBytes()))[0]
	side, in := c.Side, c.Chunk
	rb := 2 * in
	rel := make([]int, 0, in*in) // row offsets of an inner chunk at the origin
	for z := range in {
		for y := range in {
			rel = append(rel, 2*(z*side+y)*side)
		}
	}
	offs := sync.Pool{New: func() any { o := make([]int, len(rel)); return &o }}
	place := func(buf []byte, k int) error {
		if err := decode(buf, k); err != nil {
			return err
		}
		p := c.coord(k)
		base := 2 * ((p[0]*in*side+p[1]*in)*side + p[2]*in)
		op := offs.Get().(*[]int)
		defer offs.Put(op)
		off := *op
		for i, r := range rel {
			off[i] = base + r
		}
		if !memcopy.StreamRows(arr, buf, off, rb) {
			for i, o := range off {
				copy(arr[o:o+rb], buf[i*rb:])
			}
		}
		return nil
	}
	for rep := range reps {
		t0 := time.Now()
		run(place)
		if err := errors.Join(errs...); err != nil {
			return codecFloor{}, 0, 0, err
		}
		if el := time.Since(t0).Seconds(); rep == 0 || el < placed {
			placed = el
		}
	}
	if err := verifyZarrBox(arr, rmp, [3]int{}, [3]int{side, side, side}); err != nil {
		return codecFloor{}, 0, 0, fmt.Errorf("decode and place: %w", err)
	}
	return one, all, placed, nil
}
