package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/scc-dev/scc/cache"
	"github.com/scc-dev/scc/engine/internal/format"
	"github.com/scc-dev/scc/pool"
	"github.com/scc-dev/scc/resource"
	"github.com/scc-dev/scc/serialize"
	"github.com/scc-dev/scc/vfd"
)

// Data safety under concurrency and faults. Each one
// failed before its fix.

// TestRaceFlushSetExtent: one goroutine loops Flush while
// another grows and shrinks an unlimited dimension and writes, the ordinary
// appender + periodic flusher. Every commit a flusher acknowledged must be
// a consistent file (Check on a copy of the image taken right after Flush
// returned), and after both stop a final Flush must store the last extent
// and data.
func TestRaceFlushSetExtent(t *testing.T) {
	runs := 100
	if long() {
		runs = 2000
	}
	for run := 0; run < runs; run++ {
		raceFlushSetExtentOnce(t, uint64(run), 3, cache.Config{QuiescentBytes: 2 << 10})
		if t.Failed() {
			t.Fatalf("run %d failed", run)
		}
	}
}

// TestRaceFlushSetExtentDirect is the same with one-row chunks that every
// row write covers whole and that go from the caller's buffer to the file
// (cache.Config.DirectWriteBytes), in a cache with room: direct writes
// racing the flusher and the extent changes.
func TestRaceFlushSetExtentDirect(t *testing.T) {
	runs := 50
	if long() {
		runs = 1000
	}
	for run := 0; run < runs; run++ {
		raceFlushSetExtentOnce(t, uint64(run), 1, cache.Config{QuiescentBytes: 1 << 20, DirectWriteBytes: 1})
		if t.Failed() {
			t.Fatalf("run %d failed", run)
		}
	}
}

func raceFlushSetExtentOnce(t *testing.T, seed, chunkRows uint64, cfg cache.Config) {
	ctx := context.Background()
	mem := vfd.NewMem()
	opts := &Options{CacheConfig: cfg}
	f := tCreate(t, mem, opts)
	spec := DatasetSpec{Type: Uint32, Shape: []uint64{0, 4}, MaxShape: []uint64{Unlimited, 4}, Chunk: []uint64{chunkRows, 4}}
	ds, err := f.CreateDataset(ctx, "a", spec)
	must(t, err)
	ref := newRef(spec.Shape, 4, nil)

	var images [][]byte
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := f.Flush(ctx); err != nil {
				t.Errorf("flush: %v", err)
				return
			}
			if i%4 == 0 && len(images) < 16 {
				images = append(images, mem.Bytes())
			}
		}
	}()
	rng := rand.New(rand.NewPCG(seed, 99))
	n := uint64(0)
	for step := 0; step < 60; step++ {
		if rng.IntN(4) == 0 && n > 0 {
			n -= uint64(rng.IntN(int(n) + 1)) // shrink, possibly to 0
		} else {
			n += uint64(1 + rng.IntN(5))
		}
		must(t, ds.SetExtent(ctx, []uint64{n, 4}))
		ref.resize([]uint64{n, 4})
		if n > 0 {
			row := uint64(rng.IntN(int(n)))
			sel := Box([]uint64{row, 0}, []uint64{1, 4})
			buf := randomBytes(rng, 16)
			must(t, ds.Write(ctx, sel, buf))
			ref.write(sel, buf)
		}
	}
	close(stop)
	wg.Wait()
	if cfg.DirectWriteBytes > 0 && f.Cache().Stats().DirectWrites == 0 {
		t.Fatal("no direct writes happened")
	}
	must(t, f.Flush(ctx))
	// The final Flush started after the last SetExtent returned: the
	// committed image must hold that extent and the data.
	img := vfd.NewMemFrom(mem.Bytes())
	g := tOpen(t, img, &Options{ReadOnly: true})
	ds2, err := g.OpenDataset(ctx, "a", nil)
	must(t, err)
	ref.verify(t, ds2)
	for i, b := range images {
		if rep, err := Check(ctx, "", &Options{Driver: vfd.NewMemFrom(b)}); err != nil {
			t.Errorf("image %d acknowledged by Flush: %v %q", i, err, rep.Problems)
		}
	}
}

// TestSetExtentShrinkFailureLeavesDatasetUnchanged: an I/O
// error at any operation of a shrink leaves the dataset as it was (shape and
// every element, dirty data included), in memory and after a commit and a
// reopen.
func TestSetExtentShrinkFailureLeavesDatasetUnchanged(t *testing.T) {
	for _, cold := range []bool{false, true} {
		t.Run(fmt.Sprintf("cold=%v", cold), func(t *testing.T) { shrinkFaultSweep(t, cold) })
	}
}

