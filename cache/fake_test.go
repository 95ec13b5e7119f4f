package cache

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"sync/atomic"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/vfd"
)

// fakeLayout is a Layout for tests: one byte per element, chunks stored in
// a vfd driver as [magic][crc32][payload], an index map, a bump allocator
// (never reuses space), and counters for every callback.
type fakeLayout struct {
	cd    []uint64
	fill  byte
	slack int           // NewChunk/Decode allocate this much extra (for Condenser tests)
	next  *atomic.Int64 // shared allocator of the file

	mu    sync.Mutex
	index map[string]layout.Location

	lookups, decodes, encodes, inserts, trims atomic.Int64
	newFill, newNoFill, scatterFills, evicts  atomic.Int64
	failInsert                                atomic.Bool
	failDecode, failPublish                   atomic.Bool
	failEncode                                atomic.Bool
	publishes                                 atomic.Int64
	encodeHook                                func(layout.Coord) // called inside Encode (under the shared latch)
}

var errFake = errors.New("fake: injected")

const fakeMagic = 0x5343

func newFakeLayout(alloc *atomic.Int64, cd ...uint64) *fakeLayout {
	return &fakeLayout{cd: cd, next: alloc, index: map[string]layout.Location{}}
}

func (l *fakeLayout) chunkBytes() int64 {
	n := int64(1)
	for _, d := range l.cd {
		n *= int64(d)
	}
	return n
}

func ckey(c layout.Coord) string { return fmt.Sprint([]uint64(c)) }

type fakeChunk struct {
	b     []byte
	slack int // bytes a Condenser can give back
}

func (c *fakeChunk) MemSize() int64 { return int64(len(c.b) + c.slack) }

// fakePiece copies n bytes at chunk offset off to/from buf.
type fakePiece struct {
	off, n int
	buf    []byte
}

func (l *fakeLayout) ChunkDims() []uint64 { return l.cd }

func (l *fakeLayout) Lookup(_ context.Context, coords []layout.Coord, locs []layout.Location) error {
	l.lookups.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, c := range coords {
		loc := l.index[ckey(c)]
		loc.SizeHint = l.chunkBytes() + int64(l.slack)
		locs[i] = loc
	}
	return nil
}

func (l *fakeLayout) NewChunk(_ layout.Coord, fill bool) (layout.Chunk, error) {
	b := make([]byte, l.chunkBytes())
	if fill {
		l.newFill.Add(1)
		for i := range b {
			b[i] = l.fill
		}
	} else {
		l.newNoFill.Add(1)
		for i := range b {
			b[i] = 0xEE // garbage: a full overwrite must replace all of it
		}
	}
	return &fakeChunk{b: b, slack: l.slack}, nil
}

var errCorrupt = errors.New("fake: corrupt chunk")

func (l *fakeLayout) Decode(_ layout.Coord, _ layout.Location, img []byte) (layout.Chunk, error) {
	l.decodes.Add(1)
	if l.failDecode.Load() {
		return nil, errFake
	}
	if len(img) < 6 || binary.LittleEndian.Uint16(img) != fakeMagic {
		return nil, errCorrupt
	}
	p := img[6:]
	if crc32.ChecksumIEEE(p) != binary.LittleEndian.Uint32(img[2:]) || int64(len(p)) != l.chunkBytes() {
		return nil, errCorrupt
	}
	return &fakeChunk{b: append([]byte(nil), p...), slack: l.slack}, nil
}

func (l *fakeLayout) Encode(c layout.Coord, ch layout.Chunk) (layout.Encoded, error) {
	l.encodes.Add(1)
	if l.encodeHook != nil {
		l.encodeHook(c)
	}
	if l.failEncode.Load() {
		return layout.Encoded{}, errFake
	}
	b := ch.(*fakeChunk).b
	img := make([]byte, 6+len(b))
	binary.LittleEndian.PutUint16(img, fakeMagic)
	binary.LittleEndian.PutUint32(img[2:], crc32.ChecksumIEEE(b))
	copy(img[6:], b)
	return layout.Encoded{Image: img}, nil
}

func (l *fakeLayout) Insert(_ context.Context, ins []layout.Insertion) error {
	l.inserts.Add(1)
	if l.failInsert.Load() {
		return errFake
	}
	for i := range ins {
		addr := l.next.Add(ins[i].Size) - ins[i].Size
		ins[i].New = layout.Location{Addr: addr, Size: ins[i].Size, Mask: ins[i].Mask, SizeHint: l.chunkBytes()}
	}
	return nil
}

