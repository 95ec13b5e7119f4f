package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/engine/internal/selection"
	"github.com/scc-dev/scc/lockfree"
	"github.com/scc-dev/scc/serialize"
)

// The data path of Dataset.Read and Dataset.Write (Dataset.read and
// Dataset.write; a write takes only the locked path).
//
// A read of resident chunks that overlaps no writer — the common case of a
// hot dataset — runs without a lock and without writing a word other
// requests write, and allocates nothing:
//
//  1. serialize.TryFastRead holds the region with a per-P reader count
//     (no shard mutex, no ticket) as long as no write is registered on
//     the dataset's shard; the contract is that the hold covers only
//     short work that never blocks.
//  2. Under it, cache.ServeResident copies out of the resident chunks
//     (one light pin per chunk, no latch) and reports how many it served.
//     No admission: a hit holds no memory once it returns.
//  3. If every chunk was served, done. Otherwise the fast hold is dropped
//     and the whole request starts over on the locked path below (a
//     read may be repeated: it only overwrites buf with the same kind of
//     bytes), so a fast hold never covers a miss's I/O.
//
// A read that is one box inside one chunk goes through the same three
// steps in a narrower form first (readOne, ioone.go: the hold taken on
// the dataset alone, one pass to validate and build the request, a
// byte-level copy plan).
//
// The locked path: serialize.AcquireHold orders the request against every
// overlapping one; resident chunks are served first without admission
// (ServeResident), and only the rest is admitted and sent to the cache:
// dsState.submit (admit.go), the one path of admitted requests.
//
// The extent lock is not taken: SetExtent and a read-only file's adopt
// change the extent only under serialize.AcquireExclusive, which waits for
// every hold on the dataset, fast or locked, and keeps new ones out; so
// while io holds the dataset's region the extent and the index cannot
// change, and s.mu.shape may be read without s.mu (writers of the shape
// hold the dataset exclusively; the serializer's atomics and mutexes give
// the happens-before edge).
//
// Allocation: the per-request state (the serializer's region, the
// per-chunk request and its piece, the packed-buffer shape) lives in an
// ioScratch, its P's (getScratch) or one from a sync.Pool. A selection
// inside one chunk is cut without selection.Split (oneChunk); larger ones
// use Split and clone the pieces.

// ioScratch is one request's reusable state.
type ioScratch struct {
	sel      selArrays           // an inline Box selection, expanded
	slab     selection.Hyperslab // over sel, the expanded selection's general form
	lo, hi   [8]uint64
	regions  [1]serialize.Region
	bufShape [8]uint64
	// The single-chunk request.
	one      [1]cache.Request
	onePiece piece
	oneSel   selection.Piece
	coord    [8]uint64
	runs     [8][]selection.Run
	runArr   [8]selection.Run
	plan     onePlan // the single-chunk builder's request and copy plan (ioone.go)
	// memo is the single-chunk request's memory of its last chunk
	// (cache.Memo): a goroutine reading one chunk again and again finds
	// it without the chunk table. Kept across uses of the scratch; put
	// prunes it to a resident chunk.
	memo cache.Memo
	// Multi-chunk requests.
	reqs   []cache.Request
	pieces pieceArena // piece.go
	// planReq: one[0] and onePiece hold the request buildBlock built
	// from plan, but for onePiece.buf, which put cleared; the next
	// single-chunk read of the same plan stores only its buffer. Set by
	// put when the call's single-chunk read was served by the hit
	// (hitReq); cleared by buildBlock as it starts and by anything else
	// that writes one[0] (oneChunk).
	planReq bool
	// hitReq: this call's single-chunk read was served by the hit
	// (readOne) on the request buildBlock built; put reads and clears
	// it. A call that did anything else leaves it clear, and put zeroes
	// the request, whoever wrote it.
	hitReq bool
	// home is the P's slot this scratch belongs to (getScratch); nil for
	// the pool's.
	home *scratchSlot
}

var ioPool = sync.Pool{New: func() any { return new(ioScratch) }}

