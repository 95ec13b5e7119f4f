package stress

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
	"golang.org/x/sync/errgroup"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/vfd"
)

// Shared regions: every request writes or reads one whole region, which
// spans several chunks (and shares edge chunks with its neighbours). A
// write stores id<<32 | (linear ^ tag) in every element, id unique per
// request, so a read decodes to the id of the one write it saw, or shows a
// mix. SCC design §5.2 demands that overlapping requests run in receipt
// order, writes exclusively: then every history is linearizable with
// respect to a register per region.

// Read outputs that are not a write id.
const (
	outMixed   int64 = -1 // elements of several writes
	outGarbage int64 = -2 // an element that no write of this region stored
)

// linInput is a porcupine input: a whole-region write of id, or a read.
type linInput struct {
	region int
	write  bool
	id     int64
}

// registerModel is a register per region holding the id of the last write
// (0: the fill value), starting at init.
func registerModel(init int64) porcupine.Model {
	return porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[int][]porcupine.Operation{}
			var keys []int
			for _, op := range h {
				r := op.Input.(linInput).region
				if _, ok := by[r]; !ok {
					keys = append(keys, r)
				}
				by[r] = append(by[r], op)
			}
			sort.Ints(keys)
			out := make([][]porcupine.Operation, 0, len(keys))
			for _, k := range keys {
				out = append(out, by[k])
			}
			return out
		},
		Init: func() any { return init },
		Step: func(state, input, output any) (bool, any) {
			in := input.(linInput)
			if in.write {
				return true, in.id
			}
			return output.(int64) == state.(int64), state
		},
		DescribeOperation: func(input, output any) string {
			in := input.(linInput)
			if in.write {
				return fmt.Sprintf("write(r%d, %d)", in.region, in.id)
			}
			return fmt.Sprintf("read(r%d) -> %d", in.region, output.(int64))
		},
		DescribeState: func(state any) string { return fmt.Sprint(state.(int64)) },
	}
}

// region is one shared region of the lin dataset: rows [row, row+rows) by
// every column.
type region struct {
	row, rows, cols uint64
	tag             uint32
	fill            []byte // 8 bytes
}

func (g region) sel() engine.Selection {
	return engine.Box([]uint64{g.row, 0}, []uint64{g.rows, g.cols})
}

func (g region) size() int { return int(g.rows*g.cols) * 8 }

// linear is the element's index in the dataset, stable per region.
func (g region) linear(pos int) uint64 { return g.row*g.cols + uint64(pos) }

func (g region) encode(id int64) []byte {
	buf := make([]byte, g.size())
	for p := 0; p < len(buf)/8; p++ {
		binary.LittleEndian.PutUint64(buf[p*8:], uint64(id)<<32|uint64(uint32(g.linear(p))^g.tag))
	}
	return buf
}

