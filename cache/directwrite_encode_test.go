package cache

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scc-dev/scc/cache/layout"
)

// encLayout is a fakeLayout whose whole chunks can be encoded from the
// caller's buffer (DirectEncoder) and decoded into it (DirectDecoder): a
// filtered layout as the cache sees one.
type encLayout struct {
	*fakeLayout
	fromSrc   atomic.Int64       // EncodeFrom calls
	encHook   func(layout.Coord) // called at the start of EncodeFrom, if set
	decHook   func(layout.Coord) // called at the start of DecodeInto, if set
	hookOn    atomic.Bool        // the hooks run only while set
	running   atomic.Int64       // EncodeFrom calls under way
	maxRun    atomic.Int64       // the most EncodeFrom calls seen at once
	encodeErr atomic.Pointer[error]
}

var (
	_ layout.DirectEncoder = (*encLayout)(nil)
	_ layout.DirectDecoder = (*encLayout)(nil)
)

func whole(l *fakeLayout, p layout.Piece) ([]byte, bool) {
	fp := p.(*fakePiece)
	if fp.off != 0 || int64(fp.n) != l.chunkBytes() {
		return nil, false
	}
	return fp.buf[:fp.n], true
}

func (l *encLayout) EncodeSource(_ layout.Coord, p layout.Piece) ([]byte, bool) {
	return whole(l.fakeLayout, p)
}

func (l *encLayout) EncodeFrom(c layout.Coord, src []byte) (layout.Encoded, error) {
	l.fromSrc.Add(1)
	n := l.running.Add(1)
	defer l.running.Add(-1)
	for {
		m := l.maxRun.Load()
		if n <= m || l.maxRun.CompareAndSwap(m, n) {
			break
		}
	}
	if l.hookOn.Load() && l.encHook != nil {
		l.encHook(c)
	}
	// Widen the window in which other encodes could run beside this one.
	for range 20 {
		runtime.Gosched()
	}
	return l.Encode(c, &fakeChunk{b: src})
}

func (l *encLayout) DecodeTarget(_ layout.Location, p layout.Piece) ([]byte, bool) {
	return whole(l.fakeLayout, p)
}

func (l *encLayout) DecodeInto(c layout.Coord, loc layout.Location, image, dst []byte) error {
	if l.hookOn.Load() && l.decHook != nil {
		l.decHook(c)
	}
	ch, err := l.Decode(c, loc, image)
	if err != nil {
		return err
	}
	copy(dst, ch.(*fakeChunk).b)
	return nil
}

func (e *env) encDataset(id uint64, cd ...uint64) (*Dataset, *encLayout) {
	e.t.Helper()
	l := &encLayout{fakeLayout: newFakeLayout(&e.alloc, cd...)}
	d, err := e.f.RegisterDataset(id, l, DatasetOptions{MinBytes: -1})
	if err != nil {
		e.t.Fatal(err)
	}
	return d, l
}

func encReq(d *Dataset, l *encLayout, buf []byte, coord ...uint64) Request {
	return fullReq(d, l.fakeLayout, buf, coord...)
}

