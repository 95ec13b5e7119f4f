package cache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/scc-dev/scc/cache/layout"
)

// directLayout is a fakeLayout that offers direct writes: its frame is
// [magic][crc32][payload], so the header comes from a side buffer and the
// payload is the caller's bytes.
type directLayout struct{ *fakeLayout }

var _ layout.DirectWriter = directLayout{}

func (l directLayout) DirectSource(_ layout.Coord, p layout.Piece) ([]byte, bool) {
	fp := p.(*fakePiece)
	if fp.off != 0 || int64(fp.n) != l.chunkBytes() {
		return nil, false
	}
	return fp.buf[:fp.n], true
}

func (l directLayout) DirectFrame(_ layout.Coord, src []byte) (head, tail []byte, sum uint32) {
	head = make([]byte, 6)
	binary.LittleEndian.PutUint16(head, fakeMagic)
	binary.LittleEndian.PutUint32(head[2:], crc32.ChecksumIEEE(src))
	return head, nil, 0
}

func (e *env) directDataset(id uint64, cd ...uint64) (*Dataset, *fakeLayout) {
	e.t.Helper()
	l := newFakeLayout(&e.alloc, cd...)
	d, err := e.f.RegisterDataset(id, directLayout{l}, DatasetOptions{MinBytes: -1})
	if err != nil {
		e.t.Fatal(err)
	}
	return d, l
}

// A whole-chunk write above the bypass threshold goes direct: one WriteV,
// nothing created or resident, the frame header from a side buffer (the
// layout's Decode verifies it on the next load). Below the threshold, or
// partial, the cached path runs.
func TestDirectWriteFakeLayout(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 10}) // bypass 256 B
	d, l := e.directDataset(1, 16, 32)              // 512 B chunks
	a := pattern(512, 3)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, a, 0, 0)}))
	st := e.c.Stats()
	if st.DirectWrites != 1 || st.Creates != 0 || st.Chunks != 0 || e.drv.writeVs.Load() != 1 || l.newNoFill.Load() != 0 || l.encodes.Load() != 0 {
		t.Fatalf("direct: %d direct, %d creates, %d resident, %d WriteV, %d encodes", st.DirectWrites, st.Creates, st.Chunks, e.drv.writeVs.Load(), l.encodes.Load())
	}
	got := make([]byte, 512)
	must(t, e.c.Read(bg, []Request{fullReq(d, l, got, 0, 0)}))
	if !bytes.Equal(got, a) || l.decodes.Load() != 1 {
		t.Fatalf("read back: equal %v, %d decodes", bytes.Equal(got, a), l.decodes.Load())
	}
	// Partial: the bypass path.
	must(t, e.c.Write(bg, []Request{partReq(d, 5, []byte{1, 2}, 0, 0)}))
	if st := e.c.Stats(); st.DirectWrites != 1 || st.Bypasses < 1 {
		t.Fatalf("partial write: %d direct, %d bypasses", st.DirectWrites, st.Bypasses)
	}
	copy(a[5:], []byte{1, 2})
	must(t, e.c.Read(bg, []Request{fullReq(d, l, got, 0, 0)}))
	if !bytes.Equal(got, a) {
		t.Fatal("partial write after direct write lost")
	}
	// A dirty resident copy (written while the bypass threshold was
	// higher) wins: the whole write goes through it, and the flush writes
	// it.
	must(t, e.c.SetConfig(bg, Config{QuiescentBytes: 1 << 10, BypassBytes: 1 << 10}))
	must(t, e.c.Write(bg, []Request{partReq(d, 0, []byte{7}, 1, 0)}))
	must(t, e.c.SetConfig(bg, Config{QuiescentBytes: 1 << 10}))
	if st := e.c.Stats(); st.Chunks != 1 || st.DirtyBytes == 0 {
		t.Fatalf("dirty copy not kept: %d chunks, %d dirty", st.Chunks, st.DirtyBytes)
	}
	b := pattern(512, 9)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, b, 1, 0)}))
	if st := e.c.Stats(); st.DirectWrites != 1 {
		t.Fatal("a whole write over a dirty resident copy went direct")
	}
	must(t, e.f.Flush(bg))
	must(t, e.c.Read(bg, []Request{fullReq(d, l, got, 1, 0)}))
	if !bytes.Equal(got, b) {
		t.Fatal("whole write over the dirty copy lost")
	}
	// Several chunks in one request: one WriteV.
	w0 := e.drv.writeVs.Load()
	c2, c3 := pattern(512, 20), pattern(512, 30)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, c2, 2, 0), fullReq(d, l, c3, 3, 0)}))
	if n := e.drv.writeVs.Load() - w0; n != 1 || e.c.Stats().DirectWrites != 3 {
		t.Fatalf("two chunks: %d WriteV, %d direct", n, e.c.Stats().DirectWrites)
	}
	// Off by config: bypassed.
	e2 := newEnv(t, Config{QuiescentBytes: 1 << 10, NoDirectWrites: true})
	d2, l2 := e2.directDataset(1, 16, 32)
	must(t, e2.c.Write(bg, []Request{fullReq(d2, l2, a, 0, 0)}))
	if st := e2.c.Stats(); st.DirectWrites != 0 || st.Bypasses != 1 {
		t.Fatalf("NoDirectWrites: %d direct, %d bypasses", st.DirectWrites, st.Bypasses)
	}
}

