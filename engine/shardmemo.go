package engine

import (
	"context"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/engine/internal/shard"
	"github.com/scc-dev/scc/internal/bufpool"
)

// shardMemo is what a resident sharded chunk remembers of its stored
// versions, so that every write-back of it, not only the first, encodes
// just the inner chunks written since the last one and copies the others'
// frames as stored: a write of a few elements of a large chunk, flushed,
// costs the encode of the inner chunks it touched, however many times the
// chunk is written and flushed while it stays resident.
//
// It holds a base, the stored version whose frames a write-back copies
// (its place: loc), which inner chunks writes (Gather) changed since
// (changed), and the encodes made since whose images may become the next
// base (pending). The chunk's decode sets the base to the version decoded;
// the cache reports each committed write-back image (layout.Committer),
// and its encode's version becomes the base, with the inner chunks written
// since that encode as the changed ones. The stored image is not kept in
// memory: the cache's budget counts decoded chunks, and the copy is one
// read at write-back (shardState.reuse), checked again.
//
// Why a copied frame is never stale: an inner chunk the memo does not mark
// holds in the chunk what it holds in the base, because every write goes
// through Gather, which marks it here and in every pending encode, and
// changed is cleared only by a commit, to the marks made since the
// committed image was encoded (encodes and commits of a chunk exclude its
// writes: the cache holds its latch). A write-back that fails, or whose
// image is superseded or never written, is never reported: the base stays,
// and its marks keep gathering the union of every write since. The base
// stays the version the index names, so its place is not given back: a
// commit the memo cannot place (an encode it no longer follows) drops the
// base, and so does, for every chunk of the dataset, a Publish that failed
// after the images were written (shardLayout.Publish: it may have named
// some of them in the index unreported), so that the next write-back of
// each encodes whole. The image read from the base's place is still used
// only when its trailer is the base's and its index decodes, and a frame
// only when it verifies as that inner chunk of that chunk; whatever fails
// is encoded from the chunk.
//
// What changes a chunk other than Gather drops the memo: a Trim (which may
// change any inner chunk), and everything that replaces the stored chunk
// under the cache (a raw chunk write, a follower's refresh, a delete, a
// shrink past the chunk) drops the resident chunk and its memo with it.
type shardMemo struct {
	loc layout.Location // the base; Size 0: none, the chunk is encoded whole
	mu  sync.Mutex
	// lost is shardState.lost when the base was set: a base set before a
	// failed Publish is not used.
	lost uint64
	// changed has bit i set when inner chunk i was written since the
	// base (one bit each: a chunk holds up to shard.MaxInner); nil when
	// none was.
	changed []uint64
	// pending are the encodes not yet reported committed, oldest first,
	// at most maxPendingEncodes.
	pending []pendingEncode
}

// pendingEncode is an encode whose image may be committed: its tag
// (layout.Encoded.Tag) and the inner chunks written since it began.
type pendingEncode struct {
	tag   uint64
	since []uint64
}

// maxPendingEncodes bounds the encodes a memo follows. The cache has at
// most one write-back of a chunk in flight, beside a kept image encoded
// ahead of it (cache/preencode.go) and images made for a cache image;
// the commit of one forgotten only costs the next write-back a whole
// encode.
const maxPendingEncodes = 4

// shardReuse switches the copying of unchanged inner chunks on
// (BenchmarkShardWriteFlush turns it off for the whole-chunk baseline).
var shardReuse = true

// shardTags numbers encodes (layout.Encoded.Tag); 0 is none.
var shardTags atomic.Uint64

// markInner sets the bits of touched in b, a bitset of n bits (allocated if
// nil), and returns it.
func markInner(b []uint64, touched []int, n int) []uint64 {
	if b == nil {
		b = make([]uint64, (n+63)/64)
	}
	for _, i := range touched {
		b[i/64] |= 1 << (i % 64)
	}
	return b
}

// change marks the inner chunks a write touched, of n.
func (m *shardMemo) change(touched []int, n int) {
	if len(touched) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.changed = markInner(m.changed, touched, n)
	for k := range m.pending {
		m.pending[k].since = markInner(m.pending[k].since, touched, n)
	}
}

// begin starts following an encode of the chunk's current contents: it
// returns the encode's tag, the base (none if set before the dataset's
// failed Publish numbered lost) and the inner chunks changed since (a
// copy).
func (m *shardMemo) begin(lost uint64) (tag uint64, base layout.Location, changed []uint64) {
	tag = shardTags.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.pending) == maxPendingEncodes {
		m.pending = slices.Delete(m.pending, 0, 1)
	}
	m.pending = append(m.pending, pendingEncode{tag: tag})
	if m.lost != lost {
		return tag, layout.Location{}, nil
	}
	return tag, m.loc, slices.Clone(m.changed)
}

