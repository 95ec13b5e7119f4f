package zarr

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
	"github.com/scc-dev/scc/internal/zarrmap"
)

// writeStringsZarr writes zarr-python 2's string arrays: str (vlen-utf8
// object arrays, unwritten chunks included), object arrays with vlen-utf8
// and vlen-bytes, numpy unicode in both byte orders, 2-D with edge
// chunks, and prints every element as zarr-python reads it (an unwritten
// element, None or 0 to zarr-python, as "").
const writeStringsZarr = `
import sys, json, zarr, numpy as np, numcodecs
store = sys.argv[1]
g = zarr.open_group(store, mode="w")
s = g.create("str", shape=(7,), chunks=(3,), dtype=str, compressor=numcodecs.Zstd())
s[:4] = ["a", "ß", "", "日本"]
o = g.create("obj2d", shape=(3, 5), chunks=(2, 2), dtype=object, object_codec=numcodecs.VLenUTF8(), fill_value="")
o[...] = np.array([["x" * i + str(j) for j in range(5)] for i in range(3)], dtype=object)
u = g.create("u4", shape=(5,), chunks=(2,), dtype="<U4", compressor=numcodecs.Zlib(3))
u[:] = ["ab", "ü", "abcd", "", "\U0001F600"]
b = g.create("ube", shape=(3,), chunks=(3,), dtype=">U2", compressor=None)
b[:] = ["hi", "x", ""]
vb = g.create("bytes", shape=(4,), chunks=(3,), dtype=object, object_codec=numcodecs.VLenBytes(), fill_value=None)
vb[:] = [b"a", b"", b"\x00z", b"\xff"]
out = {}
for n in ("str", "obj2d", "u4", "ube", "bytes"):
    vals = zarr.open_array(store + "/" + n, mode="r")[...].ravel().tolist()
    out[n] = [(v.hex() if isinstance(v, bytes) else v) if v not in (None, 0) else "" for v in vals]
print(json.dumps(out))
`

// TestVlenStringsRoundTrip: Zarr's strings import onto scc's variable-length
// layout with every element equal to zarr-python's reading (marked as
// text, bytes unmarked), and export back as vlen-utf8 (vlen-bytes) strings
// that zarr-python reads equal (v2), and that zarrita reads equal and
// that import back equal (v3).
func TestVlenStringsRoundTrip(t *testing.T) {
	zarrPython(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "s.zarr")
	b, err := exec.Command(python, "-c", writeStringsZarr, store).Output()
	require.NoError(t, err, stderr(err))
	var want map[string][]string
	require.NoError(t, json.Unmarshal(b, &want))

	read := func(f *engine.File, what string, v3 bool) {
		for name, w := range want {
			if v3 && name == "bytes" {
				continue
			}
			ds, err := f.OpenDataset(context.Background(), name, nil)
			require.NoError(t, err, "%s: %s", what, name)
			assert.Equal(t, engine.Vlen, ds.Layout())
			got, err := ds.ReadStrings(bg, engine.All(ds.Shape()))
			require.NoError(t, err, name)
			if name == "bytes" {
				for i, s := range got {
					got[i] = hexOf(s)
				}
				_, err := ds.Attr(zarrmap.VlenStringAttr)
				assert.Error(t, err, "bytes are not marked as text")
			} else {
				v, err := ds.Attr(zarrmap.VlenStringAttr)
				require.NoError(t, err, name)
				cs, _ := v.Str()
				assert.Equal(t, "utf-8", cs)
			}
			assert.Equal(t, w, got, "%s: %s", what, name)
			ds.Close(context.Background())
		}
	}
	f := testfile.Create(t, filepath.Join(dir, "in.scc"), nil)
	rep, err := Import(bg, store, f, Options{})
	require.NoError(t, err)
	require.Empty(t, rep.Skipped)
	read(f, "import", false)

	v2 := filepath.Join(dir, "v2.zarr")
	_, err = Export(bg, f, v2, Options{Version: 2})
	require.NoError(t, err)
	v3 := filepath.Join(dir, "v3.zarr")
	rep3, err := Export(bg, f, v3, Options{Version: 3})
	require.NoError(t, err)
	require.Len(t, rep3.Skipped, 1, "Zarr v3 has no variable-length bytes")
	assert.Equal(t, "bytes", rep3.Skipped[0].Name)
	require.NoError(t, f.Close(context.Background()))

	b, err = exec.Command(python, "-c", `
import sys, json, zarr
store = sys.argv[1]
out = {}
for n in ("str", "obj2d", "u4", "ube", "bytes"):
    a = zarr.open_array(store + "/" + n, mode="r")
    assert "scc:vlen-string" not in a.attrs and "scc:numpy-dtype" not in a.attrs
    assert str(a.dtype) == {"u4": "<U4", "ube": "<U2"}.get(n, "object"), (n, a.dtype)
    out[n] = [(v.hex() if isinstance(v, bytes) else v) if v is not None else "" for v in a[...].ravel().tolist()]
print(json.dumps(out))
`, v2).Output()
	require.NoError(t, err, stderr(err))
	var back map[string][]string
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, want, back)

	g := testfile.Create(t, filepath.Join(dir, "v3.scc"), nil)
	defer g.Close(context.Background())
	_, err = Import(bg, v3, g, Options{})
	require.NoError(t, err)
	read(g, "v3 round trip", true)

	// zarrita reads the v3 strings too.
	node := zarrita(t)
	cmd := exec.Command("node", "-e", `
const [store, ...names] = process.argv.slice(1);
import("zarrita").then(async zarr => {
  const { default: FS } = await import("@zarrita/storage/fs");
  const out = {};
  for (const n of names) {
    const arr = await zarr.open(zarr.root(new FS(store)).resolve(n), { kind: "array" });
    out[n] = Array.from((await zarr.get(arr)).data);
  }
  console.log(JSON.stringify(out));
}).catch(e => { console.error(e); process.exit(1); });
`, v3, "str", "obj2d", "u4", "ube")
	cmd.Dir = node
	b, err = cmd.Output()
	require.NoError(t, err, stderr(err))
	var js map[string][]string
	require.NoError(t, json.Unmarshal(b, &js))
	for n, w := range js {
		assert.Equal(t, want[n], w, "zarrita: %s", n)
	}
	assert.Len(t, js, 4)
}

