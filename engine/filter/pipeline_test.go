package filter

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"testing"
)

var (
	shuf  = Spec{ID: Shuffle}
	defl1 = Spec{ID: Deflate, Level: 1}
	defl6 = Spec{ID: Deflate, Level: 6}
	defl9 = Spec{ID: Deflate, Level: 9}
	zlib1 = Spec{ID: Zlib, Level: 1}
	zlib6 = Spec{ID: Zlib, Level: 6}
	zlib9 = Spec{ID: Zlib, Level: 9}
	zstd1 = Spec{ID: Zstd, Level: 1}
	zstd2 = Spec{ID: Zstd, Level: 2}
	zstd3 = Spec{ID: Zstd, Level: 3}
	zstd4 = Spec{ID: Zstd, Level: 4}
	lz4s  = Spec{ID: LZ4}
	crc   = Spec{ID: CRC32C}
)

var allFilters = []Spec{shuf, defl1, zstd1, lz4s, crc}

// detectorData returns n bytes of little-endian uint16 frames that look like
// an area detector's: a smooth background, Gaussian-ish noise and a few hot
// pixels. Deterministic.
func detectorData(n int) []byte {
	r := rand.New(rand.NewPCG(7, uint64(n)))
	b := make([]byte, n)
	const w = 512
	for i := 0; i+1 < n; i += 2 {
		px := i / 2
		x, y := float64(px%w), float64(px/w)
		v := 1000 + 200*math.Sin(x/50)*math.Cos(y/70) + r.NormFloat64()*6
		if r.IntN(5000) == 0 {
			v = 60000
		}
		binary.LittleEndian.PutUint16(b[i:], uint16(v))
	}
	if n%2 == 1 {
		b[n-1] = 0x5A
	}
	return b
}

// textData returns n bytes of words from a small vocabulary: compressible by
// every compressor, with or without shuffle.
func textData(n int) []byte {
	words := []string{"chunk ", "cache ", "frame ", "detector ", "index ", "the ", "of ", "shared ", "dataset\n"}
	r := rand.New(rand.NewPCG(3, uint64(n)))
	b := make([]byte, 0, n+16)
	for len(b) < n {
		b = append(b, words[r.IntN(len(words))]...)
	}
	return b[:n]
}

func randomData(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 99))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func mustPipeline(t testing.TB, specs []Spec, es int) *Pipeline {
	t.Helper()
	p, err := NewPipeline(specs, es)
	if err != nil {
		t.Fatalf("NewPipeline(%v, %d): %v", specs, es, err)
	}
	return p
}

// roundTrip encodes and decodes src and checks the invariants every
// Encode/Decode pair must keep.
func roundTrip(t testing.TB, p *Pipeline, src []byte) (image []byte, mask uint32) {
	t.Helper()
	orig := bytes.Clone(src)
	image, mask, err := p.Encode(src)
	if err != nil {
		t.Fatalf("%v es=%d len=%d: Encode: %v", p, p.ElemSize(), len(src), err)
	}
	if !bytes.Equal(src, orig) {
		t.Fatalf("%v: Encode modified its input", p)
	}
	if mask>>len(p.specs) != 0 {
		t.Fatalf("%v: mask %#x has bits beyond the pipeline", p, mask)
	}
	for i, s := range p.specs {
		if mask&(1<<i) != 0 && !s.ID.optional() {
			t.Fatalf("%v: mask %#x skips non-optional filter %d", p, mask, i)
		}
	}
	if len(image) > 0 && len(src) > 0 && &image[0] == &src[0] {
		t.Fatalf("%v: image aliases src", p)
	}
	if cap(image) != len(image) {
		t.Fatalf("%v: image has cap %d for len %d", p, cap(image), len(image))
	}
	imgCopy := bytes.Clone(image)
	got, err := p.Decode(image, mask, len(src))
	if err != nil {
		t.Fatalf("%v es=%d len=%d mask=%#x: Decode: %v", p, p.ElemSize(), len(src), mask, err)
	}
	if !bytes.Equal(got, src) {
		t.Fatalf("%v es=%d len=%d mask=%#x: round trip differs", p, p.ElemSize(), len(src), mask)
	}
	if cap(got) != len(got) {
		t.Fatalf("%v: decoded has cap %d for len %d", p, cap(got), len(got))
	}
	if !bytes.Equal(image, imgCopy) {
		t.Fatalf("%v: Decode modified the image", p)
	}
	if len(got) > 0 && len(image) > 0 && &got[0] == &image[0] {
		t.Fatalf("%v: decoded aliases image", p)
	}
	return image, mask
}

