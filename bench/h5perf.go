package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/scc-dev/scc/engine"
)

// H5perfConfig is the h5perf_serial workload: a 2-D dataset of bytes,
// written and then read in transfer-buffer-sized blocks in row-major order
// (h5perf's default access order -r 1,2), chunked, unfiltered.
type H5perfConfig struct {
	Dims     [2]uint64 // -e
	Transfer [2]uint64 // -x
	Chunk    [2]uint64 // -c
	Dir      string    // where the file goes; default os.TempDir()
	// NoSync runs scc with engine.Options.NoSync (no fsync at Flush and
	// Close), the durability h5perf_serial itself asks for.
	NoSync bool
}

// Validate reports whether the transfer buffer tiles the dataset.
func (c H5perfConfig) Validate() error {
	for d := 0; d < 2; d++ {
		if c.Dims[d] == 0 || c.Transfer[d] == 0 || c.Chunk[d] == 0 {
			return fmt.Errorf("bench: h5perf: zero dimension in %v %v %v", c.Dims, c.Transfer, c.Chunk)
		}
		if c.Dims[d]%c.Transfer[d] != 0 {
			return fmt.Errorf("bench: h5perf: transfer %v does not tile dataset %v", c.Transfer, c.Dims)
		}
	}
	if c.Transfer[0]*c.Transfer[1] > 1<<30 {
		return fmt.Errorf("bench: h5perf: transfer buffer too large")
	}
	return nil
}

// Args renders the configuration as h5perf_serial's -e/-x/-c options.
func (c H5perfConfig) Args() []string {
	l := func(v [2]uint64) string { return sizeSpec(v[0]) + "," + sizeSpec(v[1]) }
	return []string{"-e", l(c.Dims), "-x", l(c.Transfer), "-c", l(c.Chunk)}
}

func sizeSpec(v uint64) string {
	switch {
	case v%(1<<20) == 0:
		return fmt.Sprintf("%dM", v>>20)
	case v%(1<<10) == 0:
		return fmt.Sprintf("%dK", v>>10)
	}
	return strconv.FormatUint(v, 10)
}

// H5perfResult holds MiB/s figures (h5perf's "MB/s" is 2^20 bytes/s) of
// the open-write-close and open-read-close phases.
type H5perfResult struct {
	Bytes     int64
	WriteMBps float64 // create, write every block, Flush (fsync), Close
	// WriteCPU is the process's CPU seconds (user and system) over the
	// same phase: on a shared machine it moves less than the wall-clock
	// figure with the load of others, and shows where a gap is work.
	WriteCPU float64
	ReadMBps float64 // open, read every block, Close
}

func h5perfPattern(buf []byte, bi uint64) {
	for i := range buf {
		buf[i] = byte(uint64(i)*31 + bi*7)
	}
}