func hexOf(s string) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		out = append(out, digits[s[i]>>4], digits[s[i]&15])
	}
	return string(out)
}

// FuzzDecodeVLen: any chunk gives its elements or ErrCorrupt, never a
// panic; what decodes encodes back to the same bytes.
func FuzzDecodeVLen(f *testing.F) {
	good, _ := zarrmap.EncodeVLen([][]byte{[]byte("ab"), nil, []byte("c")})
	f.Add(good, 3)
	f.Add([]byte{255, 255, 255, 255}, 1<<30)
	f.Add([]byte{1, 0, 0, 0, 255, 255, 255, 255}, 1)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if n < 0 {
			return
		}
		vals, err := decodeVLen(b, n)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		again, err := zarrmap.EncodeVLen(vals)
		if err != nil || string(again) != string(b) {
			t.Fatalf("re-encoding differs: %v", err)
		}
	})
}

// FuzzUTF32Strings: any bytes give valid UTF-8 strings or ErrCorrupt.
func FuzzUTF32Strings(f *testing.F) {
	f.Add([]byte{'a', 0, 0, 0, 0, 0, 0, 0}, 2, false)
	f.Add([]byte{0, 0, 0xd8, 0}, 1, true)
	f.Fuzz(func(t *testing.T, b []byte, n int, be bool) {
		if n < 1 || n > 64 {
			return
		}
		vals, err := utf32Strings(b, n, be)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		for _, v := range vals {
			if len(v) > 4*n {
				t.Fatalf("%d bytes from %d code points", len(v), n)
			}
		}
	})
}

// TestUnicodeMarkTooShort: a string that outgrew the numpy unicode type
// its dataset was imported from exports as vlen-utf8 instead, noted.
func TestUnicodeMarkTooShort(t *testing.T) {
	dir := t.TempDir()
	f := testfile.Create(t, filepath.Join(dir, "a.scc"), nil)
	defer f.Close(context.Background())
	ds, err := f.CreateDataset(context.Background(), "s", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{3}, Chunk: []uint64{2}, Layout: engine.Vlen})
	require.NoError(t, err)
	require.NoError(t, ds.SetAttr(bg, zarrmap.VlenStringAttr, engine.StringAttr("utf-8")))
	require.NoError(t, ds.SetAttr(bg, zarrmap.DtypeAttr, engine.StringAttr("<U2")))
	require.NoError(t, ds.WriteStrings(bg, engine.All([]uint64{3}), []string{"ab", "çde", ""}))
	store := filepath.Join(dir, "s.zarr")
	rep, err := Export(bg, f, store, Options{})
	require.NoError(t, err)
	require.Len(t, rep.Datasets, 1)
	assert.Contains(t, strings.Join(rep.Datasets[0].Notes, "\n"), "longer than the <U2")
	b, err := os.ReadFile(filepath.Join(store, "s", ".zarray"))
	require.NoError(t, err)
	var meta struct{ Dtype string }
	require.NoError(t, json.Unmarshal(b, &meta))
	assert.Equal(t, "|O", meta.Dtype)
	g := testfile.Create(t, filepath.Join(dir, "b.scc"), nil)
	defer g.Close(context.Background())
	_, err = Import(bg, store, g, Options{})
	require.NoError(t, err)
	back, err := g.OpenDataset(context.Background(), "s", nil)
	require.NoError(t, err)
	defer back.Close(context.Background())
	got, err := back.ReadStrings(bg, engine.All(back.Shape()))
	require.NoError(t, err)
	assert.Equal(t, []string{"ab", "çde", ""}, got)
}
