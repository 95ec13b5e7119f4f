package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
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
	ReadMBps  float64 // open, read every block, Close
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

	t0 := time.Now()
	f, err := engine.Create(path, &engine.Options{NoSync: c.NoSync})
	if err != nil {
		return nil, err
	}
	ds, err := f.CreateDataset("perf", engine.DatasetSpec{
		Type: engine.Uint8, Shape: c.Dims[:], Chunk: c.Chunk[:],
	})
	if err != nil {
		f.Close()
		return nil, err
	}
	for bi := uint64(0); bi < nb[0]*nb[1]; bi++ {
		if err := ds.Write(ctx, box(bi), buf); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := f.Flush(ctx); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	res.WriteMBps = mibps(res.Bytes, time.Since(t0))

	t0 = time.Now()
	f, err = engine.Open(path, &engine.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ds, err = f.OpenDataset("perf")
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
	if err := f.Close(); err != nil {
		return nil, err
	}
	res.ReadMBps = mibps(res.Bytes, time.Since(t0))
	return res, nil
}

// H5perfRawWrite writes the workload's bytes as raw pwrites of one chunk
// each (chunk-sized buffers at increasing offsets of a new file, closed
// without fsync, the durability h5perf_serial has) and returns MiB/s: the
// ceiling of any writer that stores whole chunks through the page cache,
// HDF5's direct chunk writes included. With sum, each chunk's CRC32C is
// computed before its pwrite, as every scc chunk frame carries one.
func H5perfRawWrite(ctx context.Context, c H5perfConfig, sum bool) (float64, error) {
	if err := c.Validate(); err != nil {
		return 0, err
	}
	dir := c.Dir
	if dir == "" {
		dir = os.TempDir()
	}
	fh, err := os.CreateTemp(dir, "scc-h5perf-raw-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(fh.Name())
	defer fh.Close()
	total := int64(c.Dims[0] * c.Dims[1])
	buf := make([]byte, min(int64(c.Chunk[0]*c.Chunk[1]), total))
	h5perfPattern(buf, 0)
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	var sums uint32
	t0 := time.Now()
	for off := int64(0); off < total; off += int64(len(buf)) {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		b := buf[:min(int64(len(buf)), total-off)]
		if sum {
			sums += crc32.Checksum(b, castagnoli)
		}
		if _, err := fh.WriteAt(b, off); err != nil {
			return 0, err
		}
	}
	if err := fh.Close(); err != nil {
		return 0, err
	}
	_ = sums
	return mibps(total, time.Since(t0)), nil
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

func h5perfIn(ctx context.Context, o Options, p *Peers, r *Report, cfg H5perfConfig, dir, where string) error {
	cfg.Dir = dir
	suffix := ""
	if where != "" {
		suffix = ", " + where
	}
	args := strings.Join(cfg.Args(), " ")
	o.logf("   h5perf_serial %s (%s)%s", args, HumanBytes(int64(cfg.Dims[0]*cfg.Dims[1])), suffix)
	settle(dir, int64(cfg.Dims[0]*cfg.Dims[1]))
	res, err := H5perfSCC(ctx, cfg)
	if err != nil {
		return err
	}
	o.logf("   scc: write %.1f MiB/s, read %.1f MiB/s", res.WriteMBps, res.ReadMBps)
	// On disk, scc once more without fsync: the durability h5perf_serial
	// has. (On tmpfs a sync costs nothing, so the row would repeat.)
	var nosync *H5perfResult
	if where == "" {
		c := cfg
		c.NoSync = true
		settle(dir, int64(cfg.Dims[0]*cfg.Dims[1]))
		if nosync, err = H5perfSCC(ctx, c); err != nil {
			return err
		}
		o.logf("   scc NoSync: write %.1f MiB/s, read %.1f MiB/s", nosync.WriteMBps, nosync.ReadMBps)
	}
	var peer H5perfFigures
	if p.H5perf == "" {
		r.missing("h5perf_serial (hdf5-tools)")
	} else {
		settle(dir, int64(cfg.Dims[0]*cfg.Dims[1]))
		peer, err = H5perfPeer(ctx, p.H5perf, cfg)
		if err != nil {
			r.Errors = append(r.Errors, "h5perf: peer: "+err.Error())
		} else {
			o.logf("   h5perf_serial: HDF5 write %.1f, read %.1f; POSIX write %.1f, read %.1f MiB/s",
				peer["HDF5/Write Open-Close"], peer["HDF5/Read Open-Close"],
				peer["POSIX/Write Open-Close"], peer["POSIX/Read Open-Close"])
		}
	}
	for _, ph := range []struct {
		key, metric, phase string
		v                  float64
	}{{"write", "write (open-write-close) " + args + suffix, "Write Open-Close", res.WriteMBps},
		{"read", "read (open-read-close) " + args + suffix, "Read Open-Close", res.ReadMBps}} {
		key := ph.key + "-" + strings.NewReplacer(" ", "", ",", "x").Replace(args)
		if where != "" {
			key += "-" + where
		}
		f := Figure{Scenario: "h5perf", Key: key, Metric: ph.metric, Unit: "MiB/s", HigherIsBetter: true,
			SCC: ph.v, Peer: "HDF5 (h5perf_serial)", Target: &Target{Kind: "ratio", Value: 1.2}}
		if v, ok := peer["HDF5/"+ph.phase]; ok {
			f.PeerValue = ptr(v)
		}
		if strings.HasPrefix(ph.phase, "Write") && where == "" {
			f.Note = "scc's close includes fsync, h5perf's does not; see the NoSync row and the tmpfs rows"
		}
		r.add(f)
		if nosync != nil {
			v := nosync.WriteMBps
			if ph.key == "read" {
				v = nosync.ReadMBps
			}
			n := Figure{Scenario: "h5perf", Key: key + "-nosync", Metric: ph.metric + ", scc with NoSync", Unit: "MiB/s",
				HigherIsBetter: true, SCC: v, Peer: "HDF5 (h5perf_serial)", Target: &Target{Kind: "ratio", Value: 1.2},
				Note: "engine.Options.NoSync: no fsync, as h5perf_serial (scratch files only)"}
			if pv, ok := peer["HDF5/"+ph.phase]; ok {
				n.PeerValue = ptr(pv)
			}
			r.add(n)
		}
		g := Figure{Scenario: "h5perf", Key: key, Metric: ph.metric, Unit: "MiB/s", HigherIsBetter: true,
			SCC: ph.v, Peer: "POSIX (h5perf_serial)", Note: "POSIX rows: h5perf_serial's raw write()/read() of the same bytes"}
		if v, ok := peer["POSIX/"+ph.phase]; ok {
			g.PeerValue = ptr(v)
		}
		r.add(g)
	}
	// The write ceiling: raw pwrite of the same bytes, a chunk per call,
	// without and with the CRC32C every scc chunk carries. HDF5 writes a
	// whole unfiltered chunk with one pwrite of the caller's buffer, so its
	// figure sits near the first; scc's (NoSync on disk) can not pass it.
	w := res
	if nosync != nil {
		w = nosync
	}
	for _, sum := range []bool{false, true} {
		settle(dir, int64(cfg.Dims[0]*cfg.Dims[1]))
		raw, err := H5perfRawWrite(ctx, cfg, sum)
		if err != nil {
			return err
		}
		peer, key, note := "raw pwrite of the same bytes", "write-raw", "a chunk per pwrite, no fsync: the page cache's speed, HDF5's ceiling too"
		if sum {
			peer, key, note = "raw pwrite + CRC32C of the same bytes", "write-rawsum", "every scc chunk frame carries a CRC32C, computed before the write"
		}
		o.logf("   %s: %.1f MiB/s", peer, raw)
		metric := "write (open-write-close) " + args + suffix
		if nosync != nil {
			metric += ", scc with NoSync"
		}
		key += "-" + strings.NewReplacer(" ", "", ",", "x").Replace(args)
		if where != "" {
			key += "-" + where
		}
		r.add(Figure{Scenario: "h5perf", Key: key, Metric: metric, Unit: "MiB/s", HigherIsBetter: true,
			SCC: w.WriteMBps, Peer: peer, PeerValue: ptr(raw), Note: note})
	}
	return nil
}
