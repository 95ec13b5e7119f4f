package serve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/tree"
	"github.com/scc-dev/scc/internal/zarrmap"
)

// A view is the Zarr store of the file at one commit: its metadata
// documents, rendered once, and its arrays with the dataset handles their
// chunks are read through. Views are immutable once built; a refresh that
// finds the file changed builds a new one and retires the old, whose
// handles close when the last request using it is done. The new view opens
// its handles before the old one closes its own, so a dataset that stays
// is never released and registered again with the cache (and its header
// never read again) because the view changed.
type view struct {
	f       *engine.File
	gen     uint64
	blobs   map[string]*blob  // metadata documents by key
	arrays  map[string]*array // by path
	handles []*engine.Dataset
	// groups are the view's groups' attributes by path ("" is the root);
	// left says why each dataset Zarr cannot hold is left out. The web
	// page shows both.
	groups map[string]map[string]any
	left   map[string]string

	// storage holds what each dataset occupies, read once per view
	// (storageOf): it changes only with a commit.
	storageMu sync.Mutex
	storage   map[string]storageDoc

	mu      sync.Mutex
	refs    int
	retired bool
	// done tells the server that v no longer reads f (fileDone).
	done func()
}

// A blob is one metadata document.
type blob struct {
	data []byte
	etag string
	mod  stamp
	// gz is data gzipped (nil when that does not help), made at the
	// first request that takes gzip.
	gzOnce sync.Once
	gz     []byte
}

// An array is one dataset as the view serves it.
type array struct {
	name  string
	ds    *engine.Dataset
	typ   engine.Type
	shape []uint64 // at the view's commit
	chunk []uint64 // the Zarr chunk shape
	// scalar: a scalar dataset, served as a zero-dimensional array (shape
	// and chunk []) whose one chunk is its storage's chunk [0] of [1].
	scalar bool
	fill   []byte
	// chunkBytes is one Zarr chunk's decoded size.
	chunkBytes int
	// copy: chunks with filter mask 0 are served as stored (wrap names
	// the zlib or gzip wrapper a raw deflate stream gets); chain is the
	// codec chain the metadata declares, empty when chunks are served
	// decoded.
	copy  bool
	wrap  string
	chain []zarrmap.Codec
	// plain: the chunk bytes served are not compressed (no compressor
	// declared), so gzip may shrink them on the way.
	plain bool
	mod   stamp
	// attrs are the attributes with a Zarr form; skippedAttrs say why
	// the others are left out.
	attrs        map[string]any
	skippedAttrs []string
}

func (v *view) acquire() {
	v.mu.Lock()
	v.refs++
	v.mu.Unlock()
}

func (v *view) release() {
	v.mu.Lock()
	v.refs--
	done := v.refs == 0 && v.retired
	v.mu.Unlock()
	if done {
		v.close()
	}
}

// retire marks v replaced: it closes once no request holds it.
func (v *view) retire() {
	v.mu.Lock()
	v.retired = true
	done := v.refs == 0
	v.mu.Unlock()
	if done {
		v.close()
	}
}

func (v *view) close() {
	for _, ds := range v.handles {
		ds.Close(context.Background())
	}
	if v.done != nil {
		v.done()
	}
}

// stale reports whether the file has changed since v was built: a new
// commit, or a virtual dataset whose sources changed its extent.
func (v *view) stale() bool {
	if v.f.Generation() != v.gen {
		return true
	}
	for _, a := range v.arrays {
		if !slices.Equal(a.ds.Shape(), a.shape) {
			return true
		}
	}
	return false
}

