package engine

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/engine/internal/selection"
	"github.com/scc-dev/scc/serialize"
)

// The sparse operations: Erase, DefinedElements and
// ReadDefined. Each is one request through the cache like Read and Write
// (serializer hold on the selection's chunks, resident chunks first, the
// rest admitted), with pieces whose kind tells the layout's Scatter and
// Gather what to do (pieceKind).

// kindRequests validates sel against the extent and cuts it into
// per-chunk requests whose pieces have the given kind. Caller holds the
// selection's region in the serializer.
func (s *dsState) kindRequests(sel Selection, kind pieceKind, buf []byte) ([]cache.Request, []*piece, error) {
	if err := sel.hyper().Validate(s.mu.shape); err != nil {
		return nil, nil, classifyIn(err, s.path())
	}
	if sel.hyper().NumElements() == 0 {
		return nil, nil, nil
	}
	cds, err := s.hotDataset()
	if err != nil {
		return nil, nil, err
	}
	bufShape := sel.hyper().Shape()
	var reqs []cache.Request
	var pieces []*piece
	err = selection.Split(sel.hyper(), s.chunk, func(p *selection.Piece) error {
		cp := p.Clone()
		pc := &piece{p: &cp, buf: buf, bufShape: bufShape, kind: kind}
		if kind == pieceDefined || kind == pieceValues {
			pc.out = &definedOut{}
		}
		pieces = append(pieces, pc)
		reqs = append(reqs, cache.Request{Dataset: cds, Coord: layout.Coord(cp.Coord), Full: cp.Full(s.chunk), Piece: pc})
		return nil
	})
	if err != nil {
		return nil, nil, classify(err)
	}
	return reqs, pieces, nil
}

// hold takes sel's region in the serializer.
func (s *dsState) hold(ctx context.Context, sel Selection, write bool) (serialize.Hold, error) {
	h, err := s.f.ser.AcquireHold(ctx, serialize.Request{Regions: []serialize.Region{s.region(sel)}, Write: write})
	if err != nil {
		return h, classify(err)
	}
	if err := s.gone(); err != nil {
		h.Release()
		return serialize.Hold{}, err
	}
	return h, nil
}

// Erase makes the selected elements undefined (SCC internal API erase_values):
// they read as the fill value again, DefinedElements no longer reports
// them, and their values take no space once the next Flush has written
// the chunks. A chunk whose last defined element is erased is deleted
// from the file. Erasing undefined elements is allowed and does nothing.
//
// Every layout takes Erase. On the others every element is defined and
// stays so, and Erase writes the fill value to the selection (SCC internal
// API: without erase_values the cache fills): on a chunked or contiguous
// dataset the dataset's fill value, on a variable-length one the empty
// sequence.
func (d *Dataset) Erase(ctx context.Context, sel Selection) error {
	if err := d.check(true); err != nil {
		return err
	}
	s := d.s
	sel = s.fit(sel)
	if _, ok := asLayout[*vlenLayout](s); ok {
		n, err := sel.hyper().CountElements()
		if err != nil {
			return classify(err)
		}
		if n > maxChunkBytes {
			return fmt.Errorf("%w: erasing %d elements at once", ErrInvalid, n)
		}
		return d.vlenWrite(ctx, sel, make([][]byte, n)) // the fill: empty
	}
	if _, ok := asLayout[*sparseLayout](s); !ok {
		n, err := sel.hyper().CountElements()
		if err != nil {
			return classify(err)
		}
		if n > maxChunkBytes {
			return fmt.Errorf("%w: erasing %d elements of a dense dataset at once", ErrInvalid, n)
		}
		buf := make([]byte, int(n)*s.elemSize)
		if s.fill != nil {
			selection.FillChunk(buf, s.elemSize, s.fill)
		}
		return d.Write(ctx, sel, buf)
	}
	h, err := s.hold(ctx, sel, true)
	if err != nil {
		return err
	}
	defer h.Release()
	reqs, _, err := s.kindRequests(sel, pieceErase, nil)
	if err != nil || len(reqs) == 0 {
		return err
	}
	return s.submit(ctx, reqs, true, nil)
}

// DefinedElements returns the defined part of sel (SCC internal API
// defined_values): the positions, in sel's packed buffer (C order of
// sel.Shape(); Selection.Coord turns one into coordinates), of the
// elements that hold a written value, ascending.
//
// Chunks the cache holds whole answer from memory; for the others only
// the selection section of each stored chunk is read, and the decoded
// selection is kept in the cache on its own (sparseSelView), so repeated
// queries over a dataset read no values at all.
//
// Every layout answers DefinedElements: on a chunked, contiguous or
// variable-length dataset every element holds a value (the fill value, or
// the empty sequence, where nothing was written), so every position of sel
// is returned.
func (d *Dataset) DefinedElements(ctx context.Context, sel Selection) ([]uint64, error) {
	if err := d.check(false); err != nil {
		return nil, err
	}
	s := d.s
	sel = s.fit(sel)
	if _, ok := asLayout[*sparseLayout](s); !ok {
		h, err := s.hold(ctx, sel, false)
		if err != nil {
			return nil, err
		}
		defer h.Release()
		if err := sel.hyper().Validate(s.mu.shape); err != nil {
			return nil, classifyIn(err, s.path())
		}
		n := sel.hyper().NumElements()
		if n > maxChunkBytes {
			return nil, fmt.Errorf("%w: %d positions at once", ErrInvalid, n)
		}
		out := make([]uint64, n)
		for i := range out {
			out[i] = uint64(i)
		}
		return out, nil
	}
	pos, _, err := d.defined(ctx, sel, pieceDefined)
	return pos, err
}

