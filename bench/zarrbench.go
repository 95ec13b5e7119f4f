package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/engine/filter"
)

// ZarrBenchConfig is the public Zarr benchmark's workload
// (github.com/zarrs/zarr_benchmarks): a Side³ uint16 array, value
// (g2 + g1²/32 + g0³) mod 65536 over the global coordinates, in Chunk³
// chunks, stored uncompressed and with zstd at level 3 (that benchmark's
// zstd level 0, zstd's default).
type ZarrBenchConfig struct {
	Side, Chunk int
}

// Validate reports whether c is runnable: whole chunks only.
func (c ZarrBenchConfig) Validate() error {
	if c.Chunk < 2 || c.Side < c.Chunk || c.Side%c.Chunk != 0 || c.Side > 1<<12 {
		return fmt.Errorf("bench: zarrbench: array side %d, chunk side %d", c.Side, c.Chunk)
	}
	return nil
}

func (c ZarrBenchConfig) grid() int         { return c.Side / c.Chunk }
func (c ZarrBenchConfig) chunks() int       { g := c.grid(); return g * g * g }
func (c ZarrBenchConfig) chunkBytes() int   { return 2 * c.Chunk * c.Chunk * c.Chunk }
func (c ZarrBenchConfig) arrayBytes() int64 { return 2 * int64(c.Side) * int64(c.Side) * int64(c.Side) }

// coord returns chunk k's grid position, in C order.
func (c ZarrBenchConfig) coord(k int) [3]int {
	g := c.grid()
	return [3]int{k / (g * g), k / g % g, k % g}
}

func (c ZarrBenchConfig) box(k int) engine.Selection {
	p, n := c.coord(k), uint64(c.Chunk)
	return engine.Box([]uint64{uint64(p[0]) * n, uint64(p[1]) * n, uint64(p[2]) * n}, []uint64{n, n, n})
}

// zarrBenchSize: the quick size by default (and with --quick); the full
// 1024³ array with 256³ chunks only with Options.Full.
func zarrBenchSize(o Options) ZarrBenchConfig {
	switch {
	case o.Tiny:
		return ZarrBenchConfig{Side: 32, Chunk: 16}
	case o.Full:
		return ZarrBenchConfig{Side: 1024, Chunk: 256}
	}
	return ZarrBenchConfig{Side: 256, Chunk: 64}
}

// ramp holds k mod 65536 as little-endian uint16 for k in [0, 65536+n):
// every row of the array along its last axis is a slice of it, so filling
// and checking a row is one copy or one comparison.
func ramp(n int) []byte {
	b := make([]byte, 2*(65536+n))
	for k := range 65536 + n {
		b[2*k], b[2*k+1] = byte(k), byte(k>>8)
	}
	return b
}

// rowStart is the value at (g0, g1, g2).
func rowStart(g0, g1, g2 uint64) int { return int((g2 + g1*g1/32 + g0*g0*g0) % 65536) }

// fillZarrChunk writes chunk k's values into buf (chunkBytes bytes).
func fillZarrChunk(buf, rmp []byte, c ZarrBenchConfig, k int) {
	p, n := c.coord(k), c.Chunk
	row := 2 * n
	for l0 := range n {
		for l1 := range n {
			s := rowStart(uint64(p[0]*n+l0), uint64(p[1]*n+l1), uint64(p[2]*n))
			copy(buf[(l0*n+l1)*row:], rmp[2*s:2*s+row])
		}
	}
}

// zarrVerified counts the elements checked, so tests can tell that every
// row's output was verified.
var zarrVerified atomic.Int64

// verifyZarrBox checks buf, the C-order elements of the box at (o0, o1,
// o2) of size (n0, n1, n2), element by element.
func verifyZarrBox(buf, rmp []byte, o [3]int, n [3]int) error {
	row := 2 * n[2]
	if len(buf) != row*n[0]*n[1] {
		return fmt.Errorf("bench: zarrbench: %d bytes for a box of %v", len(buf), n)
	}
	for l0 := range n[0] {
		for l1 := range n[1] {
			s := rowStart(uint64(o[0]+l0), uint64(o[1]+l1), uint64(o[2]))
			off := (l0*n[1] + l1) * row
			if !bytes.Equal(buf[off:off+row], rmp[2*s:2*s+row]) {
				return fmt.Errorf("bench: zarrbench: wrong values in row (%d, %d) from %v", o[0]+l0, o[1]+l1, o)
			}
		}
	}
	zarrVerified.Add(int64(n[0] * n[1] * n[2]))
	return nil
}

