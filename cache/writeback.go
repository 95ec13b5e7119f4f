package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/vfd"
)

// writer writes chunks back to their files: the dirty entries that
// eviction and flushes hand it (writeBack, flushDatasets) and the chunks
// a direct write encodes straight from the caller's buffer
// (directwrite_encode.go). It owns what encoding costs outside the
// budget: the bytes of images encoded and not yet written, and the
// tokens that bound the direct encodes in flight. It encodes on the
// workers, and reports to the budget and the counters it is given. No
// lock: its fields are atomic or set once by New.
type writer struct {
	// encoding is the bytes of encoded images not yet written that are
	// outside resident (Stats.EncodingBytes): direct encodes' and
	// write-back rounds'; encodingPeak the highest it was.
	encoding, encodingPeak atomic.Int64
	// encodes holds a token for each image encoded straight from a
	// caller's buffer and not yet written (directwrite_encode.go):
	// capacity Config.Workers, so that those images never number more
	// than the encodes the workers can run at once, however many requests
	// write.
	encodes chan struct{}

	// What it works with, set by New.
	workers workers
	budget  *budget
	stats   *counters
	sizes   *sizer
	order   *policyLock
	pre     *preEncodeState
	// split's helpers compute the checksums of large borrowed images
	// while they are written (latesum.go); set by startBackground.
	split *splitState
}

// noteEncoding records v as the encoding peak if it is one.
func (w *writer) noteEncoding(v int64) { raise(&w.encodingPeak, v) }

// flushDatasets writes every chunk of dss that is dirty when it starts
// (SCC design §3.3, §3.8), then syncs their files when sync is set.
//
// Concurrency: a flusher pins each entry (so it cannot be evicted) and
// takes its flushMu with TryLock, so that two flushers never write the same
// chunk at once. Entries another flusher holds, and entries being loaded or
// evicted, are handled afterwards, one at a time, holding nothing else, so
// flushers cannot deadlock on each other. Writes that race with the flush
// bump the entry's version and keep it dirty (writeBack).
//
// Phases: take a snapshot of the dirty entries (dirtySnapshot); claim and
// write those free now in rounds (claimFree, writeClaimed); wait for the
// ones being loaded or evicted, then claim and write the busy ones that
// are free by then (claimDeferred); write the rest one at a time
// (writeOneByOne); sync the files (syncFiles).
func (w *writer) flushDatasets(ctx context.Context, dss []*Dataset, sync bool) error {
	snap := w.order.dirtySnapshot(dss)
	batch, deferred, waits := claimFree(w.budget, snap)
	var errs []error
	if err := w.writeClaimed(ctx, batch); err != nil {
		errs = append(errs, err)
	}
	// Written entries stay pinned until the sync: if it fails they are
	// marked dirty again, and meanwhile nobody may evict them as clean.
	written := batch
	defer func() {
		for _, e := range written {
			w.budget.unpin(e)
		}
	}()
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			return errors.Join(append(errs, ctx.Err())...)
		}
	}
	// Second batch: entries that were busy but are free now are encoded
	// in parallel and written together, like the first batch (taking
	// flushMu with TryLock only, so this still waits for nothing).
	again, rest := claimDeferred(w.budget, deferred)
	if len(again) > 0 {
		if err := w.writeClaimed(ctx, again); err != nil {
			errs = append(errs, err)
		}
		written = append(written, again...)
	}
	var err error
	written, errs, err = w.writeOneByOne(ctx, rest, written, errs)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if sync {
		errs = append(errs, syncFiles(dss, written)...)
	}
	return errors.Join(errs...)
}

