package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

const adChunk = 64 // bytes per chunk in these tests (1-D chunks of 64 elements)

// adaptiveFixture writes n chunks (chunk i holds pattern(adChunk, i)) to a
// file through a plain cache, then opens that file in a new cache with
// cfg, so the test starts cold with only its own accesses counted.
func adaptiveFixture(t *testing.T, n int, cfg Config) (*Cache, *Dataset, *fakeLayout) {
	t.Helper()
	e := newEnv(t, Config{QuiescentBytes: 1 << 20, BypassBytes: -1})
	d, l := e.dataset(1, -1, adChunk)
	for i := 0; i < n; i += 64 {
		var reqs []Request
		for j := i; j < min(i+64, n); j++ {
			reqs = append(reqs, fullReq(d, l, pattern(adChunk, byte(j)), uint64(j)))
		}
		must(t, e.c.Write(bg, reqs))
	}
	must(t, e.f.Flush(bg))
	c := newTestCache(t, cfg)
	f, err := c.RegisterFile(e.drv)
	must(t, err)
	d2, err := f.RegisterDataset(1, l, DatasetOptions{MinBytes: -1})
	must(t, err)
	return c, d2, l
}

func readChunk(t *testing.T, c *Cache, d *Dataset, l *fakeLayout, i int) {
	t.Helper()
	buf := make([]byte, adChunk)
	must(t, c.Read(bg, []Request{fullReq(d, l, buf, uint64(i))}))
	if !bytes.Equal(buf, pattern(adChunk, byte(i))) {
		t.Fatalf("chunk %d: wrong contents", i)
	}
}

func reasons(st Stats) map[ResizeReason]int {
	m := map[ResizeReason]int{}
	for _, d := range st.ResizeLog {
		m[d.Reason]++
	}
	return m
}

func TestAdaptiveConfigValidate(t *testing.T) {
	on := func(a AdaptiveConfig) Config {
		a.Enabled = true
		return Config{QuiescentBytes: 1 << 20, Adaptive: a}
	}
	if err := on(AdaptiveConfig{}).Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	p := resolveAdaptive(AdaptiveConfig{Enabled: true}, 1<<20)
	if p.initial != 1<<20 || p.min != 1<<18 || p.max != 4<<20 || p.epoch != DefaultEpochAccesses ||
		p.timeout != DefaultEpochTimeout || p.lower != DefaultLowerHitRate || p.upper != DefaultUpperHitRate ||
		p.incr != 2 || p.decr != 0.9 || p.maxIncr != math.MaxInt64 || p.maxDecr != math.MaxInt64 ||
		p.minGain != DefaultMinGain || p.flash != 1 || p.ageOut != DefaultAgeOutEpochs {
		t.Fatalf("defaults resolved to %+v", *p)
	}
	// Off: adaptive fields are not looked at.
	if err := (Config{Adaptive: AdaptiveConfig{MinBytes: -5}}).Validate(); err != nil {
		t.Fatalf("disabled adaptive config validated: %v", err)
	}
	for _, bad := range []Config{
		on(AdaptiveConfig{MinBytes: -1}),
		on(AdaptiveConfig{MaxBytes: -1}),
		on(AdaptiveConfig{InitialBytes: -1}),
		on(AdaptiveConfig{MinBytes: 2 << 20, MaxBytes: 1 << 20}),
		on(AdaptiveConfig{InitialBytes: 8 << 20, MaxBytes: 4 << 20}),
		on(AdaptiveConfig{InitialBytes: 1 << 10, MinBytes: 1 << 20}),
		on(AdaptiveConfig{EpochAccesses: -1}),
		on(AdaptiveConfig{LowerHitRate: 1.5}),
		on(AdaptiveConfig{LowerHitRate: math.NaN()}),
		on(AdaptiveConfig{UpperHitRate: -0.5}),
		on(AdaptiveConfig{LowerHitRate: 0.9, UpperHitRate: 0.5}),
		on(AdaptiveConfig{IncrementFactor: 0.5}),
		on(AdaptiveConfig{IncrementFactor: math.Inf(1)}),
		on(AdaptiveConfig{DecrementFactor: 1.5}),
		on(AdaptiveConfig{DecrementFactor: -1}),
		on(AdaptiveConfig{MaxIncrementBytes: -1}),
		on(AdaptiveConfig{MaxDecrementBytes: -1}),
		on(AdaptiveConfig{MinGain: 2}),
		on(AdaptiveConfig{FlashMultiple: 100}),
		on(AdaptiveConfig{FlashMultiple: math.NaN()}),
		on(AdaptiveConfig{AgeOutEpochs: 17}),
		{MaxMemoryBytes: -1},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v", bad.Adaptive, err)
		}
		if _, err := New(bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New %+v: %v", bad.Adaptive, err)
		}
	}
}

