package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/scc-dev/scc/engine/filter"
)

// LayoutKind selects a dataset's storage layout (DatasetSpec.Layout).
type LayoutKind uint8

const (
	// Chunked is the dense chunked layout: every element is stored (the
	// fill value where nothing was written), a chunk as one frame.
	Chunked LayoutKind = iota
	// Sparse stores only the elements that were written (defined), per
	// chunk, with the set of defined elements; see Dataset.Erase,
	// Dataset.DefinedElements and Dataset.ReadDefined.
	Sparse
)

func (k LayoutKind) String() string {
	switch k {
	case Chunked:
		return "chunked"
	case Sparse:
		return "sparse"
	case Contiguous:
		return "contiguous"
	case Vlen:
		return "vlen"
	case Virtual:
		return "virtual"
	}
	return fmt.Sprintf("layout(%d)", uint8(k))
}

// code is the header's layout code of k.
func (k LayoutKind) code() uint8 {
	switch k {
	case Sparse:
		return layoutSparse
	case Contiguous:
		return layoutContig
	case Vlen:
		return layoutVlen
	}
	return layoutDense
}

// Layout returns the dataset's storage layout.
func (d *Dataset) Layout() LayoutKind { return d.s.store.kind() }

// knownLayout reports whether code is a layout this engine reads.
func knownLayout(code uint8) bool {
	return code == layoutDense || code == layoutSparse || code == layoutContig || code == layoutVlen || code == layoutVirtual
}

// setLayout builds the dataset's layout from its header fields.
func (s *dsState) setLayout(code uint8, params []byte) error {
	s.code, s.layoutParams = code, params
	var cs chunkedStorage
	switch code {
	case layoutDense:
		l := &denseLayout{indexedStorage: indexedStorage{s}}
		cs = l
		if len(params) != 0 {
			sh, err := newShardState(s, params)
			if err != nil {
				return fmt.Errorf("dataset %q: %w", s.name, err)
			}
			l.sh = sh
			cs = &shardLayout{l}
		}
	case layoutSparse:
		l, err := newSparseLayout(s, params)
		if err != nil {
			return fmt.Errorf("dataset %q: %w", s.name, err)
		}
		cs = l
	case layoutContig:
		if len(s.pipeline.Specs()) > 0 {
			return fmt.Errorf("%w: contiguous dataset %q with filters", ErrCorrupt, s.name)
		}
		if !equal(s.mu.shape, s.maxShape) {
			return fmt.Errorf("%w: contiguous dataset %q with shape %v, max shape %v", ErrCorrupt, s.name, s.mu.shape, s.maxShape)
		}
		l, err := newContigLayout(s, s.mu.shape, params)
		if err != nil {
			return err
		}
		cs, s.idx = l, nil
	case layoutVlen:
		l, err := newVlenLayout(s, params)
		if err != nil {
			return fmt.Errorf("dataset %q: %w", s.name, err)
		}
		cs = l
	case layoutVirtual:
		l, err := newVirtualLayout(s, params)
		if err != nil {
			return fmt.Errorf("dataset %q: %w", s.name, err)
		}
		s.store, s.idx = l, nil
		return nil // it keeps no chunks: nothing for the cache
	default:
		return fmt.Errorf("%w: dataset %q: layout code %d", ErrCorrupt, s.name, code)
	}
	s.store, s.chunked, s.admitBytes = cs, cs, cs.admitBytes()
	return nil
}

// indexKind is the header's IndexKind (0 for a contiguous dataset, which
// has no index).
func (s *dsState) indexKind() uint8 {
	x, ok := s.store.chunkIndex()
	if !ok {
		return 0
	}
	return uint8(x.kind())
}

// layoutParams is the header's LayoutParams for the spec's layout.
func (s DatasetSpec) layoutParams() []byte {
	if s.Layout == Contiguous {
		return encodeContigParams(contigState{})
	}
	if s.Layout == Vlen {
		pct := s.HeapDefragPercent
		if pct == 0 {
			pct = vlenDefaultDefrag
		}
		return encodeVlenParams(pct)
	}
	if s.Layout == Chunked && s.InnerChunk != nil {
		return encodeShardParams(s.InnerChunk)
	}
	if s.Layout != Sparse {
		return nil
	}
	specs := make([]filter.Spec, len(s.SelectionFilters))
	for i, f := range s.SelectionFilters {
		specs[i] = f.spec
	}
	return encodeSparseParams(specs)
}