// claimFree pins and takes the flushMu of each entry of snap still dirty
// (batch). An entry being loaded or evicted goes to deferred with the
// channel to wait for (waits), one another flusher holds to deferred; a
// dead or clean entry is dropped. The pins it gives back are released
// on b (budget.unpin).
func claimFree(b *budget, snap []*entry) (batch, deferred []*entry, waits []chan struct{}) {
	for _, e := range snap {
		ok, ch := e.pin()
		if !ok {
			if ch != nil {
				waits = append(waits, ch)
				deferred = append(deferred, e)
			}
			continue
		}
		if !e.flushMu.TryLock() {
			b.unpin(e)
			deferred = append(deferred, e)
			continue
		}
		if !e.dirty.Load() {
			e.flushMu.Unlock()
			b.unpin(e)
			continue
		}
		batch = append(batch, e)
	}
	return batch, deferred, waits
}

// claimDeferred is claimFree for the entries deferred once: those still
// busy (or dead) go to rest.
func claimDeferred(b *budget, deferred []*entry) (again, rest []*entry) {
	for _, e := range deferred {
		ok, _ := e.pin()
		if !ok {
			rest = append(rest, e) // dead (skipped by writeOneByOne) or still settling
			continue
		}
		if !e.flushMu.TryLock() {
			b.unpin(e)
			rest = append(rest, e)
			continue
		}
		if !e.dirty.Load() {
			e.flushMu.Unlock()
			b.unpin(e)
			continue
		}
		again = append(again, e)
	}
	return again, rest
}

// writeClaimed writes claimed entries (pinned, flushMu held) in rounds
// and releases their flushMu; they stay pinned.
func (w *writer) writeClaimed(ctx context.Context, es []*entry) error {
	err := w.writeBackRounds(ctx, es)
	for _, e := range es {
		e.flushMu.Unlock()
	}
	return err
}

// writeOneByOne writes, one at a time, the entries another flusher or an
// evictor still held. If one is gone, its eviction wrote it; if it is
// still dirty, it is written now. Each entry it pins is added to written;
// write errors are added to errs; err is the context's error when it ends
// while waiting.
func (w *writer) writeOneByOne(ctx context.Context, rest, written []*entry, errs []error) (_ []*entry, _ []error, err error) {
	for _, e := range rest {
		for {
			ok, ch := e.pin()
			if !ok {
				if ch == nil {
					break // dead: removed, so it was written (or dropped by SetExtent)
				}
				select {
				case <-ch:
					continue
				case <-ctx.Done():
					return written, errs, ctx.Err()
				}
			}
			e.flushMu.Lock()
			if e.dirty.Load() {
				if err := w.writeBack(ctx, []*entry{e}, false); err != nil {
					errs = append(errs, err)
				}
			}
			e.flushMu.Unlock()
			written = append(written, e)
			break
		}
	}
	return written, errs, nil
}