// shrinkFaultSweep: with cold set, the file is reopened before the shrink,
// so the index blocks must be loaded too.
func shrinkFaultSweep(t *testing.T, cold bool) {
	ctx := context.Background()
	for nth := int64(0); ; nth++ {
		mem := vfd.NewMem()
		fd := vfd.NewFault(mem)
		// 1 KiB chunks in a 2 KiB cache: the edge chunks are not resident.
		opts := &Options{CacheConfig: cache.Config{QuiescentBytes: 2 << 10, MinBytes: 1}}
		f := tCreate(t, fd, opts)
		spec := DatasetSpec{Type: Uint32, Shape: []uint64{64, 64}, Chunk: []uint64{16, 16}}
		ds, err := f.CreateDataset(ctx, "d", spec)
		must(t, err)
		ref := newRef(spec.Shape, 4, nil)
		rng := rand.New(rand.NewPCG(1, uint64(nth)))
		buf := randomBytes(rng, 64*64*4)
		must(t, ds.Write(ctx, All(spec.Shape), buf))
		ref.write(All(spec.Shape), buf)
		must(t, f.Flush(ctx))
		if cold {
			must(t, f.Close(ctx))
			f = tOpen(t, fd, opts)
			ds, err = f.OpenDataset(ctx, "d", nil)
			must(t, err)
		}
		// Dirty data, outside the new extent and on an edge, not flushed.
		for _, start := range [][]uint64{{50, 50}, {36, 5}, {3, 44}} {
			sel := Box(start, []uint64{4, 4})
			b := randomBytes(rng, 64)
			must(t, ds.Write(ctx, sel, b))
			ref.write(sel, b)
		}
		base := fd.Ops().Total()
		fd.Add(vfd.Fail(vfd.Nth(vfd.OpAny, base+nth)))
		err = ds.SetExtent(ctx, []uint64{40, 40})
		fd.SetEnabled(false)
		if err == nil {
			if nth == 0 {
				t.Fatal("the shrink did no I/O: the test proves nothing")
			}
			ref.resize([]uint64{40, 40})
			ref.verify(t, ds)
			must(t, f.Close(ctx))
			t.Logf("shrink survived a fault at each of its %d operations", nth)
			return
		}
		if !errors.Is(err, vfd.ErrInjected) || !errors.Is(err, ErrIO) || errors.Is(err, ErrCorrupt) {
			t.Fatalf("op %d: error %v is not the injected I/O error", nth, err)
		}
		ref.verify(t, ds) // unchanged in memory
		must(t, f.Close(ctx))
		g := tOpen(t, mem, opts)
		ds2, err := g.OpenDataset(ctx, "d", nil)
		must(t, err)
		ref.verify(t, ds2) // and durably
		must(t, g.Close(ctx))
	}
}

// TestSyncFailureInCacheFlushLatches: a sync that fails inside
// the cache's write-back (not one of the commit's own two) latches the
// error: a driver that drops the unsynced pages (as Linux does) would
// otherwise let the next Flush and Close "succeed" over lost chunks.
func TestSyncFailureInCacheFlushLatches(t *testing.T) {
	ctx := context.Background()
	fd, f, ds := dirtyFaultFile(t)
	// The first sync of the next Flush is the cache's, after it wrote the
	// chunks.
	fd.Add(vfd.Fail(vfd.Nth(vfd.OpSync, fd.Ops()[vfd.OpSync])))
	if err := f.Flush(ctx); !errors.Is(err, vfd.ErrInjected) || !errors.Is(err, ErrIO) {
		t.Fatalf("first flush: %v, want the injected sync error", err)
	}
	if fd.Injected() != 1 {
		t.Fatalf("%d faults injected", fd.Injected())
	}
	fd.SetEnabled(false) // the disk "recovers"; the lost pages do not
	if err := f.Flush(ctx); !errors.Is(err, vfd.ErrInjected) {
		t.Fatalf("second flush after a failed sync: %v, want the latched error", err)
	}
	must(t, ds.Write(ctx, Box([]uint64{0}, []uint64{1}), []byte{1}))
	if err := f.Close(ctx); !errors.Is(err, vfd.ErrInjected) {
		t.Fatalf("close after a failed sync: %v, want the latched error", err)
	}
}

