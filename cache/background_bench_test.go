package cache

import (
	"hash/crc32"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/vfd"
)

// costLayout makes Encode cost about what a compressing filter costs
// (several passes over the chunk), so eviction stalls are visible.
type costLayout struct{ *fakeLayout }

func (l costLayout) Encode(c layout.Coord, ch layout.Chunk) (layout.Encoded, error) {
	b := ch.(*fakeChunk).b
	var s uint32
	for i := 0; i < 16; i++ {
		s = crc32.Update(s, crc32.IEEETable, b)
	}
	_ = s
	return l.fakeLayout.Encode(c, ch)
}

// discard drops writes (reads still go to the wrapped driver).
type discard struct{ vfd.Driver }

func (discard) WriteV([]vfd.Extent) error { return nil }

// BenchmarkPreEncodeStall: 2 writers stream new 64 KiB chunks through a
// cache of 32 chunks; between writes each waits 300 µs (a detector frame
// arriving), so the CPU has slack. Every write past the start must evict a
// dirty victim; without pre-encode the writer encodes it itself. Reported
// side by side from the same run: mean and p99 Write latency with
// pre-encode on (…/preencode) and off (…/baseline), and their ratio.
func BenchmarkPreEncodeStall(b *testing.B) {
	const chunk = 64 << 10
	var mean, p99 [2]float64
	for k, name := range []string{"baseline", "preencode"} {
		b.Run(name, func(b *testing.B) {
			pre := int64(-1)
			if k == 1 {
				pre = 16 * chunk
			}
			e := newEnv(b, Config{QuiescentBytes: 32 * chunk, ActiveMultiplier: 1.25, MinBytes: -1, BypassBytes: -1, PreEncodeBytes: pre})
			// Writes go nowhere: the figure is the cache's stall, not the
			// in-memory file's growth.
			e.drv.Driver = discard{e.drv.Driver}
			fl := newFakeLayout(&e.alloc, chunk)
			d, err := e.f.RegisterDataset(1, costLayout{fl}, DatasetOptions{})
			must(b, err)
			var mu sync.Mutex
			var lat []time.Duration
			var wg sync.WaitGroup
			per := b.N/2 + 1
			b.ResetTimer()
			for w := 0; w < 2; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					buf := pattern(chunk, byte(w))
					mine := make([]time.Duration, 0, per)
					for i := 0; i < per; i++ {
						time.Sleep(300 * time.Microsecond)
						t0 := time.Now()
						err := e.c.Write(bg, []Request{{Dataset: d, Coord: layout.Coord{uint64(i*2 + w)}, Full: true, Piece: &fakePiece{n: chunk, buf: buf}}})
						mine = append(mine, time.Since(t0))
						if err != nil {
							b.Error(err)
							return
						}
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				}(w)
			}
			wg.Wait()
			b.StopTimer()
			slices.Sort(lat)
			var sum time.Duration
			for _, x := range lat {
				sum += x
			}
			mean[k] = float64(sum) / float64(len(lat))
			p99[k] = float64(lat[len(lat)*99/100])
			b.ReportMetric(mean[k], "write-ns")
			b.ReportMetric(p99[k], "p99-write-ns")
			st := e.c.Stats()
			b.ReportMetric(float64(st.PreEncodeHits)/float64(max(st.DirtyEvictions, 1)), "pre-hit/dirty-evict")
			if k == 1 && mean[0] > 0 {
				b.ReportMetric(mean[1]/mean[0], "mean-vs-baseline")
				b.ReportMetric(p99[1]/p99[0], "p99-vs-baseline")
			}
		})
	}
}