// syncFiles syncs each file of dss once (File.sync).
func syncFiles(dss []*Dataset, written []*entry) []error {
	var errs []error
	seen := map[*File]bool{}
	for _, d := range dss {
		if seen[d.file] {
			continue
		}
		seen[d.file] = true
		if err := d.file.sync(written); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// sync syncs f; if that fails, f's entries among written are marked dirty
// again.
func (f *File) sync(written []*entry) error {
	f.c.stats.syncs.Add(1)
	err := f.drv.Sync()
	if err != nil {
		for _, e := range written {
			if e.ds.file == f {
				f.c.budget.redirty(e)
			}
		}
	}
	return err
}

// Flush writes the dataset's dirty chunks and syncs its file; with evict it
// then drops every chunk of the dataset that is not in use (SCC internal API
// H5SC_flush_dset).
func (d *Dataset) Flush(ctx context.Context, evict bool) error {
	c := d.c
	if err := c.begin(); err != nil {
		return err
	}
	defer c.end()
	if err := c.writer.flushDatasets(ctx, []*Dataset{d}, true); err != nil {
		return err
	}
	if evict {
		c.drop(d, false)
	}
	return nil
}

// writeBackRounds is writeBack for a flush. Encoded images live outside the
// budget until written: a flush of a full cache encoding every dirty chunk
// at once would hold a second cache's worth of them. Rounds of at most an
// eighth of the active limit of chunks bound that, and still give the pool
// many chunks to encode in parallel and the driver one vector write per
// round. (Eviction writes its victims in one round, SCC design §3.6: they
// are what one request needs.)
func (w *writer) writeBackRounds(ctx context.Context, es []*entry) error {
	limit := max(w.sizes.current().active/8, 1)
	var errs []error
	for start := 0; start < len(es); {
		rest := es[start:]
		end := start + cut(limit, len(rest), func(i int) int64 { return rest[i].size.Load() })
		if err := w.writeBack(ctx, es[start:end], false); err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
		start = end
	}
	return errors.Join(errs...)
}

// writeBack writes the given dirty entries (SCC requirements §3.2.3 chunk flush):
// encode in parallel under the shared latch remembering each version,
// one Layout.Insert per dataset, one WriteV per file, optionally Sync, then
// mark clean each entry whose version did not change meanwhile.
//
// The caller guarantees exclusive write-back rights on every entry: the
// entry is evicting, or the caller holds its flushMu. On error no entry is
// marked clean (DESIGN.md "No data loss").
//
// It works in phases: encode every chunk on the workers (encodeRound),
// allocate new space with one Layout.Insert per dataset (allocateRound),
// write every image with one WriteV per file (writeImages), publish the
// outcome with one Layout.Publish per dataset (publishRound), and mark the
// chunks written that did not change meanwhile clean (markWritten). A dataset whose Insert fails and a file
// whose write fails keep their chunks dirty; the others go on.
func (w *writer) writeBack(ctx context.Context, es []*entry, sync bool) error {
	if len(es) == 0 {
		return nil
	}
	// Every eviction of a dirty chunk comes through here: its slices and
	// maps are recycled so that it makes no garbage per chunk.
	sc := wbScratchPool.Get().(*wbScratch)
	defer sc.put()
	sc.size(len(es))
	defer func() { w.encoding.Add(-sc.encoding.Swap(0)) }() // once released
	defer sc.release(es)
	if err := w.encodeRound(ctx, es, sc); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	errs := allocateRound(ctx, es, sc)
	writeImages(sc, w.stats, w.split, sync)
	sc.unlatch(es) // the images are written (or failed): the chunks may change
	for _, err := range sc.fileErr {
		errs = append(errs, err)
	}
	errs = publishRound(ctx, es, sc, errs)
	w.markWritten(es, sc)
	return errors.Join(errs...)
}

// encodeRound encodes es on the workers into sc.enc, noting in sc.ver
// the version each image is of. A kept pre-encoded image of that version
// is used as it is (sc.pre holds it); a BorrowingEncoder's image that
// aliases the chunk leaves the chunk's latch held shared (sc.held).
func (w *writer) encodeRound(ctx context.Context, es []*entry, sc *wbScratch) error {
	enc, ver, pre, held := sc.enc, sc.ver, sc.pre, sc.held
	return w.workers.run(ctx, len(es), func(i int) (err error) {
		e := es[i]
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: Encode: %v", ErrPanic, r)
			}
		}()
		e.latch.RLock()
		keep := false
		defer func() {
			if !keep {
				e.latch.RUnlock()
			}
		}()
		ver[i] = e.version.Load()
		if p := e.encoded.Load(); p != nil && p.ver == ver[i] {
			// Pre-encoded in the background (background.go). The entry
			// holds p while we hold the latch, so taking a hold is safe.
			p.refs.Add(1)
			pre[i], enc[i] = p, p.enc
			w.stats.preHits.Add(1)
			return nil
		}
		l := e.ds.lay().l
		if lb, ok := l.(layout.LateBorrower); ok && w.split != nil && w.split.sumMin > 0 && e.size.Load() >= lateWriteBackMin(w.split.sumMin) {
			// e.size (memory) bounds the image's bytes from above: the
			// image itself tells whether they reach the threshold.
			var tail int
			enc[i], tail, ok, err = lb.EncodeBorrowedLate(e.coord, e.chunk)
			if n := len(enc[i].Image) - tail; ok && int64(n) < lateWriteBackMin(w.split.sumMin) {
				enc[i].Sum = lb.SealFrame(e.coord, enc[i].Image[:n], enc[i].Image[n:])
			} else if ok {
				sc.late[i] = tail + 1
			}
			keep = err == nil && !enc[i].Pooled
			held[i] = keep
		} else if b, ok := l.(layout.BorrowingEncoder); ok {
			enc[i], err = b.EncodeBorrowed(e.coord, e.chunk)
			keep = err == nil && !enc[i].Pooled // a pooled image is a copy
			held[i] = keep
		} else {
			enc[i], err = l.Encode(e.coord, e.chunk)
		}
		if err == nil && !held[i] {
			// An image of its own, outside the budget until written
			// (Stats.EncodingBytes); a borrowed one is the chunk.
			n := int64(cap(enc[i].Image))
			sc.encoding.Add(n)
			w.noteEncoding(w.encoding.Add(n))
		}
		return err
	})
}