// A whole-chunk write of a filtered layout above the bypass threshold is
// encoded from the caller's buffer and written: one WriteV, no chunk
// created or made resident, no image left in flight. A resident copy, a
// partial write, or direct writes turned off take the cached path. A
// write of more chunks than there are workers goes in rounds of as many
// chunks as workers, each one WriteV, with at most that many images in
// flight.
func TestDirectEncodeFakeLayout(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 10, Workers: 2}) // bypass 256 B
	d, l := e.encDataset(1, 16, 32)                             // 512 B chunks
	a := pattern(512, 3)
	must(t, e.c.Write(bg, []Request{encReq(d, l, a, 0, 0)}))
	st := e.c.Stats()
	if st.DirectWrites != 1 || st.DirectEncodes != 1 || st.Creates != 0 || st.Chunks != 0 || e.drv.writeVs.Load() != 1 || l.fromSrc.Load() != 1 || st.EncodingBytes != 0 {
		t.Fatalf("direct encode: %d direct, %d encoded, %d creates, %d resident, %d WriteV, %d EncodeFrom, %d bytes in flight",
			st.DirectWrites, st.DirectEncodes, st.Creates, st.Chunks, e.drv.writeVs.Load(), l.fromSrc.Load(), st.EncodingBytes)
	}
	got := make([]byte, 512)
	must(t, e.c.Read(bg, []Request{encReq(d, l, got, 0, 0)}))
	if !bytes.Equal(got, a) {
		t.Fatal("read back other bytes than were encoded")
	}
	// Partial: the cached (bypass) path.
	must(t, e.c.Write(bg, []Request{partReq(d, 5, []byte{1, 2}, 0, 0)}))
	copy(a[5:], []byte{1, 2})
	if st := e.c.Stats(); st.DirectEncodes != 1 {
		t.Fatalf("partial write: %d direct encodes", st.DirectEncodes)
	}
	must(t, e.c.Read(bg, []Request{encReq(d, l, got, 0, 0)}))
	if !bytes.Equal(got, a) {
		t.Fatal("partial write after a direct encode lost")
	}
	// A dirty resident copy wins over the direct path.
	must(t, e.c.SetConfig(bg, Config{QuiescentBytes: 1 << 10, BypassBytes: 1 << 10, Workers: 2}))
	must(t, e.c.Write(bg, []Request{partReq(d, 0, []byte{7}, 1, 0)}))
	must(t, e.c.SetConfig(bg, Config{QuiescentBytes: 1 << 10, Workers: 2}))
	b := pattern(512, 9)
	must(t, e.c.Write(bg, []Request{encReq(d, l, b, 1, 0)}))
	if st := e.c.Stats(); st.DirectEncodes != 1 || st.Chunks != 1 {
		t.Fatalf("whole write over a dirty copy: %d direct encodes, %d resident", st.DirectEncodes, st.Chunks)
	}
	must(t, e.f.Flush(bg))
	must(t, e.c.Read(bg, []Request{encReq(d, l, got, 1, 0)}))
	if !bytes.Equal(got, b) {
		t.Fatal("whole write over the dirty copy lost")
	}
	// Five chunks, two workers: rounds of two, two and one.
	w0, before := e.drv.writeVs.Load(), e.c.Stats()
	var reqs []Request
	var bufs [][]byte
	for k := uint64(2); k < 7; k++ {
		buf := pattern(512, byte(40+k))
		bufs = append(bufs, buf)
		reqs = append(reqs, encReq(d, l, buf, k, 0))
	}
	must(t, e.c.Write(bg, reqs))
	st = e.c.Stats()
	if n := e.drv.writeVs.Load() - w0; n != 3 || st.Sub(before).DirectEncodes != 5 {
		t.Fatalf("five chunks with two workers: %d WriteV, %d direct encodes; want 3 and 5", n, st.Sub(before).DirectEncodes)
	}
	if img := int64(6 + 512); st.PeakEncodingBytes > 2*img || st.EncodingBytes != 0 {
		t.Fatalf("peak %d bytes of images in flight, over two workers' %d; %d left", st.PeakEncodingBytes, 2*img, st.EncodingBytes)
	}
	for i, k := 0, uint64(2); k < 7; i, k = i+1, k+1 {
		must(t, e.c.Read(bg, []Request{encReq(d, l, got, k, 0)}))
		if !bytes.Equal(got, bufs[i]) {
			t.Fatalf("chunk %d: read back other bytes", k)
		}
	}
	// Off by config: bypassed through the cache.
	e2 := newEnv(t, Config{QuiescentBytes: 1 << 10, NoDirectWrites: true})
	d2, l2 := e2.encDataset(1, 16, 32)
	must(t, e2.c.Write(bg, []Request{encReq(d2, l2, a, 0, 0)}))
	if st := e2.c.Stats(); st.DirectEncodes != 0 || st.Bypasses != 1 || l2.fromSrc.Load() != 0 {
		t.Fatalf("NoDirectWrites: %d direct encodes, %d bypasses", st.DirectEncodes, st.Bypasses)
	}
}

