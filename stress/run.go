package stress

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/vfd"
)

// pipelines are the filter pipelines datasets pick from.
var pipelines = [][]engine.Filter{
	nil,
	{engine.Shuffle(), engine.Zstd(1)},
	{engine.LZ4()},
	{engine.Deflate(1)},
	{engine.CRC32C()},
	{engine.Shuffle(), engine.CRC32C(), engine.LZ4()},
}

// policies are the replacement policies a run picks from.
var policies = []cache.PolicyKind{
	cache.PolicyTwoStageLRU, cache.PolicyLRU, cache.PolicyMRU,
	cache.PolicyLFU, cache.PolicyRandom, cache.PolicySIEVE,
}

// fileModel is one file of a run and the models of its datasets.
type fileModel struct {
	idx   int
	crash *vfd.Crash // nil without crash checks
	drv   vfd.Driver // crash or a memory driver, maybe latency-wrapped
	// f and handles change only while the workers are stopped; handles
	// are the coordinator's, one per dataset, held through every phase so
	// that a worker's reopen never unregisters the dataset.
	f       *engine.File
	handles []*engine.Dataset
	ds      []*dsModel
	// durMu guards every dsModel.durable and rowsCommitted of the file.
	durMu sync.Mutex
}

// run is the shared state of one Run.
type run struct {
	cfg   Config
	log   Logger
	cache *cache.Cache
	files []*fileModel
	chk   checker
	ops   struct {
		writes, reads, crossReads, flushes, handleReopens, stats, grows atomic.Int64
	}
	rep Report // the coordinator's counts; merged with ops at the end
	// seqs[g] is goroutine g's last write sequence number (see nextSeq).
	seqs []uint32
}

// Run runs the model-checked workload described in the package comment with
// cfg (defaults filled in) and returns what it did. The error is non-nil
// when the engine failed an operation, when any read disagreed with the
// model (ErrMismatch), or when ctx ended.
func Run(ctx context.Context, log Logger, cfg Config) (Report, error) {
	if err := cfg.Validate(); err != nil {
		return Report{Seed: cfg.Seed}, err
	}
	if log == nil {
		log = WriterLogger(nil)
	}
	cfg = cfg.withDefaults()
	start := time.Now()
	r := &run{cfg: cfg, log: log}
	r.chk.seed = cfg.Seed
	r.seqs = make([]uint32, cfg.Goroutines)
	r.rep.Seed, r.rep.Goroutines = cfg.Seed, cfg.Goroutines
	err := r.run(ctx)
	rep := r.finish(err)
	rep.Duration = time.Since(start)
	if err == nil && rep.Mismatches > 0 {
		err = fmt.Errorf("%w: %d elements; %s", ErrMismatch, rep.Mismatches, replay(cfg.Seed))
	} else if err != nil && !errors.Is(err, context.Canceled) {
		err = fmt.Errorf("%w; %s", err, replay(cfg.Seed))
	}
	log.Logf("stress: run seed=%d goroutines=%d done in %v: %d writes, %d reads, %d cross-reads, %d mismatches, %d evictions",
		cfg.Seed, cfg.Goroutines, rep.Duration.Round(time.Millisecond), rep.Ops.Writes, rep.Ops.Reads,
		rep.Ops.CrossReads, rep.Mismatches, rep.Evictions)
	return rep, err
}

func (r *run) finish(err error) Report {
	rep := r.rep
	rep.Ops.Writes += r.ops.writes.Load()
	rep.Ops.Reads += r.ops.reads.Load()
	rep.Ops.CrossReads += r.ops.crossReads.Load()
	rep.Ops.Flushes += r.ops.flushes.Load()
	rep.Ops.HandleReopens += r.ops.handleReopens.Load()
	rep.Ops.Stats += r.ops.stats.Load()
	rep.Ops.Grows += r.ops.grows.Load()
	rep.ReadsChecked = r.chk.reads.Load()
	rep.ElementsChecked = r.chk.elements.Load()
	rep.Mismatches = r.chk.bad.Load()
	r.chk.mu.Lock()
	for _, f := range r.chk.failures {
		rep.fail("%s", f)
	}
	r.chk.mu.Unlock()
	if err != nil {
		rep.fail("%v; %s", err, replay(r.cfg.Seed))
	}
	return rep
}