// A failed direct write (Insert or WriteV) returns the error and publishes
// nothing: the index keeps the old image, reads see the old bytes.
func TestDirectWriteFailure(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 10})
	d, l := e.directDataset(1, 16, 32)
	old := pattern(512, 1)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, old, 0, 0)}))
	loc, _ := l.stored(layout.Coord{0, 0})
	e.drv.failWrite.Store(true)
	if err := e.c.Write(bg, []Request{fullReq(d, l, pattern(512, 2), 0, 0)}); !errors.Is(err, errDisk) {
		t.Fatalf("WriteV failure: %v", err)
	}
	e.drv.failWrite.Store(false)
	l.failInsert.Store(true)
	if err := e.c.Write(bg, []Request{fullReq(d, l, pattern(512, 3), 0, 0)}); !errors.Is(err, errFake) {
		t.Fatalf("Insert failure: %v", err)
	}
	l.failInsert.Store(false)
	if now, _ := l.stored(layout.Coord{0, 0}); now != loc || e.c.Stats().Chunks != 0 || e.c.Stats().DirectWrites != 1 {
		t.Fatalf("after failures: index %+v (was %+v), %d resident, %d direct", now, loc, e.c.Stats().Chunks, e.c.Stats().DirectWrites)
	}
	got := make([]byte, 512)
	must(t, e.c.Read(bg, []Request{fullReq(d, l, got, 0, 0)}))
	if !bytes.Equal(got, old) {
		t.Fatal("old contents not visible after failed direct writes")
	}
}

// The direct write owns the chunk's key while it writes: a read of the same
// chunk that arrives meanwhile (no serializer at this level) waits for it
// and then sees the new bytes, never the old image.
func TestDirectWriteOwnsKey(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 10})
	d, l := e.directDataset(1, 16, 32)
	must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(512, 1), 0, 0)}))
	gate := make(chan struct{})
	e.drv.writeGate = gate
	w0 := e.drv.writeVs.Load()
	neu := pattern(512, 2)
	wdone := make(chan error, 1)
	go func() { wdone <- e.c.Write(bg, []Request{fullReq(d, l, neu, 0, 0)}) }()
	for e.drv.writeVs.Load() == w0 {
		time.Sleep(time.Millisecond)
	}
	got := make([]byte, 512)
	rdone := make(chan error, 1)
	go func() { rdone <- e.c.Read(bg, []Request{fullReq(d, l, got, 0, 0)}) }()
	select {
	case err := <-rdone:
		t.Fatalf("read finished while the direct write was in flight: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	must(t, <-wdone)
	must(t, <-rdone)
	if !bytes.Equal(got, neu) {
		t.Fatal("read during a direct write saw the old chunk")
	}
}

// Goroutines write whole chunks (direct; each a single byte value) and
// read them, whole and in part, with no serializer: every read sees one
// complete version, and the cache's invariants hold.
func TestDirectWriteConcurrent(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 10}) // bypass 256 B < 512 B chunks
	d, l := e.directDataset(1, 16, 32)
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				c := uint64((g + i) % 3)
				switch i % 3 {
				case 0:
					buf := bytes.Repeat([]byte{byte(g*50 + i%50 + 1)}, 512)
					if err := e.c.Write(bg, []Request{fullReq(d, l, buf, c, 0)}); err != nil {
						errc <- err
						return
					}
				case 1:
					got := make([]byte, 512)
					if err := e.c.Read(bg, []Request{fullReq(d, l, got, c, 0)}); err != nil {
						errc <- err
						return
					}
					if !bytes.Equal(got, bytes.Repeat(got[:1], 512)) {
						errc <- errors.New("torn chunk read")
						return
					}
				default:
					got := make([]byte, 64)
					if err := e.c.Read(bg, []Request{partReq(d, 100, got, c, 0)}); err != nil {
						errc <- err
						return
					}
					if !bytes.Equal(got, bytes.Repeat(got[:1], 64)) {
						errc <- errors.New("torn partial read")
						return
					}
				}
			}
		}(g)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if e.c.Stats().DirectWrites == 0 {
		t.Fatal("no direct writes")
	}
	must(t, e.f.Flush(bg))
}
