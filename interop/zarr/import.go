package zarr

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/scc-dev/scc/engine"
)

// maxGrid bounds the chunk grid of an imported array.
const maxGrid = 1 << 26

// maxMetaBytes bounds a metadata document read from a store.
const maxMetaBytes = 16 << 20

// arrayMeta is an array's metadata, v2 or v3, reduced to what import needs.
type arrayMeta struct {
	shape, chunk []uint64
	typ          engine.Type
	bigEndian    bool
	fill         []byte // nil: zero
	chain        []codec
	attrs        map[string]any
	key          func(coords []uint64) string // chunk file relative to the array
	notes        []string
}

func readJSON(path string, v any) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Size() > maxMetaBytes {
		return fmt.Errorf("%w: %s is %d bytes", ErrCorrupt, path, fi.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	return nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// Import reads the Zarr store at dir (v2 or v3: groups, arrays, attributes)
// into f, one dataset per array named by its path in the store, and
// flushes f. Arrays that scc cannot hold (data types, codecs) fail the
// import with ErrUnsupported before any of their chunks is written.
func Import(ctx context.Context, dir string, f *engine.File, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{}
	type node struct {
		rel   string
		array bool
		v     int
	}
	var nodes []node
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			rel = ""
		}
		switch {
		case exists(filepath.Join(path, ".zarray")):
			nodes = append(nodes, node{rel, true, 2})
			return fs.SkipDir
		case exists(filepath.Join(path, ".zgroup")):
			nodes = append(nodes, node{rel, false, 2})
		case exists(filepath.Join(path, "zarr.json")):
			var m struct {
				NodeType string `json:"node_type"`
			}
			if err := readJSON(filepath.Join(path, "zarr.json"), &m); err != nil {
				return err
			}
			nodes = append(nodes, node{rel, m.NodeType == "array", 3})
			if m.NodeType == "array" {
				return fs.SkipDir
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: %s holds no Zarr group or array", ErrUnsupported, dir)
	}
	for _, n := range nodes {
		if n.array {
			continue
		}
		attrs, err := groupAttrs(filepath.Join(dir, filepath.FromSlash(n.rel)), n.v)
		if err != nil {
			return nil, err
		}
		if n.rel != "" {
			if len(attrs) > 0 {
				rep.Notes = append(rep.Notes, fmt.Sprintf("group %q: its attributes were left out (scc has no groups)", n.rel))
			}
			continue
		}
		list, skipped := jsonAttrs(attrs)
		for _, s := range skipped {
			rep.Notes = append(rep.Notes, "file attribute left out: "+s)
		}
		for _, a := range list {
			if err := f.SetAttr(ctx, a.Name, a.Value); err != nil {
				return nil, fmt.Errorf("file attribute %q: %w", a.Name, err)
			}
		}
	}
	for _, n := range nodes {
		if !n.array {
			continue
		}
		name := n.rel
		if name == "" {
			name = strings.TrimSuffix(filepath.Base(filepath.Clean(dir)), ".zarr")
		}
		path := filepath.Join(dir, filepath.FromSlash(n.rel))
		var m *arrayMeta
		if n.v == 2 {
			m, err = readV2(path)
		} else {
			m, err = readV3(path)
		}
		if err != nil {
			return nil, fmt.Errorf("array %q: %w", name, err)
		}
		dr, err := importArray(ctx, f, name, path, m, o.workers(), o.Verify)
		if err != nil {
			return nil, fmt.Errorf("array %q: %w", name, err)
		}
		rep.Datasets = append(rep.Datasets, dr)
	}
	return rep, f.Flush(ctx)
}

func groupAttrs(path string, v int) (map[string]any, error) {
	if v == 3 {
		var m struct {
			Attributes map[string]any `json:"attributes"`
		}
		err := readJSON(filepath.Join(path, "zarr.json"), &m)
		return m.Attributes, err
	}
	var m map[string]any
	if err := readJSON(filepath.Join(path, ".zattrs"), &m); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return m, nil
}

func dims(raw []json.Number, what string) ([]uint64, error) {
	out := make([]uint64, len(raw))
	for i, n := range raw {
		u, err := parseElem(engine.Uint64, n)
		if err != nil {
			return nil, fmt.Errorf("%w: %s %v", ErrCorrupt, what, raw)
		}
		for k := 7; k >= 0; k-- {
			out[i] = out[i]<<8 | uint64(u[k])
		}
	}
	return out, nil
}

// codecFrom maps one numcodecs (v2) or v3 codec onto the chain; nil for the
// v3 "bytes" codec, which import handles itself.
func codecFrom(id string, cfg map[string]any, elemSize int) (codec, error) {
	level := func() int {
		if n, ok := cfg["level"].(json.Number); ok {
			if l, err := n.Int64(); err == nil {
				return int(l)
			}
		}
		return 0
	}
	switch strings.TrimPrefix(id, "numcodecs.") {
	case "shuffle":
		es := elemSize
		if n, ok := cfg["elementsize"].(json.Number); ok {
			if l, err := n.Int64(); err == nil {
				es = int(l)
			}
		}
		return codec{id: "shuffle", elemSize: es}, nil
	case "zlib":
		return codec{id: "zlib", level: level()}, nil
	case "gzip":
		return codec{id: "gzip", level: level()}, nil
	case "zstd":
		return codec{id: "zstd", level: level()}, nil
	case "lz4":
		return codec{id: "lz4"}, nil
	case "crc32c":
		if id == "crc32c" {
			return codec{id: "crc32c"}, nil
		}
	}
	return codec{}, fmt.Errorf("%w: codec %q (scc maps shuffle, zlib, gzip, zstd, lz4 and crc32c)", ErrUnsupported, id)
}

func readV2(path string) (*arrayMeta, error) {
	var z struct {
		ZarrFormat int              `json:"zarr_format"`
		Shape      []json.Number    `json:"shape"`
		Chunks     []json.Number    `json:"chunks"`
		Dtype      any              `json:"dtype"`
		Fill       any              `json:"fill_value"`
		Order      string           `json:"order"`
		Compressor map[string]any   `json:"compressor"`
		Filters    []map[string]any `json:"filters"`
		Sep        string           `json:"dimension_separator"`
	}
	if err := readJSON(filepath.Join(path, ".zarray"), &z); err != nil {
		return nil, err
	}
	if z.ZarrFormat != 2 {
		return nil, fmt.Errorf("%w: .zarray zarr_format %d", ErrCorrupt, z.ZarrFormat)
	}
	ds, ok := z.Dtype.(string)
	if !ok {
		return nil, fmt.Errorf("%w: structured dtype %v", ErrUnsupported, z.Dtype)
	}
	m := &arrayMeta{}
	var err error
	if m.typ, m.bigEndian, err = parseV2Dtype(ds); err != nil {
		return nil, err
	}
	if z.Order != "C" {
		return nil, fmt.Errorf("%w: order %q (scc stores C order)", ErrUnsupported, z.Order)
	}
	if m.shape, err = dims(z.Shape, "shape"); err != nil {
		return nil, err
	}
	if m.chunk, err = dims(z.Chunks, "chunks"); err != nil {
		return nil, err
	}
	for _, fc := range append(z.Filters, z.Compressor) {
		if fc == nil {
			continue
		}
		id, _ := fc["id"].(string)
		c, err := codecFrom(id, fc, m.typ.Size())
		if err != nil {
			return nil, err
		}
		m.chain = append(m.chain, c)
	}
	if err := m.setFill(z.Fill); err != nil {
		return nil, err
	}
	sep := z.Sep
	if sep == "" {
		sep = "."
	}
	m.key = func(c []uint64) string { return joinCoords(c, sep) }
	if exists(filepath.Join(path, ".zattrs")) {
		if err := readJSON(filepath.Join(path, ".zattrs"), &m.attrs); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *arrayMeta) setFill(v any) error {
	if v == nil {
		m.notes = append(m.notes, "fill_value null: unwritten chunks read as zero")
		return nil
	}
	b, err := parseElem(m.typ, v)
	if err != nil {
		return fmt.Errorf("fill_value: %w", err)
	}
	m.fill = b
	return nil
}

func joinCoords(c []uint64, sep string) string {
	parts := make([]string, len(c))
	for i, x := range c {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, sep)
}

func readV3(path string) (*arrayMeta, error) {
	var z struct {
		Shape     []json.Number `json:"shape"`
		DataType  any           `json:"data_type"`
		ChunkGrid struct {
			Name string `json:"name"`
			Cfg  struct {
				ChunkShape []json.Number `json:"chunk_shape"`
			} `json:"configuration"`
		} `json:"chunk_grid"`
		KeyEnc struct {
			Name string `json:"name"`
			Cfg  struct {
				Sep string `json:"separator"`
			} `json:"configuration"`
		} `json:"chunk_key_encoding"`
		Fill       any              `json:"fill_value"`
		Codecs     []map[string]any `json:"codecs"`
		Attributes map[string]any   `json:"attributes"`
	}
	if err := readJSON(filepath.Join(path, "zarr.json"), &z); err != nil {
		return nil, err
	}
	dt, ok := z.DataType.(string)
	if !ok {
		return nil, fmt.Errorf("%w: data_type %v", ErrUnsupported, z.DataType)
	}
	m := &arrayMeta{attrs: z.Attributes}
	var err error
	if m.typ, err = parseV3Type(dt); err != nil {
		return nil, err
	}
	if z.ChunkGrid.Name != "regular" {
		return nil, fmt.Errorf("%w: chunk grid %q", ErrUnsupported, z.ChunkGrid.Name)
	}
	if m.shape, err = dims(z.Shape, "shape"); err != nil {
		return nil, err
	}
	if m.chunk, err = dims(z.ChunkGrid.Cfg.ChunkShape, "chunk_shape"); err != nil {
		return nil, err
	}
	sawBytes := false
	for _, c := range z.Codecs {
		name, _ := c["name"].(string)
		cfg, _ := c["configuration"].(map[string]any)
		if name == "bytes" {
			sawBytes = true
			if e, _ := cfg["endian"].(string); e == "big" {
				m.bigEndian = m.typ.Size() > 1
			}
			continue
		}
		if !sawBytes {
			return nil, fmt.Errorf("%w: array-to-array codec %q", ErrUnsupported, name)
		}
		cc, err := codecFrom(name, cfg, m.typ.Size())
		if err != nil {
			return nil, err
		}
		m.chain = append(m.chain, cc)
	}
	if !sawBytes {
		return nil, fmt.Errorf("%w: no \"bytes\" codec", ErrUnsupported)
	}
	if err := m.setFill(z.Fill); err != nil {
		return nil, err
	}
	sep := z.KeyEnc.Cfg.Sep
	switch z.KeyEnc.Name {
	case "default":
		if sep == "" {
			sep = "/"
		}
		m.key = func(c []uint64) string { return "c" + sep + joinCoords(c, sep) }
	case "v2":
		if sep == "" {
			sep = "."
		}
		m.key = func(c []uint64) string { return joinCoords(c, sep) }
	default:
		return nil, fmt.Errorf("%w: chunk key encoding %q", ErrUnsupported, z.KeyEnc.Name)
	}
	return m, nil
}

// importPlan maps a Zarr chain onto an scc pipeline; copy says whether a
// chunk's bytes are the pipeline's output (after unwrapping a last gzip
// stage). zlibRaw says the pipeline is [shuffle+]zlib, whose chunks are
// stored without inflating them (engine.Dataset.WriteChunkRawZlib).
func importPlan(m *arrayMeta) (filters []engine.Filter, copy bool, unwrapID, why string, zlibRaw bool) {
	copy = !m.bigEndian
	if m.bigEndian {
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
			l := 1
			switch {
			case c.level >= 10:
				l = 4
			case c.level >= 5:
				l = 3
			case c.level >= 2:
				l = 2
			}
			filters = append(filters, engine.Zstd(l))
		case "lz4":
			filters = append(filters, engine.LZ4())
		case "crc32c":
			filters = append(filters, engine.CRC32C())
		}
	}
	return filters, copy, unwrapID, why, zlibRaw && copy
}

func importArray(ctx context.Context, f *engine.File, name, dir string, m *arrayMeta, workers int, verify bool) (DatasetReport, error) {
	dr := DatasetReport{Name: name, Codecs: chainString(m.chain), Notes: m.notes}
	if len(m.shape) == 0 {
		return dr, fmt.Errorf("%w: zero-dimensional array (scc datasets have rank 1..%d)", ErrUnsupported, engine.MaxRank)
	}
	if len(m.chunk) != len(m.shape) || slices.Contains(m.chunk, 0) {
		return dr, fmt.Errorf("%w: chunks %v for shape %v", ErrCorrupt, m.chunk, m.shape)
	}
	filters, copyOK, unwrapID, why, zlibRaw := importPlan(m)
	dr.Why = why
	ds, err := f.CreateDatasetContext(ctx, name, engine.DatasetSpec{
		Type: m.typ, Shape: m.shape, Chunk: m.chunk, Filters: filters, Fill: m.fill,
	})
	if err != nil {
		return dr, err
	}
	defer ds.Close()
	attrs, skipped := jsonAttrs(m.attrs)
	for _, s := range skipped {
		dr.Notes = append(dr.Notes, "attribute left out: "+s)
	}
	for _, a := range attrs {
		if err := ds.SetAttr(ctx, a.Name, a.Value); err != nil {
			return dr, fmt.Errorf("attribute %q: %w", a.Name, err)
		}
	}
	es := m.typ.Size()
	chunkBytes := es
	grid := make([]uint64, len(m.shape))
	total := uint64(1)
	for i := range m.shape {
		chunkBytes *= int(m.chunk[i])
		grid[i] = (m.shape[i] + m.chunk[i] - 1) / m.chunk[i]
		total *= grid[i]
	}
	if total == 0 {
		return dr, nil
	}
	if total > maxGrid {
		return dr, fmt.Errorf("%w: a grid of %d chunks (import visits every chunk key; at most %d)", ErrUnsupported, total, maxGrid)
	}
	var copied, rewrapped, reenc, untouched, count atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	coords := make([]uint64, len(grid))
	for k := uint64(0); k < total; k++ {
		c := slices.Clone(coords)
		g.Go(func() error {
			b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(m.key(c))))
			if errors.Is(err, os.ErrNotExist) {
				return nil // not stored: the fill value, as in scc
			}
			if err != nil {
				return err
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
				raw = swapBytes(raw, es)
			}
			start, cnt, edge := chunkBox(c, m.chunk, m.shape)
			part := raw
			if edge {
				n := es
				for _, x := range cnt {
					n *= int(x)
				}
				part = make([]byte, n)
				copyBox(raw, m.chunk, part, cnt, es, true)
			}
			reenc.Add(1)
			return ds.Write(gctx, engine.Box(start, cnt), part)
		})
		for d := len(coords) - 1; d >= 0; d-- {
			coords[d]++
			if coords[d] < grid[d] {
				break
			}
			coords[d] = 0
		}
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

func swapBytes(b []byte, es int) []byte {
	out := make([]byte, len(b))
	for i := 0; i+es <= len(b); i += es {
		for j := 0; j < es; j++ {
			out[i+j] = b[i+es-1-j]
		}
	}
	return out
}
