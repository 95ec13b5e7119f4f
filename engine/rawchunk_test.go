package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// TestRawChunkCopyBetweenDatasets: every stored chunk read raw from one
// dataset and written raw to another of the same spec gives the same
// elements, for each pipeline, including edge chunks and a dirty chunk the
// raw read must see.
func TestRawChunkCopyBetweenDatasets(t *testing.T) {
	ctx := context.Background()
	for i, filters := range [][]Filter{nil, {Shuffle(), Deflate(4)}, {Shuffle(), Zstd(2)}, {LZ4(), CRC32C()}} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			f := tCreate(t, vfd.NewMem(), nil)
			spec := DatasetSpec{Type: Int32, Shape: []uint64{10, 7}, Chunk: []uint64{4, 3}, Filters: filters, Fill: []byte{7, 0, 0, 0}}
			src, err := f.CreateDataset(ctx, "src", spec)
			must(t, err)
			dst, err := f.CreateDataset(ctx, "dst", spec)
			must(t, err)
			rng := rand.New(rand.NewPCG(uint64(i), 2))
			ref := newRef(spec.Shape, 4, spec.Fill)
			for k := 0; k < 6; k++ {
				sel := randomSelection(rng, spec.Shape)
				buf := compressibleBytes(rng, int(sel.NumElements())*4)
				must(t, src.Write(ctx, sel, buf))
				ref.write(sel, buf)
			}
			must(t, f.Flush(ctx))
			// A dirty chunk after the flush: Chunks and the raw read
			// must see it.
			buf := []byte{9, 9, 9, 9}
			must(t, src.Write(ctx, Box([]uint64{9, 6}, []uint64{1, 1}), buf))
			ref.write(Box([]uint64{9, 6}, []uint64{1, 1}), buf)
			chunks, err := storedChunks(ctx, src)
			must(t, err)
			if len(chunks) == 0 {
				t.Fatal("no stored chunks")
			}
			for j, c := range chunks {
				if j > 0 && compareCoords(chunks[j-1].Coords, c.Coords) >= 0 {
					t.Fatalf("not in C order: %v then %v", chunks[j-1].Coords, c.Coords)
				}
				data, mask, err := src.ReadChunkRaw(ctx, c.Coords)
				must(t, err)
				if uint64(len(data)) != c.Size || mask != c.FilterMask {
					t.Fatalf("chunk %v: %d bytes mask %d, listed %d mask %d", c.Coords, len(data), mask, c.Size, c.FilterMask)
				}
				must(t, dst.WriteChunkRaw(ctx, c.Coords, data, mask))
			}
			ref.verify(t, dst)
			must(t, f.Close(ctx))
		})
	}
}

func compareCoords(a, b []uint64) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// TestRawChunkWriteVerified: bytes that do not decode to exactly one chunk,
// or whose padding outside the extent is not the fill value, are refused
// with ErrInvalid and nothing changes; coordinates outside the grid are
// ErrOutOfRange; an unstored chunk reads as ErrNotFound.
func TestRawChunkWriteVerified(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{6}, Chunk: []uint64{4}, Filters: []Filter{Deflate(1)}}
	ds, err := f.CreateDataset(ctx, "d", spec)
	must(t, err)
	raw, err := f.CreateDataset(ctx, "raw", DatasetSpec{Type: Uint8, Shape: []uint64{6}, Chunk: []uint64{4}})
	must(t, err)
	must(t, ds.Write(ctx, Box([]uint64{0}, []uint64{4}), []byte{1, 2, 3, 4}))
	good, mask, err := ds.ReadChunkRaw(ctx, []uint64{0})
	must(t, err)
	for _, c := range []struct {
		ds   *Dataset
		data []byte
		mask uint32
	}{
		{ds, []byte{1, 2, 3}, 0},                         // not deflate
		{ds, good, mask ^ 1},                             // the other mask: not what the bytes are
		{ds, append(append([]byte{}, good...), 0), mask}, // trailing byte
		{raw, []byte{1, 2, 3}, 0},                        // unfiltered, short
		{raw, []byte{1, 2, 3, 4}, 1},                     // unfiltered, mask
		{raw, make([]byte, 1<<20), 0},                    // beyond the stored bound
	} {
		if err := c.ds.WriteChunkRaw(ctx, []uint64{0}, c.data, c.mask); !errors.Is(err, ErrInvalid) {
			t.Errorf("write %x mask %d: %v, want ErrInvalid", c.data, c.mask, err)
		}
	}
	// Padding: chunk 1 covers elements 4..7 of an extent of 6.
	if err := raw.WriteChunkRaw(ctx, []uint64{1}, []byte{5, 6, 7, 8}, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("non-fill padding: %v, want ErrInvalid", err)
	}
	must(t, raw.WriteChunkRaw(ctx, []uint64{1}, []byte{5, 6, 0, 0}, 0))
	if err := raw.WriteChunkRaw(ctx, []uint64{2}, []byte{0, 0, 0, 0}, 0); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("outside the grid: %v", err)
	}
	if err := raw.WriteChunkRaw(ctx, []uint64{0, 0}, []byte{0, 0, 0, 0}, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("wrong rank: %v", err)
	}
	if _, _, err := raw.ReadChunkRaw(ctx, []uint64{0}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unstored chunk: %v", err)
	}
	got := make([]byte, 6)
	must(t, ds.Read(ctx, All([]uint64{6}), got))
	if !bytes.Equal(got, []byte{1, 2, 3, 4, 0, 0}) {
		t.Fatalf("a refused raw write changed the data: %v", got)
	}
	must(t, raw.Read(ctx, All([]uint64{6}), got))
	if !bytes.Equal(got, []byte{0, 0, 0, 0, 5, 6}) {
		t.Fatalf("raw write: %v", got)
	}
}

