package cache

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scc-dev/scc/cache/layout"
)

func stressScale() int {
	if os.Getenv("SCC_STRESS") == "long" {
		return 20
	}
	return 1
}

// TestModelConcurrent runs random reads, writes, flushes and evictions from
// many goroutines over many datasets with a budget of a few chunks, and
// checks every read, the final disk contents and the memory promise against
// a reference model. Each goroutine owns a disjoint set of chunks for
// writing (the engine's serialize module keeps overlapping writes apart);
// reads of other goroutines' chunks run concurrently without checks.
func TestModelConcurrent(t *testing.T) {
	for _, pk := range []PolicyKind{PolicyTwoStageLRU, PolicyLRU, PolicyMRU, PolicyLFU, PolicyRandom, PolicySIEVE} {
		for _, faults := range []bool{false, true} {
			if faults && pk != PolicyTwoStageLRU && pk != PolicySIEVE {
				continue // fault runs are slow; two policies cover the error paths
			}
			t.Run(fmt.Sprintf("%v/faults=%v", pk, faults), func(t *testing.T) {
				modelConcurrent(t, pk, faults, 300*stressScale())
			})
		}
	}
}

// TestModelConcurrentRereads is TestModelConcurrent with the bypass on and
// only chunks read again kept, so that most reads take the transient
// decode path (directdecode.go) while others write, flush and evict.
func TestModelConcurrentRereads(t *testing.T) {
	for _, faults := range []bool{false, true} {
		t.Run(fmt.Sprintf("faults=%v", faults), func(t *testing.T) {
			modelConcurrent(t, PolicyTwoStageLRU, faults, 300*stressScale(), func(c *Config) {
				c.BypassBytes, c.AdmitOnReread = 0, true
			})
		})
	}
}

