package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// rawSpec is a 2-D dataset whose extent leaves partial edge chunks.
func rawSpec(filters ...Filter) DatasetSpec {
	return DatasetSpec{Type: Uint16, Shape: []uint64{10, 7}, MaxShape: []uint64{Unlimited, 7}, Chunk: []uint64{4, 4}, Filters: filters}
}

// rawData is n uint16 elements, compressible but not constant.
func rawData(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, 2*n)
	for i := 0; i < n; i++ {
		v := uint16(i/3) + uint16(rng.IntN(4))
		b[2*i], b[2*i+1] = byte(v), byte(v>>8)
	}
	return b
}

func readAll(t testing.TB, ds *Dataset) []byte {
	t.Helper()
	shape := ds.Shape()
	n := uint64(ds.Type().Size())
	for _, s := range shape {
		n *= s
	}
	buf := make([]byte, n)
	if err := ds.Read(context.Background(), Box(make([]uint64, len(shape)), shape), buf); err != nil {
		t.Fatalf("read %s: %v", ds.Name(), err)
	}
	return buf
}

// TestRawChunkCopy copies every chunk of a dataset, edge chunks included,
// to a second dataset with the same pipeline without decoding, for each
// pipeline; the copy reads back equal. Chunks are read before any Flush, so
// the dirty cached copies must be written back by ReadChunkRaw.
func TestRawChunkCopy(t *testing.T) {
	ctx := context.Background()
	for _, fl := range [][]Filter{nil, {Shuffle()}, {Shuffle(), Deflate(1)}, {Zstd(1), CRC32C()}, {LZ4()}} {
		t.Run(fmt.Sprint(fl), func(t *testing.T) {
			f := tCreate(t, vfd.NewMem(), nil)
			src, err := f.CreateDataset("src", rawSpec(fl...))
			if err != nil {
				t.Fatal(err)
			}
			dst, err := f.CreateDataset("dst", rawSpec(fl...))
			if err != nil {
				t.Fatal(err)
			}
			want := rawData(70, 1)
			if err := src.Write(ctx, Box([]uint64{0, 0}, []uint64{10, 7}), want); err != nil {
				t.Fatal(err)
			}
			grid := src.ChunkGrid()
			if fmt.Sprint(grid) != "[3 2]" {
				t.Fatalf("grid %v", grid)
			}
			for i := uint64(0); i < grid[0]; i++ {
				for j := uint64(0); j < grid[1]; j++ {
					c, ok, err := src.ReadChunkRaw(ctx, []uint64{i, j})
					if err != nil || !ok {
						t.Fatalf("read raw %d,%d: ok %v err %v", i, j, ok, err)
					}
					if len(fl) == 0 && len(c.Image) != src.ChunkBytes() {
						t.Fatalf("unfiltered image %d bytes, want whole chunk %d", len(c.Image), src.ChunkBytes())
					}
					if err := dst.WriteChunkRaw(ctx, []uint64{i, j}, c); err != nil {
						t.Fatalf("write raw %d,%d: %v", i, j, err)
					}
				}
			}
			if got := readAll(t, dst); !bytes.Equal(got, want) {
				t.Fatalf("copy differs")
			}
			if err := f.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, dst); !bytes.Equal(got, want) {
				t.Fatalf("copy differs after flush")
			}
		})
	}
}

// TestRawChunkCoherence: a raw write replaces a resident chunk, clean or
// dirty, so the next Read sees the raw image; a raw read sees a dirty
// cached chunk, not the stale stored one.
func TestRawChunkCoherence(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), &Options{CacheConfig: cache.Config{QuiescentBytes: 1 << 20}})
	ds, err := f.CreateDataset("d", rawSpec(Shuffle(), Deflate(3)))
	if err != nil {
		t.Fatal(err)
	}
	chunk := Box([]uint64{0, 0}, []uint64{4, 4})
	a, b := rawData(16, 1), rawData(16, 2)
	if err := ds.Write(ctx, chunk, a); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Stored: a. Dirty in the cache: b. The raw read must see b.
	if err := ds.Write(ctx, chunk, b); err != nil {
		t.Fatal(err)
	}
	c, ok, err := ds.ReadChunkRaw(ctx, []uint64{0, 0})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	got, err := ds.DecodeChunk(c)
	if err != nil || !bytes.Equal(got, b) {
		t.Fatalf("raw read returned the stale chunk (err %v)", err)
	}
	// Resident clean b; a raw write of a must win over it, and over a
	// dirty copy too.
	ra, err := ds.EncodeChunk(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, dirty := range []bool{false, true} {
		if dirty {
			if err := ds.Write(ctx, chunk, b); err != nil {
				t.Fatal(err)
			}
		}
		if err := ds.WriteChunkRaw(ctx, []uint64{0, 0}, ra); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 32)
		if err := ds.Read(ctx, chunk, buf); err != nil || !bytes.Equal(buf, a) {
			t.Fatalf("dirty=%v: read after raw write returned the cached chunk (err %v)", dirty, err)
		}
		if err := f.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := ds.Read(ctx, chunk, buf); err != nil || !bytes.Equal(buf, a) {
			t.Fatalf("dirty=%v: after flush (err %v)", dirty, err)
		}
	}
	// A chunk never written is not stored.
	if _, ok, err := ds.ReadChunkRaw(ctx, []uint64{2, 1}); ok || err != nil {
		t.Fatalf("unwritten chunk: ok %v err %v", ok, err)
	}
}