// TestAdaptiveDecide checks the policy arithmetic on its own.
func TestAdaptiveDecide(t *testing.T) {
	p := resolveAdaptive(AdaptiveConfig{Enabled: true, MinBytes: 100, MaxBytes: 10000, InitialBytes: 1000,
		MaxIncrementBytes: 3000, MaxDecrementBytes: 50, AgeOutEpochs: -1}, 0)
	for _, tc := range []struct {
		name                  string
		size, hits, acc, gain int64
		idle                  bool
		want                  int64
		reason                ResizeReason
	}{
		{"low hit rate, larger would help", 1000, 500, 1000, 300, false, 2000, ReasonLowHitRate},
		{"growth bounded by MaxIncrementBytes", 4000, 500, 1000, 300, false, 7000, ReasonLowHitRate},
		{"growth bounded by MaxBytes", 9000, 500, 1000, 300, false, 10000, ReasonLowHitRate},
		{"low hit rate, larger would not help: hold", 1000, 500, 1000, 5, false, 1000, ""},
		{"between thresholds: hold", 1000, 950, 1000, 50, false, 1000, ""},
		{"high hit rate: shrink (bounded by MaxDecrementBytes)", 1000, 1000, 1000, 0, false, 950, ReasonHighHitRate},
		{"high hit rate at small size: factor", 200, 1000, 1000, 0, false, 180, ReasonHighHitRate},
		{"shrink bounded by MinBytes", 105, 1000, 1000, 0, false, 100, ReasonHighHitRate},
		{"nothing helps (scan): shrink", 1000, 0, 1000, 0, false, 950, ReasonNoGain},
		{"idle: shrink", 1000, 0, 0, 0, true, 950, ReasonIdle},
	} {
		d := p.decide(tc.size, tc.hits, tc.acc, tc.gain, 0, 0, tc.idle)
		if d.NewBytes != tc.want || d.Reason != tc.reason || d.OldBytes != tc.size {
			t.Errorf("%s: got %d %q, want %d %q", tc.name, d.NewBytes, d.Reason, tc.want, tc.reason)
		}
	}
	// Growth sized by the deepest ghost hit (plus an eighth), within the
	// factor; decrease by age-out to the recent bytes plus an eighth.
	q := resolveAdaptive(AdaptiveConfig{Enabled: true, MinBytes: 100, MaxBytes: 10000, InitialBytes: 1000}, 0)
	for _, tc := range []struct {
		name                              string
		size, hits, acc, gain, depth, rec int64
		want                              int64
	}{
		{"grow by depth", 1000, 500, 1000, 300, 400, 0, 1450},
		{"depth beyond the factor", 1000, 500, 1000, 300, 4000, 0, 2000},
		{"age out to recent bytes", 4000, 1000, 1000, 0, 0, 800, 900},
		{"recent above the size: hold", 1000, 1000, 1000, 0, 0, 2000, 1000},
		{"age out bounded by MinBytes", 1000, 1000, 1000, 0, 0, 10, 100},
	} {
		if d := q.decide(tc.size, tc.hits, tc.acc, tc.gain, tc.depth, tc.rec, false); d.NewBytes != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, d.NewBytes, tc.want)
		}
	}
}