// build renders the file's view at its current commit, reusing the
// modification times of old's documents and arrays that did not change.
func (s *Server) build(ctx context.Context, old *view) (*view, error) {
	f := s.f
	v := &view{
		f:      f,
		gen:    f.Generation(),
		blobs:  map[string]*blob{},
		arrays: map[string]*array{},
		groups: map[string]map[string]any{},
		left:   map[string]string{},
		done:   s.fileUsed(f),
	}
	now := stampOf(time.Now())
	docs := map[string]any{} // v2: the consolidated metadata

	put := func(key string, doc any) error {
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		b = append(zarrmap.ASCIIJSON(b), '\n')
		sum := sha256.Sum256(b)
		bl := &blob{data: b, etag: `"` + hex.EncodeToString(sum[:16]) + `"`, mod: now}
		if old != nil {
			if ob := old.blobs[key]; ob != nil && ob.etag == bl.etag {
				bl.mod = ob.mod
			}
		}
		v.blobs[key] = bl
		if s.version == 2 {
			docs[key] = doc
		}
		return nil
	}
	group := func(path string, attrs map[string]any) error {
		v.groups[path] = attrs
		if s.version == 3 {
			return put(join(path, "zarr.json"), zarrmap.GroupMeta(3, attrs))
		}
		if err := put(join(path, ".zgroup"), zarrmap.GroupMeta(2, attrs)); err != nil {
			return err
		}
		return put(join(path, ".zattrs"), attrs)
	}

	names, err := tree.DatasetNames(f)
	if err != nil {
		v.close()
		return nil, err
	}
	bad := zarrmap.NameErrs(names)
	rootList, err := f.Attrs()
	if err != nil {
		v.close()
		return nil, err
	}
	rootAttrs, skipped := attrsJSON(rootList)
	for _, why := range skipped {
		s.logSkip("/", why)
	}
	if err := group("", rootAttrs); err != nil {
		return nil, err
	}
	groups := map[string]bool{"": true}
	err = tree.Groups(ctx, f.Group, func(g *engine.Group, p string) (bool, error) {
		if err := zarrmap.NameErr(p); err != nil {
			s.logSkip(p, "group: "+err.Error())
			return false, nil
		}
		list, err := g.Attrs()
		if err != nil {
			return false, fmt.Errorf("group %q: %w", p, err)
		}
		attrs, skipped := attrsJSON(list)
		for _, why := range skipped {
			s.logSkip(p, why)
		}
		groups[p] = true
		return true, group(p, attrs)
	})
	if err != nil {
		v.close()
		return nil, err
	}
	for _, name := range names {
		if err := bad[name]; err != nil {
			s.logSkip(name, err.Error())
			v.left[name] = err.Error()
			continue
		}
		segs := strings.Split(name, "/")
		parentOK := true
		for i := 1; i < len(segs); i++ {
			g := strings.Join(segs[:i], "/")
			if groups[g] {
				continue
			}
			if err := zarrmap.NameErr(g); err != nil {
				parentOK = false
				break
			}
			groups[g] = true
			if err := group(g, map[string]any{}); err != nil {
				v.close()
				return nil, err
			}
		}
		if !parentOK {
			s.logSkip(name, "inside a group Zarr cannot name")
			v.left[name] = "inside a group Zarr cannot name"
			continue
		}
		a, why, err := s.openArray(ctx, name)
		if err != nil {
			v.close()
			return nil, err
		}
		if a == nil {
			s.logSkip(name, why)
			v.left[name] = why
			continue
		}
		v.handles = append(v.handles, a.ds)
		a.mod = now
		if old != nil {
			if oa := old.arrays[name]; oa != nil && old.gen == v.gen && slices.Equal(oa.shape, a.shape) {
				a.mod = oa.mod
			}
		}
		v.arrays[name] = a
		meta, err := zarrmap.ArrayMeta(s.version, a.typ, a.shape, a.chunk, a.fill, a.chain, a.attrs)
		if err == nil && s.version == 3 {
			// Zarr v3 names dimensions in the array's metadata, where
			// xarray and zarrita read them.
			meta["dimension_names"] = dimNames(name, len(a.shape), a.attrs)
		}
		if err == nil {
			err = put(join(name, metaKey(s.version)), meta)
		}
		if err != nil {
			v.close()
			return nil, err
		}
		for _, why := range a.skippedAttrs {
			s.logSkip(name, why)
		}
		if s.version == 2 {
			if err := put(join(name, ".zattrs"), dimsAttr(name, len(a.shape), a.attrs)); err != nil {
				v.close()
				return nil, err
			}
		}
	}
	if s.version == 2 {
		cons := map[string]any{"zarr_consolidated_format": 1, "metadata": docs}
		if err := put(".zmetadata", cons); err != nil {
			v.close()
			return nil, err
		}
		delete(docs, ".zmetadata")
	}
	return v, nil
}

func metaKey(version int) string {
	if version == 3 {
		return "zarr.json"
	}
	return ".zarray"
}

// join is a store key below path ("" is the root).
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "/" + key
}

