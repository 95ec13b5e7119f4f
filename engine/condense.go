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

// Condense reallocates a sparse chunk's runs and values to their lengths.
func (l *sparseLayout) Condense(_ layout.Coord, chunk layout.Chunk) layout.Chunk {
	c, ok := chunk.(*sparseChunk)
	if !ok || cap(c.runs) == len(c.runs) && cap(c.data) == len(c.data) {
		return nil
	}
	return &sparseChunk{runs: clipRuns(c.runs), data: clipBytes(c.data), gen: c.gen}
}

// Condense defragments a variable-length chunk's heap and drops its slack.
func (l *vlenLayout) Condense(_ layout.Coord, chunk layout.Chunk) layout.Chunk {
	if h := testHookCondense.Load(); h != nil {
		(*h)(l.s)
	}
	c, ok := chunk.(*vlenChunk)
	if !ok || c.garbage == 0 && cap(c.heap) == len(c.heap) {
		return nil
	}
	n := &vlenChunk{off: c.off, ln: c.ln, heap: c.heap, garbage: c.garbage}
	if n.garbage > 0 {
		// compact rewrites off in place: give the new chunk its own copy
		// so the old one, which the cache drops, stays consistent.
		n.off = append([]uint32(nil), c.off...)
		l.compact(n)
	} else {
		n.heap = clipBytes(c.heap)
	}
	return n
}

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
