package zarr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/scc-dev/scc/engine"
)

// plan is how one dataset's chunks cross: the Zarr chain and whether the
// stored bytes can go across without re-encoding.
type plan struct {
	chain []codec
	copy  bool   // chunks with mask 0 copy (rewrapping a last deflate stage)
	wrap  string // "zlib" or "gzip" when the last stage is rewrapped
	why   string // why not copy
}

// planExport maps a dataset's pipeline onto Zarr codecs.
func planExport(ds *engine.Dataset, version int) plan {
	var p plan
	p.copy = true
	filters := ds.Filters()
	for i, f := range filters {
		name, level := f.Stage()
		last := i == len(filters)-1
		switch name {
		case "shuffle":
			p.chain = append(p.chain, codec{id: "shuffle", elemSize: ds.Type().Size()})
		case "deflate":
			id := "zlib"
			if version == 3 {
				id = "gzip"
			}
			p.chain = append(p.chain, codec{id: id, level: level})
			if last {
				p.wrap = id
			} else if p.copy {
				p.copy, p.why = false, "deflate is not the pipeline's last stage, so its stream cannot be rewrapped in place"
			}
		case "zlib":
			// numcodecs' Zlib is the same zlib stream (v3: numcodecs.zlib,
			// read by zarrita and zarr-python 3): copied byte for byte,
			// no inflate.
			p.chain = append(p.chain, codec{id: "zlib", level: level})
		case "zstd":
			// scc's zstd levels are zstd's (0: the default, 3); the
			// level is metadata only, readers do not need it.
			if level == 0 {
				level = 3
			}
			p.chain = append(p.chain, codec{id: "zstd", level: level})
		case "lz4":
			p.chain = append(p.chain, codec{id: "lz4"})
		case "crc32c":
			if version == 3 {
				p.chain = append(p.chain, codec{id: "crc32c"})
			} else if p.copy {
				p.copy, p.why = false, "Zarr v2 (numcodecs) has no crc32c codec; the stage is left out"
			}
		default:
			if p.copy {
				p.copy, p.why = false, fmt.Sprintf("filter %s has no Zarr codec; left out", name)
			}
		}
	}
	return p
}

