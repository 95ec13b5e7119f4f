package zarr

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/zarrmap"
)

// maxMetaBytes bounds a metadata document read from a store.
const maxMetaBytes = 16 << 20

// arrayMeta is an array's metadata, v2 or v3, checked and reduced to what
// import needs.
type arrayMeta struct {
	shape, chunk []uint64
	grid         []uint64 // chunks per dimension
	chunkBytes   int      // a whole chunk decoded
	typ          engine.Type
	bigEndian    bool
	// swaps: the big-endian numbers of a structured dtype's element,
	// each reversed on its own (nil: the whole element, swapUnit).
	swaps []swapSpan
	// scalar: a zero-dimensional array (shape []), imported as a scalar
	// dataset over the storage of its one chunk: shape and chunk [1].
	scalar bool
	fill   []byte // nil: zero
	// time: the elements are numpy datetime64 or timedelta64 values,
	// imported as Int64 marked by zarrmap.DtypeAttr.
	time *zarrmap.NumpyTime
	// vlen: the elements are variable-length, in the format of this
	// numcodecs codec ("vlen-utf8", "vlen-bytes"; "object" while an
	// object array's codec is still unread); ucs4: they are numpy
	// unicode of this many UTF-32 code points. Both import onto scc's
	// variable-length layout (strings.go).
	vlen  string
	ucs4  int
	chain []codec
	// order, when set, says a stored chunk holds its elements with the
	// axes permuted (the v3 transpose codec's order; Fortran order is the
	// reversed axes): import transposes them into C order.
	order   []int
	fortran bool
	prefix  string // chunk keys: prefix+sep before the coordinates ("c" in v3's default encoding)
	sep     string // "." or "/"
	attrs   []engine.Attr
	notes   []string
	// shard is the sharding_indexed codec of a sharded array (its
	// chunks are shards), nil for any other.
	shard *shardMeta
	// badAttrs are the refusals of attribute names the engine cannot
	// hold (left out and noted; under Options.Strict they skip the
	// array, which fails the import).
	badAttrs []error
}

func (m *arrayMeta) setFill(v any, what string) error {
	if v == nil {
		m.notes = append(m.notes, "fill_value null: unwritten chunks read as zero")
		return nil
	}
	if m.vlen != "" || m.ucs4 > 0 {
		return m.setStringFill(v)
	}
	if m.time != nil && v == "NaT" {
		// numpy's "not a time", the smallest int64.
		m.fill = binary.LittleEndian.AppendUint64(nil, 1<<63)
		return nil
	}
	b, err := parseElem(m.typ, v)
	if err != nil {
		return fmt.Errorf("%s: \"fill_value\": %w", what, err)
	}
	if m.swaps != nil {
		// A structured fill is the element's bytes in the stored order.
		b = m.swap(b)
	}
	m.fill = b
	return nil
}

// setAttrs checks a node's attributes (before any chunk is written: a
// typed attribute out of its range fails the array).
func (m *arrayMeta) setAttrs(raw map[string]any) error {
	attrs, skipped, bad, err := jsonAttrs(raw)
	if err != nil {
		return err
	}
	m.attrs, m.badAttrs = attrs, bad
	for _, s := range skipped {
		m.notes = append(m.notes, "attribute left out: "+s)
	}
	return nil
}

type node struct {
	key   string // "" for the root
	array bool
	v     int
	err   error // the node's metadata could not be read as either
}

// discover walks the store's directories (not following symlinked ones)
// for groups and arrays.
func discover(ctx context.Context, s *store) ([]node, error) {
	var nodes []node
	err := filepath.WalkDir(s.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return ioErr(err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(s.root, path)
		if err != nil {
			return ioErr(err)
		}
		key := filepath.ToSlash(rel)
		if key == "." {
			key = ""
		}
		for _, doc := range []string{".zarray", ".zgroup", "zarr.json"} {
			ok, err := s.exists(joinKey(key, doc))
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			n := node{key: key, array: doc == ".zarray", v: 2}
			if doc == "zarr.json" {
				n.v = 3
				b, err := s.read(ctx, joinKey(key, doc), maxMetaBytes)
				if err != nil {
					return err
				}
				// A document that does not decode (ErrCorrupt) or that
				// scc cannot hold (ErrUnsupported) leaves out its node,
				// named, not the store.
				var nt string
				if nt, _, _, n.err = decodeV3(b); n.err == nil {
					n.array = nt == "array"
				}
			}
			nodes = append(nodes, n)
			if n.array || n.err != nil {
				return fs.SkipDir
			}
			return nil
		}
		return nil
	})
	return nodes, err
}

