package bufpool

import (
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadFaults reports the calling thread's minor page faults so far.
func threadFaults(t testing.TB) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt
}

// faultsWriting returns the minor faults taken while every page of b is
// written once.
func faultsWriting(t *testing.T, b []byte) int64 {
	before := threadFaults(t)
	for i := 0; i < len(b); i += os.Getpagesize() {
		b[i] = 1
	}
	return threadFaults(t) - before
}

// newMapping returns n bytes of a new anonymous mapping, unmapped at the
// test's end: memory no page of which is present yet.
func newMapping(t *testing.T, n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

// TestPrefaultMapsPages: after prefault, writing new memory takes no page
// faults; without it, one per page. The memory is a new anonymous mapping
// (Go's make may clear a reused span itself, which faults the pages in
// before the test could count them). Faults the kernel takes inside
// madvise are not charged to the thread, so only the writes' are counted.
func TestPrefaultMapsPages(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory faults on every write")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const n = 8 << 20
	pages := int64(n / os.Getpagesize())
	fresh := func() []byte { return newMapping(t, n) }
	control := faultsWriting(t, fresh())
	if control < pages/2 {
		t.Fatalf("writing %d new pages took %d faults: the count does not see faults", pages, control)
	}
	b := fresh()
	prefault(b)
	if got := faultsWriting(t, b); got > pages/16 {
		t.Fatalf("writing %d prefaulted pages took %d faults (%d without prefault)", pages, got, control)
	}
}

// TestPrefaultKeepsBytes: prefault of a slice that starts and ends inside
// pages changes no byte of it, nor of the bytes around it.
func TestPrefaultKeepsBytes(t *testing.T) {
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	want := bytes.Clone(b)
	prefault(b[123 : len(b)-77])
	prefault(b[:prefaultMin-1]) // too small: nothing to do
	if !bytes.Equal(b, want) {
		t.Fatal("prefault changed the buffer's bytes")
	}
}

// TestGetFullPrefaultsNewBuffers: GetFull prefaults a buffer it had
// to make and not one it recycled; Get never prefaults.
func TestGetFullPrefaultsNewBuffers(t *testing.T) {
	const n = 3<<20 + 777
	c := bufClass(n)
	for bufPools[c].Get() != nil { // drain the class: the next buffer is new
	}
	start := prefaults.Load()
	b := GetFull(n)
	if got := prefaults.Load() - start; got != 1 {
		t.Fatalf("a new buffer from GetFull: %d prefaults, want 1", got)
	}
	Put(b)
	b = GetFull(n) // usually the one just returned
	if got := prefaults.Load() - start; got != 1 && got != 2 {
		t.Fatalf("%d prefaults", got)
	}
	Put(b)
	for bufPools[c].Get() != nil {
	}
	g := Get(n)
	if got := prefaults.Load() - start; got > 2 {
		t.Fatalf("Get prefaulted (%d calls)", got)
	}
	Put(g)
}

// BenchmarkFreshBuffers: 64 reads of 1 MiB from a file in the page cache
// (tmpfs where there is one) into new buffers, as a cold cache's loads
// read into buffers the pool does not have yet, with the buffers
// prefaulted (GetFull) and not, alternately in the same iterations;
// before each pass the heap's free pages go back to the kernel
// (debug.FreeOSMemory), so the buffers are new memory every time.
// Metrics: prefault-MiB/s, plain-MiB/s and their ratio.
func BenchmarkFreshBuffers(b *testing.B) {
	dir := "/dev/shm"
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = b.TempDir()
	}
	const chunk, count = 1 << 20, 64
	fh, err := os.CreateTemp(dir, "scc-fresh-*")
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(fh.Name())
	defer fh.Close()
	src := make([]byte, chunk*count)
	for i := range src {
		src[i] = byte(i * 31)
	}
	if _, err := fh.WriteAt(src, 0); err != nil {
		b.Fatal(err)
	}
	pass := func(pre bool) float64 {
		debug.FreeOSMemory()
		bufs := make([][]byte, count)
		t0 := time.Now()
		for i := range bufs {
			bufs[i] = make([]byte, chunk)
			if pre {
				prefault(bufs[i])
			}
			if _, err := fh.ReadAt(bufs[i], int64(i)*chunk); err != nil {
				b.Fatal(err)
			}
		}
		mibps := float64(chunk*count) / (1 << 20) / time.Since(t0).Seconds()
		runtime.KeepAlive(bufs)
		return mibps
	}
	var with, without float64
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			with += pass(true)
			without += pass(false)
		} else {
			without += pass(false)
			with += pass(true)
		}
	}
	b.ReportMetric(with/float64(b.N), "prefault-MiB/s")
	b.ReportMetric(without/float64(b.N), "plain-MiB/s")
	b.ReportMetric(with/without, "ratio")
}

// TestPopulateCold: a large cold buffer (a new mapping, or one with a few
// pages written) is populated, so writing it takes next to no faults, and
// keeps the bytes written before; a warm one, or a small one, is not
// populated at all.
func TestPopulateCold(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory faults on every write")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const n = 24 << 20
	ps := os.Getpagesize()
	pages := int64(n / ps)
	fresh := func() []byte { return newMapping(t, n) }
	control := faultsWriting(t, fresh())
	if control < pages/2 {
		t.Fatalf("writing %d new pages took %d faults: the count does not see faults", pages, control)
	}

	b := fresh()
	b[0], b[n/2+5], b[n-1] = 7, 8, 9 // three pages of many: still cold
	calls := populateCalls.Load()
	PopulateCold(b[3:]) // not page-aligned at its start
	if populateCalls.Load() != calls+1 {
		t.Fatal("a cold buffer was not populated")
	}
	if b[0] != 7 || b[n/2+5] != 8 || b[n-1] != 9 {
		t.Fatal("populating changed bytes written before")
	}
	if got := faultsWriting(t, b); got > pages/16 {
		t.Fatalf("writing %d populated pages took %d faults (%d without)", pages, got, control)
	}

	calls = populateCalls.Load()
	PopulateCold(b) // every page written above: warm
	PopulateCold(fresh()[:populateMin-1])
	if populateCalls.Load() != calls {
		t.Fatal("a warm or small buffer was populated")
	}
}
