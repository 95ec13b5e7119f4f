package cache

import "testing"

// A flush of a cache full of dirty chunks encodes and writes them in rounds
// of at most an eighth of the active limit, so the encoded images it holds
// outside the budget stay bounded (without rounds: one WriteV of all 64).
func TestFlushWritesInRounds(t *testing.T) {
	const chunk, n = 32, 64
	e := newEnv(t, Config{QuiescentBytes: n * chunk, ActiveMultiplier: 1, MinBytes: -1, BypassBytes: -1, PreEncodeBytes: -1})
	d, l := e.dataset(1, -1, chunk)
	var reqs []Request
	for i := 0; i < n; i++ {
		reqs = append(reqs, fullReq(d, l, pattern(chunk, byte(i)), uint64(i)))
	}
	must(t, e.c.Write(bg, reqs))
	w0 := e.drv.writeVs.Load()
	must(t, e.f.Flush(bg))
	if w := e.drv.writeVs.Load() - w0; w != 8 {
		t.Fatalf("flushing %d chunks of %d bytes took %d WriteV calls, want 8 rounds of 8", n, chunk, w)
	}
	if st := e.c.Stats(); st.DirtyBytes != 0 || st.ChunksFlushed != n {
		t.Fatalf("after flush: %d dirty bytes, %d chunks flushed", st.DirtyBytes, st.ChunksFlushed)
	}
}
