package cache

import (
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