// H5perfSCC runs the workload through scc.
func H5perfSCC(ctx context.Context, c H5perfConfig) (*H5perfResult, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	dir := c.Dir
	if dir == "" {
		dir = os.TempDir()
	}
	fh, err := os.CreateTemp(dir, "scc-h5perf-*.scc")
	if err != nil {
		return nil, err
	}
	path := fh.Name()
	fh.Close()
	defer os.Remove(path)

	nb := [2]uint64{c.Dims[0] / c.Transfer[0], c.Dims[1] / c.Transfer[1]}
	buf := make([]byte, c.Transfer[0]*c.Transfer[1])
	want := make([]byte, len(buf))
	box := func(bi uint64) engine.Selection {
		r, col := bi/nb[1], bi%nb[1]
		return engine.Box([]uint64{r * c.Transfer[0], col * c.Transfer[1]}, c.Transfer[:])
	}
	res := &H5perfResult{Bytes: int64(c.Dims[0] * c.Dims[1])}
	// h5perf_serial fills its transfer buffer once, before it times
	// anything; so does this.
	h5perfPattern(buf, 0)
	h5perfPattern(want, 0)

	t0, c0 := time.Now(), cpuSeconds()
	if err := h5perfWrite(ctx, c, path, buf, box, nb[0]*nb[1]); err != nil {
		return nil, err
	}
	res.WriteMBps = mibps(res.Bytes, time.Since(t0))
	res.WriteCPU = cpuSeconds() - c0

	t0 = time.Now()
	f, err := engine.Open(ctx, path, &engine.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer f.Close(ctx)
	ds, err := f.OpenDataset(ctx, "perf", nil)
	if err != nil {
		return nil, err
	}
	for bi := uint64(0); bi < nb[0]*nb[1]; bi++ {
		if err := ds.Read(ctx, box(bi), buf); err != nil {
			return nil, err
		}
		// Spot-check the first and last blocks so a broken read path can
		// not pass as a fast one.
		if bi == 0 || bi == nb[0]*nb[1]-1 {
			if !bytes.Equal(buf, want) {
				return nil, fmt.Errorf("%w: h5perf block %d", ErrVerify, bi)
			}
		}
	}
	if err := f.Close(ctx); err != nil {
		return nil, err
	}
	res.ReadMBps = mibps(res.Bytes, time.Since(t0))
	return res, nil
}

// h5perfWrite is the write phase of H5perfSCC: create the file at path,
// write buf to each of the n blocks box names, Flush and Close.
func h5perfWrite(ctx context.Context, c H5perfConfig, path string, buf []byte, box func(uint64) engine.Selection, n uint64) error {
	f, err := engine.Create(ctx, path, &engine.Options{NoSync: c.NoSync})
	if err != nil {
		return err
	}
	ds, err := f.CreateDataset(ctx, "perf", engine.DatasetSpec{
		Type: engine.Uint8, Shape: c.Dims[:], Chunk: c.Chunk[:],
	})
	if err != nil {
		f.Close(ctx)
		return err
	}
	for bi := uint64(0); bi < n; bi++ {
		if err := ds.Write(ctx, box(bi), buf); err != nil {
			f.Close(ctx)
			return err
		}
	}
	if err := f.Flush(ctx); err != nil {
		f.Close(ctx)
		return err
	}
	return f.Close(ctx)
}

// H5perfRawWrite writes the workload's bytes as raw pwrites of one chunk
// each (chunk-sized buffers at increasing offsets of a new file, closed
// without fsync, the durability h5perf_serial has) and returns MiB/s: the
// ceiling of any writer that stores whole chunks through the page cache,
// HDF5's direct chunk writes included. With sum, each chunk's CRC32C is
// computed before its pwrite, as every scc chunk frame carries one.
func H5perfRawWrite(ctx context.Context, c H5perfConfig, sum bool) (float64, error) {
	v, _, err := h5perfRawWrite(ctx, c, sum, false)
	return v, err
}

// h5perfRawWrite is H5perfRawWrite, also returning the CPU seconds
// (H5perfResult.WriteCPU) it took. With framed (and sum) it writes the
// bytes as scc's chunk frames lie in its file (FORMAT.md "Chunk frame"):
// each chunk followed by its 4-byte checksum, frames of 256 KiB and more
// starting on 4 KiB boundaries. That is the floor of any writer of the
// format: on ext4 with large folios the 4-byte tails and the holes
// between frames cost it 10-20 % of CPU beside one contiguous run of
// 1 MiB-aligned writes.
func h5perfRawWrite(ctx context.Context, c H5perfConfig, sum, framed bool) (mbps, cpu float64, err error) {
	fh, total, chunk, err := c.rawFile("raw")
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(fh.Name())
	defer fh.Close()
	buf := make([]byte, chunk+4)
	h5perfPattern(buf[:chunk], 0)
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	var sums uint32
	t0, c0 := time.Now(), cpuSeconds()
	for off, at := int64(0), int64(0); off < total; off += chunk {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		b := buf[:min(chunk, total-off)]
		if sum {
			s := crc32.Checksum(b, castagnoli)
			sums += s
			if framed {
				b = binary.LittleEndian.AppendUint32(b, s)
			}
		}
		if _, err := fh.WriteAt(b, at); err != nil {
			return 0, 0, err
		}
		at += int64(len(b))
		if framed && len(b) >= 256<<10 {
			at = (at + 4095) &^ 4095
		}
	}
	if err := fh.Close(); err != nil {
		return 0, 0, err
	}
	_ = sums
	return mibps(total, time.Since(t0)), cpuSeconds() - c0, nil
}

// h5perfRawOverlap is h5perfRawWrite in scc's frames with each chunk's
// CRC32C computed on a second goroutine while the chunk's bytes are
// written, its 4-byte tail written after both: the floor of a writer that
// takes the checksum off the writing goroutine (as scc does for large
// chunks, cache/latesum.go), which on an idle second core can pass the
// serial pwrite + CRC32C.
func h5perfRawOverlap(ctx context.Context, c H5perfConfig) (mbps, cpu float64, err error) {
	fh, total, chunk, err := c.rawFile("overlap")
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(fh.Name())
	defer fh.Close()
	buf := make([]byte, chunk)
	h5perfPattern(buf, 0)
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	work, done := make(chan []byte, 1), make(chan uint32, 1)
	defer close(work)
	go func() {
		for b := range work {
			done <- crc32.Checksum(b, castagnoli)
		}
	}()
	var tail [4]byte
	t0, c0 := time.Now(), cpuSeconds()
	for off, at := int64(0), int64(0); off < total; off += chunk {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		b := buf[:min(chunk, total-off)]
		work <- b
		_, werr := fh.WriteAt(b, at)
		binary.LittleEndian.PutUint32(tail[:], <-done)
		if werr != nil {
			return 0, 0, werr
		}
		if _, err := fh.WriteAt(tail[:], at+int64(len(b))); err != nil {
			return 0, 0, err
		}
		at += int64(len(b)) + 4
		if len(b)+4 >= 256<<10 {
			at = (at + 4095) &^ 4095
		}
	}
	if err := fh.Close(); err != nil {
		return 0, 0, err
	}
	return mibps(total, time.Since(t0)), cpuSeconds() - c0, nil
}

// rawFile validates c and creates the temporary file of a raw floor
// (named for what it writes) in c.Dir, returning the workload's total
// bytes and its chunk's.
func (c H5perfConfig) rawFile(what string) (fh *os.File, total, chunk int64, err error) {
	if err := c.Validate(); err != nil {
		return nil, 0, 0, err
	}
	dir := c.Dir
	if dir == "" {
		dir = os.TempDir()
	}
	if fh, err = os.CreateTemp(dir, "scc-h5perf-"+what+"-*"); err != nil {
		return nil, 0, 0, err
	}
	total = int64(c.Dims[0] * c.Dims[1])
	return fh, total, min(int64(c.Chunk[0]*c.Chunk[1]), total), nil
}

// gathers reports whether c's transfers are smaller than its chunks and
// tile them: each chunk is written in several calls.
func (c H5perfConfig) gathers() bool {
	return c.Transfer != c.Chunk && c.Chunk[0]%c.Transfer[0] == 0 && c.Chunk[1]%c.Transfer[1] == 0 &&
		c.Dims[0]%c.Chunk[0] == 0 && c.Dims[1]%c.Chunk[1] == 0
}

// h5perfRawGather is h5perfRawWrite (framed, with the checksum) for a
// workload whose transfers are parts of chunks (gathers): each chunk is
// first assembled from transfer-sized blocks, row by row, as any writer
// that returns before the chunk is complete must copy the caller's bytes
// somewhere (scc's cached path copies them into the chunk's buffer once).
// It is the floor of such a writer: the framed floor plus that one copy.
func h5perfRawGather(ctx context.Context, c H5perfConfig) (mbps, cpu float64, err error) {
	if err := c.Validate(); err != nil {
		return 0, 0, err
	}
	if !c.gathers() {
		return 0, 0, fmt.Errorf("bench: h5perf: transfer %v does not tile chunk %v", c.Transfer, c.Chunk)
	}
	fh, total, _, err := c.rawFile("gather")
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(fh.Name())
	defer fh.Close()
	chunk := int64(c.Chunk[0] * c.Chunk[1])
	src := make([]byte, c.Transfer[0]*c.Transfer[1])
	h5perfPattern(src, 0)
	buf := make([]byte, chunk+4)
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	tr, tc, cc := c.Transfer[0], c.Transfer[1], c.Chunk[1]
	t0, c0 := time.Now(), cpuSeconds()
	for off, at := int64(0), int64(0); off < total; off += chunk {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		b := buf[:chunk]
		for bi := uint64(0); bi < c.Chunk[0]/tr; bi++ {
			for bj := uint64(0); bj < cc/tc; bj++ {
				for i := uint64(0); i < tr; i++ {
					copy(b[(bi*tr+i)*cc+bj*tc:][:tc], src[i*tc:][:tc])
				}
			}
		}
		b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
		if _, err := fh.WriteAt(b, at); err != nil {
			return 0, 0, err
		}
		at += int64(len(b))
		if len(b) >= 256<<10 {
			at = (at + 4095) &^ 4095
		}
	}
	if err := fh.Close(); err != nil {
		return 0, 0, err
	}
	return mibps(total, time.Since(t0)), cpuSeconds() - c0, nil
}

// ErrPeerOutput is returned when a peer's output cannot be parsed.
var ErrPeerOutput = errors.New("bench: unexpected peer output")

// H5perfFigures maps "API/Phase" (for example "HDF5/Write Open-Close") to
// the average throughput h5perf_serial printed.
type H5perfFigures map[string]float64

// ParseH5perf reads h5perf_serial's report.
func ParseH5perf(out string) (H5perfFigures, error) {
	figs := H5perfFigures{}
	api, phase := "", ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(l, "IO API ="):
			api = strings.TrimSpace(strings.TrimPrefix(l, "IO API ="))
		case strings.HasSuffix(l, "):") && strings.Contains(l, "iteration") && strings.Contains(l, "("):
			// "Write Open-Close (1 iteration):" names the phase.
			phase = strings.TrimSpace(l[:strings.Index(l, "(")])
		case strings.HasPrefix(l, "Average Throughput:") && api != "" && phase != "":
			v := strings.Fields(strings.TrimPrefix(l, "Average Throughput:"))
			if len(v) < 1 {
				return nil, fmt.Errorf("%w: %q", ErrPeerOutput, l)
			}
			x, err := strconv.ParseFloat(v[0], 64)
			if err != nil {
				return nil, fmt.Errorf("%w: %q", ErrPeerOutput, l)
			}
			figs[api+"/"+phase] = x
		}
	}
	if len(figs) == 0 {
		return nil, fmt.Errorf("%w: no throughput in h5perf_serial output", ErrPeerOutput)
	}
	return figs, nil
}

