package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// The transient-fault sweep: one I/O operation fails (a write that stores a
// prefix of its bytes and returns ENOSPC, or any operation that returns EIO
// and does nothing), and the workload goes on as an application would: it
// reads back what a failed call left, keeps writing, flushes again, reopens.
// The crash and fault sweeps (crash_test.go) stop at the first error; this
// one checks what happens after it, which is where a failed write that is
// later committed as if it had succeeded shows up.
//
// What it requires, on every layout, with attributes, with and without a
// cache image:
//   - a failed Write/WriteVlen/Erase leaves every element either as it was or
//     as the call asked, and the data reads back (the fault is over);
//   - a failed Read changes nothing;
//   - a read never returns data the model does not hold;
//   - a Flush or Close that returns nil commits exactly the model, and a
//     failed one leaves the file at a state some commit attempt captured;
//   - a reopen (with the image, when one was written) sees such a state;
//   - the final file passes Check, and an injected error reached some call.

// tState is one committed state of the transient workload: every dataset's
// model and the file's attributes.
type tState struct {
	refs  map[string]*refArray
	attrs map[string]string
}

func (s tState) clone() tState {
	c := tState{refs: make(map[string]*refArray, len(s.refs)), attrs: make(map[string]string, len(s.attrs))}
	for k, v := range s.refs {
		c.refs[k] = v.clone()
	}
	for k, v := range s.attrs {
		c.attrs[k] = v
	}
	return c
}

// tCandidates maps a generation to every state a commit attempt that would
// write it captured: a failed attempt may or may not have reached its
// superblock, and a retry records the same generation again.
type tCandidates map[uint64][]tState

func (c tCandidates) add(gen uint64, s tState) { c[gen] = append(c[gen], s.clone()) }

// tSpecs are the transient workload's datasets, one or two of each layout,
// small enough that every call touches a few chunks or pieces and a tiny
// cache keeps evicting.
var tSpecs = []struct {
	name string
	spec DatasetSpec
}{
	{"dense", DatasetSpec{Type: Uint16, Shape: []uint64{6, 10}, MaxShape: []uint64{Unlimited, 10}, Chunk: []uint64{2, 5}, Filters: []Filter{Shuffle(), Zstd(1)}}},
	{"fixed", DatasetSpec{Type: Int32, Shape: []uint64{8, 8}, Chunk: []uint64{4, 4}, Fill: []byte{1, 2, 3, 4}}},
	{"contig", DatasetSpec{Type: Uint8, Shape: []uint64{100, 700}, Layout: Contiguous}},
	{"small", DatasetSpec{Type: Uint16, Shape: []uint64{6, 10}, Fill: []byte{7, 7}}}, // contiguous by default
	{"sparse", DatasetSpec{Type: Uint16, Shape: []uint64{8, 10}, MaxShape: []uint64{Unlimited, 10}, Chunk: []uint64{2, 5},
		Layout: Sparse, Fill: []byte{0xff, 0xff}, Filters: []Filter{Shuffle(), Zstd(1)}, SelectionFilters: []Filter{Deflate(1)}}},
	{"vlen", DatasetSpec{Type: Uint8, Shape: []uint64{8, 6}, MaxShape: []uint64{Unlimited, 6}, Chunk: []uint64{2, 3}, Layout: Vlen,
		Filters: []Filter{Zstd(1)}, HeapDefragPercent: 30}},
}

// tRun is one run of the transient workload.
type tRun struct {
	t     *testing.T
	ctx   context.Context
	drv   vfd.Driver
	opts  *Options
	rng   *rand.Rand
	f     *File
	sets  map[string]*Dataset
	model tState
	cands tCandidates
	// lastAck is the generation of the last commit acknowledged with nil.
	lastAck uint64
	// failures counts calls that returned an error.
	failures int
	// closedClean is set when the workload's final Close returned nil.
	closedClean bool
	// label names the fault case in failure messages.
	label string
}

func (r *tRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s: %s", r.label, fmt.Sprintf(format, args...))
}

