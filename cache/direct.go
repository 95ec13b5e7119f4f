package cache

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/vfd"
)

// Direct reads (SCC requirements §3.2.1-2, the direct paths of seed
// 002): a read that covers a whole stored chunk which is not resident, of a
// layout whose stored image is the chunk's bytes plus a small trailer, goes
// by one vector read straight into the caller's buffer and the trailer into
// a side buffer; the layout then verifies the checksum on those bytes. The
// chunk is not made resident, so a one-pass read of a large dataset costs
// the cache neither memory nor evictions, and the bytes are copied once (by
// the kernel). Reads of part of a chunk the cache would not keep go the
// same way, into pooled buffers (directpart.go).
//
// All the chunks of one request that go directly, whole or in part, are
// read with one vector read per file (adjacent extents coalesce into one
// preadv) and each is verified on the bytes read, on the caller's
// goroutine. (Cutting a large read into shares verified at once on the
// worker pool was tried and dropped: on a machine whose cores are busy,
// the usual case with concurrent readers, it measured 5-10 % slower than
// one pass, and with concurrent readers the cores are used anyway.) A
// large read while a core is likely idle is read in shares by helper
// goroutines (splitread.go) and verified here as any other.
//
// Coherence: only chunks missing from the table go direct. A resident copy
// (dirty or clean) is served from memory, and an entry being loaded or
// evicted is waited for (doSlow), so a dirty copy always wins. A chunk
// absent from the table has no unpublished version: eviction publishes a
// chunk's new location before it removes the entry. A write that makes the
// chunk dirty after the table was consulted overlaps the read, and the
// engine's serializer orders overlapping requests; at the cache level the
// checksum and the index's Sum catch any torn image as corruption.

// When chunks go directly: a read of a whole chunk that is not resident
// whenever the layout offers the caller's bytes
// (layout.DirectReader.DirectTarget); a read of
// part of a chunk when the chunk is not resident and larger than
// Config.BypassBytes (the chunks the cached path would load, serve and
// drop at once, or keep only by evicting others), or of any size for a
// layout whose blocks are encoded alone (layout.PartFirst: sharded
// chunks); a write of a whole one
// when the chunk is not resident and either larger than BypassBytes or
// too large for what is left under the quiescent limit (a full cache
// would keep it only by evicting others; intake.worthIt).
// Other chunks above BypassBytes are loaded, served and dropped at once
// (the fallback SCC internal API names for "Skip Cache"). A resident copy, clean
// or dirty, always serves the request.
//
// Dense chunks are read and written directly only whole. A dense chunk's
// stored frame carries one CRC32C over the whole image (FORMAT.md chunk
// frame), which a partial read cannot verify. Per-block checksums were
// weighed and left out: they would need a new chunk frame version (a
// table of block sums beside the trailer, checked by Decode, Check, the
// raw chunk API and the direct paths) for a case the layouts already
// cover: a dense chunk is the unit its writer chose, read whole (as HDF5
// does) and, when larger than the cache and wanted whole, straight into
// the caller's buffer; an unfiltered array read in small parts belongs in
// smaller chunks or in the contiguous layout, whose ~64 KiB pieces are
// exactly such checksummed blocks. A partial read of a dense chunk larger
// than the cache therefore loads it, serves the part and drops it.

// directRead is one chunk read directly: whole into the caller's bytes
// (dst, trailer), or in part into pooled blocks (directpart.go).
type directRead struct {
	g       *group
	dst     []byte // whole: the caller's bytes
	trailer []byte // whole: the stored trailer
	tl      int    // whole: len(trailer), before it is carved
	part    *partRead
	// summer is the layout if it is a DirectSummer (whole chunks only);
	// a split read (splitread.go) then sets summed and sum, the checksum
	// of dst computed by pieces.
	summer layout.DirectSummer
	sum    uint32
	summed bool
}

func (x *directRead) bytes() int64 {
	if x.part != nil {
		return x.part.bytes()
	}
	return int64(len(x.dst) + x.tl)
}