// orders returns every sequence of 0..maxLen filters drawn from allFilters
// (with repetition for length <= 2, without for 3).
func orders(maxLen int) [][]Spec {
	out := [][]Spec{nil}
	for _, a := range allFilters {
		out = append(out, []Spec{a})
	}
	if maxLen >= 2 {
		for _, a := range allFilters {
			for _, b := range allFilters {
				out = append(out, []Spec{a, b})
			}
		}
	}
	if maxLen >= 3 {
		for i, a := range allFilters {
			for j, b := range allFilters {
				for k, c := range allFilters {
					if i != j && j != k && i != k {
						out = append(out, []Spec{a, b, c})
					}
				}
			}
		}
	}
	return out
}

func TestRoundTripEveryFilterAndLevel(t *testing.T) {
	specs := []Spec{shuf, defl1, defl6, defl9, zlib1, zlib6, zlib9, zstd1, zstd2, zstd3, zstd4, lz4s, crc}
	sizes := []int{0, 1, 2, 3, 7, 64, 1001, 4096, 65537}
	var data [][]byte
	for _, n := range sizes {
		data = append(data, detectorData(n), randomData(n, uint64(n)), textData(n))
	}
	big := [][]byte{detectorData(1 << 20), randomData(1<<20, 1)}
	for _, s := range specs {
		for _, es := range []int{1, 2, 4, 8} {
			p := mustPipeline(t, []Spec{s}, es)
			for _, d := range data {
				roundTrip(t, p, d)
			}
			// 1 MiB once per filter at its fastest level (and for every
			// element size of the one filter that depends on it); the
			// slow levels are covered up to 64 KiB.
			if (es == 2 && s.Level <= 1) || s.ID == Shuffle {
				for _, d := range big {
					roundTrip(t, p, d)
				}
			}
		}
	}
}

// TestRoundTripOrders runs every order of up to three filters over element
// sizes 1, 2, 4, 8 and small-to-medium sizes, on compressible and random
// data.
func TestRoundTripOrders(t *testing.T) {
	sizes := []int{0, 1, 5, 6, 17, 255, 4099}
	var data [][]byte
	for _, n := range sizes {
		data = append(data, detectorData(n), randomData(n, uint64(n)+1), make([]byte, n))
	}
	for _, specs := range orders(3) {
		for _, es := range []int{1, 2, 4, 8} {
			p := mustPipeline(t, specs, es)
			for _, d := range data {
				roundTrip(t, p, d)
			}
		}
	}
}

// TestRoundTripAllPermutations runs all 120 orders of the five filters.
func TestRoundTripAllPermutations(t *testing.T) {
	data := [][]byte{detectorData(30001), randomData(3001, 5)}
	var perm func(prefix []Spec, rest []Spec)
	count := 0
	perm = func(prefix, rest []Spec) {
		if len(rest) == 0 {
			count++
			p := mustPipeline(t, prefix, 2)
			for _, d := range data {
				roundTrip(t, p, d)
			}
			return
		}
		for i := range rest {
			next := append(append([]Spec{}, rest[:i]...), rest[i+1:]...)
			perm(append(append([]Spec{}, prefix...), rest[i]), next)
		}
	}
	perm(nil, allFilters)
	if count != 120 {
		t.Fatalf("ran %d permutations", count)
	}
}

func TestRoundTripLargeCombinations(t *testing.T) {
	src := detectorData(1 << 20)
	rnd := randomData(1<<20, 3)
	for _, specs := range [][]Spec{
		{shuf, zstd1},
		{shuf, zstd1, crc},
		{shuf, defl1, crc},
		{shuf, lz4s},
		{lz4s, zstd1},
		{crc, shuf, lz4s, defl1, zstd1, crc},
		{zstd1, zstd1},
	} {
		p := mustPipeline(t, specs, 2)
		roundTrip(t, p, src)
		roundTrip(t, p, rnd)
	}
}

