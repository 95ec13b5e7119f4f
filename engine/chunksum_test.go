package engine

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/scc-dev/scc/engine/internal/index"
	"github.com/scc-dev/scc/vfd"
)

// chunkSumPipelines are the pipelines whose index checksums must tell
// chunks apart; those ending in CRC32C made every chunk's frame checksum
// the CRC32C residue under the unkeyed rule.
var chunkSumPipelines = map[string][]Filter{
	"none":         nil,
	"shuffle":      {Shuffle()},
	"zstd":         {Zstd(1)},
	"crc32c":       {CRC32C()},
	"shuffle-crc":  {Shuffle(), CRC32C()},
	"zstd-crc32c":  {Zstd(1), CRC32C()},
	"lz4-crc32c":   {LZ4(), CRC32C()},
	"deflate-crc":  {Deflate(1), CRC32C()},
	"shuffle-zstd": {Shuffle(), Zstd(3)},
}

// indexSums returns the index checksum of every stored chunk of d.
func indexSums(t *testing.T, d *Dataset) map[string]uint32 {
	t.Helper()
	ix, err := d.s.idx.get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint32{}
	if err := ix.Range(t.Context(), func(c []uint64, e index.Entry) bool {
		out[fmt.Sprint(c)] = e.Sum
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestChunkSumsDistinct: chunks of equal contents at different
// coordinates have different index checksums on every pipeline, and so do
// equal-size chunks of different contents.
func TestChunkSumsDistinct(t *testing.T) {
	ctx := t.Context()
	for name, fl := range chunkSumPipelines {
		t.Run(name, func(t *testing.T) {
			f := tCreate(t, vfd.NewMem(), nil)
			for _, layout := range []LayoutKind{Chunked, Sparse} {
				spec := DatasetSpec{Type: Uint16, Shape: []uint64{8, 256}, Chunk: []uint64{2, 256}, Filters: fl, Layout: layout}
				d, err := f.CreateDataset(ctx, fmt.Sprint(layout), spec)
				if err != nil {
					t.Fatal(err)
				}
				row := fillBytes(2*2*256, 5)
				for r := uint64(0); r < 8; r += 2 {
					if err := d.Write(ctx, Box([]uint64{r, 0}, []uint64{2, 256}), row); err != nil {
						t.Fatal(err)
					}
				}
				if err := f.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				seen := map[uint32]string{}
				for c, s := range indexSums(t, d) {
					if prev, ok := seen[s]; ok {
						t.Fatalf("%v: chunks %s and %s of equal contents share the index checksum %08x", layout, prev, c, s)
					}
					seen[s] = c
				}
			}
		})
	}
}

// TestChunkSwapIsCorrupt: two stored chunks of equal size swapped on disk,
// and a chunk's older frame put where its newer one lies, are a PROBLEM
// for Check and ErrCorrupt for a read, on every pipeline.
func TestChunkSwapIsCorrupt(t *testing.T) {
	for name, fl := range chunkSumPipelines {
		for _, layout := range []LayoutKind{Chunked, Sparse, Vlen} {
			t.Run(fmt.Sprintf("%s/%v", name, layout), func(t *testing.T) {
				if layout == Vlen && len(fl) > 0 {
					fl = nil // a variable-length dataset's pipeline is its own
				}
				swapRun(t, layout, fl, false)
				swapRun(t, layout, fl, true)
			})
		}
	}
}

// swapRun damages one file: stale puts chunk 0's previous frame where its
// current one lies, otherwise chunks 0 and 1 trade places.
func swapRun(t *testing.T, layout LayoutKind, fl []Filter, stale bool) {
	ctx := t.Context()
	drv := vfd.NewMem()
	f := tCreate(t, drv, nil, noCheck("chunks are swapped on disk on purpose"))
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{4, 512}, Chunk: []uint64{1, 512}, Filters: fl, Layout: layout}
	d, err := f.CreateDataset(ctx, "d", spec)
	if err != nil {
		t.Fatal(err)
	}
	// Rows of one shape and different values: equal sizes through every
	// pipeline.
	row := func(i int) []byte {
		b := make([]byte, 512)
		for j := range b {
			b[j] = byte(j%16 + 16*i)
		}
		return b
	}
	write := func(r int, b []byte) {
		t.Helper()
		var err error
		if layout == Vlen {
			vals := make([][]byte, 512)
			for j := range vals {
				vals[j] = b[j : j+1]
			}
			err = d.WriteVlen(ctx, Box([]uint64{uint64(r), 0}, []uint64{1, 512}), vals)
		} else {
			err = d.Write(ctx, Box([]uint64{uint64(r), 0}, []uint64{1, 512}), b)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for r := range 4 {
		write(r, row(r))
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ext, err := d.ChunkExtents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	at := map[uint64]ChunkExtent{}
	for _, e := range ext {
		at[e.Coord[0]] = e
	}
	frame := func(e ChunkExtent) []byte {
		b := make([]byte, e.Size)
		if _, err := drv.ReadAt(b, e.Off); err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := at[0], at[1]
	if stale {
		old := frame(a)
		write(0, row(3))
		if err := f.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		ext, err := d.ChunkExtents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ext {
			if e.Coord[0] == 0 {
				a = e
			}
		}
		if a.Size != int64(len(old)) {
			t.Fatalf("fixture: chunk 0's frames are %d and %d bytes", len(old), a.Size)
		}
		if err := f.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := drv.WriteAt(old, a.Off); err != nil {
			t.Fatal(err)
		}
	} else {
		if a.Size != b.Size {
			t.Fatalf("fixture: chunks 0 and 1 are %d and %d bytes", a.Size, b.Size)
		}
		if err := f.Close(ctx); err != nil {
			t.Fatal(err)
		}
		fa, fb := frame(a), frame(b)
		if bytes.Equal(fa, fb) {
			t.Fatal("fixture: chunks 0 and 1 are stored alike")
		}
		if _, err := drv.WriteAt(fb, a.Off); err != nil {
			t.Fatal(err)
		}
		if _, err := drv.WriteAt(fa, b.Off); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Check(ctx, "", &Options{Driver: drv})
	if !errors.Is(err, ErrCorrupt) || r == nil || len(r.Problems) == 0 {
		t.Fatalf("stale %v: Check = %+v, %v; want a PROBLEM", stale, r, err)
	}
	ro, err := Open(ctx, "", &Options{Driver: drv, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close(ctx)
	rd, err := ro.OpenDataset(ctx, "d", nil)
	if err != nil {
		t.Fatal(err)
	}
	sel := Box([]uint64{0, 0}, []uint64{1, 512})
	if layout == Vlen {
		_, err = rd.ReadVlen(ctx, sel)
	} else {
		err = rd.Read(ctx, sel, make([]byte, 512))
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("stale %v: read of chunk 0: %v, want ErrCorrupt", stale, err)
	}
}

// TestChunkKeySurvivesMove: the chunk key lives in the header, not in the
// name, so a moved dataset's chunks still verify, before and after reopen.
func TestChunkKeySurvivesMove(t *testing.T) {
	ctx := t.Context()
	drv := vfd.NewMem()
	f := tCreate(t, drv, nil)
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{4, 512}, Chunk: []uint64{1, 512}, Filters: []Filter{Zstd(1), CRC32C()}}
	d, err := f.CreateDataset(ctx, "a/d", spec)
	if err != nil {
		t.Fatal(err)
	}
	want := fillBytes(4*512, 3)
	if err := d.Write(ctx, All(spec.Shape), want); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	key := d.s.csum.Key()
	if err := f.Move(ctx, "a/d", "b"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(ctx, "", &Options{Driver: drv}); err != nil {
		t.Fatal(err)
	}
	ro := tOpen(t, drv, &Options{ReadOnly: true})
	rd, err := ro.OpenDataset(ctx, "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rd.s.csum.Key() != key || key == 0 {
		t.Fatalf("chunk key %x after the move, %x before", rd.s.csum.Key(), key)
	}
	got := make([]byte, len(want))
	if err := rd.Read(ctx, All(spec.Shape), got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read after move: %v", err)
	}
}
