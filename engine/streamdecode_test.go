package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/filter"
)

// streamArray writes a 2048×4096 uint16 zstd array of 4 MiB chunks
// (1024×2048) and returns its path and contents.
func streamArray(t *testing.T, filters []Filter) (string, []byte) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.scc")
	f, err := Create(ctx, path, &Options{NoSync: true})
	require.NoError(t, err)
	d, err := f.CreateDataset(ctx, "a", DatasetSpec{Type: Uint16, Shape: []uint64{2048, 4096}, Chunk: []uint64{1024, 2048}, Filters: filters})
	require.NoError(t, err)
	all := make([]byte, 2*2048*4096)
	for i := range 2048 * 4096 {
		y, x := i/4096, i%4096
		binary.LittleEndian.PutUint16(all[2*i:], uint16(x+y*y/32))
	}
	require.NoError(t, d.Write(ctx, Box([]uint64{0, 0}, []uint64{2048, 4096}), all))
	require.NoError(t, f.Close(ctx))
	return path, all
}

// A one-call read of a zstd array whose chunks are large and not kept
// (AdmitOnReread) decodes each chunk piece by piece into the reader's
// buffer (DecodeScatter): the whole array, and boxes that cut chunks,
// several in one chunk, read back exactly; a pipeline that does not stream
// (shuffle before zstd) reads the same through whole-chunk decodes.
func TestTransientReadStreams(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		filters []Filter
		streams bool
	}{{"zstd", []Filter{Zstd(3)}, filter.ZstdCodec == "libzstd"}, {"shuffle-zstd", []Filter{Shuffle(), Zstd(3)}, false}} {
		t.Run(c.name, func(t *testing.T) {
			path, all := streamArray(t, c.filters)
			// read reads a box through a new cache, so that no chunk was
			// read before (AdmitOnReread keeps chunks read again), and
			// reports how many chunks streamed.
			read := func(o, n []uint64) ([]byte, int64) {
				cc, err := cache.New(cache.Config{AdmitOnReread: true})
				require.NoError(t, err)
				defer cc.Close()
				f, err := Open(ctx, path, &Options{Cache: cc, ReadOnly: true})
				require.NoError(t, err)
				defer f.Close(ctx)
				d, err := f.OpenDataset(ctx, "a", nil)
				require.NoError(t, err)
				before := streamedDecodes.Load()
				buf := make([]byte, 2*n[0]*n[1])
				require.NoError(t, d.Read(ctx, Box(o, n), buf))
				return buf, streamedDecodes.Load() - before
			}
			want := int64(0)
			if c.streams {
				want = 4
			}
			got, streamed := read([]uint64{0, 0}, []uint64{2048, 4096})
			assert.Equal(t, all, got)
			assert.Equal(t, want, streamed, "chunks streamed by the whole-array read")
			// A box across all four chunks, from odd corners.
			o, n := []uint64{517, 1999}, []uint64{1100, 2090}
			box, streamed := read(o, n)
			assert.Equal(t, want, streamed, "chunks streamed by the box read")
			for y := range n[0] {
				row := 2 * ((o[0]+y)*4096 + o[1])
				require.Equal(t, all[row:row+2*n[1]], box[2*y*n[1]:2*(y+1)*n[1]], "row %d", y)
			}
		})
	}
}

// A damaged chunk read through a streamed decode fails with ErrCorrupt.
func TestTransientReadStreamsDamaged(t *testing.T) {
	if filter.ZstdCodec != "libzstd" {
		t.Skip("streams with libzstd only")
	}
	ctx := context.Background()
	path, _ := streamArray(t, []Filter{Zstd(3)})
	f, err := Open(ctx, path, &Options{ReadOnly: true})
	require.NoError(t, err)
	d, err := f.OpenDataset(ctx, "a", nil)
	require.NoError(t, err)
	ext, err := d.ChunkExtents(ctx)
	require.NoError(t, err)
	require.NoError(t, f.Close(ctx))
	fh, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = fh.WriteAt([]byte{0xff, 0x00, 0xff}, ext[1].Off+ext[1].Size/2)
	require.NoError(t, err)
	require.NoError(t, fh.Close())

	cc, err := cache.New(cache.Config{AdmitOnReread: true})
	require.NoError(t, err)
	defer cc.Close()
	f, err = Open(ctx, path, &Options{Cache: cc, ReadOnly: true})
	require.NoError(t, err)
	defer f.Close(ctx)
	d, err = f.OpenDataset(ctx, "a", nil)
	require.NoError(t, err)
	err = d.Read(ctx, Box([]uint64{0, 0}, []uint64{2048, 4096}), make([]byte, 2*2048*4096))
	assert.True(t, errors.Is(err, ErrCorrupt), "%v", err)
}

// A transient read of chunks the layout streams reserves what a streamed
// decode holds (the decoder's window and piece buffer), not a chunk per
// decode at once: the whole-array read of four 4 MiB zstd chunks (2 MiB
// windows) on three decoders never charges the cache two chunks' worth.
func TestTransientStreamReservesWindow(t *testing.T) {
	if filter.ZstdCodec != "libzstd" {
		t.Skip("zstd does not stream with this codec")
	}
	ctx := context.Background()
	path, all := streamArray(t, []Filter{Zstd(3)})
	cc, err := cache.New(cache.Config{AdmitOnReread: true, Workers: 2})
	require.NoError(t, err)
	defer cc.Close()
	f, err := Open(ctx, path, &Options{Cache: cc, ReadOnly: true})
	require.NoError(t, err)
	defer f.Close(ctx)
	d, err := f.OpenDataset(ctx, "a", nil)
	require.NoError(t, err)
	before := streamedDecodes.Load()
	buf := make([]byte, len(all))
	require.NoError(t, d.Read(ctx, Box([]uint64{0, 0}, []uint64{2048, 4096}), buf))
	require.Equal(t, int64(4), streamedDecodes.Load()-before, "every chunk streamed")
	assert.Equal(t, all, buf)
	const chunk = 4 << 20
	assert.Less(t, cc.Stats().PeakChunkBytes, int64(2*chunk))
}