// TestAdaptivePhases runs a phase-changing workload through a real cache:
// the cache grows when the hit rate falls and the working set fits under
// the maximum, shrinks when the working set shrinks, does not grow on a
// scan larger than the maximum (a larger cache would not help) but
// shrinks, grows to (and never past) the maximum for a working set larger
// than it, and shrinks when idle.
func TestAdaptivePhases(t *testing.T) {
	const (
		minC, maxC, initC = 8, 256, 32 // in chunks
	)
	c, d, l := adaptiveFixture(t, 4096, Config{
		QuiescentBytes: initC * adChunk, ActiveMultiplier: 1, MinBytes: -1, BypassBytes: -1, PreEncodeBytes: -1,
		Adaptive: AdaptiveConfig{Enabled: true, MinBytes: minC * adChunk, MaxBytes: maxC * adChunk,
			EpochAccesses: 256, EpochTimeout: -1, DecrementFactor: 0.5},
	})
	r := rand.New(rand.NewPCG(1, 2))
	size := func() int64 { return c.Stats().QuiescentLimit }
	check := func() {
		t.Helper()
		if s := size(); s < minC*adChunk || s > maxC*adChunk {
			t.Fatalf("size %d outside [%d, %d]", s, minC*adChunk, maxC*adChunk)
		}
	}
	// run accesses chunks from next() until done() or a generous bound.
	run := func(name string, next func() int, done func() bool) Stats {
		t.Helper()
		before := c.Stats()
		deadline := time.Now().Add(30 * time.Second)
		for i := 0; ; i++ {
			readChunk(t, c, d, l, next())
			if i%64 == 0 {
				check()
				if done() {
					break
				}
				if time.Now().After(deadline) {
					st := c.Stats()
					t.Fatalf("%s: not reached; size %d, log %+v", name, st.QuiescentLimit, st.ResizeLog)
				}
			}
		}
		return c.Stats().Sub(before)
	}

	// 1. A working set of 160 chunks (fits under the maximum): grows.
	grew := run("grow", func() int { return r.IntN(160) }, func() bool { return size() >= 160*adChunk })
	if grew.ResizeGrows == 0 || reasons(grew)[ReasonLowHitRate] == 0 {
		t.Fatalf("grew without a low-hit-rate decision: %+v", grew.ResizeLog)
	}
	// It settles: a while on the same working set hits almost always.
	settled := run("settle", func() int { return r.IntN(160) }, func() bool { return c.Stats().AdaptiveEpochs >= grew.AdaptiveEpochs+4 })
	if hr := float64(settled.Hits) / float64(settled.Hits+settled.Misses); hr < 0.8 {
		t.Fatalf("hit rate %.2f on a working set that fits", hr)
	}

	// 2. The working set shrinks to 12 chunks: the cache follows it down.
	shrank := run("shrink", func() int { return r.IntN(12) }, func() bool { return size() <= 64*adChunk })
	if reasons(shrank)[ReasonHighHitRate] == 0 {
		t.Fatalf("shrank without a high-hit-rate decision: %+v", shrank.ResizeLog)
	}

	// 3. A scan over 2048 chunks (8× the maximum): misses that never come
	// back. The cache must not grow, and shrinks to the minimum.
	next := 1024
	scan := run("scan", func() int { next++; return 1024 + next%2048 }, func() bool { return size() == minC*adChunk })
	if scan.ResizeGrows != 0 {
		t.Fatalf("a scan larger than the maximum grew the cache: %+v", scan.ResizeLog)
	}
	if reasons(scan)[ReasonNoGain]+reasons(scan)[ReasonHighHitRate] == 0 {
		t.Fatalf("scan: no shrink: %+v", scan.ResizeLog)
	}

	// 4. A working set of 1024 chunks (4× the maximum): grows to the
	// maximum and never past it (check runs every 64 accesses).
	run("max", func() int { return r.IntN(1024) }, func() bool { return size() == maxC*adChunk })
	e0 := c.Stats().AdaptiveEpochs
	run("stay at max", func() int { return r.IntN(1024) }, func() bool { return c.Stats().AdaptiveEpochs >= e0+8 })
	if st := c.Stats(); st.PeakResidentBytes > maxC*adChunk+adChunk {
		t.Fatalf("peak resident %d over the maximum %d", st.PeakResidentBytes, maxC*adChunk)
	}
	if err := checkAgeRing(c); err != nil {
		t.Fatal(err)
	}
}