// Export writes every dataset and group of f, with their attributes, and
// f's attributes to a new Zarr store at dir, all or nothing: the store is
// written into a temporary directory beside dir and renamed to dir once
// complete, so a failed or cancelled
// export leaves no store behind (and an existing one as it was). dir must
// not exist or be an empty directory; with Options.Replace it may be an
// existing Zarr store, which the new one replaces. A dataset Zarr cannot
// hold (a type, a name, an attribute) is left out and named in
// Report.Skipped, unless Options.Strict; the export fails with
// ErrUnsupported when it would leave out every dataset.
func Export(ctx context.Context, f *engine.File, dir string, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	names := f.Datasets()
	if o.Strict {
		if err := checkNames(names); err != nil {
			return nil, err
		}
	}
	dir = filepath.Clean(dir)
	replace := false
	if fi, err := os.Lstat(dir); err == nil {
		if !fi.IsDir() {
			return nil, fmt.Errorf("%w: %s exists and is not a directory", engine.ErrExists, dir)
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		if len(ents) > 0 {
			if !o.Replace {
				return nil, fmt.Errorf("%w: zarr: %s exists and is not empty", engine.ErrExists, dir)
			}
			if !isStore(dir) {
				return nil, fmt.Errorf("%w: zarr: %s is not a Zarr store (no .zgroup, .zarray or zarr.json); not replacing it", engine.ErrExists, dir)
			}
			replace = true
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return nil, err
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}
	rep, err := exportTo(ctx, f, tmp, names, o)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if replace {
		old := tmp + ".old"
		if err := os.Rename(dir, old); err != nil {
			return nil, err
		}
		if err := os.Rename(tmp, dir); err != nil {
			os.Rename(old, dir)
			return nil, err
		}
		done = true
		os.RemoveAll(old)
		return rep, nil
	}
	// rename(2) replaces an empty directory and fails on any other.
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	done = true
	return rep, nil
}

// isStore reports whether dir looks like a Zarr store's root.
func isStore(dir string) bool {
	for _, n := range []string{".zgroup", ".zarray", "zarr.json"} {
		if fi, err := os.Lstat(filepath.Join(dir, n)); err == nil && fi.Mode().IsRegular() {
			return true
		}
	}
	return false
}

func exportTo(ctx context.Context, f *engine.File, dir string, names []string, o Options) (*Report, error) {
	v := o.version()
	rootAttrs, err := attrsJSON(f.Attrs())
	if err != nil {
		return nil, fmt.Errorf("file attributes: %w", err)
	}
	if err := writeGroup(dir, v, rootAttrs); err != nil {
		return nil, err
	}
	groups := map[string]bool{"": true}
	rep := &Report{export: true}
	// Every group crosses with its attributes, empty ones too; the
	// datasets' parents missing from the walk (none for a file holding
	// groups) are written without attributes below.
	if err := exportGroups(ctx, f.Root(), dir, v, groups, rep, o.Strict); err != nil {
		return nil, err
	}
	// A dataset Zarr cannot hold (its name, its type, an attribute) is
	// left out and named, unless Strict; nothing of it stays in the
	// store.
	skip := func(name string, err error) error {
		if o.Strict {
			return fmt.Errorf("dataset %q: %w", name, err)
		}
		rep.Skipped = append(rep.Skipped, Skipped{Name: name, Reason: err.Error(), err: err})
		return nil
	}
	bad := nameErrs(names)
	for _, name := range names {
		if err := bad[name]; err != nil {
			if err := skip(name, err); err != nil {
				return nil, err
			}
			continue
		}
		segs := strings.Split(name, "/")
		for i := 1; i < len(segs); i++ {
			g := strings.Join(segs[:i], "/")
			if !groups[g] {
				groups[g] = true
				if err := writeGroup(filepath.Join(dir, filepath.FromSlash(g)), v, nil); err != nil {
					return nil, err
				}
			}
		}
		path := filepath.Join(dir, filepath.FromSlash(name))
		dr, err := exportDataset(ctx, f, name, path, v, o.workers())
		if errors.Is(err, ErrUnsupported) {
			if err := os.RemoveAll(path); err != nil {
				return nil, err
			}
			if err := skip(name, err); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("dataset %q: %w", name, err)
		}
		rep.Datasets = append(rep.Datasets, dr)
	}
	if len(rep.Datasets) == 0 && len(rep.Skipped) > 0 {
		return rep, noneExported(rep.Skipped)
	}
	return rep, nil
}

// noneExported is the failure of an export that would skip every
// dataset: a store holding none of them is not what was asked for.
func noneExported(skipped []Skipped) error {
	var why []string
	for _, sk := range skipped {
		why = append(why, fmt.Sprintf("%s: %s", sk.Name, sk.Reason))
	}
	return fmt.Errorf("%w: no dataset could be exported (%s)", ErrUnsupported, strings.Join(why, "; "))
}

// exportGroups writes g's subgroups, and theirs, as Zarr groups with their
// attributes, recording each written path in done. A group whose name is
// no Zarr path is left out with what it holds and named in rep.Skipped
// (the datasets below it are, by their names), unless strict.
func exportGroups(ctx context.Context, g *engine.Group, dir string, v int, done map[string]bool, rep *Report, strict bool) error {
	return g.WalkGroups(ctx, func(sub *engine.Group, p string) (bool, error) {
		if err := nameErr(p); err != nil {
			if strict {
				return false, fmt.Errorf("group %q: %w", p, err)
			}
			rep.Skipped = append(rep.Skipped, Skipped{Name: p, Reason: "group: " + err.Error(), err: err})
			return false, nil
		}
		list, err := sub.Attrs()
		if err != nil {
			return false, fmt.Errorf("group %q: %w", p, err)
		}
		attrs, err := attrsJSON(list)
		if err != nil {
			return false, fmt.Errorf("group %q attributes: %w", p, err)
		}
		if err := writeGroup(filepath.Join(dir, filepath.FromSlash(p)), v, attrs); err != nil {
			return false, err
		}
		done[p] = true
		return true, nil
	})
}

// writeJSON writes v as JSON in ASCII: characters beyond it are escaped
// (\uXXXX, surrogate pairs above the BMP), which every reader decodes;
// zarr-python 2 fails on raw UTF-8 in .zattrs.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(asciiJSON(b), '\n'), 0o644)
}

// asciiJSON escapes every non-ASCII character of a JSON text; outside
// strings JSON holds only ASCII, so the escapes land inside strings.
func asciiJSON(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for _, r := range string(b) {
		switch {
		case r < utf8.RuneSelf:
			out = append(out, byte(r))
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, "\\u%04x\\u%04x", r1, r2)
		default:
			out = fmt.Appendf(out, "\\u%04x", r)
		}
	}
	return out
}

