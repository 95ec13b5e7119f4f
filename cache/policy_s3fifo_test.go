package cache

import (
	"fmt"
	"testing"
)

// TestModelConcurrentS3FIFO runs the concurrent reference-model test
// (model_test.go) with S3-FIFO, with and without injected faults.
func TestModelConcurrentS3FIFO(t *testing.T) {
	for _, faults := range []bool{false, true} {
		t.Run(fmt.Sprintf("faults=%v", faults), func(t *testing.T) {
			modelConcurrent(t, PolicyS3FIFO, faults, 300*stressScale())
		})
	}
}

// TestS3FIFOInCacheKeepsHotChunksThroughStream drives the real Cache: hits
// reach the policy through the lossy access buffer, and a stream of
// written chunks ten times the budget, with the hot chunks read only every
// 48 stream chunks (longer than the cache holds), does not evict them
// under S3-FIFO; under LRU (the control) it does. It also checks S3-FIFO
// honours a per-dataset minimum in the cache.
func TestS3FIFOInCacheKeepsHotChunksThroughStream(t *testing.T) {
	const chunk = 256
	run := func(pk PolicyKind, hotMin int64) (hotMisses int64, kept int64) {
		e := newEnv(t, Config{QuiescentBytes: 16 * chunk, MinBytes: -1, BypassBytes: -1, Policy: pk})
		hot, hl := e.dataset(1, hotMin, chunk)
		stream, sl := e.dataset(2, -1, chunk)
		for i := 0; i < 4; i++ {
			must(t, e.c.Write(bg, []Request{fullReq(hot, hl, pattern(chunk, byte(i)), uint64(i))}))
			must(t, e.c.Read(bg, []Request{fullReq(hot, hl, make([]byte, chunk), uint64(i))}))
		}
		before := hot.Stats()
		for i := 0; i < 10*32; i++ {
			must(t, e.c.Write(bg, []Request{fullReq(stream, sl, pattern(chunk, byte(i)), uint64(i))}))
			if i%48 == 47 {
				for j := 0; j < 4; j++ {
					buf := make([]byte, chunk)
					must(t, e.c.Read(bg, []Request{fullReq(hot, hl, buf, uint64(j))}))
					if buf[0] != pattern(chunk, byte(j))[0] {
						t.Fatalf("hot chunk %d read back wrong", j)
					}
				}
			}
		}
		if st := e.c.Stats(); st.PeakResidentBytes > st.ActiveLimit+chunk {
			t.Fatalf("%v: peak %d over limit %d + one chunk", pk, st.PeakResidentBytes, st.ActiveLimit)
		}
		return hot.Stats().Misses - before.Misses, hot.Stats().Chunks
	}
	if m, _ := run(PolicyS3FIFO, -1); m != 0 {
		t.Errorf("S3-FIFO: hot chunks missed %d times during a stream", m)
	}
	if m, _ := run(PolicyLRU, -1); m == 0 {
		t.Error("control: LRU kept the hot chunks too; the test proves nothing")
	}
	// With a minimum of 4 chunks the hot dataset keeps all of them even
	// when never read again (SCC design §4.2 min_dset_size).
	e := newEnv(t, Config{QuiescentBytes: 16 * chunk, MinBytes: -1, BypassBytes: -1, Policy: PolicyS3FIFO})
	hot, hl := e.dataset(1, 4*chunk, chunk)
	stream, sl := e.dataset(2, -1, chunk)
	for i := 0; i < 4; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(hot, hl, pattern(chunk, byte(i)), uint64(i))}))
	}
	for i := 0; i < 10*32; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(stream, sl, pattern(chunk, byte(i)), uint64(i))}))
	}
	if got := hot.Stats().Chunks; got != 4 {
		t.Fatalf("S3-FIFO: protected dataset kept %d of 4 chunks", got)
	}
}
