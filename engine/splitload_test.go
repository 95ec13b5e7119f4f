package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// Split loads (cache/splitload.go): a read of part of a large unfiltered
// chunk loads it through the cache; its image is read in shares by the
// caller and helpers, each summing what it read, and the chunk is decoded
// from the combined sum (denseLayout.SummedLen / DecodeSummed).

// readPart reads columns [col, col+n) of row r.
func readPart(ctx context.Context, ds *Dataset, r, col, n int) ([]byte, error) {
	got := make([]byte, n)
	err := ds.Read(ctx, Box([]uint64{uint64(r), uint64(col)}, []uint64{1, uint64(n)}), got)
	return got, err
}

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

// A damaged byte in either goroutine's share of a split load is
// ErrCorrupt, and nothing of that chunk stays cached.
func TestSplitLoadCorrupt(t *testing.T) {
	splitProcs(t)
	ctx := context.Background()
	mem, want := splitImage(t, 4)
	for _, where := range []struct {
		name string
		at   int
	}{{"caller's half", 100}, {"helper's half", splitWidth - 100}} {
		img := append([]byte(nil), mem.Bytes()...)
		img[chunkAt(t, img, want, 2)+where.at] ^= 0x40
		f, err := OpenWith(vfd.NewMemFrom(img), &Options{CacheConfig: cache.Config{QuiescentBytes: 1 << 20, SplitReadBytes: 64 << 10}})
		must(t, err)
		ds, err := f.OpenDataset("d")
		must(t, err)
		for try := 0; try < 2; try++ { // the failed load left nothing behind
			if _, err := readPart(ctx, ds, 2, 10, 50); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s damaged, try %d: %v, want ErrCorrupt", where.name, try, err)
			}
		}
		if st := f.Cache().Stats(); st.SplitReads != 2 || st.Chunks != 0 {
			t.Fatalf("%s damaged: %d split reads, %d chunks cached; want 2, 0", where.name, st.SplitReads, st.Chunks)
		}
		got, err := readPart(ctx, ds, 1, 10, 50)
		must(t, err)
		if !bytes.Equal(got, want[splitWidth+10:splitWidth+60]) {
			t.Fatalf("%s damaged: row 1 wrong", where.name)
		}
		must(t, f.Close())
	}
}

// A failure of either goroutine's share of a load is an I/O error, never
// corruption, and leaves nothing cached; the next load of the chunk reads
// it right.
func TestSplitLoadShareFault(t *testing.T) {
	splitProcs(t)
	ctx := context.Background()
	mem, want := splitImage(t, 4)
	start := int64(chunkAt(t, mem.Bytes(), want, 1))
	for _, share := range []struct {
		name string
		hits func(off int64) bool
	}{
		{"caller's", func(off int64) bool { return off == start }},
		{"helper's", func(off int64) bool { return off > start && off < start+splitWidth }},
	} {
		var hit atomic.Int64
		fault := vfd.NewFault(mem, vfd.Fail(vfd.TriggerFunc(func(i vfd.OpInfo) bool {
			if i.Op == vfd.OpReadV && share.hits(i.Off) {
				hit.Add(1)
				return true
			}
			return false
		})))
		f, ds := splitOpen(t, fault, 64<<10)
		_, err := readPart(ctx, ds, 1, 0, 10)
		if hit.Load() != 1 || !errors.Is(err, vfd.ErrInjected) || !errors.Is(err, ErrIO) || errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s share failed (%d hits): %v; want vfd.ErrInjected as ErrIO, not ErrCorrupt", share.name, hit.Load(), err)
		}
		if st := f.Cache().Stats(); st.SplitReads != 1 || st.Chunks != 0 {
			t.Fatalf("%s share: %d split reads, %d chunks cached after the failed load; want 1, 0", share.name, st.SplitReads, st.Chunks)
		}
		fault.SetEnabled(false)
		got, err := readPart(ctx, ds, 1, 0, 10)
		must(t, err)
		if !bytes.Equal(got, want[splitWidth:splitWidth+10]) {
			t.Fatalf("%s share: read after the fault: wrong bytes", share.name)
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
