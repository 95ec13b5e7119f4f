package cache

import (
	"math/rand/v2"
	"sync"
	"testing"
)

// TestPeakResident64Goroutines: the memory promise with 64 goroutines on a
// cache of eight chunks, requests of one to three chunks (reads, partial
// writes that load, full writes that create) and flushes: chunks,
// reservations and the pinned chunks of in-flight requests all count, so
// the peak of resident bytes never passes the active limit.
func TestPeakResident64Goroutines(t *testing.T) {
	const chunk = 64
	e := newEnv(t, Config{QuiescentBytes: 4 * chunk, MinBytes: -1, BypassBytes: -1})
	limit := e.c.Stats().ActiveLimit
	d, l := e.dataset(1, -1, chunk)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 5))
			for n := 0; n < 50; n++ {
				var reqs []Request
				first := uint64(rng.IntN(40))
				for k := uint64(0); k < uint64(1+rng.IntN(3)); k++ {
					switch rng.IntN(3) {
					case 0:
						reqs = append(reqs, fullReq(d, l, pattern(chunk, byte(g)), first+k))
					default:
						reqs = append(reqs, partReq(d, 8, pattern(16, byte(g)), first+k))
					}
				}
				var err error
				if rng.IntN(2) == 0 {
					err = e.c.Write(bg, reqs)
				} else {
					for i := range reqs {
						reqs[i].Full = false
						reqs[i].Piece = &fakePiece{off: 0, n: 16, buf: make([]byte, 16)}
					}
					err = e.c.Read(bg, reqs)
				}
				if err == nil && n%10 == 9 && g%8 == 0 {
					err = e.f.Flush(bg)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := e.c.Stats()
	t.Logf("peak resident %d B, active limit %d B, %d evictions, %d space waits", st.PeakResidentBytes, limit, st.Evictions, st.SpaceWaits)
	if st.PeakResidentBytes > limit {
		t.Fatalf("peak resident %d B over the active limit %d B with 64 goroutines", st.PeakResidentBytes, limit)
	}
}

// ChargeMetadata makes room by dropping idle clean chunks before it
// charges, so index bytes admitted into a full cache do not take it past
// the active limit (without that, the peak is the limit plus the charge).
func TestChargeMetadataMakesRoomFirst(t *testing.T) {
	const chunk = 64
	e := newEnv(t, Config{QuiescentBytes: 4 * chunk, ActiveMultiplier: 1, MinBytes: -1, BypassBytes: -1, PreEncodeBytes: -1})
	limit := e.c.Stats().ActiveLimit
	d, l := e.dataset(1, -1, chunk)
	var reqs []Request
	for i := uint64(0); i < 4; i++ {
		reqs = append(reqs, fullReq(d, l, pattern(chunk, byte(i)), i))
	}
	must(t, e.c.Write(bg, reqs))
	must(t, e.f.Flush(bg)) // clean and idle: droppable without I/O
	if st := e.c.Stats(); st.ResidentBytes != limit {
		t.Fatalf("resident %d, want the cache full (%d)", st.ResidentBytes, limit)
	}
	e.f.ChargeMetadata(chunk + 1)
	st := e.c.Stats()
	if st.PeakResidentBytes > limit || st.ResidentBytes > limit {
		t.Fatalf("peak %d, resident %d after charging %d B into a full cache of %d B", st.PeakResidentBytes, st.ResidentBytes, chunk+1, limit)
	}
	if st.MetadataBytes != chunk+1 || st.Evictions != 2 {
		t.Fatalf("metadata %d, %d evictions; want %d and 2", st.MetadataBytes, st.Evictions, chunk+1)
	}
}