// forget stops following an encode that failed.
func (m *shardMemo) forget(tag uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending = slices.DeleteFunc(m.pending, func(p pendingEncode) bool { return p.tag == tag })
}

// commit makes the version encoded as tag, now stored at loc, the base,
// as of the dataset's failed Publishes numbered lost. The encodes begun
// before it are over (the cache publishes a chunk's versions in the order
// they were encoded). A tag the memo does not follow drops the base: the
// index no longer names it, and what was written since is not known.
func (m *shardMemo) commit(tag uint64, loc layout.Location, lost uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := slices.IndexFunc(m.pending, func(p pendingEncode) bool { return p.tag == tag })
	if tag == 0 || k < 0 {
		m.loc, m.changed = layout.Location{}, nil
		return
	}
	m.loc, m.changed, m.lost = loc, m.pending[k].since, lost
	m.pending = slices.Clone(m.pending[k+1:])
}

// Committed is the layout.Committer of a sharded dataset: the chunk's
// memo takes the committed version as its base.
func (l *shardLayout) Committed(_ layout.Coord, chunk layout.Chunk, enc layout.Encoded, loc layout.Location) {
	c, ok := chunk.(*denseChunk)
	if !ok {
		return
	}
	if m := c.shard.Load(); m != nil {
		m.commit(enc.Tag, loc, l.sh.lost.Load())
	}
}

var _ layout.Committer = (*shardLayout)(nil)

// Publish is the dense Publish, noting a failure after the images were
// written (shardState.lost): the index may then name some of them, which
// the cache does not report, and the places of the versions the memos
// name may be given back.
func (l *shardLayout) Publish(ctx context.Context, ins []layout.Insertion, writeErr error) error {
	err := l.denseLayout.Publish(ctx, ins, writeErr)
	if err != nil && writeErr == nil {
		l.sh.lost.Add(1)
	}
	return err
}

// memo returns the chunk's memo, made (without a base) if it has none.
// Concurrent encodes (a write-back's and one ahead of it) may both make
// one: one wins.
func (c *denseChunk) memo() *shardMemo {
	if m := c.shard.Load(); m != nil {
		return m
	}
	m := &shardMemo{}
	if c.shard.CompareAndSwap(nil, m) {
		return m
	}
	return c.shard.Load()
}

// reuse returns what a write-back may copy as stored: the stored image of
// base, read and checked again (its trailer is the one base names, its
// index decodes), and the inner chunks changed since. nil when there is
// no base or every inner chunk changed, or when the stored image cannot
// be had: the chunk is then encoded whole, which is always right. The
// image is a pooled buffer the caller gives back.
func (sh *shardState) reuse(coord layout.Coord, base layout.Location, changed []uint64) *shard.Reuse {
	if !shardReuse {
		return nil
	}
	n := 0
	for _, w := range changed {
		n += bits.OnesCount64(w)
	}
	if n == sh.codec.Grid.N() || base.Size <= 0 || base.Size > sh.codec.MaxStored() {
		return nil
	}
	img := bufpool.GetFull(int(base.Size))
	if readFull(sh.s.f.drv, img, base.Addr) != nil || format.Trailer(img) != base.Sum {
		bufpool.Put(img)
		return nil
	}
	k := sh.codec.IndexSize()
	es, err := sh.codec.OpenIndex(coord, img[len(img)-k:], int64(len(img)))
	if err != nil {
		bufpool.Put(img)
		return nil
	}
	return &shard.Reuse{Image: img, Es: es, Changed: func(i int) bool {
		return i/64 < len(changed) && changed[i/64]&(1<<(i%64)) != 0
	}}
}

// encode is the dense Encode of a sharded chunk: the inner chunks on
// every core, and only those written since the chunk's base (shardMemo).
// The image's tag lets the memo learn when it is committed.
func (sh *shardState) encode(coord layout.Coord, c *denseChunk) (layout.Encoded, error) {
	m := c.memo()
	tag, base, changed := m.begin(sh.lost.Load())
	r := sh.reuse(coord, base, changed)
	if r != nil {
		defer bufpool.Put(r.Image)
	}
	img, err := sh.codec.EncodeReusing(context.Background(), sh.pool(), coord, c.buf, r)
	if err != nil {
		m.forget(tag)
		return layout.Encoded{}, sh.errName(coord, err)
	}
	return layout.Encoded{Image: img, Sum: format.Trailer(img), Pooled: true, Tag: tag}, nil
}