// TestSuperblockReadErrorFailsOpen: an I/O error on either
// superblock slot fails Open with that error; it never falls back on the
// other slot (which may hold an older generation). A directory or a FIFO
// is refused as not a regular file, without blocking.
func TestSuperblockReadErrorFailsOpen(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	for i := 0; i < 3; i++ { // both slots valid, different generations
		must(t, f.Flush(ctx))
	}
	must(t, f.Close(ctx))
	for _, slot := range []int64{format.SlotA, format.SlotB} {
		fd := vfd.NewFault(mem, vfd.Fail(vfd.TriggerFunc(func(i vfd.OpInfo) bool {
			return i.Op == vfd.OpRead && i.Off == slot
		})))
		for _, ro := range []bool{false, true} {
			g, err := Open(ctx, "", &Options{Driver: fd, ReadOnly: ro})
			if err == nil {
				g.Close(ctx)
				t.Fatalf("slot %d read-only=%v: open succeeded over an I/O error", slot, ro)
			}
			if !errors.Is(err, vfd.ErrInjected) || !errors.Is(err, ErrIO) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("slot %d: %v, want the I/O error and not ErrCorrupt", slot, err)
			}
		}
	}
	dir := t.TempDir()
	if _, err := Open(ctx, dir, nil); !errors.Is(err, ErrInvalid) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("directory: %v, want ErrInvalid", err)
	}
	if _, err := Open(ctx, dir, &Options{ReadOnly: true}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("directory read-only: %v, want ErrInvalid", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, ro := range []bool{false, true} {
		if _, err := Open(ctx, fifo, &Options{ReadOnly: ro}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("fifo: %v, want ErrInvalid", err)
		}
	}
	if _, err := Check(ctx, fifo, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("check of a fifo: %v, want ErrInvalid", err)
	}
	if _, err := Open(ctx, filepath.Join(dir, "missing"), nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing: %v, want ErrNotFound", err)
	}
}

// TestDecoderLimitsEnforcedByAPI: every limit the header and
// index decoders enforce is refused on the way in with a typed error, and
// the file stays readable (a writable Open, Check and OpenDataset) after
// every refused call.
func TestDecoderLimitsEnforcedByAPI(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	ok, err := f.CreateDataset(ctx, "ok", DatasetSpec{Type: Uint8, Shape: []uint64{4, 4}, MaxShape: []uint64{Unlimited, 8}, Chunk: []uint64{2, 2}})
	must(t, err)
	big := make([]uint64, MaxRank+1)
	for i := range big {
		big[i] = 1
	}
	longName := string(make([]byte, 2000))
	bad := []struct {
		name string
		spec DatasetSpec
		want error
	}{
		{"2^80 elements", DatasetSpec{Type: Uint8, Shape: []uint64{1 << 40, 1 << 40}, Chunk: []uint64{1, 1}}, ErrInvalid},
		{"2^65 elements", DatasetSpec{Type: Uint8, Shape: []uint64{1 << 32, 1 << 32, 2}, Chunk: []uint64{1, 1, 1}}, ErrInvalid},
		{"2^63 elements", DatasetSpec{Type: Uint8, Shape: []uint64{1 << 62, 2}, Chunk: []uint64{1, 1}}, ErrInvalid},
		{"unlimited current extent", DatasetSpec{Type: Uint8, Shape: []uint64{Unlimited}, MaxShape: []uint64{Unlimited}, Chunk: []uint64{1}}, ErrInvalid},
		{"rank 33", DatasetSpec{Type: Uint8, Shape: big, Chunk: big}, ErrInvalid},
		{"rank 0 with a chunk", DatasetSpec{Type: Uint8, Chunk: []uint64{1}}, ErrInvalid}, // rank 0 alone is a scalar
		{"chunk over 1 GiB", DatasetSpec{Type: Uint64, Shape: []uint64{1 << 28}, Chunk: []uint64{1 << 28}}, ErrInvalid},
		{"chunk zero", DatasetSpec{Type: Uint8, Shape: []uint64{4}, Chunk: []uint64{0}}, ErrInvalid},
		{"fill size", DatasetSpec{Type: Uint32, Shape: []uint64{4}, Chunk: []uint64{4}, Fill: []byte{1}}, ErrInvalid},
		{"33 filters", DatasetSpec{Type: Uint8, Shape: []uint64{4}, Chunk: []uint64{4}, Filters: make([]Filter, 33)}, ErrInvalid},
		{"min cache", DatasetSpec{Type: Uint8, Shape: []uint64{4}, Chunk: []uint64{4}, CacheMinBytes: -2}, ErrInvalid},
		{"type", DatasetSpec{Type: Type(99), Shape: []uint64{4}, Chunk: []uint64{4}}, ErrInvalid},
		{"shape over max", DatasetSpec{Type: Uint8, Shape: []uint64{5}, MaxShape: []uint64{4}, Chunk: []uint64{4}}, ErrInvalid},
	}
	for i, c := range bad {
		_, err := f.CreateDataset(ctx, fmt.Sprintf("bad%d", i), c.spec)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	for _, n := range []string{"", longName, "\xff\xfe"} {
		if _, err := f.CreateDataset(ctx, n, DatasetSpec{Type: Uint8, Shape: []uint64{4}, Chunk: []uint64{4}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("name %q: %v, want ErrInvalid", n[:min(len(n), 8)], err)
		}
	}
	for _, dims := range [][]uint64{{Unlimited, 4}, {1 << 62, 4}} {
		if err := ok.SetExtent(ctx, dims); !errors.Is(err, ErrInvalid) {
			t.Errorf("SetExtent(%v): %v, want ErrInvalid", dims, err)
		}
	}
	// Past max shape, or past what the dataset's chunk index can address
	// (the extensible array's slot count): out of range.
	for _, dims := range [][]uint64{{4, 9}, {1<<63 - 1, 1}} {
		if err := ok.SetExtent(ctx, dims); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("SetExtent(%v): %v, want ErrOutOfRange", dims, err)
		}
	}
	// The same index limits at creation.
	for i, sh := range [][]uint64{{1 << 50, 1}} {
		_, err := f.CreateDataset(ctx, fmt.Sprintf("huge%d", i), DatasetSpec{Type: Uint8, Shape: sh, MaxShape: []uint64{Unlimited, sh[1]}, Chunk: []uint64{1, 1}})
		if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrOutOfRange) {
			t.Errorf("create %v beyond the index: %v", sh, err)
		}
	}
	if got := ok.Shape(); !equal(got, []uint64{4, 4}) {
		t.Fatalf("refused SetExtent changed the shape to %v", got)
	}
	must(t, f.Close(ctx))
	g := tOpen(t, mem, nil) // writable: walks every index
	if names := g.datasetNames(); len(names) != 1 || names[0] != "ok" {
		t.Fatalf("datasets after refused calls: %v", names)
	}
	_, err = g.OpenDataset(ctx, "ok", nil)
	must(t, err)
}

// TestRaceReaderFollowsWriter: a read-only File following a
// writer that commits continuously never sees ErrCorrupt or wrong data; a
// reader that cannot catch up gets ErrStale, which Refresh cures.
func TestRaceReaderFollowsWriter(t *testing.T) {
	ctx := context.Background()
	commits := 150
	if long() {
		commits = 5000
	}
	path := filepath.Join(tmpfsDir(t), "swmr.scc")
	w := tCreatePath(t, path, &Options{CacheConfig: cache.Config{QuiescentBytes: 8 << 10}})
	defer w.Close(ctx)
	const cols = 32
	ds, err := w.CreateDataset(ctx, "frames", DatasetSpec{Type: Uint64, Shape: []uint64{0, cols}, MaxShape: []uint64{Unlimited, cols}, Chunk: []uint64{2, cols}})
	must(t, err)
	must(t, w.Flush(ctx))
	frame := func(n uint64) []byte {
		b := make([]byte, cols*8)
		for i := range cols {
			v := n*1000 + uint64(i)
			for k := 0; k < 8; k++ {
				b[i*8+k] = byte(v >> (8 * k))
			}
		}
		return b
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	var stale, reads [2]int
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			rf, err := Open(ctx, path, &Options{ReadOnly: true, CacheConfig: cache.Config{QuiescentBytes: 4 << 10}})
			if err != nil {
				t.Error(err)
				return
			}
			defer rf.Close(ctx)
			rng := rand.New(rand.NewPCG(uint64(r), 5))
			var rd *Dataset
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := rf.Refresh(ctx); err != nil {
					if errors.Is(err, ErrStale) {
						stale[r]++
						continue
					}
					t.Errorf("refresh: %v", err)
					return
				}
				if rd == nil {
					if rd, err = rf.OpenDataset(ctx, "frames", nil); err != nil {
						t.Errorf("open dataset: %v", err)
						return
					}
				}
				n := rd.Shape()[0]
				if n == 0 {
					continue
				}
				row := uint64(rng.IntN(int(n)))
				got := make([]byte, cols*8)
				err := rd.Read(ctx, Box([]uint64{row, 0}, []uint64{1, cols}), got)
				reads[r]++
				switch {
				case errors.Is(err, ErrStale):
					stale[r]++
				case err != nil:
					t.Errorf("read row %d of %d: %v", row, n, err)
					return
				case string(got) != string(frame(row)):
					t.Errorf("row %d: wrong data", row)
					return
				}
			}
		}(r)
	}
	for n := uint64(0); n < uint64(commits); n++ {
		must(t, ds.SetExtent(ctx, []uint64{n + 1, cols}))
		must(t, ds.Write(ctx, Box([]uint64{n, 0}, []uint64{1, cols}), frame(n)))
		// Rewrite an old row too, so that space is freed and reused.
		if n > 4 {
			old := n / 2
			must(t, ds.Write(ctx, Box([]uint64{old, 0}, []uint64{1, cols}), frame(old)))
		}
		must(t, w.Flush(ctx))
	}
	close(done)
	wg.Wait()
	t.Logf("reads %v, stale %v over %d commits", reads, stale, commits)
}

