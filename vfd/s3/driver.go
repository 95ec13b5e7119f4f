// Package s3 is a vfd.Driver over the S3 API (any S3-compatible object store:
// AWS S3, MinIO, ...), built on github.com/minio/minio-go/v7.
//
// A file lives as immutable objects (FORMAT.md §19): a small commit object
// at the URL's key, holding the file's first HeadSize bytes (the engine's
// superblock slots), its size and a table of page versions, and fixed-size
// page objects under key + ".pages/", written copy-on-write and never
// overwritten. Writes collect in memory; Sync uploads the changed pages as
// new objects and then replaces the commit object with one conditional PUT
// (If-Match on its ETag), so each Sync is atomic: a crash leaves exactly the
// state of the last Sync that returned nil (or of one whose answer was lost).
//
// A writable Driver holds a lease recorded in the commit object; a second
// writer is refused with vfd.ErrLocked while it is live, and a writer that
// lost its lease (or raced another) fails its next Sync with vfd.ErrLocked
// because its If-Match precondition fails. A read-only Driver takes no lease;
// its reads of the head region reload the commit object, so an engine File
// opened read-only follows a writer on another machine with Refresh.
//
// Reads are ranged GETs; ReadV coalesces extents of one page object into one
// GET and runs the GETs in parallel, at most MaxInFlight requests per Driver.
// Requests that fail with throttling, a 5xx or a network failure are retried
// with exponential backoff. The Driver interface takes no context: every
// request runs under the Driver's base context (cancelled by Close) and a
// per-request timeout (OpTimeout); ReadAtContext and ReadVContext take a
// caller's context as well.
//
// Errors are typed: ErrNotFound (matches fs.ErrNotExist), ErrDenied
// (fs.ErrPermission), ErrNetwork, ErrServer, ErrCorrupt, vfd.ErrLocked,
// vfd.ErrClosed, vfd.ErrInvalid, each wrapping the minio-go error.
//
// A Driver is safe for concurrent use, per the vfd.Driver contract.
package s3

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/scc-dev/scc/vfd"
)

// Driver is a file on an S3 bucket. See the package comment.
type Driver struct {
	opts     Options
	loc      Location
	core     *minio.Core
	readOnly bool
	owner    [16]byte // this Driver's lease identity (writers)

	// base is cancelled by Close, failing every request in flight.
	base   context.Context
	cancel context.CancelFunc
	// sem holds one token per request in flight (MaxInFlight).
	sem    chan struct{}
	closed atomic.Bool
	stats  counters

	// Fixed for the Driver's life: the file's geometry.
	pageSize, headSize int64

	// syncMu serializes every PUT of the commit object: Sync, lease
	// renewal, Close's release. Lock order: syncMu, then mu.
	syncMu sync.Mutex
	// failed latches an error after which no Sync may succeed: the lease
	// was lost, or a commit's outcome could not be learned.
	failed atomic.Pointer[error]

	mu struct {
		sync.RWMutex
		// committed is the last commit object this Driver wrote or read;
		// etag is its ETag, the If-Match precondition of the next commit.
		committed *manifest
		etag      string
		// size, head and pages are the file as this Driver sees it: the
		// committed state plus its own writes. pages has
		// numPages(size) entries: the committed version of each page.
		size  int64
		head  []byte
		pages []uint64
		// dirty holds whole-page buffers written since the last Sync's
		// snapshot; inflight, the pages a running Sync is uploading. A
		// read resolves a page through dirty, then inflight, then its
		// committed object. A write never changes an inflight buffer: it
		// copies it into dirty first.
		dirty, inflight map[int64][]byte
		// changed: something was written or truncated since the last
		// snapshot, so the next Sync commits.
		changed bool
		// seq numbers this writer's page uploads; a page's version is
		// epoch<<32 | seq, unique among every writer of the file.
		seq uint32
	}

	renewStop chan struct{}
	renewDone chan struct{}
}

var _ vfd.Driver = (*Driver)(nil)

// Stats counts a Driver's requests. Values are totals since Open.
type Stats struct {
	Gets, Puts, Deletes int64 // requests that got an answer or failed for good, retries excluded
	Retries             int64 // attempts sent again after throttling, 5xx or a network failure
	BytesRead           int64 // payload bytes received by GETs of page objects
	BytesWritten        int64 // payload bytes of page and commit PUTs
	Commits             int64 // commit objects written (Syncs that committed, lease renewals)
	Spills              int64 // rounds of dirty pages uploaded uncommitted (MaxDirtyBytes)
}

