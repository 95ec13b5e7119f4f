package bench

import (
	"container/list"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/engine/filter"
)

// RandReadConfig is the ML-style random-read workload: Datasets datasets of
// Frames frames of Side×Side uint16 (one frame per chunk, deflate level 1),
// read one whole frame at a time in a seeded uniform random order through a
// shared cache of CacheBytes, which is smaller than the working set.
type RandReadConfig struct {
	Datasets, Frames, Side int
	Reads                  int   // frame reads in the sequence
	CacheBytes             int64 // total budget
	Seed                   uint64
}

// Validate reports whether c describes a runnable workload.
func (c RandReadConfig) Validate() error {
	switch {
	case c.Datasets < 1 || c.Datasets > 1<<16, c.Frames < 1, c.Side < 3 || c.Side > 1<<14:
		return fmt.Errorf("bench: randread: %d datasets × %d frames of side %d", c.Datasets, c.Frames, c.Side)
	case c.Reads < 0 || c.CacheBytes < 1:
		return fmt.Errorf("bench: randread: %d reads, cache %d bytes", c.Reads, c.CacheBytes)
	}
	return nil
}

// WorkingSet is the decoded size of every frame.
func (c RandReadConfig) WorkingSet() int64 {
	return int64(c.Datasets) * int64(c.Frames) * c.FrameBytes()
}

// FrameBytes is one frame's (and chunk's) decoded size.
func (c RandReadConfig) FrameBytes() int64 { return int64(c.Side) * int64(c.Side) * 2 }

// Sequence returns the (dataset, frame) pairs to read.
func (c RandReadConfig) Sequence() [][2]int {
	rng := rand.New(rand.NewPCG(c.Seed, 0x5cc))
	seq := make([][2]int, c.Reads)
	for i := range seq {
		seq[i] = [2]int{rng.IntN(c.Datasets), rng.IntN(c.Frames)}
	}
	return seq
}

func randReadSize(o Options) RandReadConfig {
	c := RandReadConfig{
		Datasets: 64,
		Frames:   o.size(64, 32, 4),
		Side:     o.size(128, 128, 16),
		Reads:    o.size(20000, 6000, 300),
		Seed:     6,
	}
	c.CacheBytes = c.WorkingSet() / 4
	return c
}

// randReadFile writes the workload's datasets with scc.
func randReadFile(ctx context.Context, path string, c RandReadConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	f, err := engine.Create(ctx, path, nil)
	if err != nil {
		return err
	}
	defer f.Close(ctx)
	s := uint64(c.Side)
	buf := make([]byte, c.FrameBytes())
	for d := 0; d < c.Datasets; d++ {
		ds, err := f.CreateDataset(ctx, fmt.Sprintf("frames%03d", d), engine.DatasetSpec{
			Type: engine.Uint16, Shape: []uint64{uint64(c.Frames), s, s},
			Chunk: []uint64{1, s, s}, Filters: []engine.Filter{engine.Deflate(1)},
		})
		if err != nil {
			return err
		}
		for fr := 0; fr < c.Frames; fr++ {
			FillFrame(buf, d, fr)
			if err := ds.Write(ctx, engine.Box([]uint64{uint64(fr), 0, 0}, []uint64{1, s, s}), buf); err != nil {
				return err
			}
		}
	}
	if err := f.Flush(ctx); err != nil {
		return err
	}
	return f.Close(ctx)
}

// RandReadResult is one timed pass over the sequence.
type RandReadResult struct {
	Goroutines int
	Reads      int64
	Elapsed    time.Duration
	MBps       float64 // decoded MiB/s
	HitRatio   float64
}