// TestRaceOpenDatasetFlush: OpenDataset reads the committed
// superblock while commits replace it; -race finds a shared field.
func TestRaceOpenDatasetFlush(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, nil)
	for i := 0; i < 8; i++ {
		_, err := f.CreateDataset(ctx, name(i), DatasetSpec{Type: Uint8, Shape: []uint64{8}, Chunk: []uint64{4}})
		must(t, err)
	}
	must(t, f.Close(ctx))
	f = tOpen(t, mem, nil)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < 50; i++ {
			if err := f.Flush(ctx); err != nil {
				t.Error(err)
				return
			}
			_ = f.Generation()
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 8; i++ {
			ds, err := f.OpenDataset(ctx, name(i), nil)
			if err != nil {
				t.Error(err)
				return
			}
			if err := ds.Write(ctx, Box([]uint64{0}, []uint64{1}), []byte{byte(i)}); err != nil {
				t.Error(err)
			}
		}
	}()
	wg.Wait()
}

// TestErrorsMatchOneSentinel: every error the engine returns
// matches exactly one engine sentinel (context errors aside), including
// writes racing Close, handles used after their file closed and injected
// I/O errors, which keep their cause.
func TestErrorsMatchOneSentinel(t *testing.T) {
	ctx := context.Background()
	one := func(what string, err error, want error) {
		t.Helper()
		var hit []error
		for _, s := range sentinels {
			if errors.Is(err, s) {
				hit = append(hit, s)
			}
		}
		if len(hit) != 1 || !errors.Is(err, want) {
			t.Errorf("%s: %v matches %v, want exactly %v", what, err, hit, want)
		}
	}
	// classify of each lower layer's sentinel.
	lower := []struct {
		err  error
		want error
	}{
		{cache.ErrClosed, ErrClosed}, {cache.ErrNotRegistered, ErrClosed}, {cache.ErrInvalid, ErrInvalid},
		{cache.ErrExists, ErrExists}, {cache.ErrPanic, ErrInternal}, {cache.ErrInvalidConfig, ErrInvalid},
		{cache.ErrFilesOpen, ErrInvalid}, {cache.ErrInUse, ErrInternal},
		{pool.ErrClosed, ErrClosed}, {pool.ErrPanic, ErrInternal}, {pool.ErrGoexit, ErrInternal}, {pool.ErrInvalid, ErrInvalid},
		{serialize.ErrInvalid, ErrInvalid}, {resource.ErrInvalid, ErrInvalid},
		{vfd.ErrClosed, ErrClosed}, {vfd.ErrInjected, ErrIO}, {vfd.ErrInvalid, ErrInvalid}, {vfd.ErrLocked, ErrLocked},
		{syscall.EIO, ErrIO}, {io.ErrShortWrite, ErrIO}, {format.ErrCorrupt, ErrCorrupt},
	}
	for _, c := range lower {
		err := classify(fmt.Errorf("wrapped: %w", c.err))
		one(c.err.Error(), err, c.want)
		if !errors.Is(err, c.err) {
			t.Errorf("%v: cause lost", c.err)
		}
	}
	if err := classify(context.Canceled); err != context.Canceled {
		t.Errorf("context error rewritten: %v", err)
	}

	// Through the API.
	fd, f, ds := dirtyFaultFile(t)
	fd.Add(vfd.Fail(vfd.Nth(vfd.OpAny, fd.Ops().Total())))
	err := f.Flush(ctx)
	one("flush with a failed write", err, ErrIO)
	if !errors.Is(err, vfd.ErrInjected) {
		t.Errorf("cause lost: %v", err)
	}
	fd.SetEnabled(false)
	must(t, f.Flush(ctx))
	one("read with a bad buffer", ds.Read(ctx, All([]uint64{64}), nil), ErrInvalid)
	one("read out of range", ds.Read(ctx, Box([]uint64{60}, []uint64{8}), make([]byte, 8)), ErrOutOfRange)
	_, err = f.OpenDataset(ctx, "nope", nil)
	one("open missing", err, ErrNotFound)
	_, err = f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{4}, Chunk: []uint64{4}})
	one("create existing", err, ErrExists)

	// Writes racing Close: each returns nil or ErrClosed, nothing else.
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				err := ds.Write(ctx, Box([]uint64{uint64(i % 64)}, []uint64{1}), []byte{1})
				if err != nil {
					one("write racing close", err, ErrClosed)
					return
				}
			}
		}()
	}
	must(t, f.Close(ctx))
	wg.Wait()
	one("write after close", ds.Write(ctx, Box([]uint64{0}, []uint64{1}), []byte{1}), ErrClosed)
	one("flush after close", f.Flush(ctx), ErrClosed)
	if err := ds.Close(ctx); err != nil {
		t.Errorf("Dataset.Close after File.Close: %v, want nil", err)
	}

	// A shared cache closed under a file: its errors are ErrClosed.
	c, err := cache.New(cache.Config{})
	must(t, err)
	mem2 := vfd.NewMem()
	f2 := tCreate(t, mem2, &Options{Cache: c})
	ds2, err := f2.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{8}, Chunk: []uint64{8}})
	must(t, err)
	// A shared cache refuses to close under a registered file (it would
	// drop the file's dirty chunks); the file goes on working.
	if err := c.Close(); !errors.Is(err, cache.ErrFilesOpen) {
		t.Errorf("closing a shared cache under an open file: %v", err)
	}
	must(t, ds2.Write(ctx, All([]uint64{8}), make([]byte, 8)))
	must(t, f2.Close(ctx))
	must(t, c.Close())
	one("create on a closed shared cache", func() error { _, err := Create(ctx, "", &Options{Driver: vfd.NewMem(), Cache: c}); return err }(), ErrClosed)
}