func verifyZarrChunk(buf, rmp []byte, c ZarrBenchConfig, k int) error {
	p, n := c.coord(k), c.Chunk
	return verifyZarrBox(buf, rmp, [3]int{p[0] * n, p[1] * n, p[2] * n}, [3]int{n, n, n})
}

// zarrCodecs are the two stored forms the benchmark compares.
var zarrCodecs = []struct {
	name    string
	filters []engine.Filter
}{{"raw", nil}, {"zstd", []engine.Filter{engine.Zstd(3)}}}

// writeZarrBenchFile writes the array with scc (untimed setup).
func writeZarrBenchFile(ctx context.Context, path string, c ZarrBenchConfig, filters []engine.Filter, rmp []byte) error {
	f, err := engine.Create(ctx, path, &engine.Options{NoSync: true})
	if err != nil {
		return err
	}
	defer f.Close(ctx)
	s := uint64(c.Side)
	ds, err := f.CreateDataset(ctx, "a", engine.DatasetSpec{Type: engine.Uint16, Shape: []uint64{s, s, s},
		Chunk: []uint64{uint64(c.Chunk), uint64(c.Chunk), uint64(c.Chunk)}, Filters: filters})
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

// zarrRow is one timed row of one side.
type zarrRow struct {
	Seconds float64
	PeakRSS int64 // bytes; 0 when unknown
	// BaseRSS is the process's RSS when the row started (after the reset),
	// so PeakRSS-BaseRSS is what the row added: the bench process also
	// holds what setup left behind (the encoders that wrote the file).
	BaseRSS int64
	// CPUSeconds is the process's CPU time during the timed part (every
	// goroutine's, the runtime's included): decoded bytes over it are the
	// per-core throughput set beside the codec's own.
	CPUSeconds float64
}

// resetPeakRSS returns freed memory to the system and resets the process's
// peak RSS to its current RSS (Linux /proc/self/clear_refs "5"), so that
// VmHWM afterwards is the peak of what follows. It reports whether the
// reset worked.
func resetPeakRSS() bool {
	runtime.GC()
	debug.FreeOSMemory()
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS is the process's VmHWM in bytes, 0 if unknown.
func peakRSS() int64 { return procStatus("VmHWM:") }

// procStatus reads a size field of /proc/self/status in bytes, 0 if
// unknown.
func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// sccZarrRow runs one row in this process: a fresh cache with the default
// configuration but for AdmitOnReread (every row reads each chunk once,
// which a cache that keeps only chunks read again serves without keeping
// them: decoded straight into the caller's buffer or scattered from a
// recycled one, never into fresh cache memory) and Prefetch off (on this
// workload it slowed the uncompressed scan at one goroutine and did not
// speed up the zstd one), the peak RSS reset before it and read right
// after the timed part, verification after that.
// zarrCacheConfig is the cache every scc row runs with (sccZarrRow).
var zarrCacheConfig = cache.Config{AdmitOnReread: true}

func sccZarrRow(ctx context.Context, path, row string, conc int, c ZarrBenchConfig, rmp []byte, out string, filters []engine.Filter) (zarrRow, error) {
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
	var dests [][]byte
	if row == "read_all" {
		dests = destBufs(1, int(c.arrayBytes()))
	} else {
		dests = destBufs(conc, c.chunkBytes())
	}
	// What earlier rows and the setup left for the collector is not this
	// row's work: collected before the timer, as testing.B does before a
	// benchmark, so the CPU time below is the row's own.
	runtime.GC()
	cpu0 := cpuSeconds()
	t0 := time.Now()
	switch row {
	case "read_all":
		s := uint64(c.Side)
		buf := dests[0]
		if err := ds.Read(ctx, engine.Box([]uint64{0, 0, 0}, []uint64{s, s, s}), buf); err != nil {
			return res, err
		}
		res.Seconds = time.Since(t0).Seconds()
		verify = func() error {
			return verifyZarrBox(buf, rmp, [3]int{}, [3]int{c.Side, c.Side, c.Side})
		}
	case "read_chunks":
		if err := eachChunk(ctx, c, dests, func(k int, buf []byte) error { return ds.Read(ctx, c.box(k), buf) }); err != nil {
			return res, err
		}
		res.Seconds = time.Since(t0).Seconds()
		verify = func() error {
			return eachChunk(ctx, c, dests, func(k int, buf []byte) error {
				if err := ds.Read(ctx, c.box(k), buf); err != nil {
					return err
				}
				return verifyZarrChunk(buf, rmp, c, k)
			})
		}
	case "roundtrip":
		// NoSync: the new array is flushed to the page cache, as
		// zarr-python's DirectoryStore leaves its chunk files; an fsync
		// of 2 GiB (0.2–0.6 s in one-off runs) would
		// time the disk, not the engine.
		of, err := engine.Create(ctx, out, &engine.Options{Cache: cc, NoSync: true})
		if err != nil {
			return res, err
		}
		defer of.Close(ctx)
		s := uint64(c.Side)
		ods, err := of.CreateDataset(ctx, "a", engine.DatasetSpec{Type: engine.Uint16, Shape: []uint64{s, s, s},
			Chunk: []uint64{uint64(c.Chunk), uint64(c.Chunk), uint64(c.Chunk)}, Filters: filters})
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
	default:
		return res, fmt.Errorf("bench: zarrbench: unknown row %q", row)
	}
	if cpu1 := cpuSeconds(); cpu0 > 0 && cpu1 > cpu0 {
		res.CPUSeconds = cpu1 - cpu0
	}
	if rss {
		res.PeakRSS = peakRSS()
	}
	return res, verify()
}

// eachChunk calls fn for every chunk from len(bufs) goroutines, each with
// its own chunk buffer of bufs, and returns the first error.
func eachChunk(ctx context.Context, c ZarrBenchConfig, bufs [][]byte, fn func(k int, buf []byte) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, buf := range bufs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				k := int(next.Add(1) - 1)
				if k >= c.chunks() {
					return
				}
				if err := fn(k, buf); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// destBufs returns n destination buffers of size bytes with every page
// written, so that a timed read writes into mapped memory. Every side of
// a read row gets its destinations so, before its timer starts: scc's
// rows, zarr-python's (out=, zarrbench_peer.py) and the pread floor, as
// the codec floor decodes into one reused buffer; the rows then time the
// reading and decoding, not the kernel mapping fresh pages (for read_all's
// one 2 GiB buffer at full size, a large part of the row).
func destBufs(n, size int) [][]byte {
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, size)
		for j := 0; j < size; j += 4096 {
			bufs[i][j] = 1
		}
	}
	return bufs
}

// destNote is what the read rows' notes say of their destinations.
const destNote = "destinations allocated and written before the timer on every side (scc, zarr-python's out=, the pread floor), as the codec floor's reused buffer"

// preadFloor reads the whole file with pread from conc goroutines in pieces
// of the file's size over the number of chunks: into one buffer of the
// file's size when whole is set (read_all's floor), else each goroutine
// into its own piece-sized buffer (read_chunks' floor).
func preadFloor(path string, pieces, conc int, whole bool) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	piece := (size + int64(pieces) - 1) / int64(pieces)
	var next atomic.Int64
	var wg sync.WaitGroup
	var errs atomic.Value
	var all []byte
	var owns [][]byte
	if whole {
		all = destBufs(1, int(size))[0]
	} else {
		owns = destBufs(conc, int(piece))
	}
	t0 := time.Now()
	for g := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var own []byte
			if !whole {
				own = owns[g]
			}
			for {
				off := (next.Add(1) - 1) * piece
				if off >= size {
					return
				}
				n := min(piece, size-off)
				var b []byte
				if whole {
					b = all[off : off+n]
				} else {
					b = own[:n]
				}
				if _, err := f.ReadAt(b, off); err != nil {
					errs.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0).Seconds()
	if err, _ := errs.Load().(error); err != nil {
		return 0, err
	}
	return el, nil
}

// zarrPeerVersions is what the peer script's gen prints.
type zarrPeerVersions struct {
	Version   string `json:"version"`
	Numcodecs string `json:"numcodecs"`
	Libzstd   string `json:"libzstd"`
}

type zarrPeerRow struct {
	Seconds   float64 `json:"seconds"`
	MaxRSSKiB int64   `json:"maxrss_kib"`
}

// klauspostVersion is the version of the zstd library linked in.
// zstdCodecName names the zstd implementation scc uses in this build, with
// its version.
func zstdCodecName() string {
	if filter.ZstdCodec == "libzstd" {
		return "libzstd " + filter.ZstdVersion() + " (cgo)"
	}
	v := "(version unknown)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/klauspost/compress" {
				v = m.Version
			}
		}
	}
	return "klauspost/compress " + v + " (pure Go)"
}