// decode returns the id of the one write buf holds, 0 for the fill value,
// outMixed or outGarbage, and the ids it saw (for failure messages).
func (g region) decode(buf []byte) (int64, []int64) {
	var ids []int64
	garbage := false
	for p := 0; p < len(buf)/8; p++ {
		b := buf[p*8 : p*8+8]
		var id int64
		if !slices.Equal(b, g.fill) {
			v := binary.LittleEndian.Uint64(b)
			if uint32(v) != uint32(g.linear(p))^g.tag || v>>32 == 0 {
				garbage = true
				continue
			}
			id = int64(v >> 32)
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	switch {
	case garbage:
		return outGarbage, ids
	case len(ids) == 1:
		return ids[0], ids
	}
	return outMixed, ids
}

// linEnv is the file, dataset and clock of a shared-region workload.
type linEnv struct {
	cfg     Config
	cache   *cache.Cache
	drv     vfd.Driver
	f       *engine.File
	ds      *engine.Dataset
	regions []region
	// clock orders call and return events: a shared counter, so that an
	// event taken after another (in real time) gets a larger stamp.
	clock atomic.Int64
	ids   atomic.Int64
}

// newLinEnv creates a file with one dataset of nRegions regions of
// rows×cols elements on chunks of chunk; the chunks straddle regions.
func newLinEnv(cfg Config, rng *rand.Rand, nRegions int, rows, cols uint64, chunk []uint64) (*linEnv, error) {
	e := &linEnv{cfg: cfg}
	var err error
	// An eighth of the configured budget: regions are small, and the
	// shared chunks must be evicted and reloaded while requests overlap.
	e.cache, err = cache.New(cache.Config{
		QuiescentBytes: max(512, cfg.CacheBytes/8),
		MinBytes:       -1,
		Policy:         policies[rng.IntN(len(policies))],
	})
	if err != nil {
		return nil, err
	}
	e.drv = vfd.NewMem()
	if cfg.Latency > 0 {
		e.drv = vfd.NewFault(e.drv, vfd.Latency(vfd.Randomly(vfd.OpAny, 1.0/8, cfg.Seed), cfg.Latency))
	}
	e.f, err = engine.Create(context.Background(), "", &engine.Options{Driver: e.drv, Cache: e.cache})
	if err != nil {
		e.close()
		return nil, err
	}
	fill := make([]byte, 8)
	var specFill []byte
	if rng.IntN(2) == 0 {
		binary.LittleEndian.PutUint64(fill, rng.Uint64()|1<<63)
		specFill = fill
	}
	e.ds, err = e.f.CreateDataset(context.Background(), "shared", engine.DatasetSpec{
		Type:    engine.Uint64,
		Shape:   []uint64{uint64(nRegions) * rows, cols},
		Chunk:   chunk,
		Filters: pipelines[rng.IntN(len(pipelines))],
		Fill:    specFill,
	})
	if err != nil {
		e.close()
		return nil, err
	}
	tag := rng.Uint32()
	for i := 0; i < nRegions; i++ {
		e.regions = append(e.regions, region{row: uint64(i) * rows, rows: rows, cols: cols, tag: tag, fill: fill})
	}
	return e, nil
}

func (e *linEnv) close() error {
	var err error
	if e.ds != nil {
		err = e.ds.Close(context.Background())
	}
	if e.f != nil {
		if cerr := e.f.Close(context.Background()); err == nil {
			err = cerr
		}
	}
	if e.cache != nil {
		e.cache.Close()
	}
	if e.drv != nil {
		e.drv.Close()
	}
	return err
}

// write writes id over region r and returns the recorded operation.
func (e *linEnv) write(ctx context.Context, client, r int, id int64) (porcupine.Operation, error) {
	g := e.regions[r]
	buf := g.encode(id)
	if hk := e.cfg.hooks; hk != nil && hk.linWrite != nil {
		hk.linWrite(id, buf)
	}
	call := e.clock.Add(1)
	err := e.ds.Write(ctx, g.sel(), buf)
	ret := e.clock.Add(1)
	if err != nil {
		return porcupine.Operation{}, fmt.Errorf("write region %d id %d: %w", r, id, err)
	}
	return porcupine.Operation{ClientId: client, Input: linInput{region: r, write: true, id: id}, Call: call, Output: int64(0), Return: ret}, nil
}

// read reads region r and returns the recorded operation and the ids seen.
func (e *linEnv) read(ctx context.Context, client, r int) (porcupine.Operation, []int64, error) {
	g := e.regions[r]
	buf := make([]byte, g.size())
	call := e.clock.Add(1)
	err := e.ds.Read(ctx, g.sel(), buf)
	ret := e.clock.Add(1)
	if err != nil {
		return porcupine.Operation{}, nil, fmt.Errorf("read region %d: %w", r, err)
	}
	out, ids := g.decode(buf)
	return porcupine.Operation{ClientId: client, Input: linInput{region: r}, Call: call, Output: out, Return: ret}, ids, nil
}

// RunLinearizability has cfg.Goroutines goroutines issue cfg.LinOps
// whole-region writes and reads each on cfg.SharedRegions shared regions
// (and the odd Flush), records every request's call and return, and checks
// each region's history with porcupine against a register. The error wraps
// ErrNotLinearizable when a history has no linearization, ErrUnverified
// when the checker timed out.
func RunLinearizability(ctx context.Context, log Logger, cfg Config) (Report, error) {
	if err := cfg.Validate(); err != nil {
		return Report{Seed: cfg.Seed}, err
	}
	if log == nil {
		log = WriterLogger(nil)
	}
	cfg = cfg.withDefaults()
	nRegions := max(cfg.SharedRegions, 1)
	start := time.Now()
	rep := Report{Seed: cfg.Seed, Goroutines: cfg.Goroutines}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x11))
	// 3 rows × 20 columns on 2×6 chunks: 8 chunks per region, edge chunks
	// shared with the neighbours.
	e, err := newLinEnv(cfg, rng, nRegions, 3, 20, []uint64{2, 6})
	if err != nil {
		return rep, err
	}
	log.Logf("stress: linearizability seed=%d goroutines=%d regions=%d ops=%d", cfg.Seed, cfg.Goroutines, nRegions, cfg.LinOps)

	hists := make([][]porcupine.Operation, cfg.Goroutines)
	var mixMu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	for c := 0; c < cfg.Goroutines; c++ {
		g.Go(func() error {
			wr := rand.New(rand.NewPCG(cfg.Seed, uint64(c+1)|0x22<<32))
			for i := 0; i < cfg.LinOps; i++ {
				if gctx.Err() != nil {
					return nil
				}
				r := wr.IntN(nRegions)
				switch p := wr.IntN(100); {
				case p < 45:
					op, err := e.write(gctx, c, r, e.ids.Add(1))
					if err != nil {
						return err
					}
					hists[c] = append(hists[c], op)
				case p < 97:
					op, ids, err := e.read(gctx, c, r)
					if err != nil {
						return err
					}
					if out := op.Output.(int64); out < 0 {
						mixMu.Lock()
						rep.MixedReads++
						rep.fail("goroutine %d read region %d as a mix of writes %v (output %d); %s", c, r, ids, out, replay(cfg.Seed))
						mixMu.Unlock()
					}
					hists[c] = append(hists[c], op)
				default:
					if err := e.f.Flush(gctx); err != nil {
						return fmt.Errorf("flush: %w", err)
					}
				}
			}
			return nil
		})
	}
	err = g.Wait()
	rep.takeCacheStats(e.cache.Stats())
	// A failed close does not void the history: it is checked all the
	// same, and both outcomes are returned.
	closeErr := e.close()
	if closeErr != nil {
		closeErr = fmt.Errorf("close: %w", closeErr)
		rep.fail("%v; %s", closeErr, replay(cfg.Seed))
	}
	if err != nil {
		rep.Duration = time.Since(start)
		rep.fail("%v; %s", err, replay(cfg.Seed))
		return rep, fmt.Errorf("%w; %s", errors.Join(err, closeErr), replay(cfg.Seed))
	}
	var all []porcupine.Operation
	for _, h := range hists {
		all = append(all, h...)
		for _, op := range h {
			if op.Input.(linInput).write {
				rep.Ops.LinWrites++
			} else {
				rep.Ops.LinReads++
			}
		}
	}
	checkStart := time.Now()
	checkHistory(&rep, registerModel(0), all, cfg.LinTimeout, cfg.Seed)
	rep.Duration = time.Since(start)
	log.Logf("stress: linearizability seed=%d goroutines=%d done in %v (check %v): %d writes, %d reads, %d histories, %d violations, %d mixed reads",
		cfg.Seed, cfg.Goroutines, rep.Duration.Round(time.Millisecond), time.Since(checkStart).Round(time.Millisecond),
		rep.Ops.LinWrites, rep.Ops.LinReads, rep.LinHistories, rep.LinViolations, rep.MixedReads)
	return rep, joinReplay(cfg.Seed, linErr(rep), closeErr)
}

