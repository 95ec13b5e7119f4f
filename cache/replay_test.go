package cache

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/scc-dev/scc/cache/internal/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReplayOffReader: hits never apply access records themselves. With
// the policy lock held by the test, more hits than a stripe's mark all
// complete and keep their records (none dropped, every entry queued);
// once the lock is free the replayer, not a reader, applies them: with no
// eviction and no further request the LRU order becomes the order of the
// hits. When the hit path replayed a full stripe itself (TryLock on the
// policy lock, dropping the batch when busy), the records were lost and
// the order stayed the load order.
func TestReplayOffReader(t *testing.T) {
	// One P: one stripe, so the mark is reached by a known hit.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	e := newEnv(t, Config{QuiescentBytes: 64 << 20, Policy: PolicyLRU, BypassBytes: -1})
	d, l := e.dataset(1, -1, 64)
	n := accessStripe/2 + 500 // past the mark, under the capacity
	for i := 0; i < n; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(64, byte(i)), uint64(i))}))
	}
	must(t, e.f.Flush(bg))
	before := e.c.Stats()
	rounds := e.c.access.replay.rounds.Load()

	e.c.mu.Lock()
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		// Newest first: the replayed order is the reverse of the load
		// order, so it cannot be mistaken for it.
		for i := n - 1; i >= 0; i-- {
			if err := e.c.Read(bg, []Request{fullReq(d, l, buf, uint64(i))}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			e.c.mu.Unlock()
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		e.c.mu.Unlock()
		t.Fatal("hits blocked on the policy lock")
	}
	s := e.c.Stats().Sub(before)
	queued := recordsPending(e.c)
	e.c.mu.Unlock()
	if s.Hits != int64(n) || s.Misses != 0 || s.AccessDrops != 0 || queued != n {
		t.Fatalf("hits %d misses %d drops %d records %d, want %d hits all recorded", s.Hits, s.Misses, s.AccessDrops, queued, n)
	}

	// A drain takes the records out of the slots before it applies them
	// and counts its round after: wait for the count, not only for the
	// slots to empty. Records applied by anyone else leave it unchanged.
	waitFor(t, "the replayer to apply the records", func() bool {
		return e.c.access.replay.rounds.Load() != rounds && recordsPending(e.c) == 0
	})
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	order, err := policy.Contents(e.c.mu.pol, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if i >= len(order) || order[i].coord[0] != uint64(i) {
			t.Fatalf("LRU position %d: want chunk %d (hits not replayed in order)", i, i)
		}
	}
}

// TestReplayerSleepsAndWakes: after a burst of hits the replayer drains the
// buffer and goes back to sleep (an idle cache costs nothing); a later
// burst that reaches a stripe's mark wakes it again, with no eviction and
// no other request to drain the buffer.
func TestReplayerSleepsAndWakes(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	e := newEnv(t, Config{QuiescentBytes: 64 << 20, BypassBytes: -1})
	d, l := e.dataset(1, -1, 64)
	n := accessStripe/2 + 500 // one pass over the chunks passes the mark
	for i := 0; i < n; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(64, byte(i)), uint64(i))}))
	}
	buf := make([]byte, 64)
	burst := func() {
		for _, i := range rand.Perm(n) {
			must(t, e.c.Read(bg, []Request{fullReq(d, l, buf, uint64(i))}))
		}
	}
	for round := 0; round < 3; round++ {
		waitFor(t, "the replayer to sleep", func() bool { return e.c.access.replay.sleeping.Load() })
		r0 := e.c.access.replay.rounds.Load()
		burst()
		waitFor(t, "a replay", func() bool { return e.c.access.replay.rounds.Load() > r0 })
	}
	waitFor(t, "the replayer to sleep", func() bool { return e.c.access.replay.sleeping.Load() })
	r := e.c.access.replay.rounds.Load()
	time.Sleep(20 * replayPoll)
	if got := e.c.access.replay.rounds.Load(); got != r {
		t.Fatalf("idle replayer ran %d rounds", got-r)
	}
}

