package engine

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/vfd"
)

// TestCondense: condensing a sparse chunk after erases, and a
// variable-length chunk with garbage in its heap, gives memory back and
// keeps the contents.
func TestCondense(t *testing.T) {
	f := tCreate(t, vfd.NewMem(), nil)
	sp, err := f.CreateDataset(context.Background(), "s", DatasetSpec{Type: Uint32, Shape: []uint64{1000}, Chunk: []uint64{1000}, Layout: Sparse})
	must(t, err)
	l := sp.s.store.(*sparseLayout)
	c := &sparseChunk{}
	gather := func(ds *Dataset, chunk layout.Chunk, sel Selection, kind pieceKind, buf []byte, vals [][]byte) {
		t.Helper()
		reqs, pieces, err := ds.s.kindRequests(sel, kind, buf)
		must(t, err)
		pieces[0].vals = vals
		cs, err := ds.s.chunks()
		must(t, err)
		must(t, cs.Gather(chunk, reqs[0].Piece))
	}
	gather(sp, c, Hyperslab([]uint64{0}, []uint64{2}, []uint64{500}, nil), pieceData, bytes.Repeat([]byte{1, 2, 3, 4}, 500), nil)
	gather(sp, c, Box([]uint64{0}, []uint64{900}), pieceErase, nil, nil)
	before := c.MemSize()
	nc := l.Condense(layout.Coord{0}, c)
	if nc == nil || nc.MemSize() >= before {
		t.Fatalf("sparse: condensed %v from %d bytes", nc, before)
	}
	if got := nc.(*sparseChunk); got.defined() != 50 || !bytes.Equal(got.data, c.data) || got.gen != c.gen {
		t.Fatalf("sparse: contents changed")
	}
	if l.Condense(layout.Coord{0}, nc) != nil {
		t.Fatal("sparse: a condensed chunk condensed again")
	}

	vl, err := f.CreateDataset(context.Background(), "v", DatasetSpec{Type: Uint8, Shape: []uint64{10}, Chunk: []uint64{10}, Layout: Vlen, HeapDefragPercent: 100})
	must(t, err)
	vc, _ := vl.s.store.(*vlenLayout).NewChunk(layout.Coord{0}, true)
	big := make([][]byte, 10)
	for i := range big {
		big[i] = bytes.Repeat([]byte{byte(i)}, 100)
	}
	gather(vl, vc, All([]uint64{10}), pieceVlen, nil, big)
	small := make([][]byte, 10)
	for i := range small {
		small[i] = []byte{byte(i)}
	}
	gather(vl, vc, All([]uint64{10}), pieceVlen, nil, small)
	before = vc.MemSize()
	nv := vl.s.store.(*vlenLayout).Condense(layout.Coord{0}, vc)
	if nv == nil || nv.MemSize() >= before-900 {
		t.Fatalf("vlen: condensed %v from %d bytes", nv, before)
	}
	reqs, pieces, err := vl.s.kindRequests(All([]uint64{10}), pieceVlen, nil)
	must(t, err)
	for _, ch := range []layout.Chunk{vc, nv} {
		pieces[0].vals = make([][]byte, 10)
		must(t, vl.s.store.(*vlenLayout).Scatter(ch, reqs[0].Piece))
		if err := vlenDiff(pieces[0].vals, small); err != nil {
			t.Fatalf("vlen: %v", err)
		}
	}
}

// TestCheckOutsideExtent: Check reports a sparse or variable-length chunk
// that still holds elements outside the extent its header records (what
// an untrimmed shrink would leave).
func TestCheckOutsideExtent(t *testing.T) {
	ctx := context.Background()
	for _, spec := range []DatasetSpec{
		{Type: Uint8, Shape: []uint64{10}, MaxShape: []uint64{Unlimited}, Chunk: []uint64{10}, Layout: Sparse},
		{Type: Uint8, Shape: []uint64{10}, MaxShape: []uint64{Unlimited}, Chunk: []uint64{10}, Layout: Vlen},
	} {
		mem := vfd.NewMem()
		f := tCreate(t, mem, nil, noCheck("the test records a smaller extent without trimming the chunks beyond it"))
		ds, err := f.CreateDataset(ctx, "d", spec)
		must(t, err)
		if spec.Layout == Vlen {
			must(t, ds.WriteStrings(ctx, Box([]uint64{7}, []uint64{1}), []string{"x"}))
		} else {
			must(t, ds.Write(ctx, Box([]uint64{7}, []uint64{1}), []byte{1}))
		}
		must(t, f.Flush(ctx))
		if _, err := Check(ctx, "", &Options{Driver: mem}); err != nil {
			t.Fatalf("%v: before: %v", spec.Layout, err)
		}
		// Record a smaller extent without trimming (a bug Check must see).
		ds.s.mu.Lock()
		ds.s.mu.shape = []uint64{5}
		ds.s.mu.Unlock()
		ds.s.dirty.Store(true)
		must(t, f.Flush(ctx))
		must(t, f.Close(ctx))
		if _, err := Check(ctx, "", &Options{Driver: mem}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%v: untrimmed chunk: %v", spec.Layout, err)
		}
	}
}
