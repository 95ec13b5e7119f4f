package peers

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/maypok86/otter/v2"
	"github.com/scc-dev/scc/bench"
)

// The workload: lookupChunks resident chunks of lookupBytes each, looked up
// uniformly at random and copied out, by 1, 2 and 8 goroutines. Every
// implementation holds all keys, so every lookup is a hit.
//
// Same work on both sides (checked): each lookup finds the
// value by key, copies its lookupBytes into the goroutine's buffer (scc's
// Scatter, the peers' copy) and records the access for the eviction
// policy (scc: its read slot's lossy record buffer, one record per chunk
// until the buffer is replayed as far as the slot remembers, and none for
// hits near the front of the recency order; otter: its lossy read buffer,
// on from the moment the cache is half full, which the 4096 keys in a
// cache of 8192 reach; ristretto: its sampled read buffer). Both scc and
// otter (default executor) replay their buffers into the policy on
// goroutines of their own. scc additionally holds the chunk for the copy
// (a chunk's buffer is recycled on eviction; the peers hand out GC-owned
// values), counts the hit per cache and per dataset (otter's statistics
// are off by default) and names a chunk by dataset and coordinates rather
// than by one integer.
//
// Nothing a getter writes is shared with another goroutine's getter: the
// peers' getters close over a buffer of their own, scc's reader keeps its
// coordinate and buffer inside itself, padded (bench.LookupReader: a
// coordinate sharing a cache line with the other readers' slowed scc
// alone at 2 and 8 goroutines).
const (
	lookupChunks = 4096
	lookupBytes  = 64
)

var goroutines = []int{1, 2, 8}

// getter is one goroutine's view of an implementation: copy chunk i into a
// buffer and return it.
type getter func(i int) ([]byte, bool)

type impl struct {
	name string
	// newGetter returns a getter for one goroutine.
	newGetter func() getter
	close     func()
}

func chunkValue(i int) []byte { return bench.LookupValue(i, lookupBytes) }

func newSCC(tb testing.TB) impl {
	ctx := context.Background()
	h, err := bench.NewLookupHarness(ctx, lookupChunks, lookupBytes)
	if err != nil {
		tb.Fatal(err)
	}
	return impl{name: "scc", close: func() { h.Close() }, newGetter: func() getter {
		r := h.Reader()
		return func(i int) ([]byte, bool) {
			b, err := r.Get(ctx, i)
			return b, err == nil
		}
	}}
}

// newOtter is otter v2 as a user gets it: its default executor runs the
// policy's maintenance (replaying the read buffer into the eviction
// policy) on goroutines of its own, so at g=1 on a machine with a spare
// core that work runs beside the lookups instead of in them. scc does the
// same with its replayer goroutine (cache/replay.go).
func newOtter(tb testing.TB) impl { return newOtterWith(tb, "otter", nil) }

// newOtterSync is otter v2 with maintenance on the calling goroutine
// (Options.Executor runs the task in place), as scc did it before its
// replayer: printed beside the default for reference; the target ratio is
// against the default.
func newOtterSync(tb testing.TB) impl {
	return newOtterWith(tb, "otter-sync", func(fn func()) { fn() })
}

func newOtterWith(tb testing.TB, name string, executor func(func())) impl {
	c := otter.Must(&otter.Options[uint64, []byte]{MaximumSize: lookupChunks * 2, Executor: executor})
	for i := 0; i < lookupChunks; i++ {
		c.Set(uint64(i), chunkValue(i))
	}
	return impl{name: name, close: func() {}, newGetter: func() getter {
		dst := make([]byte, lookupBytes)
		return func(i int) ([]byte, bool) {
			v, ok := c.GetIfPresent(uint64(i))
			copy(dst, v)
			return dst, ok
		}
	}}
}

func newRistretto(tb testing.TB) impl {
	c, err := ristretto.NewCache(&ristretto.Config[uint64, []byte]{
		NumCounters: lookupChunks * 10, MaxCost: lookupChunks * 4, BufferItems: 64,
		IgnoreInternalCost: true,
	})
	if err != nil {
		tb.Fatal(err)
	}
	// ristretto's admission may drop a Set; retry until every key is in,
	// so that every lookup is a hit as for the others.
	for try := 0; try < 100; try++ {
		missing := 0
		for i := 0; i < lookupChunks; i++ {
			if _, ok := c.Get(uint64(i)); !ok {
				c.Set(uint64(i), chunkValue(i), 1)
				missing++
			}
		}
		c.Wait()
		if missing == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return impl{name: "ristretto", close: c.Close, newGetter: func() getter {
		dst := make([]byte, lookupBytes)
		return func(i int) ([]byte, bool) {
			v, ok := c.Get(uint64(i))
			copy(dst, v)
			return dst, ok
		}
	}}
}

// BenchmarkLookup reports, per implementation and goroutine count, ns per
// lookup over all goroutines, million lookups per second (the figure
// scctl bench cachemap compares) and million lookups per CPU-second of
// the process (for a machine others load: what each lookup costs).
func BenchmarkLookup(b *testing.B) {
	for _, mk := range []func(testing.TB) impl{newSCC, newOtter, newOtterSync, newRistretto} {
		im := mk(b)
		for _, g := range goroutines {
			b.Run(fmt.Sprintf("%s/g=%d", im.name, g), func(b *testing.B) {
				getters := make([]getter, g)
				keys := make([][]int, g)
				for k := range getters {
					getters[k] = im.newGetter()
					rng := rand.New(rand.NewPCG(uint64(k), 7))
					keys[k] = make([]int, 1<<14)
					for j := range keys[k] {
						keys[k][j] = rng.IntN(lookupChunks)
					}
				}
				var misses sync.Map
				b.ResetTimer()
				cpu0 := bench.ProcessCPUSeconds()
				start := time.Now()
				var wg sync.WaitGroup
				per := b.N / g
				for k := 0; k < g; k++ {
					n := per
					if k == 0 {
						n += b.N % g
					}
					wg.Add(1)
					go func(get getter, ks []int, n int) {
						defer wg.Done()
						for j := 0; j < n; j++ {
							if _, ok := get(ks[j&(len(ks)-1)]); !ok {
								misses.Store(ks[j&(len(ks)-1)], true)
							}
						}
					}(getters[k], keys[k], n)
				}
				wg.Wait()
				el := time.Since(start)
				cpu := bench.ProcessCPUSeconds() - cpu0
				b.StopTimer()
				b.ReportMetric(float64(b.N)/el.Seconds()/1e6, "Mlookups/s")
				if cpu > 0 {
					// Background work (scc's replayer, otter's
					// maintenance) counts: it is the process's.
					b.ReportMetric(float64(b.N)/cpu/1e6, "Mlookups/cpu-s")
				}
				n := 0
				misses.Range(func(any, any) bool { n++; return true })
				if n > 0 {
					b.Fatalf("%s: %d keys missed", im.name, n)
				}
			})
		}
		im.close()
	}
}

// TestLookupAgree checks that every implementation returns the same bytes
// for every key, so the benchmark compares like with like.
func TestLookupAgree(t *testing.T) {
	for _, mk := range []func(testing.TB) impl{newSCC, newOtter, newOtterSync, newRistretto} {
		im := mk(t)
		get := im.newGetter()
		for i := 0; i < lookupChunks; i++ {
			v, ok := get(i)
			want := chunkValue(i)
			if !ok || len(v) != lookupBytes || !bytes.Equal(v, want) {
				t.Fatalf("%s: key %d: ok=%v len=%d", im.name, i, ok, len(v))
			}
		}
		im.close()
	}
}