type counters struct {
	gets, puts, deletes, retries, bytesRead, bytesWritten, commits, spills atomic.Int64
}

// Stats returns a snapshot of the Driver's request counters.
func (d *Driver) Stats() Stats {
	return Stats{Gets: d.stats.gets.Load(), Puts: d.stats.puts.Load(), Deletes: d.stats.deletes.Load(),
		Retries: d.stats.retries.Load(), BytesRead: d.stats.bytesRead.Load(),
		BytesWritten: d.stats.bytesWritten.Load(), Commits: d.stats.commits.Load(), Spills: d.stats.spills.Load()}
}

// Open opens (or, with opts.Create, creates) the file at rawURL,
// s3://bucket/key (see ParseURL). ctx bounds the open's own requests; the
// Driver's later requests run under its base context (see the package
// comment). opts may be nil.
func Open(ctx context.Context, rawURL string, opts *Options) (*Driver, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	loc, err := ParseURL(rawURL, &o)
	if err != nil {
		return nil, err
	}
	return OpenLocation(ctx, loc, &o)
}

// OpenLocation is Open with the bucket and key given apart; the AWS_*
// environment is not consulted.
func OpenLocation(ctx context.Context, loc Location, opts *Options) (*Driver, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if loc.Bucket == "" || loc.Key == "" {
		return nil, fmt.Errorf("%w: empty bucket or key", vfd.ErrInvalid)
	}
	o = o.withDefaults()
	host, secure, err := endpointHost(o.Endpoint, o.Insecure)
	if err != nil {
		return nil, err
	}
	tr := o.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = o.MaxInFlight
		tr = t
	}
	core, err := minio.NewCore(host, &minio.Options{
		Creds:     credentials.NewStaticV4(o.AccessKey, o.SecretKey, o.SessionToken),
		Secure:    secure,
		Region:    o.Region,
		Transport: tr,
		// The Driver retries itself (retryable, backoff) so that its
		// policy is one place and counted.
		MaxRetries: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: s3 client: %w", vfd.ErrInvalid, err)
	}
	d := &Driver{opts: o, loc: loc, core: core, readOnly: o.ReadOnly, sem: make(chan struct{}, o.MaxInFlight)}
	d.base, d.cancel = context.WithCancel(context.Background())
	if _, err := crand.Read(d.owner[:]); err != nil {
		return nil, err
	}
	if err := d.open(ctx); err != nil {
		d.cancel()
		return nil, err
	}
	if !d.readOnly {
		d.renewStop, d.renewDone = make(chan struct{}), make(chan struct{})
		go d.renewLoop()
	}
	return d, nil
}

// open loads the commit object and, for a writer, takes the lease.
func (d *Driver) open(ctx context.Context) error {
	m, etag, err := d.getManifest(ctx, "")
	missing := errors.Is(err, ErrNotFound)
	switch {
	case missing && !d.opts.Create:
		return fmt.Errorf("open s3://%s/%s: %w", d.loc.Bucket, d.loc.Key, err)
	case err != nil && !missing:
		return fmt.Errorf("open s3://%s/%s: %w", d.loc.Bucket, d.loc.Key, err)
	}
	if d.readOnly {
		d.pageSize, d.headSize = m.pageSize, m.headSize
		d.install(m, etag)
		return nil
	}
	now := time.Now()
	if m != nil && m.owner != ([16]byte{}) && m.owner != d.owner && m.expiry > now.UnixNano() {
		return fmt.Errorf("open s3://%s/%s: %w (lease held until %s)", d.loc.Bucket, d.loc.Key,
			vfd.ErrLocked, time.Unix(0, m.expiry).UTC().Format(time.RFC3339))
	}
	var next *manifest
	if m == nil || d.opts.Create {
		next = &manifest{pageSize: d.opts.PageSize, headSize: d.opts.HeadSize, head: make([]byte, d.opts.HeadSize)}
		if m != nil {
			next.gen, next.epoch = m.gen, m.epoch
		}
	} else {
		c := *m
		next = &c
	}
	next.epoch++
	if next.epoch >= 1<<32 {
		return fmt.Errorf("%w: writer epoch of s3://%s/%s exhausted", ErrCorrupt, d.loc.Bucket, d.loc.Key)
	}
	next.owner, next.expiry = d.owner, now.Add(d.opts.LeaseTTL).UnixNano()
	cond := etag
	if m == nil {
		cond = "" // If-None-Match: *
	}
	newTag, err := d.putManifest(ctx, next, cond)
	if err != nil {
		return fmt.Errorf("open s3://%s/%s for writing: %w", d.loc.Bucket, d.loc.Key, err)
	}
	d.pageSize, d.headSize = next.pageSize, next.headSize
	d.install(next, newTag)
	d.mu.seq = 1
	if m != nil && !d.opts.Create && m.owner != ([16]byte{}) {
		// The last writer never released its lease: it crashed, maybe
		// mid-Sync, leaving page objects no commit names. Best effort.
		_, _ = d.Collect(ctx)
	}
	if m != nil && d.opts.Create {
		// The replaced file's pages are garbage now (best effort).
		var old []string
		for p, v := range m.pages {
			if v != 0 {
				old = append(old, d.pageKey(int64(p), v))
			}
		}
		d.removeObjects(old)
	}
	return nil
}