// checkAgeRing verifies the age-out ring against the entries: each slot
// holds the bytes stamped into it by entries still linked.
func checkAgeRing(c *Cache) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var want [ageSlots]int64
	c.chunks.Range(func(_ chunkKey, e *entry) bool {
		if e.linked && c.mu.ring.valid(e.age.epoch) {
			want[(e.age.epoch-1)%ageSlots] += e.age.bytes
		}
		return true
	})
	if want != c.mu.ring.slots {
		return fmt.Errorf("age ring %v, entries say %v", c.mu.ring.slots, want)
	}
	return nil
}

// TestAdaptiveIdleShrinksWritingBack: an idle cache full of dirty chunks
// shrinks to its minimum, and the chunks pushed out are written back, not
// dropped.
func TestAdaptiveIdleShrinksWritingBack(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 64 * adChunk, ActiveMultiplier: 1, MinBytes: -1, BypassBytes: -1, PreEncodeBytes: -1,
		Adaptive: AdaptiveConfig{Enabled: true, MinBytes: 4 * adChunk, MaxBytes: 64 * adChunk, EpochTimeout: 5 * time.Millisecond}})
	d, l := e.dataset(1, -1, adChunk)
	for i := 0; i < 48; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(adChunk, byte(i+3)), uint64(i))}))
	}
	if st := e.c.Stats(); st.DirtyBytes != 48*adChunk {
		t.Fatalf("dirty %d, want %d", st.DirtyBytes, 48*adChunk)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := e.c.Stats()
		if st.QuiescentLimit == 4*adChunk && st.ResidentBytes <= 4*adChunk {
			if reasons(st)[ReasonIdle] == 0 || st.DirtyEvictions < 44 {
				t.Fatalf("shrank without idle decisions or write-backs: %+v, dirty evictions %d", st.ResizeLog, st.DirtyEvictions)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle cache did not shrink: size %d resident %d log %+v", st.QuiescentLimit, st.ResidentBytes, st.ResizeLog)
		}
		time.Sleep(time.Millisecond)
	}
	// Nothing was lost: a fresh cache reads every chunk from the file
	// once the few still resident are flushed.
	must(t, e.f.Flush(bg))
	c2 := newTestCache(t, Config{QuiescentBytes: 1 << 20})
	f2, err := c2.RegisterFile(e.drv)
	must(t, err)
	d2, err := f2.RegisterDataset(1, l, DatasetOptions{})
	must(t, err)
	for i := 0; i < 48; i++ {
		got := make([]byte, adChunk)
		must(t, c2.Read(bg, []Request{fullReq(d2, l, got, uint64(i))}))
		if !bytes.Equal(got, pattern(adChunk, byte(i+3))) {
			t.Fatalf("chunk %d lost", i)
		}
	}
}