// injectedOrNil fails the test for an error the sweep did not inject: the
// fault is the only thing that may fail, and it must surface as ErrIO.
func (r *tRun) injectedOrNil(what string, err error) bool {
	r.t.Helper()
	if err == nil {
		return false
	}
	r.failures++
	if !errors.Is(err, vfd.ErrInjected) || !errors.Is(err, ErrIO) {
		r.fatalf("%s: %v (want the injected error as ErrIO)", what, err)
	}
	return true
}

func (r *tRun) open() {
	r.t.Helper()
	var err error
	for try := 0; try < 2; try++ { // the one fault may hit the first open
		if r.f, err = OpenWith(r.drv, r.opts); !r.injectedOrNil("open", err) {
			break
		}
	}
	if err != nil {
		r.fatalf("open after the fault: %v", err)
	}
	r.sets = map[string]*Dataset{}
}

// createMissing creates the datasets the model lacks: all of them at the
// start, and again after a reopen found the commit that created them
// failed.
func (r *tRun) createMissing() {
	r.t.Helper()
	for _, sp := range tSpecs {
		if _, ok := r.model.refs[sp.name]; ok {
			continue
		}
		ds, err := r.f.CreateDataset(sp.name, sp.spec)
		if err != nil {
			r.fatalf("create %s: %v", sp.name, err)
		}
		r.sets[sp.name] = ds
		if sp.spec.Layout == Vlen {
			r.model.refs[sp.name] = newVlenRef(sp.spec.Shape, 1)
		} else {
			r.model.refs[sp.name] = newRef(sp.spec.Shape, sp.spec.Type.Size(), sp.spec.Fill)
		}
	}
}

// adopt makes the model the reopened file's state: the candidate of its
// generation that the file holds.
func (r *tRun) adopt() {
	r.t.Helper()
	gen := r.f.Generation()
	if gen < r.lastAck {
		r.fatalf("reopened at generation %d, but %d was acknowledged", gen, r.lastAck)
	}
	var errs []error
	for _, s := range r.cands[gen] {
		err := r.matches(s)
		if errors.Is(err, vfd.ErrInjected) {
			r.injectedOrNil("reading the reopened file", err)
			err = r.matches(s) // the one fault is spent
		}
		if err == nil {
			r.model = s.clone()
			r.lastAck = gen
			for _, sp := range tSpecs {
				if _, ok := r.model.refs[sp.name]; ok {
					ds, err := r.f.OpenDataset(sp.name)
					if err != nil {
						r.fatalf("open dataset %s: %v", sp.name, err)
					}
					r.sets[sp.name] = ds
				}
			}
			return
		}
		errs = append(errs, err)
	}
	r.fatalf("generation %d matches none of its %d commit attempts: %v", gen, len(r.cands[gen]), errors.Join(errs...))
}

// matches reports how the open file differs from s (nil: it holds s).
func (r *tRun) matches(s tState) error {
	names := r.f.Datasets()
	if len(names) != len(s.refs) {
		return fmt.Errorf("datasets %v, model has %d", names, len(s.refs))
	}
	for n, ref := range s.refs {
		ds, err := r.f.OpenDataset(n)
		if err != nil {
			return fmt.Errorf("open %s: %w", n, err)
		}
		if err := r.sameData(ds, ref); err != nil {
			return err
		}
	}
	got := map[string]string{}
	for _, a := range r.f.Attrs() {
		v, err := a.Value.Str()
		if err != nil {
			return fmt.Errorf("attribute %q: %w", a.Name, err)
		}
		got[a.Name] = v
	}
	if len(got) != len(s.attrs) {
		return fmt.Errorf("%d attributes, model %d", len(got), len(s.attrs))
	}
	for k, v := range s.attrs {
		if got[k] != v {
			return fmt.Errorf("attribute %q is %q, model %q", k, got[k], v)
		}
	}
	return nil
}

