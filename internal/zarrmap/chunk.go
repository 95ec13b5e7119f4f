package zarrmap

import (
	"context"
	"slices"
	"strings"

	"github.com/scc-dev/scc/engine"
)

// ChunkBox is the part of chunk coords inside shape, and whether it is an
// edge chunk (one that shape cuts).
func ChunkBox(coords, chunk, shape []uint64) (start, count []uint64, edge bool) {
	start, count = make([]uint64, len(coords)), make([]uint64, len(coords))
	for i, c := range coords {
		start[i] = c * chunk[i]
		count[i] = min(chunk[i], shape[i]-start[i])
		edge = edge || count[i] != chunk[i]
	}
	return start, count, edge
}

// ReadChunk reads a whole chunk of ds decoded (little-endian, C order),
// the padding of an edge chunk holding the fill value. shape is the
// extent the caller has checked coords against: a live dataset's may
// change between two calls of Shape.
func ReadChunk(ctx context.Context, ds *engine.Dataset, shape, chunk, coords []uint64, chunkBytes int) ([]byte, error) {
	start, count, edge := ChunkBox(coords, chunk, shape)
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
	CopyBox(full, chunk, part, count, es, false)
	return full, nil
}

// CopyBox copies between a whole chunk (shape chunk) and the packed box of
// its first count elements per dimension: into the chunk, or out of it.
func CopyBox(full []byte, chunk []uint64, part []byte, count []uint64, es int, out bool) {
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

// AllFill reports whether b holds only the element fill repeated.
func AllFill(b, fill []byte) bool {
	for i := 0; i+len(fill) <= len(b); i += len(fill) {
		if string(b[i:i+len(fill)]) != string(fill) {
			return false
		}
	}
	return true
}

// VirtualTargetBytes is the size of the chunks a virtual dataset maps
// onto when its sources do not say one.
const VirtualTargetBytes = 1 << 20

// VirtualChunk is the Zarr chunk shape of a virtual dataset, whose own
// chunks are single elements: its sources' chunk shape when every source
// that can be opened is a chunked dataset of the virtual rank with the
// same one, else about VirtualTargetBytes per chunk, whole along the last
// dimensions.
func VirtualChunk(ctx context.Context, f *engine.File, ds *engine.Dataset) []uint64 {
	shape := ds.Shape()
	r := len(shape)
	var common []uint64
	same := true
	spec, ok, err := f.VirtualSpec(ctx, ds.Path())
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
	elems := uint64(max(VirtualTargetBytes/ds.Type().Size(), 1))
	for d := r - 1; d >= 0; d-- {
		out[d] = max(min(max(shape[d], 1), elems), 1)
		elems /= out[d]
		elems = max(elems, 1)
	}
	return out
}

// sourceChunk is the chunk shape of a virtual dataset's source, nil when
// it is not a chunked dataset that can be opened here.
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
		if src, err = engine.Open(ctx, loc, &engine.Options{ReadOnly: true}); err != nil {
			return nil
		}
		defer src.Close(ctx)
	}
	sd, err := src.OpenDataset(ctx, dset, nil)
	if err != nil {
		return nil
	}
	defer sd.Close(ctx)
	if sd.Layout() != engine.Chunked && sd.Layout() != engine.Sparse {
		return nil
	}
	return sd.Chunk()
}