// runZarrBench is the public Zarr benchmark's rows, scc beside zarr-python
// and the pread floor of scc's own file.
func runZarrBench(ctx context.Context, o Options, p *Peers, r *Report) error {
	c := zarrBenchSize(o)
	if err := c.Validate(); err != nil {
		return err
	}
	dir, cleanup, err := tempDir(o, "zarrbench")
	if err != nil {
		return err
	}
	defer cleanup()
	rmp := ramp(c.Side)
	o.logf("   %d³ uint16 array (%s), %d³ chunks (%d), uncompressed and zstd level 3; files warm in the page cache",
		c.Side, HumanBytes(c.arrayBytes()), c.Chunk, c.chunks())

	var peer *zarrPeerVersions
	if p.Python != "" && p.Zarr != "" {
		var v zarrPeerVersions
		if err := runScript(ctx, p, dir, "zarrbench_peer.py", &v, "gen", dir, fmt.Sprint(c.Side), fmt.Sprint(c.Chunk)); err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("zarrbench: peer zarr: %v", err))
		} else {
			peer = &v
		}
	} else if p.Python == "" {
		r.missing("python3 with numpy (needed by h5py and zarr peers)")
	} else {
		r.missing("zarr (python3-zarr)")
	}
	codecs := "scc zstd: " + zstdCodecName() + " (level 3, no frame checksum)"
	if peer != nil {
		lib := peer.Libzstd
		if lib == "" {
			lib = "version not exposed"
		}
		codecs += fmt.Sprintf("; zarr %s: numcodecs %s Zstd(level=3) (libzstd %s)", peer.Version, peer.Numcodecs, lib)
	}
	m := r.Machine
	o.logf("   machine: %s, %d CPUs (GOMAXPROCS %d), %s; codecs: %s", orDash(m.CPU), m.NumCPU, m.GOMAXPROCS, orDash(m.MemTotal), codecs)

	type rowSpec struct {
		row  string
		conc int
	}
	reps := o.size(3, 3, 1)
	unsharded := map[string]*zarrPeerRow{} // zarr-python's zstd rows, beside the sharded variant's
	rows := []rowSpec{{"read_all", runtime.GOMAXPROCS(0)}, {"read_chunks", 1}, {"read_chunks", 2}, {"read_chunks", 4}, {"read_chunks", 8}, {"roundtrip", 2}}
	for _, cd := range zarrCodecs {
		path := filepath.Join(dir, cd.name+".scc")
		if err := writeZarrBenchFile(ctx, path, c, cd.filters, rmp); err != nil {
			return err
		}
		var codec *codecFloor
		if cd.name == "zstd" {
			cf, err := zstdCodecFloor(c, rmp, reps)
			if err != nil {
				return fmt.Errorf("zstd codec floor: %w", err)
			}
			codec = &cf
			o.logf("   zstd codec alone: every chunk decoded in %.3f s on one goroutine (%.0f MB/s); on %d cores at best %.3f s",
				cf.Seconds, float64(c.arrayBytes())/cf.Seconds/1e6, runtime.GOMAXPROCS(0), cf.Seconds/float64(runtime.GOMAXPROCS(0)))
		}
		for _, rs := range rows {
			peerFailed := false
			key, metric := cd.name+"/"+rs.row, rs.row+" "+cd.name
			switch rs.row {
			case "read_all":
				metric += " (one call, one buffer)"
			case "read_chunks":
				key += fmt.Sprintf("/c%d", rs.conc)
				metric += fmt.Sprintf(", concurrency %d", rs.conc)
			case "roundtrip":
				metric += ", 2 workers, new array flushed (no fsync, as zarr-python)"
			}
			// Best of reps for each side (time: the fastest run; peak
			// RSS: the largest), the sides taking turns.
			var res zarrRow
			var floor float64
			var pr *zarrPeerRow
			for rep := range reps {
				out := filepath.Join(dir, "out-"+cd.name+".scc")
				one, err := sccZarrRow(ctx, path, rs.row, rs.conc, c, rmp, out, cd.filters)
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
					fl, err := preadFloor(path, c.chunks(), rs.conc, rs.row == "read_all")
					if err != nil {
						return fmt.Errorf("pread floor %s: %w", key, err)
					}
					if rep == 0 || fl < floor {
						floor = fl
					}
				}
				if peer == nil || (rep > 0 && pr == nil) {
					continue
				}
				var v zarrPeerRow
				store := filepath.Join(dir, cd.name+".zarr")
				args := []string{rs.row, store, fmt.Sprint(c.Side), fmt.Sprint(c.Chunk)}
				switch rs.row {
				case "read_chunks":
					args = append(args, fmt.Sprint(rs.conc))
				case "roundtrip":
					args = append(args, filepath.Join(dir, "out-"+cd.name+".zarr"))
				}
				err = runScript(ctx, p, dir, "zarrbench_peer.py", &v, args...)
				os.RemoveAll(filepath.Join(dir, "out-"+cd.name+".zarr"))
				if err != nil {
					r.Errors = append(r.Errors, fmt.Sprintf("zarrbench: peer zarr %s: %v", key, err))
					pr = nil
					peerFailed = true
					continue
				}
				if pr == nil {
					pr = &v
				} else {
					pr.Seconds = min(pr.Seconds, v.Seconds)
					pr.MaxRSSKiB = max(pr.MaxRSSKiB, v.MaxRSSKiB)
				}
			}
			if peerFailed {
				pr = nil
			}
			if cd.name == "zstd" {
				unsharded[key] = pr
			}
			line := fmt.Sprintf("   %-22s scc %.3f s (peak RSS %s, +%s in the row)", key, res.Seconds, rssString(res.PeakRSS), rssDelta(res))
			if pr != nil {
				line += fmt.Sprintf(", zarr %.3f s (peak RSS %s)", pr.Seconds, rssString(pr.MaxRSSKiB<<10))
			}
			if floor > 0 {
				line += fmt.Sprintf(", pread floor %.3f s", floor)
			}
			o.logf("%s", line)
			zarrFigures(r, c, reps, cd.name, rs.row, key, metric, res, pr, peer, floor, codecs)
			if codec != nil && rs.row != "roundtrip" {
				codecFigure(r, c, key, metric, res, pr, *codec)
			}
		}
		os.Remove(path)
	}
	return runShardedZarrBench(ctx, o, p, r, c, dir, rmp, peer, unsharded)
}