// sameData reads the whole of ds and compares it with ref, sparse
// datasets' defined elements too.
func (r *tRun) sameData(ds *Dataset, ref *refArray) error {
	if !slices.Equal(ds.Shape(), ref.dims) {
		return fmt.Errorf("%s: shape %v, model %v", ds.Name(), ds.Shape(), ref.dims)
	}
	if prod(ref.dims) == 0 {
		return nil
	}
	all := All(ref.dims)
	if ref.vlen != nil {
		got, err := ds.ReadVlen(r.ctx, all)
		if err != nil {
			return fmt.Errorf("%s: ReadVlen: %w", ds.Name(), err)
		}
		if err := vlenDiff(got, ref.readVlen(all)); err != nil {
			return fmt.Errorf("%s: %w", ds.Name(), err)
		}
		return nil
	}
	buf := make([]byte, len(ref.data))
	if err := ds.Read(r.ctx, all, buf); err != nil {
		return fmt.Errorf("%s: Read: %w", ds.Name(), err)
	}
	if i := firstDiff(buf, ref.data, ref.elemSize); i >= 0 {
		return fmt.Errorf("%s: element %d is %x, model %x", ds.Name(), i, buf[i*ref.elemSize:][:ref.elemSize], ref.data[i*ref.elemSize:][:ref.elemSize])
	}
	if ds.Layout() == Sparse {
		pos, err := ds.DefinedElements(r.ctx, all)
		if err != nil {
			return fmt.Errorf("%s: DefinedElements: %w", ds.Name(), err)
		}
		var want []uint64
		for i := 0; i < len(ref.data)/ref.elemSize; i++ {
			if !bytes.Equal(ref.data[i*ref.elemSize:][:ref.elemSize], ref.fill) {
				want = append(want, uint64(i))
			}
		}
		if !slices.Equal(pos, want) {
			return fmt.Errorf("%s: %d defined elements, model %d", ds.Name(), len(pos), len(want))
		}
	}
	return nil
}

func firstDiff(a, b []byte, es int) int {
	for i := 0; i+es <= len(a); i += es {
		if !bytes.Equal(a[i:i+es], b[i:i+es]) {
			return i / es
		}
	}
	return -1
}

// settle is called after a failed mutating call on ds: every element must
// hold its old value or the one the call asked for (old and asked are whole
// models), and the model becomes what the dataset holds. The fault is over,
// so the read-back itself must succeed. On a chunked layout the call is
// atomic per chunk: each chunk it touched holds all of its part or none,
// and a call inside one chunk changed nothing.
func (r *tRun) settle(name string, old, asked *refArray) {
	r.t.Helper()
	ds := r.sets[name]
	all := All(old.dims)
	cur := old.clone()
	n := int(prod(old.dims))
	// state[i]: 0 unchanged by the call, 1 holds the old value, 2 the new.
	state := make([]int8, n)
	if old.vlen != nil {
		got, err := ds.ReadVlen(r.ctx, all)
		if err != nil {
			r.fatalf("%s: reading back after a failed write: %v", name, err)
		}
		for i, v := range got {
			switch {
			case bytes.Equal(old.vlen[i], asked.vlen[i]):
			case bytes.Equal(v, old.vlen[i]):
				state[i] = 1
			case bytes.Equal(v, asked.vlen[i]):
				state[i] = 2
			default:
				r.fatalf("%s: after a failed write element %d is neither its old value nor the written one", name, i)
			}
			cur.vlen[i] = bytes.Clone(v)
			if len(v) == 0 {
				cur.vlen[i] = nil
			}
		}
	} else {
		got := make([]byte, len(old.data))
		if err := ds.Read(r.ctx, all, got); err != nil {
			r.fatalf("%s: reading back after a failed write: %v", name, err)
		}
		es := old.elemSize
		for i := range n {
			g, o, a := got[i*es:][:es], old.data[i*es:][:es], asked.data[i*es:][:es]
			switch {
			case bytes.Equal(o, a):
			case bytes.Equal(g, o):
				state[i] = 1
			case bytes.Equal(g, a):
				state[i] = 2
			default:
				r.fatalf("%s: after a failed write element %d is %x, neither %x (old) nor %x (written)", name, i, g, o, a)
			}
		}
		cur.data = got
	}
	if chunk := ds.Chunk(); ds.Layout() != Contiguous && len(chunk) > 0 {
		perChunk := map[string]int8{} // chunk coordinates → the state its changed elements share
		coord := make([]uint64, len(old.dims))
		for i := range n {
			if state[i] == 0 {
				continue
			}
			rem := uint64(i)
			for d := len(old.dims) - 1; d >= 0; d-- {
				coord[d] = rem % old.dims[d] / chunk[d]
				rem /= old.dims[d]
			}
			k := fmt.Sprint(coord)
			if s, ok := perChunk[k]; ok && s != state[i] {
				r.fatalf("%s: a failed write left chunk %s partly written", name, k)
			}
			perChunk[k] = state[i]
		}
		if len(perChunk) == 1 {
			for k, s := range perChunk {
				if s == 2 {
					r.fatalf("%s: a failed write inside one chunk (%s) was applied", name, k)
				}
			}
		}
	}
	r.model.refs[name] = cur
}