// install makes m the committed state and the Driver's view (no writes
// pending). The geometry (pageSize, headSize) is set once by open, before
// any other goroutine sees the Driver, and checked by reload.
func (d *Driver) install(m *manifest, etag string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.committed, d.mu.etag = m, etag
	d.mu.size = m.size
	d.mu.head = bytes.Clone(m.head)
	d.mu.pages = append([]uint64(nil), m.pages...)
	d.mu.dirty, d.mu.inflight = map[int64][]byte{}, nil
	d.mu.changed = false
}

// URL reports the file's location as an s3:// URL (without options).
func (d *Driver) URL() string { return "s3://" + d.loc.Bucket + "/" + d.loc.Key }

// Generation reports the generation of the commit object the Driver last
// wrote or read.
func (d *Driver) Generation() uint64 {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.mu.committed.gen
}

func (d *Driver) pageKey(p int64, v uint64) string {
	return fmt.Sprintf("%s.pages/%012d.%016x", d.loc.Key, p, v)
}

// pageStart is the file offset of page p's first byte.
func (d *Driver) pageStart(p int64) int64 { return d.headSize + p*d.pageSize }

func checkOff(off int64, n int) error {
	if off < 0 || off > (1<<62)-int64(n) {
		return fmt.Errorf("%w: offset %d", vfd.ErrInvalid, off)
	}
	return nil
}

func (d *Driver) check() error {
	if d.closed.Load() {
		return vfd.ErrClosed
	}
	return nil
}

// ReadAt reads len(p) bytes at off with io.ReaderAt semantics.
func (d *Driver) ReadAt(p []byte, off int64) (int, error) {
	return d.ReadAtContext(d.base, p, off)
}

// ReadAtContext is ReadAt under ctx as well as the Driver's base context.
func (d *Driver) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	if err := d.check(); err != nil {
		return 0, err
	}
	if err := checkOff(off, len(p)); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	ctx, stop := d.join(ctx)
	defer stop()
	if d.readOnly && off < d.headSize {
		if err := d.reload(ctx); err != nil {
			return 0, err
		}
	}
	d.mu.RLock()
	size := d.mu.size
	d.mu.RUnlock()
	if off >= size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), size-off))
	if err := d.readExtents(ctx, []vfd.Extent{{Off: off, Buf: p[:n]}}); err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.ErrUnexpectedEOF
	}
	return n, nil
}

// ReadV reads every extent: parallel ranged GETs, extents of one page
// object within CoalesceGap of each other served by one GET.
func (d *Driver) ReadV(exts []vfd.Extent) error { return d.ReadVContext(d.base, exts) }

// ReadVContext is ReadV under ctx as well as the Driver's base context.
func (d *Driver) ReadVContext(ctx context.Context, exts []vfd.Extent) error {
	if err := d.check(); err != nil {
		return err
	}
	touchesHead := false
	for _, e := range exts {
		if err := checkOff(e.Off, len(e.Buf)); err != nil {
			return err
		}
		touchesHead = touchesHead || (len(e.Buf) > 0 && e.Off < d.headSize)
	}
	ctx, stop := d.join(ctx)
	defer stop()
	if d.readOnly && touchesHead {
		if err := d.reload(ctx); err != nil {
			return err
		}
	}
	d.mu.RLock()
	size := d.mu.size
	d.mu.RUnlock()
	for _, e := range exts {
		if len(e.Buf) > 0 && e.End() > size {
			return fmt.Errorf("s3: read [%d,%d) of %s (size %d): %w", e.Off, e.End(), d.URL(), size, io.ErrUnexpectedEOF)
		}
	}
	return d.readExtents(ctx, exts)
}

