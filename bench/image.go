package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/vfd"
)

// The cache image scenario (Cache image RFC §1, the motivating case): many
// processes take turns on a set of files, each opening a file, touching a
// few of its datasets (reading their hot chunks, writing one element) and
// closing it. Every open pays for the metadata it reads before the first
// useful access; a cache image written at each close turns those many
// small reads into one. The same round robin runs twice in one process,
// interleaved cycle by cycle on two copies of the same files — once
// writing and using images, once not — and the I/O is counted by a
// vfd.Counting under each File.

// ImageConfig sizes the round robin.
type ImageConfig struct {
	Files    int // files in the rotation
	Datasets int // datasets per file
	Chunks   int // stored chunks per dataset (4 KiB each, unfiltered)
	Touch    int // datasets each cycle touches
	Hot      int // chunks each touched dataset reads
	Cycles   int // open/touch/close cycles per variant
	// ReadOnly makes the cycles read-only opens (readers of files a
	// writer closed with an image); otherwise every cycle is a writer.
	ReadOnly bool
	// Latency, when set, models a file system where every read and write
	// call costs a round trip (a parallel file system's, Cache image RFC §1) plus
	// its bytes at Bandwidth bytes per second: the driver waits that
	// long. Zero runs on the local file as it is (page cache).
	Latency   time.Duration
	Bandwidth float64
}

// latencyDriver delays each read and write by a round trip plus the
// transfer time of its bytes (ImageConfig.Latency).
type latencyDriver struct {
	vfd.Driver
	rtt time.Duration
	bw  float64
}

// wait spins rather than sleeps: a timer sleep of 100 µs takes about a
// millisecond on a loaded machine, which would model a far slower file
// system than the one named.
func (d latencyDriver) wait(n int) {
	t := d.rtt
	if d.bw > 0 {
		t += time.Duration(float64(n) / d.bw * float64(time.Second))
	}
	for start := time.Now(); time.Since(start) < t; {
		runtime.Gosched()
	}
}

func extentsLen(es []vfd.Extent) int {
	n := 0
	for _, e := range es {
		n += len(e.Buf)
	}
	return n
}

func (d latencyDriver) ReadAt(p []byte, off int64) (int, error) {
	d.wait(len(p))
	return d.Driver.ReadAt(p, off)
}

func (d latencyDriver) WriteAt(p []byte, off int64) (int, error) {
	d.wait(len(p))
	return d.Driver.WriteAt(p, off)
}

func (d latencyDriver) ReadV(es []vfd.Extent) error {
	d.wait(extentsLen(es))
	return d.Driver.ReadV(es)
}

func (d latencyDriver) WriteV(es []vfd.Extent) error {
	d.wait(extentsLen(es))
	return d.Driver.WriteV(es)
}

// ImageCycleStats are per-cycle averages of one variant.
type ImageCycleStats struct {
	OpenReads      float64 // read calls (ReadAt + ReadV) by the open itself
	OpenBytes      float64 // bytes they read
	FirstHotReads  float64 // read calls from the open to the end of the first hot read
	CycleReads     float64 // read calls in the whole cycle
	CycleBytesRead float64
	CycleMicros    float64 // wall time of the cycle
}

// ImageResult holds both variants from one run.
type ImageResult struct {
	Config             ImageConfig
	WithImage, Without ImageCycleStats
}

const imageChunkElems = 1024 // uint32: 4 KiB chunks

func imageDatasetName(i int) string { return fmt.Sprintf("series%04d", i) }

