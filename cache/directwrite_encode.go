package cache

import (
	"context"
	"fmt"

	"github.com/scc-dev/scc/cache/layout"
)

// Direct encodes: a write that covers a whole chunk of a filtered layout,
// which is not resident and which a read would not keep either, is
// encoded straight from the caller's buffer on the workers and written to
// newly allocated space, by the direct write's steps (directwrite.go:
// claim, Insert, one WriteV, Publish). No entry is made: the chunk costs
// the cache neither a copy nor a dirty entry that waits for eviction or
// Flush to be encoded. It is the write side's mirror of the direct decode
// (directdecode.go), under the same rule (goesDirect): above the bypass
// threshold, or once admitting the chunk would take the resident bytes
// past the quiescent limit (always, with Config.AdmitOnReread), unless
// the chunk was accessed recently. A chunk kept is dirty, and a rewrite
// of it costs a copy.
//
// What the cached path guarantees holds here too, by the direct write's
// own steps: overlapping requests are ordered by the engine's serializer;
// only a chunk missing from the table goes directly, and it is claimed
// (a placeholder in the loading state) until its image is published, so
// no resident copy, clean or dirty, can exist meanwhile and a concurrent
// request for it waits and then sees the new image; Insert allocates new
// space (copy on write: nothing a commit names is overwritten, and the
// image is named by the index only from the next commit on); Publish
// names the image only after its bytes are written. An encode error
// fails the write before anything is allocated, an Insert or write error
// publishes nothing (the new space is freed): the chunk keeps its
// previous image, and the error reaches the caller.
//
// Memory. The images are the only memory a direct encode adds, and they
// are bounded: each holds one of Config.Workers tokens (Cache.writer.encodes)
// from before its encode until its write returns, so at most
// Config.Workers of them are in flight however many requests write
// (Stats.EncodingBytes counts them; a write of more chunks than that goes
// in rounds, each one vector write). For a round trip, R requests at once
// each reading one whole chunk of a dataset into a buffer of its own and
// writing it whole to another dataset, the cache's memory is at most
//
//	Q + P + max(R×(C+E) + W×E, ⌈(A/8)/C⌉×E)
//
// with Q the quiescent limit, A the active limit, P Config.PreEncodeBytes
// (kept images of dirty chunks, which the pre-encoder charges up to the
// active limit), C a chunk's size in memory (Location.SizeHint), E the
// buffer of one chunk's encoded or stored image, W Config.Workers. Both
// halves admit a chunk only while it fits under Q, or when it was accessed
// within the last Q bytes of misses (goesDirect), which a copy touching
// each chunk once never is, and R requests passing that check at once
// take the resident bytes at most R chunks past it (R×C); every other chunk is decoded into, or encoded
// from, the caller's buffer: a direct decode holds the stored image it
// reads until decoded (at most 2×(W+1) images and two read batches per
// request, directdecode.go), a direct encode its image
// until written (at most W at once). The Flush that ends the copy writes
// the dirty chunks (at most Q of them) in rounds of at most A/8 bytes of
// chunks (writeBackRounds), whose images take the second term. Stats
// shows ResidentBytes and EncodingBytes (images not yet written, direct
// and write-back), not the images read for direct decodes. The layout's
// own scratch while it encodes or decodes (a shuffle buffer, the codec's
// state) is not the cache's and comes on top, one per running encode or
// decode. Without the direct encode, whole chunks written into a full
// cache were created dirty, piled up to A and were encoded only at
// eviction or Flush (engine TestRoundTripMemoryBound holds the bound).

// writeEncoded writes claimed groups of one dataset that go by direct
// encode, in rounds of as many chunks as encode tokens are free (at least
// one): encode on the workers, then Insert, one WriteV and Publish
// (writeDirectDS). A failed round stops the write: the rounds before it
// are written and published, its chunks and the later ones are as they
// were (Cache.Write: each chunk holds all of its pieces or none).
func (w *writer) writeEncoded(ctx context.Context, gs []*group, srcs []directSource) error {
	for len(gs) > 0 {
		n, err := w.takeEncodeTokens(ctx, len(gs))
		if err != nil {
			return err
		}
		err = w.encodeRoundDirect(ctx, gs[:n], srcs[:n])
		w.giveEncodeTokens(n)
		if err != nil {
			return err
		}
		gs, srcs = gs[n:], srcs[n:]
	}
	return nil
}

// encodeRoundDirect encodes gs from the caller's bytes (srcs[i] is
// gs[i]'s) on the workers and writes them (writeDirectDS). Every image is
// given back before it returns, on every path.
func (w *writer) encodeRoundDirect(ctx context.Context, gs []*group, srcs []directSource) error {
	enc := make([]layout.Encoded, len(gs))
	held := make([]int64, len(gs))
	defer func() {
		for i := range enc {
			w.encoding.Add(-held[i])
			releaseImage(enc[i])
		}
	}()
	de := gs[0].d.lay().l.(layout.DirectEncoder)
	err := w.workers.run(ctx, len(gs), func(i int) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: EncodeFrom: %v", ErrPanic, r)
			}
		}()
		g := gs[i]
		e, err := de.EncodeFrom(g.coord, srcs[i].src)
		if err != nil {
			releaseImage(e)
			return fmt.Errorf("cache: encoding chunk %v directly: %w", g.coord, err)
		}
		enc[i], held[i] = e, int64(cap(e.Image))
		w.noteEncoding(w.encoding.Add(held[i]))
		return nil
	})
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	sc := directScratchPool.Get().(*directScratch)
	defer sc.put()
	for i, g := range gs {
		sc.ins = append(sc.ins, layout.Insertion{Coord: g.coord, Old: g.loc, Size: int64(len(enc[i].Image)), Mask: enc[i].Mask, Sum: enc[i].Sum})
		sc.parts = append(sc.parts, enc[i].Image)
	}
	if err := writeDirectDS(ctx, w.stats, gs, sc.ins, sc.parts, 1, sc, nil); err != nil {
		return err
	}
	w.stats.directEncodes.Add(int64(len(gs)))
	return nil
}

// takeEncodeTokens takes between 1 and want encode tokens and returns how
// many: it waits for the first and takes more only while they are free,
// so a request never holds some while it waits for others (two requests
// each holding part of what they want would wait for each other).
func (w *writer) takeEncodeTokens(ctx context.Context, want int) (int, error) {
	select {
	case w.encodes <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	n := 1
	for n < want {
		select {
		case w.encodes <- struct{}{}:
			n++
		default:
			return n, nil
		}
	}
	return n, nil
}

func (w *writer) giveEncodeTokens(n int) {
	for range n {
		<-w.encodes
	}
}
