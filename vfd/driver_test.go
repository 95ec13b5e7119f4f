package vfd

// Contract tests run against every Driver in the package: the same reads,
// writes, vectors, errors and concurrency, checked against a byte-slice
// reference model.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

type driverCase struct {
	name string
	open func(t testing.TB) Driver
}

func driverCases() []driverCase {
	return []driverCase{
		{"file", func(t testing.TB) Driver {
			f, err := Open(filepath.Join(t.TempDir(), "f"), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}},
		{"mem", func(testing.TB) Driver { return NewMem() }},
		{"crash", func(testing.TB) Driver { return NewCrash() }},
		// An injector that never hits: Fault must pass everything through.
		{"fault", func(testing.TB) Driver { return NewFault(NewMem(), Fail(Nth(OpAny, -1))) }},
		{"counting", func(testing.TB) Driver { return NewCounting(NewCrash()) }},
	}
}

func forEachDriver(t *testing.T, fn func(t *testing.T, d Driver)) {
	for _, c := range driverCases() {
		t.Run(c.name, func(t *testing.T) { fn(t, c.open(t)) })
	}
}

func mustWrite(t testing.TB, d Driver, p []byte, off int64) {
	t.Helper()
	if n, err := d.WriteAt(p, off); err != nil || n != len(p) {
		t.Fatalf("WriteAt(%d bytes, %d) = %d, %v", len(p), off, n, err)
	}
}

func contents(t testing.TB, d Driver) []byte {
	t.Helper()
	size, err := d.Size()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	if _, err := d.ReadAt(b, 0); err != nil && size > 0 {
		t.Fatal(err)
	}
	return b
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
	return b
}

// refWrite applies a write to the reference model.
func refWrite(ref []byte, p []byte, off int64) []byte {
	if len(p) == 0 {
		return ref // a zero-length write extends nothing (pwrite semantics)
	}
	if end := off + int64(len(p)); end > int64(len(ref)) {
		ref = append(ref, make([]byte, end-int64(len(ref)))...)
	}
	copy(ref[off:], p)
	return ref
}

func TestDriverReadWriteSize(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d Driver) {
		if n, err := d.Size(); err != nil || n != 0 {
			t.Fatalf("Size of new driver = %d, %v", n, err)
		}
		mustWrite(t, d, pattern(1000, 1), 0)
		mustWrite(t, d, pattern(10, 2), 5000) // leaves a hole that reads as zero
		if n, _ := d.Size(); n != 5010 {
			t.Fatalf("Size = %d, want 5010", n)
		}
		want := refWrite(refWrite(nil, pattern(1000, 1), 0), pattern(10, 2), 5000)
		if got := contents(t, d); !bytes.Equal(got, want) {
			t.Fatal("contents differ from reference")
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestDriverShortFile(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d Driver) {
		mustWrite(t, d, pattern(100, 3), 0)
		p := make([]byte, 10)
		if n, err := d.ReadAt(p, 95); n != 5 || err != io.ErrUnexpectedEOF {
			t.Errorf("ReadAt across end = %d, %v; want 5, io.ErrUnexpectedEOF", n, err)
		}
		if !bytes.Equal(p[:5], pattern(100, 3)[95:]) {
			t.Error("ReadAt across end returned wrong bytes")
		}
		for _, off := range []int64{100, 1000} {
			if n, err := d.ReadAt(p, off); n != 0 || err != io.EOF {
				t.Errorf("ReadAt(%d) = %d, %v; want 0, io.EOF", off, n, err)
			}
		}
		if n, err := d.ReadAt(p, 90); n != 10 || err != nil {
			t.Errorf("ReadAt ending at EOF = %d, %v; want 10, nil", n, err)
		}
		if n, err := d.ReadAt(nil, 1000); n != 0 || err != nil {
			t.Errorf("empty ReadAt past end = %d, %v; want 0, nil", n, err)
		}
		exact := []Extent{{Off: 50, Buf: make([]byte, 50)}, {Off: 0, Buf: make([]byte, 50)}}
		if err := d.ReadV(exact); err != nil {
			t.Errorf("ReadV up to EOF: %v", err)
		}
		for _, exts := range [][]Extent{
			{{Off: 0, Buf: make([]byte, 10)}, {Off: 95, Buf: make([]byte, 10)}},
			{{Off: 200, Buf: make([]byte, 1)}},
			{{Off: 0, Buf: make([]byte, 50)}, {Off: 50, Buf: make([]byte, 51)}}, // adjacent run crossing EOF
		} {
			if err := d.ReadV(exts); !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("ReadV past end = %v; want io.ErrUnexpectedEOF", err)
			}
		}
	})
}