func writeGroup(dir string, v int, attrs map[string]any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if v == 3 {
		if attrs == nil {
			attrs = map[string]any{}
		}
		return writeJSON(filepath.Join(dir, "zarr.json"), map[string]any{"zarr_format": 3, "node_type": "group", "attributes": attrs})
	}
	if err := writeJSON(filepath.Join(dir, ".zgroup"), map[string]any{"zarr_format": 2}); err != nil {
		return err
	}
	if len(attrs) > 0 {
		return writeJSON(filepath.Join(dir, ".zattrs"), attrs)
	}
	return nil
}

func codecJSON(c codec, v int) map[string]any {
	if v == 2 {
		switch c.id {
		case "shuffle":
			return map[string]any{"id": "shuffle", "elementsize": c.elemSize}
		case "lz4":
			return map[string]any{"id": "lz4", "acceleration": 1}
		}
		return map[string]any{"id": c.id, "level": c.level}
	}
	switch c.id {
	case "shuffle":
		return map[string]any{"name": "numcodecs.shuffle", "configuration": map[string]any{"elementsize": c.elemSize}}
	case "lz4":
		return map[string]any{"name": "numcodecs.lz4", "configuration": map[string]any{"acceleration": 1}}
	case "crc32c":
		return map[string]any{"name": "crc32c"}
	case "zlib":
		// Not a v3 core codec: numcodecs registers it for zarr-python 3
		// under this name, and zarrita reads it under both.
		return map[string]any{"name": "numcodecs.zlib", "configuration": map[string]any{"level": c.level}}
	case "zstd":
		return map[string]any{"name": "zstd", "configuration": map[string]any{"level": c.level, "checksum": false}}
	}
	return map[string]any{"name": c.id, "configuration": map[string]any{"level": c.level}}
}

func exportDataset(ctx context.Context, f *engine.File, name, dir string, v, workers int) (DatasetReport, error) {
	dr := DatasetReport{Name: name}
	ds, err := f.OpenDatasetContext(ctx, name)
	if err != nil {
		return dr, err
	}
	defer ds.Close()
	layout := ds.Layout()
	if layout == engine.Vlen {
		return dr, fmt.Errorf("%w: variable-length dataset (no fixed-size Zarr dtype)", ErrUnsupported)
	}
	dtV2, dtV3, err := zarrTypeOf(ds.Type())
	if err != nil {
		return dr, err
	}
	p := planExport(ds, v)
	if layout != engine.Chunked {
		// Sparse and contiguous datasets have no pipeline images to copy:
		// their values are read and encoded, and chunks holding only the
		// fill value are left out (Zarr reads a missing chunk as fill).
		p.copy, p.why = false, fmt.Sprintf("%s layout: values read and encoded", layout)
	}
	dr.Codecs, dr.Why = chainString(p.chain), p.why
	attrs, err := attrsJSON(ds.Attrs())
	if err != nil {
		return dr, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return dr, err
	}
	shape, chunk, typ := ds.Shape(), ds.Chunk(), ds.Type()
	if layout == engine.Virtual {
		// A virtual dataset's own chunks are single elements (its
		// chunks are its sources'): a store of one file per element.
		chunk = virtualChunk(ctx, f, ds)
		dr.Notes = append(dr.Notes, fmt.Sprintf("virtual dataset: Zarr chunks %v", chunk))
	}
	fill := fillJSON(typ, ds.Fill())
	if v == 2 {
		meta := map[string]any{
			"zarr_format": 2, "shape": shape, "chunks": chunk, "dtype": dtV2,
			"fill_value": fill, "order": "C", "filters": nil, "compressor": nil, "dimension_separator": ".",
		}
		if n := len(p.chain); n > 0 {
			meta["compressor"] = codecJSON(p.chain[n-1], 2)
			if n > 1 {
				fs := make([]any, n-1)
				for i, c := range p.chain[:n-1] {
					fs[i] = codecJSON(c, 2)
				}
				meta["filters"] = fs
			}
		}
		if err := writeJSON(filepath.Join(dir, ".zarray"), meta); err != nil {
			return dr, err
		}
		if len(attrs) > 0 {
			if err := writeJSON(filepath.Join(dir, ".zattrs"), attrs); err != nil {
				return dr, err
			}
		}
	} else {
		codecs := []any{map[string]any{"name": "bytes", "configuration": map[string]any{"endian": "little"}}}
		for _, c := range p.chain {
			codecs = append(codecs, codecJSON(c, 3))
		}
		meta := map[string]any{
			"zarr_format": 3, "node_type": "array", "shape": shape, "data_type": dtV3,
			"chunk_grid":         map[string]any{"name": "regular", "configuration": map[string]any{"chunk_shape": chunk}},
			"chunk_key_encoding": map[string]any{"name": "default", "configuration": map[string]any{"separator": "/"}},
			"fill_value":         fill, "codecs": codecs, "attributes": attrs,
		}
		if err := writeJSON(filepath.Join(dir, "zarr.json"), meta); err != nil {
			return dr, err
		}
	}
	var chunks []engine.StoredChunk
	if layout == engine.Chunked {
		chunks, err = ds.StoredChunks(ctx)
	} else {
		chunks, err = gridChunks(shape, chunk)
	}
	if err != nil {
		return dr, err
	}
	fillBytes := ds.Fill()
	var skipped atomic.Int64
	chunkBytes := typ.Size()
	for _, c := range chunk {
		chunkBytes *= int(c)
	}
	var copied, rewrapped, reenc, untouched atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, sc := range chunks {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			var out []byte
			if p.copy && sc.FilterMask == 0 {
				data, _, err := ds.ReadChunkRaw(gctx, sc.Coords)
				if err != nil {
					return err
				}
				out = data
				if p.wrap != "" {
					if out, err = rewrap(p.wrap, data, chunkBytes); err != nil {
						return fmt.Errorf("chunk %v: %w", sc.Coords, err)
					}
					rewrapped.Add(1)
				} else {
					copied.Add(1)
					untouched.Add(1) // ReadChunkRaw checks the frame's CRC only
				}
			} else {
				raw, err := readChunk(gctx, ds, chunk, sc.Coords, chunkBytes)
				if err != nil {
					return err
				}
				if layout != engine.Chunked && allFill(raw, fillBytes) {
					skipped.Add(1)
					return nil
				}
				if out, err = encodeChain(p.chain, raw); err != nil {
					return fmt.Errorf("chunk %v: %w", sc.Coords, err)
				}
				reenc.Add(1)
			}
			path := chunkPath(dir, v, sc.Coords)
			if v == 3 {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					return err
				}
			}
			return os.WriteFile(path, out, 0o644)
		})
	}
	if err := g.Wait(); err != nil {
		return dr, err
	}
	dr.Chunks = len(chunks) - int(skipped.Load())
	chunks = chunks[:dr.Chunks] // only the count is used below
	dr.Copied, dr.Rewrapped, dr.Reencoded = int(copied.Load()), int(rewrapped.Load()), int(reenc.Load())
	dr.Untouched = int(untouched.Load())
	dr.Bytes = int64(len(chunks)) * int64(chunkBytes)
	if dr.Reencoded > 0 && dr.Why == "" {
		dr.Why = "scc stored these chunks with a compressor skipped (it did not shrink them), which Zarr cannot express"
	}
	return dr, nil
}

