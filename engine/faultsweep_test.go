package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// The single-fault sweep, one harness for every layout: one I/O operation
// of a workload fails — a write that stores the first half of its bytes and
// returns ENOSPC, or any operation (read, write, sync, truncate, size) that
// returns EIO and does nothing — and the workload goes on as an application
// would: it reads back what a failed call left, keeps writing, rewrites
// whole chunks (whole pieces of a contiguous dataset) between commits,
// flushes again, reopens. The crash sweeps and the fail-from-here-on fault
// sweeps (crash_test.go) stop at the first error; this one checks what
// happens after it, which is where a failed write that is later committed
// as if it had succeeded shows up.
//
// The sweep runs the workload once per operation index, per fault kind,
// per variant (no image, a cache image, no background write-back), on the
// datasets of one layout at a time, and requires:
//   - a failed call returns the injected error as ErrIO, with its errno in
//     the chain, matching no other sentinel (never ErrCorrupt);
//   - a failed Write/WriteVlen/Erase leaves every element either as it
//     was or as the call asked, atomically per chunk (per piece for a
//     contiguous dataset), a call inside one chunk changing nothing, and
//     the data reads back (the fault is over);
//   - a failed Read or SetExtent changes nothing;
//   - a read never returns data the model does not hold;
//   - a Flush or Close that returns nil commits exactly the model, and a
//     failed one leaves the file at a state some commit attempt captured;
//   - a reopen (with the image, when one was written) sees such a state;
//   - the injected error reached some call, unless the engine took it on
//     itself and the final Close then committed everything;
//   - the file the run leaves passes Check and, reopened, holds a state
//     committed at or after the last acknowledged one.

// fSpec is one dataset of a layout's workload.
type fSpec struct {
	name string
	spec DatasetSpec
}

// faultLayout is one layout's part of the sweep: its datasets, small
// enough that every call touches a few chunks or pieces, and a cache
// budget small enough beside them that the cache keeps evicting, so that
// writes, not only commits, do I/O and fail.
type faultLayout struct {
	name   string
	budget int64 // the cache's quiescent bytes
	specs  []fSpec
}

var faultLayouts = []faultLayout{
	{"dense", 256, []fSpec{
		{"dense", DatasetSpec{Type: Uint16, Shape: []uint64{6, 10}, MaxShape: []uint64{Unlimited, 10}, Chunk: []uint64{2, 5}, Filters: []Filter{Shuffle(), Zstd(1)}}},
		{"fixed", DatasetSpec{Type: Int32, Shape: []uint64{8, 8}, Chunk: []uint64{4, 4}, Fill: []byte{1, 2, 3, 4}}},
	}},
	{"contiguous", 8 << 10, []fSpec{
		{"small", DatasetSpec{Type: Uint16, Shape: []uint64{6, 10}, Fill: []byte{7, 7}}}, // contiguous by default, one cached piece
		// A large and a short piece (81 and 9 rows), both written
		// directly when whole; few, wide elements keep the model cheap.
		{"contig", DatasetSpec{Type: Uint64, Shape: []uint64{90, 100}, Layout: Contiguous}},
	}},
	{"sparse", 512, []fSpec{
		{"sparse", DatasetSpec{Type: Uint16, Shape: []uint64{8, 10}, MaxShape: []uint64{Unlimited, 10}, Chunk: []uint64{2, 5},
			Layout: Sparse, Fill: []byte{0xff, 0xff}, Filters: []Filter{Shuffle(), Zstd(1)}, SelectionFilters: []Filter{Deflate(1)}}},
	}},
	{"vlen", 1 << 10, []fSpec{
		{"vlen", DatasetSpec{Type: Uint8, Shape: []uint64{8, 6}, MaxShape: []uint64{Unlimited, 6}, Chunk: []uint64{2, 3}, Layout: Vlen,
			Filters: []Filter{Zstd(1)}, HeapDefragPercent: 30}},
	}},
	// Chunks of 3x2 inner chunks: partial writes re-encode some of them
	// and copy the others from the version stored before (shardMemo).
	{"sharded", 512, []fSpec{
		{"sharded", DatasetSpec{Type: Uint16, Shape: []uint64{6, 12}, MaxShape: []uint64{Unlimited, 12}, Chunk: []uint64{4, 12}, InnerChunk: []uint64{2, 4},
			Filters: []Filter{Shuffle(), Zstd(1)}}},
	}},
}

