package serve

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/testfile"
)

// imageFrames is the viewer's fixture: "img", three frames of 40 rows of
// 256 columns, frame 0 dark on the right (255-col), frame 1 dark on the
// left (col), frame 2 by row (6×row); "nan", a float32 slice with a NaN.
func imageFile(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "img.scc")
	f := testfile.Create(t, path, nil)
	ds, err := f.CreateDataset(context.Background(), "img", engine.DatasetSpec{Type: engine.Uint8, Shape: []uint64{3, 40, 256},
		MaxShape: []uint64{engine.Unlimited, 40, 256}, Chunk: []uint64{1, 20, 64}, Filters: []engine.Filter{engine.Zstd(1)}})
	require.NoError(t, err)
	buf := make([]byte, 3*40*256)
	for k := range 3 {
		for r := range 40 {
			for c := range 256 {
				v := c
				switch k {
				case 0:
					v = 255 - c
				case 2:
					v = 6 * r
				}
				buf[(k*40+r)*256+c] = byte(v)
			}
		}
	}
	require.NoError(t, ds.Write(bg, engine.All([]uint64{3, 40, 256}), buf))
	fl, err := f.CreateDataset(context.Background(), "nan", engine.DatasetSpec{Type: engine.Float32, Shape: []uint64{2, 3}, Chunk: []uint64{2, 3}})
	require.NoError(t, err)
	var fb []byte
	for _, v := range []float32{-1, 0, 1, float32(math.NaN()), 3, 1} {
		fb = binary.LittleEndian.AppendUint32(fb, math.Float32bits(v))
	}
	require.NoError(t, fl.Write(bg, engine.All([]uint64{2, 3}), fb))
	require.NoError(t, f.Close(context.Background()))
	return path
}

func slicePNG(t *testing.T, h http.Handler, query string) (image.Image, http.Header) {
	t.Helper()
	w := get(h, "GET", "/__scc/slice.png?"+query)
	require.Equal(t, http.StatusOK, w.Code, "%s: %s", query, w.Body)
	require.Equal(t, "image/png", w.Header().Get("Content-Type"))
	img, err := png.Decode(w.Body)
	require.NoError(t, err)
	return img, w.Header()
}

func gray(t *testing.T, img image.Image, x, y int) uint8 {
	t.Helper()
	c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
	require.Equal(t, c.R, c.G)
	require.Equal(t, c.G, c.B)
	require.Equal(t, uint8(255), c.A)
	return c.R
}

// TestWebPage: / is the page, its script and style are served from the
// page's prefix with a policy that lets it load only its own resources,
// and Zarr keys are unchanged beside it.
func TestWebPage(t *testing.T) {
	_, s, _ := open(t, imageFile(t), Options{})
	w := get(s, "GET", "/")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "text/html; charset=utf-8", w.Header().Get("Content-Type"))
	assert.Contains(t, w.Body.String(), `src="__scc/app.js"`)
	assert.Contains(t, w.Header().Get("Content-Security-Policy"), "default-src 'self'")
	assert.Equal(t, "no-cache", w.Header().Get("Cache-Control"))
	for key, typ := range map[string]string{"/__scc/app.js": "text/javascript; charset=utf-8", "/__scc/app.css": "text/css; charset=utf-8", "/__scc/index.html": "text/html; charset=utf-8"} {
		w := get(s, "GET", key)
		require.Equal(t, http.StatusOK, w.Code, key)
		assert.Equal(t, typ, w.Header().Get("Content-Type"), key)
		assert.NotEmpty(t, w.Header().Get("ETag"), key)
	}
	assert.Equal(t, http.StatusBadRequest, get(s, "GET", "/__scc/").Code, "an empty segment")
	for _, key := range []string{"/__scc/nope.js", "/__scc/web/app.js", "/__scc/tree/x", "/__sccx"} {
		assert.Equal(t, http.StatusNotFound, get(s, "GET", key).Code, key)
	}
	getJSON(t, s, ".zmetadata")
	getJSON(t, s, "img/.zarray")
}

