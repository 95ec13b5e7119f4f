package cache

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/scc-dev/scc/cache/layout"
)

// Direct decodes: a read of a filtered chunk that is not resident and
// that the cache would keep only by evicting something is served without
// making the chunk resident. The image is read as for a load (a vector
// read per file and batch, split among helpers when large, readImages)
// into a pooled buffer, while the chunks already read are decoded on the
// workers in parallel (see "Reading while decoding" below); no
// entry is made, so the chunk costs the cache neither memory nor an
// eviction. Two ways, per chunk:
//
//   - into the caller's buffer: the read covers the whole chunk and its
//     bytes lie contiguous in the caller's buffer in the chunk's element
//     order (DirectDecoder); they are written once, by the decoder, where
//     the caller wants them;
//   - transient: otherwise (a part of the chunk, a box of many chunks whose
//     rows interleave in the caller's buffer, several pieces), the chunk is
//     decoded into a chunk of the layout's own, its pieces are scattered
//     from it on the same worker, and it goes straight back to the layout
//     (Evicter), whose buffer pool hands it to the next decode. A one-call
//     read of many chunks then decodes and scatters them on every worker
//     at once, and touches no more fresh memory than one chunk per worker.
//     The budget holds room for the chunks decoding at once (reserved
//     before they start), and a chunk over the bypass size goes as a bypass
//     entry instead, so that its reservation can grow an adaptive cache.
//
// When (goesDirect): the chunk is above the bypass threshold (the
// cached path would load it, serve it and drop it), or it was not
// accessed recently (rereads.go: missed by a read, or written whole while
// not resident) and either admitting it would take the resident bytes
// past the quiescent limit (the cache is full, and a one-pass scan would
// otherwise push it to the active limit and evict chunks that may be read
// again) or the cache keeps only chunks read again
// (Config.AdmitOnReread). A chunk accessed recently is kept, evicting
// others if need be: that is how a full cache takes in a new working set. A
// cache with room keeps every chunk by default: the decoder then writes
// into the cache's buffer, and the next read of it is a hit. BypassBytes
// -1 turns direct decodes off with the bypass.
//
// Coherence is that of direct reads (direct.go): only chunks missing from
// the table go this way, and a chunk absent from the table has no
// unpublished version.

// decodeDirect serves the groups of a read that decode directly (see
// above) and returns the others.
func (c *Cache) decodeDirect(ctx context.Context, reqs []Request, gs []*group) ([]*group, error) {
	var cand []*group
	var dsts [][]byte // nil: transient
	var rest []*group
	var cached int64
	sz := c.sizes.current()
	for _, g := range gs {
		if !g.loc.Exists() || !c.intake.goesDirect(sz, g, g.hint(), cached) {
			cached += g.hint()
			rest = append(rest, g)
			continue
		}
		var dst []byte
		if dd, ok := g.d.lay().l.(layout.DirectDecoder); ok && len(g.reqs) == 1 {
			dst, _ = dd.DecodeTarget(g.loc, reqs[g.reqs[0]].Piece)
		}
		if dst == nil && g.hint() > sz.bypass {
			// A chunk over the bypass size goes as a bypass entry,
			// whose reservation is what grows an adaptive cache for
			// it (a flash increase).
			cached += g.hint()
			rest = append(rest, g)
			continue
		}
		cand = append(cand, g)
		dsts = append(dsts, dst)
	}
	if len(cand) == 0 {
		return gs, nil
	}
	defer c.shedAfterDirect()
	d := directDecodes{c: c, reqs: reqs, cand: cand, dsts: dsts}
	if err := d.run(ctx); err != nil {
		return nil, err
	}
	// A transient decode is a load and a bypass, as a chunk the cached
	// path loads, serves and drops would be.
	c.stats.directDecodes.Add(int64(len(cand)) - d.transient)
	c.stats.loads.Add(d.transient)
	c.stats.bypasses.Add(d.transient)
	return rest, nil
}

// Reading while decoding. The images of a direct decode are read in
// batches of consecutive chunks (readBatchBytes: small chunks still share
// one vector read, a large one is a batch alone) by one goroutine, while
// the workers decode the images already read; each decoder gives its image
// back (the layout owns it from the decode on), and the next batch is read
// into the buffers so freed. So a one-call read of many chunks reads while
// it decodes and holds a few images at a time, in warm recycled buffers:
// reading all of them first (one vector read of the whole request, as
// before) made every image a fresh buffer whose pages the kernel had to
// map and zero (13 % of the CPU of a one-call read of sharded zstd chunks,
// BenchmarkZarrBenchSharded/read_all, beside 63 % for the codec), held
// them all at once (456 MiB for the Zarr benchmark's full-size array) and
// kept the decoders idle while it read.
//
// Memory. At most Workers+1 images (or the first batch) wait, read, for a
// decoder, at most Workers+1 decode at once (each decoder holds its image
// until it is decoded) and the reader holds the batch it reads, so a
// request holds at most 2×(Workers+1) images and two batches. The budget reservation for transient decodes (k decoders × the
// largest hold) is made, as before, before any decoder starts: from the
// holds of the first batch's chunks (ScatterHold may need the image to
// tell). A chunk read later whose hold exceeds what each decoder reserved
// is not decoded in the stream: it is kept and decoded after it, under a
// reservation of its own made once the stream's is given back, so a
// request never waits for memory while it holds some.
//
// Errors. A read error stops the reader: the chunks decoded by then are
// in the caller's buffer, as a failed request may leave them, and the
// error is returned. A decode error makes the runner skip what is left;
// the reader is told to stop and is waited for before decodeDirect
// returns (no goroutine outlives the request). Images not decoded are the
// collector's, as they were.

