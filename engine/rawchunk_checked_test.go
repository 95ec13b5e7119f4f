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

// checkedSpec is a 2-D dataset whose extent leaves partial edge chunks.
func checkedSpec(filters ...Filter) DatasetSpec {
	return DatasetSpec{Type: Uint16, Shape: []uint64{10, 7}, MaxShape: []uint64{Unlimited, 7}, Chunk: []uint64{4, 4}, Filters: filters}
}

// checkedData is n uint16 elements, compressible but not constant.
func checkedData(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, 2*n)
	for i := 0; i < n; i++ {
		v := uint16(i/3) + uint16(rng.IntN(4))
		b[2*i], b[2*i+1] = byte(v), byte(v>>8)
	}
	return b
}

// TestRawChunkChecked: the caller's check sees the decoded chunk from the
// verifying decode, and its refusal stores nothing; the other refusals of
// WriteChunkRaw hold here too.
func TestRawChunkChecked(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), nil)
	for _, fl := range [][]Filter{nil, {Shuffle()}, {Shuffle(), Deflate(2)}, {Zstd(1), CRC32C()}} {
		ds, err := f.CreateDataset(ctx, fmt.Sprint(fl), checkedSpec(fl...))
		if err != nil {
			t.Fatal(err)
		}
		a, b := checkedData(16, 1), checkedData(16, 2)
		da, ma, err := ds.EncodeChunk(a)
		if err != nil {
			t.Fatal(err)
		}
		db, mb, _ := ds.EncodeChunk(b)
		var seen []byte
		if err := ds.WriteChunkRawChecked(ctx, []uint64{0, 0}, da, ma, func(c []byte) error { seen = bytes.Clone(c); return nil }); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(seen, a) {
			t.Fatalf("%v: check saw %x, want the decoded chunk %x", fl, seen, a)
		}
		err = ds.WriteChunkRawChecked(ctx, []uint64{0, 0}, db, mb, func([]byte) error { return errors.New("checksum mismatch") })
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "checksum mismatch") {
			t.Fatalf("%v: refused check: %v", fl, err)
		}
		for _, bad := range []struct {
			coords []uint64
			data   []byte
			mask   uint32
			want   error
		}{
			{[]uint64{0}, db, mb, ErrInvalid},
			{[]uint64{3, 0}, db, mb, ErrOutOfRange},
			{[]uint64{0, 0}, append(bytes.Clone(db), 1, 2, 3), mb, ErrInvalid},
			{[]uint64{0, 0}, db, mb | 1<<6, ErrInvalid},
			{[]uint64{0, 0}, make([]byte, 1<<20), 0, ErrInvalid},
		} {
			if err := ds.WriteChunkRawChecked(ctx, bad.coords, bad.data, bad.mask, nil); !errors.Is(err, bad.want) {
				t.Errorf("%v: coords %v, %d bytes, mask %#x: %v, want %v", fl, bad.coords, len(bad.data), bad.mask, err, bad.want)
			}
		}
		// An edge chunk whose padding is not the fill value.
		if err := ds.WriteChunkRawChecked(ctx, []uint64{2, 1}, db, mb, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: edge chunk with non-fill padding: %v", fl, err)
		}
		buf := make([]byte, 32)
		if err := ds.Read(ctx, Box([]uint64{0, 0}, []uint64{4, 4}), buf); err != nil || !bytes.Equal(buf, a) {
			t.Fatalf("%v: a refused write changed the chunk (%v)", fl, err)
		}
		got, err := ds.DecodeChunk(da, ma)
		if err != nil || !bytes.Equal(got, a) {
			t.Fatalf("%v: DecodeChunk: %v", fl, err)
		}
		if len(fl) > 0 {
			if _, err := ds.DecodeChunk(append(bytes.Clone(da), 9), ma); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%v: DecodeChunk of bad bytes: %v", fl, err)
			}
		}
		if _, _, err := ds.EncodeChunk(a[:5]); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: EncodeChunk of a short chunk: %v", fl, err)
		}
		if g := ds.ChunkGrid(); fmt.Sprint(g) != "[3 2]" || ds.ChunkBytes() != 32 {
			t.Errorf("grid %v, chunk bytes %d", g, ds.ChunkBytes())
		}
	}
	ro := f
	ro.readOnly = true
	defer func() { ro.readOnly = false }()
	ds, _ := f.OpenDataset(ctx, "[]", nil)
	defer ds.Close(ctx)
	if err := ds.WriteChunkRawChecked(ctx, []uint64{0, 0}, make([]byte, 32), 0, nil); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only: %v", err)
	}
}

// TestRawChunkVsSetExtent: raw writes and reads of the last chunk row race
// shrinks and growths of the extent. Each raw call either runs wholly
// before a change or after it (ErrOutOfRange when its row is outside the
// grid then). The file checks consistent at cleanup (tCreate).
func TestRawChunkVsSetExtent(t *testing.T) {
	ctx := context.Background()
	f := tCreate(t, vfd.NewMem(), &Options{CacheConfig: cache.Config{QuiescentBytes: 4 << 10}})
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint16, Shape: []uint64{8, 4}, MaxShape: []uint64{Unlimited, 4},
		Chunk: []uint64{4, 4}, Filters: []Filter{Shuffle(), Deflate(1)}})
	if err != nil {
		t.Fatal(err)
	}
	data := checkedData(16, 8)
	img, mask, err := ds.EncodeChunk(data)
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
				switch g {
				case 0:
					err = ds.WriteChunkRaw(ctx, []uint64{1, 0}, img, mask)
				case 1:
					err = ds.WriteChunkRawChecked(ctx, []uint64{1, 0}, img, mask, func([]byte) error { return nil })
				default:
					var got []byte
					got, _, err = ds.ReadChunkRaw(ctx, []uint64{1, 0})
					if err == nil && !bytes.Equal(got, img) {
						err = fmt.Errorf("raw read found another image")
					}
					if errors.Is(err, ErrNotFound) {
						err = nil
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
