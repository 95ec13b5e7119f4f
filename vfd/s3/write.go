package s3

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/scc-dev/scc/vfd"
)

func (d *Driver) checkWritable() error {
	if err := d.check(); err != nil {
		return err
	}
	if d.readOnly {
		return fmt.Errorf("%w: write to read-only %s", vfd.ErrInvalid, d.URL())
	}
	return nil
}

// WriteAt writes all of p at off. The bytes are durable once a later Sync
// returns nil.
func (d *Driver) WriteAt(p []byte, off int64) (int, error) {
	if err := d.checkWritable(); err != nil {
		return 0, err
	}
	if err := checkOff(off, len(p)); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if err := d.writeExtents([]vfd.Extent{{Off: off, Buf: p}}); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteV writes every extent; overlapping extents are refused with
// vfd.ErrInvalid before anything is written.
func (d *Driver) WriteV(exts []vfd.Extent) error {
	if err := d.checkWritable(); err != nil {
		return err
	}
	live := make([]vfd.Extent, 0, len(exts))
	for _, e := range exts {
		if err := checkOff(e.Off, len(e.Buf)); err != nil {
			return err
		}
		if len(e.Buf) > 0 {
			live = append(live, e)
		}
	}
	sortExtents(live)
	for i := 1; i < len(live); i++ {
		if live[i].Off < live[i-1].End() {
			return fmt.Errorf("%w: overlapping extents at %d", vfd.ErrInvalid, live[i].Off)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return d.writeExtents(live)
}

func sortExtents(exts []vfd.Extent) {
	for i := 1; i < len(exts); i++ { // insertion sort: vectors are short and mostly sorted
		for j := i; j > 0 && exts[j].Off < exts[j-1].Off; j-- {
			exts[j], exts[j-1] = exts[j-1], exts[j]
		}
	}
}

// writeExtents applies the writes to the head and to dirty page buffers. A
// page written only in part needs its committed bytes: those pages are
// fetched outside the lock, installed, and the writes applied in a second
// pass, so a vector write lands as a whole under one lock hold.
func (d *Driver) writeExtents(exts []vfd.Extent) error {
	for {
		need := d.tryWrite(exts)
		if len(need) == 0 {
			if d.overDirty() {
				return d.spill()
			}
			return nil
		}
		loaded := make([][]byte, len(need))
		err := d.parallel(d.base, len(need), func(ctx context.Context, i int) error {
			buf := make([]byte, d.pageSize)
			if err := d.getRange(ctx, d.pageKey(need[i].page, need[i].ver), 0, buf); err != nil {
				return err
			}
			loaded[i] = buf
			return nil
		})
		if err != nil {
			return err
		}
		d.mu.Lock()
		for i, n := range need {
			// Install only if nothing newer arrived meanwhile: a dirty
			// buffer, or a Sync that changed the page's version.
			if d.mu.dirty[n.page] == nil && d.mu.inflight[n.page] == nil &&
				n.page < int64(len(d.mu.pages)) && d.mu.pages[n.page] == n.ver {
				d.mu.dirty[n.page] = loaded[i]
			}
		}
		d.mu.Unlock()
	}
}

// tryWrite applies exts if every page they touch in part is in memory, and
// otherwise changes nothing and returns the pages to fetch.
func (d *Driver) tryWrite(exts []vfd.Extent) []piece {
	d.mu.Lock()
	defer d.mu.Unlock()
	var need []piece
	end := d.mu.size
	for _, e := range exts {
		end = max(end, e.End())
		for off := max(e.Off, d.headSize); off < e.End(); {
			p := (off - d.headSize) / d.pageSize
			in := off - d.pageStart(p)
			n := min(e.End()-off, d.pageSize-in)
			whole := in == 0 && n == d.pageSize
			if d.mu.dirty[p] == nil && d.mu.inflight[p] == nil && !whole &&
				p < int64(len(d.mu.pages)) && d.mu.pages[p] != 0 {
				need = append(need, piece{page: p, ver: d.mu.pages[p]})
			}
			off += n
		}
	}
	if len(need) > 0 {
		return need
	}
	d.growLocked(end)
	for _, e := range exts {
		off, buf := e.Off, e.Buf
		if off < d.headSize {
			n := copy(d.mu.head[off:], buf)
			off, buf = off+int64(n), buf[n:]
		}
		for len(buf) > 0 {
			p := (off - d.headSize) / d.pageSize
			in := off - d.pageStart(p)
			n := copy(d.pageBufLocked(p)[in:], buf[:min(int64(len(buf)), d.pageSize-in)])
			off, buf = off+int64(n), buf[n:]
		}
	}
	d.mu.changed = true
	return nil
}

// pageBufLocked returns page p's dirty buffer, making one (a copy of the
// inflight buffer, or zeros for a page with no committed object, or for a
// page about to be wholly overwritten) if needed.
func (d *Driver) pageBufLocked(p int64) []byte {
	if b := d.mu.dirty[p]; b != nil {
		return b
	}
	b := make([]byte, d.pageSize)
	if in := d.mu.inflight[p]; in != nil {
		copy(b, in)
	}
	d.mu.dirty[p] = b
	return b
}

// growLocked extends the file to size (no-op if it is larger already).
func (d *Driver) growLocked(size int64) {
	if size <= d.mu.size {
		return
	}
	d.mu.size = size
	if np := numPages(size, d.headSize, d.pageSize); np > int64(len(d.mu.pages)) {
		d.mu.pages = append(d.mu.pages, make([]uint64, np-int64(len(d.mu.pages)))...)
	}
}

// Size reports the file's size, pending writes included. A read-only
// Driver reloads the commit object first, as its head reads do.
func (d *Driver) Size() (int64, error) {
	if err := d.check(); err != nil {
		return 0, err
	}
	if d.readOnly {
		if err := d.reload(d.base); err != nil {
			return 0, err
		}
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.mu.size, nil
}

// Truncate sets the file's size; bytes past a shrink read as zeros if the
// file grows again.
func (d *Driver) Truncate(size int64) error {
	if err := d.checkWritable(); err != nil {
		return err
	}
	if size < 0 || size > 1<<62 {
		return fmt.Errorf("%w: size %d", vfd.ErrInvalid, size)
	}
	// A shrink that ends inside a committed page needs that page's bytes
	// (to zero its tail): zero-length write there loads it first.
	for {
		d.mu.Lock()
		if size >= d.mu.size {
			d.growLocked(size)
			d.mu.changed = true
			d.mu.Unlock()
			return nil
		}
		var need []piece
		if size > d.headSize {
			p := (size - d.headSize) / d.pageSize
			if in := size - d.pageStart(p); in > 0 && d.mu.dirty[p] == nil && d.mu.inflight[p] == nil &&
				p < int64(len(d.mu.pages)) && d.mu.pages[p] != 0 {
				need = append(need, piece{page: p, ver: d.mu.pages[p]})
			}
		}
		if len(need) == 0 {
			d.shrinkLocked(size)
			d.mu.Unlock()
			return nil
		}
		d.mu.Unlock()
		buf := make([]byte, d.pageSize)
		if err := d.getRange(d.base, d.pageKey(need[0].page, need[0].ver), 0, buf); err != nil {
			return err
		}
		d.mu.Lock()
		if p := need[0].page; d.mu.dirty[p] == nil && d.mu.inflight[p] == nil &&
			p < int64(len(d.mu.pages)) && d.mu.pages[p] == need[0].ver {
			d.mu.dirty[p] = buf
		}
		d.mu.Unlock()
	}
}

func (d *Driver) shrinkLocked(size int64) {
	if size < d.headSize {
		clear(d.mu.head[size:])
	}
	np := numPages(size, d.headSize, d.pageSize)
	for p := range d.mu.dirty {
		if p >= np {
			delete(d.mu.dirty, p)
		}
	}
	// An inflight page past the new end must not show through if the file
	// grows again: shadow it with zeros.
	for p := range d.mu.inflight {
		if p >= np {
			d.mu.dirty[p] = make([]byte, d.pageSize)
		}
	}
	if np > 0 {
		last := np - 1
		if in := size - d.pageStart(last); in < d.pageSize {
			if b := d.mu.dirty[last]; b != nil {
				clear(b[in:])
			} else if d.mu.inflight[last] != nil || d.mu.pages[last] != 0 {
				clear(d.pageBufLocked(last)[in:])
			}
		}
	}
	d.mu.pages = d.mu.pages[:np]
	d.mu.size = size
	d.mu.changed = true
}

// Sync commits every completed write: it uploads the changed pages as new
// objects, then replaces the commit object conditionally (If-Match on the
// ETag this Driver last wrote). On failure nothing the committed state names
// was touched, the writes stay pending, and vfd.ErrLocked means another
// writer holds the file.
func (d *Driver) Sync() error {
	if err := d.checkWritable(); err != nil {
		if errors.Is(err, vfd.ErrInvalid) { // read-only: nothing to make durable
			return nil
		}
		return err
	}
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	if p := d.failed.Load(); p != nil {
		return *p
	}
	d.mu.Lock()
	if !d.mu.changed {
		d.mu.Unlock()
		return nil
	}
	d.mu.changed = false
	ups := d.takeDirtyLocked()
	base := d.mu.committed
	next := &manifest{gen: base.gen + 1, pageSize: d.pageSize, headSize: d.headSize, size: d.mu.size,
		epoch: base.epoch, owner: base.owner, head: append([]byte(nil), d.mu.head...),
		pages: append([]uint64(nil), d.mu.pages...)}
	for _, u := range ups {
		next.pages[u.page] = u.ver
	}
	etag := d.mu.etag
	d.mu.Unlock()

	err := d.upload(ups)
	var newTag string
	if err == nil {
		next.expiry = time.Now().Add(d.opts.LeaseTTL).UnixNano()
		newTag, err = d.putManifest(d.base, next, etag)
	}
	d.mu.Lock()
	if err != nil {
		d.settleLocked(ups, false)
		d.mu.changed = true
		d.mu.Unlock()
		if errors.Is(err, vfd.ErrLocked) {
			err = fmt.Errorf("commit to %s: another writer took the file: %w", d.URL(), err)
			d.failed.CompareAndSwap(nil, &err)
		}
		return err
	}
	orphans := d.settleLocked(ups, true)
	d.mu.committed, d.mu.etag = next, newTag
	d.mu.Unlock()
	// Versions the new commit no longer names, and spilled versions it
	// replaced before they were ever committed.
	stale := orphans
	for p, v := range base.pages {
		if v != 0 && (p >= len(next.pages) || next.pages[p] != v) {
			stale = append(stale, d.pageKey(int64(p), v))
		}
	}
	d.removeObjects(stale)
	return nil
}

// upload is one page object to write: page at version ver, replacing
// version prev in the Driver's page table.
type upload struct {
	page      int64
	ver, prev uint64
	buf       []byte
}

// takeDirtyLocked moves the dirty pages to inflight (reads still find them
// there) and gives each a new version.
func (d *Driver) takeDirtyLocked() []upload {
	d.mu.inflight, d.mu.dirty = d.mu.dirty, map[int64][]byte{}
	ups := make([]upload, 0, len(d.mu.inflight))
	for p, b := range d.mu.inflight {
		if p >= int64(len(d.mu.pages)) {
			continue // truncated away
		}
		d.mu.seq++
		n := min(d.pageSize, d.mu.size-d.pageStart(p))
		ups = append(ups, upload{page: p, ver: d.mu.committed.epoch<<32 | uint64(d.mu.seq), prev: d.mu.pages[p], buf: b[:n]})
	}
	return ups
}

// upload writes the page objects, in parallel.
func (d *Driver) upload(ups []upload) error {
	return d.parallel(d.base, len(ups), func(ctx context.Context, i int) error {
		return d.putPage(ctx, d.pageKey(ups[i].page, ups[i].ver), ups[i].buf)
	})
}

// settleLocked ends an upload round. On success the page table names the
// new versions, and it returns the keys of replaced versions no commit
// names (spilled, never committed). On failure the pages are dirty again
// (pages written meanwhile win).
func (d *Driver) settleLocked(ups []upload, ok bool) (orphans []string) {
	if !ok {
		for p, b := range d.mu.inflight {
			if d.mu.dirty[p] == nil && p < int64(len(d.mu.pages)) {
				d.mu.dirty[p] = b
			}
		}
		d.mu.inflight = nil
		return nil
	}
	for _, u := range ups {
		if u.page < int64(len(d.mu.pages)) && d.mu.pages[u.page] == u.prev {
			d.mu.pages[u.page] = u.ver
		}
		if u.prev != 0 && u.prev != d.mu.committed.pageVersion(u.page) {
			orphans = append(orphans, d.pageKey(u.page, u.prev))
		}
	}
	d.mu.inflight = nil
	return orphans
}

// spill bounds a writer's memory (Options.MaxDirtyBytes): it uploads the
// dirty pages as new page objects without committing them. The page table
// names them from then on, so reads and later writes use them; the next
// Sync's commit object names them; a crash before it leaves them as
// garbage no commit names. The writer that crossed the bound waits for the
// uploads: a writer faster than the store blocks instead of growing memory.
func (d *Driver) spill() error {
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	if p := d.failed.Load(); p != nil {
		return *p
	}
	d.mu.Lock()
	if int64(len(d.mu.dirty))*d.pageSize <= d.opts.MaxDirtyBytes {
		d.mu.Unlock()
		return nil
	}
	ups := d.takeDirtyLocked()
	d.mu.Unlock()
	d.stats.spills.Add(1)
	err := d.upload(ups)
	d.mu.Lock()
	orphans := d.settleLocked(ups, err == nil)
	d.mu.Unlock()
	d.removeObjects(orphans)
	return err
}

// overDirty reports whether the dirty pages exceed MaxDirtyBytes.
func (d *Driver) overDirty() bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return int64(len(d.mu.dirty))*d.pageSize > d.opts.MaxDirtyBytes
}

func (m *manifest) pageVersion(p int64) uint64 {
	if p < int64(len(m.pages)) {
		return m.pages[p]
	}
	return 0
}

// removeObjects deletes page objects the committed state no longer names.
// It is best effort: a failure leaves garbage, never a wrong file (FORMAT.md
// §19).
func (d *Driver) removeObjects(keys []string) {
	if len(keys) == 0 {
		return
	}
	ch := make(chan minio.ObjectInfo, len(keys))
	for _, k := range keys {
		ch <- minio.ObjectInfo{Key: k}
	}
	close(ch)
	ctx, cancel := context.WithTimeout(d.base, d.opts.OpTimeout)
	defer cancel()
	for range d.core.RemoveObjects(ctx, d.loc.Bucket, ch, minio.RemoveObjectsOptions{}) {
	}
	d.stats.deletes.Add(1)
}

// renewLoop keeps a writer's lease live: every LeaseTTL/3 it rewrites the
// committed commit object with a later expiry. A failed precondition means
// the lease is lost; later Syncs fail with vfd.ErrLocked.
func (d *Driver) renewLoop() {
	defer close(d.renewDone)
	t := time.NewTicker(d.opts.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-d.renewStop:
			return
		case <-t.C:
		}
		d.syncMu.Lock()
		if d.failed.Load() == nil {
			d.renewLocked()
		}
		d.syncMu.Unlock()
	}
}

func (d *Driver) renewLocked() {
	d.mu.RLock()
	c := *d.mu.committed
	etag := d.mu.etag
	d.mu.RUnlock()
	c.expiry = time.Now().Add(d.opts.LeaseTTL).UnixNano()
	tag, err := d.putManifest(d.base, &c, etag)
	switch {
	case err == nil:
		d.mu.Lock()
		d.mu.committed, d.mu.etag = &c, tag
		d.mu.Unlock()
	case errors.Is(err, vfd.ErrLocked):
		err = fmt.Errorf("lease on %s lost: %w", d.URL(), err)
		d.failed.CompareAndSwap(nil, &err)
	}
	// Other failures (the network): try again at the next tick.
}

// Close releases the Driver: a writer gives up its lease (writes not yet
// synced are dropped, as the Driver contract allows), and requests in
// flight are cancelled. It is idempotent.
func (d *Driver) Close() error {
	if !d.closed.CompareAndSwap(false, true) {
		return nil
	}
	var err error
	if !d.readOnly {
		close(d.renewStop)
		<-d.renewDone
		d.syncMu.Lock()
		if d.failed.Load() == nil {
			d.mu.RLock()
			c := *d.mu.committed
			etag := d.mu.etag
			d.mu.RUnlock()
			c.owner, c.expiry = [16]byte{}, 0
			if _, perr := d.putManifest(d.base, &c, etag); perr != nil && !errors.Is(perr, vfd.ErrLocked) {
				err = fmt.Errorf("releasing the lease on %s (it lapses after LeaseTTL): %w", d.URL(), perr)
			}
		}
		d.syncMu.Unlock()
	}
	d.cancel()
	return err
}

// Collect deletes the file's page objects that neither the committed state
// nor this writer's pending state names: uploads of commits that never
// landed and spills never committed, by this writer or by a crashed one
// before it (FORMAT.md §19.3). Only a writer may collect: its lease and its
// If-Match commits guarantee no other writer is uploading. Readers lose
// nothing they need; one that still reads a version deleted here goes round
// again on the newest commit object, as after any commit. A writable open
// that takes over from a writer which never released its lease collects
// by itself.
func (d *Driver) Collect(ctx context.Context) (removed int, err error) {
	if err := d.checkWritable(); err != nil {
		return 0, err
	}
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	ctx, stop := d.join(ctx)
	defer stop()
	live := map[string]bool{}
	d.mu.RLock()
	for _, pages := range [][]uint64{d.mu.committed.pages, d.mu.pages} {
		for p, v := range pages {
			if v != 0 {
				live[d.pageKey(int64(p), v)] = true
			}
		}
	}
	d.mu.RUnlock()
	ch := make(chan minio.ObjectInfo)
	errc := make(chan error, 1)
	go func() {
		defer close(ch)
		for o := range d.core.Client.ListObjects(ctx, d.loc.Bucket, minio.ListObjectsOptions{Prefix: d.loc.Key + ".pages/", Recursive: true}) {
			if o.Err != nil {
				errc <- classify("s3 list "+d.loc.Key+".pages/", o.Err)
				return
			}
			if !live[o.Key] {
				removed++
				ch <- minio.ObjectInfo{Key: o.Key}
			}
		}
	}()
	for e := range d.core.RemoveObjects(ctx, d.loc.Bucket, ch, minio.RemoveObjectsOptions{}) {
		if err == nil && e.Err != nil {
			err = classify("s3 delete "+e.ObjectName, e.Err)
		}
	}
	d.stats.deletes.Add(1)
	select {
	case lerr := <-errc:
		return removed, lerr
	default:
	}
	return removed, err
}