// readBatchBytes bounds the bytes of a batch of images read by one vector
// read, unless one image is larger.
const readBatchBytes = 1 << 20

// directDecodes is one request's direct decodes: cand[i] decodes into
// dsts[i] (nil: transient, pieces[i] its pieces).
type directDecodes struct {
	c      *Cache
	reqs   []Request
	cand   []*group
	dsts   [][]byte
	pieces [][]layout.Piece

	transient int64 // chunks decoded transiently (counted for stats)
	k         int64 // transient decoders at once: Workers+1, at most transient
	slot      int64 // hold reserved per decoder (transient)
	slots     chan struct{}

	// The stream: the reader sends read images on ready; stop tells it
	// to give up; err is its error, deferred the chunks whose hold
	// exceeds slot (both the reader's until done is closed).
	ready    chan readImage
	stop     chan struct{}
	done     chan struct{}
	readErr  error
	deferred []readImage
}

// readImage is one read image of cand[i] with its split read's checksum
// state (nil: Decode verifies it), and what a transient decode of it holds.
type readImage struct {
	i     int
	image []byte
	sum   *directRead
	hold  int64
}

// deferredDecodes counts the chunks decoded after their request's stream
// (tests).
var deferredDecodes atomic.Int64

// run decodes every chunk of d: the stream, then the deferred chunks.
func (d *directDecodes) run(ctx context.Context) error {
	c := d.c
	for i, dst := range d.dsts {
		if dst != nil {
			continue
		}
		if d.pieces == nil {
			d.pieces = make([][]layout.Piece, len(d.cand))
		}
		g := d.cand[i]
		d.pieces[i] = make([]layout.Piece, len(g.reqs))
		for j, r := range g.reqs {
			d.pieces[i][j] = d.reqs[r].Piece
		}
		d.transient++
	}
	batches := readBatches(d.cand)
	first, err := d.read(batches[0])
	if err != nil {
		return err
	}
	d.k = min(d.transient, int64(max(c.cfg.Workers, 1))+1)
	seen := false // a transient chunk in the first batch
	for _, im := range first {
		d.slot = max(d.slot, im.hold)
		seen = seen || d.dsts[im.i] == nil
	}
	if d.transient > 0 {
		if !seen {
			// No transient chunk in the first batch: reserve for the
			// first one the stream meets, by its hint (its hold is at
			// most that); the rest of the rule holds.
			for i, dst := range d.dsts {
				if dst == nil {
					d.slot = d.cand[i].hint()
					break
				}
			}
		}
		held := d.k * d.slot
		if err := c.reserve(ctx, held); err != nil {
			return err // the images are the collector's
		}
		d.slots = make(chan struct{}, d.k)
		err = d.stream(ctx, first, batches[1:])
		c.budget.charge(-held)
	} else {
		err = d.stream(ctx, first, batches[1:])
	}
	if err != nil || len(d.deferred) == 0 {
		return err
	}
	return d.runDeferred(ctx)
}

// readBatches cuts cand into runs [start, end) of consecutive chunks of
// at most readBatchBytes of images (or one chunk).
func readBatches(cand []*group) [][2]int {
	var bs [][2]int
	start, n := 0, int64(0)
	for i, g := range cand {
		if i > start && n+g.loc.Size > readBatchBytes {
			bs = append(bs, [2]int{start, i})
			start, n = i, 0
		}
		n += g.loc.Size
	}
	return append(bs, [2]int{start, len(cand)})
}

// read reads the images of the chunks d.cand[b[0]:b[1]] and tells each
// transient one's hold.
func (d *directDecodes) read(b [2]int) ([]readImage, error) {
	batch := d.cand[b[0]:b[1]]
	images, sums, err := d.c.readImages(batch)
	if err != nil {
		return nil, err
	}
	out := make([]readImage, len(batch))
	for j, g := range batch {
		i := b[0] + j
		out[j] = readImage{i: i, image: images[j], sum: sumOf(sums, j)}
		if d.dsts[i] != nil {
			continue
		}
		hold := g.hint()
		if sh, ok := g.d.lay().l.(layout.ScatterHolder); ok {
			if n, ok := sh.ScatterHold(g.loc, images[j], d.pieces[i]); ok {
				hold = min(n, hold)
			}
		}
		out[j].hold = hold
	}
	return out, nil
}

