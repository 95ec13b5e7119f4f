package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/vfd"
)

// The cache image scenario (seed 004 §1, the motivating case): many
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
		f, err := engine.Create(path, &engine.Options{NoSync: true})
		if err != nil {
			return nil, err
		}
		n := uint64(imageChunkElems * cfg.Chunks)
		for d := 0; d < cfg.Datasets; d++ {
			ds, err := f.CreateDataset(imageDatasetName(d), engine.DatasetSpec{
				Type: engine.Uint32, Shape: []uint64{n}, MaxShape: []uint64{engine.Unlimited}, Chunk: []uint64{imageChunkElems},
			})
			if err != nil {
				f.Close()
				return nil, err
			}
			if err := ds.Write(ctx, engine.Box([]uint64{0}, []uint64{n}), buf); err != nil {
				f.Close()
				return nil, err
			}
			ds.Close()
		}
		if err := f.Close(); err != nil {
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
	c := vfd.NewCounting(raw)
	reads := func(s vfd.Counts) float64 { return float64(s.Ops[vfd.OpRead] + s.Ops[vfd.OpReadV]) }
	t0 := time.Now()
	f, err := engine.OpenWith(c, &engine.Options{
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
		// is what the next open needs (seed 004 §1).
		name := imageDatasetName(k)
		ds, err := f.OpenDataset(name)
		if err != nil {
			f.Close()
			return err
		}
		for h := 0; h < cfg.Hot; h++ {
			if err := ds.Read(ctx, engine.Box([]uint64{uint64(h * imageChunkElems)}, []uint64{imageChunkElems}), buf); err != nil {
				f.Close()
				return err
			}
			if k == 0 && h == 0 {
				st.FirstHotReads += reads(c.Snapshot())
			}
		}
		if !cfg.ReadOnly {
			if err := ds.Write(ctx, engine.Box([]uint64{uint64(cycle % imageChunkElems)}, []uint64{1}), buf[:4]); err != nil {
				f.Close()
				return err
			}
		}
		ds.Close()
	}
	if err := f.Close(); err != nil {
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
			f, err := engine.Open(p, &engine.Options{NoSync: true, Image: gen})
			if err != nil {
				return nil, err
			}
			for k := 0; k < cfg.Touch; k++ {
				ds, err := f.OpenDataset(imageDatasetName(k))
				if err != nil {
					f.Close()
					return nil, err
				}
				if err := ds.Read(ctx, engine.Box([]uint64{0}, []uint64{uint64(cfg.Hot * imageChunkElems)}), make([]byte, cfg.Hot*imageChunkElems*4)); err != nil {
					f.Close()
					return nil, err
				}
				ds.Close()
			}
			if err := f.Close(); err != nil {
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
// readers, each with and without images.
func runImage(ctx context.Context, o Options, _ *Peers, r *Report) error {
	dir, cleanup, err := tempDir(o, "image")
	if err != nil {
		return err
	}
	defer cleanup()
	for _, ro := range []bool{false, true} {
		cfg := ImageConfig{
			Files: o.size(4, 4, 2), Datasets: o.size(64, 32, 4), Chunks: o.size(64, 32, 8),
			Touch: 4, Hot: 2, Cycles: o.size(400, 100, 6), ReadOnly: ro,
		}
		sub := filepath.Join(dir, fmt.Sprintf("ro%v", ro))
		if err := os.Mkdir(sub, 0o755); err != nil {
			return err
		}
		res, err := ImageRoundRobin(ctx, sub, cfg)
		if err != nil {
			return err
		}
		mode := "writers"
		if ro {
			mode = "readers"
		}
		w, n := res.WithImage, res.Without
		o.logf("   %s: %d files × %d datasets × %d chunks, %d cycles touching %d datasets", mode, cfg.Files, cfg.Datasets, cfg.Chunks, cfg.Cycles, cfg.Touch)
		o.logf("   open reads %.1f vs %.1f, first hot read after %.1f vs %.1f reads, cycle %.0f vs %.0f µs (with vs without image)",
			w.OpenReads, n.OpenReads, w.FirstHotReads, n.FirstHotReads, w.CycleMicros, n.CycleMicros)
		key := mode[:1]
		// A writer's open walks every index (free-space rebuild): the
		// issue's 5× applies to it. A reader's open is lazy (superblock
		// and catalog only), so for readers it applies to the cycle.
		openTarget, cycleTarget := &Target{Kind: "ratio", Value: 5}, (*Target)(nil)
		if ro {
			openTarget, cycleTarget = nil, &Target{Kind: "ratio", Value: 5}
		}
		peer := "scc without image"
		note := fmt.Sprintf("seed 004 round robin: %d files × %d datasets (%d × 4 KiB chunks each), each cycle opens one file (%s), touches %d datasets (%d hot chunks each%s) and closes; peer = the same cycles on a copy without images, interleaved in one run",
			cfg.Files, cfg.Datasets, cfg.Chunks, map[bool]string{false: "read/write", true: "read-only"}[ro], cfg.Touch, cfg.Hot, map[bool]string{false: ", one element written", true: ""}[ro])
		for _, fg := range []Figure{
			{Key: key + "-open-reads", Metric: mode + ": read calls per open", Unit: "reads", SCC: w.OpenReads, PeerValue: ptr(n.OpenReads), Target: openTarget},
			{Key: key + "-open-bytes", Metric: mode + ": bytes read per open", Unit: "B", SCC: w.OpenBytes, PeerValue: ptr(n.OpenBytes)},
			{Key: key + "-first-hot-reads", Metric: mode + ": read calls from open to the first hot read", Unit: "reads", SCC: w.FirstHotReads, PeerValue: ptr(n.FirstHotReads)},
			{Key: key + "-cycle-reads", Metric: mode + ": read calls per cycle", Unit: "reads", SCC: w.CycleReads, PeerValue: ptr(n.CycleReads), Target: cycleTarget},
			{Key: key + "-cycle-bytes", Metric: mode + ": bytes read per cycle", Unit: "B", SCC: w.CycleBytesRead, PeerValue: ptr(n.CycleBytesRead)},
			{Key: key + "-cycle-time", Metric: mode + ": wall time per cycle", Unit: "µs", SCC: w.CycleMicros, PeerValue: ptr(n.CycleMicros), Target: &Target{Kind: "ratio", Value: 1}},
		} {
			fg.Scenario, fg.Peer, fg.Note = "image", peer, note
			r.add(fg)
		}
	}
	return nil
}