func TestDriverInvalid(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d Driver) {
		mustWrite(t, d, pattern(100, 4), 0)
		if _, err := d.ReadAt(make([]byte, 1), -1); !errors.Is(err, ErrInvalid) {
			t.Errorf("ReadAt(-1): %v", err)
		}
		if _, err := d.WriteAt(make([]byte, 1), -1); !errors.Is(err, ErrInvalid) {
			t.Errorf("WriteAt(-1): %v", err)
		}
		if err := d.Truncate(-1); !errors.Is(err, ErrInvalid) {
			t.Errorf("Truncate(-1): %v", err)
		}
		if err := d.ReadV([]Extent{{Off: -5, Buf: make([]byte, 1)}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("ReadV(-5): %v", err)
		}
		overlap := []Extent{{Off: 0, Buf: bytes.Repeat([]byte{9}, 10)}, {Off: 20, Buf: []byte{9}}, {Off: 5, Buf: bytes.Repeat([]byte{9}, 10)}}
		if err := d.WriteV(overlap); !errors.Is(err, ErrInvalid) {
			t.Errorf("overlapping WriteV: %v", err)
		}
		if got := contents(t, d); !bytes.Equal(got, pattern(100, 4)) {
			t.Error("a refused WriteV changed the file")
		}
		// Overlapping reads are legal: both buffers get the bytes.
		a, b := make([]byte, 10), make([]byte, 10)
		if err := d.ReadV([]Extent{{Off: 0, Buf: a}, {Off: 5, Buf: b}}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, pattern(100, 4)[:10]) || !bytes.Equal(b, pattern(100, 4)[5:15]) {
			t.Error("overlapping ReadV returned wrong bytes")
		}
	})
}

func TestDriverTruncate(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d Driver) {
		mustWrite(t, d, pattern(4096, 5), 0)
		if err := d.Truncate(1000); err != nil {
			t.Fatal(err)
		}
		if n, _ := d.Size(); n != 1000 {
			t.Fatalf("Size after shrink = %d", n)
		}
		if err := d.Truncate(3000); err != nil {
			t.Fatal(err)
		}
		want := append(pattern(4096, 5)[:1000:1000], make([]byte, 2000)...)
		if got := contents(t, d); !bytes.Equal(got, want) {
			t.Fatal("bytes cut by a shrink came back after regrowing")
		}
		// A write past the end after a shrink must also see zeros in the gap.
		if err := d.Truncate(10); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, d, []byte{1}, 2000)
		got := contents(t, d)
		if len(got) != 2001 || !bytes.Equal(got[10:2000], make([]byte, 1990)) {
			t.Fatal("gap after shrink and write is not zero")
		}
	})
}

func TestDriverClosed(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d Driver) {
		mustWrite(t, d, pattern(10, 6), 0)
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		p := make([]byte, 1)
		errs := map[string]error{}
		_, errs["ReadAt"] = d.ReadAt(p, 0)
		_, errs["WriteAt"] = d.WriteAt(p, 0)
		errs["ReadV"] = d.ReadV([]Extent{{Buf: p}})
		errs["WriteV"] = d.WriteV([]Extent{{Buf: p}})
		errs["Sync"] = d.Sync()
		_, errs["Size"] = d.Size()
		errs["Truncate"] = d.Truncate(0)
		for name, err := range errs {
			if !errors.Is(err, ErrClosed) {
				t.Errorf("%s after Close = %v, want ErrClosed", name, err)
			}
		}
	})
}

// randomExtents carves [0, size) into pieces of random length, keeps a random
// subset (so runs have gaps), sometimes splits pieces into many tiny adjacent
// ones, sometimes adds empty extents, and shuffles them. The result is
// disjoint.
func randomExtents(rng *rand.Rand, size int64) []Extent {
	var exts []Extent
	for off := int64(0); off < size; {
		n := min(int64(1+rng.IntN(1500)), size-off)
		if rng.IntN(4) != 0 {
			if rng.IntN(8) == 0 { // many tiny adjacent extents
				for o := off; o < off+n; {
					k := min(int64(1+rng.IntN(4)), off+n-o)
					exts = append(exts, Extent{Off: o, Buf: make([]byte, k)})
					o += k
				}
			} else {
				exts = append(exts, Extent{Off: off, Buf: make([]byte, n)})
			}
		}
		if rng.IntN(10) == 0 {
			exts = append(exts, Extent{Off: off, Buf: []byte{}})
		}
		off += n
	}
	if rng.IntN(3) != 0 {
		rng.Shuffle(len(exts), func(i, j int) { exts[i], exts[j] = exts[j], exts[i] })
	}
	return exts
}

