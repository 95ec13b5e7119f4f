package cache

import (
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHitPathAllocs: hits spread over many resident chunks, enough that
// access records reach their stripes' marks and are replayed into the
// policy again and again (by the replayer, stripes of 64 records here),
// allocate nothing (lockfree.Buffer swaps each stripe's two arrays;
// nothing is handed out per batch).
func TestHitPathAllocs(t *testing.T) {
	defer func(n int) { accessStripe = n }(accessStripe)
	accessStripe = 64
	e := newEnv(t, Config{QuiescentBytes: 64 << 20})
	d, l := e.dataset(1, -1, 64)
	const n = 1024
	reqs := make([][]Request, n)
	buf := make([]byte, 64)
	for i := range reqs {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(64, byte(i)), uint64(i))}))
		reqs[i] = []Request{fullReq(d, l, buf, uint64(i))}
	}
	must(t, e.f.Flush(bg))
	i := 0
	read := func() {
		// A stride through the chunks: consecutive hits are far apart in
		// the recency order, so most are recorded.
		i = (i + 389) % n
		if err := e.c.Read(bg, reqs[i]); err != nil {
			t.Fatal(err)
		}
	}
	for k := 0; k < 4*n; k++ {
		read()
	}
	// The replayer has run (and made its stripes' spare arrays) before
	// the count starts.
	waitFor(t, "a replay", func() bool { return e.c.access.replay.rounds.Load() > 0 })
	before := e.c.Stats()
	// AllocsPerRun truncates to whole allocations per run: one run is a
	// pass over every chunk, so one allocation per batch of records shows.
	if a := testing.AllocsPerRun(20, func() {
		for k := 0; k < n; k++ {
			read()
		}
	}); a != 0 {
		t.Fatalf("%v allocations per %d hits", a, n)
	}
	if s := e.c.Stats().Sub(before); s.Misses != 0 || s.Hits == 0 {
		t.Fatalf("hits %d, misses %d: not the hit path", s.Hits, s.Misses)
	}
}

// TestReplayLeavesHitLine: every policy hears of a read hit on any entry
// (its record waits in the read slot), and applying the records writes
// nothing in the entries' first cache line, the line every hit reads
// (order.go, touchLocked): a write there from the replayer's core would
// take the line away from the readers' cores.
func TestReplayLeavesHitLine(t *testing.T) {
	for _, pk := range []PolicyKind{PolicyTwoStageLRU, PolicyLRU, PolicyMRU, PolicyLFU, PolicySIEVE, PolicyS3FIFO, PolicyRandom} {
		e := newEnv(t, Config{QuiescentBytes: 64 << 20, Policy: pk})
		d, l := e.dataset(1, -1, 64)
		const n = 64
		buf := make([]byte, 64)
		for i := 0; i < n; i++ {
			must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(64, byte(i)), uint64(i))}))
		}
		ents := make([]*entry, n)
		for i := range ents {
			var ok bool
			if ents[i], ok = e.c.chunks.Load(makeKey(d.serial, layout.Coord{uint64(i)})); !ok {
				t.Fatalf("%v: chunk %d not resident", pk, i)
			}
		}
		// Read the newest entry (at the front of a recency order) and the
		// oldest: both are recorded.
		for _, i := range []int{n - 1, 0} {
			must(t, e.c.Read(bg, []Request{fullReq(d, l, buf, uint64(i))}))
			if !recordPending(e.c, ents[i]) {
				t.Errorf("%v: hit on chunk %d not recorded", pk, i)
			}
		}
		// The lock keeps the replayer out while the lines are copied,
		// the records applied and the lines compared.
		e.c.mu.Lock()
		before := make([][64]byte, n)
		for i, x := range ents {
			before[i] = *(*[64]byte)(unsafe.Pointer(x))
		}
		e.c.mu.drainLocked(&e.c.access)
		for i, x := range ents {
			if after := *(*[64]byte)(unsafe.Pointer(x)); after != before[i] {
				t.Errorf("%v: replaying the records changed chunk %d's first line", pk, i)
			}
		}
		e.c.mu.Unlock()
		if recordPending(e.c, ents[0]) || recordPending(e.c, ents[n-1]) {
			t.Errorf("%v: records still pending after the drain", pk)
		}
	}
}

// TestEntryHotLine: the fields a hit reads or writes are in the entry's
// first 64 bytes, and the entry's size puts it in the allocator's 320-byte
// size class, whose objects start on a cache line (320 = 5 × 64): a hit
// then misses on one line of its entry, not three (entry.go). A field
// added to entry that moves it to another class (the next, 352, is not a
// multiple of 64) fails here: pad to 384 or move the hot fields.
func TestEntryHotLine(t *testing.T) {
	var e entry
	hot := map[string]uintptr{
		"word":    unsafe.Offsetof(e.word) + unsafe.Sizeof(e.word),
		"ds":      unsafe.Offsetof(e.ds) + unsafe.Sizeof(e.ds),
		"flat":    unsafe.Offsetof(e.flat) + unsafe.Sizeof(e.flat),
		"flatLen": unsafe.Offsetof(e.flatLen) + unsafe.Sizeof(e.flatLen),
		"flags":   unsafe.Offsetof(e.flags) + unsafe.Sizeof(e.flags),
		// the chunk table compares a short key here (entrytable.go)
		"key.k": unsafe.Offsetof(e.key) + unsafe.Offsetof(e.key.k) + unsafe.Sizeof(e.key.k),
	}
	for name, end := range hot {
		if end > 64 {
			t.Errorf("entry.%s ends at byte %d, past the first cache line", name, end)
		}
	}
	if sz := unsafe.Sizeof(e); sz <= 288 || sz > 320 {
		t.Errorf("entry is %d bytes: not in the 320-byte size class (line-aligned objects)", sz)
	}
}

