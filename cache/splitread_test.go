package cache

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/scc-dev/scc/cache/layout"
	"github.com/scc-dev/scc/vfd"
)

// withProcs runs the test with GOMAXPROCS n (the split helpers are sized
// from it when the cache is made), restoring it afterwards.
func withProcs(t *testing.T, n int) {
	old := runtime.GOMAXPROCS(n)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
}

// recordingDriver records the extents of every ReadV.
type recordingDriver struct {
	vfd.Driver
	mu    sync.Mutex
	calls [][]vfd.Extent
}

func (d *recordingDriver) ReadV(e []vfd.Extent) error {
	d.mu.Lock()
	d.calls = append(d.calls, append([]vfd.Extent(nil), e...))
	d.mu.Unlock()
	return d.Driver.ReadV(e)
}

func (d *recordingDriver) take() [][]vfd.Extent {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.calls
	d.calls = nil
	return c
}

// splitFile is a cache with split reads at min bytes and a file of size
// bytes of random content behind drv (which wraps the Mem holding it).
func splitFile(t *testing.T, min int64, size int, wrap func(vfd.Driver) vfd.Driver) (*Cache, *File, []byte) {
	t.Helper()
	mem := vfd.NewMem()
	img := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, uint64(size)))
	for i := range img {
		img[i] = byte(rng.Uint32())
	}
	if _, err := mem.WriteAt(img, 0); err != nil {
		t.Fatal(err)
	}
	c := newTestCache(t, Config{SplitReadBytes: min})
	var drv vfd.Driver = mem
	if wrap != nil {
		drv = wrap(mem)
	}
	f, err := c.RegisterFile(drv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Unregister(bg) })
	return c, f, img
}

// extentsOf cuts [0, total of sizes) of the file into extents of the given
// sizes, with gap bytes skipped between them, each into its own buffer.
func extentsOf(sizes []int, gap int) []vfd.Extent {
	var exts []vfd.Extent
	off := int64(0)
	for _, n := range sizes {
		exts = append(exts, vfd.Extent{Off: off, Buf: make([]byte, n)})
		off += int64(n + gap)
	}
	return exts
}

func checkExtents(t *testing.T, exts []vfd.Extent, img []byte) {
	t.Helper()
	for i, x := range exts {
		if !bytes.Equal(x.Buf, img[x.Off:x.End()]) {
			t.Fatalf("extent %d (off %d, %d bytes): wrong bytes", i, x.Off, len(x.Buf))
		}
	}
}

func noTags(exts []vfd.Extent) []int32 {
	t := make([]int32, len(exts))
	for i := range t {
		t[i] = -1
	}
	return t
}

// polySummer is a DirectSummer for tests: an order-sensitive polynomial
// hash (h(a||b) = h(a)·B^len(b) + h(b) mod 2^32), so pieces combined out of
// order or missed give a wrong sum.
type polySummer struct{ layout.DirectReader }

const polyB = 0x01000193

func polySum(b []byte) uint32 {
	var h uint32
	for _, c := range b {
		h = h*polyB + uint32(c)
	}
	return h
}

func (polySummer) SumDirect(b []byte) uint32 { return polySum(b) }

func (polySummer) CombineDirect(sa, sb uint32, nb int64) uint32 {
	p, base := uint32(1), uint32(polyB)
	for ; nb > 0; nb >>= 1 {
		if nb&1 != 0 {
			p *= base
		}
		base *= base
	}
	return sa*p + sb
}

func (polySummer) VerifyDirectSum(layout.Coord, layout.Location, uint32, []byte, []byte) error {
	return nil
}

// The cut helpers tile the extents exactly: every byte in one share, in
// order, shares starting on an extent boundary or a page of the file.
func TestSplitCutsTile(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for iter := 0; iter < 500; iter++ {
		sizes := make([]int, 1+rng.IntN(6))
		var total int64
		for i := range sizes {
			sizes[i] = 1 + rng.IntN(40000)
			if rng.IntN(3) == 0 {
				sizes[i] = 8 // a trailer
			}
			total += int64(sizes[i])
		}
		exts := extentsOf(sizes, rng.IntN(3)*4097)
		orig := append([]vfd.Extent(nil), exts...)
		k := int64(1 + rng.IntN(4))
		var got []vfd.Extent
		cuts := []int64{0}
		for i := int64(1); i < k; i++ {
			cuts = append(cuts, splitPoint(exts, total*i/k))
		}
		cuts = append(cuts, total)
		for i := 1; i < len(cuts); i++ {
			if cuts[i] < cuts[i-1] {
				t.Fatalf("cuts %v not in order", cuts)
			}
			got, _ = appendShare(got, nil, exts, noTags(exts), nil, cuts[i-1], cuts[i])
		}
		// Each cut is on an extent boundary or a page of the file, at
		// most a page below the even split.
		for i := int64(1); i < k; i++ {
			p, c := total*i/k, cuts[i]
			j, in := prefixAt(exts, c)
			if c > p || p-c >= splitAlign || (in > 0 && (exts[j].Off+int64(in))%splitAlign != 0) {
				t.Fatalf("sizes %v: cut %d for %d (extent %d, +%d)", sizes, c, p, j, in)
			}
		}
		// The concatenation of the shares is the extents' bytes.
		var flat, want []byte
		for i := range orig {
			for j := range orig[i].Buf {
				orig[i].Buf[j] = byte(i*31 + j)
			}
			want = append(want, orig[i].Buf...)
		}
		for _, x := range got {
			flat = append(flat, x.Buf...)
		}
		if !bytes.Equal(flat, want) {
			t.Fatalf("sizes %v k %d: shares do not tile the extents", sizes, k)
		}
		i, cut := prefixAt(exts, cuts[1])
		n := int64(cut)
		for _, x := range exts[:i] {
			n += int64(len(x.Buf))
		}
		if n != cuts[1] || (i < len(exts) && cut >= len(exts[i].Buf)) {
			t.Fatalf("prefixAt(%d) = %d, %d: %d bytes", cuts[1], i, cut, n)
		}
	}
}