// readDirect serves the groups of a read that can go directly, whole
// (above, or by rows: directrows.go) or in part (directpart.go), and
// returns the others.
func (c *Cache) readDirect(ctx context.Context, reqs []Request, gs []*group) ([]*group, error) {
	var ds []directRead
	var rs []rowRead // whole chunks read by rows (directrows.go)
	var trailers int
	rest := gs[:0:0]
	for _, g := range gs {
		if !g.loc.Exists() {
			rest = append(rest, g)
			continue
		}
		l := g.d.lay().l
		if dr, ok := l.(layout.DirectReader); ok && len(g.reqs) == 1 {
			dst, tl, ok := dr.DirectTarget(g.loc, reqs[g.reqs[0]].Piece)
			if ok && tl >= 0 && int64(len(dst)+tl) == g.loc.Size {
				ds = append(ds, directRead{g: g, dst: dst, tl: tl})
				ds[len(ds)-1].summer, _ = l.(layout.DirectSummer)
				trailers += tl
				continue
			}
		}
		if r, ok := planRows(reqs, g); ok {
			rs = append(rs, r)
			continue
		}
		if p := g.planPart(reqs, c.sizes.current().bypass); p != nil {
			ds = append(ds, directRead{g: g, part: p})
			continue
		}
		rest = append(rest, g)
	}
	if len(ds) == 0 {
		if err := c.workers.readRows(ctx, rs); err != nil {
			return nil, err
		}
		return rest, nil
	}
	// The trailers share one side buffer: no allocation per chunk.
	if trailers > 0 {
		side := make([]byte, trailers)
		for i := range ds {
			if tl := ds[i].tl; tl > 0 {
				ds[i].trailer, side = side[:tl:tl], side[tl:]
			}
		}
	}
	// In file then address order: adjacent chunks are one run of the
	// file (one preadv).
	slices.SortFunc(ds, func(a, b directRead) int {
		if a.g.d.file != b.g.d.file {
			return cmp.Compare(a.g.d.file.serial, b.g.d.file.serial)
		}
		return cmp.Compare(a.g.loc.Addr, b.g.loc.Addr)
	})
	// The chunks read by rows after the others: readVerify gives back the
	// blocks of part reads whatever happens.
	if err := c.background.split.readVerify(ds); err != nil {
		return nil, err
	}
	if err := c.workers.readRows(ctx, rs); err != nil {
		return nil, err
	}
	return rest, nil
}

// readVerify reads the chunks of a direct read (sorted by file and
// address) with one vector read per file, then verifies every chunk and,
// for those read in part, serves their pieces. Blocks read in part go
// back to the pool whatever happens.
func (s *splitState) readVerify(ds []directRead) error {
	defer func() {
		for i := range ds {
			ds[i].part.release()
		}
	}()
	var n int
	for i := range ds {
		if p := ds[i].part; p != nil {
			n += len(p.blocks)
		} else {
			n += 2
		}
	}
	exts := make([]vfd.Extent, 0, n)
	var tags []int32 // per extent of exts: see splitState.read
	if s.min > 0 {
		tags = make([]int32, 0, n)
	}
	for start := 0; start < len(ds); {
		f := ds[start].g.d.file
		end := start
		for ; end < len(ds) && ds[end].g.d.file == f; end++ {
			x := &ds[end]
			addr := x.g.loc.Addr
			if p := x.part; p != nil {
				for j, b := range p.blocks {
					exts = append(exts, vfd.Extent{Off: addr + b.Off, Buf: p.bufs[j]})
					tags = tag(tags, -1)
				}
				continue
			}
			exts = append(exts, vfd.Extent{Off: addr, Buf: x.dst})
			if x.summer != nil {
				tags = tag(tags, int32(end))
			} else {
				tags = tag(tags, -1)
			}
			if len(x.trailer) > 0 {
				exts = append(exts, vfd.Extent{Off: addr + int64(len(x.dst)), Buf: x.trailer})
				tags = tag(tags, -1)
			}
		}
		if err := s.read(f, exts, tags, ds); err != nil {
			return fmt.Errorf("cache: reading %d chunks directly: %w", end-start, err)
		}
		exts, tags = exts[:0], tags[:0]
		start = end
	}
	for i := range ds {
		x := &ds[i]
		if x.part != nil {
			if err := x.part.serve(); err != nil {
				return fmt.Errorf("cache: chunk %v read in part directly: %w", x.g.coord, err)
			}
			continue
		}
		var err error
		if x.summed {
			err = x.summer.VerifyDirectSum(x.g.coord, x.g.loc, x.sum, x.dst, x.trailer)
		} else {
			err = x.g.d.lay().l.(layout.DirectReader).VerifyDirect(x.g.coord, x.g.loc, x.dst, x.trailer)
		}
		if err != nil {
			return fmt.Errorf("cache: chunk %v read directly: %w", x.g.coord, err)
		}
	}
	return nil
}

// tag appends t to tags unless tags is nil (splitting is off).
func tag(tags []int32, t int32) []int32 {
	if tags == nil {
		return nil
	}
	return append(tags, t)
}