// openArray opens the dataset name as an array of the view, or returns
// why Zarr cannot hold it (a nil array and no error).
func (s *Server) openArray(ctx context.Context, name string) (*array, string, error) {
	ds, err := s.f.OpenDataset(ctx, name, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		// A dataset deleted since the listing, or a virtual dataset
		// whose sources cannot be opened now: left out of this view.
		return nil, fmt.Sprintf("cannot be opened: %v", err), nil
	}
	keep := false
	defer func() {
		if !keep {
			ds.Close(ctx)
		}
	}()
	layout := ds.Layout()
	if layout == engine.Vlen {
		return nil, "variable-length dataset (no fixed-size Zarr data type)", nil
	}
	typ := ds.Type()
	if _, err := zarrmap.DataType(typ, s.version); err != nil {
		return nil, err.Error(), nil
	}
	switch sp := ds.Space(); {
	case sp == engine.SpaceNull:
		return nil, "null dataspace: Zarr has no array without elements that is not an array of shape [0]", nil
	case sp == engine.SpaceScalar && layout != engine.Chunked && layout != engine.Contiguous:
		return nil, fmt.Sprintf("scalar dataset of the %s layout", layout), nil
	}
	a := &array{
		name: name, ds: ds, typ: typ,
		shape: ds.Shape(), chunk: ds.Chunk(), fill: ds.Fill(),
		scalar: ds.Space() == engine.SpaceScalar,
	}
	list, err := ds.Attrs()
	if err != nil {
		return nil, fmt.Sprintf("attributes: %v", err), nil
	}
	a.attrs, a.skippedAttrs = attrsJSON(list)
	if len(a.fill) != typ.Size() {
		a.fill = make([]byte, typ.Size())
	}
	if layout == engine.Virtual {
		a.chunk = zarrmap.VirtualChunk(ctx, s.f, ds)
	}
	a.chunkBytes = typ.Size()
	for _, c := range a.chunk {
		if c == 0 {
			return nil, fmt.Sprintf("chunk shape %v has a zero dimension", a.chunk), nil
		}
		if a.chunkBytes > maxChunkBytes/int(min(c, maxChunkBytes)) {
			return nil, fmt.Sprintf("chunk shape %v holds more than %d bytes", a.chunk, maxChunkBytes), nil
		}
		a.chunkBytes *= int(c)
	}
	if layout == engine.Chunked {
		p := zarrmap.PlanOf(ds, s.version)
		if p.Copy {
			a.copy, a.wrap, a.chain = true, p.Wrap, p.Chain
		} else {
			s.logOnce(slog.LevelInfo, "zarr view: chunks served decoded, no codec declared", name, p.Why)
		}
	}
	a.plain = !compresses(a.chain)
	keep = true
	return a, "", nil
}

// maxChunkBytes bounds the decoded size of one served chunk: a chunk is
// held whole in memory while it is answered.
const maxChunkBytes = 1 << 30

// attrsJSON converts attributes to a Zarr attribute object. An attribute
// with no Zarr form is left out and named in skipped with why, where an
// export would refuse the whole object: a served view keeps what it can
// and says what it left out.
func attrsJSON(attrs []engine.Attr) (out map[string]any, skipped []string) {
	out, _ = zarrmap.AttrsJSON(attrs, func(err error) error {
		skipped = append(skipped, err.Error())
		return nil
	})
	return out, skipped
}

// dimsAttrName is the attribute xarray reads a Zarr v2 array's dimension
// names from; without it xarray.open_zarr refuses the array.
const dimsAttrName = "_ARRAY_DIMENSIONS"

// dimsAttr returns a v2 array's attributes with dimension names for
// xarray, unless the dataset has its own (a file imported from a store
// xarray wrote): "<base>_dim_<d>", <base> the dataset's last name
// component, so that no two arrays of a group share a dimension name (an
// xarray dataset requires a shared name to have one length, and scc
// datasets share no dimensions).
func dimsAttr(name string, rank int, attrs map[string]any) map[string]any {
	if _, ok := attrs[dimsAttrName]; ok {
		return attrs
	}
	out := make(map[string]any, len(attrs)+1)
	for k, v := range attrs {
		out[k] = v
	}
	out[dimsAttrName] = dimNames(name, rank, attrs)
	return out
}

// dimNames returns the names of a rank-dimensional array's dimensions:
// the dataset's own _ARRAY_DIMENSIONS when it is a list of rank strings
// (a file imported from a store xarray wrote), else the names dimsAttr
// gives in v2, so that both views of one file name them alike.
func dimNames(name string, rank int, attrs map[string]any) []string {
	dims := make([]string, rank)
	if own, ok := attrs[dimsAttrName].([]any); ok && len(own) == rank {
		for d, v := range own {
			if dims[d], ok = v.(string); !ok {
				break
			}
		}
		if ok {
			return dims
		}
	}
	base := name[strings.LastIndexByte(name, '/')+1:]
	for d := range dims {
		dims[d] = fmt.Sprintf("%s_dim_%d", base, d)
	}
	return dims
}
