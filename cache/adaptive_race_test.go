package cache

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAdaptiveResizeRacesRequests runs reads, writes and flushes from many
// goroutines while adaptive sizing closes epochs every few accesses,
// flash-increases and idles, and another goroutine keeps changing the
// configuration (SetConfig, RestoreAdaptiveState) and reading Stats. Every
// read is checked against a per-worker reference model, the file's final
// contents against the union of the models, the hard cap against the peak,
// and the accounting (newTestCache's cleanup, checkCache) at the end.
func TestAdaptiveResizeRacesRequests(t *testing.T) {
	for _, pk := range []PolicyKind{PolicyTwoStageLRU, PolicyS3FIFO, PolicySIEVE} {
		t.Run(pk.String(), func(t *testing.T) { adaptiveRace(t, pk, 250*stressScale()) })
	}
}

func adaptiveRace(t *testing.T, pk PolicyKind, opsPer int) {
	const (
		workers = 8
		nChunks = 96
		capB    = 24 * adChunk
	)
	base := Config{
		QuiescentBytes: 8 * adChunk, MinBytes: -1, BypassBytes: -1, Policy: pk, Workers: 3,
		MaxMemoryBytes: capB,
		Adaptive: AdaptiveConfig{Enabled: true, MinBytes: 2 * adChunk, MaxBytes: 64 * adChunk,
			EpochAccesses: 16, EpochTimeout: time.Millisecond, MinGain: 0.01},
	}
	e := newEnv(t, base)
	d, l := e.dataset(1, -1, adChunk)
	models := make([]map[int][]byte, workers)
	for w := range models {
		models[w] = map[int][]byte{}
	}
	owner := func(i int) int { return i % workers }

	stop := make(chan struct{})
	var resizes atomic.Int64
	var side sync.WaitGroup
	side.Add(1)
	go func() { // the reconfigurer
		defer side.Done()
		r := rand.New(rand.NewPCG(uint64(pk), 77))
		for {
			select {
			case <-stop:
				return
			default:
			}
			cfg := base
			switch r.IntN(4) {
			case 0:
				cfg.Adaptive.InitialBytes = int64(2+r.IntN(60)) * adChunk
				cfg.Adaptive.DecrementFactor = 0.3 + r.Float64()*0.7
			case 1:
				cfg.Adaptive.Enabled = false
				cfg.QuiescentBytes = int64(1+r.IntN(40)) * adChunk
				cfg.ActiveMultiplier = 1 + r.Float64()
			case 2:
				st := e.c.AdaptiveState()
				if st.Config.Enabled {
					st.SizeBytes = st.Config.MinBytes + r.Int64N(st.Config.MaxBytes-st.Config.MinBytes+1)
				}
				if err := e.c.RestoreAdaptiveState(st); err != nil {
					t.Errorf("restore: %v", err)
					return
				}
				resizes.Add(1)
				continue
			}
			if err := e.c.SetConfig(bg, cfg); err != nil {
				t.Errorf("SetConfig: %v", err)
				return
			}
			resizes.Add(1)
			if st := e.c.Stats(); st.QuiescentLimit > capB || st.ActiveLimit > capB {
				t.Errorf("limits %d/%d over the cap %d", st.QuiescentLimit, st.ActiveLimit, capB)
				return
			}
			time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
		}
	}()

	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(pk)+1))
			model := models[w]
			var mine []int
			for i := 0; i < nChunks; i++ {
				if owner(i) == w {
					mine = append(mine, i)
				}
			}
			get := func(i int) []byte {
				if b, ok := model[i]; ok {
					return b
				}
				return make([]byte, adChunk)
			}
			for op := 0; op < opsPer; op++ {
				switch k := r.IntN(20); {
				case k < 7: // write one or more owned chunks, whole or partly
					var reqs []Request
					seen := map[int]bool{}
					for q := 0; q < 1+r.IntN(4); q++ {
						i := mine[r.IntN(len(mine))]
						if seen[i] {
							continue
						}
						seen[i] = true
						m := append([]byte(nil), get(i)...)
						if r.IntN(2) == 0 {
							buf := pattern(adChunk, byte(r.IntN(256)))
							copy(m, buf)
							reqs = append(reqs, fullReq(d, l, buf, uint64(i)))
						} else {
							off := r.IntN(adChunk)
							buf := pattern(1+r.IntN(adChunk-off), byte(r.IntN(256)))
							copy(m[off:], buf)
							reqs = append(reqs, partReq(d, off, buf, uint64(i)))
						}
						model[i] = m
					}
					if err := e.c.Write(bg, reqs); err != nil {
						t.Error(err)
						return
					}
				case k < 18: // read owned chunks (checked), sometimes many at once (flash), plus foreign ones
					var reqs []Request
					var want [][]byte
					for q := 0; q < 1+r.IntN(3); q++ {
						i := mine[r.IntN(len(mine))]
						reqs = append(reqs, fullReq(d, l, make([]byte, adChunk), uint64(i)))
						want = append(want, get(i))
					}
					if r.IntN(10) == 0 { // every chunk at once: more than the cache holds
						for i := 0; i < nChunks; i++ {
							if owner(i) != w {
								reqs = append(reqs, fullReq(d, l, make([]byte, adChunk), uint64(i)))
							}
						}
					} else {
						reqs = append(reqs, fullReq(d, l, make([]byte, adChunk), uint64(r.IntN(nChunks))))
					}
					if err := e.c.Read(bg, reqs); err != nil {
						t.Error(err)
						return
					}
					for q := range want {
						if got := reqs[q].Piece.(*fakePiece).buf; !bytes.Equal(got, want[q]) {
							t.Errorf("worker %d: chunk %v differs from the model", w, reqs[q].Coord)
							return
						}
					}
				default:
					if err := e.f.Flush(bg); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	side.Wait()
	if t.Failed() {
		return
	}
	st := e.c.Stats()
	t.Logf("resizes by the reconfigurer %d; epochs %d grows %d shrinks %d flashes %d; evictions %d dirty %d; peak %d",
		resizes.Load(), st.AdaptiveEpochs, st.ResizeGrows, st.ResizeShrinks, st.FlashIncreases, st.Evictions, st.DirtyEvictions, st.PeakResidentBytes)
	if st.AdaptiveEpochs == 0 || st.DirtyEvictions == 0 {
		t.Fatal("no epoch closed or nothing evicted dirty: the test exercised nothing")
	}
	// Reservations are cut to fit the active limit (under the cap); the
	// one excess allowed is one chunk admitted into an empty cache.
	if max := int64(capB + adChunk); st.PeakResidentBytes > max {
		t.Fatalf("peak resident %d over the cap %d plus one request", st.PeakResidentBytes, capB)
	}
	if err := checkAgeRing(e.c); err != nil {
		t.Fatal(err)
	}
	must(t, e.f.Flush(bg))
	c2 := newTestCache(t, Config{QuiescentBytes: 1 << 20})
	f2, err := c2.RegisterFile(e.drv)
	must(t, err)
	d2, err := f2.RegisterDataset(1, l, DatasetOptions{})
	must(t, err)
	for i := 0; i < nChunks; i++ {
		want, ok := models[owner(i)][i]
		if !ok {
			want = make([]byte, adChunk)
		}
		got := make([]byte, adChunk)
		must(t, c2.Read(bg, []Request{fullReq(d2, l, got, uint64(i))}))
		if !bytes.Equal(got, want) {
			t.Fatal(fmt.Sprintf("chunk %d on disk differs from the model", i))
		}
	}
}