// Below the bypass threshold a filtered chunk goes direct only once the
// cache is full, the read side's rule: whole chunks written one by one
// into a cache of eight fill it (created, dirty) and the rest are encoded
// from the caller's buffer, and the resident bytes never pass the
// quiescent limit (without the direct encode they grow to the active
// limit, evicting the dirty chunks).
func TestDirectEncodeFullCache(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 4 << 10}) // bypass 1 KiB, room for 8 chunks of 512 B
	d, l := e.encDataset(1, 16, 32)
	var bufs [][]byte
	for k := uint64(0); k < 24; k++ {
		buf := pattern(512, byte(k))
		bufs = append(bufs, buf)
		must(t, e.c.Write(bg, []Request{encReq(d, l, buf, k, 0)}))
		if st := e.c.Stats(); st.ResidentBytes > st.QuiescentLimit {
			t.Fatalf("after chunk %d: %d bytes resident, over the quiescent limit %d", k, st.ResidentBytes, st.QuiescentLimit)
		}
	}
	st := e.c.Stats()
	if st.Creates != 8 || st.DirectEncodes != 16 || st.Evictions != 0 || st.PeakResidentBytes > st.QuiescentLimit {
		t.Fatalf("24 chunks into a cache of 8: %d created, %d encoded directly, %d evictions, peak %d; want 8, 16, 0, <= %d",
			st.Creates, st.DirectEncodes, st.Evictions, st.PeakResidentBytes, st.QuiescentLimit)
	}
	// A chunk written whole again soon is kept dirty, evicting another,
	// as a chunk read again soon is (goesDirect): chunk 20 was last
	// written 3 chunks ago, well within the 8 the cache holds.
	bufs[20] = pattern(512, 200)
	must(t, e.c.Write(bg, []Request{encReq(d, l, bufs[20], 20, 0)}))
	if _, ok := e.c.chunks.Load(makeKey(d.serial, layout.Coord{20, 0})); !ok {
		t.Fatalf("a chunk written whole again soon into a full cache was encoded directly (%d direct encodes)", e.c.Stats().DirectEncodes)
	}
	// One written whole long ago (chunk 8, 16 misses of 8 chunks' room
	// since) still goes directly.
	bufs[8] = pattern(512, 201)
	must(t, e.c.Write(bg, []Request{encReq(d, l, bufs[8], 8, 0)}))
	if st := e.c.Stats(); st.DirectEncodes != 17 {
		t.Fatalf("a chunk last written 16 chunks ago: %d direct encodes, want 17", st.DirectEncodes)
	}
	must(t, e.f.Flush(bg))
	got := make([]byte, 512)
	for k := range bufs {
		must(t, e.c.Read(bg, []Request{encReq(d, l, got, uint64(k), 0)}))
		if !bytes.Equal(got, bufs[k]) {
			t.Fatalf("chunk %d: read back other bytes", k)
		}
	}
}

// A direct encode that fails, in EncodeFrom, Insert, the WriteV or
// Publish, returns the error and publishes nothing: the index keeps the
// old image, nothing is resident, no image or token is left held, reads
// see the old bytes; the next write is right.
func TestDirectEncodeFailure(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 10})
	d, l := e.encDataset(1, 16, 32)
	old := pattern(512, 1)
	must(t, e.c.Write(bg, []Request{encReq(d, l, old, 0, 0)}))
	loc, _ := l.stored(layout.Coord{0, 0})
	for _, tc := range []struct {
		name string
		set  func(bool)
		want error
	}{
		{"encode", l.failEncode.Store, errFake},
		{"insert", l.failInsert.Store, errFake},
		{"write", e.drv.failWrite.Store, errDisk},
		{"publish", l.failPublish.Store, errFake},
	} {
		ins := l.inserts.Load()
		tc.set(true)
		err := e.c.Write(bg, []Request{encReq(d, l, pattern(512, 2), 0, 0)})
		tc.set(false)
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s failure: %v, want %v", tc.name, err, tc.want)
		}
		if tc.name == "encode" && l.inserts.Load() != ins {
			t.Fatal("a failed encode allocated space")
		}
		st := e.c.Stats()
		if now, _ := l.stored(layout.Coord{0, 0}); now != loc || st.Chunks != 0 || st.DirectEncodes != 1 || st.EncodingBytes != 0 || len(e.c.writer.encodes) != 0 {
			t.Fatalf("after a %s failure: index %+v (was %+v), %d resident, %d direct encodes, %d bytes in flight, %d tokens held",
				tc.name, now, loc, st.Chunks, st.DirectEncodes, st.EncodingBytes, len(e.c.writer.encodes))
		}
		got := make([]byte, 512)
		must(t, e.c.Read(bg, []Request{encReq(d, l, got, 0, 0)}))
		if !bytes.Equal(got, old) {
			t.Fatalf("after a %s failure: the old contents are not what reads see", tc.name)
		}
	}
	neu := pattern(512, 5)
	must(t, e.c.Write(bg, []Request{encReq(d, l, neu, 0, 0)}))
	got := make([]byte, 512)
	must(t, e.c.Read(bg, []Request{encReq(d, l, got, 0, 0)}))
	if !bytes.Equal(got, neu) || e.c.Stats().DirectEncodes != 2 {
		t.Fatal("the write after the failures is not what reads see")
	}
}

