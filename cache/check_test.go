package cache

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/scc-dev/scc/cache/internal/policy"
	"github.com/scc-dev/scc/cache/layout"
)

// newTestCache creates a cache whose cleanup checks its accounting (see
// checkCache) once the test's work has settled, then discards the files
// the test left registered and closes it. Every cache test builds its
// caches through it (newEnv included), so a leaked pin or a byte counted
// twice fails the test that caused it, not some later one (bbolt's
// btesting pattern).
func newTestCache(t testing.TB, cfg Config) *Cache {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { finishTestCache(t, c) })
	return c
}

func finishTestCache(t testing.TB, c *Cache) {
	t.Helper()
	if c.closed.Load() {
		return // the test closed it: nothing is left to check
	}
	if !t.Failed() {
		// Background work (trim, pre-encode, prefetch) may still be
		// moving entries: the accounting must hold once it settles.
		var last error
		for deadline := time.Now().Add(10 * time.Second); ; {
			if last = checkCache(c); last == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("cache accounting: %v", last)
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	c.registered.files.ForEach(func(_ uint64, f *File) bool {
		if err := f.Discard(context.Background()); err != nil {
			t.Errorf("discard file: %v", err)
		}
		return true
	})
	if err := c.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// checkCache verifies the cache's accounting against its entries. It is
// meaningful only when no request runs:
//
//   - resident = Σ entry sizes + metadata + bytes in flight
//   - dirty    = Σ sizes of dirty entries; preBytes = Σ pre-encoded images
//   - no image is in flight and no encode token held (directwrite_encode.go)
//   - each dataset's size and chunk count match its entries
//   - every entry is resident and unpinned (no pin leaked)
//   - each linked entry is on exactly one policy list, once, and every
//     entry on a policy list is linked and in the chunk table
func checkCache(c *Cache) error {
	if n := c.stats.hot.Load(hotActive); n != 0 {
		return fmt.Errorf("%d requests still active", n)
	}
	var sum, dirty, pre int64
	type dsSum struct{ size, chunks int64 }
	perDS := map[*Dataset]*dsSum{}
	table := map[*entry]bool{}
	var errs []error
	c.chunks.Range(func(_ chunkKey, e *entry) bool {
		table[e] = true
		sz := e.size.Load()
		sum += sz
		if e.dirty.Load() {
			dirty += sz
		}
		dsz := sz
		if p := e.encoded.Load(); p != nil {
			pre += p.bytes()
			dsz -= p.bytes()
		}
		s := perDS[e.ds]
		if s == nil {
			s = &dsSum{}
			perDS[e.ds] = s
		}
		s.size += dsz
		s.chunks++
		if w := e.word.Load(); w != packWord(stateResident, 0) {
			errs = append(errs, fmt.Errorf("entry %v: state %d pins %d at rest", e.coord, stateOf(w), w&pinMask))
		}
		return true
	})
	res, meta, inflight := c.budget.resident.Load(), c.budget.metadata.Load(), c.budget.inflight.Load()
	if res != sum+meta+inflight {
		errs = append(errs, fmt.Errorf("resident %d != entries %d + metadata %d + in flight %d", res, sum, meta, inflight))
	}
	if ch := c.budget.chunks.Load(); ch != sum+inflight {
		errs = append(errs, fmt.Errorf("chunk bytes %d != entries %d + in flight %d", ch, sum, inflight))
	}
	if d := c.budget.dirty.Load(); d != dirty {
		errs = append(errs, fmt.Errorf("dirty bytes %d != dirty entries %d", d, dirty))
	}
	if p := c.background.preEncode.bytes.Load(); p != pre {
		errs = append(errs, fmt.Errorf("pre-encoded bytes %d != images %d", p, pre))
	}
	if n, k := c.writer.encoding.Load(), len(c.writer.encodes); n != 0 || k != 0 {
		errs = append(errs, fmt.Errorf("%d bytes of images and %d encode tokens still held at rest", n, k))
	}
	var dss []*Dataset
	c.registered.files.ForEach(func(_ uint64, f *File) bool {
		f.datasets.ForEach(func(_ uint64, d *Dataset) bool {
			dss = append(dss, d)
			return true
		})
		return true
	})
	for _, d := range dss {
		s := perDS[d]
		if s == nil {
			s = &dsSum{}
		}
		if d.size.Load() != s.size || d.chunks.Load() != s.chunks {
			errs = append(errs, fmt.Errorf("dataset %d: size %d chunks %d, entries say %d and %d",
				d.id, d.size.Load(), d.chunks.Load(), s.size, s.chunks))
		}
		delete(perDS, d)
	}
	for d, s := range perDS {
		errs = append(errs, fmt.Errorf("%d entries of dataset %d that no file knows", s.chunks, d.id))
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	linked := map[*entry]bool{}
	for _, d := range dss {
		for e := d.members; e != nil; e = e.mnext {
			if !e.linked || e.ds != d {
				errs = append(errs, fmt.Errorf("entry %v on dataset %d's member list: linked %v", e.coord, d.id, e.linked))
			}
			linked[e] = true
		}
	}
	seen := map[*entry]int{}
	held, err := policy.Contents(c.mu.pol, len(table)+1)
	if err != nil {
		errs = append(errs, err)
	}
	for _, e := range held {
		seen[e]++
	}
	for e := range linked {
		if seen[e] != 1 {
			errs = append(errs, fmt.Errorf("linked entry %v is on %d policy lists", e.coord, seen[e]))
		}
		if !table[e] {
			errs = append(errs, fmt.Errorf("linked entry %v not in the chunk table", e.coord))
		}
	}
	for e, n := range seen {
		if !linked[e] {
			errs = append(errs, fmt.Errorf("entry %v on a policy list %d times but not linked", e.coord, n))
		}
	}
	return errors.Join(errs...)
}

// TestCheckCacheFindsBrokenAccounting makes sure the cleanup check is not
// vacuous: each kind of damage it looks for is reported.
func TestCheckCacheFindsBrokenAccounting(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(e *env, ent *entry)
		fix    func(e *env, ent *entry)
	}{
		{"resident", func(e *env, _ *entry) { e.c.budget.resident.Add(1) }, func(e *env, _ *entry) { e.c.budget.resident.Add(-1) }},
		{"chunks", func(e *env, _ *entry) { e.c.budget.chunks.Add(1) }, func(e *env, _ *entry) { e.c.budget.chunks.Add(-1) }},
		{"dirty", func(e *env, _ *entry) { e.c.budget.dirty.Add(1) }, func(e *env, _ *entry) { e.c.budget.dirty.Add(-1) }},
		{"pin", func(_ *env, ent *entry) { ent.word.Add(1) }, func(_ *env, ent *entry) { ent.word.Add(^uint64(0)) }},
		{"policy", func(e *env, ent *entry) {
			e.c.mu.Lock()
			e.c.mu.pol.Remove(ent)
			e.c.mu.Unlock()
		}, func(e *env, ent *entry) {
			e.c.mu.Lock()
			e.c.mu.pol.Add(ent)
			e.c.mu.Unlock()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{QuiescentBytes: 1 << 20})
			d, l := e.dataset(1, -1, 16)
			must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(16, 1), 0)}))
			ent, ok := e.c.chunks.Load(makeKey(d.serial, layout.Coord{0}))
			if !ok {
				t.Fatal("chunk not cached")
			}
			if err := checkCache(e.c); err != nil {
				t.Fatalf("sound cache reported: %v", err)
			}
			tc.break_(e, ent)
			if err := checkCache(e.c); err == nil {
				t.Fatal("damage not reported")
			}
			tc.fix(e, ent)
		})
	}
}