func fillRandom(rng *rand.Rand, exts []Extent) {
	for _, e := range exts {
		var v uint64
		for i := range e.Buf {
			if i%8 == 0 {
				v = rng.Uint64()
			}
			e.Buf[i] = byte(v >> (8 * (i % 8)))
		}
	}
}

// checkVectors drives random WriteV/ReadV on d against a reference.
func checkVectors(t *testing.T, d Driver, rng *rand.Rand, rounds int, size int64) {
	t.Helper()
	var ref []byte
	for round := range rounds {
		exts := randomExtents(rng, size)
		fillRandom(rng, exts)
		before := slices.Clone(exts)
		if err := d.WriteV(exts); err != nil {
			t.Fatalf("round %d: WriteV: %v", round, err)
		}
		if !slices.EqualFunc(exts, before, func(a, b Extent) bool { return a.Off == b.Off && len(a.Buf) == len(b.Buf) }) {
			t.Fatal("WriteV reordered or changed the caller's extents")
		}
		for _, e := range exts {
			ref = refWrite(ref, e.Buf, e.Off)
		}
		if got := contents(t, d); !bytes.Equal(got, ref) {
			t.Fatalf("round %d: file differs from reference after WriteV of %d extents", round, len(exts))
		}
		// Read back through a different random set of extents, within the
		// file, plus one overlapping duplicate.
		reads := randomExtents(rng, int64(len(ref)))
		if len(reads) > 0 {
			r := reads[rng.IntN(len(reads))]
			reads = append(reads, Extent{Off: r.Off, Buf: make([]byte, len(r.Buf))})
		}
		if err := d.ReadV(reads); err != nil {
			t.Fatalf("round %d: ReadV: %v", round, err)
		}
		for _, e := range reads {
			if !bytes.Equal(e.Buf, ref[e.Off:e.End()]) {
				t.Fatalf("round %d: ReadV extent [%d,%d) got wrong bytes", round, e.Off, e.End())
			}
		}
	}
}

func TestDriverVectorsAgainstReference(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d Driver) {
		checkVectors(t, d, rand.New(rand.NewPCG(1, 2)), 20, 64<<10)
	})
}

// TestDriverVectorsBeyondIOVMax uses runs of several thousand adjacent
// extents, which File must split into several preadv/pwritev calls.
func TestDriverVectorsBeyondIOVMax(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d Driver) {
		rng := rand.New(rand.NewPCG(3, 4))
		var exts []Extent
		var off int64
		for range 3*iovMax + 17 {
			n := int64(1 + rng.IntN(20))
			exts = append(exts, Extent{Off: off, Buf: make([]byte, n)})
			off += n
		}
		fillRandom(rng, exts)
		rng.Shuffle(len(exts), func(i, j int) { exts[i], exts[j] = exts[j], exts[i] })
		if err := d.WriteV(exts); err != nil {
			t.Fatal(err)
		}
		var ref []byte
		for _, e := range exts {
			ref = refWrite(ref, e.Buf, e.Off)
		}
		if got := contents(t, d); !bytes.Equal(got, ref) {
			t.Fatal("WriteV beyond IOV_MAX wrote wrong bytes")
		}
		reads := make([]Extent, len(exts))
		for i, e := range exts {
			reads[i] = Extent{Off: e.Off, Buf: make([]byte, len(e.Buf))}
		}
		if err := d.ReadV(reads); err != nil {
			t.Fatal(err)
		}
		for i, e := range reads {
			if !bytes.Equal(e.Buf, exts[i].Buf) {
				t.Fatalf("ReadV beyond IOV_MAX: extent %d wrong", i)
			}
		}
	})
}