type treeResp struct {
	Generation uint64 `json:"generation"`
	Groups     []struct {
		Path  string         `json:"path"`
		Attrs map[string]any `json:"attrs"`
	} `json:"groups"`
	Datasets []struct {
		Name     string         `json:"name"`
		Type     string         `json:"type"`
		Layout   string         `json:"layout"`
		Shape    []uint64       `json:"shape"`
		MaxShape []int64        `json:"max_shape"`
		Chunk    []uint64       `json:"chunk"`
		Filters  []string       `json:"filters"`
		Attrs    map[string]any `json:"attrs"`
		LeftOut  string         `json:"zarr_left_out"`
		Chunks   string         `json:"zarr_chunks"`
		NoImage  string         `json:"no_image"`
		Storage  *struct {
			Chunks      int    `json:"chunks"`
			StoredBytes uint64 `json:"stored_bytes"`
		} `json:"storage"`
		Cache *struct {
			Hits, Misses int64
		} `json:"cache"`
	} `json:"datasets"`
	Cache struct {
		ActiveLimit int64 `json:"active_limit"`
	} `json:"cache"`
}

func getTree(t *testing.T, h http.Handler) treeResp {
	t.Helper()
	w := get(h, "GET", "/__scc/tree")
	require.Equal(t, http.StatusOK, w.Code, "%s", w.Body)
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	var tr treeResp
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &tr))
	return tr
}

// TestWebTree: the tree document lists every dataset, those the Zarr view
// holds and those it leaves out (saying why), with type, shape, chunking,
// filters, attributes, storage and cache figures, and why the viewer
// cannot show the non-numeric ones; groups with their attributes.
func TestWebTree(t *testing.T) {
	fx := makeFile(t)
	f, s, _ := open(t, fx.path, Options{})
	tr := getTree(t, s)
	assert.Equal(t, f.Generation(), tr.Generation)
	var names []string
	for _, d := range tr.Datasets {
		names = append(names, d.Name)
	}
	want := append(slices.Clone(fx.served), fx.skipped...)
	slices.Sort(want)
	assert.Equal(t, want, names)
	byName := map[string]int{}
	for i, d := range tr.Datasets {
		byName[d.Name] = i
	}
	zs := tr.Datasets[byName["zs"]]
	assert.Equal(t, "float64", zs.Type)
	assert.Equal(t, "chunked", zs.Layout)
	assert.Equal(t, []uint64{100, 50}, zs.Shape)
	assert.Equal(t, []uint64{30, 20}, zs.Chunk)
	assert.Len(t, zs.Filters, 1)
	assert.Equal(t, "K", zs.Attrs["units"])
	assert.Equal(t, "served as stored", zs.Chunks)
	assert.Empty(t, zs.LeftOut)
	assert.Empty(t, zs.NoImage)
	require.NotNil(t, zs.Storage)
	assert.Greater(t, zs.Storage.Chunks, 0)
	assert.Greater(t, zs.Storage.StoredBytes, uint64(0))
	assert.NotNil(t, zs.Cache)
	assert.Equal(t, []int64{-1}, tr.Datasets[byName["raw"]].MaxShape)
	for _, n := range fx.skipped {
		assert.NotEmpty(t, tr.Datasets[byName[n]].LeftOut, n)
	}
	for _, n := range []string{"str", "utf", "vl"} {
		assert.NotEmpty(t, tr.Datasets[byName[n]].NoImage, n)
	}
	assert.Empty(t, tr.Datasets[byName["g/.zfoo"]].NoImage, "left out of Zarr, still shown")
	var g map[string]any
	for _, gr := range tr.Groups {
		if gr.Path == "g" {
			g = gr.Attrs
		}
	}
	assert.Equal(t, "group", g["kind"])
	assert.Greater(t, tr.Cache.ActiveLimit, int64(0))
}