// TestRawChunkCoherentWithCache: a raw write replaces a cached (even
// dirty) copy, and is durable after Flush; a raw read sees a dirty cached
// write.
func TestRawChunkCoherentWithCache(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{8}, Chunk: []uint64{4}})
	must(t, err)
	must(t, ds.Write(ctx, Box([]uint64{0}, []uint64{4}), []byte{1, 1, 1, 1})) // dirty in the cache
	data, _, err := ds.ReadChunkRaw(ctx, []uint64{0})
	must(t, err)
	if !bytes.Equal(data, []byte{1, 1, 1, 1}) {
		t.Fatalf("raw read missed the dirty cached write: %v", data)
	}
	must(t, ds.Write(ctx, Box([]uint64{0}, []uint64{4}), []byte{2, 2, 2, 2})) // dirty again
	must(t, ds.WriteChunkRaw(ctx, []uint64{0}, []byte{3, 3, 3, 3}, 0))
	got := make([]byte, 4)
	must(t, ds.Read(ctx, Box([]uint64{0}, []uint64{4}), got))
	if !bytes.Equal(got, []byte{3, 3, 3, 3}) {
		t.Fatalf("read after raw write: %v", got)
	}
	must(t, f.Close(ctx))
	f2 := tOpen(t, mem, &Options{ReadOnly: true})
	ds2, err := f2.OpenDataset(ctx, "d", nil)
	must(t, err)
	must(t, ds2.Read(ctx, Box([]uint64{0}, []uint64{4}), got))
	if !bytes.Equal(got, []byte{3, 3, 3, 3}) {
		t.Fatalf("after reopen: %v (the dirty cached copy overwrote the raw write?)", got)
	}
}

// TestRawChunkConcurrent: goroutines mix raw writes, ordinary writes and
// raw and ordinary reads on whole chunks; each goroutine owns a set of
// chunks, so its own reads must see its last write (the reference model),
// and the final state must be exactly the model after a reopen.
func TestRawChunkConcurrent(t *testing.T) {
	t.Run("deflate", func(t *testing.T) { testRawChunkConcurrent(t, false) })
	// Zlib: raw writes go through WriteChunkRawZlib, which stores the
	// stream without decoding it; the model must hold just the same.
	t.Run("zlib", func(t *testing.T) { testRawChunkConcurrent(t, true) })
}

