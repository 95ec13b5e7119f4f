package serve

import (
	"bytes"
	"context"
	"embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"math"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/scc-dev/scc/engine"
)

// The web page: GET / answers an HTML page (web/index.html) that lists the
// file's tree and shows a 2-D slice of any numeric dataset as an image,
// following the file as the writer extends it. Its script, its style and
// the JSON and PNG it loads live under WebPrefix, which no Zarr key can
// start with: the engine refuses names with a component starting with
// "__", and the view leaves out any older dataset or group so named
// (zarrmap.NameErr), so the page and the store never collide.
// Everything is embedded: no build step, nothing fetched from elsewhere.

// WebPrefix is the path prefix of the web page's resources.
const WebPrefix = "/__scc/"

//go:embed web
var webFiles embed.FS

// maxImageSide bounds each side of a slice image: a larger slice is
// subsampled (every step-th element) to fit, so one image reads at most
// maxImageSide² elements whatever the dataset's extent.
const maxImageSide = 1024

// webSecurity are the headers every page resource carries: the page runs
// only its own script and loads only its own resources.
func webSecurity(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' blob: data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

// serveWeb answers the page ("" is the page itself) and its resources
// (rest is the path after WebPrefix).
func (s *Server) serveWeb(w http.ResponseWriter, r *http.Request, v *view, rest string, page bool) {
	h := w.Header()
	webSecurity(h)
	h.Set("Cache-Control", "no-cache")
	if page {
		rest = "index.html"
	}
	switch rest {
	case "tree":
		s.serveTree(w, r, v)
		return
	case "slice.png":
		s.serveSlice(w, r, v)
		return
	}
	if strings.Contains(rest, "/") {
		http.Error(w, "no such key", http.StatusNotFound)
		return
	}
	b, err := fs.ReadFile(webFiles, "web/"+rest)
	if err != nil {
		http.Error(w, "no such key", http.StatusNotFound)
		return
	}
	switch path.Ext(rest) {
	case ".html":
		h.Set("Content-Type", "text/html; charset=utf-8")
	case ".js":
		h.Set("Content-Type", "text/javascript; charset=utf-8")
	case ".css":
		h.Set("Content-Type", "text/css; charset=utf-8")
	}
	serveContent(w, r, b, chunkETag(b), stampOf(startTime), gzipOf(b))
}

// startTime stands for the embedded files' modification time.
var startTime = time.Now()

// treeDoc is the file's tree as the page shows it.
type treeDoc struct {
	Format     int          `json:"zarr_format"`
	Generation uint64       `json:"generation"`
	RefreshMS  float64      `json:"refresh_ms"`
	Groups     []groupDoc   `json:"groups"`
	Datasets   []datasetDoc `json:"datasets"`
	Cache      cacheDoc     `json:"cache"`
	InFlight   int          `json:"requests_in_flight"`
}

type groupDoc struct {
	Path  string         `json:"path"`
	Attrs map[string]any `json:"attrs"`
}

type datasetDoc struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Layout string `json:"layout"`
	// MaxShape has -1 for an unlimited dimension.
	Shape    []uint64       `json:"shape"`
	MaxShape []int64        `json:"max_shape,omitempty"`
	Chunk    []uint64       `json:"chunk,omitempty"`
	Filters  []string       `json:"filters"`
	Attrs    map[string]any `json:"attrs"`
	// LeftOut says why the Zarr view does not hold the dataset; Codecs
	// is how it serves the chunks of one it holds.
	LeftOut string `json:"zarr_left_out,omitempty"`
	Codecs  string `json:"zarr_chunks,omitempty"`
	// NoImage says why the viewer cannot show the dataset.
	NoImage string           `json:"no_image,omitempty"`
	Storage *storageDoc      `json:"storage,omitempty"`
	Cache   *datasetCacheDoc `json:"cache,omitempty"`
	// RawBytes is the extent's size decoded.
	RawBytes float64 `json:"raw_bytes"`
	Error    string  `json:"error,omitempty"`
}