// A direct encode owns the chunk's key until its image is published: a
// read of the chunk that arrives meanwhile (no serializer at this level)
// waits for it, then sees the new bytes, never the old image.
func TestDirectEncodeOwnsKey(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 10})
	d, l := e.encDataset(1, 16, 32)
	must(t, e.c.Write(bg, []Request{encReq(d, l, pattern(512, 1), 0, 0)}))
	requireDirectEncodes(t, e.c, 1)
	started, gate := make(chan struct{}), make(chan struct{})
	l.encHook = func(layout.Coord) { close(started); <-gate }
	l.hookOn.Store(true)
	neu := pattern(512, 2)
	wdone := make(chan error, 1)
	go func() { wdone <- e.c.Write(bg, []Request{encReq(d, l, neu, 0, 0)}) }()
	<-started
	l.hookOn.Store(false)
	coalesced := e.c.Stats().Coalesced
	got := make([]byte, 512)
	rdone := make(chan error, 1)
	go func() { rdone <- e.c.Read(bg, []Request{encReq(d, l, got, 0, 0)}) }()
	for e.c.Stats().Coalesced == coalesced {
		runtime.Gosched() // until the read waits for the claimed chunk
	}
	select {
	case err := <-rdone:
		t.Fatalf("read finished while the direct encode was under way: %v", err)
	default:
	}
	close(gate)
	must(t, <-wdone)
	must(t, <-rdone)
	if !bytes.Equal(got, neu) {
		t.Fatal("a read during a direct encode saw the old chunk")
	}
}

// Many goroutines write whole chunks of their own (encoded directly) and
// read others' (each chunk one byte value, so a read sees one whole
// version), with two workers: never more than two EncodeFrom calls or
// two images in flight at once, however many requests write, and every
// chunk holds its owner's last write. Run under -race.
func TestDirectEncodeConcurrentBounded(t *testing.T) {
	const goroutines, each, rounds, workers = 12, 2, 30, 2
	e := newEnv(t, Config{QuiescentBytes: 1 << 10, Workers: workers})
	d, l := e.encDataset(1, 16, 32)
	last := make([][]byte, goroutines*each)
	var wg sync.WaitGroup
	errc := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := make([]byte, 512)
			for i := range rounds {
				k := g*each + i%each
				buf := bytes.Repeat([]byte{byte(g*rounds + i + 1)}, 512)
				if err := e.c.Write(bg, []Request{encReq(d, l, buf, uint64(k), 0)}); err != nil {
					errc <- err
					return
				}
				last[k] = buf
				other := uint64((k + each*(1+i%(goroutines-1))) % (goroutines * each))
				if err := e.c.Read(bg, []Request{encReq(d, l, got, other, 0)}); err != nil {
					errc <- err
					return
				}
				if !bytes.Equal(got, bytes.Repeat(got[:1], 512)) {
					errc <- fmt.Errorf("chunk %d read torn", other)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	st := e.c.Stats()
	if img := int64(6 + 512); l.maxRun.Load() > workers || st.PeakEncodingBytes > workers*img {
		t.Fatalf("%d EncodeFrom calls and %d bytes of images in flight at once; want at most %d and %d", l.maxRun.Load(), st.PeakEncodingBytes, workers, workers*img)
	}
	if st.DirectEncodes != goroutines*rounds || st.Chunks != 0 {
		t.Fatalf("%d direct encodes, %d resident; want %d, 0", st.DirectEncodes, st.Chunks, goroutines*rounds)
	}
	got := make([]byte, 512)
	for k, want := range last {
		must(t, e.c.Read(bg, []Request{encReq(d, l, got, uint64(k), 0)}))
		if !bytes.Equal(got, want) {
			t.Fatalf("chunk %d does not hold its last write", k)
		}
	}
}

// The two codecs of a round trip run at once: a direct encode of one chunk
// and a direct decode of another, each waiting inside its codec until the
// other has started, both finish, with a single worker. (Were the decode
// to wait for the encode's worker or token, or the other way round, this
// would never return.)
func TestDirectEncodeOverlapsDecode(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 1 << 10, Workers: 1})
	d, l := e.encDataset(1, 16, 32)
	src := pattern(512, 7)
	must(t, e.c.Write(bg, []Request{encReq(d, l, src, 1, 0)})) // chunk 1, to be decoded
	requireDirectEncodes(t, e.c, 1)
	encoding, decoding := make(chan struct{}), make(chan struct{})
	l.encHook = func(layout.Coord) { close(encoding); <-decoding }
	l.decHook = func(layout.Coord) { close(decoding); <-encoding }
	l.hookOn.Store(true)
	neu := pattern(512, 8)
	got := make([]byte, 512)
	var wg sync.WaitGroup
	var werr, rerr error
	wg.Add(2)
	go func() { defer wg.Done(); werr = e.c.Write(bg, []Request{encReq(d, l, neu, 0, 0)}) }()
	go func() { defer wg.Done(); rerr = e.c.Read(bg, []Request{encReq(d, l, got, 1, 0)}) }()
	wg.Wait()
	l.hookOn.Store(false)
	must(t, werr)
	must(t, rerr)
	if !bytes.Equal(got, src) {
		t.Fatal("the decode beside the encode read other bytes")
	}
	must(t, e.c.Read(bg, []Request{encReq(d, l, got, 0, 0)}))
	if !bytes.Equal(got, neu) {
		t.Fatal("the encode beside the decode wrote other bytes")
	}
	if st := e.c.Stats(); st.DirectEncodes != 2 || st.Loads != 0 {
		t.Fatalf("%d direct encodes, %d loads; want 2 and none (decoded directly)", st.DirectEncodes, st.Loads)
	}
}

