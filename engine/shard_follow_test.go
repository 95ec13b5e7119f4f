package engine

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// TestShardFollowerReusedPlaceSameSizes: a read-only File that fell behind
// its writer reads a sharded chunk whose place the writer has reused for a
// newer version of the same chunk, of the same size (unfiltered: every
// version of a chunk has the same inner frame sizes, so the index's offsets,
// sizes and masks agree). The chunk's trailer covers the frames' contents,
// so the follower tells the versions apart: it refreshes and reads the
// newer version at the newer generation, never the newer values under the
// older generation. Whole-chunk reads (cached and direct) and reads of a
// few inner chunks (which read the index and those frames alone) all do.
func TestShardFollowerReusedPlaceSameSizes(t *testing.T) {
	ctx := context.Background()
	spec := DatasetSpec{Type: Uint16, Shape: []uint64{64, 64}, Chunk: []uint64{64, 64}, InnerChunk: []uint64{16, 16}}
	fill := func(v byte) []byte { return bytes.Repeat([]byte{v, 0}, 64*64) }
	reads := []struct {
		name   string
		bypass int64
		start  []uint64
		count  []uint64
	}{
		{"whole cached", -1, []uint64{0, 0}, []uint64{64, 64}},
		{"whole direct", 1, []uint64{0, 0}, []uint64{64, 64}},
		{"inner chunks", 1, []uint64{3, 20}, []uint64{10, 30}},
	}
	for _, rd := range reads {
		t.Run(rd.name, func(t *testing.T) {
			mem := vfd.NewMem()
			w := tCreate(t, mem, nil)
			ds, err := w.CreateDataset(ctx, "d", spec)
			require.NoError(t, err)
			require.NoError(t, ds.Write(ctx, All(spec.Shape), fill(1)))
			require.NoError(t, w.Flush(ctx))
			old, err := ds.ChunkExtents(ctx)
			require.NoError(t, err)
			require.Len(t, old, 1)

			r := tOpen(t, mem, &Options{ReadOnly: true, CacheConfig: cache.Config{BypassBytes: rd.bypass}})
			gen := r.Generation()
			rds, err := r.OpenDataset(ctx, "d", nil)
			require.NoError(t, err)

			// The writer commits a newer version elsewhere (copy-on-write),
			// then reuses the old place for it: the follower's chunk index
			// still names the old place and the old trailer.
			require.NoError(t, ds.Write(ctx, All(spec.Shape), fill(2)))
			require.NoError(t, w.Flush(ctx))
			cur, err := ds.ChunkExtents(ctx)
			require.NoError(t, err)
			require.Len(t, cur, 1)
			require.Equal(t, old[0].Size, cur[0].Size, "unfiltered versions have the same size")
			require.NotEqual(t, old[0].Off, cur[0].Off)
			img := make([]byte, cur[0].Size)
			_, err = mem.ReadAt(img, cur[0].Off)
			require.NoError(t, err)
			_, err = mem.WriteAt(img, old[0].Off)
			require.NoError(t, err)

			n := rd.count[0] * rd.count[1]
			got := make([]byte, 2*n)
			err = rds.Read(ctx, Box(rd.start, rd.count), got)
			require.NoError(t, err)
			if bytes.Equal(got, fill(2)[:2*n]) {
				assert.Greater(t, r.Generation(), gen, "the newer version's values under the older generation")
			} else {
				assert.Equal(t, fill(1)[:2*n], got, "neither version's values")
			}
		})
	}
}

// TestShardFollowerAllocatorReuse: the same, with the place reused by the
// writer's own allocator: an unfiltered sharded chunk is rewritten, a
// follower opened at each generation, until a newer version lands at the
// address an earlier follower's generation names (same size, same index
// but for the frames' checksums). That follower's read refreshes and
// returns the newest version at the newest generation.
func TestShardFollowerAllocatorReuse(t *testing.T) {
	ctx := context.Background()
	// Two chunks: the followers read the second, which the writer leaves
	// alone, so that they hold the chunk index of their generation (a
	// follower that looked the first chunk up in a reused index block
	// would refresh there, before it read the chunk).
	spec := DatasetSpec{Type: Uint16, Shape: []uint64{64, 128}, Chunk: []uint64{64, 64}, InnerChunk: []uint64{16, 16}}
	fill := func(v byte) []byte { return bytes.Repeat([]byte{v, 0}, 64*64) }
	first, second := []uint64{0, 0}, []uint64{0, 64}
	type follower struct {
		f   *File
		ds  *Dataset
		gen uint64
		v   byte
	}
	for _, part := range []bool{false, true} {
		mem := vfd.NewMem()
		w := tCreate(t, mem, nil)
		ds, err := w.CreateDataset(ctx, "d", spec)
		require.NoError(t, err)
		bypass := int64(-1)
		if part {
			bypass = 1
		}
		require.NoError(t, ds.Write(ctx, Box(second, []uint64{64, 64}), fill(0xee)))
		at := map[int64]follower{}
		var stale follower
		v := byte(0)
		for range 12 {
			v++
			require.NoError(t, ds.Write(ctx, Box(first, []uint64{64, 64}), fill(v)))
			require.NoError(t, w.Flush(ctx))
			now, err := ds.ChunkExtents(ctx)
			require.NoError(t, err)
			require.Len(t, now, 2)
			if fo, ok := at[now[0].Off]; ok {
				stale = fo
				break
			}
			r := tOpen(t, mem, &Options{ReadOnly: true, CacheConfig: cache.Config{BypassBytes: bypass}})
			rds, err := r.OpenDataset(ctx, "d", nil)
			require.NoError(t, err)
			other := make([]byte, 64*64*2)
			require.NoError(t, rds.Read(ctx, Box(second, []uint64{64, 64}), other))
			require.Equal(t, fill(0xee), other)
			at[now[0].Off] = follower{r, rds, r.Generation(), v}
		}
		require.NotNil(t, stale.f, "the allocator never reused a follower's place")
		require.Less(t, stale.v, v)

		start, count := first, []uint64{64, 64}
		if part {
			start, count = []uint64{5, 17}, []uint64{3, 9}
		}
		n := count[0] * count[1]
		got := make([]byte, 2*n)
		require.NoError(t, stale.ds.Read(ctx, Box(start, count), got))
		if bytes.Equal(got, fill(v)[:2*n]) {
			assert.Greater(t, stale.f.Generation(), stale.gen, "part %v: the newer version's values under the older generation", part)
		} else {
			assert.Equal(t, fill(stale.v)[:2*n], got, "part %v: neither version's values", part)
		}
		for _, fo := range at {
			require.NoError(t, fo.ds.Close(ctx))
		}
	}
}
