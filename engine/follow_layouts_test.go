package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// TestFollowerInterleavedLayouts: read-only Files follow a writer that
// commits generations of dense, contiguous, sparse, variable-length and
// sharded datasets, reading (with every read-side call of each layout) while the
// writer writes, refreshing, and closing and reopening their handles.
// Every element the writer writes encodes the generation it belongs to, and
// every read must return exactly the contents of the generation the
// follower's File.Generation reports after it, or ErrStale: never another
// generation's data, never ErrCorrupt from an intact file, never a panic.
// Small caches on both sides make the writer evict (write chunks before the
// commit) and the followers reload, so the writer reuses space a follower
// still names. Each run is a fresh file with its own seed; the writer's
// reuse and the followers' timing differ from run to run.
func TestFollowerInterleavedLayouts(t *testing.T) {
	runs, gens := 3, 10
	if long() {
		runs, gens = 60, 30
	}
	for i := 0; i < runs && !t.Failed(); i++ {
		seed := uint64(i)
		t.Run(fmt.Sprint(i), func(t *testing.T) { followLayoutsRun(t, seed, gens) })
	}
}

// followDS is one dataset of the follower test and its model.
type followDS struct {
	name string
	spec DatasetSpec
}

var followSets = []followDS{
	{"dense", DatasetSpec{Type: Uint16, Shape: []uint64{48, 48}, Chunk: []uint64{8, 8}, Filters: []Filter{Shuffle(), Zstd(1)}}},
	// Two pieces of 128 rows and 32 rows (contigPieceBytes).
	{"contig", DatasetSpec{Type: Uint16, Shape: []uint64{160, 256}, Layout: Contiguous}},
	{"sparse", DatasetSpec{Type: Uint16, Shape: []uint64{48, 48}, Chunk: []uint64{8, 8}, Layout: Sparse, Filters: []Filter{Zstd(1)}}},
	{"vlen", DatasetSpec{Type: Uint8, Shape: []uint64{24, 24}, Chunk: []uint64{4, 4}, Layout: Vlen}},
	// Chunks of 64 KiB, above the followers' BypassBytes, so that reads
	// of part of one read only the inner chunks they touch.
	{"sharded", DatasetSpec{Type: Uint16, Shape: []uint64{256, 256}, Chunk: []uint64{128, 256}, InnerChunk: []uint64{32, 64}, Filters: []Filter{Shuffle(), Zstd(1)}}},
	// Unfiltered: every version of a chunk has the same frame sizes, so
	// only the frames' checksums in the index tell a reused place apart.
	{"sharded-raw", DatasetSpec{Type: Uint16, Shape: []uint64{128, 128}, Chunk: []uint64{64, 128}, InnerChunk: []uint64{32, 32}}},
}

// followModel is one generation of every dataset: fixed-size elements
// (with, for a sparse dataset, which are defined) or sequences.
type followModel map[string]*followState

type followState struct {
	dims []uint64
	es   int
	data []byte
	def  []bool   // sparse: defined elements
	vl   [][]byte // vlen
}

func (m followModel) clone() followModel {
	out := followModel{}
	for n, s := range m {
		c := &followState{dims: s.dims, es: s.es, data: bytes.Clone(s.data), def: slices.Clone(s.def)}
		if s.vl != nil {
			c.vl = make([][]byte, len(s.vl))
			for i, v := range s.vl {
				c.vl[i] = bytes.Clone(v)
			}
		}
		out[n] = c
	}
	return out
}

func (s *followState) linear(c []uint64) uint64 {
	var l uint64
	for d := range c {
		l = l*s.dims[d] + c[d]
	}
	return l
}

// followValue is the element value generation gen writes at linear index
// i: the generation in the top bits, so a wrong read names the generation
// it came from.
func followValue(gen, i uint64) uint16 { return uint16(gen<<10 | i&0x3ff) }

// followSeq is the sequence generation gen writes at linear index i: its
// length varies with both, so heaps grow, shrink and move.
func followSeq(gen, i uint64) []byte {
	n := int((gen*7 + i*3) % 11)
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	for k := range b {
		b[k] = byte(gen)
	}
	b[0] = byte(i)
	return b
}