func (r *run) run(ctx context.Context) (err error) {
	cfg := r.cfg
	crng := rand.New(rand.NewPCG(cfg.Seed, 0))
	policy := policies[crng.IntN(len(policies))]
	r.cache, err = cache.New(cache.Config{
		QuiescentBytes: cfg.CacheBytes,
		MinBytes:       cfg.CacheBytes / 8,
		Policy:         policy,
	})
	if err != nil {
		return err
	}
	// Everything is released whatever happens, so that no goroutine
	// outlives Run (goleak checks this in the tests).
	defer func() {
		for _, fm := range r.files {
			if fm.f == nil {
				continue
			}
			for _, h := range fm.handles {
				if h != nil {
					h.Close(ctx)
				}
			}
			fm.f.Close(ctx)
		}
		st := r.cache.Stats()
		r.rep.takeCacheStats(st)
		r.log.Logf("stress: cache stats %+v", st)
		r.cache.Close()
		for _, fm := range r.files {
			fm.drv.Close()
		}
	}()
	r.log.Logf("stress: run seed=%d goroutines=%d files=%d datasets=%d ops=%d phases=%d cache=%dB policy=%v",
		cfg.Seed, cfg.Goroutines, cfg.Files, cfg.Datasets, cfg.Ops, cfg.Phases, cfg.CacheBytes, policy)

	for i := 0; i < cfg.Files; i++ {
		fm, err := r.createFile(ctx, crng, i)
		if err != nil {
			return err
		}
		r.files = append(r.files, fm)
	}
	if err := r.commitAll(ctx); err != nil {
		return err
	}

	per := cfg.Ops / cfg.Phases
	for phase := 0; phase < cfg.Phases; phase++ {
		n := per
		if phase == cfg.Phases-1 {
			n = cfg.Ops - per*(cfg.Phases-1)
		}
		if err := r.phase(ctx, phase, n); err != nil {
			return err
		}
		if !cfg.NoCrashCheck {
			for _, fm := range r.files {
				if err := r.crashCheck(ctx, fm, vfd.RandomUnsynced, cfg.Seed^uint64(phase+1)<<40); err != nil {
					return err
				}
			}
		}
		if err := r.verifyAll(ctx); err != nil {
			return err
		}
		if phase == cfg.Phases-1 {
			break
		}
		if err := r.boundary(ctx, crng); err != nil {
			return err
		}
		if err := r.verifyAll(ctx); err != nil {
			return err
		}
		if err := r.commitAll(ctx); err != nil {
			return err
		}
	}
	return r.closeAndReopen(ctx)
}

// createFile creates one file with cfg.Datasets datasets of random
// geometry, type, filters and fill.
func (r *run) createFile(ctx context.Context, crng *rand.Rand, idx int) (*fileModel, error) {
	cfg := r.cfg
	fm := &fileModel{idx: idx}
	var inner vfd.Driver
	if cfg.NoCrashCheck {
		inner = vfd.NewMem()
	} else {
		fm.crash = vfd.NewCrash()
		inner = fm.crash
	}
	fm.drv = inner
	if cfg.Latency > 0 {
		fm.drv = vfd.NewFault(inner, vfd.Latency(vfd.Randomly(vfd.OpAny, 1.0/8, cfg.Seed+uint64(idx)), cfg.Latency))
	}
	f, err := engine.Create(ctx, "", &engine.Options{Driver: fm.drv, Cache: r.cache})
	if err != nil {
		return nil, err
	}
	fm.f = f
	G := uint64(cfg.Goroutines)
	types := []engine.Type{engine.Uint64, engine.Int64, engine.Float64}
	for d := 0; d < cfg.Datasets; d++ {
		width := 2 + crng.Uint64N(2)
		// Few goroutines get more stripes each, so the data still dwarfs
		// the cache.
		stripes := max(1+crng.Uint64N(2), 24/G)
		cols := G * width * stripes
		rows := 4 + crng.Uint64N(9)
		rowsCap := 3 * rows
		shape := []uint64{rows, cols}
		chunkCols := []uint64{3, 5, 8, 13, max(3, cols/6)}[crng.IntN(5)]
		chunk := []uint64{1 + crng.Uint64N(4), chunkCols}
		if crng.IntN(3) == 0 { // rank 3
			mid := 2 + crng.Uint64N(2)
			shape = []uint64{rows, mid, cols}
			chunk = []uint64{chunk[0], 1 + crng.Uint64N(mid), chunkCols}
		}
		maxShape := append([]uint64(nil), shape...)
		switch crng.IntN(3) {
		case 0: // extensible-array index
			maxShape[0] = engine.Unlimited
		case 1: // fixed array
			maxShape[0] = rowsCap
		default: // general index: unlimited everywhere
			for i := range maxShape {
				maxShape[i] = engine.Unlimited
			}
		}
		var fill []byte
		if crng.IntN(2) == 0 {
			fill = make([]byte, 8)
			binary.LittleEndian.PutUint64(fill, crng.Uint64()|1<<63)
		}
		spec := engine.DatasetSpec{
			Type:          types[crng.IntN(len(types))],
			Shape:         shape,
			MaxShape:      maxShape,
			Chunk:         chunk,
			Filters:       pipelines[crng.IntN(len(pipelines))],
			Fill:          fill,
			CacheMinBytes: []int64{0, -1, 2 << 10}[crng.IntN(3)],
		}
		name := fmt.Sprintf("d%02d", d)
		ds, err := f.CreateDataset(ctx, name, spec)
		if err != nil {
			return nil, fmt.Errorf("create %s %+v: %w", name, spec, err)
		}
		fm.handles = append(fm.handles, ds)
		fm.ds = append(fm.ds, newDSModel(name, spec, rowsCap, width, stripes, G, crng.Uint32()))
		r.log.Logf("stress:   file %d %s: %v shape %v max %v chunk %v filters %v fill %x min %d",
			idx, name, spec.Type, shape, maxShape, chunk, spec.Filters, fill, spec.CacheMinBytes)
	}
	return fm, nil
}