// joinReplay joins errs (nils dropped); the replay hint is added to errors
// that do not carry it yet.
func joinReplay(seed uint64, errs ...error) error {
	var out []error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if !strings.Contains(err.Error(), "SCC_STRESS_SEED=") {
			err = fmt.Errorf("%w; %s", err, replay(seed))
		}
		out = append(out, err)
	}
	return errors.Join(out...)
}

// unobserved is the id given to writes that no read returned.
const unobserved int64 = -3

// abstractUnobserved gives every write whose id no read of its region
// returned the same id, unobserved. This keeps exactly the same set of
// linearizations (a read right after such a write could only return its id,
// which no read did, so with either id the write must be followed by
// another write before the next read), but the checker's cache of (done
// set, state) now merges the orders of overwritten writes instead of
// exploring each: without it, histories with dozens of concurrent writes
// time out.
func abstractUnobserved(h []porcupine.Operation) []porcupine.Operation {
	type key struct {
		region int
		id     int64
	}
	seen := map[key]bool{}
	for _, op := range h {
		if in := op.Input.(linInput); !in.write {
			seen[key{in.region, op.Output.(int64)}] = true
		}
	}
	out := slices.Clone(h)
	for i, op := range out {
		if in := op.Input.(linInput); in.write && !seen[key{in.region, in.id}] {
			in.id = unobserved
			out[i].Input = in
		}
	}
	return out
}