// shortWriter reports writing fewer bytes than asked with no error, which
// io.WriterAt forbids and a buggy driver does anyway.
type shortWriter struct {
	vfd.Driver
	on bool
}

func (s *shortWriter) WriteAt(p []byte, off int64) (int, error) {
	if s.on && len(p) > 1 {
		n, err := s.Driver.WriteAt(p[:len(p)/2], off)
		return n, err
	}
	return s.Driver.WriteAt(p, off)
}

// TestShortWriteIsAnError: n < len(p) with a nil error is
// io.ErrShortWrite, never success.
func TestShortWriteIsAnError(t *testing.T) {
	ctx := context.Background()
	sw := &shortWriter{Driver: vfd.NewMem()}
	f := tCreate(t, sw, nil)
	_, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{8}, Chunk: []uint64{8}})
	must(t, err)
	sw.on = true
	if err := f.Flush(ctx); !errors.Is(err, io.ErrShortWrite) || !errors.Is(err, ErrIO) {
		t.Fatalf("flush over a short write: %v", err)
	}
	sw.on = false
	must(t, f.Close(ctx))
	if _, err := Check(ctx, "", &Options{Driver: sw}); err != nil {
		t.Fatal(err)
	}
}

// TestCancelledWriteIsAtomicPerChunk: a Write cancelled part way
// applies to each chunk all of its piece or none of it (the documented
// guarantee), and the error is the context's.
func TestCancelledWriteIsAtomicPerChunk(t *testing.T) {
	mem := vfd.NewMem()
	f := tCreate(t, mem, &Options{CacheConfig: cache.Config{QuiescentBytes: 1 << 10, MinBytes: 1}})
	ds, err := f.CreateDataset(context.Background(), "d", DatasetSpec{Type: Uint8, Shape: []uint64{64, 64}, Chunk: []uint64{16, 16}})
	must(t, err)
	bg := context.Background()
	must(t, ds.Write(bg, All([]uint64{64, 64}), make([]byte, 64*64)))
	must(t, f.Flush(bg))
	cancelled := 0
	for try := 0; try < 40; try++ {
		ctx, cancel := context.WithCancel(bg)
		// A partial write of every chunk: each must load, so there are
		// many points where the cancel can land.
		sel := Box([]uint64{1, 1}, []uint64{62, 62})
		val := byte(try + 1)
		buf := make([]byte, 62*62)
		for i := range buf {
			buf[i] = val
		}
		go func() {
			for i := 0; i < try*50; i++ {
				_ = i
			}
			cancel()
		}()
		err := ds.Write(ctx, sel, buf)
		cancel()
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled write: %v", err)
			}
			cancelled++
		}
		got := make([]byte, 64*64)
		must(t, ds.Read(bg, All([]uint64{64, 64}), got))
		for cr := 0; cr < 4; cr++ {
			for cc := 0; cc < 4; cc++ {
				var seen [256]bool
				for r := max(cr*16, 1); r < min(cr*16+16, 63); r++ {
					for c := max(cc*16, 1); c < min(cc*16+16, 63); c++ {
						seen[got[r*64+c]] = true
					}
				}
				n := 0
				for _, s := range seen {
					if s {
						n++
					}
				}
				if n != 1 {
					t.Fatalf("try %d: chunk (%d,%d) holds a partial write", try, cr, cc)
				}
			}
		}
	}
	t.Logf("%d of 40 writes cancelled part way or before", cancelled)
}