// A large read is split between the caller and a helper and returns the
// file's bytes: one extent, several chunks with trailers, a chunk cut
// inside, odd sizes.
func TestReadSplitBytes(t *testing.T) {
	withProcs(t, 4)
	var rec *recordingDriver
	c, f, img := splitFile(t, 64<<10, 4<<20, func(d vfd.Driver) vfd.Driver {
		rec = &recordingDriver{Driver: d}
		return rec
	})
	for _, tc := range []struct {
		name  string
		sizes []int
		gap   int
	}{
		{"one chunk", []int{1 << 20}, 0},
		{"chunk+trailer x3", []int{300001, 8, 300001, 8, 300001, 8}, 0},
		{"odd, gaps", []int{77777, 8, 123457, 8, 99991}, 4099},
		{"exactly min", []int{64 << 10}, 0},
	} {
		exts := extentsOf(tc.sizes, tc.gap)
		// Every extent of more than 8 bytes is a chunk whose sum is
		// computed by pieces.
		tags := noTags(exts)
		ds := make([]directRead, len(exts))
		for i, x := range exts {
			if len(x.Buf) > 8 {
				tags[i] = int32(i)
				ds[i].summer = polySummer{}
			}
		}
		before := c.Stats()
		if err := c.background.split.read(f, exts, tags, ds); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		checkExtents(t, exts, img)
		for i, x := range exts {
			if tags[i] >= 0 && (!ds[i].summed || ds[i].sum != polySum(x.Buf)) {
				t.Fatalf("%s: chunk %d: summed %v, sum %08x, want %08x", tc.name, i, ds[i].summed, ds[i].sum, polySum(x.Buf))
			}
		}
		calls := rec.take()
		st := c.Stats().Sub(before)
		if st.SplitReads != 1 || st.SplitShares < 1 || len(calls) != int(st.SplitShares)+1 {
			t.Fatalf("%s: %d split reads, %d helper shares, %d ReadV calls; want 1, >=1, shares+1", tc.name, st.SplitReads, st.SplitShares, len(calls))
		}
		var read int64
		for _, call := range calls {
			for _, x := range call {
				read += int64(len(x.Buf))
			}
		}
		var total int64
		for _, n := range tc.sizes {
			total += int64(n)
		}
		if read != total || st.VectorReadBytes != total {
			t.Fatalf("%s: ReadV calls read %d bytes (stat %d), want %d", tc.name, read, st.VectorReadBytes, total)
		}
	}
}

// The gate: no split for a read under SplitReadBytes, when as many
// requests run as there are Ps, with splitting off, or with one P.
func TestReadSplitGate(t *testing.T) {
	withProcs(t, 2)
	var rec *recordingDriver
	c, f, img := splitFile(t, 256<<10, 2<<20, func(d vfd.Driver) vfd.Driver {
		rec = &recordingDriver{Driver: d}
		return rec
	})
	one := func(what string, n int, wantCalls int) {
		t.Helper()
		exts := extentsOf([]int{n}, 0)
		must(t, c.background.split.read(f, exts, noTags(exts), nil))
		checkExtents(t, exts, img)
		if calls := rec.take(); len(calls) != wantCalls {
			t.Fatalf("%s: %d ReadV calls, want %d", what, len(calls), wantCalls)
		}
	}
	one("idle, 1 MiB", 1<<20, 2)
	one("idle, under min", 256<<10-1, 1)
	c.stats.hot.Add(hotActive, 1) // one request running: the other P is idle
	one("one request running", 1<<20, 2)
	c.stats.hot.Add(hotActive, 1) // two running on two Ps: busy
	one("two requests running", 1<<20, 1)
	c.stats.hot.Add(hotActive, -2)
	if c.Stats().SplitReads != 2 {
		t.Fatalf("SplitReads %d, want 2", c.Stats().SplitReads)
	}

	off, _, _ := splitFile(t, -1, 1<<20, nil)
	if len(off.background.split.helpers) != 0 || off.background.split.want(1<<20) != 0 {
		t.Fatalf("SplitReadBytes -1: %d helpers", len(off.background.split.helpers))
	}
	runtime.GOMAXPROCS(1)
	single, _, _ := splitFile(t, 0, 1<<20, nil)
	if len(single.background.split.helpers) != 0 || single.background.split.want(1<<20) != 0 {
		t.Fatalf("GOMAXPROCS 1: %d helpers", len(single.background.split.helpers))
	}
}

