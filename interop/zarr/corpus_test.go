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

// TestImportCorpus imports a corpus zarr-python writes at test time (C and
// Fortran order; zlib, zstd, lz4, gzip, blosc, none; shuffle; fill values
// and unwritten chunks; nested groups; big-endian; types scc does not
// hold) in one Import, and compares every imported array element by
// element with zarr-python's own reading. Arrays scc cannot hold must be
// skipped with a reason naming what they use, and nothing else.
func TestImportCorpus(t *testing.T) {
	zarrPython(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "corpus.zarr")
	out, err := exec.Command(python, filepath.Join(testdata(t), "corpus.py"), store, dir).Output()
	if err != nil {
		t.Fatalf("corpus.py: %v: %s", err, stderr(err))
	}
	var arrays []struct {
		Path, Dtype, Order, Compressor, Dump string
		Filters                              []string
	}
	must(t, json.Unmarshal(out, &arrays))
	f := testfile.Create(t, filepath.Join(dir, "corpus.scc"), nil)
	defer f.Close(context.Background())
	rep, err := Import(context.Background(), store, f, Options{})
	must(t, err)
	skipped := map[string]string{}
	for _, s := range rep.Skipped {
		skipped[s.Name] = s.Reason
	}
	// Why each kind of array is refused (blosc only when the decoder is unlinked).
	refusal := func(path string) string {
		switch {
		case strings.Contains(path, "/blosc/") && bloscDecode == nil:
			return "blosc"
		}
		return ""
	}
	imported, refused, failed := 0, 0, 0
	for _, a := range arrays {
		if want := refusal(a.Path); want != "" {
			if why, ok := skipped[a.Path]; ok && strings.Contains(why, want) {
				refused++
				t.Logf("refused %s: %s", a.Path, why)
			} else {
				failed++
				t.Errorf("%s: skipped %v (%q), want refused for %s", a.Path, ok, why, want)
			}
			continue
		}
		ds, err := f.OpenDataset(context.Background(), a.Path, nil)
		if err != nil {
			failed++
			t.Errorf("%s (%s, order %s, %s %v): not imported: %v (skipped: %q)", a.Path, a.Dtype, a.Order, a.Compressor, a.Filters, err, skipped[a.Path])
			continue
		}
		want, err := os.ReadFile(a.Dump)
		must(t, err)
		var got []byte
		if ds.Layout() == engine.Vlen {
			got = utf32Of(t, ds, len(want))
		} else {
			got = readAll(t, ds)
		}
		if !bytes.Equal(got, want) {
			failed++
			t.Errorf("%s (%s, order %s, %s %v): elements differ from zarr-python's", a.Path, a.Dtype, a.Order, a.Compressor, a.Filters)
		} else {
			imported++
		}
		ds.Close(context.Background())
	}
	t.Logf("corpus of %d arrays: %d imported equal to zarr-python's reading, %d refused with a reason, %d failed", len(arrays), imported, refused, failed)
	if len(rep.Skipped) != refused {
		t.Errorf("%d arrays skipped, %d expected to be: %+v", len(rep.Skipped), refused, rep.Skipped)
	}
}

// TestZarrPythonReadsSmallZstdAndUnicode: zarr-python 2 reads the chunks
// the export re-encodes with zstd (chunks under 256 bytes, which scc
// stored uncompressed) and non-ASCII attributes in .zattrs.
func TestZarrPythonReadsSmallZstdAndUnicode(t *testing.T) {
	zarrPython(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src.scc")
	f := testfile.Create(t, src, nil)
	const text = "Grüße, 温度 \U0001F600"
	must(t, f.SetAttr(bg, "title", engine.StringAttr(text)))
	ds, err := f.CreateDataset(context.Background(), "small", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{100}, Chunk: []uint64{40},
		Filters: []engine.Filter{engine.Zstd(1)}})
	must(t, err)
	must(t, ds.SetAttr(bg, "unité", engine.StringAttr("°C")))
	data := make([]byte, 100)
	for i := range data {
		data[i] = byte(i*131 + i*i*7) // does not compress: scc keeps it raw
	}
	must(t, ds.Write(bg, engine.All([]uint64{100}), data))
	must(t, f.Close(context.Background()))
	f, err = engine.Open(context.Background(), src, &engine.Options{ReadOnly: true})
	must(t, err)
	defer f.Close(context.Background())
	store := filepath.Join(dir, "store")
	rep, err := Export(bg, f, store, Options{})
	must(t, err)
	if d := rep.Datasets[0]; d.Reencoded == 0 || d.Reencoded+d.Copied != 3 {
		t.Fatalf("export did not re-encode the small chunks: %+v", d)
	}
	outDir := filepath.Join(dir, "out")
	must(t, os.Mkdir(outDir, 0o755))
	b, err := exec.Command(python, filepath.Join(testdata(t), "zarr2.py"), "read", store, outDir, "small").Output()
	if err != nil {
		t.Fatalf("zarr-python read: %v: %s", err, stderr(err))
	}
	var res readerOut
	must(t, json.Unmarshal(b, &res))
	if res.Attributes["title"] != text || res.Arrays[0].Attributes["unité"] != "°C" {
		t.Fatalf("attributes as zarr-python reads them: %v %v", res.Attributes, res.Arrays[0].Attributes)
	}
	got, err := os.ReadFile(filepath.Join(outDir, "0.bin"))
	must(t, err)
	if !bytes.Equal(got, data) {
		t.Fatal("zarr-python's elements differ")
	}
}

