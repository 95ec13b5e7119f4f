package stress

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/vfd"
)

// write writes a fresh seq into a random selection of the worker's own
// elements. issued is stored before the request and acked after it
// returns, so any reader can bound what it may see (checkRange).
func (w *worker) write(ctx context.Context, m *dsModel, h *engine.Dataset) error {
	rows := m.rows.Load()
	if rows == 0 {
		return nil
	}
	s := m.ownSel(w.rng, rows, w.id)
	seq := w.nextSeq()
	buf := make([]byte, s.n()*8)
	ls := make([]uint64, 0, s.n())
	s.each(func(coord []uint64, pos uint64) {
		l := m.linear(coord)
		m.issued[l].Store(seq)
		binary.LittleEndian.PutUint64(buf[pos*8:], m.value(l, seq))
		ls = append(ls, l)
	})
	if hk := w.r.cfg.hooks; hk == nil || hk.skipWrite == nil || !hk.skipWrite(w.id, w.op) {
		if err := h.Write(ctx, s.engine(), buf); err != nil {
			return fmt.Errorf("write %s (%v): %w", m.name, s, err)
		}
	}
	for _, l := range ls {
		m.acked[l].Store(seq)
	}
	w.r.ops.writes.Add(1)
	return nil
}

func (w *worker) afterRead(buf []byte) {
	if hk := w.r.cfg.hooks; hk != nil && hk.afterRead != nil {
		hk.afterRead(w.id, w.op, buf)
	}
}

// readOwn reads the worker's own elements: nobody else writes them, so the
// result must equal the model exactly.
func (w *worker) readOwn(ctx context.Context, m *dsModel, h *engine.Dataset) error {
	rows := m.rows.Load()
	if rows == 0 {
		return nil
	}
	s := m.ownSel(w.rng, rows, w.id)
	buf := make([]byte, s.n()*8)
	if err := h.Read(ctx, s.engine(), buf); err != nil {
		return fmt.Errorf("read %s (%v): %w", m.name, s, err)
	}
	w.afterRead(buf)
	w.r.chk.checkExact(fmt.Sprintf("worker %d read own", w.id), m, s, buf)
	w.r.ops.reads.Add(1)
	return nil
}

// readAny reads across every goroutine's stripes while they write: each
// element must hold a write its owner had issued by the time the read
// returned, and no older than the one acknowledged before the read began.
func (w *worker) readAny(ctx context.Context, m *dsModel, h *engine.Dataset) error {
	rows := m.rows.Load()
	if rows == 0 {
		return nil
	}
	s := m.anySel(w.rng, rows)
	lo := make([]uint32, 0, s.n())
	s.each(func(coord []uint64, _ uint64) { lo = append(lo, m.acked[m.linear(coord)].Load()) })
	buf := make([]byte, s.n()*8)
	if err := h.Read(ctx, s.engine(), buf); err != nil {
		return fmt.Errorf("read %s (%v): %w", m.name, s, err)
	}
	w.afterRead(buf)
	w.r.chk.checkRange(fmt.Sprintf("worker %d cross-read", w.id), m, s, buf,
		func(i, _ uint64) uint32 { return lo[i] },
		func(_, l uint64) uint32 { return m.issued[l].Load() })
	w.r.ops.crossReads.Add(1)
	return nil
}

// flush commits the file while the others keep writing. When it returns
// nil, every write acknowledged before the call must survive a crash
// (DESIGN.md, Flush contract): the model's durable floor rises to the acked
// seqs snapshotted before the call.
func (w *worker) flush(ctx context.Context, fm *fileModel) error {
	var snaps [][]uint32
	var rows []uint64
	if fm.crash != nil {
		for _, m := range fm.ds {
			rows = append(rows, m.rows.Load())
			snaps = append(snaps, snapshot(m))
		}
	}
	if err := fm.f.Flush(ctx); err != nil {
		return fmt.Errorf("flush file %d: %w", fm.idx, err)
	}
	w.r.ops.flushes.Add(1)
	if fm.crash == nil {
		return nil
	}
	fm.durMu.Lock()
	defer fm.durMu.Unlock()
	for i, m := range fm.ds {
		for l, v := range snaps[i] {
			m.durable[l] = max(m.durable[l], v)
		}
		m.rowsCommitted = max(m.rowsCommitted, rows[i])
	}
	return nil
}

func snapshot(m *dsModel) []uint32 {
	s := make([]uint32, len(m.acked))
	for l := range s {
		s[l] = m.acked[l].Load()
	}
	return s
}

