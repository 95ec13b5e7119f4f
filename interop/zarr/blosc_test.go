package zarr

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// bloscChunks encodes each chunk of the int32 array 0..n-1 (chunks of
// chunk elements, the last one padded with zeros) with numcodecs' Blosc,
// the library zarr-python writes blosc chunks with.
func bloscChunks(t *testing.T, n, chunk, shuffle int, cname string) [][]byte {
	t.Helper()
	zarrPython(t)
	out := t.TempDir()
	script := fmt.Sprintf(`
import numpy as np, sys
from numcodecs import Blosc
c = Blosc(cname=%q, clevel=5, shuffle=%d)
a = np.zeros(%d, dtype="<i4"); a[:%d] = np.arange(%d)
for i in range(0, len(a), %d):
    open(sys.argv[1] + "/" + str(i // %d), "wb").write(c.encode(a[i:i+%d]))
`, cname, shuffle, (n+chunk-1)/chunk*chunk, n, n, chunk, chunk, chunk)
	cmd := exec.Command(python, "-c", script, out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("numcodecs: %v: %s", err, b)
	}
	var chunks [][]byte
	for i := 0; i < (n+chunk-1)/chunk; i++ {
		b, err := os.ReadFile(filepath.Join(out, fmt.Sprint(i)))
		must(t, err)
		chunks = append(chunks, b)
	}
	return chunks
}

// TestImportV3BloscShuffleNames: the v3 blosc codec names its shuffle
// ("noshuffle", "shuffle", "bitshuffle"), numcodecs (v2) numbers it; both
// import, bit-shuffled frames included, with the values zarrita reads.
func TestImportV3BloscShuffleNames(t *testing.T) {
	const n, chunk = 1000, 256
	want := make([]byte, 0, 4*n)
	for i := range n {
		want = binary.LittleEndian.AppendUint32(want, uint32(i))
	}
	root := t.TempDir()
	v3 := filepath.Join(root, "v3.zarr")
	v2 := filepath.Join(root, "v2.zarr")
	writeFile(t, filepath.Join(v3, "zarr.json"), `{"zarr_format":3,"node_type":"group","attributes":{}}`)
	writeFile(t, filepath.Join(v2, ".zgroup"), `{"zarr_format":2}`)
	names := []string{"noshuffle", "shuffle", "bitshuffle"}
	for code, name := range names {
		chunks := bloscChunks(t, n, chunk, code, "lz4")
		meta, err := json.Marshal(map[string]any{
			"zarr_format": 3, "node_type": "array", "shape": []int{n}, "data_type": "int32",
			"chunk_grid":         map[string]any{"name": "regular", "configuration": map[string]any{"chunk_shape": []int{chunk}}},
			"chunk_key_encoding": map[string]any{"name": "default", "configuration": map[string]any{"separator": "/"}},
			"fill_value":         0, "attributes": map[string]any{},
			"codecs": []any{
				map[string]any{"name": "bytes", "configuration": map[string]any{"endian": "little"}},
				map[string]any{"name": "blosc", "configuration": map[string]any{"cname": "lz4", "clevel": 5, "shuffle": name, "typesize": 4, "blocksize": 0}},
			},
		})
		must(t, err)
		writeFile(t, filepath.Join(v3, name, "zarr.json"), string(meta))
		writeFile(t, filepath.Join(v2, name, ".zarray"), fmt.Sprintf(`{"zarr_format":2,"shape":[%d],"chunks":[%d],"dtype":"<i4","fill_value":0,"order":"C","filters":null,"compressor":{"id":"blosc","cname":"lz4","clevel":5,"shuffle":%d,"blocksize":0}}`, n, chunk, code))
		for i, c := range chunks {
			writeFile(t, filepath.Join(v3, name, "c", fmt.Sprint(i)), string(c))
			writeFile(t, filepath.Join(v2, name, fmt.Sprint(i)), string(c))
		}
	}
	// zarrita reads the v3 store as written here.
	node := zarrita(t)
	out := t.TempDir()
	if b, err := exec.Command("node", append([]string{filepath.Join(node, "zarr3.mjs"), "read", v3, out}, names...)...).Output(); err != nil {
		t.Fatalf("zarrita: %v: %s %s", err, b, stderr(err))
	}
	for i, name := range names {
		got, err := os.ReadFile(filepath.Join(out, fmt.Sprint(i)+".bin"))
		must(t, err)
		if !bytes.Equal(got, want) {
			t.Fatalf("zarrita reads %s differently", name)
		}
	}
	for _, store := range []string{v3, v2} {
		f := testfile.Create(t, filepath.Join(t.TempDir(), "out.scc"), nil)
		rep, err := Import(bg, store, f, Options{})
		if err != nil || len(rep.Skipped) != 0 {
			t.Fatalf("import %s: %v (report %+v)", store, err, rep)
		}
		for _, name := range names {
			ds, err := f.OpenDataset(context.Background(), name, nil)
			must(t, err)
			if ds.Type() != engine.Int32 || !bytes.Equal(readAll(t, ds), want) {
				t.Fatalf("%s %s: %v values differ", store, name, ds.Type())
			}
		}
		must(t, f.Close(context.Background()))
	}
}

// TestBloscShuffleRefused: a shuffle that is neither a v3 name nor a
// numcodecs number is corrupt metadata, naming the key.
func TestBloscShuffleRefused(t *testing.T) {
	for _, v := range []any{"byteshuffle", json.Number("3"), json.Number("1.5"), true} {
		_, err := codecFrom("blosc", map[string]any{"cname": "lz4", "shuffle": v}, 4)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `"shuffle"`) {
			t.Fatalf("shuffle %v: %v", v, err)
		}
	}
}