// allocateRound groups es by dataset (sc.byDS, in sc.order) and calls one
// Layout.Insert per dataset, recording each dataset's insertions in
// sc.insOf. A dataset whose Insert fails is left out of sc.insOf (its
// chunks stay dirty) and its error returned.
func allocateRound(ctx context.Context, es []*entry, sc *wbScratch) []error {
	enc, byDS := sc.enc, sc.byDS
	for i, e := range es {
		if _, ok := byDS[e.ds]; !ok {
			sc.order = append(sc.order, e.ds)
		}
		byDS[e.ds] = append(byDS[e.ds], i)
	}
	var errs []error
	for _, d := range sc.order {
		idx := byDS[d]
		ins := make([]layout.Insertion, len(idx))
		for k, i := range idx {
			e := es[i]
			ins[k] = layout.Insertion{Coord: e.coord, Old: e.loc, Size: int64(len(enc[i].Image)), Mask: enc[i].Mask, Sum: enc[i].Sum}
		}
		if err := d.lay().l.Insert(ctx, ins); err != nil {
			errs = append(errs, fmt.Errorf("cache: Layout.Insert: %w", err))
			continue // this dataset's chunks stay dirty
		}
		sc.insOf[d] = ins
	}
	return errs
}

// writeImages writes every allocated image with one WriteV per file (and
// a Sync after it when sync is set), recording each file's error in
// sc.fileErr, and counts the writes in st. Images whose checksums are
// computed beside the write (sc.late) go in two: their bytes with the
// others, then, once sp's helper or this goroutine has sealed them
// (latesum.go), their tails in a second WriteV per file; their sums then
// go into enc and the insertions.
func writeImages(sc *wbScratch, st *counters, sp *splitState, sync bool) {
	enc, byFile := sc.enc, sc.byFile
	var j *sealJob
	for _, d := range sc.order {
		ins, ok := sc.insOf[d]
		if !ok {
			continue
		}
		f := d.file
		if _, ok := byFile[f]; !ok {
			sc.files = append(sc.files, f)
		}
		for k, i := range sc.byDS[d] {
			img := enc[i].Image
			if t := sc.late[i] - 1; t >= 0 {
				if j == nil {
					j = sc.seals.take()
				}
				body := img[:len(img)-t]
				j.seals = append(j.seals, seal{lf: d.lay().l.(layout.LateFramer), coord: ins[k].Coord, src: body, tail: img[len(body):]})
				sc.sealOf = append(sc.sealOf, sealRef{d: d, k: k, i: i})
				if t > 0 {
					sc.tailOf[f] = append(sc.tailOf[f], vfd.Extent{Off: ins[k].New.Addr + int64(len(body)), Buf: img[len(body):]})
				}
				img = body
			}
			if len(img) > 0 {
				byFile[f] = append(byFile[f], vfd.Extent{Off: ins[k].New.Addr, Buf: img})
			}
		}
	}
	if j != nil {
		sc.seals.handOut(sp, j)
		writeFiles(sc, st, byFile, false)
		takenBack := j.finish(true)
		for n, r := range sc.sealOf {
			sum := j.seals[n].sum
			enc[r.i].Sum = sum
			in := &sc.insOf[r.d][r.k]
			in.Sum, in.New.Sum = sum, sum
		}
		sc.seals.release(j, takenBack)
		writeFiles(sc, st, sc.tailOf, sync)
		return
	}
	writeFiles(sc, st, byFile, sync)
}