// TestDriverConcurrentDisjoint has many goroutines each own a region and mix
// all four data calls on it, checking every read against the goroutine's own
// model; the final file must be the concatenation of the models.
func TestDriverConcurrentDisjoint(t *testing.T) {
	const (
		workers = 16
		region  = 8 << 10
		ops     = 150
	)
	forEachDriver(t, func(t *testing.T, d Driver) {
		models := make([][]byte, workers)
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), 99))
				base := int64(w) * region
				model := pattern(region, byte(w))
				if _, err := d.WriteAt(model, base); err != nil {
					errs <- err
					return
				}
				for range ops {
					off := int64(rng.IntN(region - 1))
					n := 1 + rng.IntN(min(region-int(off), 3000))
					switch rng.IntN(4) {
					case 0:
						p := make([]byte, n)
						fillRandom(rng, []Extent{{Buf: p}})
						if _, err := d.WriteAt(p, base+off); err != nil {
							errs <- err
							return
						}
						copy(model[off:], p)
					case 1:
						p := make([]byte, n)
						if _, err := d.ReadAt(p, base+off); err != nil {
							errs <- err
							return
						}
						if !bytes.Equal(p, model[off:off+int64(n)]) {
							errs <- fmt.Errorf("worker %d: ReadAt at %d saw wrong bytes", w, off)
							return
						}
					case 2:
						exts := randomExtents(rng, region)
						fillRandom(rng, exts)
						shifted := make([]Extent, len(exts))
						for i, e := range exts {
							shifted[i] = Extent{Off: base + e.Off, Buf: e.Buf}
						}
						if err := d.WriteV(shifted); err != nil {
							errs <- err
							return
						}
						for _, e := range exts {
							copy(model[e.Off:], e.Buf)
						}
					case 3:
						exts := randomExtents(rng, region)
						shifted := make([]Extent, len(exts))
						for i, e := range exts {
							shifted[i] = Extent{Off: base + e.Off, Buf: e.Buf}
						}
						if err := d.ReadV(shifted); err != nil {
							errs <- err
							return
						}
						for _, e := range exts {
							if !bytes.Equal(e.Buf, model[e.Off:e.End()]) {
								errs <- fmt.Errorf("worker %d: ReadV at %d saw wrong bytes", w, e.Off)
								return
							}
						}
					}
				}
				models[w] = model
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if got := contents(t, d); !bytes.Equal(got, bytes.Join(models, nil)) {
			t.Fatal("final file differs from the workers' models")
		}
	})
}

// FuzzVectors decodes a vector of write extents from fuzz bytes and checks
// File and Mem against the reference: sorting, coalescing and splitting must
// never change what lands where.
func FuzzVectors(f *testing.F) {
	f.Add([]byte{0, 10, 10, 5, 20, 5}, uint64(1))
	f.Add([]byte{50, 3, 0, 3, 3, 3, 6, 200, 255, 1}, uint64(2))
	f.Add(bytes.Repeat([]byte{1, 1}, 1100), uint64(3)) // > IOV_MAX adjacent
	dir := f.TempDir()
	var seq int
	f.Fuzz(func(t *testing.T, spec []byte, seed uint64) {
		// Each pair (gap, len) places an extent gap bytes after the previous.
		var exts []Extent
		var off int64
		for i := 0; i+1 < len(spec); i += 2 {
			off += int64(spec[i])
			exts = append(exts, Extent{Off: off, Buf: make([]byte, spec[i+1])})
			off += int64(spec[i+1])
		}
		rng := rand.New(rand.NewPCG(seed, 0))
		fillRandom(rng, exts)
		rng.Shuffle(len(exts), func(i, j int) { exts[i], exts[j] = exts[j], exts[i] })
		var ref []byte
		for _, e := range exts {
			ref = refWrite(ref, e.Buf, e.Off)
		}
		seq++
		file, err := Open(filepath.Join(dir, fmt.Sprint(seq)), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		for _, d := range []Driver{file, NewMem()} {
			if err := d.WriteV(exts); err != nil {
				t.Fatal(err)
			}
			if got := contents(t, d); !bytes.Equal(got, ref) {
				t.Fatalf("%T: contents differ from reference", d)
			}
			reads := make([]Extent, len(exts))
			for i, e := range exts {
				reads[i] = Extent{Off: e.Off, Buf: make([]byte, len(e.Buf))}
			}
			if err := d.ReadV(reads); err != nil {
				t.Fatal(err)
			}
			for i := range reads {
				if !bytes.Equal(reads[i].Buf, exts[i].Buf) {
					t.Fatalf("%T: ReadV extent %d wrong", d, i)
				}
			}
		}
	})
}
