package engine

import (
	"fmt"

	"github.com/scc-dev/scc/engine/internal/format"
)

// Dataspaces other than the simple n-dimensional one, as HDF5 has them: a
// scalar dataset holds one element and has no dimensions (shape []), a
// null dataset holds no element at all (HDF5's empty placeholders,
// h5py.Empty). Both are stored as a rank-1 dataset of their element count
// (one; zero) with a chunk of one element, so that every layout, the
// cache, Check and Refresh keep working on that storage unchanged; the
// header's dataspace part says which it is (FORMAT.md §6), and the
// dataset's public faces show no dimensions: Shape, MaxShape and Chunk
// are empty, selections are of rank 0 (All(nil), Box(nil, nil)), and the
// extent never changes. The raw chunk calls (ChunkGrid, ReadChunkRaw...)
// address the storage: one chunk at coordinates [0] for a scalar, none
// for a null dataset.

// Space is a dataset's dataspace kind.
type Space uint8

const (
	// SpaceSimple is the n-dimensional dataspace of rank 1..32.
	SpaceSimple Space = Space(format.SpaceSimple)
	// SpaceScalar is one element without dimensions (HDF5's H5S_SCALAR,
	// numpy's shape ()).
	SpaceScalar Space = Space(format.SpaceScalar)
	// SpaceNull is no element (HDF5's H5S_NULL): reads and writes of its
	// rank-0 selection move nothing.
	SpaceNull Space = Space(format.SpaceNull)
)

func (s Space) String() string {
	switch s {
	case SpaceSimple:
		return "simple"
	case SpaceScalar:
		return "scalar"
	case SpaceNull:
		return "null"
	}
	return fmt.Sprintf("space(%d)", uint8(s))
}

// withSpace resolves a spec's dataspace: a spec of rank 0 is scalar unless
// it says null, and a scalar or null spec becomes its storage (shape [1]
// or [0], chunk [1]).
func (s DatasetSpec) withSpace() (DatasetSpec, error) {
	if s.Space == SpaceSimple && len(s.Shape) != 0 {
		return s, nil
	}
	if s.Space == SpaceSimple {
		s.Space = SpaceScalar
	}
	switch {
	case s.Space != SpaceScalar && s.Space != SpaceNull:
		return s, fmt.Errorf("%w: dataspace %v", ErrInvalid, s.Space)
	case len(s.Shape) != 0 || len(s.MaxShape) != 0 || len(s.Chunk) != 0:
		return s, fmt.Errorf("%w: a %v dataset has no shape, max shape or chunk (got %v, %v, %v)", ErrInvalid, s.Space, s.Shape, s.MaxShape, s.Chunk)
	}
	n := uint64(1)
	if s.Space == SpaceNull {
		n = 0
	}
	s.Shape, s.MaxShape = []uint64{n}, []uint64{n}
	if s.Layout != Contiguous {
		s.Chunk = []uint64{1}
	}
	return s, nil
}

// fit maps a caller's selection onto the dataset's storage: for a scalar
// or null dataset, the rank-0 selection becomes its one element (none). A
// selection of the storage's rank is taken as it is (so a selection fit
// once fits again unchanged, and the raw chunk view stays usable); other
// ranks are refused later as for any dataset. A simple dataset's
// selection is its own.
func (s *dsState) fit(sel Selection) Selection {
	if s.space == SpaceSimple || len(sel.Shape()) != 0 {
		return sel
	}
	if s.space == SpaceNull {
		return Box([]uint64{0}, []uint64{0})
	}
	return Box([]uint64{0}, []uint64{1})
}

// Space reports the dataset's dataspace.
func (d *Dataset) Space() Space { return d.s.space }

// dims is what the dataset shows of storage dimensions v: v itself for a
// simple dataset, none for a scalar or null one.
func (s *dsState) dims(v []uint64) []uint64 {
	if s.space != SpaceSimple {
		return []uint64{}
	}
	return clone(v)
}
