package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// The real readers, over a real HTTP connection to 127.0.0.1:
// zarr-python 2 through fsspec's HTTP filesystem (Debian python3-zarr,
// python3-fsspec, python3-aiohttp, run as /usr/bin/python3: a pyenv
// python3 on PATH lacks them) and zarrita with its FetchStore (npm,
// installed by `make interop-deps` into interop/zarr/testdata/node). A
// missing reader skips its test, saying how to install it.

const python = "/usr/bin/python3"

func needPython(t *testing.T) {
	t.Helper()
	if out, err := exec.Command(python, "-c", "import zarr, numcodecs, numpy, fsspec, aiohttp").CombinedOutput(); err != nil {
		t.Skipf("zarr-python over HTTP needs Debian python3-zarr, python3-fsspec and python3-aiohttp (make interop-deps): %v: %s", err, out)
	}
}

func needZarrita(t *testing.T) string {
	t.Helper()
	node, err := filepath.Abs(filepath.Join("..", "interop", "zarr", "testdata", "node"))
	require.NoError(t, err)
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("zarrita needs node: not on PATH")
	}
	if _, err := os.Stat(filepath.Join(node, "node_modules", "zarrita", "package.json")); err != nil {
		t.Skipf("zarrita is not installed in %s (make interop-deps)", node)
	}
	return node
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}

// sccValues reads a dataset whole, as the readers write it: C order,
// little-endian.
func sccValues(t *testing.T, f *engine.File, name string) (*engine.Dataset, []byte) {
	t.Helper()
	ds, err := f.OpenDataset(context.Background(), name, nil)
	require.NoError(t, err)
	n := ds.Type().Size()
	for _, s := range ds.Shape() {
		n *= int(s)
	}
	buf := make([]byte, n)
	require.NoError(t, ds.Read(bg, engine.All(ds.Shape()), buf))
	return ds, buf
}

// zarrAttrs is an attribute list in its Zarr JSON form, decoded as a
// reader's JSON would be.
func zarrAttrs(t *testing.T, attrs []engine.Attr) any {
	t.Helper()
	m, skipped := attrsJSON(attrs)
	require.Empty(t, skipped)
	return roundJSON(t, m)
}

func roundJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	require.NoError(t, d.Decode(&out))
	return out
}

type readerTree struct {
	Attributes map[string]any            `json:"attributes"`
	Groups     map[string]map[string]any `json:"groups"`
	Arrays     []struct {
		Path       string         `json:"path"`
		Shape      []uint64       `json:"shape"`
		Chunks     []uint64       `json:"chunks"`
		Dtype      any            `json:"dtype"`
		Attributes map[string]any `json:"attributes"`
		Error      string         `json:"error"`
	} `json:"arrays"`
	Plain struct {
		Path  string   `json:"path"`
		Shape []uint64 `json:"shape"`
		Equal bool     `json:"equal"`
	} `json:"plain"`
}

func decodeTree(t *testing.T, b []byte) readerTree {
	t.Helper()
	var tree readerTree
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	require.NoError(t, d.Decode(&tree), "%s", b)
	return tree
}

// TestZarrPythonReadsServedV2: zarr-python 2 opens the served v2 view over
// HTTP with its consolidated metadata and reads every dataset and
// attribute equal to scc's, missing chunks as the fill value.
func TestZarrPythonReadsServedV2(t *testing.T) {
	needPython(t)
	fx := makeFile(t)
	f, s, _ := open(t, fx.path, Options{})
	// Counts the responses sent gzipped: aiohttp takes gzip, and the
	// consolidated metadata is large enough to go so.
	var gzipped atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeHTTP(w, r)
		if w.Header().Get("Content-Encoding") == "gzip" {
			gzipped.Add(1)
		}
	}))
	defer srv.Close()
	out := t.TempDir()
	b, err := exec.Command(python, filepath.Join("testdata", "zarr2http.py"), srv.URL, out).Output()
	require.NoError(t, err, "zarr-python: %s", stderrOf(err))
	tree := decodeTree(t, b)

	assert.Equal(t, zarrAttrs(t, testfile.Attrs(t, f)), roundJSON(t, tree.Attributes), "root attributes")
	g, err := f.OpenGroup(context.Background(), "g")
	require.NoError(t, err)
	gattrs, err := g.Attrs()
	require.NoError(t, err)
	assert.Equal(t, zarrAttrs(t, gattrs), roundJSON(t, tree.Groups["g"]), "group attributes")

	seen := map[string]bool{}
	for i, a := range tree.Arrays {
		seen[a.Path] = true
		ds, want := sccValues(t, f, a.Path)
		assert.Equal(t, ds.Shape(), a.Shape, a.Path)
		got, err := os.ReadFile(filepath.Join(out, strconv.Itoa(i)+".bin"))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, got), "%s: zarr-python reads other elements than scc", a.Path)
		// The v2 view names the dimensions for xarray.
		assert.Len(t, a.Attributes[dimsAttrName], len(ds.Shape()), "%s: %s", a.Path, dimsAttrName)
		delete(a.Attributes, dimsAttrName)
		assert.Equal(t, zarrAttrs(t, testfile.Attrs(t, ds)), roundJSON(t, a.Attributes), "%s attributes", a.Path)
		ds.Close(context.Background())
	}
	for _, name := range fx.served {
		assert.True(t, seen[name], "zarr-python does not see %s", name)
	}
	assert.Len(t, tree.Arrays, len(fx.served), "only the served datasets")
	assert.True(t, tree.Plain.Equal, "%s read without the consolidated metadata", tree.Plain.Path)
	assert.Positive(t, gzipped.Load(), "no response went gzipped")
}