func TestCompressibleIsCompressed(t *testing.T) {
	src := detectorData(1 << 20)
	for _, specs := range [][]Spec{{shuf, zstd1}, {defl1}, {lz4s}, {shuf, lz4s, crc}} {
		p := mustPipeline(t, specs, 2)
		image, mask := roundTrip(t, p, src)
		if mask != 0 {
			t.Errorf("%v: mask %#x on compressible data", p, mask)
		}
		if len(image) >= len(src)*3/4 && specs[0] != lz4s { // lz4 alone finds few matches in noise
			t.Errorf("%v: image %d bytes from %d", p, len(image), len(src))
		}
	}
	// Shuffle must help smooth uint16 data: it is the point of the filter.
	plain, _ := roundTrip(t, mustPipeline(t, []Spec{zstd1}, 2), src)
	shuffled, _ := roundTrip(t, mustPipeline(t, []Spec{shuf, zstd1}, 2), src)
	if len(shuffled) >= len(plain) {
		t.Errorf("shuffle+zstd %d bytes, zstd alone %d", len(shuffled), len(plain))
	}
}

// TestOptionalMask checks HDF5's optional-filter semantics: a compressor
// that cannot shrink its input is skipped and flagged, so random data is
// stored raw (plus any checksum) instead of growing.
func TestOptionalMask(t *testing.T) {
	rnd := randomData(100_000, 11)
	for _, tc := range []struct {
		specs    []Spec
		wantMask uint32
		wantLen  int
	}{
		{[]Spec{zstd1}, 1, len(rnd)},
		{[]Spec{defl9}, 1, len(rnd)},
		{[]Spec{lz4s}, 1, len(rnd)},
		{[]Spec{shuf, zstd1}, 1 << 1, len(rnd)},
		{[]Spec{shuf, zstd1, crc}, 1 << 1, len(rnd) + 4},
		{[]Spec{defl1, lz4s, zstd4, crc}, 0b0111, len(rnd) + 4},
	} {
		p := mustPipeline(t, tc.specs, 4)
		image, mask := roundTrip(t, p, rnd)
		if mask != tc.wantMask || len(image) != tc.wantLen {
			t.Errorf("%v: mask %#x len %d, want mask %#x len %d", p, mask, len(image), tc.wantMask, tc.wantLen)
		}
	}
	// The second of two compressors in a row finds nothing left to gain.
	p := mustPipeline(t, []Spec{zstd1, zstd1}, 1)
	_, mask := roundTrip(t, p, textData(200_000))
	if mask != 0b10 {
		t.Errorf("zstd+zstd mask %#x, want 0b10", mask)
	}
	// Empty chunks: every compressor is skipped, the others still run.
	p = mustPipeline(t, []Spec{shuf, lz4s, zstd1, defl1, crc}, 2)
	image, mask := roundTrip(t, p, nil)
	if mask != 0b01110 || len(image) != 4 {
		t.Errorf("empty: mask %#x len %d", mask, len(image))
	}
}

// TestSizeBound decodes valid images with the wrong decoded size.
func TestSizeBound(t *testing.T) {
	src := detectorData(50_000)
	for _, specs := range orders(2) {
		p := mustPipeline(t, specs, 2)
		image, mask := roundTrip(t, p, src)
		for _, n := range []int{0, 1, len(src) - 1, len(src) + 1, 2 * len(src)} {
			if _, err := p.Decode(image, mask, n); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%v: Decode with size %d (real %d) = %v, want ErrCorrupt", p, n, len(src), err)
			}
		}
	}
	p := mustPipeline(t, nil, 1)
	for _, n := range []int{-1, math.MinInt, MaxChunkSize + 1} {
		if _, err := p.Decode(nil, 0, n); !errors.Is(err, ErrInvalid) {
			t.Errorf("Decode size %d = %v, want ErrInvalid", n, err)
		}
	}
}

func TestBadMask(t *testing.T) {
	src := detectorData(10_000)
	p := mustPipeline(t, []Spec{shuf, zstd1, crc}, 2)
	image, mask := roundTrip(t, p, src)
	for name, m := range map[string]uint32{
		"bit beyond pipeline": mask | 1<<3,
		"top bit":             mask | 1<<31,
		"shuffle skipped":     mask | 1<<0,
		"crc skipped":         mask | 1<<2,
	} {
		if _, err := p.Decode(image, m, len(src)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode = %v, want ErrCorrupt", name, err)
		}
	}
	// Claiming the compressor was skipped when it was not: the "raw" bytes
	// have the wrong size for the chunk.
	if _, err := p.Decode(image, mask|1<<1, len(src)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("zstd wrongly skipped: Decode = %v, want ErrCorrupt", err)
	}
	// Claiming a compressor ran on a raw image.
	rnd := randomData(10_000, 1)
	image, mask = roundTrip(t, p, rnd)
	if mask != 1<<1 {
		t.Fatalf("mask %#x", mask)
	}
	if _, err := p.Decode(image, 0, len(rnd)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("zstd wrongly applied: Decode = %v, want ErrCorrupt", err)
	}
	// A full 32-filter pipeline accepts mask bits up to 31.
	specs := make([]Spec, MaxFilters)
	for i := range specs {
		specs[i] = lz4s
	}
	p = mustPipeline(t, specs, 1)
	_, mask = roundTrip(t, p, rnd)
	if mask != math.MaxUint32 {
		t.Fatalf("32 x lz4 on random data: mask %#x", mask)
	}
}