// faultVariant is how the workload's file is opened, given the layout's
// cache budget.
type faultVariant struct {
	name string
	opts func(budget int64) *Options
}

var faultVariants = []faultVariant{
	{"plain", func(b int64) *Options { return &Options{CacheConfig: cache.Config{QuiescentBytes: b}} }},
	{"image", func(b int64) *Options {
		return &Options{CacheConfig: cache.Config{QuiescentBytes: b}, Image: ImageOptions{Generate: true}}
	}},
	// No background write-back (the active limit is the quiescent one,
	// nothing is pre-encoded): every operation is a caller's, numbered
	// alike in every run, and a write that needs room evicts.
	{"quiet", func(b int64) *Options {
		return &Options{CacheConfig: cache.Config{QuiescentBytes: 2 * b, ActiveMultiplier: 1, PreEncodeBytes: -1}}
	}},
}

// faultKind is one kind of failure the sweep injects.
type faultKind struct {
	name  string
	errno syscall.Errno
	hits  func(vfd.Op) bool
	// half lets the first half of a failing write's bytes, in offset
	// order, reach the file: a disk that filled up part way, tearing an
	// extent.
	half bool
}

var faultKinds = []faultKind{
	{"ENOSPC half written", syscall.ENOSPC, vfd.Op.IsWrite, true},
	{"EIO", syscall.EIO, func(vfd.Op) bool { return true }, false},
}

// inject fails operation seq (counted over every kind) if the kind hits
// it, recording the operation in *hit.
func (k faultKind) inject(seq int64, hit *atomic.Pointer[vfd.OpInfo]) vfd.Injector {
	return vfd.InjectorFunc(func(info vfd.OpInfo) vfd.Effect {
		if info.Seq != seq || !k.hits(info.Op) {
			return vfd.Effect{}
		}
		hit.Store(&info)
		e := vfd.Effect{Err: fmt.Errorf("%w: op %d: %w", vfd.ErrInjected, info.Seq, k.errno)}
		if k.half {
			e.Partial = func(sorted []vfd.Extent) []vfd.Extent {
				var n int64
				for _, x := range sorted {
					n += int64(len(x.Buf))
				}
				return prefixExtents(sorted, n/2)
			}
		}
		return e
	})
}

// prefixExtents is the first n bytes of sorted.
func prefixExtents(sorted []vfd.Extent, n int64) []vfd.Extent {
	var out []vfd.Extent
	for _, x := range sorted {
		if n <= 0 {
			break
		}
		k := min(n, int64(len(x.Buf)))
		out = append(out, vfd.Extent{Off: x.Off, Buf: x.Buf[:k]})
		n -= k
	}
	return out
}

// tState is one committed state of the workload: every dataset's model
// and the file's attributes.
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

// last is the newest generation a commit attempt captured.
func (c tCandidates) last() uint64 {
	var g uint64
	for k := range c {
		g = max(g, k)
	}
	return g
}