// H5perfPeer runs h5perf_serial (HDF5 and POSIX APIs) on the same workload.
func H5perfPeer(ctx context.Context, h5perf string, c H5perfConfig) (H5perfFigures, error) {
	dir, err := os.MkdirTemp(c.Dir, "h5perf-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	args := append([]string{"-A", "hdf5,posix", "-i", "1"}, c.Args()...)
	cmd := exec.CommandContext(ctx, h5perf, args...)
	cmd.Dir = dir
	// h5perf_serial puts its files under HDF5_PREFIX when set.
	cmd.Env = append(os.Environ(), "HDF5_PREFIX="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", filepath.Base(h5perf), strings.Join(args, " "), err, lastLines(string(out), 5))
	}
	return ParseH5perf(string(out))
}

// h5perfConfigs are the workloads every run reports: whole-chunk transfers
// at -e 8K,8K (64 MiB) and 16K,16K (256 MiB), and a partial-chunk transfer
// (-x 512,512 with -c 1K,1K: four requests per chunk).
func h5perfConfigs(o Options) []H5perfConfig {
	if o.Tiny {
		return []H5perfConfig{
			{Dims: [2]uint64{256, 256}, Transfer: [2]uint64{64, 64}, Chunk: [2]uint64{64, 64}},
			{Dims: [2]uint64{256, 256}, Transfer: [2]uint64{32, 32}, Chunk: [2]uint64{64, 64}},
		}
	}
	return []H5perfConfig{
		{Dims: [2]uint64{8 << 10, 8 << 10}, Transfer: [2]uint64{1 << 10, 1 << 10}, Chunk: [2]uint64{1 << 10, 1 << 10}},
		{Dims: [2]uint64{16 << 10, 16 << 10}, Transfer: [2]uint64{1 << 10, 1 << 10}, Chunk: [2]uint64{1 << 10, 1 << 10}},
		{Dims: [2]uint64{8 << 10, 8 << 10}, Transfer: [2]uint64{512, 512}, Chunk: [2]uint64{1 << 10, 1 << 10}},
	}
}

// runH5perf is scenario (a). It runs in the scratch directory (a real
// disk) twice for scc, with its durable close and with NoSync (scratch
// files: h5perf_serial never syncs), and, where /dev/shm is a writable
// tmpfs, once more there, where an fsync costs nothing.
func runH5perf(ctx context.Context, o Options, p *Peers, r *Report) error {
	dir, cleanup, err := tempDir(o, "h5perf")
	if err != nil {
		return err
	}
	defer cleanup()
	shm := ""
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "scc-bench-h5perf-"); err == nil {
			defer os.RemoveAll(d)
			shm = d
		}
	}
	for _, cfg := range h5perfConfigs(o) {
		if err := h5perfIn(ctx, o, p, r, cfg, dir, ""); err != nil {
			return err
		}
		if shm != "" {
			if err := h5perfIn(ctx, o, p, r, cfg, shm, "tmpfs"); err != nil {
				return err
			}
		}
	}
	return nil
}