func (l *fakeLayout) Publish(_ context.Context, ins []layout.Insertion, writeErr error) error {
	l.publishes.Add(1)
	if writeErr != nil {
		return nil
	}
	if l.failPublish.Load() {
		return errFake
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range ins {
		l.index[ckey(ins[i].Coord)] = ins[i].New
	}
	return nil
}

func (l *fakeLayout) Scatter(ch layout.Chunk, p layout.Piece) error {
	fp := p.(*fakePiece)
	copy(fp.buf, ch.(*fakeChunk).b[fp.off:fp.off+fp.n])
	return nil
}

func (l *fakeLayout) ScatterFill(p layout.Piece) error {
	l.scatterFills.Add(1)
	fp := p.(*fakePiece)
	for i := 0; i < fp.n; i++ {
		fp.buf[i] = l.fill
	}
	return nil
}

func (l *fakeLayout) Gather(ch layout.Chunk, p layout.Piece) error {
	fp := p.(*fakePiece)
	copy(ch.(*fakeChunk).b[fp.off:fp.off+fp.n], fp.buf)
	return nil
}

// outside reports whether element i of chunk c lies outside dims.
func (l *fakeLayout) outside(c layout.Coord, i int, dims []uint64) bool {
	r := len(l.cd)
	for j := r - 1; j >= 0; j-- {
		local := uint64(i) % l.cd[j]
		i /= int(l.cd[j])
		if c[j]*l.cd[j]+local >= dims[j] {
			return true
		}
	}
	return false
}

func (l *fakeLayout) Trim(c layout.Coord, ch layout.Chunk, dims []uint64) (bool, error) {
	l.trims.Add(1)
	b := ch.(*fakeChunk).b
	changed := false
	for i := range b {
		if l.outside(c, i, dims) && b[i] != l.fill {
			b[i] = l.fill
			changed = true
		}
	}
	return changed, nil
}

func (l *fakeLayout) Evict(layout.Coord, layout.Chunk) { l.evicts.Add(1) }

// prune deletes stored chunks wholly outside dims: the engine's half of a
// shrink (see Dataset.SetExtent).
func (l *fakeLayout) prune(dims []uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.index {
		coord := parseKey(k)
		if whollyOutside(coord, l.cd, dims) {
			delete(l.index, k)
		}
	}
}

func parseKey(k string) layout.Coord {
	var c layout.Coord
	var v uint64
	n := 0
	for i := 1; i < len(k); i++ {
		ch := k[i]
		if ch >= '0' && ch <= '9' {
			v = v*10 + uint64(ch-'0')
			n++
			continue
		}
		if n > 0 {
			c = append(c, v)
		}
		v, n = 0, 0
	}
	return c
}

func (l *fakeLayout) stored(c layout.Coord) (layout.Location, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	loc, ok := l.index[ckey(c)]
	return loc, ok
}

// testDriver wraps a driver with switchable failures and call counts.
type testDriver struct {
	vfd.Driver
	failWrite, failSync, failRead atomic.Bool
	readVs, writeVs, syncs        atomic.Int64
	readExts                      atomic.Int64  // extents read by ReadV
	failReadAt                    atomic.Int64  // if > 0, the ReadV call of that number and later ones fail
	writeGate                     chan struct{} // if non-nil, WriteV waits for a token
}

var errDisk = errors.New("test: disk error")

func (d *testDriver) ReadV(e []vfd.Extent) error {
	n := d.readVs.Add(1)
	d.readExts.Add(int64(len(e)))
	if at := d.failReadAt.Load(); d.failRead.Load() || (at > 0 && n >= at) {
		return errDisk
	}
	return d.Driver.ReadV(e)
}

func (d *testDriver) WriteV(e []vfd.Extent) error {
	d.writeVs.Add(1)
	if d.writeGate != nil {
		<-d.writeGate
	}
	if d.failWrite.Load() {
		return errDisk
	}
	return d.Driver.WriteV(e)
}

func (d *testDriver) Sync() error {
	d.syncs.Add(1)
	if d.failSync.Load() {
		return errDisk
	}
	return d.Driver.Sync()
}

// condLayout is a fakeLayout whose chunks can give back their slack.
type condLayout struct{ *fakeLayout }

func (condLayout) Condense(_ layout.Coord, ch layout.Chunk) layout.Chunk {
	fc := ch.(*fakeChunk)
	return &fakeChunk{b: fc.b}
}