// join returns a context done when either ctx or the Driver's base is.
func (d *Driver) join(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx == d.base {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(d.base, cancel)
	return ctx, func() { stop(); cancel() }
}

// piece is part of a read served by one page object.
type piece struct {
	page int64
	ver  uint64
	off  int64 // offset inside the page object
	buf  []byte
}

// readExtents fills exts (inside the file's size) from the head, from
// pending writes, or from page objects. A page object that vanished (the
// writer replaced and deleted it after this Driver resolved it) sends the
// read round again on a fresh view, as a local reader reads whatever the
// writer left at an offset.
//
// Rounds after the second wait first, 1 ms doubling to 32 ms (about 60 ms
// in all): a writer committing back to back replaces the pages again
// before a reader on a loaded machine gets its GETs out, and four rounds
// without a pause lost to one such burst of ten commits
// (TestReadersFollowConcurrently, its cores busy with other tests). The
// wait lets the burst pass; the bound keeps a reader of a writer that
// never pauses from retrying forever.
func (d *Driver) readExtents(ctx context.Context, exts []vfd.Extent) error {
	var err error
	for attempt := 0; attempt < readRounds; attempt++ {
		if attempt >= 2 {
			t := time.NewTimer(time.Millisecond << (attempt - 2))
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		err = d.readOnce(ctx, exts)
		if !errors.Is(err, errPageGone) {
			return err
		}
		if d.readOnly {
			if rerr := d.reload(ctx); rerr != nil {
				return rerr
			}
		}
	}
	return fmt.Errorf("%w: page objects keep vanishing under reads", ErrNotFound)
}

// readRounds bounds readExtents' rounds.
const readRounds = 8

var errPageGone = fmt.Errorf("s3: page object replaced during the read: %w", ErrNotFound)

func (d *Driver) readOnce(ctx context.Context, exts []vfd.Extent) error {
	var pieces []piece
	d.mu.RLock()
	for _, e := range exts {
		off, buf := e.Off, e.Buf
		if off < d.headSize && len(buf) > 0 {
			n := copy(buf, d.mu.head[off:])
			off, buf = off+int64(n), buf[n:]
		}
		for len(buf) > 0 {
			p := (off - d.headSize) / d.pageSize
			in := off - d.pageStart(p)
			n := min(int64(len(buf)), d.pageSize-in)
			dst := buf[:n]
			switch {
			case d.mu.dirty[p] != nil:
				copy(dst, d.mu.dirty[p][in:])
			case d.mu.inflight[p] != nil:
				copy(dst, d.mu.inflight[p][in:])
			case p >= int64(len(d.mu.pages)) || d.mu.pages[p] == 0:
				clear(dst)
			default:
				pieces = append(pieces, piece{page: p, ver: d.mu.pages[p], off: in, buf: dst})
			}
			off, buf = off+n, buf[n:]
		}
	}
	d.mu.RUnlock()
	if len(pieces) == 0 {
		return nil
	}
	sort.Slice(pieces, func(i, j int) bool {
		a, b := pieces[i], pieces[j]
		if a.page != b.page {
			return a.page < b.page
		}
		if a.ver != b.ver {
			return a.ver < b.ver
		}
		return a.off < b.off
	})
	// Group pieces into GETs: same object, each within CoalesceGap of the
	// group's end so far.
	var groups [][]piece
	for i := 0; i < len(pieces); {
		j, end := i+1, pieces[i].off+int64(len(pieces[i].buf))
		for j < len(pieces) && pieces[j].page == pieces[i].page && pieces[j].ver == pieces[i].ver &&
			pieces[j].off <= end+d.opts.CoalesceGap {
			end = max(end, pieces[j].off+int64(len(pieces[j].buf)))
			j++
		}
		groups = append(groups, pieces[i:j])
		i = j
	}
	return d.parallel(ctx, len(groups), func(ctx context.Context, i int) error {
		g := groups[i]
		start, end := g[0].off, g[0].off+int64(len(g[0].buf))
		for _, pc := range g[1:] {
			end = max(end, pc.off+int64(len(pc.buf)))
		}
		key := d.pageKey(g[0].page, g[0].ver)
		if len(g) == 1 {
			return d.getRange(ctx, key, start, g[0].buf)
		}
		tmp := make([]byte, end-start)
		if err := d.getRange(ctx, key, start, tmp); err != nil {
			return err
		}
		for _, pc := range g {
			copy(pc.buf, tmp[pc.off-start:])
		}
		return nil
	})
}

// parallel runs fn(0..n-1) on up to n goroutines (the semaphore bounds the
// requests) and returns the first error, cancelling the rest.
func (d *Driver) parallel(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	if n == 1 {
		return fn(ctx, 0)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx, i); err != nil {
				once.Do(func() { first = err; cancel(err) })
			}
		}()
	}
	wg.Wait()
	return first
}

