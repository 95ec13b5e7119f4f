package engine

import (
	"context"
	"math/rand/v2"
	"slices"

	"github.com/scc-dev/scc/vfd"
)

// The workload driver: a crash or fault sweep (crash_test.go) runs one
// workload once per failure point, and every layout's workload shares the
// same frame — create the file, record the empty state generation 1
// holds, record the model before each commit, and close at the end, which
// commits once more (or, after the first error, only releases
// everything). defineWorkload holds that frame, so a layout's workload is
// its options, its datasets and its operations. The single-fault sweep
// (faultsweep_test.go), which carries on after the failure instead of
// stopping, has its own driver, parameterised by layout.

// wlRun is one run of a workload: the file under test and the model of
// what its datasets hold.
type wlRun struct {
	ctx   context.Context
	drv   vfd.Driver
	opts  *Options
	seed  uint64
	rng   *rand.Rand
	f     *File // nil after a failed reopen: nothing is open
	refs  map[string]*refArray
	sets  map[string]*Dataset
	names []string // the datasets, in creation order
	// virtual are the virtual datasets, in creation order; derive[n]
	// computes n's model from the models of its sources, so that every
	// commit records what the virtual dataset reads in the state it
	// captures.
	virtual []string
	derive  map[string]func(refs map[string]*refArray) *refArray
	snaps   snapshots
	// lastAck is the generation of the last commit acknowledged with nil.
	lastAck uint64
	// beforeClose, if set, runs on the open file before the final Close
	// (a workload reading statistics the close would reset).
	beforeClose func(f *File)
}

// defineWorkload returns the workload that runs ops on a file created on
// the sweep's driver with opts; stream selects the random sequence drawn
// from the sweep's seed, so that two workloads do not draw alike.
func defineWorkload(stream uint64, opts *Options, ops func(w *wlRun) error) workload {
	return func(drv vfd.Driver, seed uint64, snaps snapshots) (lastAck uint64, err error) {
		w := &wlRun{
			ctx: context.Background(), drv: drv,
			seed: seed, rng: rand.New(rand.NewPCG(seed, stream)),
			refs: map[string]*refArray{}, sets: map[string]*Dataset{},
			derive: map[string]func(map[string]*refArray) *refArray{},
			snaps:  snaps,
		}
		snaps.record(1, w.refs)
		o := *opts // a run must not see what an earlier one set
		w.opts = &o
		if w.f, err = Create(context.Background(), "", withDriver(w.opts, drv)); err != nil {
			return 0, err
		}
		w.lastAck = 1
		defer func() {
			if w.f == nil {
				return
			}
			if w.beforeClose != nil {
				w.beforeClose(w.f)
			}
			// The power is out from the first error on: Close must not
			// make the outcome look better than it is, but it must
			// release everything.
			if cerr := w.f.Close(context.Background()); err == nil {
				if cerr == nil {
					lastAck = w.f.Generation()
				}
				err = cerr
			}
		}()
		if err := ops(w); err != nil {
			return w.lastAck, err
		}
		w.deriveVirtual()
		snaps.record(w.f.Generation()+1, w.refs) // what Close commits
		return w.lastAck, nil
	}
}

// create makes the named datasets of specs, in the order given, each with
// its model (a variable-length model for the Vlen layout).
func (w *wlRun) create(specs map[string]DatasetSpec, names ...string) error {
	for _, n := range names {
		s := specs[n]
		ds, err := w.f.CreateDataset(context.Background(), n, s)
		if err != nil {
			return err
		}
		w.sets[n] = ds
		if s.Layout == Vlen {
			w.refs[n] = newVlenRef(s.Shape, s.Type.Size())
		} else {
			w.refs[n] = newRef(s.Shape, s.Type.Size(), s.Fill)
		}
		w.names = append(w.names, n)
	}
	return nil
}

// createVirtual makes the virtual dataset n, whose model model derives
// from the models of its sources.
func (w *wlRun) createVirtual(n string, spec VirtualSpec, model func(refs map[string]*refArray) *refArray) error {
	ds, err := w.f.CreateVirtualDataset(w.ctx, n, spec)
	if err != nil {
		return err
	}
	w.sets[n] = ds
	w.derive[n] = model
	w.virtual = append(w.virtual, n)
	w.deriveVirtual()
	return nil
}

// deriveVirtual brings the models of the virtual datasets up to date with
// those of their sources.
func (w *wlRun) deriveVirtual() {
	for _, n := range w.virtual {
		w.refs[n] = w.derive[n](w.refs)
	}
}

// flush commits, recording the model as the state the commit captures.
func (w *wlRun) flush() error {
	w.deriveVirtual()
	return w.snaps.commit(w.ctx, w.f, w.refs, &w.lastAck)
}

// setExtent changes the extent of dataset n and of its model.
func (w *wlRun) setExtent(n string, shape []uint64) error {
	if err := w.sets[n].SetExtent(w.ctx, shape); err != nil {
		return err
	}
	if r := w.refs[n]; r.vlen != nil {
		r.resizeVlen(shape)
	} else {
		r.resize(shape)
	}
	return nil
}

// writeRandom makes n writes of random bytes to random selections of
// datasets drawn from the created ones.
func (w *wlRun) writeRandom(n int) error {
	for i := 0; i < n; i++ {
		name := w.names[w.rng.IntN(len(w.names))]
		r := w.refs[name]
		sel := randomSelection(w.rng, r.dims)
		buf := randomBytes(w.rng, int(sel.NumElements())*r.elemSize)
		if err := w.sets[name].Write(w.ctx, sel, buf); err != nil {
			return err
		}
		r.write(sel, buf)
	}
	return nil
}

// reopen closes the file (a commit, recorded like a flush) and opens it
// again with the workload's options, reopening every dataset.
func (w *wlRun) reopen() error {
	w.deriveVirtual()
	w.snaps.record(w.f.Generation()+1, w.refs)
	if err := w.f.Close(context.Background()); err != nil {
		return err
	}
	w.lastAck = w.f.Generation()
	f, err := Open(context.Background(), "", withDriver(w.opts, w.drv))
	if err != nil {
		w.f = nil
		return err
	}
	w.f = f
	for _, n := range slices.Concat(w.names, w.virtual) {
		if w.sets[n], err = f.OpenDataset(context.Background(), n, nil); err != nil {
			return err
		}
	}
	return nil
}

// steps runs each step until one fails.
func steps(s ...func() error) error {
	for _, step := range s {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}