// Per-P scratches: each P has one ioScratch of its own, taken with one CAS
// of a flag on the P's line and given back with one store; the pool
// serves a call that finds its P's scratch taken (a goroutine preempted
// holding it, a virtual dataset's read of its sources inside its own).
//
// Why not the pool alone: a resident read is a few dozen nanoseconds, and
// sync.Pool's Get and Put (pinning the P twice, the per-P pool's lookup,
// Put's store into it) were about a tenth of one, twice what the flag
// costs. The P's scratch also keeps its single-chunk plan (onePlan) and
// memo from one call to the next, as the pool's usually did.
//
// What a P's scratch keeps between calls — the plan's cache dataset and
// extent, the memo's entry — would keep a closed file's cache structures
// reachable, which the pool's collection at GC did not: File.Close makes
// every P's scratch forget them (forgetScratches).
type scratchSlot struct {
	busy atomic.Uint32
	// Owned by whoever holds busy (the CAS from 0 and the store of 0
	// order the holders' plain accesses, as a mutex would).
	sc *ioScratch
	// epoch is scratchEpoch when sc last forgot what it keeps.
	epoch uint64
	_     [64 - 24]byte
}

var (
	ioSlots = make([]scratchSlot, lockfree.Stripes())
	// scratchEpoch counts forgetScratches calls: a scratch given back
	// under an older epoch forgets what it keeps (put).
	scratchEpoch atomic.Uint64
)

// getScratch returns the calling P's scratch if it is free, else one from
// the pool. The caller gives it back with put.
func getScratch() *ioScratch {
	s := &ioSlots[lockfree.ProcHint()&(len(ioSlots)-1)]
	if s.busy.Load() == 0 && s.busy.CompareAndSwap(0, 1) {
		if s.sc == nil {
			s.sc = &ioScratch{home: s}
		}
		return s.sc
	}
	return ioPool.Get().(*ioScratch)
}

// forgetScratches makes every P's scratch drop what it keeps between
// calls: at once for a free one, at its put for one in use.
func forgetScratches() {
	e := scratchEpoch.Add(1)
	for i := range ioSlots {
		s := &ioSlots[i]
		if !s.busy.CompareAndSwap(0, 1) {
			continue // its holder's put sees the new epoch
		}
		if s.sc != nil && s.epoch != e {
			s.sc.forget()
		}
		s.epoch = e
		s.busy.Store(0)
	}
}

// forget drops the references sc keeps between calls (the plan's key and
// the memo): the next single-chunk read builds its plan again.
func (sc *ioScratch) forget() {
	sc.plan = onePlan{}
	sc.memo = cache.Memo{}
	sc.one[0] = cache.Request{}
	sc.onePiece = piece{}
	sc.planReq, sc.hitReq = false, false
}

// put drops every reference to the caller's buffer and data, then
// gives sc back to its P's slot or to the pool.
func (sc *ioScratch) put() {
	sc.planReq, sc.hitReq = sc.hitReq, false
	if sc.planReq {
		// A single-chunk read the hit served: the request is kept, and
		// the call wrote nothing else of sc (the region, the pieces and
		// the requests of the general path are as the last put left them).
		sc.onePiece.buf = nil // the rest is the plan's and sc's own
	} else {
		sc.regions[0] = serialize.Region{}
		sc.one[0] = cache.Request{}
		sc.onePiece = piece{}
		sc.pieces.reset()
		if cap(sc.reqs) > 1024 {
			sc.reqs = nil // do not keep the slice of a huge request
		}
		clear(sc.reqs)
		sc.reqs = sc.reqs[:0]
	}
	sc.memo.Prune()
	if s := sc.home; s != nil {
		if e := scratchEpoch.Load(); s.epoch != e {
			sc.forget()
			s.epoch = e
		}
		s.busy.Store(0)
		return
	}
	ioPool.Put(sc)
}

// expand makes an inline Box selection use sc's arrays, so building the
// selection in the call costs no allocation (Selection).
func (sc *ioScratch) expand(sel *Selection) Selection {
	if !sel.box {
		return *sel
	}
	sc.slab = sel.in(&sc.sel)
	return Selection{slab: &sc.slab}
}

// regionInto is dsState.region into sc's arrays when the rank allows.
func (s *dsState) regionInto(sel Selection, sc *ioScratch) serialize.Region {
	r := len(sel.hyper().Start)
	if r > len(sc.lo) || len(s.chunk) != r {
		return s.region(sel)
	}
	reg := serialize.Region{Dataset: s.id, Lo: sc.lo[:r], Hi: sc.hi[:r]}
	clear(reg.Lo)
	clear(reg.Hi)
	return s.fillRegion(sel, reg)
}

