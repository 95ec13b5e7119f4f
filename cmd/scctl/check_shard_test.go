package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// makeShardedFile writes a file with one sharded dataset (two chunks of
// four inner chunks, zstd) and returns its path and the first stored
// chunk's address and size.
func makeShardedFile(t *testing.T) (string, engine.StoredChunk) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sharded.scc")
	f := testfile.Create(t, path, nil, testfile.NoCheck("the test damages bytes of the file to see check report it"))
	ds, err := f.CreateDataset(ctx, "s", engine.DatasetSpec{
		Type: engine.Uint16, Shape: []uint64{32, 16}, Chunk: []uint64{16, 16}, InnerChunk: []uint64{8, 8},
		Filters: []engine.Filter{engine.Zstd(1)},
	})
	require.NoError(t, err)
	vals := make([]uint16, 32*16)
	for i := range vals {
		vals[i] = uint16(i * 7)
	}
	require.NoError(t, engine.WriteSlice(ctx, ds, engine.All([]uint64{32, 16}), vals))
	require.NoError(t, f.Flush(ctx))
	var first engine.StoredChunk
	for sc, err := range ds.Chunks(ctx) {
		require.NoError(t, err)
		first = sc
		break
	}
	require.NoError(t, f.Close(ctx))
	return path, first
}

// TestCheckSharded: check verifies every inner chunk of a sharded chunk
// and its index: a flipped byte in the first inner chunk's frame and one
// in the index are each a reported problem naming the chunk.
func TestCheckSharded(t *testing.T) {
	path, sc := makeShardedFile(t)
	code, out, stderr := runCmd(t, "check", path)
	require.Equal(t, 0, code, "%s%s", out, stderr)
	orig, err := os.ReadFile(path)
	require.NoError(t, err)
	// The portable size is the stored one less the index's trailer and
	// the 4-byte frame checksum of each of the 4 index entries (the
	// portable form's entries are 16 bytes, the stored ones 20): the
	// index ends 4 bytes before the chunk's end.
	end := int(sc.Addr) + int(sc.Size) + 4*4 + 4
	for name, off := range map[string]int{
		"inner chunk": int(sc.Addr) + 5,
		"index":       end - 4 - 9,
	} {
		b := append([]byte(nil), orig...)
		b[off] ^= 0xff
		require.NoError(t, os.WriteFile(path, b, 0o644))
		code, out, _ := runCmd(t, "check", path)
		assert.Equal(t, 1, code, "%s: %s", name, out)
		t.Logf("%s: %s", name, out)
		assert.Contains(t, out, "PROBLEM:", name)
		assert.Contains(t, out, `"s"`, name)
		if name == "inner chunk" {
			assert.Contains(t, out, "inner chunk [0 0]", name)
		} else {
			assert.Contains(t, out, "sharded chunk: index", name)
		}
	}
}

// TestDumpSharded: dump shows the chunk and inner chunk shapes of a
// sharded dataset, in text and JSON.
func TestDumpSharded(t *testing.T) {
	path, _ := makeShardedFile(t)
	code, out, stderr := runCmd(t, "dump", "--dataset", "s", "--count", "1,2", path)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "STORAGE_LAYOUT { CHUNKED ( 16, 16 ) SHARDED ( 8, 8 ) }")
	code, out, stderr = runCmd(t, "dump", "--json", "--dataset", "s", "--count", "1,2", path)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `"chunk":[16,16],"inner_chunk":[8,8]`)
}

// TestIngestInnerChunk: ingest --inner-chunk stores every frame as a
// sharded chunk of those inner chunks, which readers verify and check
// passes; an inner chunk that does not divide the frame is a usage error.
func TestIngestInnerChunk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sharded.scc")
	code, out, stderr := runCmd(t, "ingest", "--quiet", "--datasets", "2", "--writers", "2", "--readers", "2",
		"--frames", "6", "--frame", "16x8", "--inner-chunk", "4x4", "--filter", "zstd1", "--file", path)
	require.Equal(t, 0, code, "%s%s", out, stderr)
	assert.Contains(t, out, "12 frames, every one checked")
	code, out, _ = runCmd(t, "dump", "--dataset", "frames000", "--count", "1,1,1", path)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "SHARDED ( 1, 4, 4 )")
	code, out, _ = runCmd(t, "check", path)
	assert.Equal(t, 0, code, out)
	for _, bad := range []string{"3x4", "4", "0x4", "16x16"} {
		code, _, stderr := runCmd(t, "ingest", "--frame", "16x8", "--inner-chunk", bad)
		assert.Equal(t, 2, code, "%s: %s", bad, stderr)
	}
}