// TestZarritaReadsServedV3: zarrita reads the served v3 view over HTTP,
// every dataset equal to scc's (crc32c and gzip chunks as stored).
func TestZarritaReadsServedV3(t *testing.T) {
	node := needZarrita(t)
	fx := makeFile(t)
	f, s, _ := open(t, fx.path, Options{Format: 3})
	srv := httptest.NewServer(s)
	defer srv.Close()
	script, err := os.ReadFile(filepath.Join("testdata", "zarr3http.mjs"))
	require.NoError(t, err)
	out := t.TempDir()
	cmd := exec.Command("node", append([]string{"--input-type=module", "-e", string(script), srv.URL, out}, fx.served...)...)
	cmd.Dir = node // where zarrita resolves from
	b, err := cmd.Output()
	require.NoError(t, err, "zarrita: %s", stderrOf(err))
	tree := decodeTree(t, b)
	assert.Equal(t, testfile.JSNumbers(zarrAttrs(t, testfile.Attrs(t, f))), testfile.JSNumbers(roundJSON(t, tree.Attributes)), "root attributes")
	require.Len(t, tree.Arrays, len(fx.served))
	for i, a := range tree.Arrays {
		ds, want := sccValues(t, f, a.Path)
		if a.Error != "" {
			// zarrita 0.7 has no fixed-length bytes type.
			if ds.Type().IsString() {
				t.Logf("%s: zarrita cannot read it: %s", a.Path, a.Error)
				ds.Close(context.Background())
				continue
			}
			t.Fatalf("%s: zarrita: %s", a.Path, a.Error)
		}
		assert.Equal(t, ds.Shape(), a.Shape, a.Path)
		got, err := os.ReadFile(filepath.Join(out, strconv.Itoa(i)+".bin"))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, got), "%s: zarrita reads other elements than scc", a.Path)
		assert.Equal(t, testfile.JSNumbers(zarrAttrs(t, testfile.Attrs(t, ds))), testfile.JSNumbers(roundJSON(t, a.Attributes)), "%s attributes", a.Path)
		ds.Close(context.Background())
	}
}

// TestZarrPythonFollowsWriter: zarr-python, polling the served view over
// HTTP while a writer appends frames, sees each frame once it is Flushed
// (the server refreshes before every request here: Refresh 1 ns).
func TestZarrPythonFollowsWriter(t *testing.T) {
	needPython(t)
	followWriter(t, "zarr2live.py")
}

// TestXarrayFollowsWriter: xarray.open_zarr, opening the served view over
// HTTP again at each poll while a writer appends frames, sees each frame
// once it is Flushed, and none before.
func TestXarrayFollowsWriter(t *testing.T) {
	needXarray(t)
	followWriter(t, "xrlive.py")
}