// checkHistory checks each region's partition of h on its own (in
// parallel, GOMAXPROCS at a time), so that a violation is counted per
// region and one hard region cannot starve the others of checker time.
func checkHistory(rep *Report, model porcupine.Model, h []porcupine.Operation, timeout time.Duration, seed uint64) {
	parts := model.Partition(abstractUnobserved(h))
	single := model
	single.Partition = nil
	type result struct {
		res     porcupine.CheckResult
		longest int
	}
	results := make([]result, len(parts))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, part := range parts {
		g.Go(func() error {
			res, info := porcupine.CheckOperationsVerbose(single, part, timeout)
			results[i].res = res
			if res == porcupine.Illegal {
				for _, l := range info.PartialLinearizations() {
					for _, lin := range l {
						results[i].longest = max(results[i].longest, len(lin))
					}
				}
			}
			return nil
		})
	}
	_ = g.Wait()
	for i, part := range parts {
		rep.LinHistories++
		r := part[0].Input.(linInput).region
		switch results[i].res {
		case porcupine.Illegal:
			rep.LinViolations++
			rep.fail("region %d: history of %d requests is not linearizable (longest linearizable prefix %d); %s",
				r, len(part), results[i].longest, replay(seed))
		case porcupine.Unknown:
			rep.LinUnknown++
			rep.fail("region %d: checker timed out after %v on %d requests; %s", r, timeout, len(part), replay(seed))
		}
	}
}

func linErr(rep Report) error {
	switch {
	case rep.LinViolations > 0 || rep.MixedReads > 0:
		return fmt.Errorf("%w: %d of %d histories, %d mixed reads; %s",
			ErrNotLinearizable, rep.LinViolations, rep.LinHistories, rep.MixedReads, replay(rep.Seed))
	case rep.LinUnknown > 0:
		return fmt.Errorf("%w: %d of %d histories; %s", ErrUnverified, rep.LinUnknown, rep.LinHistories, replay(rep.Seed))
	}
	return nil
}

