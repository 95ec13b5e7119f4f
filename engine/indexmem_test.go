package engine

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/vfd"
)

// rowFile is a file with dataset "t" of n rows of row bytes, one chunk per
// row, an extensible-array index, row k holding k*31+7 in every byte.
func rowFile(t *testing.T, n, row uint64) (*vfd.Mem, []byte) {
	mem := vfd.NewMem()
	f := tCreate(t, mem, &Options{CacheConfig: cache.Config{QuiescentBytes: 16 << 20}})
	ds, err := f.CreateDataset(context.Background(), "t", DatasetSpec{Type: Uint8, Shape: []uint64{n, row}, MaxShape: []uint64{Unlimited, row}, Chunk: []uint64{1, row}})
	must(t, err)
	vals := make([]byte, n*row)
	for i := range vals {
		vals[i] = byte(uint64(i)/row*31 + 7)
	}
	must(t, ds.Write(context.Background(), All([]uint64{n, row}), vals))
	must(t, f.Close(context.Background()))
	return mem, vals
}

// TestIndexMemoryInCacheBudget reads a file with a large extensible-array
// index cold and checks that the index blocks the reads loaded are
// charged to the shared cache as metadata (exactly the index's MemBytes),
// chunks are evicted to make room for them so that chunks + metadata stay
// within the active limit, and a second pass over the same chunks does no
// index I/O (the blocks stayed in memory) even where the chunks themselves
// were evicted and must be read again.
func TestIndexMemoryInCacheBudget(t *testing.T) {
	ctx := context.Background()
	const n, row = 50_000, 256 // 50,000 chunks of one 256-byte row
	mem, _ := rowFile(t, n, row)

	cnt := vfd.NewCounting(mem)
	f := tOpen(t, cnt, &Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: 512 << 10}})
	defer f.Close(ctx)
	ds, err := f.OpenDataset(ctx, "t", nil)
	must(t, err)
	if k := ds.IndexKind(); k != "extensible-array" {
		t.Fatalf("index kind %s", k)
	}
	c := f.Cache()
	limit := c.Stats().ActiveLimit
	idxMem := func() int64 {
		b := ds.s.idx.p.Load()
		if b == nil {
			return 0
		}
		return b.MemBytes()
	}
	var chunkMem int64
	read := func(first, count uint64) {
		t.Helper()
		start := c.Stats()
		buf := make([]byte, count*row)
		must(t, ds.Read(ctx, Box([]uint64{first, 0}, []uint64{count, row}), buf))
		for i := range buf {
			if want := byte((first+uint64(i/row))*31 + 7); buf[i] != want {
				t.Fatalf("element %d of row %d holds %d, want %d", i%row, first+uint64(i/row), buf[i], want)
			}
		}
		st := c.Stats()
		if st.MetadataBytes <= 0 || st.MetadataBytes != idxMem() {
			t.Fatalf("after reading rows [%d,%d): cache metadata %d, index memory %d", first, first+count, st.MetadataBytes, idxMem())
		}
		if st.Chunks > 0 {
			chunkMem = max(chunkMem, (st.ResidentBytes-st.MetadataBytes)/st.Chunks)
		}
		// Chunks were admitted against a total that already held the
		// metadata present when the read began; only blocks this read
		// loaded itself can be over the limit, until the next admission.
		if chunks := st.ResidentBytes - st.MetadataBytes; chunks > limit-start.MetadataBytes+chunkMem {
			t.Fatalf("after reading rows [%d,%d): %d chunk bytes with %d metadata bytes at the start, limit %d",
				first, first+count, chunks, start.MetadataBytes, limit)
		}
	}
	// Spread single-chunk reads load index blocks across the whole array.
	const stride = 2_000
	for k := uint64(0); k < n; k += stride {
		read(k, 1)
	}
	spread := c.Stats().MetadataBytes
	if spread < limit/4 {
		t.Fatalf("index memory %d is too small against the limit %d for the test to mean anything", spread, limit)
	}
	// Contiguous reads, each twice, fill the rest of the budget with
	// chunks and then evict others: a full cache keeps a chunk read again
	// (one read once it serves without keeping, cache/directdecode.go).
	for k := uint64(0); k < 4_000; k += 200 {
		read(k, 200)
		read(k, 200)
	}
	if st := c.Stats(); st.Evictions == 0 {
		t.Fatalf("no chunk was evicted: %+v", st)
	}
	// Second pass over the spread rows: chunks may be read again, index
	// blocks may not.
	before := cnt.Snapshot()
	for k := uint64(0); k < n; k += stride {
		read(k, 1)
	}
	d := cnt.Snapshot().Sub(before)
	if d.Ops[vfd.OpRead] != 0 {
		t.Fatalf("second pass read %d index blocks (%d bytes), want none", d.Ops[vfd.OpRead], d.Bytes[vfd.OpRead])
	}
	if d.Ops[vfd.OpReadV] == 0 {
		t.Fatalf("second pass read no chunk: the budget did not evict any, so the test shows nothing")
	}
	t.Logf("limit %d, index memory %d, chunk memory %d, second pass %d vector reads",
		limit, c.Stats().MetadataBytes, chunkMem, d.Ops[vfd.OpReadV])
	must(t, ds.Close(ctx))
	must(t, f.Close(ctx))
	if st := c.Stats(); st.MetadataBytes != 0 {
		t.Fatalf("metadata %d left charged after Close", st.MetadataBytes)
	}
}