// hotDataset returns the cache dataset without taking s.mu when io has
// seen it before (dsState.hot; Close clears it under s.mu).
func (s *dsState) hotDataset() (*cache.Dataset, error) {
	if cds := s.hot.Load(); cds != nil {
		return cds, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.cds == nil {
		return nil, ErrClosed
	}
	s.hot.Store(s.mu.cds) // under s.mu, so it cannot outlive a Close
	return s.mu.cds, nil
}

// prepare validates sel against the extent and buf, and builds the
// per-chunk requests in sc. n == 0: nothing selected.
func (s *dsState) prepare(sel Selection, buf []byte, sc *ioScratch) (reqs []cache.Request, err error) {
	if cds := s.hot.Load(); cds != nil && sc.prepareOne(sel.hyper(), s.mu.shape, s.chunk, s.elemSize, buf, cds) {
		return sc.one[:], nil
	}
	// See the file comment: the extent cannot change while io holds the
	// dataset, so the shape is read without s.mu.
	if err := sel.hyper().Validate(s.mu.shape); err != nil {
		return nil, classifyIn(err, s.path())
	}
	n := sel.hyper().NumElements()
	if uint64(len(buf)) != n*uint64(s.elemSize) {
		return nil, classifyIn(fmt.Errorf("%w: buffer has %d bytes, selection needs %d", ErrInvalid, len(buf), n*uint64(s.elemSize)), s.path())
	}
	if n == 0 {
		return nil, nil
	}
	cds, err := s.hotDataset()
	if err != nil {
		return nil, err
	}
	h := sel.hyper()
	r := len(h.Count)
	var bufShape []uint64
	if r <= len(sc.bufShape) {
		bufShape = sc.bufShape[:r]
	} else {
		bufShape = make([]uint64, r)
	}
	for d := range bufShape {
		bufShape[d] = h.Count[d] * h.Block[d]
	}
	if sc.oneChunk(h, s.chunk, sc.regions[0]) {
		sc.planReq = false // one[0] is not the plan's request any more
		sc.onePiece = piece{p: &sc.oneSel, buf: buf, bufShape: bufShape}
		sc.one[0] = cache.Request{
			Dataset: cds,
			Coord:   layout.Coord(sc.oneSel.Coord),
			Full:    sc.oneSel.Full(s.chunk),
			Piece:   &sc.onePiece,
		}
		return sc.one[:], nil
	}
	reqs = sc.reqs[:0]
	err = selection.Split(h, s.chunk, func(p *selection.Piece) error {
		// Split reuses p for the next chunk: keep a copy.
		pc := sc.pieces.clone(p, buf, bufShape)
		reqs = append(reqs, cache.Request{
			Dataset: cds,
			Coord:   layout.Coord(pc.p.Coord),
			Full:    pc.p.Full(s.chunk),
			Piece:   pc,
		})
		return nil
	})
	sc.reqs = reqs
	if err != nil {
		return nil, classify(err)
	}
	return reqs, nil
}

// oneChunk cuts a validated, non-empty selection that lies inside one
// chunk with one run per dimension (every Box does) into sc.oneSel, the
// piece Split would produce, without Split's allocations. reg is the
// selection's chunk box (regionInto), whose divisions it reuses: 64-bit
// divisions were the largest item of a small read's own cost. It reports
// false for anything else.
func (sc *ioScratch) oneChunk(h selection.Hyperslab, chunk []uint64, reg serialize.Region) bool {
	r := len(h.Start)
	if r > len(sc.coord) || len(chunk) != r || len(reg.Lo) != r || len(reg.Hi) != r {
		return false
	}
	p := &sc.oneSel
	p.Coord = sc.coord[:r]
	p.Runs = sc.runs[:r]
	p.N = 1
	for d := 0; d < r; d++ {
		// One block: a single count, or blocks that touch (Split
		// normalizes those the same way); inside one chunk.
		if h.Count[d] != 1 && h.Stride[d] != h.Block[d] || reg.Hi[d]-reg.Lo[d] != 1 {
			return false
		}
		n := h.Count[d] * h.Block[d] // no overflow: Validate passed
		c := reg.Lo[d]
		p.Coord[d] = c
		sc.runArr[d] = selection.Run{Chunk: h.Start[d] - c*chunk[d], Buf: 0, Len: n}
		p.Runs[d] = sc.runArr[d : d+1 : d+1]
		p.N *= n
	}
	return true
}

// prepareOne is prepare for the common small request: a selection of one
// block per dimension (a Box, or blocks that touch) inside the extent and
// inside one chunk, with a buffer of the right size. When the serializer's
// chunk box (regionInto) is one chunk, buildOne (ioone.go) validates,
// counts and cuts in one pass over the dimensions, where prepare runs
// Validate, NumElements, the buffer shape and oneChunk one after the
// other: that sequence was a fifth of a resident read. It builds sc.one[0]
// and reports true, or reports false having decided nothing: prepare then
// takes the general path, which also reports every error. cds is the
// cache dataset (dsState.hot).
func (sc *ioScratch) prepareOne(h selection.Hyperslab, shape, chunk []uint64, elemSize int, buf []byte, cds *cache.Dataset) bool {
	r := len(h.Start)
	reg := sc.regions[0]
	if r == 0 || r > len(sc.coord) || len(h.Count) != r || len(h.Block) != r || len(h.Stride) != r ||
		len(shape) != r || len(chunk) != r || len(reg.Lo) != r || len(reg.Hi) != r {
		return false
	}
	for d := 0; d < r; d++ {
		if reg.Hi[d]-reg.Lo[d] != 1 {
			return false
		}
	}
	// One chunk: the single-chunk read's builder (ioone.go) makes the
	// request, and the copy plan the dense Scatter runs.
	return sc.buildOne(h, shape, chunk, elemSize, buf, cds)
}

// prepared is the per-chunk requests ioFast built, kept for ioLocked when
// a chunk was not resident: valid as long as the extent (the shape slice,
// which SetExtent and adopt replace, never modify) and the cache dataset
// are the ones they were built for.
type prepared struct {
	reqs  []cache.Request
	shape []uint64
}

func (p prepared) validFor(s *dsState) bool {
	if len(p.reqs) == 0 || len(p.shape) == 0 || len(s.mu.shape) != len(p.shape) || &s.mu.shape[0] != &p.shape[0] {
		return false
	}
	cds, err := s.hotDataset()
	return err == nil && cds == p.reqs[0].Dataset
}

// ioFast serves a read entirely from resident chunks under a fast
// serializer hold; done false means nothing conclusive happened and the
// caller must take the locked path, with the requests built here.
func (s *dsState) ioFast(ctx context.Context, sel Selection, buf []byte, sc *ioScratch) (done bool, p prepared, err error) {
	h, ok := s.f.ser.TryFastRead(serialize.Request{Regions: sc.regions[:]})
	if !ok {
		return false, prepared{}, nil
	}
	defer h.Release()
	if err := s.gone(); err != nil {
		return true, prepared{}, err
	}
	reqs, err := s.prepare(sel, buf, sc)
	if err != nil || len(reqs) == 0 {
		return true, prepared{}, err
	}
	n, err := s.f.cache.ServeResident(ctx, false, reqs)
	if err != nil {
		return true, prepared{}, classify(err)
	}
	if n == len(reqs) {
		return true, prepared{}, nil
	}
	return false, prepared{reqs: reqs, shape: s.mu.shape}, nil
}

// ioLocked is the general path under a locked serializer hold.
func (s *dsState) ioLocked(ctx context.Context, sel Selection, buf []byte, write bool, sc *ioScratch, p prepared) error {
	h, err := s.f.ser.AcquireHold(ctx, serialize.Request{Regions: sc.regions[:], Write: write})
	if err != nil {
		return classify(err)
	}
	defer h.Release()
	if err := s.gone(); err != nil {
		return err
	}
	reqs := p.reqs
	if !p.validFor(s) {
		if reqs, err = s.prepare(sel, buf, sc); err != nil || len(reqs) == 0 {
			return err
		}
	}
	return s.submit(ctx, reqs, write, nil)
}