func followLayoutsRun(t *testing.T, seed uint64, gens int) {
	ctx := context.Background()
	mem := vfd.NewMem()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	w := tCreate(t, mem, &Options{CacheConfig: cache.Config{QuiescentBytes: 256 << 10}})
	defer w.Close(ctx)
	model := followModel{}
	wds := map[string]*Dataset{}
	for _, fd := range followSets {
		ds, err := w.CreateDataset(ctx, fd.name, fd.spec)
		must(t, err)
		wds[fd.name] = ds
		st := &followState{dims: fd.spec.Shape, es: fd.spec.Type.Size()}
		n := prod(st.dims)
		switch fd.spec.Layout {
		case Vlen:
			st.vl = make([][]byte, n)
		case Sparse:
			st.def = make([]bool, n)
			st.data = make([]byte, n*uint64(st.es))
		default:
			st.data = make([]byte, n*uint64(st.es))
		}
		model[fd.name] = st
	}
	var mu sync.Mutex
	byGen := map[uint64]followModel{}
	commit := func() {
		g := w.Generation() + 1
		mu.Lock()
		byGen[g] = model.clone()
		mu.Unlock()
		must(t, w.Flush(ctx))
		if w.Generation() != g {
			t.Fatalf("flush committed generation %d, want %d", w.Generation(), g)
		}
	}
	writeGen := func(gen uint64) {
		for _, fd := range followSets {
			ds, st := wds[fd.name], model[fd.name]
			for k := 0; k < 1+rng.IntN(2); k++ {
				sel := randomSelection(rng, st.dims)
				switch {
				case st.vl != nil:
					var vals [][]byte
					points(sel, func(c []uint64, _ uint64) {
						i := st.linear(c)
						v := followSeq(gen, i)
						st.vl[i] = v
						vals = append(vals, v)
					})
					must(t, ds.WriteVlen(ctx, sel, vals))
				case st.def != nil && rng.IntN(3) == 0:
					points(sel, func(c []uint64, _ uint64) {
						i := st.linear(c)
						st.def[i] = false
						binary.LittleEndian.PutUint16(st.data[2*i:], 0)
					})
					must(t, ds.Erase(ctx, sel))
				default:
					buf := make([]byte, 2*sel.NumElements())
					points(sel, func(c []uint64, pos uint64) {
						i := st.linear(c)
						binary.LittleEndian.PutUint16(buf[2*pos:], followValue(gen, i))
						copy(st.data[2*i:], buf[2*pos:2*pos+2])
						if st.def != nil {
							st.def[i] = true
						}
					})
					must(t, ds.Write(ctx, sel, buf))
				}
			}
		}
	}
	writeGen(w.Generation() + 1)
	commit()

	done := make(chan struct{})
	var wg sync.WaitGroup
	var checked sync.Map
	// Follower 0 is one goroutine: every read must be exactly the
	// generation its File reports afterwards. Follower 1 is two goroutines
	// sharing one File and its cache, so one reads (and its loads evict and
	// condense the other datasets' chunks) while the other refreshes: a
	// read there must be of a generation from the one the File reported
	// before it to the writer's latest, never older.
	for fi, goroutines := range []int{1, 2} {
		r := tOpen(t, mem, &Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: 192 << 10}})
		defer r.Close(ctx)
		for gi := 0; gi < goroutines; gi++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fr := &follower{t: t, f: r, exact: goroutines == 1, rng: rand.New(rand.NewPCG(seed, uint64(fi<<8|gi))), byGen: byGen, mu: &mu, open: map[string]*Dataset{}}
				defer fr.closeAll()
				for !t.Failed() {
					select {
					case <-done:
						// Caught up with the last commit, everything
						// reads as the writer left it.
						if err := r.Refresh(ctx); err != nil {
							t.Errorf("follower %d: final refresh: %v", fi, err)
							return
						}
						fr.exact = true
						for _, fd := range followSets {
							fr.check(ctx, fd.name, true)
						}
						checked.Store(fmt.Sprint(fi, ".", gi), fr.checked)
						return
					default:
					}
					fr.step(ctx)
				}
			}()
		}
	}
	for g := 0; g < gens && !t.Failed(); g++ {
		writeGen(w.Generation() + 1)
		commit()
	}
	close(done)
	wg.Wait()
	checked.Range(func(k, v any) bool {
		t.Logf("follower %v: %d reads checked", k, v)
		return true
	})
}

// follower is one read-only File's side of the test, used by one
// goroutine.
type follower struct {
	t       *testing.T
	f       *File
	exact   bool // the only goroutine on f: nothing refreshes during a read
	rng     *rand.Rand
	mu      *sync.Mutex
	byGen   map[uint64]followModel
	open    map[string]*Dataset
	checked int
}

func (fr *follower) closeAll() {
	for _, ds := range fr.open {
		ds.Close(context.Background())
	}
}