// followWriter appends frames to a served file, polling the reader script
// (testdata/<script>) before and after each Flush.
func followWriter(t *testing.T, script string) {
	path := filepath.Join(t.TempDir(), "live.scc")
	wf := testfile.Create(t, path, nil)
	defer wf.Close(context.Background())
	ds, err := wf.CreateDataset(context.Background(), "frames", engine.DatasetSpec{Type: engine.Uint16, Shape: []uint64{0, 8, 8},
		MaxShape: []uint64{engine.Unlimited, 8, 8}, Chunk: []uint64{1, 8, 8}, Filters: []engine.Filter{engine.Shuffle(), engine.Zstd(1)}})
	require.NoError(t, err)
	require.NoError(t, wf.Flush(bg))
	_, s, _ := open(t, path, Options{Refresh: 1})
	srv := httptest.NewServer(s)
	defer srv.Close()

	cmd := exec.Command(python, filepath.Join("testdata", script), srv.URL, "frames")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	errb := &logBuf{}
	cmd.Stderr = errb
	require.NoError(t, cmd.Start())
	defer func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("%s: %v: %s", script, err, errb.String())
		}
	}()
	lines := bufio.NewScanner(stdout)
	poll := func() (shape []uint64, last string) {
		t.Helper()
		_, err := io.WriteString(stdin, "poll\n")
		require.NoError(t, err)
		require.True(t, lines.Scan(), "%s stopped: %s", script, errb.String())
		var r struct {
			Shape []uint64 `json:"shape"`
			Last  string   `json:"last"`
		}
		require.NoError(t, json.Unmarshal(lines.Bytes(), &r))
		return r.Shape, r.Last
	}
	shape, _ := poll()
	require.Equal(t, []uint64{0, 8, 8}, shape)
	for i := uint64(0); i < 4; i++ {
		frame := make([]byte, 8*8*2)
		for j := range frame {
			frame[j] = byte(i*7) + byte(j)
		}
		require.NoError(t, ds.SetExtent(bg, []uint64{i + 1, 8, 8}))
		require.NoError(t, ds.Write(bg, engine.Box([]uint64{i, 0, 0}, []uint64{1, 8, 8}), frame))
		shape, _ = poll()
		assert.Equal(t, i, shape[0], "frame %d is not served before the Flush", i)
		require.NoError(t, wf.Flush(bg))
		shape, last := poll()
		assert.Equal(t, []uint64{i + 1, 8, 8}, shape, "after the Flush of frame %d", i)
		assert.Equal(t, hex.EncodeToString(frame), last, "frame %d as %s reads it", i, script)
	}
}

func needXarray(t *testing.T) {
	t.Helper()
	needPython(t)
	if out, err := exec.Command(python, "-c", "import xarray, dask.array").CombinedOutput(); err != nil {
		t.Skipf("xarray and dask need Debian python3-xarray and python3-dask (make interop-deps): %v: %s", err, out)
	}
}

// TestXarrayDaskReadServed: xarray.open_zarr and dask.array.from_zarr,
// over fsspec's HTTP filesystem, read the served v2 view's numeric
// datasets equal to scc's values, with their attributes.
func TestXarrayDaskReadServed(t *testing.T) {
	needXarray(t)
	fx := makeFile(t)
	f, s, _ := open(t, fx.path, Options{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	// Numbers: xarray decodes fixed strings as its own string type.
	names := []string{"zs", "g/sh", "g/h/crc", "raw", "defl", "sp", "ct", "rnd", "virt"}
	out := t.TempDir()
	cmd := exec.Command(python, append([]string{filepath.Join("testdata", "xrdask.py"), srv.URL, out}, names...)...)
	b, err := cmd.Output()
	require.NoError(t, err, "xarray/dask: %s", stderrOf(err))
	var got []struct {
		Path       string         `json:"path"`
		DaskShape  []uint64       `json:"dask_shape"`
		XrShape    []uint64       `json:"xr_shape"`
		Dims       []string       `json:"dims"`
		Attributes map[string]any `json:"attributes"`
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	require.NoError(t, d.Decode(&got), "%s", b)
	require.Len(t, got, len(names))
	for i, a := range got {
		ds, want := sccValues(t, f, a.Path)
		assert.Equal(t, ds.Shape(), a.DaskShape, a.Path)
		assert.Equal(t, ds.Shape(), a.XrShape, a.Path)
		assert.Len(t, a.Dims, len(ds.Shape()), a.Path)
		for _, reader := range []string{"dask", "xr"} {
			bin, err := os.ReadFile(filepath.Join(out, strconv.Itoa(i)+"."+reader+".bin"))
			require.NoError(t, err)
			assert.True(t, bytes.Equal(want, bin), "%s: %s reads other elements than scc", a.Path, reader)
		}
		assert.Equal(t, zarrAttrs(t, testfile.Attrs(t, ds)), roundJSON(t, a.Attributes), "%s attributes", a.Path)
		ds.Close(context.Background())
	}
}