// TestRawChunkBadInput: every bad argument gets its sentinel and leaves the
// chunk as it was.
func TestRawChunkBadInput(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	ds, err := f.CreateDataset("d", rawSpec(Shuffle(), Deflate(1)))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := f.CreateDataset("p", rawSpec())
	if err != nil {
		t.Fatal(err)
	}
	want := rawData(70, 3)
	if err := ds.Write(ctx, Box([]uint64{0, 0}, []uint64{10, 7}), want); err != nil {
		t.Fatal(err)
	}
	good, _, err := ds.ReadChunkRaw(ctx, []uint64{0, 0})
	if err != nil {
		t.Fatal(err)
	}
	trailing := RawChunk{Image: append(bytes.Clone(good.Image), 0, 0, 0), Mask: good.Mask}
	cases := []struct {
		name  string
		ds    *Dataset
		coord []uint64
		c     RawChunk
		want  error
	}{
		{"rank", ds, []uint64{0}, good, ErrInvalid},
		{"outside grid", ds, []uint64{3, 0}, good, ErrOutOfRange},
		{"huge coordinate", ds, []uint64{^uint64(0), 0}, good, ErrOutOfRange},
		{"garbage", ds, []uint64{0, 0}, RawChunk{Image: []byte("not deflate at all")}, ErrInvalid},
		{"trailing bytes", ds, []uint64{0, 0}, trailing, ErrInvalid},
		{"truncated", ds, []uint64{0, 0}, RawChunk{Image: good.Image[:len(good.Image)-3], Mask: good.Mask}, ErrInvalid},
		{"mask beyond pipeline", ds, []uint64{0, 0}, RawChunk{Image: good.Image, Mask: 4}, ErrInvalid},
		{"mask on shuffle", ds, []uint64{0, 0}, RawChunk{Image: good.Image, Mask: 1}, ErrInvalid},
		{"huge image", ds, []uint64{0, 0}, RawChunk{Image: make([]byte, 1<<20)}, ErrInvalid},
		{"unfiltered short", plain, []uint64{0, 0}, RawChunk{Image: make([]byte, 31)}, ErrInvalid},
		{"unfiltered mask", plain, []uint64{0, 0}, RawChunk{Image: make([]byte, 32), Mask: 1}, ErrInvalid},
	}
	for _, tc := range cases {
		err := tc.ds.WriteChunkRaw(ctx, tc.coord, tc.c)
		if !errors.Is(err, tc.want) || errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err %v, want %v (and not ErrCorrupt)", tc.name, err, tc.want)
		}
	}
	if _, _, err := ds.ReadChunkRaw(ctx, []uint64{0, 3}); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("read outside grid: %v", err)
	}
	if got := readAll(t, ds); !bytes.Equal(got, want) {
		t.Fatal("a refused raw write changed the dataset")
	}
	ds.Close()
	if _, _, err := ds.ReadChunkRaw(ctx, []uint64{0, 0}); !errors.Is(err, ErrClosed) {
		t.Errorf("closed handle: %v", err)
	}
}