// TestIndexShedUnderPressure: an index larger than the whole cache. Read
// cold in spread single-row reads, its clean blocks would pile up as
// unevictable metadata far past the limit; instead the cache sheds them
// (cache.File.SetMetadataShedder → index.DropClean) when nothing else can
// go, so resident bytes stay near the limit, and the data reads right.
func TestIndexShedUnderPressure(t *testing.T) {
	ctx := context.Background()
	const n, row = 50_000, 16
	mem, vals := rowFile(t, n, row)
	// The whole index, read with room for it.
	g := tOpen(t, mem, &Options{ReadOnly: true})
	gds, err := g.OpenDataset(ctx, "t", nil)
	must(t, err)
	must(t, gds.Read(ctx, All([]uint64{n, row}), vals))
	full := gds.s.idx.p.Load().MemBytes()
	must(t, g.Close(ctx))

	const limit = 64 << 10
	f := tOpen(t, mem, &Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: limit, ActiveMultiplier: 1}})
	ds, err := f.OpenDataset(ctx, "t", nil)
	must(t, err)
	c := f.Cache()
	if full < 4*limit {
		t.Fatalf("index of %d bytes against a %d-byte cache: the test shows nothing", full, limit)
	}
	buf := make([]byte, row)
	for pass := 0; pass < 2; pass++ {
		for k := uint64(pass); k < n; k += 97 {
			must(t, ds.Read(ctx, Box([]uint64{k, 0}, []uint64{1, row}), buf))
			if want := byte(k*31 + 7); buf[0] != want || buf[row-1] != want {
				t.Fatalf("row %d holds %d, want %d", k, buf[0], want)
			}
		}
	}
	st := c.Stats()
	t.Logf("index %d bytes in full; cache limit %d, peak resident %d, metadata now %d, %d sheds", full, limit, st.PeakResidentBytes, st.MetadataBytes, st.MetadataSheds)
	if st.MetadataSheds == 0 {
		t.Fatal("the cache never shed index blocks")
	}
	// One index page (1024 entries, about 24 KiB: loaded, then charged)
	// and one chunk may be over the limit at a time; never the index.
	if st.PeakResidentBytes > limit+32<<10 {
		t.Fatalf("peak resident %d bytes against a limit of %d (index %d)", st.PeakResidentBytes, limit, full)
	}
	must(t, ds.Close(ctx))
}

