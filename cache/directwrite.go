package cache

import (
	"context"
	"fmt"
	"sync"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/vfd"
)

// Direct writes (SCC requirements §3.2.1-2, the direct paths of seed
// 002): a write that covers a whole chunk of a layout whose stored frame is
// the chunk's bytes between a small header and trailer goes from the
// caller's buffer to the file by one vector write, the frame's header and
// trailer from small side buffers. Nothing is created, copied or made
// resident.
//
// Rule: a write goes direct when its chunk is missing from the table (no
// resident copy, clean or dirty, and no load or eviction in progress), one
// request of the sub-list covers it whole (Request.Full), the layout offers
// the caller's bytes as the image (DirectWriter), and keeping the chunk
// cached would cost more than it saves (intake.worthIt): the chunk is
// larger than Config.BypassBytes (the cached path would not keep it anyway:
// it would be created, gathered, encoded, written and dropped at once,
// dropBypass), or at least Config.DirectWriteBytes (64 KiB: from there on
// the cached path's two copies cost more than the write, and a read-back
// is one pread at page-cache speed; direct writes used to go direct "only when keeping
// it would evict something else", which left h5perf's unfiltered writes
// at 0.5-0.8x HDF5 in a cache with room, and measured direct 1.3-1.9x
// cached there), or admitting it would take the resident bytes past the
// quiescent limit (the cache is full). This is HDF5's rule (chunks at
// least as large as the dataset's cache skip it) with the cache's bypass
// threshold and its fill for the cache's size. BypassBytes -1 turns
// direct writes off with the bypass; so does Config.NoDirectWrites alone.
//
// A whole chunk of a filtered layout goes the same way, its image encoded
// from the caller's bytes on the workers (DirectEncoder,
// directwrite_encode.go), under the read side's rule for filtered chunks.
//
// Safety, step by step (writeDirect):
//
//  1. claim: a placeholder entry in the loading state owns the key, as
//     for a load (and DirectWrite), so no concurrent request loads,
//     creates or writes the chunk meanwhile: they wait for the
//     placeholder and then look again. A chunk someone else claimed first
//     goes back to the caller's retry list (it may now be resident, and
//     then the cached path serves it: a resident copy wins).
//  2. A location looked up before an Insert/Publish/Delete of the dataset
//     is looked up again (group.epoch), so Insertion.Old is current.
//  3. Layout.Insert allocates new space (copy on write: the chunk's
//     committed image is never overwritten).
//  4. One WriteV per dataset writes header, caller's bytes and trailer
//     (adjacent extents; vfd.File coalesces them into one pwritev). For
//     chunks of at least Config.LateSumBytes of a LateFramer, the
//     checksums are computed while the bytes are written and the
//     trailers go in a second WriteV once they are known (latesum.go).
//  5. Layout.Publish records the new image in the index, which becomes
//     dirty exactly as after the write-back of an evicted dirty chunk: it
//     is committed by the next Flush, and Flush semantics do not change.
//     A failed write is published as failed (the new space is freed, the
//     index keeps the old image) and the error returned: the previous
//     contents stay the visible version.
//  6. The placeholders are removed, waking waiters.
//
// Overlapping requests are ordered by the engine's serializer as for any
// write; a direct read of the same chunk (direct.go) that is not ordered
// against this write could see the old space reused, and the checksums
// catch that as corruption, as they do for eviction.

// writeDirect writes the groups of a write that can go directly (see
// above) and returns the others, plus the requests of groups another
// request claimed first (to retry).
func (c *Cache) writeDirect(ctx context.Context, reqs []Request, gs []*group) (rest []*group, later []int, err error) {
	if c.cfg.NoDirectWrites {
		return gs, nil, nil
	}
	sc := directScratchPool.Get().(*directScratch)
	defer sc.put()
	sz := c.sizes.current()
	// cached is what the groups left to the cached path will add to the
	// resident bytes, so that one write of many chunks into a cache with
	// room for some keeps those and sends the rest direct.
	var cached int64
	for _, g := range gs {
		src, ok := c.intake.sourceOf(sz, reqs, g, cached)
		if !ok {
			cached += g.hint()
			rest = append(rest, g)
			continue
		}
		sc.cand, sc.candSrc = append(sc.cand, g), append(sc.candSrc, src)
	}
	if len(sc.cand) == 0 {
		return gs, nil, nil
	}
	mine, later := c.claim(sc.cand)
	if len(mine) == 0 {
		return rest, later, nil
	}
	defer c.shedAfterDirect() // after the remove below
	defer c.remove(entriesOf(mine))
	// claim keeps the order of cand: pair each claimed group with its
	// source.
	srcs := sc.candSrc[:0] // overwrites only entries already read
	for i, j := 0, 0; i < len(mine); j++ {
		if sc.cand[j] == mine[i] {
			srcs = append(srcs, sc.candSrc[j])
			i++
		}
	}
	var stale []*group
	for _, g := range mine {
		if g.d.relocs.Load() != g.epoch {
			stale = append(stale, g)
		}
	}
	if err := lookup(ctx, stale); err != nil {
		return rest, later, err
	}
	// One Insert, WriteV and Publish per dataset (a write is almost always
	// of one dataset), for its framed chunks and for each round of its
	// encoded ones.
	for start := 0; start < len(mine); {
		end := start + 1
		for end < len(mine) && mine[end].d == mine[start].d {
			end++
		}
		sc.framed, sc.framedSrc = sc.framed[:0], sc.framedSrc[:0]
		sc.encoded, sc.encodedSrc = sc.encoded[:0], sc.encodedSrc[:0]
		for k := start; k < end; k++ {
			if srcs[k].encode {
				sc.encoded, sc.encodedSrc = append(sc.encoded, mine[k]), append(sc.encodedSrc, srcs[k])
			} else {
				sc.framed, sc.framedSrc = append(sc.framed, mine[k]), append(sc.framedSrc, srcs[k])
			}
		}
		if err := writeFramed(ctx, &c.stats, &c.background.split, sc.framed, sc.framedSrc, sc); err != nil {
			return rest, later, err
		}
		if err := c.writer.writeEncoded(ctx, sc.encoded, sc.encodedSrc); err != nil {
			return rest, later, err
		}
		start = end
	}
	return rest, later, nil
}