func testRawChunkConcurrent(t *testing.T, zlib bool) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, &Options{CacheConfig: cache.Config{QuiescentBytes: 512}})
	const workers, per = 6, 4
	csize := uint64(16)
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{workers * per * csize}, Chunk: []uint64{csize}, Filters: []Filter{Shuffle(), Deflate(1)}}
	if zlib {
		// The compressor stores tiny inputs, and zlib adds 6 bytes of
		// framing: a chunk this small is only shrunk when it is larger.
		csize = 1024
		spec = DatasetSpec{Type: Uint8, Shape: []uint64{workers * per * csize}, Chunk: []uint64{csize}, Filters: []Filter{Shuffle(), Zlib(1)}}
	}
	ds, err := f.CreateDataset(ctx, "d", spec)
	must(t, err)
	// Encoded images of the chunk values, made by a scratch dataset.
	scratch, err := f.CreateDataset(ctx, "scratch", DatasetSpec{Type: Uint8, Shape: []uint64{csize}, Chunk: []uint64{csize}, Filters: spec.Filters})
	must(t, err)
	images := map[byte][]byte{}
	masks := map[byte]uint32{}
	for v := 0; v < 8; v++ {
		must(t, scratch.Write(ctx, All([]uint64{csize}), bytes.Repeat([]byte{byte(v)}, int(csize))))
		img, m, err := scratch.ReadChunkRaw(ctx, []uint64{0})
		must(t, err)
		images[byte(v)], masks[byte(v)] = img, m
	}
	final := make([]byte, workers*per*csize)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			cur := map[uint64]byte{}
			for i := 0; i < 150; i++ {
				c := uint64(w*per + rng.IntN(per))
				v := byte(rng.IntN(8))
				box := Box([]uint64{c * csize}, []uint64{csize})
				switch rng.IntN(4) {
				case 0:
					var err error
					if zlib {
						var verified bool
						verified, err = ds.WriteChunkRawZlib(ctx, []uint64{c}, images[v], masks[v])
						if verified {
							t.Errorf("chunk %d (not an edge chunk) was decoded", c)
						}
					} else {
						err = ds.WriteChunkRaw(ctx, []uint64{c}, images[v], masks[v])
					}
					if err != nil {
						t.Error(err)
						return
					}
					cur[c] = v
				case 1:
					if err := ds.Write(ctx, box, bytes.Repeat([]byte{v}, int(csize))); err != nil {
						t.Error(err)
						return
					}
					cur[c] = v
				case 2:
					want, ok := cur[c]
					img, m, err := ds.ReadChunkRaw(ctx, []uint64{c})
					if !ok {
						if !errors.Is(err, ErrNotFound) {
							t.Errorf("unwritten chunk %d: %v", c, err)
						}
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					dec, err := ds.s.pipeline.Decode(img, m, int(csize))
					if err != nil || !bytes.Equal(dec, bytes.Repeat([]byte{want}, int(csize))) {
						t.Errorf("raw read of chunk %d: %v %v, want %d", c, dec, err, want)
					}
				default:
					got := make([]byte, int(csize))
					if err := ds.Read(ctx, box, got); err != nil {
						t.Error(err)
						return
					}
					if !bytes.Equal(got, bytes.Repeat([]byte{cur[c]}, int(csize))) {
						t.Errorf("read of chunk %d: %v, want %d", c, got, cur[c])
					}
				}
				if rng.IntN(20) == 0 {
					if err := f.Flush(ctx); err != nil {
						t.Error(err)
					}
				}
			}
			for c, v := range cur {
				copy(final[c*csize:], bytes.Repeat([]byte{v}, int(csize)))
			}
		}(w)
	}
	wg.Wait()
	must(t, f.Close(ctx))
	f2 := tOpen(t, mem, nil)
	ds2, err := f2.OpenDataset(ctx, "d", nil)
	must(t, err)
	got := make([]byte, len(final))
	must(t, ds2.Read(ctx, All(spec.Shape), got))
	if !bytes.Equal(got, final) {
		t.Fatal("final state differs from the model")
	}
}

// rawWorkload copies chunks raw between datasets across commits, for the
// crash and fault sweeps.
var rawWorkload = rawWorkloadWith(false)

// rawZlibWorkload is rawWorkload over a shuffle+zlib pipeline, copying
// with WriteChunkRawZlib (its inner chunks stored without a decode).
var rawZlibWorkload = rawWorkloadWith(true)

func rawWorkloadWith(zlib bool) workload {
	return defineWorkload(5, &Options{CacheConfig: cache.Config{QuiescentBytes: 2 << 10}}, func(w *wlRun) error {
		spec := DatasetSpec{Type: Uint16, Shape: []uint64{6, 6}, Chunk: []uint64{4, 4}, Filters: []Filter{Shuffle(), Deflate(2)}}
		if zlib {
			// Chunks large enough for zlib to shrink; (0,0) is inner.
			spec = DatasetSpec{Type: Uint16, Shape: []uint64{24, 24}, Chunk: []uint64{16, 16}, Filters: []Filter{Shuffle(), Zlib(2)}}
		}
		if err := w.create(map[string]DatasetSpec{"src": spec, "dst": spec}, "src", "dst"); err != nil {
			return err
		}
		src, dst := w.sets["src"], w.sets["dst"]
		for round := 0; round < 2; round++ {
			for k := 0; k < 3; k++ {
				sel := randomSelection(w.rng, spec.Shape)
				buf := compressibleBytes(w.rng, int(sel.NumElements())*2)
				if err := src.Write(w.ctx, sel, buf); err != nil {
					return err
				}
				w.refs["src"].write(sel, buf)
			}
			chunks, err := storedChunks(w.ctx, src)
			if err != nil {
				return err
			}
			for _, c := range chunks {
				data, mask, err := src.ReadChunkRaw(w.ctx, c.Coords)
				if err != nil {
					return err
				}
				if zlib && mask == 0 {
					_, err = dst.WriteChunkRawZlib(w.ctx, c.Coords, data, mask)
				} else {
					err = dst.WriteChunkRaw(w.ctx, c.Coords, data, mask)
				}
				if err != nil {
					return err
				}
			}
			w.refs["dst"] = w.refs["src"].clone()
			if err := w.flush(); err != nil {
				return err
			}
		}
		return nil
	})
}