// h5perfSamples is how many times each side of an h5perf row runs. One
// pass moves 64–256 MiB in 15–100 ms, and on a shared virtual machine a
// single pass of the same binary moved up to 1.9× between runs (scc and HDF5
// alike): the statuses flipped with the host, not with the code. So every
// row is the median of h5perfSamples passes of each side, the passes of
// all sides interleaved (scc, scc NoSync, HDF5, the raw ceilings, then
// again), and its note gives the range. Tiny runs (tests) take one.
func h5perfSamples(o Options) int { return o.size(3, 3, 1) }

// sampled holds one figure's passes.
type sampled []float64

// median returns the middle pass (the mean of the two middle ones for an
// even count), 0 for none.
func (s sampled) median() float64 {
	if len(s) == 0 {
		return 0
	}
	v := append([]float64(nil), s...)
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// span describes the passes for a note: "median of 3 passes, 1 234–2 345".
func (s sampled) span() string {
	if len(s) < 2 {
		return "1 pass"
	}
	return fmt.Sprintf("median of %d passes, %.0f–%.0f", len(s), slices.Min(s), slices.Max(s))
}

func h5perfIn(ctx context.Context, o Options, p *Peers, r *Report, cfg H5perfConfig, dir, where string) error {
	cfg.Dir = dir
	suffix := ""
	if where != "" {
		suffix = ", " + where
	}
	args := strings.Join(cfg.Args(), " ")
	size := int64(cfg.Dims[0] * cfg.Dims[1])
	o.logf("   h5perf_serial %s (%s)%s", args, HumanBytes(size), suffix)
	// On disk, scc runs once more without fsync: the durability
	// h5perf_serial has. (On tmpfs a sync costs nothing, so the row would
	// repeat.)
	withNoSync := where == ""
	var sccW, sccR, nsW, nsR sampled
	var sccC, nsC sampled        // CPU seconds of the write passes
	raw := [5]sampled{}          // without, with the CRC32C, in scc's frames, gathered into them, and with the CRC32C beside the write
	rawC := [5]sampled{}         // their CPU seconds
	peer := map[string]sampled{} // nil once a peer run failed
	// sccPass runs scc once, NoSync or not, and adds its figures to w, rd.
	sccPass := func(noSync bool, label string, w, rd, cpu *sampled) error {
		c := cfg
		c.NoSync = noSync
		settle(dir, size)
		res, err := H5perfSCC(ctx, c)
		if err != nil {
			return err
		}
		*w, *rd, *cpu = append(*w, res.WriteMBps), append(*rd, res.ReadMBps), append(*cpu, res.WriteCPU)
		o.logf("   %s: write %.1f MiB/s, read %.1f MiB/s", label, res.WriteMBps, res.ReadMBps)
		return nil
	}
	for pass := 0; pass < h5perfSamples(o); pass++ {
		if err := sccPass(false, "scc", &sccW, &sccR, &sccC); err != nil {
			return err
		}
		if withNoSync {
			if err := sccPass(true, "scc NoSync", &nsW, &nsR, &nsC); err != nil {
				return err
			}
		}
		if p.H5perf != "" && peer != nil {
			settle(dir, size)
			figs, err := H5perfPeer(ctx, p.H5perf, cfg)
			if err != nil {
				r.Errors = append(r.Errors, "h5perf: peer: "+err.Error())
				peer = nil // one failure is reported; its rows show no peer
			} else {
				for k, v := range figs {
					peer[k] = append(peer[k], v)
				}
				o.logf("   h5perf_serial: HDF5 write %.1f, read %.1f; POSIX write %.1f, read %.1f MiB/s",
					figs["HDF5/Write Open-Close"], figs["HDF5/Read Open-Close"],
					figs["POSIX/Write Open-Close"], figs["POSIX/Read Open-Close"])
			}
		}
		// The write ceiling: raw pwrite of the same bytes, a chunk per
		// call, without and with the CRC32C every scc chunk carries. HDF5
		// writes a whole unfiltered chunk with one pwrite of the caller's
		// buffer, so its figure sits near the first; scc's (NoSync on
		// disk) can not pass it.
		for i, sum := range []bool{false, true} {
			settle(dir, size)
			v, cpu, err := h5perfRawWrite(ctx, cfg, sum, false)
			if err != nil {
				return err
			}
			raw[i], rawC[i] = append(raw[i], v), append(rawC[i], cpu)
			o.logf("   raw pwrite (CRC32C %v) of the same bytes: %.1f MiB/s", sum, v)
		}
		// And the format's floor: the same with each chunk framed as
		// scc stores it (h5perfRawWrite).
		settle(dir, size)
		v, cpu, err := h5perfRawWrite(ctx, cfg, true, true)
		if err != nil {
			return err
		}
		raw[2], rawC[2] = append(raw[2], v), append(rawC[2], cpu)
		o.logf("   raw pwrite + CRC32C of the same bytes in scc's frames: %.1f MiB/s", v)
		// And with the CRC32C on a second goroutine (h5perfRawOverlap).
		settle(dir, size)
		v, cpu, err = h5perfRawOverlap(ctx, cfg)
		if err != nil {
			return err
		}
		raw[4], rawC[4] = append(raw[4], v), append(rawC[4], cpu)
		o.logf("   raw pwrite of the same bytes in scc's frames, CRC32C on a second goroutine: %.1f MiB/s", v)
		// Transfers smaller than chunks: the same, each chunk first
		// assembled from its transfers (the one copy a writer that keeps
		// the caller's bytes makes).
		if cfg.gathers() {
			settle(dir, size)
			v, cpu, err := h5perfRawGather(ctx, cfg)
			if err != nil {
				return err
			}
			raw[3], rawC[3] = append(raw[3], v), append(rawC[3], cpu)
			o.logf("   raw gather + pwrite + CRC32C of the same bytes in scc's frames: %.1f MiB/s", v)
		}
	}
	if p.H5perf == "" {
		r.missing("h5perf_serial (hdf5-tools)")
	}
	peerValue := func(key string) *float64 {
		if s := peer[key]; len(s) > 0 {
			return ptr(s.median())
		}
		return nil
	}
	peerSpan := func(key string) string {
		if s := peer[key]; len(s) > 0 {
			return "; peer " + s.span()
		}
		return ""
	}
	for _, ph := range []struct {
		key, metric, phase string
		v, ns              sampled
	}{{"write", "write (open-write-close) " + args + suffix, "Write Open-Close", sccW, nsW},
		{"read", "read (open-read-close) " + args + suffix, "Read Open-Close", sccR, nsR}} {
		key := ph.key + "-" + strings.NewReplacer(" ", "", ",", "x").Replace(args)
		if where != "" {
			key += "-" + where
		}
		note := "scc " + ph.v.span() + peerSpan("HDF5/"+ph.phase)
		if strings.HasPrefix(ph.phase, "Write") && where == "" {
			note += "; scc's close includes fsync, h5perf's does not; see the NoSync row and the tmpfs rows"
		}
		r.add(Figure{Scenario: "h5perf", Key: key, Metric: ph.metric, Unit: "MiB/s", HigherIsBetter: true,
			SCC: ph.v.median(), Peer: "HDF5 (h5perf_serial)", PeerValue: peerValue("HDF5/" + ph.phase),
			Target: &Target{Kind: "ratio", Value: 1.2}, Note: note})
		if withNoSync {
			r.add(Figure{Scenario: "h5perf", Key: key + "-nosync", Metric: ph.metric + ", scc with NoSync", Unit: "MiB/s",
				HigherIsBetter: true, SCC: ph.ns.median(), Peer: "HDF5 (h5perf_serial)", PeerValue: peerValue("HDF5/" + ph.phase),
				Target: &Target{Kind: "ratio", Value: 1.2},
				Note:   "engine.Options.NoSync: no fsync, as h5perf_serial (scratch files only); scc " + ph.ns.span() + peerSpan("HDF5/"+ph.phase)})
		}
		r.add(Figure{Scenario: "h5perf", Key: key, Metric: ph.metric, Unit: "MiB/s", HigherIsBetter: true,
			SCC: ph.v.median(), Peer: "POSIX (h5perf_serial)", PeerValue: peerValue("POSIX/" + ph.phase),
			Note: "POSIX rows: h5perf_serial's raw write()/read() of the same bytes; scc " + ph.v.span() + peerSpan("POSIX/"+ph.phase)})
	}
	w, wc := sccW, sccC
	metric := "write (open-write-close) " + args + suffix
	if withNoSync {
		w, wc = nsW, nsC
		metric += ", scc with NoSync"
	}
	for i, sum := range []bool{false, true} {
		peerName, key, note := "raw pwrite of the same bytes", "write-raw", "a chunk per pwrite, no fsync: the page cache's speed, HDF5's ceiling too"
		if sum {
			peerName, key, note = "raw pwrite + CRC32C of the same bytes", "write-rawsum", "every scc chunk frame carries a CRC32C, computed before the write"
		}
		key += "-" + strings.NewReplacer(" ", "", ",", "x").Replace(args)
		if where != "" {
			key += "-" + where
		}
		f := Figure{Scenario: "h5perf", Key: key, Metric: metric, Unit: "MiB/s", HigherIsBetter: true,
			SCC: w.median(), Peer: peerName, PeerValue: ptr(raw[i].median()),
			Note: note + "; scc " + w.span() + ", raw " + raw[i].span() + cpuRatios(wc, rawC[i]) + framedFloor(sum, w, wc, raw[2], rawC[2]) + overlapFloor(sum, w, raw[4])}
		if sum {
			// Writes at the disk's speed: within 10 % of writing the
			// same bytes and their checksum with nothing else.
			f.Target = &Target{Kind: "ratio", Value: 0.9}
		}
		r.add(f)
	}
	if len(raw[3]) > 0 {
		key := "write-rawgather-" + strings.NewReplacer(" ", "", ",", "x").Replace(args)
		if where != "" {
			key += "-" + where
		}
		r.add(Figure{Scenario: "h5perf", Key: key, Metric: metric, Unit: "MiB/s", HigherIsBetter: true,
			SCC: w.median(), Peer: "raw gather + pwrite + CRC32C in scc's frames", PeerValue: ptr(raw[3].median()),
			Note: "each chunk assembled from its transfers (one copy of the caller's bytes, which a writer returning before the chunk is whole must make), then written framed as scc stores it: the floor of partial-chunk writes; scc " +
				w.span() + ", raw " + raw[3].span() + cpuRatios(wc, rawC[3])})
	}
	return nil
}

// cpuRatios describes the CPU time of scc's write passes beside the raw
// ceiling's, pass by pass (each ratio is raw CPU over scc CPU, as the
// throughput ratio is scc over raw): where the wall-clock ratio moves with
// the machine's load, this one shows how much of a gap is work.
func cpuRatios(scc, raw sampled) string {
	var r sampled
	for i := range min(len(scc), len(raw)) {
		if scc[i] > 0 && raw[i] > 0 {
			r = append(r, raw[i]/scc[i])
		}
	}
	if len(r) == 0 {
		return ""
	}
	return fmt.Sprintf("; CPU seconds per pass, raw/scc %.2f× (%.2f–%.2f), scc %.0f ms, raw %.0f ms (medians)",
		r.median(), slices.Min(r), slices.Max(r), scc.median()*1e3, raw.median()*1e3)
}

// overlapFloor describes, on the CRC32C row, the raw writer of scc's
// frames with the CRC32C on a second goroutine (h5perfRawOverlap).
func overlapFloor(sum bool, scc, raw sampled) string {
	if !sum || len(raw) == 0 || raw.median() <= 0 {
		return ""
	}
	return fmt.Sprintf("; with the CRC32C on a second goroutine while the bytes are written, raw writes %.0f MiB/s (%s), scc %.2f× that",
		raw.median(), raw.span(), scc.median()/raw.median())
}

// framedFloor describes, on the CRC32C row, the raw writer of the same
// bytes in scc's chunk frames (h5perfRawWrite): the floor of the format,
// beside which scc's figures are its own overhead.
func framedFloor(sum bool, scc, sccCPU, raw, rawCPU sampled) string {
	if !sum || len(raw) == 0 || raw.median() <= 0 {
		return ""
	}
	return fmt.Sprintf("; in scc's chunk frames (each chunk and its 4-byte checksum, from 256 KiB on 4 KiB-aligned) raw writes %.0f MiB/s (%s), scc %.2f× that",
		raw.median(), raw.span(), scc.median()/raw.median()) + strings.Replace(cpuRatios(sccCPU, rawCPU), "raw/scc", "framed raw/scc", 1)
}
