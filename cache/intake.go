package cache

import (
	"math"

	"github.com/scc-dev/scc/cache/layout"
)

// intake decides which missing chunks the cache takes in and which it
// serves past itself: a read decodes a chunk straight into the caller's
// buffer (directdecode.go) and a write of a whole chunk goes straight to
// the file (directwrite.go, directwrite_encode.go) when the cache would
// keep it only by evicting something, unless the chunk was accessed
// recently. It owns the memory of recent accesses (rereads.go) and the
// settings of the rule; it reads the resident bytes from the budget. No
// lock.
type intake struct {
	// rereads remembers recently missed chunks, which a full cache (or
	// one with Config.AdmitOnReread) keeps when read again.
	rereads *rereadFilter
	// admitOnReread is Config.AdmitOnReread; directWriteBytes is
	// Config.DirectWriteBytes.
	admitOnReread    bool
	directWriteBytes int64
	budget           *budget
}

// goesDirect is the rule above for g, a chunk of n bytes in memory (its
// size hint) that is not resident, cached being what other chunks of the
// same request will add on the cached path. It is the one rule for both
// halves of a round trip: a read decodes g directly (decodeDirect) and a
// write of the whole of a filtered g encodes it from the caller's buffer
// (sourceOf) exactly when it holds, so that the two agree on when
// the cache is full and on which chunks it takes in. It remembers the
// access (rereads.go), so call it once per chunk and request.
func (t *intake) goesDirect(sz *sizing, g *group, n, cached int64) bool {
	if sz.bypass == math.MaxInt64 {
		return false
	}
	if n > sz.bypass {
		return true
	}
	// Every miss is remembered, so that a chunk accessed again once the
	// cache is full is kept (evicting another) rather than decoded or
	// encoded again and again: without it a full cache would never take
	// in a new working set.
	again := t.rereads.missedBefore(g.key, n, sz.quiescent)
	if t.budget.resident.Load()+cached+n > sz.quiescent || t.admitOnReread {
		return !again
	}
	return false
}

// sourceOf returns the caller's bytes of g if g goes directly: one
// request covers the whole chunk, and either the layout frames the bytes
// as they are (DirectWriter) and worthIt holds, or it encodes them
// (DirectEncoder) and the read side's rule holds (goesDirect): a filtered
// chunk goes direct exactly when a read of it would be decoded without
// being kept, so that the two halves of a round trip agree on when the
// cache is full. A whole chunk written again soon (rereads.go) is kept
// dirty, so that rewrites of it cost a copy rather than an encode each.
// cached is what the groups before g left to the cached path.
func (t *intake) sourceOf(sz *sizing, reqs []Request, g *group, cached int64) (directSource, bool) {
	if !g.full || len(g.reqs) != 1 {
		return directSource{}, false
	}
	l, p := g.d.lay().l, reqs[g.reqs[0]].Piece
	if dw, ok := l.(layout.DirectWriter); ok && t.worthIt(sz, g.hint(), cached) {
		if src, ok := dw.DirectSource(g.coord, p); ok && len(src) > 0 {
			return directSource{src: src}, true
		}
	}
	if de, ok := l.(layout.DirectEncoder); ok && t.goesDirect(sz, g, g.hint(), cached) {
		if src, ok := de.EncodeSource(g.coord, p); ok && len(src) > 0 {
			return directSource{src: src, encode: true}, true
		}
	}
	return directSource{}, false
}

// worthIt is the rule's size test for a whole unfiltered chunk of n
// bytes (its size hint) that is not resident, cached being what other
// chunks of the same write will add on the cached path: the chunk is above
// the bypass threshold, at least Config.DirectWriteBytes, or admitting it
// would take the resident bytes past the quiescent limit. Bytes above that
// limit are only ever held for a while: the reservation evicts past the
// active limit and the background trim evicts back to the quiescent limit
// as soon as no request runs, so a chunk admitted there displaces another
// (or itself) soon, and copying it into the cache buys nothing that
// writing it now does not. A chunk below DirectWriteBytes written into a
// cache with room stays cached (a small hot chunk rewritten again and
// again costs a copy each time and one write at the end); a stream of
// whole chunks larger than the cache fills it to the quiescent limit and
// then goes straight to the file instead of thrashing it. BypassBytes -1
// turns direct writes off with the bypass.
func (t *intake) worthIt(sz *sizing, n, cached int64) bool {
	if sz.bypass == math.MaxInt64 {
		return false
	}
	if n > sz.bypass {
		return true
	}
	if m := t.directWriteBytes; m > 0 && n >= m {
		return true
	}
	return t.budget.resident.Load()+cached+n > sz.quiescent
}