func (fr *follower) step(ctx context.Context) {
	switch x := fr.rng.IntN(20); {
	case x < 3:
		if err := fr.f.Refresh(ctx); err != nil && !errors.Is(err, ErrStale) {
			fr.t.Errorf("refresh: %v", err)
		}
	case x < 5:
		// Every handle of a dataset closed: its chunks stay cached for a
		// warm reopen, and a Refresh must drop them.
		n := followSets[fr.rng.IntN(len(followSets))].name
		if ds := fr.open[n]; ds != nil {
			if err := ds.Close(ctx); err != nil {
				fr.t.Errorf("close %s: %v", n, err)
			}
			delete(fr.open, n)
		}
	default:
		fr.check(ctx, followSets[fr.rng.IntN(len(followSets))].name, false)
	}
}

// model returns the generation the File reports and its contents.
func (fr *follower) model(name string) (uint64, *followState) {
	g := fr.f.Generation()
	fr.mu.Lock()
	defer fr.mu.Unlock()
	m := fr.byGen[g]
	if m == nil {
		fr.t.Errorf("follower at generation %d, which the writer never committed", g)
		return g, nil
	}
	return g, m[name]
}

// matching lists the generations whose contents of name satisfy ok, for
// the failure message.
func (fr *follower) matching(name string, ok func(*followState) bool) []uint64 {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	var out []uint64
	for g, m := range fr.byGen {
		if ok(m[name]) {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	return out
}

// check reads dataset name through one of its layout's read calls and
// compares the result with the generation the File reports afterwards.
func (fr *follower) check(ctx context.Context, name string, whole bool) {
	t := fr.t
	ds := fr.open[name]
	if ds == nil {
		var err error
		ds, err = fr.f.OpenDataset(ctx, name, nil)
		if errors.Is(err, ErrStale) {
			return
		}
		if err != nil {
			t.Errorf("open %s: %v", name, err)
			return
		}
		fr.open[name] = ds
	}
	g0, st := fr.model(name)
	if st == nil {
		return
	}
	sel := All(st.dims)
	if !whole && fr.rng.IntN(2) == 0 {
		sel = randomSelection(fr.rng, st.dims)
	}
	var op string
	var err error
	var got func(*followState) bool // whether a generation's contents equal what was read
	switch {
	case st.vl != nil:
		var vals [][]byte
		if fr.rng.IntN(2) == 0 {
			op = "ReadVlen"
			vals, err = ds.ReadVlen(ctx, sel)
		} else {
			op = "ReadStrings"
			var strs []string
			strs, err = ds.ReadStrings(ctx, sel)
			for _, s := range strs {
				vals = append(vals, []byte(s))
			}
		}
		got = func(m *followState) bool {
			i := 0
			ok := true
			points(sel, func(c []uint64, _ uint64) {
				ok = ok && i < len(vals) && bytes.Equal(vals[i], m.vl[m.linear(c)])
				i++
			})
			return ok && i == len(vals)
		}
	case st.def != nil && fr.rng.IntN(3) != 0:
		var pos []uint64
		var vals []byte
		if fr.rng.IntN(2) == 0 {
			op = "DefinedElements"
			pos, err = ds.DefinedElements(ctx, sel)
		} else {
			op = "ReadDefined"
			pos, vals, err = ds.ReadDefined(ctx, sel)
		}
		got = func(m *followState) bool {
			var wp []uint64
			var wv []byte
			points(sel, func(c []uint64, p uint64) {
				if i := m.linear(c); m.def[i] {
					wp = append(wp, p)
					wv = append(wv, m.data[2*i:2*i+2]...)
				}
			})
			return slices.Equal(pos, wp) && (op == "DefinedElements" || bytes.Equal(vals, wv))
		}
	default:
		op = "Read"
		buf := make([]byte, sel.NumElements()*uint64(st.es))
		err = ds.Read(ctx, sel, buf)
		got = func(m *followState) bool {
			ok := true
			points(sel, func(c []uint64, p uint64) {
				i := m.linear(c)
				ok = ok && bytes.Equal(buf[2*p:2*p+2], m.data[2*i:2*i+2])
			})
			return ok
		}
	}
	if errors.Is(err, ErrStale) {
		return
	}
	if err != nil {
		t.Errorf("%s %s at generation %d: %v", op, name, fr.f.Generation(), err)
		return
	}
	g, want := fr.model(name)
	if want == nil {
		return
	}
	if fr.exact {
		if !got(want) {
			t.Errorf("%s %s at generation %d: not that generation's contents (matches generations %v)", op, name, g, fr.matching(name, got))
			return
		}
	} else if m := fr.matching(name, got); len(m) == 0 || m[len(m)-1] < g0 {
		t.Errorf("%s %s between generations %d and %d: matches generations %v", op, name, g0, g, m)
		return
	}
	fr.checked++
}