// phase runs the workers for n operations each, plus the extender, which
// grows extents under them.
func (r *run) phase(ctx context.Context, phase, n int) error {
	g, gctx := errgroup.WithContext(ctx)
	done := make(chan struct{})
	var workers sync.WaitGroup
	for w := 0; w < r.cfg.Goroutines; w++ {
		workers.Add(1)
		g.Go(func() error {
			defer workers.Done()
			wk := &worker{r: r, id: w, rng: rand.New(rand.NewPCG(r.cfg.Seed, uint64(phase)<<32|uint64(w+1)))}
			return wk.run(gctx, n)
		})
	}
	g.Go(func() error {
		return r.extend(gctx, done, rand.New(rand.NewPCG(r.cfg.Seed, uint64(phase)<<32|1<<31)))
	})
	go func() {
		workers.Wait()
		close(done)
	}()
	return g.Wait()
}

// extend grows a random dataset by a row or two every few milliseconds
// until the workers are done (at most 3 times a phase). Growing is safe
// under concurrent I/O: SetExtent drains the dataset's requests, and the
// new rows are fill in the model already (they were cut off or never
// written), so every concurrent check stays exact.
func (r *run) extend(ctx context.Context, done <-chan struct{}, rng *rand.Rand) error {
	for grown := 0; grown < 3; {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return nil
		case <-time.After(time.Duration(1+rng.IntN(4)) * time.Millisecond):
		}
		fm := r.files[rng.IntN(len(r.files))]
		di := rng.IntN(len(fm.ds))
		m := fm.ds[di]
		rows := m.rows.Load()
		if rows >= m.dims[0] {
			continue
		}
		next := min(m.dims[0], rows+1+rng.Uint64N(2))
		dims := m.shape()
		dims[0] = next
		if err := fm.handles[di].SetExtent(ctx, dims); err != nil {
			return fmt.Errorf("grow %s to %v: %w", m.name, dims, err)
		}
		m.rows.Store(next)
		r.ops.grows.Add(1)
		grown++
	}
	return nil
}

// worker is one goroutine of a phase.
type worker struct {
	r       *run
	id      int
	rng     *rand.Rand
	handles [][]*engine.Dataset // [file][dataset], the worker's own
	op      int
}

// nextSeq returns the worker's next write sequence number. The counter
// lives in the run so that it keeps growing across phases; only goroutine
// w.id touches r.seqs[w.id], and phases are separated by errgroup.Wait.
func (w *worker) nextSeq() uint32 {
	w.r.seqs[w.id]++
	return w.r.seqs[w.id]
}

func (w *worker) run(ctx context.Context, n int) (err error) {
	r := w.r
	w.handles = make([][]*engine.Dataset, len(r.files))
	defer func() {
		for _, hs := range w.handles {
			for _, h := range hs {
				if h != nil {
					if cerr := h.Close(ctx); cerr != nil && err == nil {
						err = fmt.Errorf("worker %d close handle: %w", w.id, cerr)
					}
				}
			}
		}
	}()
	for i, fm := range r.files {
		w.handles[i] = make([]*engine.Dataset, len(fm.ds))
		for j, m := range fm.ds {
			h, err := fm.f.OpenDataset(ctx, m.name, nil)
			if err != nil {
				return fmt.Errorf("worker %d open %s: %w", w.id, m.name, err)
			}
			w.handles[i][j] = h
		}
	}
	for w.op = 0; w.op < n; w.op++ {
		if ctx.Err() != nil {
			return nil // another goroutine failed; its error is the run's
		}
		fi := w.rng.IntN(len(r.files))
		fm := r.files[fi]
		di := w.rng.IntN(len(fm.ds))
		m := fm.ds[di]
		h := w.handles[fi][di]
		var err error
		switch p := w.rng.IntN(100); {
		case p < 38:
			err = w.write(ctx, m, h)
		case p < 62:
			err = w.readOwn(ctx, m, h)
		case p < 90:
			err = w.readAny(ctx, m, h)
		case p < 93:
			err = w.flush(ctx, fm)
		case p < 97:
			if err = h.Close(ctx); err == nil {
				w.handles[fi][di], err = fm.f.OpenDataset(ctx, m.name, nil)
			}
			if err != nil {
				w.handles[fi][di] = nil
				err = fmt.Errorf("reopen handle %s: %w", m.name, err)
			} else {
				r.ops.handleReopens.Add(1)
			}
		default:
			_ = r.cache.Stats()
			_ = h.CacheStats()
			r.ops.stats.Add(1)
		}
		if err != nil {
			return fmt.Errorf("worker %d op %d: %w", w.id, w.op, err)
		}
	}
	return nil
}