// mutate runs one random data-changing call on one random dataset.
func (r *tRun) mutate() {
	r.t.Helper()
	sp := tSpecs[r.rng.IntN(len(tSpecs))]
	name := sp.name
	ds, ref := r.sets[name], r.model.refs[name]
	if prod(ref.dims) == 0 {
		return
	}
	asked := ref.clone()
	var err error
	switch {
	case ref.vlen != nil:
		sel := randomSelection(r.rng, ref.dims)
		vals := randomVlen(r.rng, int(sel.NumElements()), 1)
		asked.writeVlen(sel, vals)
		err = ds.WriteVlen(r.ctx, sel, vals)
	case sp.spec.Layout == Sparse && r.rng.IntN(3) == 0:
		sel := randomSelection(r.rng, ref.dims)
		asked.write(sel, fillBuf(ref, sel))
		err = ds.Erase(r.ctx, sel)
	default:
		sel := randomSelection(r.rng, ref.dims)
		switch {
		case r.rng.IntN(4) == 0:
			// Whole chunks and whole pieces: the paths that write
			// straight to the file.
			sel = All(ref.dims)
		case sp.spec.Layout == Sparse:
			sel = randomSparseSelection(r.rng, ref.dims)
		}
		buf := randomBytes(r.rng, int(sel.NumElements())*ref.elemSize)
		if sp.spec.Layout == Sparse {
			for j := 0; j < len(buf); j += ref.elemSize {
				buf[j] &= 0x7f // never the fill value
			}
		}
		asked.write(sel, buf)
		err = ds.Write(r.ctx, sel, buf)
	}
	if r.injectedOrNil("write "+name, err) {
		r.settle(name, ref, asked)
		return
	}
	r.model.refs[name] = asked
}

// read reads one random selection of one random dataset and compares it
// with the model; a failed read changes nothing.
func (r *tRun) read() {
	r.t.Helper()
	sp := tSpecs[r.rng.IntN(len(tSpecs))]
	ds, ref := r.sets[sp.name], r.model.refs[sp.name]
	if prod(ref.dims) == 0 {
		return
	}
	sel := randomSelection(r.rng, ref.dims)
	if ref.vlen != nil {
		got, err := ds.ReadVlen(r.ctx, sel)
		if r.injectedOrNil("read "+sp.name, err) {
			return
		}
		if err := vlenDiff(got, ref.readVlen(sel)); err != nil {
			r.fatalf("%s: read %v: %v", sp.name, sel.hyper(), err)
		}
		return
	}
	buf := make([]byte, sel.NumElements()*uint64(ref.elemSize))
	if r.injectedOrNil("read "+sp.name, ds.Read(r.ctx, sel, buf)) {
		return
	}
	if want := ref.read(sel); !bytes.Equal(buf, want) {
		r.fatalf("%s: read %v returned data the model does not hold", sp.name, sel.hyper())
	}
}

