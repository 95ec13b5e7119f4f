package engine

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// Reads of whole unfiltered chunks that are not resident go straight into
// the caller's buffer (cache/direct.go): nothing is loaded or made
// resident; partial reads still go through the cache; a resident dirty copy
// wins over the stored one; a damaged stored chunk fails with ErrCorrupt;
// chunks under directMin stay on the cached path.
func TestDirectReadWholeUnfilteredChunks(t *testing.T) {
	defer verifyNoLeaks(t)
	ctx := context.Background()
	const rows, h, w = 8, 64, 512 // uint16 frames of 64 KiB (directMin), one per chunk
	frame := h * w * 2
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint16, Shape: []uint64{rows, h, w}, Chunk: []uint64{1, h, w}})
	must(t, err)
	want := make([]byte, rows*frame)
	for i := range want {
		want[i] = byte(i*7 + i/frame)
	}
	must(t, ds.Write(ctx, All([]uint64{rows, h, w}), want))
	must(t, f.Close(ctx))

	open := func(drv vfd.Driver) (*File, *Dataset) {
		f, err := Open(ctx, "", &Options{Driver: drv, CacheConfig: cache.Config{QuiescentBytes: 1 << 20}})
		must(t, err)
		ds, err := f.OpenDataset(ctx, "d", nil)
		must(t, err)
		return f, ds
	}
	f, ds = open(mem)
	c := f.Cache()
	got := make([]byte, rows*frame)
	must(t, ds.Read(ctx, All([]uint64{rows, h, w}), got))
	if !bytes.Equal(got, want) {
		t.Fatal("direct read: wrong bytes")
	}
	if st := c.Stats(); st.Loads != 0 || st.Chunks != 0 || st.VectorReads == 0 {
		t.Fatalf("whole-chunk read: %d loads, %d chunks resident, %d vector reads; want 0, 0, >0", st.Loads, st.Chunks, st.VectorReads)
	}
	// Three frames out of the middle: contiguous in the buffer too.
	part := make([]byte, 3*frame)
	must(t, ds.Read(ctx, Box([]uint64{2, 0, 0}, []uint64{3, h, w}), part))
	if !bytes.Equal(part, want[2*frame:5*frame]) || c.Stats().Loads != 0 {
		t.Fatalf("frames 2..4: equal %v, %d loads", bytes.Equal(part, want[2*frame:5*frame]), c.Stats().Loads)
	}
	// Half a frame is not a whole chunk: loaded through the cache.
	half := make([]byte, frame/2)
	must(t, ds.Read(ctx, Box([]uint64{1, 0, 0}, []uint64{1, h / 2, w}), half))
	if !bytes.Equal(half, want[frame:frame+frame/2]) || c.Stats().Loads != 1 {
		t.Fatalf("half frame: equal %v, %d loads; want 1", bytes.Equal(half, want[frame:frame+frame/2]), c.Stats().Loads)
	}
	must(t, f.Close(ctx))

	// A dirty resident copy wins over the stored one.
	f, err = Open(ctx, "", &Options{Driver: mem})
	must(t, err)
	ds, err = f.OpenDataset(ctx, "d", nil)
	must(t, err)
	newer := bytes.Repeat([]byte{0x5A}, frame)
	must(t, ds.Write(ctx, Box([]uint64{3, 0, 0}, []uint64{1, h, w}), newer))
	must(t, ds.Read(ctx, All([]uint64{rows, h, w}), got))
	exp := append(append(append([]byte(nil), want[:3*frame]...), newer...), want[4*frame:]...)
	if !bytes.Equal(got, exp) {
		t.Fatal("read after a write: the dirty copy did not win")
	}
	must(t, f.Close(ctx))

	// Damage one stored frame: the direct read reports ErrCorrupt.
	img := mem.Bytes()
	k := bytes.Index(img, want[5*frame:6*frame])
	if k < 0 {
		t.Fatal("frame 5 not found in the file")
	}
	img[k+100] ^= 0xFF
	f, ds = open(vfd.NewMemFrom(img))
	err = ds.Read(ctx, Box([]uint64{5, 0, 0}, []uint64{1, h, w}), make([]byte, frame))
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged frame read directly: %v, want ErrCorrupt", err)
	}
	if st := f.Cache().Stats(); st.Loads != 0 {
		t.Fatalf("damaged frame: %d loads; the read should have gone directly", st.Loads)
	}
	must(t, f.Close(ctx))

	// A small chunk (under directMin) is loaded and kept.
	mem = vfd.NewMem()
	f = tCreate(t, mem, nil)
	small, err := f.CreateDataset(ctx, "s", DatasetSpec{Type: Uint8, Shape: []uint64{4, 256}, Chunk: []uint64{1, 256}})
	must(t, err)
	must(t, small.Write(ctx, All([]uint64{4, 256}), make([]byte, 1024)))
	must(t, f.Close(ctx))
	f, err = Open(ctx, "", &Options{Driver: mem})
	must(t, err)
	small, err = f.OpenDataset(ctx, "s", nil)
	must(t, err)
	must(t, small.Read(ctx, All([]uint64{4, 256}), make([]byte, 1024)))
	if st := f.Cache().Stats(); st.Loads != 4 || st.Chunks != 4 {
		t.Fatalf("small chunks: %d loads, %d resident; want 4 and 4 (cached path)", st.Loads, st.Chunks)
	}
	must(t, f.Close(ctx))
}