// errOpTimeout is the cause of a request attempt that outlived OpTimeout.
var errOpTimeout = errors.New("s3: request timed out (OpTimeout)")

// do runs one request with the Driver's retry policy: at most MaxInFlight
// attempts in flight per Driver, each under OpTimeout, retried on
// throttling, 5xx and network failures with full-jitter exponential
// backoff. The error returned is classified.
func (d *Driver) do(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	var err error
	for attempt := 0; ; attempt++ {
		select {
		case d.sem <- struct{}{}:
		case <-ctx.Done():
			return d.ctxErr(ctx, op)
		}
		actx, cancel := context.WithTimeoutCause(ctx, d.opts.OpTimeout, errOpTimeout)
		err = fn(actx)
		timedOut := err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), errOpTimeout)
		cancel()
		<-d.sem
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return d.ctxErr(ctx, op)
		}
		if timedOut {
			err = fmt.Errorf("%w (%v)", errOpTimeout, err)
		}
		if (!timedOut && !retryable(err)) || attempt >= d.opts.MaxRetries {
			if timedOut {
				return fmt.Errorf("%s: %w: %w", op, ErrNetwork, err)
			}
			return classify(op, err)
		}
		d.stats.retries.Add(1)
		backoff := min(d.opts.RetryBase<<attempt, 2*time.Second)
		t := time.NewTimer(mrand.N(backoff) + 1)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return d.ctxErr(ctx, op)
		}
	}
}

// ctxErr is the error of a request abandoned because ctx ended: ErrClosed
// when Close cancelled the base context, else the caller's context error.
func (d *Driver) ctxErr(ctx context.Context, op string) error {
	if d.closed.Load() && d.base.Err() != nil {
		return fmt.Errorf("%s: %w", op, vfd.ErrClosed)
	}
	return fmt.Errorf("%s: %w", op, ctx.Err())
}

// getRange reads dst from object key at start. Bytes past the object's end
// read as zeros: a page object holds only up to the file's size when it was
// written, and the file may have grown since.
func (d *Driver) getRange(ctx context.Context, key string, start int64, dst []byte) error {
	err := d.do(ctx, "s3 get "+key, func(ctx context.Context) error {
		var o minio.GetObjectOptions
		if err := o.SetRange(start, start+int64(len(dst))-1); err != nil {
			return err
		}
		body, info, _, err := d.core.GetObject(ctx, d.loc.Bucket, key, o)
		if err != nil {
			if errorResponse(err).Code == "InvalidRange" {
				clear(dst)
				return nil
			}
			return err
		}
		defer body.Close()
		n, err := io.ReadFull(body, dst[:min(int64(len(dst)), max(info.Size, 0))])
		d.stats.bytesRead.Add(int64(n))
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				return fmt.Errorf("%w: got %d of %d bytes: %w", errShortBody, n, info.Size, err)
			}
			return err
		}
		clear(dst[n:])
		return nil
	})
	d.stats.gets.Add(1)
	if errors.Is(err, ErrNotFound) && errorResponse(err).Code == "NoSuchKey" {
		return fmt.Errorf("%w: %w", errPageGone, err)
	}
	return err
}