// An I/O error in a helper's share fails the read with that error.
func TestReadSplitHelperFault(t *testing.T) {
	withProcs(t, 2)
	const n = 1 << 20
	c, f, _ := splitFile(t, 64<<10, n, func(d vfd.Driver) vfd.Driver {
		// Only the second half (the helper's share) fails.
		return vfd.NewFault(d, vfd.Fail(vfd.TriggerFunc(func(i vfd.OpInfo) bool {
			return i.Op == vfd.OpReadV && i.Off >= n/2
		})))
	})
	err := c.background.split.read(f, extentsOf([]int{n}, 0), make([]int32, 1), []directRead{{summer: polySummer{}}})
	if !errors.Is(err, vfd.ErrInjected) {
		t.Fatalf("fault in the helper's share: %v, want vfd.ErrInjected", err)
	}
	if c.Stats().SplitReads != 1 {
		t.Fatal("the read was not split")
	}
	// The helper is back in the idle queue and works.
	if len(c.background.split.idle) != len(c.background.split.helpers) {
		t.Fatalf("%d of %d helpers idle after a failed read", len(c.background.split.idle), len(c.background.split.helpers))
	}
}

// A read handed to helpers whose goroutines stopped (Close) is read by the
// caller: no deadlock, right bytes; and no helper outlives Close.
func TestReadSplitAfterCloseNoLeak(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	withProcs(t, 4)
	c, f, img := splitFile(t, 64<<10, 2<<20, nil)
	if len(c.background.split.helpers) != 0 {
		t.Fatalf("%d helpers before any split read, want 0", len(c.background.split.helpers))
	}
	exts := extentsOf([]int{1 << 20, 8, 1<<20 - 8}, 0)
	must(t, c.background.split.read(f, exts, noTags(exts), nil))
	checkExtents(t, exts, img)
	if len(c.background.split.helpers) != 3 {
		t.Fatalf("%d helpers at GOMAXPROCS 4, want 3", len(c.background.split.helpers))
	}
	must(t, f.Unregister(bg))
	must(t, c.Close())
	exts = extentsOf([]int{2 << 20}, 0)
	must(t, c.background.split.read(f, exts, noTags(exts), nil))
	checkExtents(t, exts, img)
}

// A cache closed before any read split starts no helper, and a read
// then reads alone.
func TestReadSplitClosedStartsNone(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	withProcs(t, 4)
	c, f, img := splitFile(t, 64<<10, 1<<20, nil)
	must(t, f.Unregister(bg))
	must(t, c.Close())
	exts := extentsOf([]int{1 << 20}, 0)
	must(t, c.background.split.read(f, exts, noTags(exts), nil))
	checkExtents(t, exts, img)
	if len(c.background.split.helpers) != 0 || c.Stats().SplitReads != 0 {
		t.Fatalf("closed cache: %d helpers, %d split reads", len(c.background.split.helpers), c.Stats().SplitReads)
	}
}

// Many goroutines splitting reads at once share the helpers without
// losing a share; a read finding no idle helper reads alone.
func TestReadSplitConcurrent(t *testing.T) {
	withProcs(t, 4)
	c, f, img := splitFile(t, 64<<10, 4<<20, nil)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for i := 0; i < 20; i++ {
				off := rng.IntN(2 << 20)
				n := 1 + rng.IntN(2<<20)
				exts := []vfd.Extent{{Off: int64(off), Buf: make([]byte, n)}}
				if err := c.background.split.read(f, exts, noTags(exts), nil); err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(exts[0].Buf, img[off:off+n]) {
					t.Errorf("goroutine %d read %d: wrong bytes", g, i)
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(c.background.split.idle) != len(c.background.split.helpers) {
		t.Fatalf("%d of %d helpers idle", len(c.background.split.idle), len(c.background.split.helpers))
	}
}

// The hand-off allocates nothing in steady state.
func TestReadSplitAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	withProcs(t, 2)
	c, f, _ := splitFile(t, 64<<10, 1<<20, nil)
	exts := extentsOf([]int{1<<20 - 8, 8}, 0)
	tags := []int32{0, -1}
	ds := []directRead{{summer: polySummer{}}}
	allocs := testing.AllocsPerRun(50, func() {
		ds[0].summed = false
		if err := c.background.split.read(f, exts, tags, ds); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 || c.Stats().SplitReads == 0 {
		t.Fatalf("%v allocations per split read (%d split reads), want 0", allocs, c.Stats().SplitReads)
	}
}
