package zarr

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// TestExportVirtualChunkedAsSources: a virtual dataset exports with its
// sources' chunk shape (one source in its own file, one in another), not
// one element per chunk, and zarr-python (v2) and zarrita (v3) read the
// values scc reads.
func TestExportVirtualChunkedAsSources(t *testing.T) {
	dir := t.TempDir()
	ext := testfile.Create(t, filepath.Join(dir, "ext.scc"), nil)
	f := testfile.Create(t, filepath.Join(dir, "v.scc"), nil)
	defer f.Close(context.Background())
	vals := func(base int) []byte {
		var b []byte
		for i := range 32 * 4 {
			b = binary.LittleEndian.AppendUint16(b, uint16(base+i))
		}
		return b
	}
	spec := engine.DatasetSpec{Type: engine.Uint16, Shape: []uint64{32, 4}, Chunk: []uint64{16, 4}, Filters: []engine.Filter{engine.Zstd(1)}}
	s0, err := f.CreateDataset(context.Background(), "s0", spec)
	must(t, err)
	must(t, s0.Write(bg, engine.All([]uint64{32, 4}), vals(0)))
	s1, err := ext.CreateDataset(context.Background(), "s1", spec)
	must(t, err)
	must(t, s1.Write(bg, engine.All([]uint64{32, 4}), vals(1000)))
	must(t, ext.Close(context.Background()))
	_, err = f.CreateVirtualDataset(bg, "v", engine.VirtualSpec{Type: engine.Uint16, Shape: []uint64{64, 4}, Mappings: []engine.VirtualMapping{
		{Virtual: engine.Box([]uint64{0, 0}, []uint64{32, 4}), Dataset: "s0", Source: engine.All([]uint64{32, 4})},
		{Virtual: engine.Box([]uint64{32, 0}, []uint64{32, 4}), File: "ext.scc", Dataset: "s1", Source: engine.All([]uint64{32, 4})},
	}})
	must(t, err)
	must(t, f.Flush(bg))
	want := append(vals(0), vals(1000)...)
	zarrPython(t)
	node := zarrita(t)
	for _, v := range []int{2, 3} {
		store := filepath.Join(dir, fmt.Sprintf("v%d.zarr", v))
		rep, err := Export(bg, f, store, Options{Version: v})
		must(t, err)
		doc, key := ".zarray", "chunks"
		if v == 3 {
			doc = "zarr.json"
		}
		b, err := os.ReadFile(filepath.Join(store, "v", doc))
		must(t, err)
		var m map[string]any
		must(t, json.Unmarshal(b, &m))
		got := m[key]
		if v == 3 {
			got = m["chunk_grid"].(map[string]any)["configuration"].(map[string]any)["chunk_shape"]
		}
		if fmt.Sprint(got) != "[16 4]" {
			t.Fatalf("v%d: virtual dataset chunks %v, want [16 4] (report %+v)", v, got, rep.Datasets)
		}
		n := 0
		must(t, filepath.WalkDir(filepath.Join(store, "v"), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && d.Name() != doc {
				n++
			}
			return err
		}))
		if n != 4 {
			t.Fatalf("v%d: %d chunk files, want 4", v, n)
		}
		out := t.TempDir()
		cmd := exec.Command(python, filepath.Join(testdata(t), "zarr2.py"), "read", store, out, "v")
		if v == 3 {
			cmd = exec.Command("node", filepath.Join(node, "zarr3.mjs"), "read", store, out, "v")
		}
		if b, err := cmd.Output(); err != nil {
			t.Fatalf("v%d read: %v: %s %s", v, err, b, stderr(err))
		}
		read, err := os.ReadFile(filepath.Join(out, "0.bin"))
		must(t, err)
		if !bytes.Equal(read, want) {
			t.Fatalf("v%d: the reader's values differ from scc's", v)
		}
	}
}

// TestVirtualChunkFallback: sources that say nothing (missing) give
// chunks of about virtualTargetBytes, whole along the last dimensions.
func TestVirtualChunkFallback(t *testing.T) {
	f := testfile.Create(t, filepath.Join(t.TempDir(), "v.scc"), nil)
	defer f.Close(context.Background())
	ds, err := f.CreateVirtualDataset(bg, "v", engine.VirtualSpec{Type: engine.Float64, Shape: []uint64{1 << 20, 64}, Mappings: []engine.VirtualMapping{
		{Virtual: engine.Box([]uint64{0, 0}, []uint64{1 << 20, 64}), File: "missing.scc", Dataset: "x", Source: engine.All([]uint64{1 << 20, 64})},
	}})
	must(t, err)
	if got := virtualChunk(bg, f, ds); fmt.Sprint(got) != "[2048 64]" {
		t.Fatalf("chunk %v, want [2048 64]", got)
	}
}