// getManifest reads the commit object. With ifNoneMatch set and the object
// unchanged, it returns (nil, ifNoneMatch, nil).
func (d *Driver) getManifest(ctx context.Context, ifNoneMatch string) (*manifest, string, error) {
	var m *manifest
	var etag string
	err := d.do(ctx, "s3 get commit object "+d.loc.Key, func(ctx context.Context) error {
		var o minio.GetObjectOptions
		if ifNoneMatch != "" {
			if err := o.SetMatchETagExcept(ifNoneMatch); err != nil {
				return err
			}
		}
		body, info, _, err := d.core.GetObject(ctx, d.loc.Bucket, d.loc.Key, o)
		if err != nil {
			if errorResponse(err).StatusCode == http.StatusNotModified {
				m, etag = nil, ifNoneMatch
				return nil
			}
			return err
		}
		defer body.Close()
		if info.Size < 0 || info.Size > maxManifest {
			return fmt.Errorf("%w: commit object of %d bytes", ErrCorrupt, info.Size)
		}
		buf := make([]byte, info.Size)
		if n, err := io.ReadFull(body, buf); err != nil {
			return fmt.Errorf("%w: got %d of %d bytes: %w", errShortBody, n, info.Size, err)
		}
		if m, err = decodeManifest(buf); err != nil {
			return err
		}
		etag = info.ETag
		return nil
	})
	d.stats.gets.Add(1)
	if err != nil {
		return nil, "", err
	}
	return m, etag, nil
}

// reload (read-only Drivers) adopts the newest commit object, if it
// changed: this is how a reader follows a writer.
func (d *Driver) reload(ctx context.Context) error {
	d.mu.RLock()
	etag := d.mu.etag
	d.mu.RUnlock()
	m, newTag, err := d.getManifest(ctx, etag)
	if err != nil {
		return err
	}
	if m == nil {
		return nil
	}
	if m.pageSize != d.pageSize || m.headSize != d.headSize {
		// The file was re-created with another geometry.
		return fmt.Errorf("%w: s3://%s/%s changed page geometry; reopen", ErrCorrupt, d.loc.Bucket, d.loc.Key)
	}
	d.install(m, newTag)
	return nil
}

// putManifest writes m as the commit object, on condition that the current
// one has ETag ifMatch (empty: that none exists). A failed precondition is
// vfd.ErrLocked unless the object there is m itself, from an earlier attempt
// whose answer was lost.
func (d *Driver) putManifest(ctx context.Context, m *manifest, ifMatch string) (string, error) {
	var nonce [8]byte
	if _, err := crand.Read(nonce[:]); err != nil {
		return "", err
	}
	m.nonce = binary.LittleEndian.Uint64(nonce[:])
	b := m.encode()
	var etag string
	err := d.do(ctx, "s3 put commit object "+d.loc.Key, func(ctx context.Context) error {
		o := minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true}
		if ifMatch == "" {
			o.SetMatchETagExcept("*")
		} else {
			o.SetMatchETag(ifMatch)
		}
		info, err := d.core.PutObject(ctx, d.loc.Bucket, d.loc.Key, bytes.NewReader(b), int64(len(b)), "", "", o)
		if err != nil {
			return err
		}
		etag = info.ETag
		return nil
	})
	d.stats.puts.Add(1)
	if errors.Is(err, vfd.ErrLocked) {
		cur, curTag, gerr := d.getManifest(ctx, "")
		switch {
		case gerr == nil && cur != nil && cur.nonce == m.nonce && bytes.Equal(cur.encode(), b):
			err, etag = nil, curTag
		case gerr == nil && cur != nil && m.owner != ([16]byte{}) && cur.owner == m.owner && cur.epoch == m.epoch:
			// Our own earlier commit, whose answer was lost, landed
			// after all: no other writer is involved, but this
			// Driver's view is behind the store's. Only a reopen
			// brings them together.
			err = fmt.Errorf("%w: an earlier commit of %s whose answer was lost has landed; reopen the file", ErrNetwork, d.URL())
			d.failed.CompareAndSwap(nil, &err)
		}
	}
	if err != nil {
		return "", err
	}
	d.stats.bytesWritten.Add(int64(len(b)))
	d.stats.commits.Add(1)
	return etag, nil
}

// putPage uploads one page object.
func (d *Driver) putPage(ctx context.Context, key string, b []byte) error {
	err := d.do(ctx, "s3 put "+key, func(ctx context.Context) error {
		o := minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true}
		_, err := d.core.PutObject(ctx, d.loc.Bucket, key, bytes.NewReader(b), int64(len(b)), "", "", o)
		return err
	})
	d.stats.puts.Add(1)
	if err == nil {
		d.stats.bytesWritten.Add(int64(len(b)))
	}
	return err
}