// TestImportDraftV3FromZarrPython: the draft of Zarr v3 that zarr-python 2
// writes (zarr.json with a URL as zarr_format, metadata under meta/) is
// refused naming the key, never imported as an empty success.
func TestImportDraftV3FromZarrPython(t *testing.T) {
	zarrPython(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "draft")
	cmd := exec.Command(python, filepath.Join(testdata(t), "corpus.py"), "draft-v3", store)
	cmd.Env = append(os.Environ(), "ZARR_V3_EXPERIMENTAL_API=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("corpus.py draft-v3: %v: %s", err, out)
	}
	f := testfile.Create(t, filepath.Join(dir, "x.scc"), nil)
	defer f.Close(context.Background())
	_, err := Import(bg, store, f, Options{})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `"zarr_format"`) || !strings.Contains(err.Error(), "draft") {
		t.Fatalf("draft v3 store: %v", err)
	}
	if ds := testfile.DatasetNames(t, f); len(ds) != 0 {
		t.Fatalf("datasets %v", ds)
	}
}

// TestImportV3Transpose: a v3 array whose codecs start with transpose
// (any permutation; big-endian bytes; edge chunks) imports in C order.
func TestImportV3Transpose(t *testing.T) {
	shape, chunk := []uint64{5, 7, 3}, []uint64{2, 4, 3}
	want := make([]byte, 0, 5*7*3*2)
	for i := 0; i < 5*7*3; i++ {
		want = binary.LittleEndian.AppendUint16(want, uint16(i*7+1))
	}
	val := func(x []uint64) uint16 { return binary.LittleEndian.Uint16(want[2*((x[0]*7+x[1])*3+x[2]):]) }
	for _, order := range [][]int{{2, 1, 0}, {1, 2, 0}, {0, 2, 1}} {
		dir := t.TempDir()
		store := filepath.Join(dir, "s")
		orderJSON, _ := json.Marshal(order)
		writeFile(t, filepath.Join(store, "zarr.json"), `{"zarr_format":3,"node_type":"group"}`)
		writeFile(t, filepath.Join(store, "t", "zarr.json"), `{"zarr_format":3,"node_type":"array","shape":[5,7,3],"data_type":"uint16",
			"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2,4,3]}},"chunk_key_encoding":{"name":"default"},"fill_value":9,
			"codecs":[{"name":"transpose","configuration":{"order":`+string(orderJSON)+`}},{"name":"bytes","configuration":{"endian":"big"}},{"name":"gzip","configuration":{"level":1}}]}`)
		tshape := []uint64{chunk[order[0]], chunk[order[1]], chunk[order[2]]}
		for c0 := uint64(0); c0 < 3; c0++ {
			for c1 := uint64(0); c1 < 2; c1++ {
				var raw []byte
				for j0 := uint64(0); j0 < tshape[0]; j0++ {
					for j1 := uint64(0); j1 < tshape[1]; j1++ {
						for j2 := uint64(0); j2 < tshape[2]; j2++ {
							var x [3]uint64
							x[order[0]], x[order[1]], x[order[2]] = j0, j1, j2
							x[0] += c0 * chunk[0]
							x[1] += c1 * chunk[1]
							v := uint16(9) // the fill value outside the shape
							if x[0] < shape[0] && x[1] < shape[1] {
								v = val(x[:])
							}
							raw = binary.BigEndian.AppendUint16(raw, v)
						}
					}
				}
				enc, err := codec{id: "gzip", level: 1}.encode(raw)
				must(t, err)
				writeFile(t, filepath.Join(store, "t", "c", fmt.Sprint(c0), fmt.Sprint(c1), "0"), string(enc))
			}
		}
		f := testfile.Create(t, filepath.Join(dir, "x.scc"), nil)
		rep, err := Import(bg, store, f, Options{})
		must(t, err)
		if d := rep.Datasets[0]; d.Chunks != 6 || d.Reencoded != 6 || !strings.Contains(d.Why, "transpose") {
			t.Errorf("order %v: %+v", order, d)
		}
		ds, err := f.OpenDataset(context.Background(), "t", nil)
		must(t, err)
		if got := readAll(t, ds); !bytes.Equal(got, want) {
			t.Errorf("order %v: elements differ", order)
		}
		must(t, f.Close(context.Background()))
	}
}

// utf32Of is a variable-length string dataset as numpy unicode of n bytes
// in all: each string in UTF-32LE, NUL-padded to its share.
func utf32Of(t *testing.T, ds *engine.Dataset, n int) []byte {
	strs, err := ds.ReadStrings(bg, engine.All(ds.Shape()))
	must(t, err)
	if len(strs) == 0 {
		return nil
	}
	es := n / len(strs)
	out := make([]byte, 0, n)
	for _, s := range strs {
		e := make([]byte, es)
		i := 0
		for _, r := range s {
			if i+4 <= es {
				binary.LittleEndian.PutUint32(e[i:], uint32(r))
			}
			i += 4
		}
		out = append(out, e...)
	}
	return out
}