func (s DatasetSpec) validateLayout() error {
	if err := s.validateInner(); err != nil {
		return err
	}
	if s.Layout != Vlen && s.HeapDefragPercent != 0 {
		return fmt.Errorf("%w: HeapDefragPercent on a %v dataset", ErrInvalid, s.Layout)
	}
	switch s.Layout {
	case Chunked:
		if len(s.SelectionFilters) != 0 {
			return fmt.Errorf("%w: SelectionFilters on a %v dataset", ErrInvalid, s.Layout)
		}
	case Contiguous:
		if len(s.SelectionFilters) != 0 || len(s.Filters) != 0 {
			return fmt.Errorf("%w: a contiguous dataset has no filters", ErrInvalid)
		}
		if !equal(s.Shape, s.MaxShape) {
			return fmt.Errorf("%w: a contiguous dataset has a fixed shape (max shape %v, shape %v)", ErrInvalid, s.MaxShape, s.Shape)
		}
	case Vlen:
		if len(s.SelectionFilters) != 0 || len(s.Fill) != 0 {
			return fmt.Errorf("%w: a variable-length dataset has no selection filters and no fill value (its fill is the empty sequence)", ErrInvalid)
		}
		if s.HeapDefragPercent < 0 || s.HeapDefragPercent > 100 {
			return fmt.Errorf("%w: HeapDefragPercent %d (0..100)", ErrInvalid, s.HeapDefragPercent)
		}
		if n := prod64(s.Chunk); n > maxChunkBytes/8 {
			return fmt.Errorf("%w: a variable-length chunk of %d elements (at most %d: 8 bytes each in its fixed section)", ErrInvalid, n, maxChunkBytes/8)
		}
	case Sparse:
		if len(s.SelectionFilters) > 32 {
			return fmt.Errorf("%w: %d selection filters (at most 32)", ErrInvalid, len(s.SelectionFilters))
		}
		for _, f := range s.SelectionFilters {
			if err := f.spec.Validate(); err != nil {
				return classify(err)
			}
		}
	default:
		return fmt.Errorf("%w: layout %v", ErrInvalid, s.Layout)
	}
	return nil
}

// errWrongLayout refuses a call that belongs to other layouts than the
// dataset's (ErrInvalid); needLayouts says which call and which layouts.
var errWrongLayout = fmt.Errorf("%w: wrong layout", ErrInvalid)

// fixedLayouts are the layouts whose elements are fixed-size values:
// the ones Read, Write and ReadDefined move.
var fixedLayouts = []LayoutKind{Chunked, Sparse, Contiguous}

// readLayouts are the layouts Read serves: the fixed-size ones and the
// virtual layout, whose elements are its sources'.
var readLayouts = []LayoutKind{Chunked, Sparse, Contiguous, Virtual}

// needLayouts is the one place a call that only some layouts serve (call
// names it, want lists them) is refused on a dataset of another layout.
// A call whose doc gives it a meaning on every layout does not come here.
func needLayouts(s *dsState, call string, want ...LayoutKind) error {
	have := s.store.kind()
	if slices.Contains(want, have) {
		return nil
	}
	names := make([]string, len(want))
	for i, k := range want {
		names[i] = k.String()
	}
	list := names[len(names)-1]
	if len(names) > 1 {
		list = strings.Join(names[:len(names)-1], ", ") + " or " + list
	}
	return fmt.Errorf("%w: %s needs a %s dataset; %q is %v", errWrongLayout, call, list, s.name, have)
}

// asLayout returns the dataset's layout as L, if it is one.
func asLayout[L storage](s *dsState) (L, bool) {
	l, ok := s.store.(L)
	return l, ok
}

// needLayout is needLayouts for a call of the one layout L, which it
// returns.
func needLayout[L storage](s *dsState, call string) (L, error) {
	l, ok := asLayout[L](s)
	if !ok {
		return l, needLayouts(s, call, l.kind())
	}
	return l, nil
}

// errNoChunks refuses a call on a dataset whose layout keeps no chunks
// (a virtual dataset) that only means something for chunks.
var errNoChunks = fmt.Errorf("%w: the dataset keeps no chunks", ErrInvalid)

// chunks returns the dataset's layout as the chunked storage the cache
// drives; a virtual dataset has none (errNoChunks, naming the dataset and
// its layout).
func (s *dsState) chunks() (chunkedStorage, error) {
	if s.chunked == nil {
		return nil, fmt.Errorf("%w: %q is %v", errNoChunks, s.path(), s.store.kind())
	}
	return s.chunked, nil
}