func modelConcurrent(t *testing.T, pk PolicyKind, faults bool, opsPer int, tweaks ...func(*Config)) {
	const (
		nds     = 6
		grid    = 4 // 4x4 chunks per dataset
		cdim    = 8 // 8x8 bytes per chunk
		chunk   = cdim * cdim
		workers = 8
	)
	cfg := Config{QuiescentBytes: 6 * chunk, MinBytes: -1, Policy: pk, Workers: 3, BypassBytes: -1}
	for _, tw := range tweaks {
		tw(&cfg)
	}
	e := newEnv(t, cfg)
	type dsl struct {
		d *Dataset
		l *fakeLayout
	}
	dss := make([]dsl, nds)
	for i := range dss {
		min := int64(-1)
		if i == 0 {
			min = 2 * chunk
		}
		d, l := e.dataset(uint64(100+i), min, cdim, cdim)
		dss[i] = dsl{d, l}
	}
	owner := func(ds, i, j int) int { return (ds*31 + i*7 + j) % workers }
	type ck struct{ ds, i, j int }
	models := make([]map[ck][]byte, workers)
	for w := range models {
		models[w] = map[ck][]byte{}
	}
	var chaos atomic.Bool
	stopChaos := make(chan struct{})
	var chaosWG sync.WaitGroup
	if faults {
		chaosWG.Add(1)
		go func() {
			defer chaosWG.Done()
			r := rand.New(rand.NewPCG(9, 9))
			for {
				select {
				case <-stopChaos:
					e.drv.failWrite.Store(false)
					return
				default:
				}
				e.drv.failWrite.Store(r.IntN(4) == 0)
				chaos.Store(true)
				time.Sleep(20 * time.Microsecond)
			}
		}()
	}
	// retry repeats an idempotent operation while injected faults fail it.
	// The chaos goroutine clears the fault within microseconds when it
	// runs; on a loaded machine it may not run for a while, so a failed
	// try yields and, after many, sleeps, rather than counting tries that
	// cost nothing against a goroutine that is not scheduled.
	retry := func(f func() error) error {
		for k := 0; ; k++ {
			err := f()
			if err == nil || !faults || !errors.Is(err, errDisk) || k > 100000 {
				return err
			}
			if k < 1000 {
				runtime.Gosched()
			} else {
				time.Sleep(50 * time.Microsecond)
			}
		}
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(pk)))
			model := models[w]
			var mine []ck
			for ds := 0; ds < nds; ds++ {
				for i := 0; i < grid; i++ {
					for j := 0; j < grid; j++ {
						if owner(ds, i, j) == w {
							mine = append(mine, ck{ds, i, j})
						}
					}
				}
			}
			get := func(c ck) []byte {
				if b, ok := model[c]; ok {
					return b
				}
				return make([]byte, chunk)
			}
			for op := 0; op < opsPer; op++ {
				switch k := r.IntN(20); {
				case k < 8: // write 1..3 owned chunks, full or partial
					n := 1 + r.IntN(3)
					var reqs []Request
					seen := map[ck]bool{}
					for q := 0; q < n; q++ {
						c := mine[r.IntN(len(mine))]
						if seen[c] {
							continue
						}
						seen[c] = true
						m := append([]byte(nil), get(c)...)
						x := dss[c.ds]
						if r.IntN(2) == 0 {
							buf := pattern(chunk, byte(r.IntN(256)))
							copy(m, buf)
							reqs = append(reqs, fullReq(x.d, x.l, buf, uint64(c.i), uint64(c.j)))
						} else {
							off := r.IntN(chunk)
							buf := pattern(1+r.IntN(chunk-off), byte(r.IntN(256)))
							copy(m[off:], buf)
							reqs = append(reqs, partReq(x.d, off, buf, uint64(c.i), uint64(c.j)))
						}
						model[c] = m
					}
					if err := retry(func() error { return e.c.Write(bg, reqs) }); err != nil {
						t.Error(err)
						return
					}
				case k < 15: // read owned chunks and check; plus a foreign one
					var reqs []Request
					var want [][]byte
					for q := 0; q < 1+r.IntN(3); q++ {
						c := mine[r.IntN(len(mine))]
						x := dss[c.ds]
						buf := make([]byte, chunk)
						reqs = append(reqs, fullReq(x.d, x.l, buf, uint64(c.i), uint64(c.j)))
						want = append(want, get(c))
					}
					x := dss[r.IntN(nds)]
					reqs = append(reqs, fullReq(x.d, x.l, make([]byte, chunk), uint64(r.IntN(grid)), uint64(r.IntN(grid))))
					if err := retry(func() error { return e.c.Read(bg, reqs) }); err != nil {
						t.Error(err)
						return
					}
					for q := range want {
						if got := reqs[q].Piece.(*fakePiece).buf; !bytes.Equal(got, want[q]) {
							t.Errorf("worker %d: read %v mismatch", w, reqs[q].Coord)
							return
						}
					}
				case k < 17:
					if err := retry(func() error { return e.f.Flush(bg) }); err != nil {
						t.Error(err)
						return
					}
				case k < 18:
					x := dss[r.IntN(nds)]
					if err := retry(func() error { return x.d.Flush(bg, r.IntN(2) == 0) }); err != nil {
						t.Error(err)
						return
					}
				default: // direct read of an owned chunk
					c := mine[r.IntN(len(mine))]
					x := dss[c.ds]
					var img []byte
					var loc layout.Location
					if err := retry(func() (err error) {
						img, loc, err = x.d.DirectRead(bg, layout.Coord{uint64(c.i), uint64(c.j)})
						return err
					}); err != nil {
						t.Error(err)
						return
					}
					got := make([]byte, chunk)
					if loc.Exists() {
						ch, err := x.l.Decode(nil, loc, img)
						if err != nil {
							t.Error(err)
							return
						}
						got = ch.(*fakeChunk).b
					}
					if !bytes.Equal(got, get(c)) {
						t.Errorf("worker %d: direct read %v mismatch", w, c)
						return
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(stopChaos)
	chaosWG.Wait()
	if t.Failed() {
		return
	}
	st := e.c.Stats()
	t.Logf("stats: hits %d misses %d loads %d bypasses %d evictions %d dirty evictions %d coalesced %d waits %d flushed %d peak %d/%d",
		st.Hits, st.Misses, st.Loads, st.Bypasses, st.Evictions, st.DirtyEvictions, st.Coalesced, st.SpaceWaits, st.ChunksFlushed, st.PeakResidentBytes, st.ActiveLimit)
	if len(tweaks) > 0 && st.Bypasses == 0 {
		t.Fatal("no read was served without keeping its chunk: the variant shows nothing")
	}
	if st.Evictions == 0 || st.DirtyEvictions == 0 {
		t.Fatal("the workload never evicted: budget too large for the test to mean anything")
	}
	if st.PeakResidentBytes > st.ActiveLimit+chunk {
		t.Fatalf("peak resident %d > active limit %d + one chunk", st.PeakResidentBytes, st.ActiveLimit)
	}
	must(t, e.f.Flush(bg))
	if st := e.c.Stats(); st.DirtyBytes != 0 {
		t.Fatalf("dirty bytes %d after a clean flush", st.DirtyBytes)
	}
	// Everything is on disk: a fresh cache sees the model.
	c2 := newTestCache(t, Config{QuiescentBytes: 1 << 20})
	f2, err := c2.RegisterFile(e.drv)
	must(t, err)
	for ds, x := range dss {
		d2, err := f2.RegisterDataset(x.d.id, x.l, DatasetOptions{})
		must(t, err)
		for i := 0; i < grid; i++ {
			for j := 0; j < grid; j++ {
				want, ok := models[owner(ds, i, j)][ck{ds, i, j}]
				if !ok {
					want = make([]byte, chunk)
				}
				got := make([]byte, chunk)
				must(t, c2.Read(bg, []Request{fullReq(d2, x.l, got, uint64(i), uint64(j))}))
				if !bytes.Equal(got, want) {
					t.Fatalf("disk chunk ds%d (%d,%d) differs from the model", ds, i, j)
				}
			}
		}
	}
}

// TestModelSequential adds extent changes, unregister/re-register, direct
// writes and tiny budgets to the random model, single-threaded so that
// extent changes follow the engine's drain rule.
func TestModelSequential(t *testing.T) {
	for seed := uint64(1); seed <= uint64(4*stressScale()); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { modelSequential(t, seed) })
	}
}

