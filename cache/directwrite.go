package cache

import (
	"context"
	"fmt"
	"math"

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
// cached would cost more than it saves (directWorthIt): the chunk is
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
//     (adjacent extents; vfd.File coalesces them into one pwritev).
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
	var cand []*group
	var srcs map[*group][]byte
	sz := c.sizing()
	// cached is what the groups left to the cached path will add to the
	// resident bytes, so that one write of many chunks into a cache with
	// room for some keeps those and sends the rest direct.
	var cached int64
	for _, g := range gs {
		dw, ok := g.d.lay().l.(DirectWriter)
		if !ok || !g.full || len(g.reqs) != 1 || !c.directWorthIt(sz, g.hint(), cached) {
			cached += g.hint()
			rest = append(rest, g)
			continue
		}
		src, ok := dw.DirectSource(g.coord, reqs[g.reqs[0]].Piece)
		if !ok || len(src) == 0 {
			cached += g.hint()
			rest = append(rest, g)
			continue
		}
		if srcs == nil {
			srcs = map[*group][]byte{}
		}
		srcs[g] = src
		cand = append(cand, g)
	}
	if len(cand) == 0 {
		return gs, nil, nil
	}
	mine, later := c.claim(cand)
	if len(mine) == 0 {
		return rest, later, nil
	}
	defer c.shedAfterDirect() // after the remove below
	defer c.remove(entriesOf(mine))
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
	// of one dataset).
	for start := 0; start < len(mine); {
		end := start + 1
		for end < len(mine) && mine[end].d == mine[start].d {
			end++
		}
		if err := c.writeDirectDS(ctx, mine[start:end], srcs); err != nil {
			return rest, later, err
		}
		start = end
	}
	return rest, later, nil
}

// writeDirectDS is steps 3-5 of writeDirect for claimed groups of one
// dataset.
func (c *Cache) writeDirectDS(ctx context.Context, gs []*group, srcs map[*group][]byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := gs[0].d
	l := d.lay().l
	dw := l.(DirectWriter)
	ins := make([]Insertion, len(gs))
	heads := make([][]byte, len(gs))
	tails := make([][]byte, len(gs))
	for i, g := range gs {
		src := srcs[g]
		head, tail, sum := dw.DirectFrame(g.coord, src)
		heads[i], tails[i] = head, tail
		ins[i] = Insertion{Coord: g.coord, Old: g.loc, Size: int64(len(head) + len(src) + len(tail)), Sum: sum}
	}
	if err := l.Insert(ctx, ins); err != nil {
		return fmt.Errorf("cache: Layout.Insert: %w", err)
	}
	exts := make([]vfd.Extent, 0, 3*len(gs))
	var n int64
	for i, g := range gs {
		off := ins[i].New.Addr
		for _, b := range [3][]byte{heads[i], srcs[g], tails[i]} {
			if len(b) > 0 {
				exts = append(exts, vfd.Extent{Off: off, Buf: b})
				off += int64(len(b))
				n += int64(len(b))
			}
		}
	}
	c.stats.vectorWrites.Add(1)
	c.stats.vectorWriteBytes.Add(n)
	werr := d.file.drv.WriteV(exts)
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
	c.stats.directWrites.Add(int64(len(gs)))
	c.stats.bytesFlushed.Add(n)
	c.stats.chunksFlushed.Add(int64(len(gs)))
	return nil
}

// directWorthIt is the rule's size test for a whole chunk of n bytes (its
// size hint) that is not resident, cached being what other chunks of the
// same write will add on the cached path: the chunk is above the bypass
// threshold, at least Config.DirectWriteBytes, or admitting it would take
// the resident bytes past the quiescent limit. Bytes above that limit are only ever held for a while:
// the reservation evicts past the active limit and the background trim
// evicts back to the quiescent limit as soon as no request runs, so a
// chunk admitted there displaces another (or itself) soon, and copying it
// into the cache buys nothing that writing it now does not. A chunk below
// DirectWriteBytes written into a cache with room stays cached (a small
// hot chunk rewritten
// again and again costs a copy each time and one write at the end); a
// stream of whole chunks larger than the cache fills it to the quiescent
// limit and then goes straight to the file instead of thrashing it.
// BypassBytes -1 turns direct writes off with the bypass.
func (c *Cache) directWorthIt(sz *sizing, n, cached int64) bool {
	if sz.bypass == math.MaxInt64 {
		return false
	}
	if n > sz.bypass {
		return true
	}
	if m := c.cfg.DirectWriteBytes; m > 0 && n >= m {
		return true
	}
	return c.budget.resident.Load()+cached+n > sz.quiescent
}

// shedAfterDirect sheds metadata (external.go) when it holds more than half
// the active limit and the cache is over that limit.
//
// Why here: direct writes reserve no memory, so reserve's shedding, which
// runs when a load or create does not fit, never sees the index entries
// their Publish adds. A stream of direct writes into a full cache (a write
// burst of whole chunks) otherwise grew the index's changed blocks past
// the limit until the next load or create, or the trimmer, found nothing
// else to evict. The caller holds nothing here (its claims are removed),
// as a request waiting in reserve holds nothing.
func (c *Cache) shedAfterDirect() {
	limit := c.sizing().active
	if meta := c.budget.metadata.Load(); c.budget.resident.Load() > limit && meta > limit/2 && meta > c.budget.shedAt.Load() {
		c.shedMetadata()
	}
}