// RandReadSCC opens path with a fresh cache of c.CacheBytes (active limit
// equal to it, no per-dataset minimum, so the budget is the same one the
// peers get) and reads the sequence with g goroutines, verifying every
// frame.
func RandReadSCC(ctx context.Context, path string, c RandReadConfig, seq [][2]int, g int) (*RandReadResult, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if g < 1 {
		return nil, fmt.Errorf("bench: randread: %d goroutines", g)
	}
	cc, err := cache.New(cache.Config{QuiescentBytes: c.CacheBytes, ActiveMultiplier: 1, MinBytes: -1})
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	f, err := engine.Open(ctx, path, &engine.Options{Cache: cc, ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer f.Close(ctx)
	dss := make([]*engine.Dataset, c.Datasets)
	for d := range dss {
		if dss[d], err = f.OpenDataset(ctx, fmt.Sprintf("frames%03d", d), nil); err != nil {
			return nil, err
		}
	}
	s := uint64(c.Side)
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	before := cc.Stats()
	t0 := time.Now()
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, c.FrameBytes())
			for ctx.Err() == nil {
				k := next.Add(1) - 1
				if k >= int64(len(seq)) {
					return
				}
				d, fr := seq[k][0], seq[k][1]
				err := dss[d].Read(ctx, engine.Box([]uint64{uint64(fr), 0, 0}, []uint64{1, s, s}), buf)
				if err == nil {
					err = VerifyFrame(buf, d, fr)
				}
				if err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	if firstErr != nil {
		return nil, firstErr
	}
	st := cc.Stats().Sub(before)
	res := &RandReadResult{Goroutines: g, Reads: int64(len(seq)), Elapsed: el,
		MBps: mibps(int64(len(seq))*c.FrameBytes(), el)}
	if st.Hits+st.Misses > 0 {
		res.HitRatio = float64(st.Hits) / float64(st.Hits+st.Misses)
	}
	return res, nil
}

func writeSequence(path string, seq [][2]int) error {
	b := make([]byte, 8*len(seq))
	for i, p := range seq {
		binary.LittleEndian.PutUint32(b[8*i:], uint32(p[0]))
		binary.LittleEndian.PutUint32(b[8*i+4:], uint32(p[1]))
	}
	return os.WriteFile(path, b, 0o644)
}

// runRandRead is scenario (c).
func runRandRead(ctx context.Context, o Options, p *Peers, r *Report) error {
	dir, cleanup, err := tempDir(o, "randread")
	if err != nil {
		return err
	}
	defer cleanup()
	c := randReadSize(o)
	o.logf("   %d datasets × %d frames of %dx%d uint16, working set %s, cache %s, %d random frame reads",
		c.Datasets, c.Frames, c.Side, c.Side, HumanBytes(c.WorkingSet()), HumanBytes(c.CacheBytes), c.Reads)
	path := filepath.Join(dir, "randread.scc")
	if err := randReadFile(ctx, path, c); err != nil {
		return err
	}
	seq := c.Sequence()

	gs := []int{1, 2, 4}
	byG := map[int]*RandReadResult{}
	sccLine := Line{Label: "scc"}
	for _, g := range gs {
		res, err := RandReadSCC(ctx, path, c, seq, g)
		if err != nil {
			return fmt.Errorf("scc with %d goroutines: %w", g, err)
		}
		o.logf("   scc %d goroutine(s): %.1f MiB/s, hit ratio %.3f", g, res.MBps, res.HitRatio)
		byG[g] = res
		sccLine.X = append(sccLine.X, float64(g))
		sccLine.Y = append(sccLine.Y, res.MBps)
	}
	lines := []Line{sccLine}

	// Hit ratio against cache size, one goroutine, beside an exact LRU
	// simulation of the same trace with the same capacity in chunks.
	hit := Line{Label: "scc (two-stage LRU)"}
	lru := Line{Label: "exact LRU simulation, same trace"}
	for _, frac := range []float64{1.0 / 16, 1.0 / 8, 1.0 / 4, 1.0 / 2, 1} {
		cc := c
		cc.CacheBytes = int64(float64(c.WorkingSet()) * frac)
		res, err := RandReadSCC(ctx, path, cc, seq, 1)
		if err != nil {
			return fmt.Errorf("scc with cache %s: %w", HumanBytes(cc.CacheBytes), err)
		}
		x := float64(cc.CacheBytes) / mib
		hit.X, hit.Y = append(hit.X, x), append(hit.Y, res.HitRatio)
		lru.X, lru.Y = append(lru.X, x), append(lru.Y, LRUHitRatio(seq, int(cc.CacheBytes/c.FrameBytes())))
	}

	peers := map[string]*peerResult{}
	want := p.pythonPeers(r)
	if len(want) > 0 {
		bin := filepath.Join(dir, "frames.bin")
		if err := writeFrames(bin, IngestConfig{Datasets: c.Datasets, Frames: c.Frames, Height: c.Side, Width: c.Side}); err != nil {
			return err
		}
		seqPath := filepath.Join(dir, "seq.bin")
		if err := writeSequence(seqPath, seq); err != nil {
			return err
		}
		for _, kind := range want {
			var pr peerResult
			err := runScript(ctx, p, dir, "randread_peer.py", &pr, kind, bin,
				fmt.Sprint(c.Datasets), fmt.Sprint(c.Frames), fmt.Sprint(c.Side), seqPath,
				fmt.Sprint(c.CacheBytes), filepath.Join(dir, "peer-"+kind))
			if err != nil {
				r.Errors = append(r.Errors, fmt.Sprintf("randread: peer %s: %v", kind, err))
				continue
			}
			o.logf("   %s %s: %.1f MiB/s", kind, pr.Version, pr.mibps())
			peers[kind] = &pr
			l := Line{Label: kind + " (1 thread)"}
			for _, g := range gs {
				l.X, l.Y = append(l.X, float64(g)), append(l.Y, pr.mibps())
			}
			lines = append(lines, l)
		}
	}
	top := gs[len(gs)-1]
	for _, kind := range []string{"h5py", "zarr"} {
		for _, g := range []int{top, 1} {
			f := Figure{Scenario: "randread", Key: fmt.Sprintf("g%d", g), Unit: "MiB/s", HigherIsBetter: true, Peer: kind,
				Metric: fmt.Sprintf("random frame reads, 64 datasets, cache = working set/4, scc %d goroutine(s)", g),
				SCC:    byG[g].MBps,
				Note:   fmt.Sprintf("scc hit ratio %.2f; peer single-threaded with the same total budget", byG[g].HitRatio)}
			switch {
			case g == top:
				f.Target = &Target{Kind: "ratio", Value: 2}
			case kind == "h5py": // one goroutine against h5py
				f.Target = &Target{Kind: "ratio", Value: 1.2}
			}
			if g == 1 {
				f.Note += "; inflater " + filter.Inflater
			}
			if kind == "zarr" {
				f.Note += " (zarr's LRUStoreCache holds encoded chunks)"
			} else {
				f.Note += " (h5py: rdcc_nbytes = budget/64 per dataset)"
			}
			if pr := peers[kind]; pr != nil {
				f.Peer = kind + " " + pr.Version
				f.PeerValue = ptr(pr.mibps())
			}
			r.add(f)
		}
	}
	r.Series = append(r.Series,
		Series{File: "randread_throughput_vs_goroutines.png", Title: "random frame reads, 64 datasets",
			XLabel: "reader goroutines", YLabel: "MiB/s", Lines: lines},
		Series{File: "randread_hit_ratio_vs_cache.png", Title: "hit ratio against cache size (random reads)",
			XLabel: "cache MiB", YLabel: "hit ratio", Lines: []Line{hit, lru}})
	return nil
}

// LRUHitRatio simulates an exact LRU cache of capacity entries over the
// trace (cold start) and returns its hit ratio.
func LRUHitRatio(seq [][2]int, capacity int) float64 {
	if len(seq) == 0 || capacity <= 0 {
		return 0
	}
	l := list.New()
	at := make(map[[2]int]*list.Element, capacity)
	hits := 0
	for _, k := range seq {
		if e, ok := at[k]; ok {
			hits++
			l.MoveToFront(e)
			continue
		}
		at[k] = l.PushFront(k)
		if l.Len() > capacity {
			old := l.Back()
			l.Remove(old)
			delete(at, old.Value.([2]int))
		}
	}
	return float64(hits) / float64(len(seq))
}