// writeFiles writes each file's extents of byFile (in sc.files) with one
// WriteV, unless the file failed already (sc.fileErr), records a failure
// in sc.fileErr, and syncs the file after the write when sync is set.
func writeFiles(sc *wbScratch, st *counters, byFile map[*File][]vfd.Extent, sync bool) {
	for _, f := range sc.files {
		if sc.fileErr[f] != nil {
			continue
		}
		exts := byFile[f]
		if len(exts) == 0 {
			if sync && len(sc.byFile[f]) > 0 {
				st.syncs.Add(1)
				if err := f.drv.Sync(); err != nil {
					sc.fileErr[f] = fmt.Errorf("cache: sync: %w", err)
				}
			}
			continue
		}
		var n int64
		for _, x := range exts {
			n += int64(len(x.Buf))
		}
		st.vectorWrites.Add(1)
		st.vectorWriteBytes.Add(n)
		if err := f.drv.WriteV(exts); err != nil {
			sc.fileErr[f] = fmt.Errorf("cache: writing %d chunks: %w", len(exts), err)
			continue
		}
		if sync {
			st.syncs.Add(1)
			if err := f.drv.Sync(); err != nil {
				sc.fileErr[f] = fmt.Errorf("cache: sync: %w", err)
			}
		}
	}
}

// publishRound publishes each allocated dataset's outcome (Layout.Publish
// with its file's write error) and, for the datasets written and
// published, moves their entries to the new locations and lists them in
// sc.done: only published chunks can become clean. It returns errs with
// the Publish errors added.
func publishRound(ctx context.Context, es []*entry, sc *wbScratch, errs []error) []error {
	for _, d := range sc.order {
		ins, ok := sc.insOf[d]
		if !ok {
			continue
		}
		werr := sc.fileErr[d.file]
		perr := d.lay().l.Publish(ctx, ins, werr)
		d.relocs.Add(1) // after Publish: see group.epoch
		if werr != nil {
			continue
		}
		if perr != nil {
			errs = append(errs, fmt.Errorf("cache: Layout.Publish: %w", perr))
			continue
		}
		for k, i := range sc.byDS[d] {
			e := es[i]
			nl := ins[k].New
			nl.Size, nl.Mask = ins[k].Size, ins[k].Mask
			if nl.SizeHint == 0 {
				nl.SizeHint = e.loc.SizeHint
			}
			e.loc = nl
			sc.done = append(sc.done, i)
		}
	}
	return errs
}

// markWritten counts the chunks of sc.done as flushed, tells a
// Committer where each one's image now lives, and marks clean those whose
// version is still the one written, dropping their kept images; a chunk
// changed meanwhile stays dirty.
func (w *writer) markWritten(es []*entry, sc *wbScratch) {
	for _, i := range sc.done {
		e := es[i]
		w.stats.bytesFlushed.Add(int64(len(sc.enc[i].Image)))
		w.stats.chunksFlushed.Add(1)
		e.latch.Lock()
		if c, ok := e.ds.lay().l.(layout.Committer); ok {
			c.Committed(e.coord, e.chunk, sc.enc[i], e.loc)
		}
		if e.version.Load() == sc.ver[i] {
			// Written: a kept image has served its purpose.
			w.pre.dropImageLocked(e, w.budget)
			if e.dirty.Swap(false) {
				w.budget.dirty.Add(-e.size.Load())
			}
		}
		e.latch.Unlock()
	}
}

