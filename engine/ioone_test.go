package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/internal/selection"
	"github.com/scc-dev/scc/vfd"
)

// oneShapes are the geometries the single-chunk read tests use: ranks 1
// to 5, chunk edges that are powers of two (the shift) and not (the
// division), edge chunks cut by the extent.
var oneShapes = []struct{ shape, chunk []uint64 }{
	{[]uint64{100}, []uint64{16}},
	{[]uint64{37}, []uint64{10}},
	{[]uint64{37, 50}, []uint64{8, 10}},
	{[]uint64{64, 64}, []uint64{32, 16}},
	{[]uint64{9, 7, 12}, []uint64{3, 7, 5}},
	{[]uint64{8, 8, 8}, []uint64{4, 8, 2}},
	{[]uint64{5, 6, 4, 7}, []uint64{2, 3, 4, 4}},
	{[]uint64{4, 3, 5, 2, 6}, []uint64{2, 3, 2, 2, 4}},
}

// randSlab is a random hyperslab around the extent: in, out, across chunk
// edges, with strides and zero counts; small boxes inside one chunk are
// drawn often so that the fast path is exercised.
func randSlab(r *rand.Rand, shape, chunk []uint64) Selection {
	rank := len(shape)
	start, stride, count, block := make([]uint64, rank), make([]uint64, rank), make([]uint64, rank), make([]uint64, rank)
	inside := r.IntN(2) == 0
	for d := 0; d < rank; d++ {
		if inside {
			c := r.Uint64N((shape[d] + chunk[d] - 1) / chunk[d])
			lo := c * chunk[d]
			hi := min(lo+chunk[d], shape[d])
			start[d] = lo + r.Uint64N(hi-lo)
			count[d] = 1
			block[d] = 1 + r.Uint64N(hi-start[d])
			stride[d] = 1
			continue
		}
		start[d] = r.Uint64N(shape[d] + 2)
		count[d] = r.Uint64N(3)
		block[d] = 1 + r.Uint64N(chunk[d]+1)
		stride[d] = block[d] + r.Uint64N(2)
		if r.IntN(8) == 0 {
			stride[d] = r.Uint64N(3)
		}
	}
	return Hyperslab(start, stride, count, block)
}

// modelRead is the reference: the selected elements of model (a dense
// array of shape, C order, es bytes per element), packed in C order.
func modelRead(model []byte, shape []uint64, es int, h selection.Hyperslab) []byte {
	rank := len(shape)
	idx := make([][]uint64, rank)
	for d := 0; d < rank; d++ {
		for i := uint64(0); i < h.Count[d]; i++ {
			for j := uint64(0); j < h.Block[d]; j++ {
				idx[d] = append(idx[d], h.Start[d]+i*h.Stride[d]+j)
			}
		}
		if len(idx[d]) == 0 {
			return nil
		}
	}
	var out []byte
	pos := make([]int, rank)
	for {
		off := uint64(0)
		for d := 0; d < rank; d++ {
			off = off*shape[d] + idx[d][pos[d]]
		}
		out = append(out, model[off*uint64(es):(off+1)*uint64(es)]...)
		d := rank - 1
		for ; d >= 0; d-- {
			if pos[d]++; pos[d] < len(idx[d]) {
				break
			}
			pos[d] = 0
		}
		if d < 0 {
			return out
		}
	}
}

// generalRead is Dataset.read without the single-chunk step: the
// path every read took before it (regionInto, ioFast, ioLocked).
func generalRead(ctx context.Context, d *Dataset, sel Selection, buf []byte) error {
	if err := d.check(false); err != nil {
		return err
	}
	s := d.s
	sc := ioPool.Get().(*ioScratch)
	defer sc.put()
	sc.regions[0] = s.regionInto(sel, sc)
	done, p, err := s.ioFast(ctx, sel, buf, sc)
	if done {
		return err
	}
	return s.ioLocked(ctx, sel, buf, false, sc, p)
}