// ReadDefined returns the defined elements of sel and their values: the
// positions as DefinedElements gives them and, in the same order, the
// values packed little-endian (len(vals) == len(pos)*Type().Size()).
// Unlike DefinedElements it loads whole chunks. On a chunked or
// contiguous dataset it returns every element; a variable-length dataset,
// whose values are not fixed-size, refuses it (ErrInvalid) as it refuses
// Read.
func (d *Dataset) ReadDefined(ctx context.Context, sel Selection) ([]uint64, []byte, error) {
	if err := d.check(false); err != nil {
		return nil, nil, err
	}
	s := d.s
	if err := needLayouts(s, "ReadDefined", fixedLayouts...); err != nil {
		return nil, nil, err
	}
	if _, ok := asLayout[*sparseLayout](s); !ok {
		pos, err := d.DefinedElements(ctx, sel)
		if err != nil {
			return nil, nil, err
		}
		buf := make([]byte, len(pos)*s.elemSize)
		if err := d.Read(ctx, sel, buf); err != nil {
			return nil, nil, err
		}
		return pos, buf, nil
	}
	return d.defined(ctx, sel, pieceValues)
}

// defined runs a pieceDefined or pieceValues request, as a read-side call
// (File.follow).
func (d *Dataset) defined(ctx context.Context, sel Selection, kind pieceKind) (pos []uint64, vals []byte, err error) {
	err = d.s.f.follow(ctx, func() (err error) {
		pos, vals, err = d.definedOnce(ctx, sel, kind)
		return err
	})
	return pos, vals, err
}

func (d *Dataset) definedOnce(ctx context.Context, sel Selection, kind pieceKind) ([]uint64, []byte, error) {
	sel = d.s.fit(sel)
	s := d.s
	sp, err := needLayout[*sparseLayout](s, "a defined-elements query")
	if err != nil {
		return nil, nil, err
	}
	h, err := s.hold(ctx, sel, false)
	if err != nil {
		return nil, nil, err
	}
	defer h.Release()
	reqs, pieces, err := s.kindRequests(sel, kind, nil)
	if err != nil || len(reqs) == 0 {
		return nil, nil, err
	}
	// Chunks resident whole answer from memory; the rest are routed here.
	// Values need whole chunks. A selection alone comes from the selection
	// view, keyed by the stored version the index names; but a chunk
	// modified since its last published image (pending: it is being
	// written back, or its write failed) is newer in the cache than on
	// disk and goes through the whole-chunk path, which waits for the
	// write-back. Writers of these chunks are excluded by the hold, so
	// nothing becomes pending meanwhile.
	route := func(missed []cache.Request) ([]admitGroup, error) {
		if kind == pieceValues {
			return []admitGroup{{reqs: missed, chunkBytes: s.admitBytes}}, nil
		}
		if len(missed) == 0 {
			return nil, nil
		}
		vcds, err := s.viewDataset()
		if err != nil {
			return nil, err
		}
		x, err := s.idx.get(ctx)
		if err != nil {
			return nil, err
		}
		defer s.idx.account(x)
		main := make([]cache.Request, 0, len(missed))
		var view []cache.Request
		for _, r := range missed {
			if sp.isPending(r.Coord) {
				main = append(main, r)
				continue
			}
			e, err := x.Get(ctx, r.Coord)
			if err != nil {
				return nil, classify(err)
			}
			if !e.Exists() {
				continue
			}
			view = append(view, cache.Request{Dataset: vcds, Coord: sp.view.viewCoord(r.Coord, e), Piece: r.Piece})
		}
		return []admitGroup{
			{reqs: main, chunkBytes: s.admitBytes},
			{reqs: view, chunkBytes: int64(sp.elems)*12 + sparseChunkOverhead},
		}, nil
	}
	if err := s.submit(ctx, reqs, false, route); err != nil {
		return nil, nil, err
	}
	// 3. Concatenate, in selection order.
	var total int
	for _, pc := range pieces {
		total += len(pc.out.pos)
	}
	pos := make([]uint64, 0, total)
	var vals []byte
	if kind == pieceValues {
		vals = make([]byte, 0, total*s.elemSize)
	}
	for _, pc := range pieces {
		pos = append(pos, pc.out.pos...)
		vals = append(vals, pc.out.vals...)
	}
	if slices.IsSorted(pos) {
		return pos, vals, nil
	}
	if kind == pieceDefined {
		slices.Sort(pos)
		return pos, nil, nil
	}
	idx := make([]int, len(pos))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return pos[idx[a]] < pos[idx[b]] })
	es := s.elemSize
	p2 := make([]uint64, len(pos))
	v2 := make([]byte, len(vals))
	for i, j := range idx {
		p2[i] = pos[j]
		copy(v2[i*es:(i+1)*es], vals[j*es:(j+1)*es])
	}
	return p2, v2, nil
}