type storageDoc struct {
	Chunks      int    `json:"chunks"`
	StoredBytes uint64 `json:"stored_bytes"`
	IndexBytes  uint64 `json:"index_bytes"`
	Error       string `json:"error,omitempty"`
}

type datasetCacheDoc struct {
	ResidentBytes int64 `json:"resident_bytes"`
	Chunks        int64 `json:"chunks"`
	Hits          int64 `json:"hits"`
	Misses        int64 `json:"misses"`
}

type cacheDoc struct {
	Hits          int64 `json:"hits"`
	Misses        int64 `json:"misses"`
	Loads         int64 `json:"loads"`
	Evictions     int64 `json:"evictions"`
	ResidentBytes int64 `json:"resident_bytes"`
	PeakBytes     int64 `json:"peak_resident_bytes"`
	ActiveLimit   int64 `json:"active_limit"`
}

// serveTree answers the tree document of v.
func (s *Server) serveTree(w http.ResponseWriter, r *http.Request, v *view) {
	ctx := r.Context()
	doc := treeDoc{Format: s.version, Generation: v.gen, RefreshMS: float64(s.every) / float64(time.Millisecond), InFlight: len(s.sem)}
	paths := make([]string, 0, len(v.groups))
	for p := range v.groups {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		doc.Groups = append(doc.Groups, groupDoc{Path: p, Attrs: v.groups[p]})
	}
	names := make([]string, 0, len(v.arrays)+len(v.left))
	for n := range v.arrays {
		names = append(names, n)
	}
	for n := range v.left {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if ctx.Err() != nil {
			return
		}
		doc.Datasets = append(doc.Datasets, s.datasetInfo(ctx, v, n))
	}
	if c := v.f.Cache(); c != nil {
		st := c.Stats()
		doc.Cache = cacheDoc{Hits: st.Hits, Misses: st.Misses, Loads: st.Loads, Evictions: st.Evictions,
			ResidentBytes: st.ResidentBytes, PeakBytes: st.PeakResidentBytes, ActiveLimit: st.ActiveLimit}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		s.log.Error("web page: tree", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	serveContent(w, r, b, chunkETag(b), stampOf(time.Now()), gzipOf(b))
}

// datasetInfo describes dataset name of v: through the view's handle when
// the view holds it, else opened for the while.
func (s *Server) datasetInfo(ctx context.Context, v *view, name string) datasetDoc {
	d := datasetDoc{Name: name, LeftOut: v.left[name], Filters: []string{}}
	ds := (*engine.Dataset)(nil)
	if a := v.arrays[name]; a != nil {
		ds = a.ds
		switch {
		case a.copy:
			d.Codecs = "served as stored"
		case a.ds.Layout() == engine.Chunked:
			d.Codecs = "served decoded (the pipeline has no Zarr codec)"
		default:
			d.Codecs = "served decoded"
		}
	} else {
		o, err := v.f.OpenDataset(ctx, name, nil)
		if err != nil {
			d.Error = "cannot be opened"
			d.NoImage = d.Error
			return d
		}
		defer o.Close(ctx)
		ds = o
	}
	typ := ds.Type()
	d.Type, d.Layout = typ.String(), ds.Layout().String()
	d.Shape = ds.Shape()
	for _, m := range ds.MaxShape() {
		if m == engine.Unlimited {
			d.MaxShape = append(d.MaxShape, -1)
		} else {
			d.MaxShape = append(d.MaxShape, int64(min(m, math.MaxInt64)))
		}
	}
	if ds.Layout() != engine.Contiguous && ds.Layout() != engine.Virtual {
		d.Chunk = ds.Chunk()
	}
	for _, f := range ds.Filters() {
		d.Filters = append(d.Filters, f.String())
	}
	if list, err := ds.Attrs(); err == nil {
		d.Attrs, _ = attrsJSON(list)
	}
	d.RawBytes = float64(typ.Size())
	for _, n := range d.Shape {
		d.RawBytes *= float64(n)
	}
	d.NoImage = noImage(ds)
	st := v.storageOf(ctx, name, ds)
	d.Storage = &st
	cs := ds.CacheStats()
	d.Cache = &datasetCacheDoc{ResidentBytes: cs.ResidentBytes, Chunks: cs.Chunks, Hits: cs.Hits, Misses: cs.Misses}
	return d
}

// storageOf returns what ds occupies, read once per view.
func (v *view) storageOf(ctx context.Context, name string, ds *engine.Dataset) storageDoc {
	v.storageMu.Lock()
	defer v.storageMu.Unlock()
	if st, ok := v.storage[name]; ok {
		return st
	}
	var doc storageDoc
	st, err := ds.Storage(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return storageDoc{Error: "not read"}
		}
		doc.Error = "not known"
	} else {
		doc = storageDoc{Chunks: st.Chunks, StoredBytes: st.StoredBytes, IndexBytes: st.IndexBytes}
	}
	if v.storage == nil {
		v.storage = map[string]storageDoc{}
	}
	v.storage[name] = doc
	return doc
}

// noImage says why the viewer cannot show ds, "" when it can.
func noImage(ds *engine.Dataset) string {
	switch {
	case ds.Layout() == engine.Vlen:
		return "variable-length elements have no pixel value"
	case !ds.Type().Numeric():
		return fmt.Sprintf("%v elements have no pixel value (numeric types only)", ds.Type())
	case len(ds.Shape()) == 0:
		return "a scalar has no image"
	}
	return ""
}

// sliceReq is a parsed slice.png request.
type sliceReq struct {
	name     string
	x, y     int      // the dimensions along the image's columns and rows (y -1 for rank 1)
	idx      []uint64 // the index along every other dimension
	lo, hi   float64
	auto     bool
	cmap     *[256]color.NRGBA
	maxSide  int
	hasRange bool
}

// errBadSlice is a slice request the page or a user got wrong: 400.
var errBadSlice = errors.New("bad slice request")

// parseSlice parses a slice.png request's query for dataset shape.
func parseSlice(q map[string][]string, shape []uint64) (sliceReq, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	rank := len(shape)
	sr := sliceReq{name: get("ds"), x: rank - 1, y: rank - 2, idx: make([]uint64, rank), maxSide: maxImageSide}
	dim := func(k string, def int) (int, error) {
		v := get(k)
		if v == "" {
			return def, nil
		}
		d, err := strconv.Atoi(v)
		if err != nil || d < -1 || d >= rank {
			return 0, fmt.Errorf("%w: %s=%q: want a dimension below %d", errBadSlice, k, v, rank)
		}
		return d, nil
	}
	var err error
	if sr.x, err = dim("x", sr.x); err != nil {
		return sr, err
	}
	if sr.y, err = dim("y", sr.y); err != nil {
		return sr, err
	}
	if sr.x < 0 || sr.x == sr.y {
		return sr, fmt.Errorf("%w: x=%d y=%d: want two different dimensions (y -1 for one row)", errBadSlice, sr.x, sr.y)
	}
	if v := get("i"); v != "" {
		parts := strings.Split(v, ",")
		if len(parts) != rank {
			return sr, fmt.Errorf("%w: i=%q: want %d indices", errBadSlice, v, rank)
		}
		for d, p := range parts {
			n, err := strconv.ParseUint(p, 10, 64)
			if err != nil {
				return sr, fmt.Errorf("%w: i=%q: %q is no index", errBadSlice, v, p)
			}
			sr.idx[d] = n
		}
	}
	for d := range rank {
		if d == sr.x || d == sr.y {
			sr.idx[d] = 0
			if shape[d] == 0 {
				return sr, fmt.Errorf("%w: dimension %d is empty", errBadSlice, d)
			}
			continue
		}
		if sr.idx[d] >= shape[d] {
			return sr, fmt.Errorf("%w: index %d outside dimension %d of extent %d", errBadSlice, sr.idx[d], d, shape[d])
		}
	}
	lo, hi := get("min"), get("max")
	sr.auto = lo == "" || hi == ""
	if !sr.auto {
		if sr.lo, err = strconv.ParseFloat(lo, 64); err != nil || math.IsNaN(sr.lo) || math.IsInf(sr.lo, 0) {
			return sr, fmt.Errorf("%w: min=%q", errBadSlice, lo)
		}
		if sr.hi, err = strconv.ParseFloat(hi, 64); err != nil || math.IsNaN(sr.hi) || math.IsInf(sr.hi, 0) {
			return sr, fmt.Errorf("%w: max=%q", errBadSlice, hi)
		}
	}
	name := get("cmap")
	if name == "" {
		name = "gray"
	}
	sr.cmap = colormaps[name]
	if sr.cmap == nil {
		return sr, fmt.Errorf("%w: cmap=%q: want one of gray, viridis, inferno", errBadSlice, name)
	}
	if v := get("side"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxImageSide {
			return sr, fmt.Errorf("%w: side=%q: want 1 to %d", errBadSlice, v, maxImageSide)
		}
		sr.maxSide = n
	}
	return sr, nil
}

// serveSlice answers a PNG of a 2-D slice of a numeric dataset: along
// dimensions x (columns) and y (rows), at index i of every other, with
// values from min to max (the slice's own range when not given) mapped
// through the colour map; NaN is transparent. A slice wider or taller
// than the bound is subsampled. The headers X-Scc-Min and X-Scc-Max give
// the range used, X-Scc-Step the subsampling.
func (s *Server) serveSlice(w http.ResponseWriter, r *http.Request, v *view) {
	q := r.URL.Query()
	name := q.Get("ds")
	ds := (*engine.Dataset)(nil)
	if a := v.arrays[name]; a != nil {
		ds = a.ds
	} else if _, ok := v.left[name]; ok {
		o, err := v.f.OpenDataset(r.Context(), name, nil)
		if err != nil {
			http.Error(w, "no such dataset", http.StatusNotFound)
			return
		}
		defer o.Close(context.Background())
		ds = o
	} else {
		http.Error(w, "no such dataset", http.StatusNotFound)
		return
	}
	if why := noImage(ds); why != "" {
		http.Error(w, why, http.StatusUnprocessableEntity)
		return
	}
	shape := ds.Shape()
	sr, err := parseSlice(q, shape)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	start := slices.Clone(sr.idx)
	stride := make([]uint64, len(shape))
	count := make([]uint64, len(shape))
	for d := range shape {
		stride[d], count[d] = 1, 1
	}
	cols, rows := shape[sr.x], uint64(1)
	step := max(1, (cols+uint64(sr.maxSide)-1)/uint64(sr.maxSide))
	if sr.y >= 0 {
		rows = shape[sr.y]
		step = max(step, (rows+uint64(sr.maxSide)-1)/uint64(sr.maxSide))
	}
	cols = (cols + step - 1) / step
	stride[sr.x], count[sr.x] = step, cols
	if sr.y >= 0 {
		rows = (rows + step - 1) / step
		stride[sr.y], count[sr.y] = step, rows
	}
	typ := ds.Type()
	n := int64(cols*rows) * int64(typ.Size())
	if err := s.bytes.Acquire(r.Context(), min(n, s.maxBytes)); err != nil {
		return
	}
	defer s.bytes.Release(min(n, s.maxBytes))
	buf := make([]byte, n)
	if err := ds.Read(r.Context(), engine.Hyperslab(start, stride, count, nil), buf); err != nil {
		switch {
		case r.Context().Err() != nil:
		case errors.Is(err, engine.ErrOutOfRange), errors.Is(err, engine.ErrDeleted), errors.Is(err, engine.ErrNotFound):
			http.Error(w, "the slice is no longer in the dataset", http.StatusNotFound)
		case errors.Is(err, engine.ErrStale):
			w.Header().Set("Retry-After", "1")
			http.Error(w, "the file is being rewritten faster than it can be read; retry", http.StatusServiceUnavailable)
		default:
			s.readFailed(err)
			s.log.Error("web page: slice read failed", "name", name, "err", err)
			http.Error(w, "internal error", http.StatusInternalServerError)
		}
		return
	}
	vals := toFloats(typ, buf)
	// The selection is in C order of the dataset's dimensions: when y
	// comes after x the rows run along the faster dimension.
	at := func(row, col uint64) float64 {
		if sr.y > sr.x {
			return vals[col*rows+row]
		}
		return vals[row*cols+col]
	}
	lo, hi := sr.lo, sr.hi
	if sr.auto {
		lo, hi = math.Inf(1), math.Inf(-1)
		for _, f := range vals {
			if !math.IsNaN(f) && !math.IsInf(f, 0) {
				lo, hi = min(lo, f), max(hi, f)
			}
		}
		if lo > hi {
			lo, hi = 0, 0
		}
	}
	img := image.NewNRGBA(image.Rect(0, 0, int(cols), int(rows)))
	for row := range rows {
		for col := range cols {
			img.SetNRGBA(int(col), int(row), pixel(at(row, col), lo, hi, sr.cmap))
		}
	}
	var out bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&out, img); err != nil {
		s.log.Error("web page: png", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "image/png")
	h.Set("X-Scc-Min", strconv.FormatFloat(lo, 'g', -1, 64))
	h.Set("X-Scc-Max", strconv.FormatFloat(hi, 'g', -1, 64))
	h.Set("X-Scc-Step", strconv.FormatUint(step, 10))
	h.Set("X-Scc-Generation", strconv.FormatUint(v.gen, 10))
	b := out.Bytes()
	// A PNG is deflated already.
	serveContent(w, r, b, chunkETag(b), stampOf(time.Now()), nil)
}

// pixel maps f from [lo, hi] through cmap: below lo is the map's first
// colour, above hi its last, NaN transparent, and a range of one value
// (lo == hi) maps everything to the first.
func pixel(f, lo, hi float64, cmap *[256]color.NRGBA) color.NRGBA {
	if math.IsNaN(f) {
		return color.NRGBA{}
	}
	t := 0.0
	if hi > lo {
		t = (f - lo) / (hi - lo)
	}
	i := math.Floor(t*255 + 0.5)
	switch {
	case !(i >= 0): // also -Inf
		i = 0
	case i > 255:
		i = 255
	}
	return cmap[int(i)]
}

// toFloats converts little-endian elements of a numeric type to float64
// (exact for every numeric type but the 64-bit integers beyond 2^53,
// which round to the nearest).
func toFloats(t engine.Type, b []byte) []float64 {
	n := len(b) / t.Size()
	f := make([]byte, 8*n)
	out := make([]float64, n)
	if engine.ConvertElems(f, engine.Float64, b, t, engine.ConvertOptions{}) != nil {
		return out // not numeric: noImage refused it before
	}
	le := binary.LittleEndian
	for i := range out {
		out[i] = math.Float64frombits(le.Uint64(f[8*i:]))
	}
	return out
}

// colormaps are the viewer's colour maps, 256 colours each, interpolated
// linearly between the published maps' stops.
var colormaps = map[string]*[256]color.NRGBA{
	"gray":    ramp(0x000000, 0xffffff),
	"viridis": ramp(0x440154, 0x482777, 0x3f4a8a, 0x31678e, 0x26838f, 0x1f9d8a, 0x6cce5a, 0xb6de2b, 0xfee825),
	"inferno": ramp(0x000004, 0x1b0c41, 0x4a0c6b, 0x781c6d, 0xa52c60, 0xcf4446, 0xed6925, 0xfb9b06, 0xf7d13d, 0xfcffa4),
}

func ramp(stops ...uint32) *[256]color.NRGBA {
	var m [256]color.NRGBA
	ch := func(c uint32, shift uint) float64 { return float64(c >> shift & 0xff) }
	for i := range m {
		pos := float64(i) / 255 * float64(len(stops)-1)
		j := min(int(pos), len(stops)-2)
		f := pos - float64(j)
		mix := func(shift uint) uint8 {
			return uint8(math.Round(ch(stops[j], shift)*(1-f) + ch(stops[j+1], shift)*f))
		}
		m[i] = color.NRGBA{R: mix(16), G: mix(8), B: mix(0), A: 255}
	}
	return &m
}