// rssDelta is what a row added to the process's RSS.
func rssDelta(r zarrRow) string {
	if r.PeakRSS <= 0 {
		return "unknown"
	}
	return HumanBytes(max(r.PeakRSS-r.BaseRSS, 0))
}

func rssString(b int64) string {
	if b <= 0 {
		return "unknown"
	}
	return HumanBytes(b)
}

// zarrFigures adds a row's figures: time beside zarr-python, time beside
// the pread floor, and peak RSS beside zarr-python's.
func zarrFigures(r *Report, c ZarrBenchConfig, reps int, codec, row, key, metric string, res zarrRow, pr *zarrPeerRow, peer *zarrPeerVersions, floor float64, codecs string) {
	peerName := "zarr-python"
	if peer != nil {
		peerName = "zarr " + peer.Version
	}
	note := fmt.Sprintf("%d³ array, %d³ chunks, best of %d, every element verified (untimed)", c.Side, c.Chunk, reps)
	if row != "roundtrip" {
		note += "; " + destNote
	}
	if floor > 0 {
		note += "; pread floor " + trimFloat(floor) + " s"
	}
	if codec == "zstd" {
		note += "; " + codecs
	}
	t := Figure{Scenario: "zarrbench", Key: key, Metric: metric, Unit: "s", SCC: res.Seconds, Peer: peerName, Note: note}
	switch {
	case codec == "zstd" && row == "read_all":
		t.Target = &Target{Kind: "ratio", Value: 2}
	case codec == "zstd":
		t.Target = &Target{Kind: "ratio", Value: 1.5}
	case row == "roundtrip":
		t.Target = &Target{Kind: "ratio", Value: 2}
	}
	if pr != nil {
		t.PeerValue = ptr(pr.Seconds)
	}
	r.add(t)
	if floor > 0 {
		f := Figure{Scenario: "zarrbench", Key: key + "/floor", Metric: metric + ", beside pread of the same file",
			Unit: "s", SCC: res.Seconds, Peer: "pread floor", PeerValue: ptr(floor),
			Note: "the file's bytes read with pread at the same concurrency (read_all: GOMAXPROCS goroutines into one buffer)"}
		if codec == "raw" && row == "read_all" {
			f.Target = &Target{Kind: "ratio", Value: 0.8}
		}
		r.add(f)
	}
	if res.PeakRSS > 0 {
		m := Figure{Scenario: "zarrbench", Key: key + "/rss", Metric: metric + ", peak RSS", Unit: "MiB",
			SCC: float64(res.PeakRSS) / mib, Peer: peerName,
			Note: fmt.Sprintf("scc: VmHWM of the bench process, reset before the row, of which %s added during the row (cache: 256 MiB, ×2 while active, AdmitOnReread); zarr: ru_maxrss of its own process",
				rssDelta(res))}
		if codec == "zstd" {
			m.Target = &Target{Kind: "ratio", Value: 0.5}
		}
		if pr != nil {
			m.PeerValue = ptr(float64(pr.MaxRSSKiB<<10) / mib)
		}
		r.add(m)
	}
}