// TestAdaptiveFlashIncrease: one request needing more than the active
// limit grows the cache at once, up to the maximum.
func TestAdaptiveFlashIncrease(t *testing.T) {
	c, d, l := adaptiveFixture(t, 256, Config{
		QuiescentBytes: 8 * adChunk, ActiveMultiplier: 1, MinBytes: -1, BypassBytes: -1,
		Adaptive: AdaptiveConfig{Enabled: true, MinBytes: 4 * adChunk, MaxBytes: 100 * adChunk, EpochTimeout: -1},
	})
	adm := c.Admission(func(int64) Admission { return &fakeAdmission{} }).(*fakeAdmission)
	read := func(from, n int) {
		var reqs []Request
		for i := from; i < from+n; i++ {
			reqs = append(reqs, fullReq(d, l, make([]byte, adChunk), uint64(i)))
		}
		must(t, c.Read(bg, reqs))
		for i, r := range reqs {
			if !bytes.Equal(r.Piece.(*fakePiece).buf, pattern(adChunk, byte(from+i))) {
				t.Fatalf("chunk %d wrong", from+i)
			}
		}
	}
	read(0, 40)
	st := c.Stats()
	if st.FlashIncreases != 1 || st.QuiescentLimit != 48*adChunk || reasons(st)[ReasonFlash] != 1 {
		t.Fatalf("after a 40-chunk request on 8: flashes %d size %d log %+v", st.FlashIncreases, st.QuiescentLimit, st.ResizeLog)
	}
	// Admission follows the new active limit.
	if n := len(adm.capacity); n == 0 || adm.capacity[n-1] != st.ActiveLimit {
		t.Fatalf("admission capacities %v, active limit %d", adm.capacity, st.ActiveLimit)
	}
	read(40, 200)
	if st := c.Stats(); st.QuiescentLimit != 100*adChunk || st.FlashIncreases != 2 {
		t.Fatalf("flash past the maximum: size %d flashes %d", st.QuiescentLimit, st.FlashIncreases)
	}
	// Off: no flash.
	cfg := c.Config()
	cfg.Adaptive.FlashMultiple = -1
	cfg.Adaptive.InitialBytes = 8 * adChunk
	must(t, c.SetConfig(bg, cfg))
	read(0, 40)
	if st := c.Stats(); st.FlashIncreases != 2 || st.QuiescentLimit != 8*adChunk {
		t.Fatalf("flash with FlashMultiple<0: flashes %d size %d", st.FlashIncreases, st.QuiescentLimit)
	}
}