// The coordinator's steps; they run only while no worker does.

// verifyAll reads every dataset whole through the coordinator's handles
// and compares it with the model exactly.
func (r *run) verifyAll(ctx context.Context) error {
	for _, fm := range r.files {
		for i, m := range fm.ds {
			if err := r.verify(ctx, m, fm.handles[i], "verify"); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *run) verify(ctx context.Context, m *dsModel, h *engine.Dataset, what string) error {
	if got, want := h.Shape(), m.shape(); !slices.Equal(got, want) {
		r.chk.bad.Add(1)
		r.chk.failf("%s: %s has shape %v, model %v", what, m.name, got, want)
		return nil
	}
	r.rep.Ops.Verifies++
	s, ok := m.all()
	if !ok {
		return nil
	}
	buf := make([]byte, s.n()*8)
	if err := h.Read(ctx, s.engine(), buf); err != nil {
		return fmt.Errorf("%s: read all of %s: %w", what, m.name, err)
	}
	r.chk.checkExact(what, m, s, buf)
	return nil
}

// commitAll flushes every file with the workers stopped: the committed
// state is then exactly the model.
func (r *run) commitAll(ctx context.Context) error {
	for _, fm := range r.files {
		if err := fm.f.Flush(ctx); err != nil {
			return fmt.Errorf("flush file %d: %w", fm.idx, err)
		}
		r.rep.Ops.Flushes++
		fm.setDurable()
	}
	return nil
}

// setDurable records that the committed state is exactly the model.
func (fm *fileModel) setDurable() {
	fm.durMu.Lock()
	defer fm.durMu.Unlock()
	for _, m := range fm.ds {
		for l := range m.durable {
			m.durable[l] = m.acked[l].Load()
		}
		m.rowsCommitted = m.rows.Load()
	}
}

// crashCheck opens what a crash right now would leave of fm's file (mode,
// seed: see vfd.Crash) and checks it: engine.Check passes, every dataset
// has at least the committed rows, and every element holds a write at
// least as new as the durable floor and no newer than the model's.
func (r *run) crashCheck(ctx context.Context, fm *fileModel, mode vfd.CrashMode, seed uint64) error {
	if fm.crash == nil {
		return nil
	}
	r.rep.Ops.CrashChecks++
	img := vfd.NewMemFrom(fm.crash.CrashImage(mode, seed))
	defer img.Close()
	what := fmt.Sprintf("crash image (%v, seed %d) of file %d", mode, seed, fm.idx)
	if rep, err := engine.Check(ctx, "", &engine.Options{Driver: img}); err != nil {
		r.chk.bad.Add(1)
		var problems string
		if rep != nil {
			problems = strings.Join(rep.Problems, "; ")
		}
		r.chk.failf("%s: engine.Check: %v %s", what, err, problems)
		return nil
	}
	f, err := engine.Open(ctx, "", &engine.Options{Driver: img, ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: r.cfg.CacheBytes}})
	if err != nil {
		r.chk.bad.Add(1)
		r.chk.failf("%s: open: %v", what, err)
		return nil
	}
	defer f.Close(ctx)
	fm.durMu.Lock()
	defer fm.durMu.Unlock()
	for _, m := range fm.ds {
		h, err := f.OpenDataset(ctx, m.name, nil)
		if err != nil {
			r.chk.bad.Add(1)
			r.chk.failf("%s: open %s: %v", what, m.name, err)
			continue
		}
		shape := h.Shape()
		want := m.shape()
		if len(shape) != len(want) || !slices.Equal(shape[1:], want[1:]) || shape[0] < m.rowsCommitted || shape[0] > want[0] {
			r.chk.bad.Add(1)
			r.chk.failf("%s: %s has shape %v; model %v, committed rows >= %d", what, m.name, shape, want, m.rowsCommitted)
			h.Close(ctx)
			continue
		}
		if shape[0] > 0 {
			s := sel{start: make([]uint64, len(shape)), stride: make([]uint64, len(shape)), count: shape, block: make([]uint64, len(shape))}
			for d := range shape {
				s.stride[d], s.block[d] = 1, 1
			}
			buf := make([]byte, s.n()*8)
			if err := h.Read(ctx, s.engine(), buf); err != nil {
				r.chk.bad.Add(1)
				r.chk.failf("%s: read %s: %v", what, m.name, err)
			} else {
				r.chk.checkRange(what, m, s, buf,
					func(_, l uint64) uint32 { return m.durable[l] },
					func(_, l uint64) uint32 { return m.acked[l].Load() })
			}
		}
		h.Close(ctx)
	}
	return nil
}

// boundary changes structure between phases: extents (shrink and grow),
// every handle of a dataset closed and reopened, whole files closed,
// checked and reopened on the shared cache.
func (r *run) boundary(ctx context.Context, crng *rand.Rand) error {
	for _, fm := range r.files {
		for i, m := range fm.ds {
			switch crng.IntN(6) {
			case 0, 1:
				rows := m.rows.Load()
				cands := []uint64{0, rows / 2, rows - min(rows, 1), min(rows+1, m.dims[0]), m.dims[0], crng.Uint64N(m.dims[0] + 1)}
				next := cands[crng.IntN(len(cands))]
				dims := m.shape()
				dims[0] = next
				if err := fm.handles[i].SetExtent(ctx, dims); err != nil {
					return fmt.Errorf("set extent of %s to %v: %w", m.name, dims, err)
				}
				m.resize(next)
				r.rep.Ops.Extents++
			case 2:
				// The workers closed theirs: this is the last handle, so
				// the dataset leaves the cache and comes back (warm).
				if err := fm.handles[i].Close(ctx); err != nil {
					return fmt.Errorf("close %s: %w", m.name, err)
				}
				h, err := fm.f.OpenDataset(ctx, m.name, nil)
				fm.handles[i] = h
				if err != nil {
					return fmt.Errorf("reopen %s: %w", m.name, err)
				}
				r.rep.Ops.DatasetReopens++
			}
		}
		if crng.IntN(3) == 0 {
			if err := r.reopenFile(ctx, fm, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// reopenFile closes fm's file (committing it), runs the consistency
// checker on the driver, and opens it again on the shared cache (reopen)
// or leaves it closed.
func (r *run) reopenFile(ctx context.Context, fm *fileModel, reopen bool) error {
	for i, h := range fm.handles {
		if h == nil {
			continue
		}
		fm.handles[i] = nil
		if err := h.Close(ctx); err != nil {
			return fmt.Errorf("close %s: %w", fm.ds[i].name, err)
		}
	}
	f := fm.f
	fm.f = nil
	if err := f.Close(ctx); err != nil {
		return fmt.Errorf("close file %d: %w", fm.idx, err)
	}
	fm.setDurable()
	if rep, err := engine.Check(ctx, "", &engine.Options{Driver: fm.drv}); err != nil {
		var problems string
		if rep != nil {
			problems = strings.Join(rep.Problems, "; ")
		}
		return fmt.Errorf("check file %d after close: %w %s", fm.idx, err, problems)
	}
	if !reopen {
		return nil
	}
	f, err := engine.Open(ctx, "", &engine.Options{Driver: fm.drv, Cache: r.cache})
	if err != nil {
		return fmt.Errorf("reopen file %d: %w", fm.idx, err)
	}
	fm.f = f
	var names []string
	for _, m := range fm.ds {
		names = append(names, m.name)
	}
	var got []string
	for m, err := range f.Datasets() {
		if err != nil {
			return fmt.Errorf("list datasets of file %d: %w", fm.idx, err)
		}
		got = append(got, m.Path[1:])
	}
	slices.Sort(got)
	if !slices.Equal(got, names) {
		r.chk.bad.Add(1)
		r.chk.failf("file %d reopened with datasets %v, model %v", fm.idx, got, names)
	}
	for i, m := range fm.ds {
		h, err := f.OpenDataset(ctx, m.name, nil)
		if err != nil {
			return fmt.Errorf("reopen %s: %w", m.name, err)
		}
		fm.handles[i] = h
	}
	r.rep.Ops.FileReopens++
	return nil
}

// closeAndReopen ends a run: every file is closed and checked, a crash
// right after Close must keep everything, and a fresh open must read back
// exactly the model.
func (r *run) closeAndReopen(ctx context.Context) error {
	for _, fm := range r.files {
		if err := r.reopenFile(ctx, fm, true); err != nil {
			return err
		}
		if err := r.crashCheck(ctx, fm, vfd.KeepSynced, r.cfg.Seed); err != nil {
			return err
		}
		for i, m := range fm.ds {
			if err := r.verify(ctx, m, fm.handles[i], fmt.Sprintf("after reopen of file %d", fm.idx)); err != nil {
				return err
			}
		}
		if err := r.reopenFile(ctx, fm, false); err != nil {
			return err
		}
	}
	return nil
}