func nodeName(s *store, key string) string {
	if key == "" {
		return strings.TrimSuffix(filepath.Base(s.root), ".zarr")
	}
	return key
}

// Import reads the Zarr store at dir (v2 or v3: groups, arrays, attributes)
// into f, one dataset per array named by its path in the store and one
// group, with its attributes, per group, and flushes f.
//
// The store is hostile input: every metadata document is checked against
// the Zarr specifications and every key resolved inside dir (see store)
// before anything is trusted; a key that leads outside the store or to
// a file that is not regular fails the import (ErrUnsafe, ErrNotRegular)
// before any chunk is written, and so does a chunk that does not decode
// (ErrCorrupt). An array scc cannot hold (a data type, a codec, nested sharding) is skipped and
// named in Report.Skipped with the reason, and so is an array whose
// metadata breaks the specification (ErrCorrupt: a fill value out of its
// type's range); the import fails only when it skipped every array, with
// an error matching each skipped array's. A failed import may
// have written part of f: the caller discards f.
func Import(ctx context.Context, dir string, f *engine.File, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s, err := openStore(dir, o)
	if err != nil {
		return nil, err
	}
	nodes, err := discover(ctx, s)
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: %s holds no Zarr group or array", ErrUnsupported, dir)
	}
	rep := &Report{}
	type planned struct {
		name, key string
		m         *arrayMeta
	}
	var arrays []planned
	type group struct {
		key   string
		attrs []engine.Attr
	}
	var groups []group
	// Every document is read and checked before anything is written.
	for _, n := range nodes {
		name := nodeName(s, n.key)
		if n.key != "" {
			// A key that is no scc name is left out, never renamed; a
			// group's arrays are left out by their own keys.
			if err := engine.ValidateName(n.key); err != nil {
				err = fmt.Errorf("%w: %w", ErrUnsupported, err)
				reason := err.Error()
				if !n.array {
					reason = "group: " + reason
				}
				rep.Skipped = append(rep.Skipped, Skipped{Name: name, Reason: reason, err: err})
				continue
			}
		}
		if n.err != nil {
			rep.Skipped = append(rep.Skipped, Skipped{Name: name, Reason: n.err.Error(), err: n.err})
			continue
		}
		if !n.array {
			attrs, bad, err := groupAttrs(ctx, s, n, rep)
			if err != nil {
				return nil, fmt.Errorf("group %q: %w", name, err)
			}
			if o.Strict && len(bad) > 0 {
				rep.Skipped = append(rep.Skipped, Skipped{Name: name, Reason: "group: " + bad[0].Error(), err: bad[0]})
			}
			groups = append(groups, group{n.key, attrs})
			continue
		}
		m, err := readArray(ctx, s, n)
		if err == nil && o.Strict && len(m.badAttrs) > 0 {
			err = m.badAttrs[0]
		}
		if errors.Is(err, ErrUnsupported) || errors.Is(err, ErrCorrupt) {
			// One array's metadata that breaks the specification (a
			// fill value out of range) costs that array only; a store
			// that cannot be read safely (ErrUnsafe, ErrNotRegular, an
			// I/O error) still fails.
			rep.Skipped = append(rep.Skipped, Skipped{Name: name, Reason: err.Error(), err: err})
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("array %q: %w", name, err)
		}
		arrays = append(arrays, planned{name, n.key, m})
	}
	if o.Strict && len(rep.Skipped) > 0 {
		sort.Slice(rep.Skipped, func(i, j int) bool { return rep.Skipped[i].Name < rep.Skipped[j].Name })
		return rep, fmt.Errorf("array %q (strict): %w", rep.Skipped[0].Name, rep.Skipped[0].err)
	}
	// discover lists parents before their children, so each group's
	// parent exists when it is created.
	for _, g := range groups {
		if err := importGroup(ctx, f, g.key, g.attrs, rep); err != nil {
			return nil, err
		}
	}
	for _, a := range arrays {
		dr, err := importArray(ctx, s, f, a.name, a.key, a.m, o.workers(), o.Verify)
		if errors.Is(err, errSkip) && !o.Strict {
			rep.Skipped = append(rep.Skipped, Skipped{Name: a.name, Reason: err.Error(), err: err})
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("array %q: %w", a.name, err)
		}
		rep.Datasets = append(rep.Datasets, dr)
	}
	sort.Slice(rep.Skipped, func(i, j int) bool { return rep.Skipped[i].Name < rep.Skipped[j].Name })
	if len(rep.Datasets) == 0 && len(rep.Skipped) > 0 {
		return rep, noneImported(dir, rep.Skipped)
	}
	return rep, f.Flush(ctx)
}

