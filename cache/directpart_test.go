package cache

import (
	"bytes"
	"errors"
	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/internal/bufpool"
	"hash/crc32"
	"sync/atomic"
	"testing"
)

// partLayout is a fakeLayout whose stored chunk is read in part: the
// blocks are [16 i, 16 i + 16) of the payload (after the 6-byte header),
// each checked against a CRC32 the test keeps (sums, by block offset).
// blocks, when set, replaces the blocks PartBlocks returns.
type partLayout struct {
	*fakeLayout
	sums   map[int64]uint32
	blocks func(loc layout.Location) []layout.Block
	reads  atomic.Int64
}

var _ layout.PartReader = (*partLayout)(nil)

func (l *partLayout) PartBlocks(_ layout.Coord, loc layout.Location, pieces []layout.Piece) ([]layout.Block, bool) {
	if l.blocks != nil {
		return l.blocks(loc), true
	}
	lo, hi := int(loc.Size), 0
	for _, p := range pieces {
		fp := p.(*fakePiece)
		lo, hi = min(lo, fp.off), max(hi, fp.off+fp.n)
	}
	var bs []layout.Block
	for b := lo / 16 * 16; b < hi; b += 16 {
		bs = append(bs, layout.Block{Off: 6 + int64(b), Len: 16})
	}
	return bs, true
}

func (l *partLayout) ReadPart(_ layout.Coord, _ layout.Location, pieces []layout.Piece, blocks []layout.Block, bufs [][]byte) error {
	l.reads.Add(1)
	for i, b := range blocks {
		if crc32.ChecksumIEEE(bufs[i]) != l.sums[b.Off] {
			return errCorrupt
		}
	}
	for _, p := range pieces {
		fp := p.(*fakePiece)
		for k := 0; k < fp.n; k++ {
			at := int64(6 + fp.off + k)
			for i, b := range blocks {
				if at >= b.Off && at < b.Off+b.Len {
					fp.buf[k] = bufs[i][at-b.Off]
				}
			}
		}
	}
	for _, b := range bufs {
		bufpool.Put(b)
	}
	return nil
}

// TestPartReader: a read of part of a chunk above the bypass threshold
// that is not resident reads only the blocks the layout names (one vector
// read, nothing loaded) and the layout's verdict on them stands; blocks
// outside the image, overlapping or empty send the read down the cached
// path; below the threshold the cached path runs.
func TestPartReader(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 10}) // bypass 256 B
	l := &partLayout{fakeLayout: newFakeLayout(&e.alloc, 16, 32), sums: map[int64]uint32{}}
	d, err := e.f.RegisterDataset(1, l, DatasetOptions{MinBytes: -1})
	must(t, err)
	a := pattern(512, 5)
	must(t, e.c.Write(bg, []Request{fullReq(d, l.fakeLayout, a, 0, 0)}))
	must(t, e.c.Flush(bg))
	for off := int64(0); off < 512; off += 16 {
		l.sums[6+off] = crc32.ChecksumIEEE(a[off : off+16])
	}
	read := func(off, n int) []byte {
		t.Helper()
		got := make([]byte, n)
		must(t, e.c.Read(bg, []Request{partReq(d, off, got, 0, 0)}))
		if !bytes.Equal(got, a[off:off+n]) {
			t.Fatalf("read [%d,%d) differs", off, off+n)
		}
		return got
	}
	before, bytesBefore := e.c.Stats(), e.c.Stats().VectorReadBytes
	read(40, 30) // blocks 32..80: three of them
	st := e.c.Stats()
	if st.Loads != before.Loads || st.VectorReads != before.VectorReads+1 || l.reads.Load() != 1 {
		t.Fatalf("part read: %d loads, %d vector reads, %d ReadPart", st.Loads-before.Loads, st.VectorReads-before.VectorReads, l.reads.Load())
	}
	if n := e.c.Stats().VectorReadBytes - bytesBefore; n != 48 {
		t.Fatalf("part read of three 16-byte blocks read %d bytes", n)
	}
	// The layout's verdict stands: a block that does not match fails the read.
	l.sums[6+48] ^= 1
	got := make([]byte, 10)
	if err := e.c.Read(bg, []Request{partReq(d, 50, got, 0, 0)}); !errors.Is(err, errCorrupt) {
		t.Fatalf("damaged block: %v", err)
	}
	l.sums[6+48] ^= 1
	// Blocks the cache must refuse: the cached path serves the read.
	for name, bs := range map[string]func(layout.Location) []layout.Block{
		"past the end": func(loc layout.Location) []layout.Block { return []layout.Block{{Off: loc.Size - 8, Len: 16}} },
		"overlapping":  func(layout.Location) []layout.Block { return []layout.Block{{Off: 6, Len: 16}, {Off: 10, Len: 16}} },
		"empty":        func(layout.Location) []layout.Block { return []layout.Block{{Off: 6, Len: 0}} },
		"negative":     func(layout.Location) []layout.Block { return []layout.Block{{Off: -6, Len: 16}} },
	} {
		l.blocks = bs
		reads, loads := l.reads.Load(), e.c.Stats().Loads
		read(0, 16)
		if l.reads.Load() != reads || e.c.Stats().Loads == loads {
			t.Fatalf("%s blocks: ReadPart ran or nothing was loaded", name)
		}
	}
	l.blocks = nil
	// Under the bypass threshold the cache keeps the chunk: loaded once,
	// then hits.
	cfg := e.c.Config()
	cfg.BypassBytes = 4096
	must(t, e.c.SetConfig(bg, cfg))
	reads, loads := l.reads.Load(), e.c.Stats().Loads
	read(100, 20)
	read(200, 20)
	if l.reads.Load() != reads || e.c.Stats().Loads != loads+1 {
		t.Fatalf("under the threshold: %d ReadPart, %d loads", l.reads.Load()-reads, e.c.Stats().Loads-loads)
	}
}
