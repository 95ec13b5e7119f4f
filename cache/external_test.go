package cache

import (
	"sync/atomic"
	"testing"
)

// TestChargeMetadata checks that charged metadata counts inside the budget
// (chunks are evicted to make room), never blocks a load even when it alone
// exceeds the limit, wakes the trimmer, and is released on Unregister.
func TestChargeMetadata(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 4096})
	d, l := e.dataset(1, -1, 8, 8) // 64-byte chunks
	chunk := l.chunkBytes()
	limit := e.c.Stats().ActiveLimit
	write := func(i uint64) {
		t.Helper()
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(int(chunk), byte(i)), i, 0)}))
	}
	for i := uint64(0); i < 40; i++ {
		write(i)
	}
	must(t, e.f.Flush(bg))
	before := e.c.Stats()

	meta := limit - 10*chunk
	e.f.ChargeMetadata(meta)
	// The charge wakes the background trimmer, which may already have
	// evicted clean chunks: chunk bytes can only have shrunk.
	if st := e.c.Stats(); st.MetadataBytes != meta || st.ResidentBytes < meta ||
		st.ResidentBytes-meta > before.ResidentBytes || e.f.MetadataBytes() != meta {
		t.Fatalf("after charging %d: %+v (file %d, resident before %d)", meta, st, e.f.MetadataBytes(), before.ResidentBytes)
	}
	for i := uint64(40); i < 80; i++ {
		write(i)
		if st := e.c.Stats(); st.ResidentBytes > limit+chunk {
			t.Fatalf("chunk %d: resident %d (metadata %d) over the active limit %d + one chunk", i, st.ResidentBytes, st.MetadataBytes, limit)
		}
	}
	// Metadata alone over the limit: loads still proceed, one chunk at a time.
	e.f.ChargeMetadata(2 * limit)
	for i := uint64(80); i < 84; i++ {
		write(i)
	}
	got := make([]byte, chunk)
	must(t, e.c.Read(bg, []Request{fullReq(d, l, got, 3, 0)}))
	must(t, e.f.Flush(bg))
	// With no request running, the trimmer evicts every chunk it can.
	e.f.ChargeMetadata(1)
	waitFor(t, "the trimmer", func() bool { return e.c.Stats().Chunks == 0 })
	if st := e.c.Stats(); st.Chunks != 0 || st.ResidentBytes != st.MetadataBytes {
		t.Fatalf("trimmer left %+v", st)
	}
	e.f.ChargeMetadata(-1)
	if got, want := e.c.Stats().MetadataBytes, meta+2*limit; got != want {
		t.Fatalf("MetadataBytes %d, want %d", got, want)
	}
	must(t, e.f.Unregister(bg))
	e.f.ChargeMetadata(100) // unregistered: ignored
	if st := e.c.Stats(); st.MetadataBytes != 0 || st.ResidentBytes != 0 {
		t.Fatalf("after Unregister: %+v", st)
	}
}

// TestMetadataShedder: metadata over the limit is shed through the file's
// shedder before a load would take the one-chunk allowance on top of it, by
// the trimmer when quiescent, and not at all while it fits; a shedder that
// frees nothing leaves the load to proceed (no loop).
func TestMetadataShedder(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 4096, ActiveMultiplier: 1})
	d, l := e.dataset(1, -1, 8, 8) // 64-byte chunks
	chunk := l.chunkBytes()
	limit := e.c.Stats().ActiveLimit
	// While sheddable, the shedder gives back all of the file's metadata.
	var sheddable atomic.Bool
	var calls atomic.Int64
	e.f.SetMetadataShedder(func() {
		calls.Add(1)
		if sheddable.Load() {
			e.f.ChargeMetadata(-e.f.MetadataBytes())
		}
	})
	write := func(i uint64) {
		t.Helper()
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(int(chunk), byte(i)), i, 0)}))
	}
	// Fits: no shedding.
	sheddable.Store(true)
	e.f.ChargeMetadata(limit / 2)
	for i := uint64(0); i < 4; i++ {
		write(i)
	}
	if calls.Load() != 0 || e.c.Stats().MetadataSheds != 0 {
		t.Fatalf("shed %d times with metadata under the limit", calls.Load())
	}
	// Over: the next load sheds first.
	e.f.ChargeMetadata(limit)
	write(5)
	st := e.c.Stats()
	if calls.Load() == 0 || st.MetadataBytes != 0 || st.ResidentBytes > limit {
		t.Fatalf("after a load with metadata over the limit: %d shedder calls, %+v", calls.Load(), st)
	}
	// Nothing to shed: loads proceed on the allowance, and metadata that
	// did not grow is not walked again.
	sheddable.Store(false)
	e.f.ChargeMetadata(2 * limit)
	before := calls.Load()
	for i := uint64(6); i < 10; i++ {
		write(i)
	}
	if n := calls.Load() - before; n == 0 || n > 8 {
		t.Fatalf("%d shedder calls for 4 loads with nothing to shed", n)
	}
	// Quiescent: the trimmer sheds what became sheddable.
	must(t, e.f.Flush(bg))
	sheddable.Store(true)
	e.f.ChargeMetadata(1) // wakes the trimmer
	// (A trim that began with the Flush may shed before the last charge,
	// which then leaves 1 byte under the limit: no more trimming.)
	waitFor(t, "the trimmer to shed", func() bool { return e.c.Stats().MetadataBytes <= 1 })
	e.f.SetMetadataShedder(nil)
}