// codecFloor is the codec's own speed on this array: every chunk, encoded
// as scc's zstd filter encodes it (level 3, no frame checksum), decoded by
// the build's zstd alone on one goroutine into one reused buffer: no file,
// no cache, no copy.
type codecFloor struct {
	Seconds float64 // best of reps
}

func zstdCodecFloor(c ZarrBenchConfig, rmp []byte, reps int) (codecFloor, error) {
	// The build's own zstd (libzstd with cgo, klauspost/compress without)
	// through a pipeline of that one filter: frames as scc writes them,
	// decoded as scc decodes a verified chunk, minus everything else scc
	// does for a read.
	pl, err := filter.NewPipeline([]filter.Spec{{ID: filter.Zstd, Level: 3}}, 2)
	if err != nil {
		return codecFloor{}, err
	}
	buf := make([]byte, c.chunkBytes())
	frames := make([][]byte, c.chunks())
	masks := make([]uint32, c.chunks())
	for k := range frames {
		fillZarrChunk(buf, rmp, c, k)
		if frames[k], masks[k], err = pl.Encode(buf); err != nil {
			return codecFloor{}, err
		}
	}
	best := 0.0
	for rep := range reps {
		t0 := time.Now()
		for k, fr := range frames {
			out, err := pl.DecodeVerifiedTo(buf, fr, masks[k], len(buf))
			if err != nil {
				return codecFloor{}, err
			}
			if len(out) != len(buf) {
				return codecFloor{}, fmt.Errorf("decoded %d bytes, want %d", len(out), len(buf))
			}
		}
		if el := time.Since(t0).Seconds(); rep == 0 || el < best {
			best = el
		}
	}
	// The last chunk decoded is checked, so the loop decoded real data.
	if err := verifyZarrChunk(buf, rmp, c, len(frames)-1); err != nil {
		return codecFloor{}, err
	}
	return codecFloor{Seconds: best}, nil
}