// directSource is the caller's bytes of a chunk that goes directly, and
// whether they are encoded (DirectEncoder) or framed (DirectWriter).
type directSource struct {
	src    []byte
	encode bool
}

// directScratch is a direct write's working set, pooled: a stream of
// whole-chunk writes makes no garbage per chunk for its lists.
type directScratch struct {
	cand            []*group
	candSrc         []directSource // candSrc[i] is cand[i]'s
	framed, encoded []*group
	framedSrc       []directSource
	encodedSrc      []directSource
	ins             []layout.Insertion
	parts           [][]byte // per chunk, its frame's parts end to end
	exts            []vfd.Extent
	tails           []vfd.Extent // the tails written after the sums (latesum.go)
	// seals holds the checksums of a write that computes them beside it
	// (latesum.go).
	seals sealSlot
}

var directScratchPool = sync.Pool{New: func() any { return new(directScratch) }}

// put drops every reference (groups, the caller's bytes) and pools s,
// unless a huge write grew it.
func (s *directScratch) put() {
	if cap(s.cand) > 4096 || cap(s.exts) > 3*4096 {
		return
	}
	s.seals.reset()
	clear(s.tails[:cap(s.tails)])
	s.tails = s.tails[:0]
	clear(s.cand[:cap(s.cand)])
	clear(s.candSrc[:cap(s.candSrc)])
	clear(s.framed[:cap(s.framed)])
	clear(s.framedSrc[:cap(s.framedSrc)])
	clear(s.encoded[:cap(s.encoded)])
	clear(s.encodedSrc[:cap(s.encodedSrc)])
	clear(s.ins[:cap(s.ins)])
	clear(s.parts[:cap(s.parts)])
	clear(s.exts[:cap(s.exts)])
	s.cand, s.candSrc, s.framed, s.framedSrc = s.cand[:0], s.candSrc[:0], s.framed[:0], s.framedSrc[:0]
	s.encoded, s.encodedSrc, s.ins, s.parts, s.exts = s.encoded[:0], s.encodedSrc[:0], s.ins[:0], s.parts[:0], s.exts[:0]
	directScratchPool.Put(s)
}

// writeFramed writes claimed groups of one dataset whose images are the
// caller's bytes in the layout's frame (DirectWriter), srcs[i] being
// gs[i]'s, counting in st; large chunks of a LateFramer have their
// checksums computed beside the write, by one of sp's helpers when one is
// free (latesum.go).
func writeFramed(ctx context.Context, st *counters, sp *splitState, gs []*group, srcs []directSource, sc *directScratch) error {
	if len(gs) == 0 {
		return nil
	}
	dw := gs[0].d.lay().l.(layout.DirectWriter)
	if lf, ok := dw.(layout.LateFramer); ok && sp.sumMin > 0 && lateWorth(srcs, sp.sumMin) {
		return writeLate(ctx, st, sp, lf, gs, srcs, sc)
	}
	sc.ins, sc.parts = sc.ins[:0], sc.parts[:0]
	for i, g := range gs {
		src := srcs[i].src
		head, tail, sum := dw.DirectFrame(g.coord, src)
		sc.parts = append(sc.parts, head, src, tail)
		sc.ins = append(sc.ins, layout.Insertion{Coord: g.coord, Old: g.loc, Size: int64(len(head) + len(src) + len(tail)), Sum: sum})
	}
	return writeDirectDS(ctx, st, gs, sc.ins, sc.parts, 3, sc, nil)
}