// TestRawChunkReadOnlyAndCorrupt: a read-only file refuses raw writes, and a
// stored image whose bytes were damaged is reported as ErrCorrupt.
func TestRawChunkReadOnlyAndCorrupt(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f, err := CreateWith(mem, nil)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := f.CreateDataset("d", rawSpec(Shuffle(), Deflate(1)))
	if err != nil {
		t.Fatal(err)
	}
	data := rawData(70, 4)
	if err := ds.Write(ctx, Box([]uint64{0, 0}, []uint64{10, 7}), data); err != nil {
		t.Fatal(err)
	}
	c, _, err := ds.ReadChunkRaw(ctx, []uint64{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenWith(mem, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	rds, err := ro.OpenDataset("d")
	if err != nil {
		t.Fatal(err)
	}
	if err := rds.WriteChunkRaw(ctx, []uint64{1, 1}, c); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only write: %v", err)
	}
	if got, ok, err := rds.ReadChunkRaw(ctx, []uint64{1, 1}); err != nil || !ok || !bytes.Equal(got.Image, c.Image) {
		t.Fatalf("read-only raw read: ok %v err %v", ok, err)
	}
	ro.Close()
	// Damage the stored image in place.
	raw := mem.Bytes()
	at := bytes.Index(raw, c.Image)
	if at < 0 {
		t.Fatal("image not found in the file")
	}
	raw[at+len(c.Image)/2] ^= 1
	damaged := vfd.NewMemFrom(raw)
	ro, err = OpenWith(damaged, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rds, err = ro.OpenDataset("d")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := rds.ReadChunkRaw(ctx, []uint64{1, 1}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged chunk: %v", err)
	}
}

// TestRawChunkFault: an I/O error during a raw write or read reaches the
// caller with its cause, and the chunk keeps its previous content.
func TestRawChunkFault(t *testing.T) {
	ctx := context.Background()
	fd := vfd.NewFault(vfd.NewMem())
	fd.SetEnabled(false)
	f := tCreate(t, fd, nil)
	ds, err := f.CreateDataset("d", rawSpec(Shuffle(), Deflate(1)))
	if err != nil {
		t.Fatal(err)
	}
	old, fresh := rawData(70, 5), rawData(70, 6)
	if err := ds.Write(ctx, Box([]uint64{0, 0}, []uint64{10, 7}), old); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	other, err := f.CreateDataset("o", rawSpec(Shuffle(), Deflate(1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Write(ctx, Box([]uint64{0, 0}, []uint64{10, 7}), fresh); err != nil {
		t.Fatal(err)
	}
	c, _, err := other.ReadChunkRaw(ctx, []uint64{0, 0})
	if err != nil {
		t.Fatal(err)
	}
	fd.Add(vfd.Fail(vfd.Every(vfd.OpAny)))
	fd.SetEnabled(true)
	err = ds.WriteChunkRaw(ctx, []uint64{0, 0}, c)
	if !errors.Is(err, ErrIO) || !errors.Is(err, vfd.ErrInjected) {
		t.Fatalf("write under a failing disk: %v", err)
	}
	if _, _, err := ds.ReadChunkRaw(ctx, []uint64{0, 1}); !errors.Is(err, ErrIO) {
		t.Fatalf("read under a failing disk: %v", err)
	}
	fd.SetEnabled(false)
	if got := readAll(t, ds); !bytes.Equal(got, old) {
		t.Fatal("a failed raw write changed the chunk")
	}
}

// TestRawChunkConcurrent: goroutines mix raw writes, ordinary writes, raw
// reads, reads and flushes on overlapping chunks; every chunk ends as the
// last version its single owner wrote (the reference model), and raw reads
// always decode to some version of their chunk that was written.
func TestRawChunkConcurrent(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), &Options{CacheConfig: cache.Config{QuiescentBytes: 2 << 10}})
	spec := DatasetSpec{Type: Uint16, Shape: []uint64{32, 8}, Chunk: []uint64{4, 8}, Filters: []Filter{Shuffle(), Deflate(1)}}
	ds, err := f.CreateDataset("d", spec)
	if err != nil {
		t.Fatal(err)
	}
	const writers, rounds = 8, 40
	model := make([][]byte, 8) // chunk row i → last content written
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			row := uint64(w) // each writer owns one chunk row
			for r := 0; r < rounds; r++ {
				data := rawData(32, uint64(w*1000+r))
				binaryTag(data, w, r)
				box := Box([]uint64{row * 4, 0}, []uint64{4, 8})
				if r%2 == 0 {
					c, err := ds.EncodeChunk(data)
					if err == nil {
						err = ds.WriteChunkRaw(ctx, []uint64{row, 0}, c)
					}
					if err != nil {
						errs <- err
						return
					}
				} else if err := ds.Write(ctx, box, data); err != nil {
					errs <- err
					return
				}
				model[w] = data
				// Another writer's chunk, raw: it must decode to a tagged
				// version of that chunk (or not be stored yet).
				o := uint64((w + 1) % writers)
				c, ok, err := ds.ReadChunkRaw(ctx, []uint64{o, 0})
				if err != nil {
					errs <- err
					return
				}
				if ok {
					got, err := ds.DecodeChunk(c)
					if err != nil {
						errs <- err
						return
					}
					if tw, _ := tagOf(got); tw != int(o) {
						errs <- fmt.Errorf("raw read of row %d found writer %d's data", o, tw)
						return
					}
				}
				if r%10 == 0 {
					if err := f.Flush(ctx); err != nil {
						errs <- err
						return
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	check := func() {
		for w := 0; w < writers; w++ {
			buf := make([]byte, 64)
			if err := ds.Read(ctx, Box([]uint64{uint64(w) * 4, 0}, []uint64{4, 8}), buf); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf, model[w]) {
				t.Fatalf("row %d is not the last version written", w)
			}
		}
	}
	check()
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	check()
}

// binaryTag writes the writer and round into the chunk's first two
// elements; tagOf reads them back.
func binaryTag(b []byte, w, r int) { b[0], b[1], b[2], b[3] = byte(w), 0xAB, byte(r), 0xCD }

func tagOf(b []byte) (w, r int) {
	if b[1] != 0xAB || b[3] != 0xCD {
		return -1, -1
	}
	return int(b[0]), int(b[2])
}

// TestRawChunkVsSetExtent: raw writes and reads of the last chunk row race
// shrinks and growths of the extent. Each raw call either runs wholly
// before a change (and succeeds) or after it (ErrOutOfRange when the row is
// outside the grid then); after a shrink and regrowth the row reads as fill
// unless a raw write landed after the growth. The file checks consistent at
// cleanup (tCreate).
func TestRawChunkVsSetExtent(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), &Options{CacheConfig: cache.Config{QuiescentBytes: 4 << 10}})
	ds, err := f.CreateDataset("d", DatasetSpec{Type: Uint16, Shape: []uint64{8, 4}, MaxShape: []uint64{Unlimited, 4},
		Chunk: []uint64{4, 4}, Filters: []Filter{Shuffle(), Deflate(1)}})
	if err != nil {
		t.Fatal(err)
	}
	data := rawData(16, 8)
	img, err := ds.EncodeChunk(data)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				var err error
				if g%2 == 0 {
					err = ds.WriteChunkRaw(ctx, []uint64{1, 0}, img)
				} else {
					var c RawChunk
					var ok bool
					c, ok, err = ds.ReadChunkRaw(ctx, []uint64{1, 0})
					if err == nil && ok && !bytes.Equal(c.Image, img.Image) {
						err = fmt.Errorf("raw read found another image")
					}
				}
				if err != nil && !errors.Is(err, ErrOutOfRange) {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 50; i++ {
			if err := ds.SetExtent(ctx, []uint64{uint64(4 + 4*(i%2)), 4}); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The extent ends at 8 rows (i = 49 is odd). Every stored version of
	// chunk row 1 is either the raw image or, after a shrink, fill.
	buf := make([]byte, 32)
	if err := ds.Read(ctx, Box([]uint64{4, 0}, []uint64{4, 4}), buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, data) && !allZero(buf) {
		t.Fatal("row 1 is neither the raw image nor fill")
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRawChunkChecked: the caller's check sees the decoded chunk, and its
// refusal stores nothing.
func TestRawChunkChecked(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	for _, fl := range [][]Filter{nil, {Shuffle(), Deflate(2)}} {
		ds, err := f.CreateDataset(fmt.Sprint("d", len(fl)), rawSpec(fl...))
		if err != nil {
			t.Fatal(err)
		}
		a, b := rawData(16, 1), rawData(16, 2)
		ra, _ := ds.EncodeChunk(a)
		rb, _ := ds.EncodeChunk(b)
		var seen []byte
		if err := ds.WriteChunkRawChecked(ctx, []uint64{0, 0}, ra, func(c []byte) error { seen = bytes.Clone(c); return nil }); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(seen, a) {
			t.Fatalf("%v: check saw %x, want the decoded chunk %x", fl, seen, a)
		}
		err = ds.WriteChunkRawChecked(ctx, []uint64{0, 0}, rb, func([]byte) error { return fmt.Errorf("checksum mismatch") })
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "checksum mismatch") {
			t.Fatalf("%v: refused check: %v", fl, err)
		}
		buf := make([]byte, 32)
		if err := ds.Read(ctx, Box([]uint64{0, 0}, []uint64{4, 4}), buf); err != nil || !bytes.Equal(buf, a) {
			t.Fatalf("%v: a refused write changed the chunk (%v)", fl, err)
		}
	}
}

// TestRawChunkShuffleOnly: a shuffle-only pipeline takes any image of the
// chunk's size (every such image decodes) and refuses other sizes and
// masks.
func TestRawChunkShuffleOnly(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	ds, err := f.CreateDataset("s", rawSpec(Shuffle()))
	if err != nil {
		t.Fatal(err)
	}
	a := rawData(16, 3)
	c, err := ds.EncodeChunk(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []RawChunk{{Image: c.Image[:31]}, {Image: append(bytes.Clone(c.Image), 0)}, {Image: c.Image, Mask: 1}} {
		if err := ds.WriteChunkRaw(ctx, []uint64{0, 0}, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("image of %d bytes, mask %d: %v", len(bad.Image), bad.Mask, err)
		}
	}
	if err := ds.WriteChunkRaw(ctx, []uint64{0, 0}, c); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	if err := ds.Read(ctx, Box([]uint64{0, 0}, []uint64{4, 4}), buf); err != nil || !bytes.Equal(buf, a) {
		t.Fatalf("shuffle-only raw write reads back wrong (%v)", err)
	}
}