func TestRawChunkCrashAndFault(t *testing.T) {
	defer verifyNoLeaks(t)
	crashSweep(t, rawWorkload, 1)
	faultSweep(t, rawWorkload, 2)
	crashSweep(t, rawZlibWorkload, 3)
	faultSweep(t, rawZlibWorkload, 4)
}

// TestReadChunkRawStored: the raw read also describes the chunk as
// Chunks yields it, with the index's checksum of the stored frame,
// which changes when the chunk is rewritten; a chunk not stored is
// ErrNotFound.
func TestReadChunkRawStored(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Int32, Shape: []uint64{8, 8}, Chunk: []uint64{4, 4}, Filters: []Filter{Zstd(1)}})
	must(t, err)
	buf := make([]byte, 4*4*4)
	for i := range buf {
		buf[i] = byte(i % 7)
	}
	must(t, ds.Write(ctx, Box([]uint64{0, 4}, []uint64{4, 4}), buf))
	must(t, f.Flush(ctx))
	listed, err := storedChunks(ctx, ds)
	must(t, err)
	if len(listed) != 1 || listed[0].Sum == 0 {
		t.Fatalf("listed %+v, want one chunk with its checksum", listed)
	}
	data, sc, err := ds.ReadChunkRawStored(ctx, []uint64{0, 1})
	must(t, err)
	want, mask, err := ds.ReadChunkRaw(ctx, []uint64{0, 1})
	must(t, err)
	if !bytes.Equal(data, want) || sc.FilterMask != mask || fmt.Sprint(sc) != fmt.Sprint(listed[0]) {
		t.Fatalf("read %+v (%d bytes), listed %+v (%d bytes)", sc, len(data), listed[0], len(want))
	}
	buf[0]++
	must(t, ds.Write(ctx, Box([]uint64{0, 4}, []uint64{4, 4}), buf))
	// Dirty in the cache: the read writes it back and describes what it
	// stored.
	_, sc2, err := ds.ReadChunkRawStored(ctx, []uint64{0, 1})
	must(t, err)
	if sc2.Sum == sc.Sum {
		t.Fatalf("rewritten chunk kept its checksum %#x", sc.Sum)
	}
	if _, _, err := ds.ReadChunkRawStored(ctx, []uint64{1, 1}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("chunk not stored: %v, want ErrNotFound", err)
	}
}

// TestStatChunkRaw: the description of a stored chunk from the index
// alone, without reading the chunk, equal to what the raw read returns,
// in a writer's File with the chunk dirty in the cache (written back
// first) and in a read-only File; ErrNotFound for a chunk not stored,
// ErrOutOfRange outside the grid.
func TestStatChunkRaw(t *testing.T) {
	ctx := context.Background()
	drv := vfd.NewMem()
	f := tCreate(t, drv, nil)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Int32, Shape: []uint64{8, 8}, Chunk: []uint64{4, 4}, Filters: []Filter{Zstd(1)}})
	must(t, err)
	buf := make([]byte, 4*4*4)
	for v := range 2 {
		buf[0] = byte(v + 1)
		must(t, ds.Write(ctx, Box([]uint64{4, 4}, []uint64{4, 4}), buf))
		sc, err := ds.StatChunkRaw(ctx, []uint64{1, 1})
		must(t, err)
		_, want, err := ds.ReadChunkRawStored(ctx, []uint64{1, 1})
		must(t, err)
		if fmt.Sprint(sc) != fmt.Sprint(want) {
			t.Fatalf("stat %+v, read %+v", sc, want)
		}
	}
	if _, err := ds.StatChunkRaw(ctx, []uint64{0, 0}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("chunk not stored: %v", err)
	}
	if _, err := ds.StatChunkRaw(ctx, []uint64{2, 0}); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("outside the grid: %v", err)
	}
	must(t, f.Flush(ctx))
	_, want, err := ds.ReadChunkRawStored(ctx, []uint64{1, 1})
	must(t, err)

	rf, err := Open(ctx, "", &Options{Driver: drv, ReadOnly: true})
	must(t, err)
	defer rf.Close(ctx)
	rds, err := rf.OpenDataset(ctx, "d", nil)
	must(t, err)
	defer rds.Close(ctx)
	before := rf.Cache().Stats()
	sc, err := rds.StatChunkRaw(ctx, []uint64{1, 1})
	must(t, err)
	if fmt.Sprint(sc) != fmt.Sprint(want) {
		t.Fatalf("read-only stat %+v, want %+v", sc, want)
	}
	if st := rf.Cache().Stats(); st.VectorReads != before.VectorReads {
		t.Fatalf("the stat read chunks: %d vector reads", st.VectorReads-before.VectorReads)
	}
}