// chunkPath is a chunk's file: v2 "i.j.k" ("." separator), v3 default
// encoding "c/i/j/k".
func chunkPath(dir string, v int, coords []uint64) string {
	parts := make([]string, len(coords))
	for i, c := range coords {
		parts[i] = strconv.FormatUint(c, 10)
	}
	if v == 3 {
		return filepath.Join(append([]string{dir, "c"}, parts...)...)
	}
	return filepath.Join(dir, strings.Join(parts, "."))
}

// chunkBox is the part of chunk coords inside shape.
func chunkBox(coords, chunk, shape []uint64) (start, count []uint64, edge bool) {
	start, count = make([]uint64, len(coords)), make([]uint64, len(coords))
	for i, c := range coords {
		start[i] = c * chunk[i]
		count[i] = min(chunk[i], shape[i]-start[i])
		edge = edge || count[i] != chunk[i]
	}
	return start, count, edge
}

// readChunk reads a whole chunk decoded (little-endian, C order), the
// padding of an edge chunk holding the fill value.
func readChunk(ctx context.Context, ds *engine.Dataset, chunk, coords []uint64, chunkBytes int) ([]byte, error) {
	start, count, edge := chunkBox(coords, chunk, ds.Shape())
	es := ds.Type().Size()
	if !edge {
		buf := make([]byte, chunkBytes)
		return buf, ds.Read(ctx, engine.Box(start, count), buf)
	}
	n := es
	for _, c := range count {
		n *= int(c)
	}
	part := make([]byte, n)
	if err := ds.Read(ctx, engine.Box(start, count), part); err != nil {
		return nil, err
	}
	full := make([]byte, chunkBytes)
	fill := ds.Fill()
	for i := 0; i < len(full); i += es {
		copy(full[i:], fill)
	}
	copyBox(full, chunk, part, count, es, false)
	return full, nil
}