// decodeMustFailOrFit decodes hostile input: it must not panic and must
// either fail with ErrCorrupt or return exactly size bytes.
func decodeMustFailOrFit(t testing.TB, p *Pipeline, image []byte, mask uint32, size int) error {
	t.Helper()
	got, err := p.Decode(image, mask, size)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%v: Decode error %v does not wrap ErrCorrupt", p, err)
		}
		return err
	}
	if len(got) != size {
		t.Fatalf("%v: Decode returned %d bytes, want %d", p, len(got), size)
	}
	return nil
}

// TestCorruptImages truncates images and flips bits. With CRC32C as the
// outermost filter every such change must be caught; without it the decoder
// may produce other bytes, but never panic or return a wrong size.
func TestCorruptImages(t *testing.T) {
	src := detectorData(3000)
	rnd := randomData(500, 77)
	for _, specs := range append(orders(2), []Spec{shuf, zstd1, crc}, []Spec{shuf, lz4s, crc}, []Spec{defl1, crc}) {
		p := mustPipeline(t, specs, 2)
		checked := len(specs) > 0 && specs[len(specs)-1] == crc
		for _, d := range [][]byte{src, rnd} {
			image, mask := roundTrip(t, p, d)
			for cut := 0; cut < len(image); cut += 1 + len(image)/64 {
				err := decodeMustFailOrFit(t, p, image[:cut], mask, len(d))
				if checked && err == nil {
					t.Fatalf("%v: truncation to %d of %d not detected", p, cut, len(image))
				}
			}
			bad := bytes.Clone(image)
			for i := 0; i < len(bad); i += 1 + len(bad)/97 {
				for _, bit := range []byte{0x01, 0x80} {
					bad[i] ^= bit
					err := decodeMustFailOrFit(t, p, bad, mask, len(d))
					if checked && err == nil {
						t.Fatalf("%v: bit flip at %d not detected", p, i)
					}
					bad[i] ^= bit
				}
			}
			// Garbage appended and every single mask bit flipped.
			decodeMustFailOrFit(t, p, append(bytes.Clone(image), 1, 2, 3), mask, len(d))
			for i := range 32 {
				decodeMustFailOrFit(t, p, image, mask^1<<i, len(d))
			}
		}
	}
}

// TestCorruptCompressedStreams corrupts each compressor's own stream (no
// checksum filter around it) and checks the errors are typed.
func TestCorruptCompressedStreams(t *testing.T) {
	src := textData(70_000)
	for _, s := range []Spec{defl1, zlib1, zstd1, lz4s} {
		p := mustPipeline(t, []Spec{s}, 2)
		image, mask := roundTrip(t, p, src)
		if mask != 0 {
			t.Fatalf("%v did not compress the test data", p)
		}
		for k, bad := range [][]byte{
			nil,
			{0},
			image[:len(image)/2],
			image[:len(image)-1],
			append(bytes.Clone(image), 0),
			randomData(len(image), 1),
			bytes.Repeat([]byte{0xFF}, len(image)),
		} {
			if err := decodeMustFailOrFit(t, p, bad, mask, len(src)); err == nil {
				t.Errorf("%v: corrupt stream %d of %d bytes decoded", p, k, len(bad))
			}
		}
	}
}

// allocDuring returns the bytes allocated while f ran. Tests using it must
// not run in parallel with others.
func allocDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// bombLimit is what a rejected bomb may allocate: the output buffer (a
// scratch buffer may be up to 25% larger, and zstd's gets room for one
// block of overrun) plus decoder state.
func bombLimit(size int) uint64 { return uint64(size + size/4 + zstdOverrun + 256<<10) }

