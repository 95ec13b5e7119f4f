package engine

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine/internal/format"
)

// TestReadsVersion7File: testdata/v7.scc was written by scc at format
// version 7 (the program in testdata/v7.scc.go.txt), before sharded index
// entries carried their frames' checksums. Its sharded datasets (one
// unfiltered, one zstd) read as written, in whole and in part, and keep
// their 16-byte index entries when a later writer rewrites a chunk of
// them, while the superblock moves to the current version and a sharded
// dataset created then has entries with frame sums.
func TestReadsVersion7File(t *testing.T) {
	ctx := t.Context()
	path := oldVersionFixture(t, 7)
	want := func(name string) []byte {
		b := make([]byte, 8*8*2)
		for i := range 5 * 8 * 2 {
			b[i] = byte(i * 3)
		}
		for i := 5 * 8 * 2; i < len(b); i += 2 {
			b[i], b[i+1] = 7, 0
		}
		return b
	}
	verify := func(f *File, rewritten bool) {
		t.Helper()
		for _, name := range []string{"raw", "zstd"} {
			d, err := f.OpenDataset(ctx, name, nil)
			require.NoError(t, err)
			w := want(name)
			if rewritten {
				w[7*8*2] = 0x55
			}
			got := make([]byte, 8*8*2)
			require.NoError(t, d.Read(ctx, All(d.Shape()), got))
			assert.Equal(t, w, got, name)
			part := make([]byte, 2*2)
			require.NoError(t, d.Read(ctx, Box([]uint64{4, 3}, []uint64{2, 1}), part))
			assert.Equal(t, []byte{w[(4*8+3)*2], w[(4*8+3)*2+1], w[(5*8+3)*2], w[(5*8+3)*2+1]}, part, name)
			assert.Equal(t, []uint64{2, 4}, d.InnerChunk())
			if sh := d.s.shards(); assert.NotNil(t, sh) {
				assert.False(t, sh.codec.FrameSums, "%s keeps the 16-byte entries", name)
			}
			require.NoError(t, d.Close(ctx))
		}
		title, err := f.Attr("title")
		require.NoError(t, err)
		assert.Equal(t, "v7", title.String())
	}
	f, err := Open(ctx, path, nil)
	require.NoError(t, err)
	verify(f, false)
	for _, name := range []string{"raw", "zstd"} {
		d, err := f.OpenDataset(ctx, name, nil)
		require.NoError(t, err)
		require.NoError(t, d.Write(ctx, Box([]uint64{7, 0}, []uint64{1, 1}), []byte{0x55, 0}))
		require.NoError(t, d.Close(ctx))
	}
	// A sharded dataset created now has the entries with frame sums.
	nd, err := f.CreateDataset(ctx, "new", DatasetSpec{Type: Int16, Shape: []uint64{8, 8}, Chunk: []uint64{4, 8}, InnerChunk: []uint64{2, 4}})
	require.NoError(t, err)
	require.NoError(t, nd.Write(ctx, All(nd.Shape()), want("new")))
	require.NoError(t, nd.Close(ctx))
	require.NoError(t, f.Close(ctx))

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.EqualValues(t, format.Version, max(b[format.SlotA+4], b[format.SlotB+4]))
	_, err = Check(ctx, path, nil)
	require.NoError(t, err)
	f, err = Open(ctx, path, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer f.Close(ctx)
	verify(f, true)
	nd, err = f.OpenDataset(ctx, "new", nil)
	require.NoError(t, err)
	defer nd.Close(ctx)
	assert.True(t, nd.s.shards().codec.FrameSums)
	got := make([]byte, 8*8*2)
	require.NoError(t, nd.Read(ctx, All(nd.Shape()), got))
	assert.Equal(t, want("new"), got)
}
