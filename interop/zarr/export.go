package zarr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/internal/tree"
	"github.com/scc-dev/scc/internal/zarrmap"
)

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
	names, err := tree.DatasetNames(f)
	if err != nil {
		return nil, err
	}
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
	list, err := f.Attrs()
	if err != nil {
		return nil, fmt.Errorf("file attributes: %w", err)
	}
	rootAttrs, err := attrsJSON(list)
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
	if err := exportGroups(ctx, f.Group, dir, v, groups, rep, o.Strict); err != nil {
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
	bad := zarrmap.NameErrs(names)
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
	return tree.Groups(ctx, g, func(sub *engine.Group, p string) (bool, error) {
		if err := zarrmap.NameErr(p); err != nil {
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
	return os.WriteFile(path, append(zarrmap.ASCIIJSON(b), '\n'), 0o644)
}

// writeGroup writes a group's metadata documents into dir, creating it.
func writeGroup(dir string, v int, attrs map[string]any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if v == 3 {
		return writeJSON(filepath.Join(dir, "zarr.json"), zarrmap.GroupMeta(3, attrs))
	}
	if err := writeJSON(filepath.Join(dir, ".zgroup"), zarrmap.GroupMeta(2, attrs)); err != nil {
		return err
	}
	// A v2 group without attributes has no .zattrs, which readers take
	// for none.
	if len(attrs) > 0 {
		return writeJSON(filepath.Join(dir, ".zattrs"), attrs)
	}
	return nil
}

func exportDataset(ctx context.Context, f *engine.File, name, dir string, v, workers int) (DatasetReport, error) {
	dr := DatasetReport{Name: name}
	ds, err := f.OpenDataset(ctx, name, nil)
	if err != nil {
		return dr, err
	}
	defer ds.Close(ctx)
	layout := ds.Layout()
	if layout == engine.Vlen {
		if sp := ds.Space(); sp != engine.SpaceSimple {
			return dr, fmt.Errorf("%w: variable-length dataset over a %v dataspace (the export writes strings of arrays with dimensions)", ErrUnsupported, sp)
		}
		return exportStrings(ctx, ds, dr, dir, v, workers)
	}
	if _, err := zarrmap.DataType(ds.Type(), v); err != nil {
		return dr, err
	}
	scalar := ds.Space() == engine.SpaceScalar
	switch {
	case ds.Space() == engine.SpaceNull:
		return dr, fmt.Errorf("%w: null dataspace: Zarr has no array without elements that is not an array of shape [0]", ErrUnsupported)
	case scalar && (layout == engine.Virtual || layout == engine.Sparse):
		return dr, fmt.Errorf("%w: scalar dataset of the %s layout", ErrUnsupported, layout)
	}
	p := zarrmap.PlanOf(ds, v)
	if layout != engine.Chunked {
		// Sparse and contiguous datasets have no pipeline images to copy:
		// their values are read and encoded, and chunks holding only the
		// fill value are left out (Zarr reads a missing chunk as fill).
		p.Copy, p.Why = false, fmt.Sprintf("%s layout: values read and encoded", layout)
	}
	dr.Codecs, dr.Why = zarrmap.ChainString(p.Chain), p.Why
	list, err := ds.Attrs()
	if err != nil {
		return dr, err
	}
	attrs, err := attrsJSON(list)
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
		chunk = zarrmap.VirtualChunk(ctx, f, ds)
		dr.Notes = append(dr.Notes, fmt.Sprintf("virtual dataset: Zarr chunks %v", chunk))
	}
	sharded := p.Inner != nil && layout == engine.Chunked
	metaChunk := chunk
	if sharded && v == 2 {
		// Zarr v2 has no shards: the inner chunks are the chunks.
		metaChunk = p.Inner
	}
	meta, err := zarrmap.ArrayMeta(v, typ, shape, metaChunk, ds.Fill(), p.Chain, attrs)
	if err != nil {
		return dr, err
	}
	if sharded && v == 3 {
		meta["codecs"] = []any{zarrmap.ShardingCodec(p.Inner, p.Chain)}
	}
	if v == 2 {
		if err := writeJSON(filepath.Join(dir, ".zarray"), meta); err != nil {
			return dr, err
		}
		if len(attrs) > 0 {
			if err := writeJSON(filepath.Join(dir, ".zattrs"), attrs); err != nil {
				return dr, err
			}
		}
	} else if err := writeJSON(filepath.Join(dir, "zarr.json"), meta); err != nil {
		return dr, err
	}
	if scalar {
		// A scalar's chunk is its storage's one chunk, [0] of shape [1]
		// (its file is keyed as a zero-dimensional array's: chunkPath).
		shape, chunk = []uint64{1}, []uint64{1}
	}
	var chunks []engine.StoredChunk
	if layout == engine.Chunked {
		chunks, err = zarrmap.Chunks(ctx, ds)
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
			if sharded {
				return exportShard(gctx, ds, p, v, dir, sc.Coords, &shardCounts{&copied, &rewrapped, &reenc, &untouched})
			}
			var out []byte
			if p.Copy && sc.FilterMask == 0 {
				data, _, err := ds.ReadChunkRaw(gctx, sc.Coords)
				if err != nil {
					return err
				}
				out = data
				if p.Wrap != "" {
					if out, err = zarrmap.Rewrap(p.Wrap, data, chunkBytes); err != nil {
						return fmt.Errorf("chunk %v: %w", sc.Coords, err)
					}
					rewrapped.Add(1)
				} else {
					copied.Add(1)
					untouched.Add(1) // ReadChunkRaw checks the frame's CRC only
				}
			} else {
				raw, err := zarrmap.ReadChunk(gctx, ds, shape, chunk, sc.Coords, chunkBytes)
				if err != nil {
					return err
				}
				if layout != engine.Chunked && zarrmap.AllFill(raw, fillBytes) {
					skipped.Add(1)
					return nil
				}
				if out, err = zarrmap.EncodeChain(p.Chain, raw); err != nil {
					return fmt.Errorf("chunk %v: %w", sc.Coords, err)
				}
				reenc.Add(1)
			}
			path := chunkPath(dir, v, sc.Coords)
			if scalar {
				path = chunkPath(dir, v, nil)
			}
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
	if sharded {
		dr.Why = ""
		if dr.Reencoded > 0 {
			dr.Why = "sharded chunks: inner chunks stored with a compressor skipped, or a pipeline that does not map, re-encoded"
			if !p.InnerCopy {
				dr.Why = "sharded chunks: " + p.Why
			}
		}
		dr.Notes = append(dr.Notes, fmt.Sprintf("sharded: inner chunks %v", p.Inner))
		if v == 2 {
			dr.Notes = append(dr.Notes, fmt.Sprintf("Zarr v2 has no shards: inner chunks %v written as chunks", p.Inner))
		}
	}
	if dr.Reencoded > 0 && dr.Why == "" {
		dr.Why = "scc stored these chunks with a compressor skipped (it did not shrink them), which Zarr cannot express"
	}
	return dr, nil
}

// shardCounts are exportDataset's per-chunk counters.
type shardCounts struct{ copied, rewrapped, reenc, untouched *atomic.Int64 }

// exportShard writes the sharded chunk at coords: in v3 one shard of the
// sharding_indexed codec, in v2 each inner chunk as a chunk of the inner
// grid. An inner chunk's image goes across as it is where the pipeline
// maps (Plan.InnerCopy; a last deflate stage rewrapped) and its filter
// mask is 0; the others are decoded from the chunk and encoded with the
// chain. A v3 shard whose inner chunks all go across as they are is the
// chunk's portable form with the index rewritten: every byte before it
// is written as read.
func exportShard(ctx context.Context, ds *engine.Dataset, p zarrmap.Plan, v int, dir string, coords []uint64, n *shardCounts) error {
	data, _, err := ds.ReadChunkRaw(ctx, coords)
	if err != nil {
		return err
	}
	chunk, inner, es := ds.Chunk(), p.Inner, ds.Type().Size()
	counts := zarrmap.InnerGrid(chunk, inner)
	total, innerBytes := 1, es
	for d := range counts {
		total *= int(counts[d])
		innerBytes *= int(inner[d])
	}
	ins, end, err := zarrmap.SplitPortable(data, total)
	if err != nil {
		return fmt.Errorf("chunk %v: %w", coords, err)
	}
	var decoded []byte // the chunk's values, decoded once if an inner chunk needs them
	rewrapped, reencoded := false, false
	// encode returns inner chunk i's Zarr bytes (v3: with the crc32c
	// codec's checksum), nil for an absent one.
	encode := func(i int) ([]byte, error) {
		in := ins[i]
		if in.Frame == nil {
			return nil, nil
		}
		if p.InnerCopy && in.Mask == 0 {
			img := in.Image()
			if p.Wrap == "" {
				if v == 3 {
					return in.Frame, nil
				}
				return img, nil
			}
			rewrapped = true
			out, err := zarrmap.Rewrap(p.Wrap, img, innerBytes)
			if err != nil {
				return nil, fmt.Errorf("chunk %v inner chunk %v: %w", coords, zarrmap.InnerCoord(counts, i), err)
			}
			if v == 3 {
				out = zarrmap.AppendCRC(out, 0)
			}
			return out, nil
		}
		reencoded = true
		if decoded == nil {
			if decoded, err = ds.DecodeChunk(data, 0); err != nil {
				return nil, fmt.Errorf("chunk %v: %w", coords, err)
			}
		}
		part := make([]byte, innerBytes)
		zarrmap.InnerBox(decoded, chunk, inner, zarrmap.InnerCoord(counts, i), es, part, false)
		out, err := zarrmap.EncodeChain(p.Chain, part)
		if err != nil {
			return nil, fmt.Errorf("chunk %v inner chunk %v: %w", coords, zarrmap.InnerCoord(counts, i), err)
		}
		if v == 3 {
			out = zarrmap.AppendCRC(out, 0)
		}
		return out, nil
	}
	count := func() {
		switch {
		case reencoded:
			n.reenc.Add(1)
		case rewrapped:
			n.rewrapped.Add(1)
		default:
			n.copied.Add(1)
			n.untouched.Add(1) // ReadChunkRaw checks the inner frames' CRCs only
		}
	}
	if v == 2 {
		grid := make([]uint64, len(chunk))
		shape := ds.Shape()
		for d := range grid {
			grid[d] = (shape[d] + inner[d] - 1) / inner[d]
		}
		for i := range ins {
			q := zarrmap.InnerCoord(counts, i)
			outside := false
			for d := range q {
				q[d] += coords[d] * counts[d]
				outside = outside || q[d] >= grid[d]
			}
			if outside {
				continue
			}
			b, err := encode(i)
			if err != nil {
				return err
			}
			if b == nil {
				continue
			}
			if err := os.WriteFile(chunkPath(dir, 2, q), b, 0o644); err != nil {
				return err
			}
		}
		count()
		return nil
	}
	offs, sizes := make([]uint64, total), make([]uint64, total)
	verbatim := p.InnerCopy && p.Wrap == ""
	for i, in := range ins {
		offs[i], sizes[i] = zarrmap.ZarrEmpty, zarrmap.ZarrEmpty
		if in.Frame != nil {
			offs[i], sizes[i] = in.Off, uint64(len(in.Frame))
			verbatim = verbatim && in.Mask == 0
		}
	}
	var out []byte
	if verbatim {
		// The frames stay where they are; the index is written over
		// the portable one (offsets and sizes were taken above).
		out = zarrmap.AppendZarrIndex(data[:end:len(data)], offs, sizes)
	} else {
		out = make([]byte, 0, len(data)+total*8+4)
		for i := range ins {
			b, err := encode(i)
			if err != nil {
				return err
			}
			if b == nil {
				continue
			}
			offs[i], sizes[i] = uint64(len(out)), uint64(len(b))
			out = append(out, b...)
		}
		out = zarrmap.AppendZarrIndex(out, offs, sizes)
	}
	path := chunkPath(dir, 3, coords)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return err
	}
	count()
	return nil
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
	if len(parts) == 0 {
		return filepath.Join(dir, "0") // zarr-python 2's key of a zero-dimensional array's chunk
	}
	return filepath.Join(dir, strings.Join(parts, "."))
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