// resize changes the extent of one extensible dataset.
func (r *tRun) resize() {
	r.t.Helper()
	name := []string{"dense", "sparse", "vlen"}[r.rng.IntN(3)]
	ref := r.model.refs[name]
	dims := clone(ref.dims)
	dims[0] = 1 + r.rng.Uint64N(10)
	if r.injectedOrNil("set extent "+name, r.sets[name].SetExtent(r.ctx, dims)) {
		// A failed SetExtent leaves the dataset as it was.
		if err := r.sameData(r.sets[name], ref); err != nil {
			r.fatalf("after a failed SetExtent: %v", err)
		}
		return
	}
	if ref.vlen != nil {
		n := newVlenRef(dims, 1)
		common := []uint64{min(dims[0], ref.dims[0]), dims[1]}
		if prod(common) > 0 {
			n.writeVlen(All(common), ref.readVlen(All(common)))
		}
		r.model.refs[name] = n
		return
	}
	ref.resize(dims)
}

func (r *tRun) setAttr(i int) {
	k, v := fmt.Sprintf("a%d", r.rng.IntN(4)), fmt.Sprintf("value %d", i)
	if err := r.f.SetAttr(r.ctx, k, StringAttr(v)); err != nil {
		r.fatalf("SetAttr: %v", err) // in memory until the commit
	}
	r.model.attrs[k] = v
}

func (r *tRun) flush() {
	r.t.Helper()
	r.cands.add(r.f.Generation()+1, r.model)
	if r.injectedOrNil("flush", r.f.Flush(r.ctx)) {
		return
	}
	r.lastAck = r.f.Generation()
}

// reopen closes the file and opens it again (with the image when one is
// generated), adopting whatever committed state it then holds.
func (r *tRun) reopen() {
	r.t.Helper()
	r.close()
	r.open()
	r.adopt()
	r.createMissing()
}

func (r *tRun) close() {
	r.t.Helper()
	r.cands.add(r.f.Generation()+1, r.model)
	err := r.f.Close()
	if !r.injectedOrNil("close", err) {
		r.lastAck = r.f.Generation()
	}
	r.f, r.sets = nil, nil
}

// transientWorkload runs the whole script on drv; it returns the run, whose
// lastAck and cands the caller checks against the file the run left, or nil
// when the fault made CreateWith fail.
func transientWorkload(t *testing.T, label string, drv vfd.Driver, seed uint64, image bool) *tRun {
	t.Helper()
	r := &tRun{
		t: t, label: label, ctx: context.Background(), drv: drv,
		opts:  &Options{CacheConfig: cache.Config{QuiescentBytes: 8 << 10}},
		rng:   rand.New(rand.NewPCG(seed, 17)),
		model: tState{refs: map[string]*refArray{}, attrs: map[string]string{}},
		cands: tCandidates{},
	}
	if image {
		r.opts.Image = ImageOptions{Generate: true}
	}
	r.cands.add(1, r.model)
	f, err := CreateWith(drv, r.opts)
	if r.injectedOrNil("create", err) {
		return nil // nothing was promised; CreateWith refuses a used driver
	}
	r.f, r.sets, r.lastAck = f, map[string]*Dataset{}, 1
	r.createMissing()
	for round := 0; round < 3; round++ {
		for i := 0; i < 12; i++ {
			switch k := r.rng.IntN(10); {
			case k < 5:
				r.mutate()
			case k < 8:
				r.read()
			case k < 9:
				r.setAttr(i)
			default:
				r.resize()
			}
		}
		r.flush()
		for i := 0; i < 6; i++ {
			r.mutate()
		}
		r.flush()
		r.reopen()
	}
	r.close()
	r.closedClean = r.lastAck == r.cands.last()
	return r
}

// last is the newest generation a commit attempt captured.
func (c tCandidates) last() uint64 {
	var g uint64
	for k := range c {
		g = max(g, k)
	}
	return g
}