func checkBomb(t *testing.T, p *Pipeline, image []byte, mask uint32, size int) {
	t.Helper()
	// Warm up pooled and lazily built decoder state.
	warm, wmask, _ := p.Encode(detectorData(size))
	if _, err := p.Decode(warm, wmask, size); err != nil {
		t.Fatal(err)
	}
	var err error
	alloc := allocDuring(func() { _, err = p.Decode(image, mask, size) })
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%v: bomb Decode = %v, want ErrCorrupt", p, err)
	}
	if limit := bombLimit(size); alloc > limit {
		t.Fatalf("%v: bomb Decode allocated %d bytes, limit %d", p, alloc, limit)
	}
	t.Logf("%v: %d-byte bomb rejected after allocating %d bytes (decoded size %d): %v", p, len(image), alloc, size, err)
}

const (
	bombSize    = 16 << 20 // what the bombs expand to
	bombDecoded = 1 << 20
)

func TestBombZstd(t *testing.T) {
	p := mustPipeline(t, []Spec{zstd1}, 1)
	zeros := make([]byte, bombSize)
	image, mask, _ := p.Encode(zeros)
	zeros = nil
	if mask != 0 || len(image) > bombSize/1000 {
		t.Fatalf("bomb: %d bytes, mask %#x", len(image), mask)
	}
	t.Run("claimed size", func(t *testing.T) { checkBomb(t, p, image, mask, bombDecoded) })

	// The same frame with its content size patched down to the bound: the
	// decoder must stop near the bound instead of trusting the header.
	// Frame header: magic(4), descriptor(1) [, window(1)], FCS.
	desc := image[4]
	if desc>>6 != 2 { // 4-byte FCS
		t.Fatalf("unexpected frame descriptor %#x", desc)
	}
	off := 5
	if desc&0x20 == 0 {
		off++ // window descriptor present
	}
	lying := bytes.Clone(image)
	binary.LittleEndian.PutUint32(lying[off:], bombDecoded)
	t.Run("lying size", func(t *testing.T) { checkBomb(t, p, lying, mask, bombDecoded) })

	// Two honest frames back to back: the first claims the right size, the
	// second would decode past it.
	half, _, _ := p.Encode(make([]byte, bombDecoded))
	twice := append(bytes.Clone(half), half...)
	t.Run("two frames", func(t *testing.T) { checkBomb(t, p, twice, 0, bombDecoded) })

	// A streamed frame has no content size at all.
	enc, err := zstdEncoders[1]()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc.Reset(&buf)
	_, _ = enc.Write(make([]byte, bombSize/8))
	_ = enc.Close()
	t.Run("no content size", func(t *testing.T) { checkBomb(t, p, buf.Bytes(), 0, bombDecoded) })

	// Behind a shuffle and a checksum, the bound still reaches the decoder.
	p2 := mustPipeline(t, []Spec{shuf, zstd1, crc}, 2)
	img2, m2, _ := p2.Encode(make([]byte, bombSize))
	t.Run("inside pipeline", func(t *testing.T) { checkBomb(t, p2, img2, m2, bombDecoded) })
}

func TestBombDeflate(t *testing.T) {
	p := mustPipeline(t, []Spec{defl1}, 1)
	image, mask, _ := p.Encode(make([]byte, bombSize))
	if mask != 0 || len(image) > bombSize/200 {
		t.Fatalf("bomb: %d bytes, mask %#x", len(image), mask)
	}
	checkBomb(t, p, image, mask, bombDecoded)
	p2 := mustPipeline(t, []Spec{defl1, crc}, 2)
	img2, m2, _ := p2.Encode(make([]byte, bombSize))
	checkBomb(t, p2, img2, m2, bombDecoded)
}

func TestBombLZ4(t *testing.T) {
	p := mustPipeline(t, []Spec{lz4s}, 1)
	image, mask, _ := p.Encode(make([]byte, bombSize))
	if mask != 0 || len(image) > bombSize/200 {
		t.Fatalf("bomb: %d bytes, mask %#x", len(image), mask)
	}
	t.Run("claimed size", func(t *testing.T) { checkBomb(t, p, image, mask, bombDecoded) })
	lying := bytes.Clone(image)
	binary.LittleEndian.PutUint32(lying, bombDecoded)
	t.Run("lying size", func(t *testing.T) { checkBomb(t, p, lying, mask, bombDecoded) })
	huge := []byte{0xFF, 0xFF, 0xFF, 0x7F, 0x1F, 0}
	t.Run("huge prefix", func(t *testing.T) { checkBomb(t, p, huge, 0, bombDecoded) })
}

