package engine

import (
	"sync/atomic"

	"github.com/scc-dev/scc/cache/layout"
)

// Condense for the layouts whose chunks grow and shrink (SCC internal API
// H5SC_chunk_condense_t, layout.Condenser): the cache calls it, holding the
// chunk exclusively, before it evicts anything for space, and charges the
// returned chunk's MemSize instead. The contents stay the same; only slack
// capacity (and, for a heap, unused bytes) is given back. Dense and
// contiguous chunks are exactly sized pooled buffers and have nothing to
// give back.

var (
	_ layout.Condenser = (*sparseLayout)(nil)
	_ layout.Condenser = (*vlenLayout)(nil)
)

func clipRuns[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

func clipBytes(b []byte) []byte { return clipRuns(b) }

// testHookCondense, when set (tests only), runs at the start of a
// variable-length chunk's Condense, while the cache holds the chunk:
// TestRefreshDropsChunksBackgroundHolds holds it there across a Refresh.
var testHookCondense atomic.Pointer[func(*dsState)]