// noneImportedError is the failure of an import that skipped every array:
// it matches each skipped array's error (ErrUnsupported, ErrCorrupt).
type noneImportedError struct {
	msg  string
	errs []error
}

func (e *noneImportedError) Error() string   { return e.msg }
func (e *noneImportedError) Unwrap() []error { return e.errs }

func noneImported(dir string, skipped []Skipped) error {
	var why []string
	var errs []error
	for _, sk := range skipped {
		why = append(why, fmt.Sprintf("%s: %s", sk.Name, sk.Reason))
		if sk.err != nil {
			errs = append(errs, sk.err)
		}
	}
	if len(errs) == 0 {
		errs = []error{ErrUnsupported}
	}
	return &noneImportedError{fmt.Sprintf("zarr: no array of %s could be imported (%s)", dir, strings.Join(why, "; ")), errs}
}

// errSkip marks an array the engine refused to create (before any of its
// chunks was written): it is skipped like an unsupported one.
var errSkip = fmt.Errorf("%w: the engine refused the dataset", ErrUnsupported)

// groupAttrs reads and checks a group's metadata and returns its
// attributes; those with no scc form are named in rep.Notes, and the
// refusals of those whose names the engine refuses returned too.
func groupAttrs(ctx context.Context, s *store, n node, rep *Report) ([]engine.Attr, []error, error) {
	var raw map[string]any
	if n.v == 3 {
		b, err := s.read(ctx, joinKey(n.key, "zarr.json"), maxMetaBytes)
		if err != nil {
			return nil, nil, err
		}
		if _, _, raw, err = decodeV3(b); err != nil {
			return nil, nil, err
		}
	} else {
		b, err := s.read(ctx, joinKey(n.key, ".zgroup"), maxMetaBytes)
		if err != nil {
			return nil, nil, err
		}
		z, err := decodeObject(b, ".zgroup")
		if err != nil {
			return nil, nil, err
		}
		if err := zarrFormat(z, ".zgroup", 2); err != nil {
			return nil, nil, err
		}
		b, err = s.read(ctx, joinKey(n.key, ".zattrs"), maxMetaBytes)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, err
		}
		if err == nil {
			if raw, err = decodeAttrs(b, ".zattrs"); err != nil {
				return nil, nil, err
			}
		}
	}
	list, skipped, bad, err := jsonAttrs(raw)
	if err != nil {
		return nil, nil, err
	}
	what := "file attribute"
	if n.key != "" {
		what = fmt.Sprintf("group %q attribute", n.key)
	}
	for _, sk := range skipped {
		rep.Notes = append(rep.Notes, what+" left out: "+sk)
	}
	return list, bad, nil
}

