package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/scc-dev/scc/cache"
)

// The reference model of virtual datasets: HDF5's definition taken
// literally. A mapping's virtual selection, clipped to the extent, and its
// source selection, clipped to as many slices along its unlimited
// dimension, are enumerated in C order; the o-th virtual element's source
// is the o-th source element. The engine's per-dimension arithmetic
// (virtual_map.go) must agree with it element by element.

// selIndices lists a dimension's selected indices; an unlimited one its
// first n.
func selIndices(a dim1, n uint64) []uint64 {
	var out []uint64
	for i := uint64(0); a.count == Unlimited || i < a.count; i++ {
		for x := uint64(0); x < a.block; x++ {
			if a.count == Unlimited && uint64(len(out)) == n {
				return out
			}
			out = append(out, a.start+i*a.stride+x)
		}
	}
	return out
}

// cElems enumerates the elements of a product of index lists in C order.
func cElems(lists [][]uint64) [][]uint64 {
	out := [][]uint64{{}}
	for _, l := range lists {
		var next [][]uint64
		for _, p := range out {
			for _, x := range l {
				next = append(next, append(append([]uint64(nil), p...), x))
			}
		}
		out = next
	}
	return out
}

type refSource struct {
	id    uint32
	path  string // "" for the virtual file itself
	ds    string
	shape []uint64
}

func (r *refSource) value(c []uint64) (uint32, bool) {
	lin := uint64(0)
	for d := range c {
		if c[d] >= r.shape[d] {
			return 0, false
		}
		lin = lin*r.shape[d] + c[d]
	}
	return r.id<<20 | uint32(lin), true
}

type refMapping struct {
	api     VirtualMapping
	v, s    []dim1
	printf  bool
	src     *refSource            // non-printf; nil when missing
	blocks  map[uint64]*refSource // printf: the blocks present
	pattern string
}

const refFill = 0xFFFFFFFF

func dimsOf(ds []dim1) (start, stride, count, block []uint64) {
	for _, x := range ds {
		start, stride, count, block = append(start, x.start), append(stride, x.stride), append(count, x.count), append(block, x.block)
	}
	return
}

func selOf(ds []dim1) Selection {
	st, str, c, b := dimsOf(ds)
	return Hyperslab(st, str, c, b)
}

// refExtent is the extent along dimension 0 under view (printf gap gap).
func refExtent(ms []*refMapping, view VirtualView, gap int) uint64 {
	var base uint64
	comb, any := uint64(0), false
	for _, m := range ms {
		if m.v[0].count != Unlimited {
			base = max(base, m.v[0].end())
			continue
		}
		vi := selIndices(m.v[0], 4000)
		var first, last uint64
		if !m.printf {
			avail := 0
			if m.src != nil {
				us := unlimDim(m.s)
				for _, x := range selIndices(m.s[us], 4000) {
					if x < m.src.shape[us] {
						avail++
					}
				}
			}
			first = vi[avail]
			if avail > 0 {
				last = vi[avail-1] + 1
			}
		} else {
			k := uint64(0)
			for m.blocks[k] != nil {
				k++
			}
			first = m.v[0].start + k*m.v[0].stride
			miss := 0
			for j := uint64(0); miss <= gap; j++ {
				if m.blocks[j] == nil {
					miss++
					continue
				}
				miss = 0
				last = m.v[0].start + j*m.v[0].stride + m.v[0].block
			}
		}
		e := last
		if view == FirstMissing {
			e = first
		}
		switch {
		case !any:
			comb, any = e, true
		case view == FirstMissing:
			comb = min(comb, e)
		default:
			comb = max(comb, e)
		}
	}
	return max(base, comb)
}