// wbScratch is writeBack's working set, pooled.
type wbScratch struct {
	enc []layout.Encoded
	ver []uint64
	// pre[i] is the kept image enc[i] came from, held (preImage.refs)
	// until the write is over; other images are released then, on every
	// path (the buffer pool's ownership rule, internal/bufpool).
	pre []*preImage
	// held[i]: enc[i] came from EncodeBorrowed and es[i]'s latch is still
	// held shared, so that the chunk, which the image may be, cannot
	// change before the vector write has read it (BorrowingEncoder).
	// unlatch lets go of them; it runs once the writes are done, and on
	// every earlier return.
	held    []bool
	byDS    map[*Dataset][]int
	order   []*Dataset
	insOf   map[*Dataset][]layout.Insertion
	byFile  map[*File][]vfd.Extent
	files   []*File
	fileErr map[*File]error
	done    []int
	// late[i] is 1 + the length of the tail of enc[i] to be sealed beside
	// the write (EncodeBorrowedLate), 0 for a complete image; seals, sealOf
	// (per seal, its image) and tailOf (per file, the tails' extents)
	// carry them through writeImages (latesum.go).
	late   []int
	seals  sealSlot
	sealOf []sealRef
	tailOf map[*File][]vfd.Extent
	// encoding is the bytes of this round's images counted in
	// writer.encoding (encodeRound), taken out once they are released.
	encoding atomic.Int64
}

var wbScratchPool = sync.Pool{New: func() any {
	return &wbScratch{
		byDS:    map[*Dataset][]int{},
		insOf:   map[*Dataset][]layout.Insertion{},
		byFile:  map[*File][]vfd.Extent{},
		fileErr: map[*File]error{},
		tailOf:  map[*File][]vfd.Extent{},
	}
}}

// sealRef names the image of a seal of writeImages: entry i, insertion k
// of dataset d.
type sealRef struct {
	d    *Dataset
	k, i int
}

// size readies s for n entries.
func (s *wbScratch) size(n int) {
	if cap(s.enc) < n {
		s.enc, s.ver, s.pre, s.held = make([]layout.Encoded, n), make([]uint64, n), make([]*preImage, n), make([]bool, n)
		s.late = make([]int, n)
	}
	s.enc, s.ver, s.pre, s.held, s.late = s.enc[:n], s.ver[:n], s.pre[:n], s.held[:n], s.late[:n]
	clear(s.late)
}

// unlatch releases the latches held for borrowed images (held).
func (s *wbScratch) unlatch(es []*entry) {
	for i, h := range s.held {
		if h {
			s.held[i] = false
			es[i].latch.RUnlock()
		}
	}
}

// release ends a round on every path: it releases the latches still held
// and the images, giving kept images their hold back.
func (s *wbScratch) release(es []*entry) {
	s.unlatch(es)
	for i := range s.enc {
		if s.pre[i] != nil {
			s.pre[i].release()
		} else {
			releaseImage(s.enc[i])
		}
	}
}

// put drops every reference (images, entries, datasets, errors) and pools
// s, unless a huge round grew it.
func (s *wbScratch) put() {
	if cap(s.enc) > 4096 {
		return
	}
	clear(s.enc[:cap(s.enc)])
	clear(s.pre[:cap(s.pre)])
	clear(s.byDS)
	clear(s.order[:cap(s.order)])
	s.order = s.order[:0]
	clear(s.insOf)
	clear(s.byFile)
	clear(s.files[:cap(s.files)])
	s.files = s.files[:0]
	clear(s.fileErr)
	s.done = s.done[:0]
	clear(s.tailOf)
	clear(s.sealOf[:cap(s.sealOf)])
	s.sealOf = s.sealOf[:0]
	s.seals.reset()
	wbScratchPool.Put(s)
}