// RunLastWriter is the issue-4 acceptance check. In each of cfg.LinTrials
// trials, cfg.Goroutines goroutines released at once each overwrite one
// region spanning many chunks max(2, LinOps/16) times with unique ids;
// then one read of the region must show the value of a single write
// everywhere, never a mix, and that write must be the last write of a
// linearization of the trial's history (lastWriter). After the trials the
// file is closed and reopened: the region still holds the last value.
func RunLastWriter(ctx context.Context, log Logger, cfg Config) (Report, error) {
	if err := cfg.Validate(); err != nil {
		return Report{Seed: cfg.Seed}, err
	}
	if log == nil {
		log = WriterLogger(nil)
	}
	cfg = cfg.withDefaults()
	start := time.Now()
	rep := Report{Seed: cfg.Seed, Goroutines: cfg.Goroutines}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x33))
	// One region of 7×30 elements on 3×4 chunks: 24 chunks, 16 of them
	// partial.
	e, err := newLinEnv(cfg, rng, 1, 7, 30, []uint64{3, 4})
	if err != nil {
		return rep, err
	}
	defer func() {
		if e != nil {
			e.close()
		}
	}()
	writes := max(2, cfg.LinOps/16)
	log.Logf("stress: last-writer seed=%d goroutines=%d trials=%d writes each=%d", cfg.Seed, cfg.Goroutines, cfg.LinTrials, writes)
	fail := func(err error) (Report, error) {
		rep.Duration = time.Since(start)
		rep.fail("%v; %s", err, replay(cfg.Seed))
		return rep, fmt.Errorf("%w; %s", err, replay(cfg.Seed))
	}

	var last int64 // the region's value before the trial (0: fill)
	for trial := 0; trial < cfg.LinTrials; trial++ {
		hists := make([][]porcupine.Operation, cfg.Goroutines)
		gate := make(chan struct{})
		g, gctx := errgroup.WithContext(ctx)
		for c := 0; c < cfg.Goroutines; c++ {
			g.Go(func() error {
				select {
				case <-gate:
				case <-gctx.Done():
					return nil
				}
				for i := 0; i < writes; i++ {
					op, err := e.write(gctx, c, 0, e.ids.Add(1))
					if err != nil {
						return err
					}
					hists[c] = append(hists[c], op)
				}
				return nil
			})
		}
		close(gate)
		if err := g.Wait(); err != nil {
			return fail(err)
		}
		final, ids, err := e.read(ctx, cfg.Goroutines, 0)
		if err != nil {
			return fail(err)
		}
		var h []porcupine.Operation
		for _, hh := range hists {
			h = append(h, hh...)
		}
		rep.Ops.LinWrites += int64(len(h))
		rep.Ops.LinReads++
		rep.LinHistories++
		out := final.Output.(int64)
		if out < 0 {
			rep.MixedReads++
			rep.LinViolations++
			rep.fail("trial %d: after %d concurrent writes the region is a mix of writes %v; %s", trial, len(h), ids, replay(cfg.Seed))
		} else if lin, ok := lastWriter(last, append(h, final)); !ok {
			rep.LinViolations++
			rep.fail("trial %d: the region holds write %d, which is the last write of no linearization of the history; %s",
				trial, out, replay(cfg.Seed))
		} else if len(h) <= porcupineCrossCheck && porcupine.CheckOperationsTimeout(registerModel(last), append(h, final), 10*time.Second) == porcupine.Illegal {
			// Small histories are cheap for porcupine: it must agree.
			return fail(fmt.Errorf("trial %d: lastWriter found a linearization, porcupine says there is none", trial))
		} else if w := lin[len(lin)-2]; w.Input.(linInput).id != out {
			// lastWriter's linearization ends with the winning write and
			// then the read; a mismatch is a bug of the check itself.
			return fail(fmt.Errorf("trial %d: linearization ends with write %d, read saw %d", trial, w.Input.(linInput).id, out))
		}
		last = out
		if trial%2 == 1 {
			if err := e.f.Flush(ctx); err != nil {
				return fail(err)
			}
			rep.Ops.Flushes++
		}
	}

	// Durability of the winner: close, reopen on the same driver, read.
	// A failed close is returned, but the reopened file is still checked.
	rep.takeCacheStats(e.cache.Stats())
	drv, c := e.drv, e.cache
	var closeErr error
	if err := e.ds.Close(ctx); err != nil {
		closeErr = fmt.Errorf("close dataset: %w", err)
	}
	e.ds = nil
	if err := e.f.Close(ctx); err != nil && closeErr == nil {
		closeErr = fmt.Errorf("close file: %w", err)
	}
	e.f = nil
	if closeErr != nil {
		rep.fail("%v; %s", closeErr, replay(cfg.Seed))
	}
	if e.f, err = engine.Open(ctx, "", &engine.Options{Driver: drv, Cache: c}); err != nil {
		return fail(errors.Join(err, closeErr))
	}
	rep.Ops.FileReopens++
	if e.ds, err = e.f.OpenDataset(ctx, "shared", nil); err != nil {
		return fail(errors.Join(err, closeErr))
	}
	op, ids, err := e.read(ctx, 0, 0)
	if err != nil {
		return fail(errors.Join(err, closeErr))
	}
	rep.Ops.LinReads++
	if out := op.Output.(int64); out != last && rep.LinViolations == 0 {
		rep.LinViolations++
		rep.fail("after reopen the region holds %v (output %d), before close it held write %d; %s", ids, out, last, replay(cfg.Seed))
	}
	if err := e.close(); err != nil && closeErr == nil {
		closeErr = fmt.Errorf("close after reopen: %w", err)
		rep.fail("%v; %s", closeErr, replay(cfg.Seed))
	}
	e = nil
	rep.Duration = time.Since(start)
	log.Logf("stress: last-writer seed=%d goroutines=%d done in %v: %d writes, %d violations, %d mixed",
		cfg.Seed, cfg.Goroutines, rep.Duration.Round(time.Millisecond), rep.Ops.LinWrites, rep.LinViolations, rep.MixedReads)
	return rep, joinReplay(cfg.Seed, linErr(rep), closeErr)
}