// lateWorth reports whether every chunk of srcs is at least min bytes,
// large enough for its checksum to be computed beside its write
// (latesum.go).
func lateWorth(srcs []directSource, min int64) bool {
	for _, s := range srcs {
		if int64(len(s.src)) < min {
			return false
		}
	}
	return true
}

// writeLate is writeFramed for chunks whose checksums are computed while
// their bytes are written (latesum.go).
func writeLate(ctx context.Context, st *counters, sp *splitState, lf layout.LateFramer, gs []*group, srcs []directSource, sc *directScratch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	j := sc.seals.take()
	sc.ins, sc.parts = sc.ins[:0], sc.parts[:0]
	for i, g := range gs {
		src := srcs[i].src
		head, tail := lf.DirectFrameLate(g.coord, src)
		sc.parts = append(sc.parts, head, src, tail)
		sc.ins = append(sc.ins, layout.Insertion{Coord: g.coord, Old: g.loc, Size: int64(len(head) + len(src) + len(tail))})
		j.seals = append(j.seals, seal{lf: lf, coord: g.coord, src: src, tail: tail})
	}
	sc.seals.handOut(sp, j)
	return writeDirectDS(ctx, st, gs, sc.ins, sc.parts, 3, sc, j)
}

// writeDirectDS is steps 3-5 of writeDirect for claimed groups of one
// dataset: ins[i] describes gs[i]'s new image, which is
// parts[i*per:(i+1)*per] end to end. The writes are counted in st; sc
// lends the extent lists. With j (latesum.go), each image's last part is
// its tail, whose bytes j's seals fill: the other parts are written
// first, then j is finished and the tails written, and the sums go into
// ins before Publish. Whatever fails, j is finished before the return.
func writeDirectDS(ctx context.Context, st *counters, gs []*group, ins []layout.Insertion, parts [][]byte, per int, sc *directScratch, j *sealJob) error {
	if err := ctx.Err(); err != nil {
		if j != nil {
			sc.seals.release(j, j.finish(false))
		}
		return err
	}
	d := gs[0].d
	l := d.lay().l
	if err := l.Insert(ctx, ins); err != nil {
		if j != nil {
			sc.seals.release(j, j.finish(false))
		}
		return fmt.Errorf("cache: Layout.Insert: %w", err)
	}
	exts, tails := sc.exts[:0], sc.tails[:0]
	var n int64
	for i := range gs {
		off := ins[i].New.Addr
		for k, b := range parts[i*per : (i+1)*per] {
			if len(b) > 0 {
				if j != nil && k == per-1 {
					tails = append(tails, vfd.Extent{Off: off, Buf: b})
				} else {
					exts = append(exts, vfd.Extent{Off: off, Buf: b})
				}
				off += int64(len(b))
				n += int64(len(b))
			}
		}
	}
	sc.exts, sc.tails = exts, tails
	st.vectorWrites.Add(1)
	st.vectorWriteBytes.Add(n)
	werr := d.file.drv.WriteV(exts)
	if j != nil {
		// The helper may be reading the caller's bytes: finish j even
		// when the write failed, then write the tails it filled.
		takenBack := j.finish(werr == nil)
		if werr == nil {
			for i := range ins {
				ins[i].Sum, ins[i].New.Sum = j.seals[i].sum, j.seals[i].sum
			}
			if len(tails) > 0 {
				st.vectorWrites.Add(1)
				werr = d.file.drv.WriteV(tails)
			}
		}
		sc.seals.release(j, takenBack)
	}
	if werr != nil {
		werr = fmt.Errorf("cache: writing %d chunks directly: %w", len(gs), werr)
	}
	perr := l.Publish(ctx, ins, werr)
	d.relocs.Add(1) // after Publish: see group.epoch
	if werr != nil {
		return werr
	}
	if perr != nil {
		return fmt.Errorf("cache: Layout.Publish: %w", perr)
	}
	st.directWrites.Add(int64(len(gs)))
	st.bytesFlushed.Add(n)
	st.chunksFlushed.Add(int64(len(gs)))
	return nil
}

// shedAfterDirect sheds metadata (external.go) when it holds more than half
// the active limit and the cache is over that limit.
//
// Why here: direct writes and direct decodes reserve no memory, so
// reserve's shedding, which runs when a load or create does not fit, never
// sees the index entries their Publish adds or the index blocks their
// lookups load. A stream of direct writes into a full cache (a write burst
// of whole chunks), or of reads served without keeping their chunks,
// otherwise grew the index's blocks past the limit until the next load or
// create, or the trimmer, found nothing else to evict. The caller holds
// nothing here (its claims are removed, a direct decode makes none), as a
// request waiting in reserve holds nothing.
func (c *Cache) shedAfterDirect() {
	limit := c.sizes.current().active
	if meta := c.budget.metadata.Load(); c.budget.resident.Load() > limit && meta > limit/2 && meta > c.budget.shedAt.Load() {
		c.budget.shedMetadata(c.registered.files, &c.stats)
	}
}