// TestReadOneMatchesPrepareOne: buildOne accepts exactly what prepareOne
// (tested against the general path in TestPrepareOneMatchesGeneral)
// accepts, builds the same request and serializer region, and its copy
// plan copies the same bytes as the generic kernel, for element sizes 1,
// 2, 4 and 8 and ranks 1 to 5.
func TestReadOneMatchesPrepareOne(t *testing.T) {
	f := tCreate(t, vfd.NewMem(), nil)
	r := rand.New(rand.NewPCG(11, 12))
	accepted := 0
	types := []Type{Uint8, Int16, Float32, Uint64}
	for i, sh := range oneShapes {
		typ := types[i%len(types)]
		ds, err := f.CreateDataset(context.Background(), fmt.Sprint("d", i), DatasetSpec{Type: typ, Shape: sh.shape, Chunk: sh.chunk})
		if err != nil {
			t.Fatal(err)
		}
		s := ds.s
		if _, err := s.hotDataset(); err != nil {
			t.Fatal(err)
		}
		cds := s.hot.Load()
		es := s.elemSize
		chunkBuf := make([]byte, s.chunkBytes)
		for k := 0; k < 20000; k++ {
			sel := randSlab(r, sh.shape, sh.chunk)
			n := sel.hyper().NumElements()
			size := int(n) * es
			if r.IntN(10) == 0 {
				size += es
			}
			buf := make([]byte, size)
			one := ioPool.Get().(*ioScratch)
			ok := one.buildOne(sel.hyper(), s.mu.shape, s.chunk, es, buf, cds)
			ref := ioPool.Get().(*ioScratch)
			ref.regions[0] = s.regionInto(sel, ref)
			refOK := ref.prepareOne(sel.hyper(), s.mu.shape, s.chunk, es, buf, cds)
			if ok != refOK {
				t.Fatalf("%v (buf %d): buildOne %v, prepareOne %v", sel.hyper(), len(buf), ok, refOK)
			}
			if ok {
				accepted++
				got, want := one.one[0], ref.one[0]
				if !slices.Equal(got.Coord, want.Coord) || got.Full != want.Full || got.Dataset != want.Dataset ||
					one.plan.sel.N != ref.plan.sel.N || !slices.Equal(one.onePiece.bufShape, ref.onePiece.bufShape) ||
					got.Piece != &one.onePiece || one.onePiece.p != &one.plan.sel {
					t.Fatalf("%v: request %+v, want %+v", sel.hyper(), got, want)
				}
				for d := range ref.plan.sel.Runs {
					if !slices.Equal(one.plan.sel.Runs[d], ref.plan.sel.Runs[d]) {
						t.Fatalf("%v: runs %v, want %v", sel.hyper(), one.plan.sel.Runs, ref.plan.sel.Runs)
					}
				}
				reg := one.oneRegion(s.id, len(s.chunk))
				if reg.Dataset != ref.regions[0].Dataset || !slices.Equal(reg.Lo, ref.regions[0].Lo) || !slices.Equal(reg.Hi, ref.regions[0].Hi) {
					t.Fatalf("%v: region %v, want %v", sel.hyper(), reg, ref.regions[0])
				}
				for j := range chunkBuf {
					chunkBuf[j] = byte(r.Uint32())
				}
				want2 := make([]byte, len(buf))
				selection.Scatter(want2, ref.onePiece.bufShape, chunkBuf, s.chunk, &ref.plan.sel, es)
				for j := range buf {
					buf[j] = 0xAA
				}
				one.plan.rows.scatter(buf, chunkBuf)
				if !bytes.Equal(buf, want2) {
					t.Fatalf("%v (elem %d): copy plan %+v gives %x, want %x", sel.hyper(), es, one.plan.rows, buf, want2)
				}
			}
			one.put()
			ref.put()
		}
	}
	if accepted < 20000 {
		t.Fatalf("only %d selections took the single-chunk path", accepted)
	}
}

// TestReadOneDifferential: reads through the public API (the single-chunk
// path where it applies) against a reference model of the written bytes
// and against the general path, with resident chunks (a large cache) and
// with chunks that miss (a cache far smaller than the datasets, so the
// single-chunk request goes on to the locked path and the load), ranks 1
// to 5 and element sizes 1 to 8. Errors classify to the same sentinel on
// both paths.
func TestReadOneDifferential(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cache int64
	}{{"resident", 64 << 20}, {"misses", 4 << 10}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c, err := cache.New(cache.Config{QuiescentBytes: tc.cache})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			f := tCreate(t, vfd.NewMem(), &Options{Cache: c})
			r := rand.New(rand.NewPCG(21, 22))
			types := []Type{Uint8, Uint16, Int32, Float64}
			checked := 0
			for i, sh := range oneShapes {
				typ := types[i%len(types)]
				ds, err := f.CreateDataset(ctx, fmt.Sprint("d", i), DatasetSpec{Type: typ, Shape: sh.shape, Chunk: sh.chunk})
				if err != nil {
					t.Fatal(err)
				}
				es := ds.s.elemSize
				total := uint64(es)
				for _, n := range sh.shape {
					total *= n
				}
				model := make([]byte, total)
				for j := range model {
					model[j] = byte(r.Uint32())
				}
				all := Box(make([]uint64, len(sh.shape)), sh.shape)
				if err := ds.Write(ctx, all, model); err != nil {
					t.Fatal(err)
				}
				if i%2 == 1 {
					if err := f.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				}
				for k := 0; k < 3000; k++ {
					sel := randSlab(r, sh.shape, sh.chunk)
					n := sel.hyper().NumElements()
					size := int(n) * es
					if r.IntN(10) == 0 {
						size += es
					}
					got, gen := make([]byte, size), make([]byte, size)
					err1 := ds.Read(ctx, sel, got)
					err2 := generalRead(ctx, ds, sel, gen)
					if (err1 == nil) != (err2 == nil) || sentinelOf(err1) != sentinelOf(err2) {
						t.Fatalf("%v: read %v, general path %v", sel.hyper(), err1, err2)
					}
					if err1 != nil {
						if s := sentinelOf(err1); s == nil {
							t.Fatalf("%v: %v matches no engine sentinel", sel.hyper(), err1)
						}
						continue
					}
					want := modelRead(model, sh.shape, es, sel.hyper())
					if !bytes.Equal(got, want) || !bytes.Equal(gen, want) {
						t.Fatalf("%v: read %x, general %x, model %x", sel.hyper(), got, gen, want)
					}
					checked++
				}
			}
			if checked < 10000 {
				t.Fatalf("only %d reads checked", checked)
			}
		})
	}
}

// sentinelOf is the one engine sentinel err matches, or nil.
func sentinelOf(err error) error {
	if err == nil {
		return nil
	}
	var found error
	for _, s := range sentinels {
		if errors.Is(err, s) {
			if found != nil {
				return nil
			}
			found = s
		}
	}
	return found
}