// TestNoSyncSkipsEverySync: Options.NoSync (scratch files) reaches the
// driver with no Sync at all, the cache's write-back included; without it
// every Flush syncs.
func TestNoSyncSkipsEverySync(t *testing.T) {
	ctx := context.Background()
	for _, noSync := range []bool{false, true} {
		cnt := vfd.NewCounting(vfd.NewMem())
		f := tCreate(t, cnt, &Options{NoSync: noSync, CacheConfig: cache.Config{QuiescentBytes: 1 << 10}})
		ds, err := f.CreateDataset(ctx, "d", DatasetSpec{Type: Uint8, Shape: []uint64{4096}, Chunk: []uint64{256}})
		must(t, err)
		must(t, ds.Write(ctx, All([]uint64{4096}), make([]byte, 4096)))
		must(t, f.Flush(ctx))
		must(t, f.Close(ctx))
		syncs := cnt.Snapshot().Ops[vfd.OpSync]
		if noSync != (syncs == 0) {
			t.Fatalf("NoSync=%v: %d syncs", noSync, syncs)
		}
	}
}

// TestRaceEveryCallAgainstClose: goroutines make every public call at random
// while Flush runs in a loop and Close lands at a random moment. Each call
// returns nil or the error its arguments deserve (ErrClosed once the file
// is closing, ErrExists/ErrNotFound for names); nothing panics or races,
// and the file left behind passes Check (tCreate's cleanup).
func TestRaceEveryCallAgainstClose(t *testing.T) {
	runs := 30
	if long() {
		runs = 1000
	}
	for run := 0; run < runs; run++ {
		ctx := context.Background()
		mem := vfd.NewMem()
		f := tCreate(t, mem, &Options{CacheConfig: cache.Config{QuiescentBytes: 4 << 10}})
		spec := DatasetSpec{Type: Uint16, Shape: []uint64{8, 8}, MaxShape: []uint64{Unlimited, 8}, Chunk: []uint64{4, 4}}
		for i := 0; i < 3; i++ {
			_, err := f.CreateDataset(ctx, name(i), spec)
			must(t, err)
		}
		ok := func(err error, also ...error) bool {
			if err == nil || errors.Is(err, ErrClosed) {
				return true
			}
			for _, a := range also {
				if errors.Is(err, a) {
					return true
				}
			}
			return false
		}
		var wg sync.WaitGroup
		for g := 0; g < 6; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(run), uint64(g)))
				for i := 0; i < 60; i++ {
					n := name(rng.IntN(5))
					var err error
					switch rng.IntN(9) {
					case 0:
						_, err = f.CreateDataset(ctx, n, spec)
						if !ok(err, ErrExists) {
							t.Errorf("create: %v", err)
						}
					case 1, 2, 3, 4:
						ds, err := f.OpenDataset(ctx, n, nil)
						if !ok(err, ErrNotFound) {
							t.Errorf("open: %v", err)
						}
						if err != nil {
							continue
						}
						rows := ds.Shape()[0]
						switch {
						case rng.IntN(3) == 0:
							err = ds.SetExtent(ctx, []uint64{uint64(rng.IntN(12)), 8})
						case rows > 0 && rng.IntN(2) == 0:
							err = ds.Write(ctx, Box([]uint64{uint64(rng.IntN(int(rows))), 0}, []uint64{1, 8}), make([]byte, 16))
						case rows > 0:
							err = ds.Read(ctx, Box([]uint64{uint64(rng.IntN(int(rows))), 0}, []uint64{1, 8}), make([]byte, 16))
						}
						// A shape read before a concurrent shrink may be
						// out of range by the time the call runs.
						if !ok(err, ErrOutOfRange) {
							t.Errorf("dataset call: %v", err)
						}
						if err := ds.Close(ctx); err != nil {
							t.Errorf("dataset close: %v", err)
						}
					case 5, 6:
						if err := f.Flush(ctx); !ok(err) {
							t.Errorf("flush: %v", err)
						}
					case 7:
						_ = f.datasetNames()
						_ = f.Generation()
					case 8:
						if rng.IntN(20) == 0 {
							if err := f.Close(ctx); err != nil {
								t.Errorf("close: %v", err)
							}
						}
					}
				}
			}(g)
		}
		wg.Wait()
		must(t, f.Close(ctx))
		if t.Failed() {
			t.Fatalf("run %d", run)
		}
	}
}

