package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// Split loads (cache/splitload.go): a read of part of a large unfiltered
// chunk loads it through the cache; its image is read in shares by the
// caller and helpers, each summing what it read, and the chunk is decoded
// from the combined sum (denseLayout.SummedLen / DecodeSummed).

// A part of a chunk read through a split load has the stored bytes, the
// chunk stays resident (the next part is a hit), and only loads above the
// threshold split.
func TestSplitLoadBytes(t *testing.T) {
	splitProcs(t)
	ctx := context.Background()
	const rows = 4
	mem, want := splitImage(t, rows)
	cnt := vfd.NewCounting(mem)
	f, ds := splitOpen(t, cnt, 64<<10)
	c := f.Cache()
	for r := 0; r < rows; r++ {
		col, n := 1000*r+7, splitWidth/3
		before, io := c.Stats(), cnt.Snapshot()
		got, err := readPart(ctx, ds, r, col, n)
		must(t, err)
		if !bytes.Equal(got, want[r*splitWidth+col:r*splitWidth+col+n]) {
			t.Fatalf("row %d: wrong bytes", r)
		}
		st, ops := c.Stats().Sub(before), cnt.Snapshot().Sub(io)
		if st.Loads != 1 || st.SplitReads != 1 || ops.Ops[vfd.OpReadV] != st.SplitShares+1 {
			t.Fatalf("row %d: %d loads, %d split reads, %d ReadV for %d helper shares; want 1, 1, shares+1",
				r, st.Loads, st.SplitReads, ops.Ops[vfd.OpReadV], st.SplitShares)
		}
		// The rest of the row is a hit on the loaded chunk.
		before = c.Stats()
		got, err = readPart(ctx, ds, r, col+n, splitWidth-col-n)
		must(t, err)
		if !bytes.Equal(got, want[r*splitWidth+col+n:(r+1)*splitWidth]) {
			t.Fatalf("row %d, rest: wrong bytes", r)
		}
		if st := c.Stats().Sub(before); st.Hits != 1 || st.Loads != 0 {
			t.Fatalf("row %d, rest: %d hits, %d loads; want 1, 0", r, st.Hits, st.Loads)
		}
	}
	// Under the threshold, or off: loaded in one read.
	for _, split := range []int64{256 << 10, -1} {
		f2, ds2 := splitOpen(t, mem, split)
		got, err := readPart(ctx, ds2, 1, 5, 100)
		must(t, err)
		if st := f2.Cache().Stats(); !bytes.Equal(got, want[splitWidth+5:splitWidth+105]) || st.Loads != 1 || st.SplitReads != 0 {
			t.Fatalf("SplitReadBytes %d: equal %v, %d loads, %d split reads; want 1, 0", split, bytes.Equal(got, want[splitWidth+5:splitWidth+105]), st.Loads, st.SplitReads)
		}
	}
}

// Readers of parts of rows (split loads into a cache that holds about two
// rows, so rows are evicted and loaded again) race writers of whole rows
// and Flush: every part read is of one version, written whole, and not
// older than the last write of it that completed before the read began.
func TestSplitLoadConcurrentModel(t *testing.T) {
	splitProcs(t)
	ctx := context.Background()
	const rows = 8
	mem, _ := splitImage(t, rows)
	f, ds := splitOpenCfg(t, mem, cache.Config{QuiescentBytes: 256 << 10, SplitReadBytes: 64 << 10})
	rowOf := func(r int, v uint64) []byte {
		b := make([]byte, splitWidth)
		for i := 0; i+8 <= len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], v<<8|uint64(r))
		}
		return b
	}
	w := startRowWriters(t, ctx, f, ds, rows, rowOf)
	var readers sync.WaitGroup
	for g := 0; g < 4; g++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for i := 0; i < 40; i++ {
				r := (g*5 + i*3) % rows
				floor := w.done[r].Load()
				// 8-aligned, so each word is one (version, row) pair.
				col := ((g*977 + i*131) % (splitWidth / 2)) &^ 7
				got, err := readPart(ctx, ds, r, col, splitWidth/3&^7)
				if err != nil {
					t.Error(err)
					return
				}
				v := binary.LittleEndian.Uint64(got) >> 8
				if !bytes.Equal(got, rowOf(r, v)[col:col+len(got)]) {
					t.Errorf("reader %d: part of row %d is not one whole version", g, r)
					return
				}
				if v < floor {
					t.Errorf("reader %d: row %d at version %d, older than %d written before the read", g, r, v, floor)
					return
				}
			}
		}()
	}
	readers.Wait()
	w.stop()
	if t.Failed() {
		return
	}
	if st := f.Cache().Stats(); st.SplitReads == 0 || st.Loads == 0 {
		t.Fatalf("%d split reads over %d loads: nothing was split", st.SplitReads, st.Loads)
	}
}