// codecFigure sets a zstd read row's decoded bytes per CPU-second beside
// the codec's own single-goroutine speed: how much of each core scc spends
// on anything but the codec. The note says how fast the codec alone could
// be on all the cores the run had, which bounds any reader of the file on
// as many cores. The goal is 0.85× the codec for reads of chunks at any
// concurrency and 0.5× for a one-call read of the whole array, which also
// scatters every chunk's rows into the caller's buffer.
func codecFigure(r *Report, c ZarrBenchConfig, key, metric string, res zarrRow, pr *zarrPeerRow, cf codecFloor) {
	if res.CPUSeconds <= 0 || cf.Seconds <= 0 {
		return
	}
	mb := float64(c.arrayBytes()) / 1e6
	cores := runtime.GOMAXPROCS(0)
	note := fmt.Sprintf("codec alone: %s decoding every chunk's frame on one goroutine into one reused buffer, %.3f s; on all %d cores at best %.3f s",
		zstdCodecName(), cf.Seconds, cores, cf.Seconds/float64(cores))
	if pr != nil {
		note += fmt.Sprintf(" (1.5× zarr-python would need %.3f s)", pr.Seconds/1.5)
	}
	r.add(Figure{Scenario: "zarrbench", Key: key + "/percore", Metric: metric + ", decoded MB per CPU-second",
		Unit: "MB/s", HigherIsBetter: true, SCC: mb / res.CPUSeconds, Peer: "codec alone, 1 goroutine",
		PeerValue: ptr(mb / cf.Seconds), Target: &Target{Kind: "ratio", Value: perCoreGoal(key)}, Note: note})
}

// perCoreGoal is a read row's goal for decoded bytes per CPU-second,
// beside the codec alone (codecFigure).
func perCoreGoal(key string) float64 {
	if strings.Contains(key, "/read_all") {
		return 0.5
	}
	return 0.85
}