// TestMaxMemoryBytesCaps: the hard cap holds against QuiescentBytes,
// adaptive growth, flash increases and SetConfig.
func TestMaxMemoryBytesCaps(t *testing.T) {
	const capB = 20 * adChunk
	c, d, l := adaptiveFixture(t, 1024, Config{
		QuiescentBytes: 64 * adChunk, MaxMemoryBytes: capB, MinBytes: -1, BypassBytes: -1,
		Adaptive: AdaptiveConfig{Enabled: true, MinBytes: 4 * adChunk, MaxBytes: 512 * adChunk, EpochAccesses: 64, EpochTimeout: -1},
	})
	if st := c.Stats(); st.QuiescentLimit != capB || st.ActiveLimit != capB || st.MaxMemoryBytes != capB {
		t.Fatalf("limits %d/%d over the cap %d", st.QuiescentLimit, st.ActiveLimit, capB)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 3000; i++ {
		if i%500 == 0 { // a big request asks for a flash increase
			var reqs []Request
			for j := 0; j < 60; j++ {
				reqs = append(reqs, fullReq(d, l, make([]byte, adChunk), uint64(600+j)))
			}
			must(t, c.Read(bg, reqs))
		}
		readChunk(t, c, d, l, r.IntN(400))
		if st := c.Stats(); st.QuiescentLimit > capB || st.ActiveLimit > capB {
			t.Fatalf("limits %d/%d over the cap", st.QuiescentLimit, st.ActiveLimit)
		}
	}
	cfg := c.Config()
	cfg.QuiescentBytes, cfg.Adaptive.Enabled = 1<<20, false
	must(t, c.SetConfig(bg, cfg))
	st := c.Stats()
	if st.QuiescentLimit != capB || st.ActiveLimit != capB {
		t.Fatalf("SetConfig past the cap: %d/%d", st.QuiescentLimit, st.ActiveLimit)
	}
	// Only one request ran at a time: resident never passed the cap by
	// more than one sub-list's chunk.
	if st.PeakResidentBytes > capB+adChunk {
		t.Fatalf("peak resident %d over the cap %d", st.PeakResidentBytes, capB)
	}
	// Lowering the cap evicts down at once.
	cfg.MaxMemoryBytes = 5 * adChunk
	must(t, c.SetConfig(bg, cfg))
	if st := c.Stats(); st.ResidentBytes > 5*adChunk || st.ActiveLimit != 5*adChunk {
		t.Fatalf("after lowering the cap: resident %d active %d", st.ResidentBytes, st.ActiveLimit)
	}
}

// TestSetConfig: get/set round trip, typed errors that change nothing,
// and a shrink that writes dirty chunks back (and reports a failed write
// without losing the chunk).
func TestSetConfig(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 64 * adChunk, ActiveMultiplier: 1, MinBytes: -1, BypassBytes: -1, PreEncodeBytes: -1})
	d, l := e.dataset(1, -1, adChunk)
	cfg := e.c.Config()
	if cfg.QuiescentBytes != 64*adChunk || cfg.Policy != PolicyTwoStageLRU {
		t.Fatalf("Config() = %+v", cfg)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want error
	}{
		{"policy", func(c *Config) { c.Policy = PolicyLRU }, ErrImmutableConfig},
		{"workers", func(c *Config) { c.Workers = 7 }, ErrImmutableConfig},
		{"prefetch", func(c *Config) { c.Prefetch = true }, ErrImmutableConfig},
		{"pre-encode", func(c *Config) { c.PreEncodeBytes = 100 }, ErrImmutableConfig},
		{"runner", func(c *Config) { c.Runner = funcRunner(nil) }, ErrImmutableConfig},
		{"negative size", func(c *Config) { c.QuiescentBytes = -1 }, ErrInvalidConfig},
		{"bad multiplier", func(c *Config) { c.ActiveMultiplier = 0.1 }, ErrInvalidConfig},
		{"bad adaptive", func(c *Config) { c.Adaptive = AdaptiveConfig{Enabled: true, LowerHitRate: 2} }, ErrInvalidConfig},
		{"negative cap", func(c *Config) { c.MaxMemoryBytes = -1 }, ErrInvalidConfig},
	} {
		next := cfg
		tc.mod(&next)
		err := e.c.SetConfig(bg, next)
		if !errors.Is(err, tc.want) || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if st := e.c.Stats(); st.QuiescentLimit != 64*adChunk || e.c.Config() != cfg {
			t.Fatalf("%s: a failed SetConfig changed the cache", tc.name)
		}
	}
	for i := 0; i < 60; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(adChunk, byte(i)), uint64(i))}))
	}
	// A shrink whose write-back fails: reported, the new limit in force,
	// the dirty chunks kept.
	e.drv.failWrite.Store(true)
	small := cfg
	small.QuiescentBytes = 10 * adChunk
	if err := e.c.SetConfig(bg, small); !errors.Is(err, errDisk) {
		t.Fatalf("shrink with failing writes: %v", err)
	}
	if st := e.c.Stats(); st.QuiescentLimit != 10*adChunk || st.DirtyBytes != 60*adChunk {
		t.Fatalf("after a failed shrink: size %d dirty %d", st.QuiescentLimit, st.DirtyBytes)
	}
	e.drv.failWrite.Store(false)
	must(t, e.c.SetConfig(bg, small))
	if st := e.c.Stats(); st.ResidentBytes > 10*adChunk || st.DirtyEvictions < 50 || e.c.Config() != small {
		t.Fatalf("after shrinking: resident %d dirty evictions %d", st.ResidentBytes, st.DirtyEvictions)
	}
	for i := 0; i < 60; i++ {
		got := make([]byte, adChunk)
		must(t, e.c.Read(bg, []Request{fullReq(d, l, got, uint64(i))}))
		if !bytes.Equal(got, pattern(adChunk, byte(i))) {
			t.Fatalf("chunk %d lost by the shrink", i)
		}
	}
}