// TestReplayerRacesEvictions: many goroutines hit a small cache while
// misses evict and the replayer applies their records at the same time
// (run it with -race): every read returns its chunk's bytes, the replayer
// ran, and the cache's accounting and policy lists check out at the end
// (newTestCache's cleanup). Stripes of 8 records, so that a hot set of a
// few chunks fill them between evictions.
func TestReplayerRacesEvictions(t *testing.T) {
	defer func(n int) { accessStripe = n }(accessStripe)
	accessStripe = 8
	for _, pk := range []PolicyKind{PolicyTwoStageLRU, PolicyLRU, PolicyLFU, PolicySIEVE, PolicyS3FIFO} {
		t.Run(pk.String(), func(t *testing.T) {
			const (
				chunks  = 96
				hot     = 16 // chunks below hot are read 15 times in 16
				workers = 8
			)
			e := newEnv(t, Config{QuiescentBytes: 24 * 64, MinBytes: -1, Policy: pk, BypassBytes: -1, Workers: 2})
			d, l := e.dataset(1, -1, 64)
			for i := 0; i < chunks; i++ {
				must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(64, byte(i)), uint64(i))}))
			}
			must(t, e.f.Flush(bg))
			ops := 4000
			if testing.Short() {
				ops = 1000
			}
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func(seed uint64) {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(seed, 1))
					buf := make([]byte, 64)
					for k := 0; k < ops; k++ {
						i := rng.IntN(hot)
						if rng.IntN(16) == 0 {
							i = rng.IntN(chunks)
						}
						if err := e.c.Read(bg, []Request{fullReq(d, l, buf, uint64(i))}); err != nil {
							t.Error(err)
							return
						}
						if !bytes.Equal(buf, pattern(64, byte(i))) {
							t.Errorf("chunk %d: read other bytes", i)
							return
						}
						if k%64 == 63 {
							runtime.Gosched() // with one P, let the replayer in
						}
					}
				}(uint64(w))
			}
			wg.Wait()
			if e.c.access.replay.rounds.Load() == 0 {
				t.Error("the replayer never ran")
			}
			if s := e.c.Stats(); s.Evictions == 0 {
				t.Error("no eviction: the test did not race anything")
			}
		})
	}
}

// TestReplayerPassesBusySlots: a reader that hits without pause is never
// made to wait for the replayer, nor the replayer for it: the replayer's
// polls pass by a slot its reader keeps (readSlots.drain without wait)
// and take its records at a later poll, so that the drains yield to a
// held slot less than once per replay round. When every poll waited for the slot, the replayer
// spun on the reader's line about a thousand times per round (a core
// taken, and the reader's line pulled away on every try).
func TestReplayerPassesBusySlots(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	e := newEnv(t, Config{QuiescentBytes: 64 << 20, Policy: PolicyLFU, BypassBytes: -1})
	d, l := e.dataset(1, -1, 64)
	const n = 1024
	for i := 0; i < n; i++ {
		require.NoError(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(64, byte(i)), uint64(i))}))
	}
	require.NoError(t, e.f.Flush(bg))
	before := e.c.Stats()
	waits0 := e.c.access.slots.waits.Load()
	rounds0 := e.c.access.replay.rounds.Load()

	// One reader, hits only, until the replayer has run many rounds
	// under it (bounded, in case it never does).
	const wantRounds = 40
	buf := make([]byte, 64)
	rng := rand.New(rand.NewPCG(1, 2))
	for k := 0; k < 50_000_000 && e.c.access.replay.rounds.Load()-rounds0 < wantRounds; k++ {
		require.NoError(t, e.c.Read(bg, []Request{fullReq(d, l, buf, uint64(rng.IntN(n)))}))
	}
	rounds := e.c.access.replay.rounds.Load() - rounds0
	waits := e.c.access.slots.waits.Load() - waits0
	require.GreaterOrEqual(t, rounds, int64(wantRounds), "the replayer ran too few rounds under the reader")
	assert.Less(t, waits, rounds, "drains yielded to a held slot %d times in %d rounds", waits, rounds)
	s := e.c.Stats().Sub(before)
	assert.Zero(t, s.Misses)
	assert.Positive(t, s.Hits)
}