// TestWebSlice: the slice image's pixels are the data's slice through the
// contrast and colour map, along any two dimensions at any index of the
// others; NaN is transparent; a large slice is subsampled; bad requests
// are 4xx.
func TestWebSlice(t *testing.T) {
	_, s, _ := open(t, imageFile(t), Options{})
	img, hdr := slicePNG(t, s, "ds=img&i=1,0,0&min=0&max=255")
	require.Equal(t, image.Rect(0, 0, 256, 40), img.Bounds())
	for r := range 40 {
		for c := range 256 {
			require.Equal(t, uint8(c), gray(t, img, c, r), "frame 1 (%d, %d)", r, c)
		}
	}
	assert.Equal(t, "0", hdr.Get("X-Scc-Min"))
	assert.Equal(t, "255", hdr.Get("X-Scc-Max"))
	img, _ = slicePNG(t, s, "ds=img&i=0,0,0&min=0&max=255")
	assert.Equal(t, uint8(255), gray(t, img, 0, 7))
	assert.Equal(t, uint8(0), gray(t, img, 255, 7))

	// Contrast: a narrower range saturates; auto is the slice's range.
	img, _ = slicePNG(t, s, "ds=img&i=1,0,0&min=100&max=150")
	assert.Equal(t, uint8(0), gray(t, img, 50, 0))
	assert.Equal(t, uint8(255), gray(t, img, 200, 0))
	assert.Equal(t, uint8(128), gray(t, img, 125, 0)) // (125-100)/50×255 = 127.5
	img, hdr = slicePNG(t, s, "ds=img&i=2,0,0")
	assert.Equal(t, "0", hdr.Get("X-Scc-Min"))
	assert.Equal(t, "234", hdr.Get("X-Scc-Max"))
	assert.Equal(t, uint8(0), gray(t, img, 3, 0))
	assert.Equal(t, uint8(255), gray(t, img, 3, 39))

	// Other dimensions: rows along dim 0 (frames), columns along dim 2,
	// at row 5; and transposed (columns along dim 1).
	img, _ = slicePNG(t, s, "ds=img&x=2&y=0&i=0,5,0&min=0&max=255")
	require.Equal(t, image.Rect(0, 0, 256, 3), img.Bounds())
	assert.Equal(t, uint8(255-10), gray(t, img, 10, 0))
	assert.Equal(t, uint8(10), gray(t, img, 10, 1))
	assert.Equal(t, uint8(30), gray(t, img, 10, 2))
	img, _ = slicePNG(t, s, "ds=img&x=1&y=2&i=2,0,0&min=0&max=255")
	require.Equal(t, image.Rect(0, 0, 40, 256), img.Bounds())
	assert.Equal(t, uint8(6*7), gray(t, img, 7, 100))

	// Colour maps.
	img, _ = slicePNG(t, s, "ds=img&i=1,0,0&min=0&max=255&cmap=viridis")
	assert.Equal(t, colormaps["viridis"][0], color.NRGBAModel.Convert(img.At(0, 0)))
	assert.Equal(t, colormaps["viridis"][255], color.NRGBAModel.Convert(img.At(255, 0)))
	assert.Equal(t, color.NRGBA{0x44, 0x01, 0x54, 255}, colormaps["viridis"][0])
	assert.Equal(t, color.NRGBA{0xfe, 0xe8, 0x25, 255}, colormaps["viridis"][255])

	// Subsampled to fit: every 16th column and row.
	img, hdr = slicePNG(t, s, "ds=img&i=1,0,0&min=0&max=255&side=16")
	require.Equal(t, image.Rect(0, 0, 16, 3), img.Bounds())
	assert.Equal(t, "16", hdr.Get("X-Scc-Step"))
	assert.Equal(t, uint8(32), gray(t, img, 2, 1))

	// NaN: transparent; auto contrast ignores it.
	img, hdr = slicePNG(t, s, "ds=nan")
	assert.Equal(t, "-1", hdr.Get("X-Scc-Min"))
	assert.Equal(t, "3", hdr.Get("X-Scc-Max"))
	assert.Equal(t, uint8(0), color.NRGBAModel.Convert(img.At(0, 1)).(color.NRGBA).A)
	assert.Equal(t, uint8(255), gray(t, img, 1, 1))
	assert.Equal(t, uint8(64), gray(t, img, 1, 0)) // (0+1)/4×255 = 63.75

	for q, code := range map[string]int{
		"ds=nope":                           http.StatusNotFound,
		"":                                  http.StatusNotFound,
		"ds=img&i=3,0,0":                    http.StatusBadRequest,
		"ds=img&i=1,0":                      http.StatusBadRequest,
		"ds=img&i=-1,0,0":                   http.StatusBadRequest,
		"ds=img&i=x,0,0":                    http.StatusBadRequest,
		"ds=img&x=1&y=1":                    http.StatusBadRequest,
		"ds=img&x=3":                        http.StatusBadRequest,
		"ds=img&x=-1":                       http.StatusBadRequest,
		"ds=img&min=0&max=NaN":              http.StatusBadRequest,
		"ds=img&min=Inf&max=1":              http.StatusBadRequest,
		"ds=img&cmap=jet":                   http.StatusBadRequest,
		"ds=img&side=0":                     http.StatusBadRequest,
		"ds=img&side=99999999999999999999":  http.StatusBadRequest,
		"ds=img&i=99999999999999999999,0,0": http.StatusBadRequest,
	} {
		w := get(s, "GET", "/__scc/slice.png?"+q)
		assert.Equal(t, code, w.Code, "%s: %s", q, w.Body)
	}
}