func TestAdaptiveStateRoundTrip(t *testing.T) {
	c, d, l := adaptiveFixture(t, 512, Config{
		QuiescentBytes: 16 * adChunk, MinBytes: -1, BypassBytes: -1,
		Adaptive: AdaptiveConfig{Enabled: true, MinBytes: 8 * adChunk, MaxBytes: 200 * adChunk, EpochAccesses: 64, EpochTimeout: -1},
	})
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 2000; i++ {
		readChunk(t, c, d, l, r.IntN(150))
	}
	for i := 0; i < 30; i++ { // part of an epoch
		readChunk(t, c, d, l, 300+i)
	}
	st := c.AdaptiveState()
	if !st.Config.Enabled || st.Epoch == 0 || st.SizeBytes != c.Stats().QuiescentLimit || st.OpenAccesses == 0 {
		t.Fatalf("state %+v", st)
	}
	b, err := st.MarshalBinary()
	must(t, err)
	if len(b) != AdaptiveStateSize {
		t.Fatalf("encoding %d bytes", len(b))
	}
	var back AdaptiveState
	must(t, back.UnmarshalBinary(b))
	if back != st {
		t.Fatalf("round trip: %+v != %+v", back, st)
	}
	// Every single-bit flip is caught.
	for i := 0; i < len(b)*8; i++ {
		x := append([]byte(nil), b...)
		x[i/8] ^= 1 << (i % 8)
		var y AdaptiveState
		if err := y.UnmarshalBinary(x); !errors.Is(err, ErrAdaptiveState) {
			t.Fatalf("bit %d flipped: %v", i, err)
		}
	}
	for _, n := range []int{0, 4, len(b) - 1, len(b) + 1} {
		x := make([]byte, n)
		copy(x, b)
		if err := back.UnmarshalBinary(x); !errors.Is(err, ErrAdaptiveState) {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
	if back != st {
		t.Fatal("a failed decode changed the value")
	}

	// A cache configured otherwise resumes the same policy, size and epoch.
	c2, _, _ := adaptiveFixture(t, 1, Config{QuiescentBytes: 1 << 20})
	must(t, c2.RestoreAdaptiveState(back))
	got := c2.AdaptiveState()
	if got.Config != st.Config || got.SizeBytes != st.SizeBytes || got.Epoch != st.Epoch ||
		got.OpenAccesses != st.OpenAccesses || got.OpenHits != st.OpenHits {
		t.Fatalf("restored %+v, want %+v", got, st)
	}
	if s := c2.Stats(); s.QuiescentLimit != st.SizeBytes || !c2.Config().Adaptive.Enabled {
		t.Fatalf("restored size %d", s.QuiescentLimit)
	}
	// Invalid states change nothing.
	bad := st
	bad.SizeBytes = st.Config.MaxBytes + 1
	if err := c2.RestoreAdaptiveState(bad); !errors.Is(err, ErrAdaptiveState) {
		t.Fatalf("restore out of range: %v", err)
	}
	if c2.AdaptiveState() != got {
		t.Fatal("a failed restore changed the state")
	}
	// A disabled state turns adaptive sizing off and returns to
	// QuiescentBytes.
	must(t, c2.RestoreAdaptiveState(AdaptiveState{SizeBytes: 123}))
	if s := c2.Stats(); s.QuiescentLimit != 1<<20 || c2.Config().Adaptive.Enabled {
		t.Fatalf("disabled restore: size %d", s.QuiescentLimit)
	}
}

func FuzzAdaptiveState(f *testing.F) {
	st := AdaptiveState{Config: resolveAdaptive(AdaptiveConfig{Enabled: true}, 1<<20).config(), SizeBytes: 1 << 20, Epoch: 3, OpenAccesses: 10, OpenHits: 7, OpenGains: 2}
	b, err := st.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	off, _ := AdaptiveState{SizeBytes: 5}.MarshalBinary()
	f.Add(off)
	f.Add([]byte("SCAD"))
	f.Add(make([]byte, AdaptiveStateSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s AdaptiveState
		if err := s.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrAdaptiveState) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		again, err := s.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded state does not encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatal("decode/encode not the identity")
		}
		c, err := New(Config{QuiescentBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.RestoreAdaptiveState(s); err != nil {
			t.Fatalf("restoring a valid state: %v", err)
		}
	})
}

// funcRunner is a Runner of a non-comparable type.
type funcRunner func(context.Context, int, func(int) error) error

func (f funcRunner) Run(ctx context.Context, n int, fn func(int) error) error { return f(ctx, n, fn) }

// TestSetConfigKeepsANonComparableRunner: a cache built with a Runner that
// cannot be compared accepts its own Config back (Runner nil or as given
// by Config is "unchanged"), and a hard cap below MinBytes still gives a
// state that encodes.
func TestSetConfigKeepsANonComparableRunner(t *testing.T) {
	run := funcRunner(func(ctx context.Context, n int, fn func(int) error) error {
		for i := 0; i < n; i++ {
			if err := fn(i); err != nil {
				return err
			}
		}
		return nil
	})
	c := newTestCache(t, Config{QuiescentBytes: 1 << 20, Runner: run, MaxMemoryBytes: 1 << 10,
		Adaptive: AdaptiveConfig{Enabled: true, MinBytes: 4 << 10}})
	cfg := c.Config()
	cfg.Runner = nil
	cfg.QuiescentBytes = 2 << 20
	must(t, c.SetConfig(bg, cfg))
	if c.Config().Runner == nil {
		t.Fatal("SetConfig with a nil Runner dropped the cache's Runner")
	}
	st := c.AdaptiveState()
	if c.Stats().QuiescentLimit != 1<<10 || st.SizeBytes != 4<<10 {
		t.Fatalf("capped size %d, state size %d", c.Stats().QuiescentLimit, st.SizeBytes)
	}
	if _, err := st.MarshalBinary(); err != nil {
		t.Fatalf("state under a cap: %v", err)
	}
}

// TestAdaptiveEpochsCloseByHitsUnderStats: a phase of read hits closes
// adaptive epochs from the hit path (every hitCheckEvery-th hit of a read
// slot) even when Stats, which folds the slots' hit counts away, is
// called every 100 hits: the pacing count is one Stats never resets. The
// adaptor's timer (100 ms here) alone would close an epoch or two.
func TestAdaptiveEpochsCloseByHitsUnderStats(t *testing.T) {
	const n = 64
	c, d, l := adaptiveFixture(t, n, Config{QuiescentBytes: 1 << 20, BypassBytes: -1,
		Adaptive: AdaptiveConfig{Enabled: true, MinBytes: 1 << 20, MaxBytes: 2 << 20, EpochAccesses: 1000, EpochTimeout: time.Hour}})
	for i := 0; i < n; i++ {
		readChunk(t, c, d, l, i) // resident: every later read hits
	}
	before := c.Stats()
	buf := make([]byte, adChunk)
	for k := 0; k < 50*1000; k++ {
		must(t, c.Read(bg, []Request{fullReq(d, l, buf, uint64(k%n))}))
		if k%100 == 0 {
			_ = c.Stats()
		}
	}
	if s := c.Stats().Sub(before); s.AdaptiveEpochs < 10 {
		t.Fatalf("%d epochs closed in %d hits of epochs of 1000 accesses, want at least 10", s.AdaptiveEpochs, s.Hits)
	}
}