// importGroup creates the group at key ("" is the root: the file's
// attributes) with its attributes. A file whose names are not paths takes
// no groups: the group's attributes are then left out and noted.
func importGroup(ctx context.Context, f *engine.File, key string, attrs []engine.Attr, rep *Report) error {
	g := f.Group
	// A directory with no group document on the way is an implicit group
	// (Zarr v2): it is created too, without attributes.
	segs := strings.Split(key, "/")
	for i := 1; key != "" && i <= len(segs); i++ {
		p := strings.Join(segs[:i], "/")
		sub, err := f.OpenGroup(ctx, p)
		if errors.Is(err, engine.ErrNotFound) {
			sub, err = f.CreateGroup(ctx, p)
		}
		if errors.Is(err, engine.ErrInvalid) {
			if len(attrs) > 0 {
				rep.Notes = append(rep.Notes, fmt.Sprintf("group %q: its attributes were left out (%v)", key, err))
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("group %q: %w", key, err)
		}
		g = sub
	}
	for _, a := range attrs {
		if err := g.SetAttr(ctx, a.Name, a.Value); err != nil {
			if key == "" {
				return fmt.Errorf("file attribute %q: %w", a.Name, err)
			}
			return fmt.Errorf("group %q attribute %q: %w", key, a.Name, err)
		}
	}
	return nil
}

// readArray reads and checks an array's metadata and attributes.
func readArray(ctx context.Context, s *store, n node) (*arrayMeta, error) {
	var m *arrayMeta
	var raw map[string]any
	what := ".zarray"
	if n.v == 2 {
		b, err := s.read(ctx, joinKey(n.key, ".zarray"), maxMetaBytes)
		if err != nil {
			return nil, err
		}
		if m, err = decodeV2Array(b); err != nil {
			return nil, err
		}
		m.fortran = m.order != nil
		b, err = s.read(ctx, joinKey(n.key, ".zattrs"), maxMetaBytes)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if err == nil {
			if raw, err = decodeAttrs(b, ".zattrs"); err != nil {
				return nil, err
			}
		}
	} else {
		what = "zarr.json"
		b, err := s.read(ctx, joinKey(n.key, "zarr.json"), maxMetaBytes)
		if err != nil {
			return nil, err
		}
		if _, m, raw, err = decodeV3(b); err != nil {
			return nil, err
		}
	}
	if err := m.setAttrs(raw); err != nil {
		return nil, err
	}
	if m.time != nil {
		m.notes = append(m.notes, fmt.Sprintf("numpy %s: imported as int64, the type in attribute %s", m.time.Mark(), zarrmap.DtypeAttr))
		m.attrs = slices.DeleteFunc(m.attrs, func(a engine.Attr) bool { return a.Name == zarrmap.DtypeAttr })
		m.attrs = append(m.attrs, engine.Attr{Name: zarrmap.DtypeAttr, Value: engine.StringAttr(m.time.Mark())})
	}
	for _, a := range m.attrs {
		// An exported bitfield: the unsigned integer of its size.
		if a.Name != zarrmap.BitfieldAttr || m.time != nil {
			continue
		}
		bits, err := a.Value.Float64s()
		if bf := engine.Bitfield(m.typ.Size()); err != nil || len(bits) != 1 || bits[0] != float64(8*m.typ.Size()) || zarrmap.BitfieldBase(bf) != m.typ {
			m.notes = append(m.notes, fmt.Sprintf("imported as %v, not as a bitfield: attribute %s is not the type's %d bits", m.typ, zarrmap.BitfieldAttr, 8*m.typ.Size()))
			break
		}
		m.typ = engine.Bitfield(m.typ.Size())
		m.attrs = slices.DeleteFunc(m.attrs, func(a engine.Attr) bool { return a.Name == zarrmap.BitfieldAttr })
		break
	}
	for _, a := range m.attrs {
		// An exported enum: the integers and the names in EnumAttr.
		if a.Name != zarrmap.EnumAttr || m.typ.Class() != engine.ClassInteger || m.time != nil {
			continue
		}
		s, _ := a.Value.Str()
		t, err := zarrmap.ParseEnum(s, m.typ)
		if err != nil {
			m.notes = append(m.notes, fmt.Sprintf("imported as %v, not as an enum: %v", m.typ, err))
			break
		}
		m.typ = t
		m.attrs = slices.DeleteFunc(m.attrs, func(a engine.Attr) bool { return a.Name == zarrmap.EnumAttr })
		break
	}
	var err error
	if m.grid, err = checkShape(m, what); err != nil {
		return nil, err
	}
	return m, nil
}

// importPlan maps a Zarr chain onto an scc pipeline; copy says whether a
// chunk's bytes are the pipeline's output (after unwrapping a last gzip
// stage). zlibRaw says the pipeline is [shuffle+]zlib, whose chunks are
// stored without inflating them (engine.Dataset.WriteChunkRawZlib).
func importPlan(m *arrayMeta) (filters []engine.Filter, copy bool, unwrapID, why string, zlibRaw bool) {
	copy = !m.bigEndian && m.order == nil
	switch {
	case m.order != nil && m.fortran:
		why = "Fortran order: transposed into C order"
	case m.order != nil:
		why = fmt.Sprintf("transpose codec %v: transposed into C order", m.order)
	case m.bigEndian:
		why = "big-endian elements"
	}
	for i, c := range m.chain {
		last := i == len(m.chain)-1
		switch c.id {
		case "shuffle":
			filters = append(filters, engine.Shuffle())
			if c.elemSize != m.typ.Size() && copy {
				copy, why = false, fmt.Sprintf("shuffle element size %d differs from the data type's", c.elemSize)
			}
		case "zlib":
			// The same stream as scc's Zlib filter: copied as it is.
			filters = append(filters, engine.Zlib(min(max(c.level, 1), 9)))
			zlibRaw = last && (i == 0 || i == 1 && m.chain[0].id == "shuffle")
		case "gzip":
			filters = append(filters, engine.Deflate(min(max(c.level, 1), 9)))
			if last {
				unwrapID = c.id
			} else if copy {
				copy, why = false, c.id+" is not the last codec"
			}
		case "zstd":
			// numcodecs' levels are zstd's, and so are scc's; the level
			// only matters to later writes of the dataset.
			filters = append(filters, engine.Zstd(max(min(c.level, 22), -131072)))
		case "lz4":
			filters = append(filters, engine.LZ4())
		case "crc32c":
			filters = append(filters, engine.CRC32C())
		case "bz2":
			// scc has no bzip2 stage: decoded and stored with zstd.
			filters = append(filters, engine.Zstd(0))
			if copy {
				copy, why = false, "bz2 decoded and stored with zstd"
			}
		case "delta":
			// An elementwise filter: decoded, the elements stored with
			// the stages that follow it.
			if copy {
				copy, why = false, "delta filter decoded"
			}
		case "blosc":
			// scc has no Blosc stage: decoded and stored with the stage
			// nearest to the frame's own compressor.
			if c.shuffle != 0 {
				filters = append(filters, engine.Shuffle())
			}
			switch c.cname {
			case "zstd":
				filters = append(filters, engine.Zstd(1))
			case "zlib":
				filters = append(filters, engine.Zlib(min(max(c.level, 1), 9)))
			default:
				filters = append(filters, engine.LZ4())
			}
			if copy {
				copy, why = false, "blosc frames decoded and re-encoded"
			}
		}
	}
	return filters, copy, unwrapID, why, zlibRaw && copy
}

// createArray creates the dataset an array imports into, with the array's
// attributes: a spec the engine refuses skips the array (errSkip), any
// other error fails the import.
func createArray(ctx context.Context, f *engine.File, name string, spec engine.DatasetSpec, m *arrayMeta) (*engine.Dataset, error) {
	ds, err := f.CreateDataset(ctx, name, spec)
	if errors.Is(err, engine.ErrInvalid) {
		return nil, fmt.Errorf("%w (%w)", errSkip, err)
	}
	if err != nil {
		return nil, err
	}
	for _, a := range m.attrs {
		if err := ds.SetAttr(ctx, a.Name, a.Value); err != nil {
			ds.Close(ctx)
			return nil, fmt.Errorf("attribute %q: %w", a.Name, err)
		}
	}
	return ds, nil
}

func importArray(ctx context.Context, s *store, f *engine.File, name, key string, m *arrayMeta, workers int, verify bool) (DatasetReport, error) {
	if m.vlen != "" || m.ucs4 > 0 {
		return importStrings(ctx, s, f, name, key, m, workers)
	}
	if m.shard != nil {
		return importSharded(ctx, s, f, name, key, m, workers)
	}
	dr := DatasetReport{Name: name, Codecs: chainString(m.chain), Notes: m.notes}
	filters, copyOK, unwrapID, why, zlibRaw := importPlan(m)
	dr.Why = why
	spec := engine.DatasetSpec{Type: m.typ, Shape: m.shape, Chunk: m.chunk, Filters: filters, Fill: m.fill}
	if m.scalar {
		spec.Shape, spec.Chunk, spec.Space = nil, nil, engine.SpaceScalar
	}
	ds, err := createArray(ctx, f, name, spec, m)
	if err != nil {
		return dr, err
	}
	defer ds.Close(ctx)
	es := m.typ.Size()
	chunkBytes := m.chunkBytes
	// A stored chunk is at most its decoded size plus what a codec adds
	// to incompressible data (well under 1/8, plus headers).
	bound := int64(chunkBytes) + int64(chunkBytes)/8 + 64<<10
	coords := [][]uint64{{0}} // a scalar's one chunk, if it is there
	if !m.scalar {
		if coords, err = s.listChunks(ctx, key, m, m.grid); err != nil {
			return dr, err
		}
	}
	var copied, rewrapped, reenc, untouched, count atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, c := range coords {
		g.Go(func() error {
			ckey := joinKey(key, chunkKey(m, c))
			b, err := s.read(gctx, ckey, bound)
			if errors.Is(err, fs.ErrNotExist) {
				return nil // gone since the listing: the fill value, as in scc
			}
			if err != nil {
				return fmt.Errorf("chunk %v: %w", c, err)
			}
			count.Add(1)
			if zlibRaw && !verify {
				verified, err := ds.WriteChunkRawZlib(gctx, c, b, 0)
				if err == nil {
					copied.Add(1)
					if !verified {
						untouched.Add(1)
					}
					return nil
				}
				if !errors.Is(err, engine.ErrInvalid) {
					return err
				}
				// A stream that does not shrink the chunk (numcodecs
				// keeps those), or edge padding other than the fill
				// value: decode below.
			} else if copyOK || zlibRaw {
				data := b
				if unwrapID != "" {
					if data, err = unwrap(unwrapID, b, chunkBytes); err != nil {
						return fmt.Errorf("chunk %v: %w", c, err)
					}
				}
				err := ds.WriteChunkRaw(gctx, c, data, 0)
				if err == nil {
					if unwrapID != "" {
						rewrapped.Add(1)
					} else {
						copied.Add(1)
					}
					return nil
				}
				if !errors.Is(err, engine.ErrInvalid) {
					return err
				}
				if os.Getenv("SCC_ZARR_DEBUG") != "" {
					fmt.Fprintln(os.Stderr, "raw write refused:", c, err)
				}
				// Not scc's form of those codecs (a frame scc does not
				// read, padding that is not the fill value): decode.
			}
			raw, err := decodeChain(m.chain, b, chunkBytes)
			if err != nil {
				return fmt.Errorf("chunk %v: %w", c, err)
			}
			if m.bigEndian {
				raw = m.swap(raw)
			}
			if m.order != nil {
				raw = untranspose(raw, m.chunk, m.order, es)
			}
			start, cnt, edge := zarrmap.ChunkBox(c, m.chunk, m.shape)
			part := raw
			if edge {
				n := es
				for _, x := range cnt {
					n *= int(x)
				}
				part = make([]byte, n)
				zarrmap.CopyBox(raw, m.chunk, part, cnt, es, true)
			}
			reenc.Add(1)
			return ds.Write(gctx, engine.Box(start, cnt), part)
		})
	}
	if err := g.Wait(); err != nil {
		return dr, err
	}
	dr.Chunks = int(count.Load())
	dr.Copied, dr.Rewrapped, dr.Reencoded = int(copied.Load()), int(rewrapped.Load()), int(reenc.Load())
	dr.Untouched = int(untouched.Load())
	dr.Bytes = count.Load() * int64(chunkBytes)
	if dr.Reencoded > 0 && dr.Why == "" {
		dr.Why = "chunks not in scc's form of the codecs (or edge padding other than the fill value)"
	}
	return dr, nil
}

// chunkKey is the key of chunk c relative to its array.
func chunkKey(m *arrayMeta, c []uint64) string {
	if m.scalar {
		// A zero-dimensional array's one chunk: "0" in v2 (zarr-python
		// 2's key) and v3's v2 encoding, the bare prefix "c" in v3's
		// default encoding.
		if m.prefix != "" {
			return m.prefix
		}
		return "0"
	}
	parts := make([]string, 0, len(c)+1)
	if m.prefix != "" {
		parts = append(parts, m.prefix)
	}
	for _, x := range c {
		parts = append(parts, fmt.Sprint(x))
	}
	return strings.Join(parts, m.sep)
}

// swap is an element buffer of a big-endian store in little-endian order.
func (m *arrayMeta) swap(b []byte) []byte {
	if m.swaps != nil {
		return swapParts(b, m.typ.Size(), m.swaps)
	}
	return swapBytes(b, swapUnit(m.typ))
}

func swapBytes(b []byte, es int) []byte {
	out := make([]byte, len(b))
	for i := 0; i+es <= len(b); i += es {
		for j := 0; j < es; j++ {
			out[i+j] = b[i+es-1-j]
		}
	}
	return out
}