// refValues is every element of the extent: its expected value.
func refValues(ms []*refMapping, ext []uint64) map[[2]uint64]uint32 {
	out := map[[2]uint64]uint32{}
	for x := uint64(0); x < ext[0]; x++ {
		for y := uint64(0); y < ext[1]; y++ {
			out[[2]uint64{x, y}] = refFill
		}
	}
	put := func(vs, ss [][]uint64, src *refSource) {
		for o, v := range vs {
			if v[0] >= ext[0] || v[1] >= ext[1] {
				continue
			}
			val := uint32(refFill)
			if src != nil {
				if w, ok := src.value(ss[o]); ok {
					val = w
				}
			}
			out[[2]uint64{v[0], v[1]}] = val
		}
	}
	for _, m := range ms {
		if m.printf {
			for k := uint64(0); m.v[0].start+k*m.v[0].stride < ext[0]; k++ {
				v := clone(m.v)
				v[0].start += k * v[0].stride
				v[0].count = 1
				put(cElems([][]uint64{selIndices(v[0], 0), selIndices(v[1], 0)}), cElems(srcLists(m.s, 0)), m.blocks[k])
			}
			continue
		}
		var n uint64 // slices of the virtual selection inside the extent
		lists := [][]uint64{}
		for d, a := range m.v {
			l := selIndices(a, 1<<20)
			if a.count == Unlimited {
				l = l[:0]
				for _, x := range selIndices(a, 4000) {
					if x < ext[d] {
						l = append(l, x)
					}
				}
				n = uint64(len(l))
			}
			lists = append(lists, l)
		}
		put(cElems(lists), cElems(srcLists(m.s, n)), m.src)
	}
	return out
}

func srcLists(s []dim1, n uint64) [][]uint64 {
	var out [][]uint64
	for _, a := range s {
		out = append(out, selIndices(a, n))
	}
	return out
}

// bruteOverlap reports whether two virtual selections share an element
// below (600, 16).
func bruteOverlap(a, b []dim1) bool {
	for d := range a {
		sa, sb := bruteSet(a[d], 600), bruteSet(b[d], 600)
		hit := false
		for x := range sa {
			if sb[x] {
				hit = true
				break
			}
		}
		if !hit {
			return false
		}
	}
	return true
}

func randSel1(rng *rand.Rand, maxStart, maxStride, maxCount uint64) dim1 {
	stride := 1 + rng.Uint64N(maxStride)
	return dim1{start: rng.Uint64N(maxStart + 1), stride: stride, block: 1 + rng.Uint64N(stride), count: 1 + rng.Uint64N(maxCount)}
}

// randSource builds a source selection of the same shape as v once
// dimensions of one element are left out, with random blocks and strides
// and extra one-element dimensions.
func randSource(rng *rand.Rand, v []dim1) []dim1 {
	var s []dim1
	single := func() dim1 { return dim1{start: rng.Uint64N(3), stride: 1, count: 1, block: 1} }
	for _, a := range v {
		n := a.size()
		if n == 1 {
			continue
		}
		if len(s) < 2 && rng.IntN(4) == 0 {
			s = append(s, single())
		}
		var bs, c uint64
		if n == Unlimited {
			bs, c = 1+rng.Uint64N(3), Unlimited
		} else {
			var divs []uint64
			for q := uint64(1); q <= n; q++ {
				if n%q == 0 {
					divs = append(divs, q)
				}
			}
			bs = divs[rng.IntN(len(divs))]
			c = n / bs
		}
		s = append(s, dim1{start: rng.Uint64N(4), stride: bs + rng.Uint64N(3), count: c, block: bs})
	}
	if len(s) == 0 || (len(s) < 3 && rng.IntN(3) == 0) {
		s = append(s, single())
	}
	return s
}