// copyBox copies between a whole chunk (shape chunk) and the packed box of
// its first count elements per dimension: into the chunk, or out of it.
func copyBox(full []byte, chunk []uint64, part []byte, count []uint64, es int, out bool) {
	r := len(chunk)
	row := int(count[r-1]) * es
	idx := make([]uint64, r) // over count[:r-1]
	for p := 0; p < len(part); p += row {
		off := uint64(0)
		for d := 0; d < r-1; d++ {
			off = off*chunk[d] + idx[d]
		}
		off = off * chunk[r-1] * uint64(es)
		if out {
			copy(part[p:p+row], full[off:])
		} else {
			copy(full[off:off+uint64(row)], part[p:p+row])
		}
		for d := r - 2; d >= 0; d-- {
			idx[d]++
			if idx[d] < count[d] {
				break
			}
			idx[d] = 0
		}
	}
}

// maxGridChunks bounds the chunk grid an export of a dataset without
// stored chunks (sparse, contiguous) walks, as import bounds its own.
const maxGridChunks = 1 << 26

// gridChunks lists every chunk of the grid of shape by chunk in C order.
func gridChunks(shape, chunk []uint64) ([]engine.StoredChunk, error) {
	n := uint64(1)
	grid := make([]uint64, len(shape))
	for d := range shape {
		grid[d] = (shape[d] + chunk[d] - 1) / chunk[d]
		if grid[d] == 0 {
			return nil, nil
		}
		if n *= grid[d]; n > maxGridChunks {
			return nil, fmt.Errorf("%w: chunk grid %v has more than %d chunks", ErrUnsupported, grid, maxGridChunks)
		}
	}
	out := make([]engine.StoredChunk, 0, n)
	c := make([]uint64, len(shape))
	for {
		out = append(out, engine.StoredChunk{Coords: append([]uint64(nil), c...)})
		d := len(c) - 1
		for ; d >= 0; d-- {
			if c[d]++; c[d] < grid[d] {
				break
			}
			c[d] = 0
		}
		if d < 0 {
			return out, nil
		}
	}
}

// allFill reports whether b holds only the element fill repeated.
func allFill(b, fill []byte) bool {
	for i := 0; i+len(fill) <= len(b); i += len(fill) {
		if string(b[i:i+len(fill)]) != string(fill) {
			return false
		}
	}
	return true
}

// virtualTargetBytes is the size of the chunks a virtual dataset exports
// with when its sources do not say one.
const virtualTargetBytes = 1 << 20

// virtualChunk is the chunk shape a virtual dataset exports with: its
// sources' chunk shape when every source that can be opened is a chunked
// dataset of the virtual rank with the same one, else about
// virtualTargetBytes per chunk, whole along the last dimensions.
func virtualChunk(ctx context.Context, f *engine.File, ds *engine.Dataset) []uint64 {
	shape := ds.Shape()
	r := len(shape)
	var common []uint64
	same := true
	spec, ok, err := f.VirtualSpec(ctx, ds.Name())
	if err != nil || !ok {
		same = false
	}
	for _, m := range spec.Mappings {
		if !same {
			break
		}
		file, _ := engine.ExpandBlock(m.File, 0)
		dset, _ := engine.ExpandBlock(m.Dataset, 0)
		c := sourceChunk(ctx, f, file, dset)
		switch {
		case c == nil || len(c) != r:
			// Missing, of another rank or layout, or out of reach (a
			// URL): says nothing.
		case common == nil:
			common = c
		case !slices.Equal(common, c):
			same = false
		}
	}
	if same && common != nil {
		out := make([]uint64, r)
		for d := range out {
			out[d] = min(common[d], max(shape[d], 1))
		}
		return out
	}
	out := make([]uint64, r)
	elems := uint64(max(virtualTargetBytes/ds.Type().Size(), 1))
	for d := r - 1; d >= 0; d-- {
		out[d] = max(min(max(shape[d], 1), elems), 1)
		elems /= out[d]
		elems = max(elems, 1)
	}
	return out
}

// sourceChunk is the chunk shape of a virtual dataset's source, nil when
// it is not a chunked dataset this export can open.
func sourceChunk(ctx context.Context, f *engine.File, file, dset string) []uint64 {
	loc, self, err := f.VirtualSource(file)
	if err != nil {
		return nil
	}
	src := f
	if !self {
		if strings.Contains(loc, "://") {
			return nil
		}
		if src, err = engine.Open(loc, &engine.Options{ReadOnly: true}); err != nil {
			return nil
		}
		defer src.Close()
	}
	sd, err := src.OpenDatasetContext(ctx, dset)
	if err != nil {
		return nil
	}
	defer sd.Close()
	if sd.Layout() != engine.Chunked && sd.Layout() != engine.Sparse {
		return nil
	}
	return sd.Chunk()
}