// tRun is one run of the workload.
type tRun struct {
	t      *testing.T
	ctx    context.Context
	drv    vfd.Driver
	opts   *Options
	specs  []fSpec // the layout's datasets
	rng    *rand.Rand
	f      *File
	sets   map[string]*Dataset
	model  tState
	cands  tCandidates
	errno  syscall.Errno // the cause every failed call must carry
	writes int           // failed writes the run settled
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

// injectedOrNil fails the test for an error the sweep did not inject, or
// one that does not say what it is: the fault is the only thing that may
// fail, and it must surface as ErrIO (and only ErrIO: an I/O error is
// never damage) with its cause in the chain.
func (r *tRun) injectedOrNil(what string, err error) bool {
	r.t.Helper()
	if err == nil {
		return false
	}
	r.failures++
	if !errors.Is(err, vfd.ErrInjected) || !errors.Is(err, ErrIO) {
		r.fatalf("%s: %v (want the injected error as ErrIO)", what, err)
	}
	if r.errno != 0 && !errors.Is(err, r.errno) {
		r.fatalf("%s: %v lost its cause %v", what, err, r.errno)
	}
	for _, s := range sentinels {
		if s != ErrIO && errors.Is(err, s) {
			r.fatalf("%s: %v matches %v besides ErrIO", what, err, s)
		}
	}
	return true
}

func (r *tRun) open() {
	r.t.Helper()
	var err error
	for try := 0; try < 2; try++ { // the one fault may hit the first open
		if r.f, err = Open(context.Background(), "", withDriver(r.opts, r.drv)); !r.injectedOrNil("open", err) {
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
	for _, sp := range r.specs {
		if _, ok := r.model.refs[sp.name]; ok {
			continue
		}
		ds, err := r.f.CreateDataset(context.Background(), sp.name, sp.spec)
		if err != nil {
			r.fatalf("create %s: %v", sp.name, err)
		}
		r.sets[sp.name] = ds
		if sp.spec.Layout == Vlen {
			r.model.refs[sp.name] = newVlenRef(sp.spec.Shape, sp.spec.Type.Size())
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
			for n := range r.model.refs {
				ds, err := r.f.OpenDataset(context.Background(), n, nil)
				if err != nil {
					r.fatalf("open dataset %s: %v", n, err)
				}
				r.sets[n] = ds
			}
			return
		}
		errs = append(errs, err)
	}
	r.fatalf("generation %d matches none of its %d commit attempts: %v", gen, len(r.cands[gen]), errors.Join(errs...))
}

// matches reports how the open file differs from s (nil: it holds s).
func (r *tRun) matches(s tState) error {
	names := r.f.datasetNames()
	if len(names) != len(s.refs) {
		return fmt.Errorf("datasets %v, model has %d", names, len(s.refs))
	}
	for n, ref := range s.refs {
		ds, err := r.f.OpenDataset(context.Background(), n, nil)
		if err != nil {
			return fmt.Errorf("open %s: %w", n, err)
		}
		if err := r.sameData(ds, ref); err != nil {
			return err
		}
	}
	got := map[string]string{}
	for _, a := range r.f.attrs.list() {
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
		return fmt.Errorf("%s: shape %v, model %v", ds.Path(), ds.Shape(), ref.dims)
	}
	if prod(ref.dims) == 0 {
		return nil
	}
	all := All(ref.dims)
	if ref.vlen != nil {
		got, err := ds.ReadVlen(r.ctx, all)
		if err != nil {
			return fmt.Errorf("%s: ReadVlen: %w", ds.Path(), err)
		}
		if err := vlenDiff(got, ref.readVlen(all)); err != nil {
			return fmt.Errorf("%s: %w", ds.Path(), err)
		}
		return nil
	}
	buf := make([]byte, len(ref.data))
	if err := ds.Read(r.ctx, all, buf); err != nil {
		return fmt.Errorf("%s: Read: %w", ds.Path(), err)
	}
	if i := firstDiff(buf, ref.data, ref.elemSize); i >= 0 {
		return fmt.Errorf("%s: element %d is %x, model %x", ds.Path(), i, buf[i*ref.elemSize:][:ref.elemSize], ref.data[i*ref.elemSize:][:ref.elemSize])
	}
	if ds.Layout() == Sparse {
		pos, err := ds.DefinedElements(r.ctx, all)
		if err != nil {
			return fmt.Errorf("%s: DefinedElements: %w", ds.Path(), err)
		}
		var want []uint64
		for i := 0; i < len(ref.data)/ref.elemSize; i++ {
			if !bytes.Equal(ref.data[i*ref.elemSize:][:ref.elemSize], ref.fill) {
				want = append(want, uint64(i))
			}
		}
		if !slices.Equal(pos, want) {
			return fmt.Errorf("%s: %d defined elements, model %d", ds.Path(), len(pos), len(want))
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

// settle is called after a failed mutating call on sel of dataset name:
// every element must hold its old value or the one the call asked for (old
// and asked are whole models), and the model becomes what the dataset
// holds. The fault is over, so the read-back itself must succeed. The call
// is atomic per chunk (per piece of a contiguous dataset): each chunk it
// touched holds all of its part or none, and a call inside one chunk
// changed nothing.
func (r *tRun) settle(name string, sel Selection, old, asked *refArray) {
	r.t.Helper()
	r.writes++
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
	chunk := ds.Chunk()
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
	// A call may leave the chunks it touched in different states; a call
	// that touched one chunk (its first and last selected elements lie in
	// it) changed nothing.
	one := true
	for d, start := range sel.hyper().Start {
		last := start + (sel.hyper().Count[d]-1)*sel.hyper().Stride[d] + sel.hyper().Block[d] - 1
		one = one && start/chunk[d] == last/chunk[d]
	}
	if one {
		for k, s := range perChunk {
			if s == 2 {
				r.fatalf("%s: a failed write inside one chunk (%s) was applied", name, k)
			}
		}
	}
	r.model.refs[name] = cur
}

// pick draws one of the layout's datasets, or "" when the drawn one is
// empty.
func (r *tRun) pick() string {
	name := r.specs[r.rng.IntN(len(r.specs))].name
	if prod(r.model.refs[name].dims) == 0 {
		return ""
	}
	return name
}

// wholeChunk draws one whole chunk (piece) of ds inside dims.
func (r *tRun) wholeChunk(ds *Dataset, dims []uint64) Selection {
	chunk := ds.Chunk()
	start, count := make([]uint64, len(dims)), make([]uint64, len(dims))
	for d := range dims {
		start[d] = r.rng.Uint64N((dims[d]+chunk[d]-1)/chunk[d]) * chunk[d]
		count[d] = min(chunk[d], dims[d]-start[d])
	}
	return Box(start, count)
}

// mutate runs one random data-changing call on one random dataset.
func (r *tRun) mutate() {
	r.t.Helper()
	name := r.pick()
	if name == "" {
		return
	}
	ds, ref := r.sets[name], r.model.refs[name]
	var sel Selection
	switch k := r.rng.IntN(8); {
	case k < 2:
		// Whole chunks and whole pieces: the paths that write straight to
		// the file.
		sel = r.wholeChunk(ds, ref.dims)
	case k < 3:
		sel = All(ref.dims)
	case ds.Layout() == Sparse:
		sel = randomSparseSelection(r.rng, ref.dims)
	default:
		sel = randomSelection(r.rng, ref.dims)
	}
	r.write(name, sel, ds.Layout() == Sparse && r.rng.IntN(3) == 0)
}

// rewrite writes one whole chunk (piece) twice: a rewrite before the
// commit, which must never tear the only copy of the first write.
func (r *tRun) rewrite() {
	r.t.Helper()
	name := r.pick()
	if name == "" {
		return
	}
	sel := r.wholeChunk(r.sets[name], r.model.refs[name].dims)
	r.write(name, sel, false)
	r.write(name, sel, false)
}

// write writes random values (or erases, on a sparse dataset) to sel of
// dataset name, settling the model on failure.
func (r *tRun) write(name string, sel Selection, erase bool) {
	r.t.Helper()
	ds, ref := r.sets[name], r.model.refs[name]
	asked := ref.clone()
	var err error
	switch {
	case ref.vlen != nil:
		vals := randomVlen(r.rng, int(sel.NumElements()), ref.elemSize)
		asked.writeVlen(sel, vals)
		err = ds.WriteVlen(r.ctx, sel, vals)
	case erase:
		asked.write(sel, fillBuf(ref, sel))
		err = ds.Erase(r.ctx, sel)
	default:
		buf := randomBytes(r.rng, int(sel.NumElements())*ref.elemSize)
		if ds.Layout() == Sparse {
			for j := 0; j < len(buf); j += ref.elemSize {
				buf[j] &= 0x7f // never the fill value
			}
		}
		asked.write(sel, buf)
		err = ds.Write(r.ctx, sel, buf)
	}
	if r.injectedOrNil("write "+name, err) {
		r.settle(name, sel, ref, asked)
		return
	}
	r.model.refs[name] = asked
}

// read reads one random selection of one random dataset and compares it
// with the model; a failed read changes nothing.
func (r *tRun) read() {
	r.t.Helper()
	name := r.pick()
	if name == "" {
		return
	}
	ds, ref := r.sets[name], r.model.refs[name]
	sel := randomSelection(r.rng, ref.dims)
	if ref.vlen != nil {
		got, err := ds.ReadVlen(r.ctx, sel)
		if r.injectedOrNil("read "+name, err) {
			return
		}
		if err := vlenDiff(got, ref.readVlen(sel)); err != nil {
			r.fatalf("%s: read %v: %v", name, sel.hyper(), err)
		}
		return
	}
	buf := make([]byte, sel.NumElements()*uint64(ref.elemSize))
	if r.injectedOrNil("read "+name, ds.Read(r.ctx, sel, buf)) {
		return
	}
	if want := ref.read(sel); !bytes.Equal(buf, want) {
		r.fatalf("%s: read %v returned data the model does not hold", name, sel.hyper())
	}
}

// resize changes the first extent of one extensible dataset; on a layout
// with none it writes instead.
func (r *tRun) resize() {
	r.t.Helper()
	var ext []string
	for _, sp := range r.specs {
		if sp.spec.MaxShape != nil && sp.spec.MaxShape[0] == Unlimited {
			ext = append(ext, sp.name)
		}
	}
	if len(ext) == 0 {
		r.mutate()
		return
	}
	name := ext[r.rng.IntN(len(ext))]
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
		ref.resizeVlen(dims)
	} else {
		ref.resize(dims)
	}
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
	err := r.f.Close(context.Background())
	if !r.injectedOrNil("close", err) {
		r.lastAck = r.f.Generation()
	}
	r.f, r.sets = nil, nil
}

// faultWorkload runs the whole script on the layout's datasets on drv; it
// returns the run, whose lastAck and cands the caller checks against the
// file the run left, or nil when the fault made Create fail.
func faultWorkload(t *testing.T, label string, l faultLayout, v faultVariant, drv vfd.Driver, seed uint64, errno syscall.Errno) *tRun {
	t.Helper()
	r := &tRun{
		t: t, label: label, ctx: context.Background(), drv: drv, opts: v.opts(l.budget), specs: l.specs, errno: errno,
		rng:   rand.New(rand.NewPCG(seed, 17)),
		model: tState{refs: map[string]*refArray{}, attrs: map[string]string{}},
		cands: tCandidates{},
	}
	r.cands.add(1, r.model)
	f, err := Create(context.Background(), "", withDriver(r.opts, drv))
	if r.injectedOrNil("create", err) {
		return nil // nothing was promised; Create refuses a used driver
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
		r.rewrite()
		for i := 0; i < 6; i++ {
			r.mutate()
		}
		r.flush()
		r.reopen()
	}
	r.rewrite()
	r.close()
	r.closedClean = r.lastAck == r.cands.last()
	return r
}

// faultSweepSeeds are the workload seeds: one by default, more in the
// long run.
func faultSweepSeeds() []uint64 {
	if long() {
		return []uint64{1, 2, 3, 4}
	}
	return []uint64{1}
}

// TestTransientFaultEveryLayout fails one operation at a time, for every
// operation of each layout's workload, with each fault kind, in each
// variant, and checks what the workload did after the fault and the file
// it left.
func TestTransientFaultEveryLayout(t *testing.T) {
	defer verifyNoLeaks(t)
	for _, l := range faultLayouts {
		t.Run(l.name, func(t *testing.T) {
			for vi, v := range faultVariants {
				t.Run(v.name, func(t *testing.T) {
					for _, seed := range faultSweepSeeds() {
						singleFaultSweep(t, l, vi, seed)
					}
				})
			}
		})
	}
}

func singleFaultSweep(t *testing.T, l faultLayout, vi int, seed uint64) {
	v := faultVariants[vi]
	t.Helper()
	// The probe run: which operation kind has each index.
	var mu sync.Mutex
	var kinds []vfd.Op
	probe := vfd.NewFault(vfd.NewMem(), vfd.InjectorFunc(func(info vfd.OpInfo) vfd.Effect {
		mu.Lock()
		for int64(len(kinds)) <= info.Seq {
			kinds = append(kinds, vfd.NumOps)
		}
		kinds[info.Seq] = info.Op
		mu.Unlock()
		return vfd.Effect{}
	}))
	if r := faultWorkload(t, "clean run", l, v, probe, seed, 0); r == nil || r.failures != 0 || !r.closedClean {
		t.Fatal("the workload fails without faults")
	}
	// Every operation a kind hits; under the race detector (whose value
	// here is small: the workload is sequential) every eighth one, unless
	// in the long run, each kind and variant from its own offset so that
	// together they fail most indexes.
	step := 1
	if raceEnabled && !long() {
		step = 8
	} else if testing.Short() {
		step = 7
	}
	cases, writes := map[string]int{}, 0
	for ki, fk := range faultKinds {
		seen := 0
		for k, op := range kinds {
			if !fk.hits(op) {
				continue
			}
			if seen++; (seen+ki+2*vi)%step != 0 {
				continue
			}
			var hit atomic.Pointer[vfd.OpInfo]
			mem := vfd.NewMem()
			fd := vfd.NewFault(mem, fk.inject(int64(k), &hit))
			label := fmt.Sprintf("%s/%s seed %d: %s at op %d/%d (%s)", l.name, v.name, seed, fk.name, k, len(kinds), op)
			r := faultWorkload(t, label, l, v, fd, seed, fk.errno)
			if r == nil || fd.Injected() == 0 {
				continue // Create failed, or the op at k was of a kind fk leaves alone
			}
			// An error no call returned is one the engine took on
			// itself (a write it redoes at the next commit, such as an
			// index block written early under memory pressure): then
			// the final Close must have committed everything, which the
			// verification below holds it to.
			if h := hit.Load(); r.failures == 0 && !r.closedClean {
				t.Fatalf("%s: the error (%s #%d at %d, %d bytes) reached no caller and the final Close did not commit", label, h.Op, h.Index, h.Off, h.Len)
			}
			fd.SetEnabled(false)
			if rep, err := Check(r.ctx, "", &Options{Driver: mem}); err != nil && !unackedCommitLost(rep, r.lastAck) {
				t.Fatalf("%s: check: %v %q", label, err, rep.Problems)
			}
			vr := &tRun{t: t, label: label + ", reopened", ctx: r.ctx, drv: mem, opts: &Options{ReadOnly: true}, cands: r.cands, lastAck: r.lastAck}
			vr.open()
			vr.adopt()
			if r.closedClean && vr.f.Generation() != r.lastAck {
				t.Fatalf("%s: Close returned nil at generation %d, the file reopens at %d", label, r.lastAck, vr.f.Generation())
			}
			if err := vr.f.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			cases[fk.name]++
			writes += r.writes
			if t.Failed() {
				t.Fatal(label)
			}
		}
	}
	t.Logf("seed %d: %v fault cases over %d operations; %d failed writes settled", seed, cases, len(kinds), writes)
}

// unackedCommitLost reports whether Check's only problem is the commit
// after lastAck, which a fault cut while its superblock slot was being
// written: the commit failed (its caller saw the error), the file opens
// at the last acknowledged generation, and the checker rightly reports
// the damaged slot and the generation it held.
func unackedCommitLost(rep *CheckReport, lastAck uint64) bool {
	return rep != nil && len(rep.Problems) == 1 && rep.LostGeneration > lastAck &&
		rep.Generation >= lastAck && strings.HasPrefix(rep.Problems[0], "superblock slot")
}