// TestConcurrentSharedPipeline has many goroutines share pipelines and
// checks every result against a model computed sequentially beforehand:
// the original bytes for decode, and the mask for encode.
func TestConcurrentSharedPipeline(t *testing.T) {
	pipes := []*Pipeline{
		mustPipeline(t, []Spec{shuf, zstd1, crc}, 2),
		mustPipeline(t, []Spec{defl1, lz4s}, 4),
		mustPipeline(t, []Spec{shuf, lz4s, zstd2, crc}, 8),
	}
	type item struct {
		src, image []byte
		mask       uint32
	}
	var model [][]item
	for pi, p := range pipes {
		var items []item
		for k := range 8 {
			n := 1000 + 9973*k
			var src []byte
			if k%3 == 2 {
				src = randomData(n, uint64(pi*100+k))
			} else {
				src = detectorData(n)
			}
			image, mask := roundTrip(t, p, src)
			items = append(items, item{src, image, mask})
		}
		model = append(model, items)
	}
	goroutines, iters := 16, 30
	if os.Getenv("SCC_STRESS") == "long" {
		iters = 1000
	}
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range iters {
				pi := r.IntN(len(pipes))
				it := model[pi][r.IntN(len(model[pi]))]
				p := pipes[pi]
				if r.IntN(2) == 0 {
					image, mask, err := p.Encode(it.src)
					if err != nil || mask != it.mask {
						errs <- fmt.Errorf("%v: Encode mask %#x err %v, model mask %#x", p, mask, err, it.mask)
						return
					}
					got, err := p.Decode(image, mask, len(it.src))
					if err != nil || !bytes.Equal(got, it.src) {
						errs <- fmt.Errorf("%v: round trip failed: %v", p, err)
						return
					}
					// Callers own results: scribbling must not disturb others.
					for i := range image {
						image[i] = 0xEE
					}
				} else {
					got, err := p.Decode(it.image, it.mask, len(it.src))
					if err != nil || !bytes.Equal(got, it.src) {
						errs <- fmt.Errorf("%v: Decode of model image failed: %v", p, err)
						return
					}
					for i := range got {
						got[i] = 0xDD
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestExpansionBounds checks the formats' maximum-expansion bounds against
// the most compressible input there is (so valid data is never rejected),
// and that a tiny image for a big chunk is rejected without a big buffer.
func TestExpansionBounds(t *testing.T) {
	zeros := make([]byte, 4<<20)
	for _, s := range []Spec{defl1, defl6, defl9, lz4s, zstd1} {
		p := mustPipeline(t, []Spec{s}, 1)
		image, mask := roundTrip(t, p, zeros)
		if mask != 0 {
			t.Fatalf("%v did not compress zeros", p)
		}
		t.Logf("%v: %d zero bytes in %d (%.0f:1)", p, len(zeros), len(image), float64(len(zeros))/float64(len(image)))
	}
	// A 64-byte image cannot hold a 64 MiB chunk in deflate or LZ4.
	for _, s := range []Spec{defl1, lz4s} {
		p := mustPipeline(t, []Spec{s}, 1)
		tiny := bytes.Repeat([]byte{0}, 64)
		binary.LittleEndian.PutUint32(tiny, 64<<20) // LZ4 length prefix
		var err error
		alloc := allocDuring(func() { _, err = p.Decode(tiny, 0, 64<<20) })
		if !errors.Is(err, ErrCorrupt) || alloc > 1<<20 {
			t.Errorf("%v: tiny image for 64 MiB: err %v after allocating %d bytes", p, err, alloc)
		}
	}
	// Inside a pipeline the stage bound is not exact, but it still caps
	// the buffer: deflate behind LZ4 gets at most 1032x its input.
	p := mustPipeline(t, []Spec{lz4s, defl1}, 1)
	var err error
	alloc := allocDuring(func() { _, err = p.Decode([]byte{0x03, 0x00}, 0, 64<<20) })
	if !errors.Is(err, ErrCorrupt) || alloc > 1<<20 {
		t.Errorf("%v: tiny image for 64 MiB: err %v after allocating %d bytes", p, err, alloc)
	}
}