// stream decodes the images of first and of the batches rest on the
// workers while one goroutine reads rest.
func (d *directDecodes) stream(ctx context.Context, first []readImage, rest [][2]int) error {
	// The first batch's holds are at most d.slot (run sets it from them),
	// so none of its chunks is deferred.
	if len(rest) == 0 {
		// All read already (the common read of a few chunks): no reader.
		if len(first) == 1 {
			return d.decode(first[0])
		}
		return d.c.workers.run(ctx, len(first), func(i int) error { return d.decode(first[i]) })
	}
	n := len(first)
	for _, b := range rest {
		n += b[1] - b[0]
	}
	d.ready = make(chan readImage, max(len(first), d.c.cfg.Workers+1))
	for _, im := range first {
		d.ready <- im
	}
	d.stop, d.done = make(chan struct{}), make(chan struct{})
	go d.reader(ctx, rest)
	err := d.c.workers.run(ctx, n, func(int) error {
		im, ok := <-d.ready
		if !ok {
			return nil // deferred, or the reader failed: told below
		}
		return d.decode(im)
	})
	close(d.stop)
	<-d.done
	if err == nil {
		err = d.readErr
	}
	return err
}

// reader reads the batches and sends their images to the decoders until
// done, a read fails, ctx ends or stop is closed.
func (d *directDecodes) reader(ctx context.Context, batches [][2]int) {
	defer close(d.done)
	defer close(d.ready)
	for _, b := range batches {
		if err := ctx.Err(); err != nil {
			d.readErr = err
			return
		}
		ims, err := d.read(b)
		if err != nil {
			d.readErr = err
			return
		}
		for _, im := range ims {
			if im.hold > d.slot {
				d.deferred = append(d.deferred, im)
				continue
			}
			select {
			case d.ready <- im:
			case <-d.stop:
				return
			}
		}
	}
}

// decode decodes one read image into its place.
func (d *directDecodes) decode(im readImage) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrPanic, r)
		}
	}()
	g := d.cand[im.i]
	if d.dsts[im.i] == nil {
		d.slots <- struct{}{}
		defer func() { <-d.slots }()
		return decodeTransient(g, d.reqs, d.pieces[im.i], im.image, im.sum)
	}
	if err := g.d.lay().l.(layout.DirectDecoder).DecodeInto(g.coord, g.loc, im.image, d.dsts[im.i]); err != nil {
		return fmt.Errorf("cache: decoding chunk %v directly: %w", g.coord, err)
	}
	return nil
}

// runDeferred decodes the chunks the stream deferred, their images read,
// under a reservation of their own.
func (d *directDecodes) runDeferred(ctx context.Context) error {
	ims := d.deferred
	d.slot = 0
	for _, im := range ims {
		d.slot = max(d.slot, im.hold)
	}
	k := min(int64(len(ims)), int64(max(d.c.cfg.Workers, 1))+1)
	held := k * d.slot
	if err := d.c.reserve(ctx, held); err != nil {
		return err
	}
	defer d.c.budget.charge(-held)
	d.slots = make(chan struct{}, k)
	deferredDecodes.Add(int64(len(ims)))
	decode := func(j int) error { return d.decode(ims[j]) }
	if len(ims) == 1 {
		return decode(0)
	}
	return d.c.workers.run(ctx, len(ims), decode)
}

// decodeTransient decodes g's image into a chunk no entry holds, serves
// g's pieces from it and gives it back to the layout.
func decodeTransient(g *group, reqs []Request, pieces []layout.Piece, image []byte, sum *directRead) error {
	if sd, ok := g.d.lay().l.(layout.ScatterDecoder); ok {
		// A chunk the layout streams is scattered piece by piece as it
		// decodes; no chunk buffer is made.
		var s uint32
		summed := sum != nil && sum.summed
		if summed {
			s = sum.sum
		}
		if done, err := sd.DecodeScatter(g.coord, g.loc, image, pieces, summed, s); done {
			if err != nil {
				return fmt.Errorf("cache: decoding chunk %v: %w", g.coord, err)
			}
			return nil
		}
	}
	ch, err := decodeChunk(g, image, sum)
	if err != nil {
		return err
	}
	l := g.d.lay().l
	for _, i := range g.reqs {
		if err = l.Scatter(ch, reqs[i].Piece); err != nil {
			break
		}
	}
	if ev, ok := l.(layout.Evicter); ok {
		ev.Evict(g.coord, ch)
	}
	return err
}