// TestVirtualMappingBruteForce builds random virtual datasets (boxes,
// strided hyperslabs, unlimited and printf mappings, missing and partial
// sources, sources in the same file) and checks their extent in both views
// and thousands of random reads against the reference model; mappings
// that overlap must be refused with ErrInvalid.
func TestVirtualMappingBruteForce(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 8))
	c, err := cache.New(cache.Config{QuiescentBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cases, reads := 40, 40
	if testing.Short() {
		cases = 10
	}
	var nreads, nrefused int
	for tc := 0; tc < cases; tc++ {
		dir := t.TempDir()
		unlimited := tc%4 != 3
		maxShape := []uint64{32, 16}
		if unlimited {
			maxShape[0] = Unlimited
		}
		vpath := filepath.Join(dir, "v.scc")
		vf := tCreatePath(t, vpath, &Options{Cache: c, NoSync: true})
		files := map[string]*File{}
		var nextID uint32 = 1
		makeSource := func(path, name string, sel []dim1, unlimSlices uint64) *refSource {
			shape := make([]uint64, len(sel))
			for d, a := range sel {
				if a.count == Unlimited {
					idx := selIndices(a, unlimSlices)
					if len(idx) > 0 {
						shape[d] = idx[len(idx)-1] + 1
					}
					if rng.IntN(3) == 0 && shape[d] > 0 {
						shape[d] -= rng.Uint64N(2) // a partial block
					}
					continue
				}
				shape[d] = a.end()
				if rng.IntN(4) == 0 {
					shape[d] -= min(shape[d], rng.Uint64N(3))
				}
			}
			src := &refSource{id: nextID, path: path, ds: name, shape: shape}
			nextID++
			var f *File
			if path == "" {
				f = vf
			} else if f = files[path]; f == nil {
				f = tCreatePath(t, filepath.Join(dir, path), &Options{Cache: c, NoSync: true})
				files[path] = f
			}
			ms := make([]uint64, len(shape))
			chunk := make([]uint64, len(shape))
			for d := range ms {
				ms[d], chunk[d] = Unlimited, 1+rng.Uint64N(4)
			}
			ds, err := f.CreateDataset(ctx, name, DatasetSpec{Type: Uint32, Shape: shape, MaxShape: ms, Chunk: chunk})
			if err != nil {
				t.Fatal(err)
			}
			n := prod64(shape)
			vals := make([]uint32, n)
			for i := range vals {
				vals[i] = src.id<<20 | uint32(i)
			}
			if n > 0 {
				if err := WriteSlice(ctx, ds, All(shape), vals); err != nil {
					t.Fatal(err)
				}
			}
			ds.Close(ctx)
			return src
		}
		var ms []*refMapping
		for mi := 0; mi < 1+rng.IntN(4); mi++ {
			v := []dim1{randSel1(rng, 8, 5, 4), randSel1(rng, 6, 4, 4)}
			if v[1].end() > 16 {
				v[1].count = 1
			}
			if unlimited && rng.IntN(2) == 0 {
				v[0].count = Unlimited
			} else if v[0].end() > 32 {
				v[0].count = 1
			}
			m := &refMapping{v: v, printf: v[0].count == Unlimited && rng.IntN(3) == 0}
			shapeOf := v
			if m.printf {
				shapeOf = clone(v)
				shapeOf[0].count = 1
			}
			m.s = randSource(rng, shapeOf)
			name := fmt.Sprintf("d%d", mi)
			switch {
			case m.printf:
				m.pattern = fmt.Sprintf("p%d_%%b.scc", mi)
				m.api = VirtualMapping{Virtual: selOf(v), File: m.pattern, Dataset: "d", Source: selOf(m.s)}
			default:
				file := fmt.Sprintf("s%d.scc", rng.IntN(3))
				if rng.IntN(6) == 0 {
					file = ""
				}
				m.api = VirtualMapping{Virtual: selOf(v), File: file, Dataset: name, Source: selOf(m.s)}
			}
			overl := false
			for _, o := range ms {
				if bruteOverlap(o.v, m.v) {
					overl = true
				}
			}
			if overl {
				// The engine must refuse the set with this mapping in it.
				spec := VirtualSpec{Type: Uint32, Shape: []uint64{0, 16}, MaxShape: maxShape}
				for _, o := range append(ms, m) {
					spec.Mappings = append(spec.Mappings, o.api)
				}
				if !unlimited {
					spec.Shape[0] = 32
				}
				if _, err := vf.CreateVirtualDataset(ctx, "bad", spec); !errors.Is(err, ErrInvalid) {
					t.Fatalf("case %d: overlapping mappings %+v and others: %v, want ErrInvalid", tc, m.v, err)
				}
				nrefused++
				continue
			}
			// Sources: missing now and then; printf blocks with gaps.
			if m.printf {
				m.blocks = map[uint64]*refSource{}
				for k := uint64(0); k < 8; k++ {
					if rng.IntN(5) < 3 {
						m.blocks[k] = makeSource(expand(m.pattern, k), "d", m.s, 0)
					}
				}
			} else if rng.IntN(6) != 0 {
				m.src = makeSource(m.api.File, name, m.s, rng.Uint64N(12))
			}
			ms = append(ms, m)
		}
		for _, f := range files {
			if err := f.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
		spec := VirtualSpec{Type: Uint32, Shape: []uint64{32, 16}, MaxShape: maxShape, Fill: []byte{0xFF, 0xFF, 0xFF, 0xFF}}
		for _, m := range ms {
			spec.Mappings = append(spec.Mappings, m.api)
		}
		vd, err := vf.CreateVirtualDataset(ctx, "v", spec)
		if err != nil {
			t.Fatalf("case %d: %v", tc, err)
		}
		vd.Close(ctx)
		if err := vf.Close(ctx); err != nil {
			t.Fatal(err)
		}
		for _, view := range []VirtualView{LastAvailable, FirstMissing} {
			gap := 0
			if view == LastAvailable {
				gap = tc % 3
			}
			rf := tOpenPath(t, vpath, &Options{Cache: c, ReadOnly: true, Virtual: VirtualOptions{View: view, PrintfGap: gap}})
			ds, err := rf.OpenDataset(ctx, "v", nil)
			if err != nil {
				t.Fatal(err)
			}
			ext := []uint64{32, 16}
			if unlimited {
				ext[0] = refExtent(ms, view, gap)
			}
			if got := ds.Shape(); !equal(got, ext) {
				t.Fatalf("case %d view %d: extent %v, want %v", tc, view, got, ext)
			}
			want := refValues(ms, ext)
			check := func(sel Selection) {
				nreads++
				n := sel.NumElements()
				buf := make([]uint32, n)
				if err := ReadSlice(ctx, ds, sel, buf); err != nil {
					t.Fatalf("case %d view %d: read %v: %v", tc, view, sel.hyper(), err)
				}
				i := 0
				for _, x := range selIndices(toDims(sel.hyper())[0], 0) {
					for _, y := range selIndices(toDims(sel.hyper())[1], 0) {
						if w := want[[2]uint64{x, y}]; buf[i] != w {
							t.Fatalf("case %d view %d: read %v: element (%d,%d) is %#x, want %#x (mappings %+v)", tc, view, sel.hyper(), x, y, buf[i], w, ms)
						}
						i++
					}
				}
			}
			if ext[0] > 0 {
				check(All(ext))
				for q := 0; q < reads; q++ {
					var d [2]dim1
					for k := range d {
						stride := 1 + rng.Uint64N(4)
						a := dim1{start: rng.Uint64N(ext[k]), stride: stride, block: 1 + rng.Uint64N(stride)}
						if rng.IntN(2) == 0 {
							a.stride, a.block = 1, 1
						}
						if a.start+a.block > ext[k] {
							a.block = ext[k] - a.start
							a.stride = max(a.stride, a.block)
						}
						a.count = 1 + (ext[k]-a.start-a.block)/a.stride
						a.count = 1 + rng.Uint64N(a.count)
						d[k] = a
					}
					check(selOf(d[:]))
				}
			}
			ds.Close(ctx)
			if err := rf.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d cases, %d reads checked, %d overlapping sets refused", cases, nreads, nrefused)
}

// TestVirtualMappingBruteForceDirect is TestVirtualMappingBruteForce, and
// TestVirtualReadFaultEveryOperation, with every block that is laid out
// alike in the source and in the caller's buffer read straight into the
// buffer (readBlocks), however small.
func TestVirtualMappingBruteForceDirect(t *testing.T) {
	old := virtualDirectMin
	virtualDirectMin = 1
	t.Cleanup(func() { virtualDirectMin = old })
	before := virtualBlockReads.Load()
	t.Run("model", TestVirtualMappingBruteForce)
	t.Run("faults", TestVirtualReadFaultEveryOperation)
	if virtualBlockReads.Load() == before {
		t.Fatal("no block was read straight into the caller's buffer: the test shows nothing")
	}
}
