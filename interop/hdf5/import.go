package hdf5

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/scc-dev/scc/engine"
	"github.com/scc-dev/scc/interop/hdf5/internal/h5"
)

// importPlan is how one HDF5 dataset maps onto a new scc dataset.
type importPlan struct {
	path   string // HDF5 path, no leading '/'
	info   h5.Info
	spec   engine.DatasetSpec
	mode   Mode
	reason string
	// zlibDirect: the pipeline is [shuffle+]deflate, whose chunks are
	// stored without inflating them (engine.Dataset.WriteChunkRawZlib).
	zlibDirect bool
}

// Import creates one scc dataset in dst per HDF5 dataset of srcPath (all, or
// opts.Datasets), named by its HDF5 path without the leading '/' (nested
// groups flatten to "grp/sub/x"), and copies the data, flushing dst after
// each dataset.
//
// Every dataset is checked before anything is created: an element type
// other than 1-, 2-, 4- or 8-byte integers and IEEE floats, a scalar or
// null dataspace, a chunk larger than scc's 1 GiB limit, or a name that
// already exists in dst fails the whole import (ErrUnsupported,
// engine.ErrExists) and dst is unchanged. An error after that (I/O, a
// chunk HDF5 cannot decode) leaves the datasets completed before it
// committed, and the one being imported created but partly written and
// not flushed: the caller decides whether to Flush or discard the file.
//
// Chunked datasets keep their chunk shape; their stored chunks are copied
// without re-encoding when the filters are shuffle and deflate (HDF5's
// deflate chunk is scc's Zlib filter's image) and the type is
// little-endian. A [shuffle+]deflate chunk is stored without inflating it
// (unless opts.Verify): its zlib framing and size are checked, its
// Adler-32 on every later read; edge chunks and other pipelines are
// decoded once by the engine to verify them. Any other chunk — and every chunk of a
// contiguous or compact dataset — is read through HDF5's own pipeline and
// written through the engine with opts.Filters.
func Import(ctx context.Context, srcPath string, dst *engine.File, opts *Options) (rep Report, err error) {
	start := time.Now()
	if err := opts.Validate(); err != nil {
		return rep, err
	}
	f, err := h5.Open(srcPath)
	if err != nil {
		return rep, err
	}
	defer f.Close()
	paths, err := f.Datasets()
	if err != nil {
		return rep, err
	}
	var plans []*importPlan
	var problems []error
	existing := map[string]bool{}
	for _, n := range dst.Datasets() {
		existing[n] = true
	}
	for _, path := range paths {
		if !opts.selected(path) {
			continue
		}
		p, err := planImport(f, path, opts)
		if err == nil && existing[path] {
			err = fmt.Errorf("%w: dataset %q already exists in the scc file", engine.ErrExists, path)
		}
		if err != nil {
			problems = append(problems, err)
			continue
		}
		plans = append(plans, p)
	}
	if len(problems) > 0 {
		// Each problem keeps its sentinel (ErrUnsupported, engine.ErrExists,
		// ErrHDF5) for errors.Is.
		return rep, fmt.Errorf("import of %s: nothing imported: %w", srcPath, errors.Join(problems...))
	}
	if opts != nil && opts.Datasets != nil && len(plans) != len(opts.Datasets) {
		return rep, fmt.Errorf("%w: some of the datasets %q are not in %s", engine.ErrNotFound, opts.Datasets, srcPath)
	}
	// The root group's attributes become dst's file attributes (replacing
	// same-named ones).
	rootAttrs, rootSkipped, err := f.ReadRootAttrs()
	if err != nil {
		return rep, err
	}
	if rep.RootAttrNotes, err = importAttrs(ctx, dst, rootAttrs, rootSkipped); err != nil {
		return rep, err
	}
	rep.RootAttrsNotImported = len(rep.RootAttrNotes)
	for _, p := range plans {
		dr, err := importDataset(ctx, f, dst, p, opts)
		if err != nil {
			return rep, fmt.Errorf("import %q: %w", p.path, err)
		}
		rep.Datasets = append(rep.Datasets, dr)
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// maxChunkBytes is scc's limit on a chunk's decoded size (FORMAT.md §6).
const maxChunkBytes = 1 << 30

func planImport(f *h5.File, path string, opts *Options) (*importPlan, error) {
	d, err := f.OpenDataset(path)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	in, err := d.Info()
	if err != nil {
		return nil, fmt.Errorf("dataset %q: %w", path, err)
	}
	typ, ok := sccType(in.Type)
	if !ok || in.Type.Class == h5.Other {
		return nil, fmt.Errorf("%w: dataset %q: element type %v has no scc counterpart", ErrUnsupported, path, in.Type)
	}
	r := len(in.Dims)
	if r == 0 || r > engine.MaxRank {
		return nil, fmt.Errorf("%w: dataset %q: rank %d not in [1, %d]", ErrUnsupported, path, r, engine.MaxRank)
	}
	p := &importPlan{path: path, info: in, mode: Raw}
	maxShape := make([]uint64, r)
	for i, m := range in.MaxDims {
		if m == h5.Unlimited {
			maxShape[i] = engine.Unlimited
		} else {
			maxShape[i] = m
		}
	}
	p.spec = engine.DatasetSpec{Type: typ, Shape: in.Dims, MaxShape: maxShape, Fill: in.Fill}
	reencode := func(why string) {
		p.mode, p.reason, p.zlibDirect = Reencoded, why, false
		p.spec.Filters = opts.filters()
	}
	if in.Layout == h5.Chunked {
		p.spec.Chunk = in.Chunk
		var fs []engine.Filter
		var why []string
		for i, fl := range in.Filters {
			switch {
			case fl.ID == h5.FilterShuffle:
				fs = append(fs, engine.Shuffle())
			case fl.ID == h5.FilterDeflate:
				// HDF5's deflate chunk is a zlib stream: scc's Zlib
				// filter stores it as it is, wherever it stands. Level 0
				// (stored blocks) decodes like any other; scc's levels
				// start at 1 and only matter for encoding.
				fs = append(fs, engine.Zlib(max(1, min(9, fl.Level))))
				p.zlibDirect = i == len(in.Filters)-1 && (i == 0 || i == 1 && in.Filters[0].ID == h5.FilterShuffle)
			default:
				why = append(why, fmt.Sprintf("HDF5 filter %d (%s) has no scc counterpart", fl.ID, fl.Name))
			}
		}
		if in.Type.BigEndian {
			why = append(why, "big-endian elements")
		}
		if len(why) == 0 {
			p.spec.Filters = fs
		} else {
			reencode(strings.Join(why, "; "))
		}
	} else {
		p.spec.Chunk = opts.chunkFor(in.Dims, in.Type.Size)
		reencode(fmt.Sprintf("%s layout", map[h5.Layout]string{h5.Compact: "compact", h5.Contiguous: "contiguous", h5.Virtual: "virtual"}[in.Layout]))
		if in.Layout == h5.Virtual {
			return nil, fmt.Errorf("%w: dataset %q: virtual datasets are not imported", ErrUnsupported, path)
		}
	}
	elems := uint64(in.Type.Size)
	for _, c := range p.spec.Chunk {
		elems *= c
		if elems > maxChunkBytes {
			return nil, fmt.Errorf("%w: dataset %q: chunk %v is larger than scc's 1 GiB chunk limit", ErrUnsupported, path, p.spec.Chunk)
		}
	}
	return p, nil
}

func (o *Options) filters() []engine.Filter {
	if o != nil && o.Filters != nil {
		return o.Filters
	}
	return []engine.Filter{engine.Shuffle(), engine.Zlib(o.level())}
}

// chunkFor picks an scc chunk for a dataset HDF5 does not chunk:
// opts.Chunk, or whole trailing dimensions and enough of the leading ones
// to make about 1 MiB (at least one element along each).
func (o *Options) chunkFor(dims []uint64, elemSize int) []uint64 {
	if o != nil && o.Chunk != nil && len(o.Chunk) == len(dims) {
		return o.Chunk
	}
	const target = 1 << 20
	c := make([]uint64, len(dims))
	size := uint64(elemSize)
	for i := len(dims) - 1; i >= 0; i-- {
		n := max(dims[i], 1)
		if size*n <= target {
			c[i] = n
			size *= n
			continue
		}
		c[i] = max(1, target/size)
		for j := i - 1; j >= 0; j-- {
			c[j] = 1
		}
		break
	}
	return c
}

// imported is one chunk on its way into scc: a stored image to copy, or
// (raw nil) the chunk's in-extent elements to write through the engine.
type imported struct {
	coord []uint64
	image []byte
	mask  uint32
	elems []byte
	start []uint64
	count []uint64
}

func importDataset(ctx context.Context, f *h5.File, dst *engine.File, p *importPlan, opts *Options) (DatasetReport, error) {
	rep := DatasetReport{Name: p.path, Path: "/" + p.path, Mode: p.mode, Reason: p.reason}
	hd, err := f.OpenDataset(p.path)
	if err != nil {
		return rep, err
	}
	defer hd.Close()
	attrs, skipped, err := hd.ReadAttrs()
	if err != nil {
		return rep, err
	}
	ds, err := dst.CreateDatasetContext(ctx, p.path, p.spec)
	if err != nil {
		return rep, err
	}
	defer ds.Close()
	if rep.AttrNotes, err = importAttrs(ctx, ds, attrs, skipped); err != nil {
		return rep, err
	}
	rep.AttrsNotImported = len(rep.AttrNotes)
	chunk, dims := p.spec.Chunk, p.spec.Shape
	chunkBytes := ds.ChunkBytes()
	grid := ds.ChunkGrid()
	elemType := p.info.Type
	elemType.BigEndian = false // memory type for HDF5 reads: little-endian

	// readBox reads a chunk's in-extent part through HDF5's pipeline.
	readBox := func(c []uint64) (imported, error) {
		it := imported{coord: c, start: make([]uint64, len(c)), count: make([]uint64, len(c))}
		n := uint64(elemType.Size)
		for i := range c {
			it.start[i] = c[i] * chunk[i]
			it.count[i] = min(chunk[i], dims[i]-it.start[i])
			n *= it.count[i]
		}
		it.elems = make([]byte, n)
		return it, hd.ReadBox(elemType, it.start, it.count, it.elems)
	}

	var mu sync.Mutex // guards rep's counters (workers add to them)
	g, gctx := errgroup.WithContext(ctx)
	work := make(chan imported, 2*opts.workers())
	// The producer owns every HDF5 call: chunk lookups, raw reads and the
	// decoded reads of chunks that cannot be copied.
	g.Go(func() error {
		defer close(work)
		var err error
		off := make([]uint64, len(chunk))
		// emit hands one chunk to the workers: its stored bytes when they
		// may be copied, else its elements through HDF5's decoder.
		// size is the chunk's stored size (0: look it up).
		emit := func(c []uint64, stored bool, size uint64) bool {
			var it imported
			if stored && p.mode != Reencoded {
				for i := range off {
					off[i] = c[i] * chunk[i]
				}
				if size == 0 {
					if _, size, err = hd.ChunkInfo(off); err != nil {
						return false
					}
				}
				if size > 0 && size <= uint64(chunkBytes)+zlibOverhead {
					buf := make([]byte, size)
					var mask uint32
					if mask, err = hd.ReadChunk(off, buf); err != nil {
						return false
					}
					it = imported{coord: c, image: buf, mask: mask}
				}
			}
			if it.image == nil {
				if it, err = readBox(c); err != nil {
					return false
				}
			}
			select {
			case work <- it:
				return true
			case <-gctx.Done():
				err = gctx.Err()
				return false
			}
		}
		if p.info.Layout != h5.Chunked {
			forEachCoord(grid, func(c []uint64) bool { return emit(c, false, 0) })
			return err
		}
		var coords [][]uint64
		if coords, err = storedCoords(hd, grid, chunk); err != nil {
			return err
		}
		if coords == nil {
			// Dense: walk the grid, asking the index about each chunk.
			forEachCoord(grid, func(c []uint64) bool {
				for i := range off {
					off[i] = c[i] * chunk[i]
				}
				var size uint64
				if _, size, err = hd.ChunkInfo(off); err != nil {
					return false
				}
				if size == 0 {
					return true // not stored: fill value on both sides
				}
				return emit(c, true, size)
			})
			return err
		}
		for _, c := range coords {
			if !emit(c, true, 0) {
				break
			}
		}
		return err
	})
	// Workers copy raw images (checking and stripping the zlib wrapper) or
	// write decoded elements through the engine. A raw image the engine
	// refuses falls back to HDF5's decoder for that chunk (readBox: an HDF5
	// call beside the producer's, which the binding serializes).
	for w := 0; w < opts.workers(); w++ {
		g.Go(func() error {
			for it := range work {
				copied, untouched := false, false
				if it.image != nil {
					var err error
					if p.zlibDirect && it.mask == 0 && !opts.verify() {
						var verified bool
						verified, err = ds.WriteChunkRawZlib(gctx, it.coord, it.image, 0)
						untouched = err == nil && !verified
					} else {
						err = ds.WriteChunkRaw(gctx, it.coord, it.image, it.mask)
					}
					switch {
					case err == nil:
						copied = true
					case !errors.Is(err, engine.ErrInvalid):
						return err
					}
					if !copied {
						// Not scc's form (a filter skipped in a way scc
						// does not record, a stream that did not shrink
						// the chunk, edge padding other than the fill
						// value): HDF5's decoder, which also reports
						// real damage.
						if it, err = readBox(it.coord); err != nil {
							return err
						}
					}
				}
				if !copied {
					if err := ds.Write(gctx, engine.Box(it.start, it.count), it.elems); err != nil {
						return err
					}
				}
				mu.Lock()
				rep.Chunks++
				if copied {
					rep.CopiedChunks++
				}
				if untouched {
					rep.UntouchedChunks++
				}
				rep.LogicalBytes += int64(chunkBytes)
				mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return rep, err
	}
	// Commit each dataset as it completes: a later failure leaves the
	// datasets imported before it whole and durable.
	if err := dst.Flush(ctx); err != nil {
		return rep, err
	}
	st, err := ds.Storage(ctx)
	if err == nil {
		rep.StoredBytes = int64(st.StoredBytes)
	}
	if rep.Mode != Reencoded && rep.CopiedChunks < rep.Chunks {
		rep.Reason = fmt.Sprintf("%d of %d chunks re-encoded (filters skipped in a way scc does not record, or deflate that did not shrink the chunk)", rep.Chunks-rep.CopiedChunks, rep.Chunks)
	}
	return rep, err
}

// storedCoords lists the chunk coordinates of the stored chunks of a sparse
// dataset, in C order, or returns nil for a dense one. HDF5 1.10 finds the
// i-th stored chunk by walking its index from the start, so listing n
// chunks costs about n²/2 steps against one lookup per grid cell for a
// walk of the grid: the list is used when that is cheaper, which keeps a
// sparse dataset with a huge grid (a long unlimited axis) from costing a
// lookup per empty cell.
func storedCoords(hd *h5.Dataset, grid, chunk []uint64) ([][]uint64, error) {
	n, err := hd.NumChunks()
	if err != nil {
		return nil, err
	}
	cells := uint64(1)
	for _, g := range grid {
		hi, lo := bits.Mul64(cells, g)
		if hi != 0 {
			cells = math.MaxUint64
			break
		}
		cells = lo
	}
	if hi, sq := bits.Mul64(n, n); hi == 0 && sq/2 >= cells {
		return nil, nil
	}
	stored, err := hd.StoredChunks(n)
	if err != nil {
		return nil, err
	}
	coords := make([][]uint64, 0, len(stored))
	for _, sc := range stored {
		c := make([]uint64, len(chunk))
		for i := range c {
			c[i] = sc.Offset[i] / chunk[i]
			if c[i] >= grid[i] {
				return nil, fmt.Errorf("%w: stored chunk at %v outside the extent", ErrHDF5, sc.Offset)
			}
		}
		coords = append(coords, c)
	}
	slices.SortFunc(coords, slices.Compare[[]uint64])
	return coords, nil
}