// TestWebSliceNotNumeric: a dataset without pixel values is refused with
// why, not drawn.
func TestWebSliceNotNumeric(t *testing.T) {
	fx := makeFile(t)
	_, s, _ := open(t, fx.path, Options{})
	for _, n := range []string{"str", "utf", "vl"} {
		w := get(s, "GET", "/__scc/slice.png?ds="+n)
		assert.Equal(t, http.StatusUnprocessableEntity, w.Code, n)
		assert.Contains(t, w.Body.String(), "no pixel value", n)
	}
	// Left out of the Zarr view by its name, still a numeric dataset.
	_, _ = slicePNG(t, s, "ds=g/.zfoo")
}

// TestWebLive: the tree and the slice follow the writer: a frame Flushed
// appears in the tree's extent and can be shown.
func TestWebLive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "live.scc")
	wf := testfile.Create(t, path, nil)
	defer wf.Close(context.Background())
	ds, err := wf.CreateDataset(context.Background(), "frames", engine.DatasetSpec{Type: engine.Uint16, Shape: []uint64{0, 4, 4},
		MaxShape: []uint64{engine.Unlimited, 4, 4}, Chunk: []uint64{1, 4, 4}, Filters: []engine.Filter{engine.Zstd(1)}})
	require.NoError(t, err)
	require.NoError(t, wf.Flush(bg))
	_, s, _ := open(t, path, Options{Refresh: 1})
	assert.Equal(t, []uint64{0, 4, 4}, getTree(t, s).Datasets[0].Shape)
	assert.Equal(t, http.StatusBadRequest, get(s, "GET", "/__scc/slice.png?ds=frames").Code, "no frame yet")
	frame := bytes.Repeat([]byte{9, 1}, 16)
	require.NoError(t, ds.SetExtent(bg, []uint64{1, 4, 4}))
	require.NoError(t, ds.Write(bg, engine.All([]uint64{1, 4, 4}), frame))
	require.NoError(t, wf.Flush(bg))
	assert.Equal(t, []uint64{1, 4, 4}, getTree(t, s).Datasets[0].Shape)
	img, hdr := slicePNG(t, s, "ds=frames&i=0,0,0")
	assert.Equal(t, image.Rect(0, 0, 4, 4), img.Bounds())
	assert.Equal(t, "265", hdr.Get("X-Scc-Max"))
	_, err = wf.CreateDataset(context.Background(), "late", engine.DatasetSpec{Type: engine.Int8, Shape: []uint64{2}, Chunk: []uint64{2}})
	require.NoError(t, err)
	require.NoError(t, wf.Flush(bg))
	tr := getTree(t, s)
	require.Len(t, tr.Datasets, 2)
	assert.Equal(t, "late", tr.Datasets[1].Name)
	assert.True(t, strings.HasPrefix(tr.Datasets[1].Type, "int8"))
}