func modelSequential(t *testing.T, seed uint64) {
	e := newEnv(t, Config{QuiescentBytes: 5 * 16, MinBytes: -1, BypassBytes: -1, Workers: 2})
	extentWorker(t, e, seed, []uint64{1, 2, 3}, 400)
}

// TestModelConcurrentExtents runs extentWorker on several goroutines that
// share one tiny cache, each owning its datasets (extent changes drain only
// the dataset concerned, as the engine does).
func TestModelConcurrentExtents(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 6 * 16, MinBytes: -1, BypassBytes: -1, Workers: 3})
	var wg sync.WaitGroup
	for w := uint64(0); w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			extentWorker(t, e, 100+w, []uint64{10*w + 1, 10*w + 2}, 300*stressScale())
		}()
	}
	wg.Wait()
	if st := e.c.Stats(); st.Evictions == 0 || st.PeakResidentBytes > st.ActiveLimit+16 {
		t.Fatalf("stats %+v", st)
	}
}

// extentWorker drives random writes, reads, extent changes, re-registration,
// direct writes and flushes over its own datasets and checks every read
// against a model.
func extentWorker(t *testing.T, e *env, seed uint64, ids []uint64, ops int) {
	const (
		cdim  = 4
		chunk = cdim * cdim
		maxE  = 5 * cdim // extent up to 5x5 chunks
	)
	fail := func(format string, args ...any) {
		t.Errorf(format, args...)
	}
	r := rand.New(rand.NewPCG(seed, 42))
	type dstate struct {
		d    *Dataset
		l    *fakeLayout
		dims []uint64
		m    map[[2]uint64][]byte // element bytes of each chunk
	}
	var dss []*dstate
	for _, id := range ids {
		l := newFakeLayout(&e.alloc, cdim, cdim)
		d, err := e.f.RegisterDataset(id, l, DatasetOptions{MinBytes: -1})
		if err != nil {
			fail("%v", err)
			return
		}
		dss = append(dss, &dstate{d: d, l: l, dims: []uint64{maxE, maxE}, m: map[[2]uint64][]byte{}})
	}
	nds := len(dss)
	inExtent := func(s *dstate) (uint64, uint64, bool) {
		gi, gj := (s.dims[0]+cdim-1)/cdim, (s.dims[1]+cdim-1)/cdim
		if gi == 0 || gj == 0 {
			return 0, 0, false
		}
		return uint64(r.IntN(int(gi))), uint64(r.IntN(int(gj))), true
	}
	get := func(s *dstate, i, j uint64) []byte {
		if b, ok := s.m[[2]uint64{i, j}]; ok {
			return b
		}
		return make([]byte, chunk)
	}
	check := func(err error) bool {
		if err != nil {
			fail("%v", err)
			return false
		}
		return true
	}
	for op := 0; op < ops; op++ {
		s := dss[r.IntN(nds)]
		switch k := r.IntN(20); {
		case k < 8:
			i, j, ok := inExtent(s)
			if !ok {
				continue
			}
			m := append([]byte(nil), get(s, i, j)...)
			off := r.IntN(chunk)
			buf := pattern(1+r.IntN(chunk-off), byte(op))
			copy(m[off:], buf)
			s.m[[2]uint64{i, j}] = m
			if !check(e.c.Write(bg, []Request{partReq(s.d, off, buf, i, j)})) {
				return
			}
		case k < 13:
			i, j, ok := inExtent(s)
			if !ok {
				continue
			}
			got := make([]byte, chunk)
			if !check(e.c.Read(bg, []Request{fullReq(s.d, s.l, got, i, j)})) {
				return
			}
			if !bytes.Equal(got, get(s, i, j)) {
				fail("op %d: ds %d chunk (%d,%d): got %v want %v", op, s.d.id, i, j, got, get(s, i, j))
				return
			}
		case k < 16: // set extent
			nd := []uint64{uint64(r.IntN(maxE + 1)), uint64(r.IntN(maxE + 1))}
			if !check(s.d.PrepareExtent(bg, s.dims, nd)) {
				return
			}
			s.l.prune(nd) // the engine's half
			if !check(s.d.SetExtent(bg, s.dims, nd)) {
				return
			}
			for key, b := range s.m {
				c := layout.Coord{key[0], key[1]}
				if whollyOutside(c, s.l.cd, nd) {
					delete(s.m, key)
					continue
				}
				// Only chunks a shrink cuts through are trimmed (SetExtent);
				// elements outside the extent elsewhere stay as written.
				cut := false
				for dim := range nd {
					if nd[dim] < s.dims[dim] && nd[dim]%cdim != 0 && c[dim] == nd[dim]/cdim {
						cut = true
					}
				}
				for x := range b {
					if cut && s.l.outside(c, x, nd) {
						b[x] = 0
					}
				}
			}
			s.dims = nd
		case k < 17:
			if !check(s.d.Unregister(bg)) {
				return
			}
			d, err := e.f.RegisterDataset(s.d.id, s.l, DatasetOptions{MinBytes: -1})
			if !check(err) {
				return
			}
			s.d = d
		case k < 18:
			i, j, ok := inExtent(s)
			if !ok {
				continue
			}
			b := pattern(chunk, byte(op*3))
			enc, _ := s.l.Encode(nil, &fakeChunk{b: b})
			if !check(s.d.DirectWrite(bg, layout.Coord{i, j}, enc)) {
				return
			}
			s.m[[2]uint64{i, j}] = b
		case k < 19:
			if !check(s.d.Flush(bg, r.IntN(2) == 0)) {
				return
			}
		default:
			if !check(e.f.Flush(bg)) {
				return
			}
		}
		if st := e.c.Stats(); st.PeakResidentBytes > st.ActiveLimit+chunk {
			fail("peak %d", st.PeakResidentBytes)
			return
		}
	}
}