// porcupineCrossCheck is the largest trial history (in writes) that
// RunLastWriter also hands to porcupine: beyond it the orders of fully
// concurrent writes make the general search exponential.
const porcupineCrossCheck = 24

// lastWriter decides whether h — concurrent whole-region writes of unique
// ids to one region holding init, followed by reads that began after every
// write returned — is linearizable, and returns a linearization. It is
// exact for that shape and linear-time, where a general checker would
// search the orders of fully concurrent writes (exponential):
//
// The reads must all return the same value v (nothing writes after them).
// If v == init and there are no writes, the history is trivially
// linearizable. Otherwise v must be the id of a write w, and w can be
// ordered last iff no other write began after w returned (such a write is
// forced after w). Then every other write in order of return, w, and the
// reads form a linearization: ordering by return respects real time
// (a returned before b began implies a returns before b does).
func lastWriter(init int64, h []porcupine.Operation) ([]porcupine.Operation, bool) {
	var writes, reads []porcupine.Operation
	for _, op := range h {
		if op.Input.(linInput).write {
			writes = append(writes, op)
		} else {
			reads = append(reads, op)
		}
	}
	if len(reads) == 0 {
		return nil, false
	}
	v := reads[0].Output.(int64)
	for _, rd := range reads {
		if rd.Output.(int64) != v {
			return nil, false
		}
		for _, w := range writes {
			if w.Return >= rd.Call {
				return nil, false // not the shape lastWriter decides
			}
		}
	}
	if len(writes) == 0 {
		return reads, v == init
	}
	wi := slices.IndexFunc(writes, func(w porcupine.Operation) bool { return w.Input.(linInput).id == v })
	if wi < 0 {
		return nil, false
	}
	w := writes[wi]
	rest := slices.Delete(slices.Clone(writes), wi, wi+1)
	for _, o := range rest {
		if o.Call > w.Return {
			return nil, false
		}
	}
	slices.SortFunc(rest, func(a, b porcupine.Operation) int { return int(a.Return - b.Return) })
	lin := append(rest, w)
	return append(lin, reads...), true
}