// transientFault is the one failure the sweep injects at operation k.
type transientFault struct {
	name   string
	inject func(k int64) vfd.Injector
}

// lastInjected describes the operation the last injection failed, for
// failure messages.
var lastInjected vfd.OpInfo

var transientFaults = []transientFault{
	{"ENOSPC part way", func(k int64) vfd.Injector {
		hit := vfd.Nth(vfd.OpAny, k)
		return vfd.InjectorFunc(func(info vfd.OpInfo) vfd.Effect {
			if !hit.Hit(info) {
				return vfd.Effect{}
			}
			e := vfd.Effect{Err: fmt.Errorf("%w: op %d: %w", vfd.ErrInjected, info.Seq, syscall.ENOSPC)}
			lastInjected = info
			if info.Op.IsWrite() {
				// Half of the extents, in offset order, reach the file: a
				// write that ran out of space part way.
				e.Partial = func(sorted []vfd.Extent) []vfd.Extent { return sorted[:len(sorted)/2+len(sorted)%2] }
			}
			return e
		})
	}},
	{"EIO", func(k int64) vfd.Injector {
		hit := vfd.Nth(vfd.OpAny, k)
		return vfd.InjectorFunc(func(info vfd.OpInfo) vfd.Effect {
			if !hit.Hit(info) {
				return vfd.Effect{}
			}
			lastInjected = info
			return vfd.Effect{Err: fmt.Errorf("%w: op %d: %w", vfd.ErrInjected, info.Seq, syscall.EIO)}
		})
	}},
}

// TestTransientFaultEveryLayout fails one operation at a time, for every
// operation of the transient workload, with each fault kind, with and
// without a cache image, and checks what the workload did after the fault.
func TestTransientFaultEveryLayout(t *testing.T) {
	defer verifyNoLeaks(t)
	for _, image := range []bool{false, true} {
		t.Run(fmt.Sprintf("image=%v", image), func(t *testing.T) {
			probe := vfd.NewFault(vfd.NewMem())
			transientWorkload(t, "clean run", probe, 1, image)
			total := probe.Ops().Total()
			// Every operation; under the race detector (whose value here
			// is small: the workload is sequential) every fourth one,
			// unless in the long run.
			step := int64(1)
			if raceEnabled && !long() {
				step = 4
			} else if testing.Short() {
				step = 7
			}
			cases := 0
			for _, fk := range transientFaults {
				for k := int64(0); k < total; k += step {
					mem := vfd.NewMem()
					fd := vfd.NewFault(mem, fk.inject(k))
					label := fmt.Sprintf("%s at op %d/%d", fk.name, k, total)
					r := transientWorkload(t, label, fd, 1, image)
					if r == nil {
						continue
					}
					// An error no call returned is one the engine took on
					// itself (a write it redoes at the next commit, such as
					// an index block written early under memory pressure):
					// then the final Close must have committed everything,
					// which the verification below holds it to.
					if fd.Injected() > 0 && r.failures == 0 && !r.closedClean {
						t.Fatalf("%s: the error (%s #%d at %d, %d bytes) reached no caller and the final Close did not commit", label, lastInjected.Op, lastInjected.Index, lastInjected.Off, lastInjected.Len)
					}
					fd.SetEnabled(false)
					if _, err := Check(r.ctx, mem); err != nil {
						t.Fatalf("%s at op %d/%d: check: %v", fk.name, k, total, err)
					}
					v := &tRun{t: t, label: label + ", reopened", ctx: r.ctx, drv: mem, opts: &Options{ReadOnly: true}, cands: r.cands, lastAck: r.lastAck}
					v.open()
					v.adopt()
					if err := v.f.Close(); err != nil {
						t.Fatal(err)
					}
					cases++
					if t.Failed() {
						t.Fatalf("%s at op %d/%d", fk.name, k, total)
					}
				}
			}
			t.Logf("%d fault cases over %d operations", cases, total)
		})
	}
}