// TestIndexShedConcurrent: shedding races readers, a writer republishing
// chunks (dirty index blocks, which stay) and commits, on a cache far
// smaller than the index, under -race; every read sees its row's bytes.
func TestIndexShedConcurrent(t *testing.T) {
	ctx := context.Background()
	const n, row = 20_000, 16
	mem := vfd.NewMem()
	f := tCreate(t, mem, &Options{CacheConfig: cache.Config{QuiescentBytes: 16 << 20}})
	ds, err := f.CreateDataset(ctx, "t", DatasetSpec{Type: Uint8, Shape: []uint64{n, row}, MaxShape: []uint64{Unlimited, row}, Chunk: []uint64{1, row}})
	must(t, err)
	rowOf := func(k uint64) []byte { return bytes.Repeat([]byte{byte(k*31 + 7)}, row) }
	vals := make([]byte, 0, n*row)
	for k := uint64(0); k < n; k++ {
		vals = append(vals, rowOf(k)...)
	}
	must(t, ds.Write(ctx, All([]uint64{n, row}), vals))
	must(t, f.Close(ctx))

	f = tOpen(t, mem, &Options{CacheConfig: cache.Config{QuiescentBytes: 32 << 10, ActiveMultiplier: 1}})
	ds, err = f.OpenDataset(ctx, "t", nil)
	must(t, err)
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			buf := make([]byte, row)
			for i := 0; i < 1500; i++ {
				k := rng.Uint64N(n)
				if err := ds.Read(ctx, Box([]uint64{k, 0}, []uint64{1, row}), buf); err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(buf, rowOf(k)) {
					t.Errorf("row %d reads %v", k, buf[:4])
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(9, 9))
		for i := 0; i < 1500; i++ {
			k := rng.Uint64N(n)
			if err := ds.Write(ctx, Box([]uint64{k, 0}, []uint64{1, row}), rowOf(k)); err != nil {
				t.Error(err)
				return
			}
			if i%300 == 299 {
				if err := f.Flush(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	wg.Wait()
	if st := f.Cache().Stats(); st.MetadataSheds == 0 {
		t.Fatalf("no shedding happened: %+v", st)
	}
	if f.indexShedBytes.Load() == 0 {
		t.Fatal("no changed index block was written and let go during the run")
	}
	must(t, ds.Close(ctx))
}

// shedRow is the row size of the shed tests' files: 256 bytes, one chunk
// per row, so that a 64 KiB cache holds a few hundred chunks and the index
// of tens of thousands of them (24 bytes an entry) outgrows it many times.
const shedRow = 256

// shedRows returns rows [first, first+count), row k holding k*31+7 in
// every byte.
func shedRows(first, count uint64) []byte {
	b := make([]byte, 0, count*shedRow)
	for k := first; k < first+count; k++ {
		b = append(b, bytes.Repeat([]byte{byte(k*31 + 7)}, shedRow)...)
	}
	return b
}

// newShedFile creates a file on drv whose cache holds limit bytes (active
// limit too), with dataset "t" (extensible-array index) of its first
// rows rows, written and committed.
func newShedFile(t *testing.T, drv vfd.Driver, limit int64, rows uint64) (*File, *Dataset) {
	t.Helper()
	ctx := context.Background()
	f := tCreate(t, drv, &Options{CacheConfig: cache.Config{QuiescentBytes: limit, ActiveMultiplier: 1}})
	ds, err := f.CreateDataset(ctx, "t", DatasetSpec{Type: Uint8, Shape: []uint64{rows, shedRow}, MaxShape: []uint64{Unlimited, shedRow}, Chunk: []uint64{1, shedRow}})
	must(t, err)
	must(t, ds.Write(ctx, All([]uint64{rows, shedRow}), shedRows(0, rows)))
	must(t, f.Flush(ctx))
	return f, ds
}

// appendShedRows appends rows [from, to) to ds batch at a time, growing
// it first, and calls each (if not nil) after every batch.
func appendShedRows(t *testing.T, ds *Dataset, from, to, batch uint64, each func()) {
	t.Helper()
	ctx := context.Background()
	for k := from; k < to; k += batch {
		must(t, ds.SetExtent(ctx, []uint64{k + batch, shedRow}))
		must(t, ds.Write(ctx, Box([]uint64{k, 0}, []uint64{batch, shedRow}), shedRows(k, batch)))
		if each != nil {
			each()
		}
	}
}

// TestIndexShedChangedBlocks: a write burst whose changed index blocks
// alone outgrow the cache many times over. Changed blocks
// cannot be dropped like clean ones, so the shedder writes them the way a
// commit's index flush does (File.writeIndexes) and then drops them:
// resident bytes stay near the limit during the burst, not the index's
// size. Until the next Flush the committed state is untouched: the file a
// crash would leave holds the commit before the burst, whole. After
// Flush every row reads back, also after reopening.
func TestIndexShedChangedBlocks(t *testing.T) {
	ctx := context.Background()
	const n, row, batch = 40_000, shedRow, 500
	const limit = 64 << 10
	crash := vfd.NewCrash()
	f, ds := newShedFile(t, crash, limit, batch)
	rows := shedRows
	c := f.Cache()
	start := c.Stats()
	var peakMeta int64
	appendShedRows(t, ds, batch, n, batch, func() { peakMeta = max(peakMeta, c.Stats().MetadataBytes) })
	st := c.Stats()
	full := ds.s.idx.p.Load().MemBytes()
	t.Logf("limit %d: peak resident %d, peak metadata %d, index now in memory %d, sheds %d, changed blocks written and let go %d bytes", limit, st.PeakResidentBytes, peakMeta, full, st.MetadataSheds-start.MetadataSheds, f.indexShedBytes.Load())
	// Without writing changed blocks the whole index (40,000 entries of 24
	// bytes, 960 KB) stays in memory until the Flush: peak resident 972 KB
	// when this test was written. Now the cache sheds once metadata holds
	// more than half the limit and the cache is over it, when a load or
	// create reserves memory or after a direct write (the burst's chunks
	// go direct once the cache is full): chunks up to the limit, metadata
	// up to half of it, plus the index blocks one write adds before the
	// check (a block of 512 or 1024 entries, 12 or 24 KiB). Peak 115 KB
	// when this test was written.
	const page = 1024*24 + 32
	if st.PeakResidentBytes > limit+limit/2+2*page || peakMeta > limit/2+2*page {
		t.Fatalf("peak resident %d bytes, peak metadata %d, against a limit of %d", st.PeakResidentBytes, peakMeta, limit)
	}

	// A crash now leaves the commit before the burst.
	img := vfd.NewMemFrom(crash.CrashImage(vfd.KeepSynced, 1))
	g := tOpen(t, img, &Options{ReadOnly: true})
	gds, err := g.OpenDataset(ctx, "t", nil)
	must(t, err)
	if sh := gds.Shape(); sh[0] != batch {
		t.Fatalf("the crash image holds %d rows, want the %d committed", sh[0], batch)
	}
	got := make([]byte, batch*row)
	must(t, gds.Read(ctx, All([]uint64{batch, row}), got))
	if !bytes.Equal(got, rows(0, batch)) {
		t.Fatal("the committed rows changed under the burst")
	}
	must(t, g.Close(ctx))

	must(t, f.Flush(ctx))
	want := rows(0, n)
	got = make([]byte, n*row)
	must(t, ds.Read(ctx, All([]uint64{n, row}), got))
	if !bytes.Equal(got, want) {
		t.Fatal("rows read back wrong after the flush")
	}
	must(t, f.Close(ctx))
	h := tOpen(t, crash, &Options{ReadOnly: true})
	hds, err := h.OpenDataset(ctx, "t", nil)
	must(t, err)
	clear(got)
	must(t, hds.Read(ctx, All([]uint64{n, row}), got))
	if !bytes.Equal(got, want) {
		t.Fatal("rows read back wrong after reopening")
	}
}

// TestIndexShedWriteFails: the writes of changed index blocks under
// pressure fail (every WriteAt, the way index blocks are written, while the
// chunks' vector writes go through). Nothing is lost and nothing changes
// what a commit will write: the blocks stay changed and in memory, and once
// the device works again a Flush commits every row.
func TestIndexShedWriteFails(t *testing.T) {
	ctx := context.Background()
	const n, row, batch = 20_000, shedRow, 500
	var failing atomic.Bool
	fd := vfd.NewFault(vfd.NewMem(), vfd.InjectorFunc(func(info vfd.OpInfo) vfd.Effect {
		if failing.Load() && info.Op == vfd.OpWrite {
			return vfd.Effect{Err: fmt.Errorf("%w: index block write", vfd.ErrInjected)}
		}
		return vfd.Effect{}
	}))
	f, ds := newShedFile(t, fd, 64<<10, batch)
	rows := shedRows
	failing.Store(true)
	appendShedRows(t, ds, batch, n, batch, nil)
	failing.Store(false)
	if fd.Injected() == 0 {
		t.Fatal("no index block write was attempted under pressure: the test shows nothing")
	}
	if got := f.indexShedBytes.Load(); got != 0 {
		t.Fatalf("%d bytes of index blocks let go although every write of them failed", got)
	}
	must(t, f.Flush(ctx))
	got := make([]byte, n*row)
	must(t, ds.Read(ctx, All([]uint64{n, row}), got))
	if !bytes.Equal(got, rows(0, n)) {
		t.Fatal("rows read back wrong after the flush")
	}
	must(t, f.Close(ctx))
	g := tOpen(t, fd, &Options{ReadOnly: true})
	gds, err := g.OpenDataset(ctx, "t", nil)
	must(t, err)
	clear(got)
	must(t, gds.Read(ctx, All([]uint64{n, row}), got))
	if !bytes.Equal(got, rows(0, n)) {
		t.Fatal("rows read back wrong after reopening")
	}
}

// shedWorkload is a crash/fault workload whose write bursts make the cache
// write changed index blocks under pressure (File.writeIndexes) between
// commits (shedWorkloadBytes counts them): rows of 16 bytes, one chunk each, in a cache of 16 KiB, appended
// 250 at a time, with a commit before, between and after the bursts.
var shedWorkload = defineWorkload(5, &Options{CacheConfig: cache.Config{QuiescentBytes: 16 << 10, ActiveMultiplier: 1}}, func(w *wlRun) error {
	const row = 16
	w.beforeClose = func(f *File) { shedWorkloadBytes.Add(f.indexShedBytes.Load()) }
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{250, row}, MaxShape: []uint64{Unlimited, row}, Chunk: []uint64{1, row}}
	if err := w.create(map[string]DatasetSpec{"t": spec}, "t"); err != nil {
		return err
	}
	burst := func(from, to uint64) error {
		for k := from; k < to; k += 250 {
			if k > 0 {
				if err := w.setExtent("t", []uint64{k + 250, row}); err != nil {
					return err
				}
			}
			sel := Box([]uint64{k, 0}, []uint64{250, row})
			buf := randomBytes(w.rng, 250*row)
			if err := w.sets["t"].Write(w.ctx, sel, buf); err != nil {
				return err
			}
			w.refs["t"].write(sel, buf)
		}
		return nil
	}
	return steps(
		func() error { return burst(0, 250) }, w.flush,
		func() error { return burst(250, 1250) }, w.flush,
		func() error { return burst(1250, 1500) }, // Close commits the last burst
	)
})

// shedWorkloadBytes adds up, over every run of shedWorkload, the changed
// index bytes written under pressure: the sweeps require some, or they
// did not test what they are for. (Per run they are not certain: whether
// the cache sheds during a burst depends on when the trimmer runs.)
var shedWorkloadBytes atomic.Int64

// TestIndexShedCrashAtEveryWrite cuts the power at every mutating operation
// of shedWorkload, the writes of changed index blocks between commits
// included: every crash image opens in a committed state, byte for byte.
func TestIndexShedCrashAtEveryWrite(t *testing.T) {
	defer verifyNoLeaks(t)
	shedWorkloadBytes.Store(0)
	crashSweep(t, shedWorkload, 3)
	if shedWorkloadBytes.Load() == 0 {
		t.Fatal("no run wrote a changed index block under pressure: the sweep shows nothing")
	}
}

// TestIndexShedFaultAtEveryOperation fails every operation of shedWorkload
// from each index on: every injected error reaches the caller (or is one
// of writeIndexes', which leaves the index as it was for the commit that
// then fails), and the file reopens in its last committed state.
func TestIndexShedFaultAtEveryOperation(t *testing.T) {
	defer verifyNoLeaks(t)
	shedWorkloadBytes.Store(0)
	faultSweep(t, shedWorkload, 4)
	if shedWorkloadBytes.Load() == 0 {
		t.Fatal("no run wrote a changed index block under pressure: the sweep shows nothing")
	}
}

// TestIndexShedRacesCommits: changed index blocks written under pressure
// (File.writeIndexes) while an appender grows the dataset, two rewriters
// change rows they own, readers read, and another goroutine commits every
// few milliseconds, on a cache far smaller than the index, under -race.
// Every row read is whole (one value in all its bytes), and after Close
// the reopened file holds each row's last write.
func TestIndexShedRacesCommits(t *testing.T) {
	ctx := context.Background()
	const n0, row = 4_000, 16
	rounds := 40
	if long() {
		rounds = 400
	}
	mem := vfd.NewMem()
	f := tCreate(t, mem, &Options{CacheConfig: cache.Config{QuiescentBytes: 24 << 10, ActiveMultiplier: 1}})
	ds, err := f.CreateDataset(ctx, "t", DatasetSpec{Type: Uint8, Shape: []uint64{n0, row}, MaxShape: []uint64{Unlimited, row}, Chunk: []uint64{1, row}})
	must(t, err)
	final := make([]byte, n0, n0+uint64(rounds)*100) // each row's last value
	for k := range final {
		final[k] = byte(k)
	}
	init := make([]byte, 0, n0*row)
	for k := 0; k < n0; k++ {
		init = append(init, bytes.Repeat([]byte{final[k]}, row)...)
	}
	must(t, ds.Write(ctx, All([]uint64{n0, row}), init))
	must(t, f.Flush(ctx))

	var wg sync.WaitGroup
	var stop atomic.Bool
	var rows atomic.Uint64 // rows written so far (the appender's extent)
	rows.Store(n0)
	fail := func(err error) {
		t.Error(err)
		stop.Store(true)
	}
	wg.Add(1)
	go func() { // appender: the only goroutine that changes the extent
		defer wg.Done()
		var mine []byte
		for r := 0; r < rounds && !stop.Load(); r++ {
			k := rows.Load()
			if err := ds.SetExtent(ctx, []uint64{k + 100, row}); err != nil {
				fail(err)
				return
			}
			buf := make([]byte, 0, 100*row)
			for j := uint64(0); j < 100; j++ {
				v := byte((k + j) * 7)
				mine = append(mine, v)
				buf = append(buf, bytes.Repeat([]byte{v}, row)...)
			}
			if err := ds.Write(ctx, Box([]uint64{k, 0}, []uint64{100, row}), buf); err != nil {
				fail(err)
				return
			}
			rows.Store(k + 100)
		}
		final = append(final, mine...) // read after wg.Wait
	}()
	last := [2]map[uint64]byte{{}, {}}
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() { // rewriter w owns the initial rows k with k%2 == w
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for i := 0; i < rounds*50 && !stop.Load(); i++ {
				k := rng.Uint64N(n0/2)*2 + uint64(w)
				v := byte(rng.Uint32())
				if err := ds.Write(ctx, Box([]uint64{k, 0}, []uint64{1, row}), bytes.Repeat([]byte{v}, row)); err != nil {
					fail(err)
					return
				}
				last[w][k] = v
			}
		}()
	}
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 4))
			buf := make([]byte, row)
			for i := 0; i < rounds*50 && !stop.Load(); i++ {
				k := rng.Uint64N(rows.Load())
				if err := ds.Read(ctx, Box([]uint64{k, 0}, []uint64{1, row}), buf); err != nil {
					fail(err)
					return
				}
				if !bytes.Equal(buf, bytes.Repeat(buf[:1], row)) {
					fail(fmt.Errorf("row %d reads torn: %v", k, buf))
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { // committer
		defer close(done)
		for !stop.Load() {
			if err := f.Flush(ctx); err != nil {
				fail(err)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	wg.Wait()
	stop.Store(true)
	<-done
	if t.Failed() {
		return
	}
	for w := range last {
		for k, v := range last[w] {
			final[k] = v
		}
	}
	if f.indexShedBytes.Load() == 0 {
		t.Fatal("no changed index block was written under pressure: the test shows nothing")
	}
	must(t, f.Close(ctx))
	g := tOpen(t, mem, &Options{ReadOnly: true})
	gds, err := g.OpenDataset(ctx, "t", nil)
	must(t, err)
	n := uint64(len(final))
	if sh := gds.Shape(); sh[0] != n {
		t.Fatalf("reopened with %d rows, want %d", sh[0], n)
	}
	got := make([]byte, n*row)
	must(t, gds.Read(ctx, All([]uint64{n, row}), got))
	for k := uint64(0); k < n; k++ {
		if got[k*row] != final[k] || !bytes.Equal(got[k*row:(k+1)*row], bytes.Repeat([]byte{final[k]}, row)) {
			t.Fatalf("row %d holds %v after reopening, want %d", k, got[k*row:(k+1)*row], final[k])
		}
	}
}

// TestIndexShedKinds: changed blocks are written and let go under pressure
// for every index kind, not only the extensible array the other shed tests
// use: a fixed array (no unlimited dimension) written in batches, and a
// general index (two unlimited dimensions) grown and written in batches.
// Resident bytes stay near the limit, and every row reads back after the
// Flush and after reopening.
func TestIndexShedKinds(t *testing.T) {
	ctx := context.Background()
	const n, batch, limit = 20_000, 500, 64 << 10
	for _, kind := range []struct {
		name string
		max  []uint64
		grow bool
	}{
		{"fixed-array", []uint64{n, shedRow}, false},
		{"general", []uint64{Unlimited, Unlimited}, true},
	} {
		t.Run(kind.name, func(t *testing.T) {
			mem := vfd.NewMem()
			f := tCreate(t, mem, &Options{CacheConfig: cache.Config{QuiescentBytes: limit, ActiveMultiplier: 1}})
			first := uint64(n)
			if kind.grow {
				first = batch
			}
			ds, err := f.CreateDataset(ctx, "t", DatasetSpec{Type: Uint8, Shape: []uint64{first, shedRow}, MaxShape: kind.max, Chunk: []uint64{1, shedRow}})
			must(t, err)
			if got := ds.IndexKind(); got != kind.name {
				t.Fatalf("index kind %s, want %s", got, kind.name)
			}
			must(t, f.Flush(ctx))
			for k := uint64(0); k < n; k += batch {
				if kind.grow && k > 0 {
					must(t, ds.SetExtent(ctx, []uint64{k + batch, shedRow}))
				}
				must(t, ds.Write(ctx, Box([]uint64{k, 0}, []uint64{batch, shedRow}), shedRows(k, batch)))
			}
			st := f.Cache().Stats()
			t.Logf("peak resident %d against a limit of %d; changed blocks written and let go %d bytes", st.PeakResidentBytes, limit, f.indexShedBytes.Load())
			if f.indexShedBytes.Load() == 0 {
				t.Fatal("no changed index block was written under pressure")
			}
			// The index is 20,000 entries of 24 bytes (480 KB); what may be
			// over the limit is what TestIndexShedChangedBlocks allows.
			if st.PeakResidentBytes > limit+limit/2+2*(1024*24+32) {
				t.Fatalf("peak resident %d bytes against a limit of %d", st.PeakResidentBytes, limit)
			}
			must(t, f.Flush(ctx))
			must(t, f.Close(ctx))
			g := tOpen(t, mem, &Options{ReadOnly: true})
			gds, err := g.OpenDataset(ctx, "t", nil)
			must(t, err)
			got := make([]byte, n*shedRow)
			must(t, gds.Read(ctx, All([]uint64{n, shedRow}), got))
			if !bytes.Equal(got, shedRows(0, n)) {
				t.Fatal("rows read back wrong after reopening")
			}
		})
	}
}