// makeImageFiles creates cfg.Files files in dir, each with cfg.Datasets
// appendable datasets of cfg.Chunks chunks.
func makeImageFiles(ctx context.Context, dir string, cfg ImageConfig) ([]string, error) {
	var paths []string
	buf := make([]byte, imageChunkElems*4*cfg.Chunks)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for fi := 0; fi < cfg.Files; fi++ {
		path := filepath.Join(dir, fmt.Sprintf("rr%02d.scc", fi))
		f, err := engine.Create(ctx, path, &engine.Options{NoSync: true})
		if err != nil {
			return nil, err
		}
		n := uint64(imageChunkElems * cfg.Chunks)
		for d := 0; d < cfg.Datasets; d++ {
			ds, err := f.CreateDataset(ctx, imageDatasetName(d), engine.DatasetSpec{
				Type: engine.Uint32, Shape: []uint64{n}, MaxShape: []uint64{engine.Unlimited}, Chunk: []uint64{imageChunkElems},
			})
			if err != nil {
				f.Close(ctx)
				return nil, err
			}
			if err := ds.Write(ctx, engine.Box([]uint64{0}, []uint64{n}), buf); err != nil {
				f.Close(ctx)
				return nil, err
			}
			ds.Close(ctx)
		}
		if err := f.Close(ctx); err != nil {
			return nil, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

func copyFile(dst, src string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// imageCycle runs one open/touch/close cycle on path and adds its counts
// to st.
func imageCycle(ctx context.Context, path string, cycle int, cfg ImageConfig, img engine.ImageOptions, st *ImageCycleStats) error {
	flag := os.O_RDWR
	if cfg.ReadOnly {
		flag = os.O_RDONLY
	}
	raw, err := vfd.Open(path, flag, 0)
	if err != nil {
		return err
	}
	defer raw.Close()
	var drv vfd.Driver = raw
	if cfg.Latency > 0 {
		drv = latencyDriver{Driver: raw, rtt: cfg.Latency, bw: cfg.Bandwidth}
	}
	c := vfd.NewCounting(drv)
	reads := func(s vfd.Counts) float64 { return float64(s.Ops[vfd.OpRead] + s.Ops[vfd.OpReadV]) }
	t0 := time.Now()
	f, err := engine.Open(ctx, "", &engine.Options{Driver: c,
		ReadOnly: cfg.ReadOnly, NoSync: true, Image: img,
		CacheConfig: cache.Config{QuiescentBytes: 32 << 20},
	})
	if err != nil {
		return err
	}
	s := c.Snapshot()
	st.OpenReads += reads(s)
	st.OpenBytes += float64(s.BytesRead())
	buf := make([]byte, imageChunkElems*4)
	for k := 0; k < cfg.Touch; k++ {
		// The same few datasets every cycle: each process of the seed's
		// case does the same work, so what one close leaves in its image
		// is what the next open needs (Cache image RFC §1).
		name := imageDatasetName(k)
		ds, err := f.OpenDataset(ctx, name, nil)
		if err != nil {
			f.Close(ctx)
			return err
		}
		for h := 0; h < cfg.Hot; h++ {
			if err := ds.Read(ctx, engine.Box([]uint64{uint64(h * imageChunkElems)}, []uint64{imageChunkElems}), buf); err != nil {
				f.Close(ctx)
				return err
			}
			if k == 0 && h == 0 {
				st.FirstHotReads += reads(c.Snapshot())
			}
		}
		if !cfg.ReadOnly {
			if err := ds.Write(ctx, engine.Box([]uint64{uint64(cycle % imageChunkElems)}, []uint64{1}), buf[:4]); err != nil {
				f.Close(ctx)
				return err
			}
		}
		ds.Close(ctx)
	}
	if err := f.Close(ctx); err != nil {
		return err
	}
	st.CycleMicros += float64(time.Since(t0).Microseconds())
	s = c.Snapshot()
	st.CycleReads += reads(s)
	st.CycleBytesRead += float64(s.BytesRead())
	return nil
}

func (s *ImageCycleStats) average(n int) {
	d := float64(n)
	s.OpenReads /= d
	s.OpenBytes /= d
	s.FirstHotReads /= d
	s.CycleReads /= d
	s.CycleBytesRead /= d
	s.CycleMicros /= d
}

// ImageRoundRobin runs the round robin with and without cache images on
// two copies of the same files in dir, interleaving the variants cycle by
// cycle so that both see the same machine load.
func ImageRoundRobin(ctx context.Context, dir string, cfg ImageConfig) (*ImageResult, error) {
	base, err := makeImageFiles(ctx, dir, cfg)
	if err != nil {
		return nil, err
	}
	with := make([]string, len(base))
	for i, p := range base {
		with[i] = p + ".img"
		if err := copyFile(with[i], p); err != nil {
			return nil, err
		}
	}
	gen := engine.ImageOptions{Generate: true, SaveSizing: true}
	if cfg.ReadOnly {
		// Readers use the image a writer left: write it once.
		for _, p := range with {
			f, err := engine.Open(ctx, p, &engine.Options{NoSync: true, Image: gen})
			if err != nil {
				return nil, err
			}
			for k := 0; k < cfg.Touch; k++ {
				ds, err := f.OpenDataset(ctx, imageDatasetName(k), nil)
				if err != nil {
					f.Close(ctx)
					return nil, err
				}
				if err := ds.Read(ctx, engine.Box([]uint64{0}, []uint64{uint64(cfg.Hot * imageChunkElems)}), make([]byte, cfg.Hot*imageChunkElems*4)); err != nil {
					f.Close(ctx)
					return nil, err
				}
				ds.Close(ctx)
			}
			if err := f.Close(ctx); err != nil {
				return nil, err
			}
		}
	}
	// One warm-up cycle per file and variant: the first image is written
	// by the first writer.
	res := &ImageResult{Config: cfg}
	var warm ImageCycleStats
	for i := range base {
		if err := imageCycle(ctx, with[i], 0, cfg, gen, &warm); err != nil {
			return nil, err
		}
		if err := imageCycle(ctx, base[i], 0, cfg, engine.ImageOptions{}, &warm); err != nil {
			return nil, err
		}
	}
	for cyc := 0; cyc < cfg.Cycles; cyc++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		i := cyc % cfg.Files
		// Alternate which variant goes first, so neither always finds
		// the other's pages freshly evicted from the CPU caches.
		first, second := func() error { return imageCycle(ctx, with[i], cyc, cfg, gen, &res.WithImage) },
			func() error { return imageCycle(ctx, base[i], cyc, cfg, engine.ImageOptions{}, &res.Without) }
		if cyc%2 == 1 {
			first, second = second, first
		}
		if err := first(); err != nil {
			return nil, err
		}
		if err := second(); err != nil {
			return nil, err
		}
	}
	res.WithImage.average(cfg.Cycles)
	res.Without.average(cfg.Cycles)
	return res, nil
}

// runImage is the "image" scenario: the round robin of writers, then of
// readers, each with and without images, on the local file and on a
// modelled remote file system.
func runImage(ctx context.Context, o Options, _ *Peers, r *Report) error {
	dir, cleanup, err := tempDir(o, "image")
	if err != nil {
		return err
	}
	defer cleanup()
	for _, ro := range []bool{false, true} {
		for _, remote := range []bool{false, true} {
			cfg := ImageConfig{
				Files: o.size(4, 4, 2), Datasets: o.size(64, 32, 4), Chunks: o.size(64, 32, 8),
				Touch: 4, Hot: 2, Cycles: o.size(400, 100, 6), ReadOnly: ro,
			}
			if remote {
				cfg.Cycles = o.size(60, 20, 2)
				cfg.Latency, cfg.Bandwidth = imageRemoteRTT, imageRemoteBW
			}
			sub := filepath.Join(dir, fmt.Sprintf("ro%v-remote%v", ro, remote))
			if err := os.Mkdir(sub, 0o755); err != nil {
				return err
			}
			res, err := ImageRoundRobin(ctx, sub, cfg)
			if err != nil {
				return err
			}
			addImageFigures(o, r, res, remote)
		}
	}
	return nil
}

// The modelled remote file system: a round trip per call, and bandwidth.
const (
	imageRemoteRTT = 100 * time.Microsecond
	imageRemoteBW  = 1e9
)

func addImageFigures(o Options, r *Report, res *ImageResult, remote bool) {
	cfg := res.Config
	mode := "writers"
	if cfg.ReadOnly {
		mode = "readers"
	}
	w, n := res.WithImage, res.Without
	where := "local file"
	if remote {
		where = fmt.Sprintf("modelled remote FS (%v per call + 1 GB/s)", imageRemoteRTT)
	}
	o.logf("   %s, %s: %d files × %d datasets × %d chunks, %d cycles touching %d datasets", mode, where, cfg.Files, cfg.Datasets, cfg.Chunks, cfg.Cycles, cfg.Touch)
	o.logf("   open reads %.1f vs %.1f, first hot read after %.1f vs %.1f reads, cycle %.0f vs %.0f µs (with vs without image)",
		w.OpenReads, n.OpenReads, w.FirstHotReads, n.FirstHotReads, w.CycleMicros, n.CycleMicros)
	key := mode[:1]
	note := fmt.Sprintf("Cache image RFC round robin: %d files × %d datasets (%d × 4 KiB chunks each), each cycle opens one file, touches the same %d datasets (%d hot chunks each; writers also write one element) and closes; peer = the same cycles on a copy of the files without images, interleaved in one run; remote = the local file behind a driver that waits %v per read or write call plus 1 ns per byte",
		cfg.Files, cfg.Datasets, cfg.Chunks, cfg.Touch, cfg.Hot, imageRemoteRTT)
	var figs []Figure
	if remote {
		key += "-remote"
		figs = []Figure{{Key: key + "-cycle-time", Metric: mode + ", " + where + ": wall time per cycle", Unit: "µs", SCC: w.CycleMicros, PeerValue: ptr(n.CycleMicros), Target: &Target{Kind: "ratio", Value: 1}}}
	} else {
		// A writer's open without an image walks every index (the
		// free-space rebuild; with one it rebuilds from the image's
		// free-space map): the 5× applies to it. A reader's open
		// is lazy (superblock and catalog only), so for readers it
		// applies to the cycle.
		openTarget, cycleTarget := &Target{Kind: "ratio", Value: 5}, (*Target)(nil)
		if cfg.ReadOnly {
			openTarget, cycleTarget = nil, &Target{Kind: "ratio", Value: 5}
		}
		figs = []Figure{
			{Key: key + "-open-reads", Metric: mode + ": read calls per open", Unit: "reads", SCC: w.OpenReads, PeerValue: ptr(n.OpenReads), Target: openTarget},
			{Key: key + "-open-bytes", Metric: mode + ": bytes read per open", Unit: "B", SCC: w.OpenBytes, PeerValue: ptr(n.OpenBytes)},
			{Key: key + "-first-hot-reads", Metric: mode + ": read calls from open to the first hot read", Unit: "reads", SCC: w.FirstHotReads, PeerValue: ptr(n.FirstHotReads)},
			{Key: key + "-cycle-reads", Metric: mode + ": read calls per cycle", Unit: "reads", SCC: w.CycleReads, PeerValue: ptr(n.CycleReads), Target: cycleTarget},
			{Key: key + "-cycle-bytes", Metric: mode + ": bytes read per cycle", Unit: "B", SCC: w.CycleBytesRead, PeerValue: ptr(n.CycleBytesRead)},
			{Key: key + "-cycle-time", Metric: mode + ", " + where + ": wall time per cycle", Unit: "µs", SCC: w.CycleMicros, PeerValue: ptr(n.CycleMicros), Target: &Target{Kind: "ratio", Value: 1}},
		}
	}
	for _, fg := range figs {
		fg.Scenario, fg.Peer, fg.Note = "image", "scc without image", note
		r.add(fg)
	}
}