// recordPending reports whether an access record of x waits in a read
// slot (holding each slot while it looks).
func recordPending(c *Cache, x *entry) bool {
	found := false
	for i := range c.access.slots.slots {
		s := &c.access.slots.slots[i]
		s.hold(&c.access.slots)
		found = found || slices.Contains(s.rec, x)
		s.release()
	}
	return found
}

// recordsPending counts the access records waiting in the read slots.
func recordsPending(c *Cache) int {
	n := 0
	for i := range c.access.slots.slots {
		s := &c.access.slots.slots[i]
		s.hold(&c.access.slots)
		n += len(s.rec)
		s.release()
	}
	return n
}

// TestSlotRecordsOnce: repeated read hits on one entry leave one record in
// the read slot until the replayer takes it (pendingFilter); a hit after
// that records again. S3-FIFO records every hit, so only the filter can
// leave a hit out.
func TestSlotRecordsOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one P: every hit in its first slot
	e := newEnv(t, Config{QuiescentBytes: 64 << 20, Policy: PolicyS3FIFO})
	d, l := e.dataset(1, -1, 64)
	buf := make([]byte, 64)
	for i := 0; i < 2; i++ {
		must(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(64, byte(i)), uint64(i))}))
	}
	for round := 0; round < 2; round++ {
		e.c.mu.Lock() // no replay while the records are counted
		e.c.mu.drainLocked(&e.c.access)
		for k := 0; k < 5; k++ {
			must(t, e.c.Read(bg, []Request{fullReq(d, l, buf, 0)}))
		}
		must(t, e.c.Read(bg, []Request{fullReq(d, l, buf, 1)}))
		n := recordsPending(e.c)
		e.c.mu.Unlock()
		if n != 2 {
			t.Fatalf("round %d: %d records for 6 hits on 2 entries, want 2", round, n)
		}
	}
}

// TestSingleRequestHitPath: a call of one request, which Cache.do hands
// to tryHit without serveHits and checks with the inline Request.valid,
// still gets every typed error validate gives (nil or foreign dataset,
// wrong rank, unregistered dataset) and, valid, serves a read hit and a
// write hit of a resident chunk as a call of several requests does.
func TestSingleRequestHitPath(t *testing.T) {
	e := newEnv(t, Config{QuiescentBytes: 64 << 20})
	d, l := e.dataset(1, -1, 64)
	other := newEnv(t, Config{QuiescentBytes: 64 << 20})
	od, ol := other.dataset(1, -1, 64)
	require.NoError(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(64, 1), 0)}))
	before := e.c.Stats()

	buf := make([]byte, 64)
	for _, write := range []bool{false, true} {
		call := e.c.Read
		if write {
			call = e.c.Write
		}
		nilDS := fullReq(d, l, buf, 0)
		nilDS.Dataset = nil
		assert.ErrorIs(t, call(bg, []Request{nilDS}), ErrInvalid, "nil dataset, write %v", write)
		assert.ErrorIs(t, call(bg, []Request{fullReq(od, ol, buf, 0)}), ErrInvalid, "another cache's dataset, write %v", write)
		assert.ErrorIs(t, call(bg, []Request{fullReq(d, l, buf, 0, 0)}), ErrInvalid, "rank 2 coordinate of a rank 1 dataset, write %v", write)
	}

	require.NoError(t, e.c.Read(bg, []Request{fullReq(d, l, buf, 0)}))
	assert.Equal(t, pattern(64, 1), buf)
	require.NoError(t, e.c.Write(bg, []Request{fullReq(d, l, pattern(64, 2), 0)}))
	require.NoError(t, e.c.Read(bg, []Request{fullReq(d, l, buf, 0)}))
	assert.Equal(t, pattern(64, 2), buf)
	s := e.c.Stats().Sub(before)
	assert.Equal(t, int64(3), s.Hits, "hits")
	assert.Equal(t, int64(0), s.Misses, "misses")

	require.NoError(t, d.Unregister(bg))
	assert.ErrorIs(t, e.c.Read(bg, []Request{fullReq(d, l, buf, 0)}), ErrNotRegistered)
	assert.ErrorIs(t, e.c.Write(bg, []Request{fullReq(d, l, buf, 0)}), ErrNotRegistered)
}

// TestFullSlotDropsOnly: a read slot whose records are full (the replayer
// behind) drops a hit's record counting it, and leaves its filter as it
// was: the entry it remembered in that place is still remembered.
func TestFullSlotDropsOnly(t *testing.T) {
	defer func(n int) { accessStripe = n }(accessStripe)
	accessStripe = 2
	var s readSlot
	a, b := new(entry), new(entry)
	assert.True(t, s.note(a), "the record at half the capacity is the mark")
	assert.False(t, s.note(b))
	require.Len(t, s.rec, cap(s.rec), "full")
	// x falls in a's place of the filter.
	var x *entry
	for x == nil || pendingWay(x) != pendingWay(a) {
		x = new(entry)
	}
	before := s.pending
	assert.False(t, s.note(x))
	assert.EqualValues(t, 1, s.drops)
	assert.Equal(t, before, s.pending, "a full slot's filter is left alone")
	assert.False(t, s.note(a), "a is still pending")
	assert.EqualValues(t, 1, s.drops)
	assert.Equal(t, []*entry{a, b}, s.rec)
}
