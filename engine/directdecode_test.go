package engine

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// TestDirectDecodeWholeChunks: reads of whole zstd chunks, each into a
// buffer of its own, one pass over a dataset four times the cache's size.
// While the cache has room the chunks are loaded and kept; once keeping
// one would take the cache past its quiescent limit, the rest are decoded
// straight into the caller's buffer: they return the right bytes, are not
// made resident, and the pass evicts nothing and never takes the cache
// past its quiescent limit (a one-pass scan does not push it to the
// active limit). A second read of a kept chunk is a hit.
func TestDirectDecodeWholeChunks(t *testing.T) {
	defer verifyNoLeaks(t)
	ctx := context.Background()
	const n, rows, cols = 32, 256, 256 // 32 chunks of 128 KiB
	shape := []uint64{n, rows, cols}
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint16, Shape: shape, Chunk: []uint64{1, rows, cols}, Filters: []Filter{Shuffle(), Zstd(1)}})
	must(t, err)
	data := compressibleBytes(rand.New(rand.NewPCG(4, 4)), int(prod(shape))*2)
	must(t, ds.Write(ctx, All(shape), data))
	must(t, f.Close(ctx))

	const chunk = rows * cols * 2
	f = tOpen(t, mem, &Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: n / 4 * chunk, BypassBytes: 4 * chunk}})
	defer f.Close(ctx)
	ds, err = f.OpenDataset(ctx, "d", nil)
	must(t, err)
	c := f.Cache()
	before := c.Stats()
	buf := make([]byte, chunk)
	for k := uint64(0); k < n; k++ {
		chunksBefore := c.Stats().Chunks
		must(t, ds.Read(ctx, Box([]uint64{k, 0, 0}, []uint64{1, rows, cols}), buf))
		if !bytes.Equal(buf, data[k*chunk:(k+1)*chunk]) {
			t.Fatalf("chunk %d: read other bytes than were written", k)
		}
		st := c.Stats()
		if k == 0 && st.Chunks != chunksBefore+1 {
			t.Fatalf("chunk 0, read into a cache with room: %d chunks resident, want %d", st.Chunks, chunksBefore+1)
		}
		if st.ResidentBytes > st.QuiescentLimit {
			t.Fatalf("after chunk %d: %d bytes resident, over the quiescent limit %d", k, st.ResidentBytes, st.QuiescentLimit)
		}
	}
	st := c.Stats().Sub(before)
	if st.Evictions != 0 || st.Loads == 0 || st.Loads >= n {
		t.Fatalf("one pass of %d chunks: %d loads, %d evictions; want some loads, no evictions and the rest decoded directly", n, st.Loads, st.Evictions)
	}
	if peak := c.Stats().PeakResidentBytes; peak > c.Stats().QuiescentLimit {
		t.Fatalf("peak resident %d bytes, over the quiescent limit %d", peak, c.Stats().QuiescentLimit)
	}
	// The last chunk read was decoded directly, not kept; read again, it
	// is kept (a full cache takes in chunks read again, evicting others).
	direct := uint64(n - 1)
	key := Box([]uint64{direct, 0, 0}, []uint64{1, rows, cols})
	loads := c.Stats().Loads
	must(t, ds.Read(ctx, key, buf))
	if c.Stats().Loads != loads+1 || !bytes.Equal(buf, data[direct*chunk:(direct+1)*chunk]) {
		t.Fatalf("re-read of a directly decoded chunk: %d loads (want 1, the chunk kept), or other bytes", c.Stats().Loads-loads)
	}
	hits := c.Stats().Hits
	must(t, ds.Read(ctx, key, buf))
	if c.Stats().Hits != hits+1 || !bytes.Equal(buf, data[direct*chunk:(direct+1)*chunk]) {
		t.Fatal("a chunk kept on its re-read was not a hit the next time")
	}
	hits = c.Stats().Hits
	must(t, ds.Read(ctx, Box([]uint64{0, 0, 0}, []uint64{1, rows, cols}), buf))
	if c.Stats().Hits != hits+1 || !bytes.Equal(buf, data[:chunk]) {
		t.Fatal("a kept chunk's second read was not a hit with the right bytes")
	}
}

// TestDirectDecodeDamagedChunk: a damaged stored chunk decoded straight
// into the caller's buffer (a cache too small to keep it) is an
// ErrCorrupt naming it, not a panic, and leaves nothing in the cache.
func TestDirectDecodeDamagedChunk(t *testing.T) {
	defer verifyNoLeaks(t)
	ctx := context.Background()
	const rows, cols = 256, 256
	shape := []uint64{4, rows, cols}
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil, noCheck("a chunk's compressed bytes are overwritten to test the decode error"))
	ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint16, Shape: shape, Chunk: []uint64{1, rows, cols}, Filters: []Filter{Zstd(1)}})
	must(t, err)
	data := compressibleBytes(rand.New(rand.NewPCG(5, 5)), int(prod(shape))*2)
	must(t, ds.Write(ctx, All(shape), data))
	must(t, f.Flush(ctx))
	exts, err := ds.ChunkExtents(ctx)
	must(t, err)
	must(t, f.Close(ctx))
	x := exts[2]
	b := make([]byte, 1)
	_, err = mem.ReadAt(b, x.Off+x.Size/2)
	must(t, err)
	b[0] ^= 0x40
	_, err = mem.WriteAt(b, x.Off+x.Size/2)
	must(t, err)

	f = tOpen(t, mem, &Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: 64 << 10}}, noCheck("a chunk's compressed bytes are overwritten to test the decode error"))
	defer f.Close(ctx)
	ds, err = f.OpenDataset(ctx, "d", nil)
	must(t, err)
	buf := make([]byte, rows*cols*2)
	err = ds.Read(ctx, Box([]uint64{uint64(x.Coord[0]), 0, 0}, []uint64{1, rows, cols}), buf)
	if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrIO) {
		t.Fatalf("read of a damaged chunk: %v, want ErrCorrupt", err)
	}
	if st := f.Cache().Stats(); st.Chunks != 0 || st.Loads != 0 {
		t.Fatalf("after the damaged read: %d chunks, %d loads; want none (decoded directly)", st.Chunks, st.Loads)
	}
}