// requireDirectEncodes stops a test whose setup did not encode n chunks
// directly, before it waits for a direct encode's hook that would never
// run.
func requireDirectEncodes(t *testing.T, c *Cache, n int64) {
	t.Helper()
	if got := c.Stats().DirectEncodes; got != n {
		t.Fatalf("%d chunks encoded directly, want %d", got, n)
	}
}

// TestAdmitOnRereadWrites: with AdmitOnReread, a whole filtered chunk
// written into a cache with room goes straight to the file (encoded from
// the caller's buffer) unless it was accessed recently, so a one-pass
// stream of writes leaves the cache empty; a chunk written again soon is
// kept dirty, and reads back what was written last. Without the option
// the cache with room keeps every chunk written.
func TestAdmitOnRereadWrites(t *testing.T) {
	for _, admit := range []bool{true, false} {
		e := newEnv(t, Config{QuiescentBytes: 1 << 20, AdmitOnReread: admit})
		d, l := e.encDataset(1, 16, 32) // 512 B chunks
		var want [][]byte
		for i := 0; i < 8; i++ {
			want = append(want, pattern(512, byte(i+1)))
			must(t, e.c.Write(bg, []Request{encReq(d, l, want[i], uint64(i), 0)}))
		}
		st := e.c.Stats()
		if admit && (st.Chunks != 0 || l.fromSrc.Load() != 8) {
			t.Fatalf("a stream of 8 whole chunks: %d kept, %d encoded from the caller's buffer, want 0 and 8", st.Chunks, l.fromSrc.Load())
		}
		if !admit && (st.Chunks != 8 || l.fromSrc.Load() != 0) {
			t.Fatalf("without AdmitOnReread: %d kept, %d encoded directly, want 8 and 0", st.Chunks, l.fromSrc.Load())
		}
		// Chunk 3 written again at once is kept (dirty) when admit is on.
		want[3] = pattern(512, 99)
		must(t, e.c.Write(bg, []Request{encReq(d, l, want[3], 3, 0)}))
		if _, ok := e.c.chunks.Load(makeKey(d.serial, layout.Coord{3, 0})); !ok {
			t.Fatalf("admit=%v: a chunk written again soon was not kept", admit)
		}
		if admit && l.fromSrc.Load() != 8 {
			t.Fatalf("the second write of a chunk was encoded directly (%d direct encodes)", l.fromSrc.Load())
		}
		for i := range want {
			got := make([]byte, 512)
			must(t, e.c.Read(bg, []Request{encReq(d, l, got, uint64(i), 0)}))
			if !bytes.Equal(got, want[i]) {
				t.Fatalf("admit=%v: chunk %d reads back wrong", admit, i)
			}
		}
		must(t, d.Flush(bg, true))
	}
}