// dirtyFaultFile is a checked File on a fault driver with one dataset of 64
// dirty bytes in 8 chunks.
func dirtyFaultFile(t *testing.T) (*vfd.Fault, *File, *Dataset) {
	fd := vfd.NewFault(vfd.NewMem())
	f := tCreate(t, fd, nil)
	ds, err := f.CreateDataset(context.Background(), "d", DatasetSpec{Type: Uint8, Shape: []uint64{64}, Chunk: []uint64{8}})
	must(t, err)
	must(t, ds.Write(context.Background(), All([]uint64{64}), make([]byte, 64)))
	return fd, f, ds
}

// TestFreeDroppedBeforeCommit pins the order TestRaceFlushSetExtentDirect
// found by chance once in a few hundred runs: a direct write replaces a
// committed chunk, and two commits run right after its Publish freed the
// old image (testHookDropped). Each image they leave must check clean and
// hold the chunk, old or new. With the free before the dirty mark, the
// commits saw the dataset clean, kept the old header naming the freed
// image, and the second wrote its catalog over it.
func TestFreeDroppedBeforeCommit(t *testing.T) {
	ctx := context.Background()
	mem := vfd.NewMem()
	f := tCreate(t, mem, &Options{CacheConfig: cache.Config{DirectWriteBytes: 1}})
	spec := DatasetSpec{Type: Uint8, Shape: []uint64{4, 64}, Chunk: []uint64{1, 64}}
	ds, err := f.CreateDataset(ctx, "d", spec)
	must(t, err)
	old := pattern(4*64, 1)
	must(t, ds.Write(ctx, All(spec.Shape), old))
	must(t, f.Flush(ctx))
	var images [][]byte
	var hookErr error
	h := func() {
		testHookDropped.Store(nil) // once
		for range 2 {
			if err := f.Flush(ctx); err != nil {
				hookErr = err
				return
			}
			images = append(images, mem.Bytes())
		}
	}
	testHookDropped.Store(&h)
	defer testHookDropped.Store(nil)
	row := pattern(64, 9)
	must(t, ds.Write(ctx, Box([]uint64{1, 0}, []uint64{1, 64}), row))
	must(t, hookErr)
	if len(images) != 2 || f.Cache().Stats().DirectWrites < 5 {
		t.Fatalf("%d images, %d direct writes: the hook did not run inside a direct write", len(images), f.Cache().Stats().DirectWrites)
	}
	for i, img := range images {
		if rep, err := Check(ctx, "", &Options{Driver: vfd.NewMemFrom(img)}); err != nil {
			t.Fatalf("image %d: %v %q", i, err, rep.Problems)
		}
		g, err := Open(ctx, "", &Options{Driver: vfd.NewMemFrom(img), ReadOnly: true})
		must(t, err)
		d, err := g.OpenDataset(ctx, "d", nil)
		must(t, err)
		got := make([]byte, 64)
		must(t, d.Read(ctx, Box([]uint64{1, 0}, []uint64{1, 64}), got))
		if !bytes.Equal(got, old[64:128]) && !bytes.Equal(got, row) {
			t.Fatalf("image %d: chunk 1 is neither its old nor its new contents", i)
		}
		must(t, g.Close(ctx))
	}
}
