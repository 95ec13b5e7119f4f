package engine

import (
	"errors"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/scc-dev/scc/engine/internal/format"
)

// bruteSet lists the indices below limit that a selects.
func bruteSet(a dim1, limit uint64) map[uint64]bool {
	out := map[uint64]bool{}
	for i := uint64(0); a.count == Unlimited || i < a.count; i++ {
		s := a.start + i*a.stride
		if s >= limit {
			break
		}
		for x := s; x < s+a.block && x < limit; x++ {
			out[x] = true
		}
	}
	return out
}

func randDim(rng *rand.Rand, unlimited bool) dim1 {
	stride := 1 + rng.Uint64N(12)
	d := dim1{start: rng.Uint64N(40), stride: stride, block: 1 + rng.Uint64N(stride), count: 1 + rng.Uint64N(6)}
	if unlimited {
		d.count = Unlimited
	}
	if rng.IntN(8) == 0 {
		d.block = d.stride // contiguous
	}
	return d
}

// TestVirtualOverlapBruteForce checks overlap1 (exact for unlimited counts)
// against the indices both selections hold, enumerated far past the point
// where periodic selections repeat (starts < 40, strides <= 12).
func TestVirtualOverlapBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const limit = 2000
	for i := 0; i < 8000; i++ {
		a, b := randDim(rng, rng.IntN(3) == 0), randDim(rng, rng.IntN(3) == 0)
		sa, sb := bruteSet(a, limit), bruteSet(b, limit)
		want := false
		for x := range sa {
			if sb[x] {
				want = true
				break
			}
		}
		if got := overlap1(a, b); got != want {
			t.Fatalf("overlap1(%+v, %+v) = %v, want %v", a, b, got, want)
		}
	}
}

// TestVirtualModInterval checks the Euclid-style solver against a search,
// and its answers' property on large moduli.
func TestVirtualModInterval(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		m := 1 + rng.Uint64N(300)
		a, l := rng.Uint64N(m), rng.Uint64N(m)
		r := l + rng.Uint64N(m-l)
		want, wok := uint64(0), false
		for x := uint64(0); x < 2*m+2; x++ {
			if v := a * x % m; v >= l && v <= r {
				want, wok = x, true
				break
			}
		}
		got, ok := modInterval(a, m, l, r)
		if ok != wok || (ok && got != want) {
			t.Fatalf("modInterval(%d, %d, %d, %d) = %d %v, want %d %v", a, m, l, r, got, ok, want, wok)
		}
	}
	for i := 0; i < 2000; i++ {
		m := 1 + rng.Uint64N(1<<62)
		a, l := rng.Uint64N(m), rng.Uint64N(m)
		r := l + rng.Uint64N(min(m-l, 1<<20))
		x, ok := modInterval(a, m, l, r)
		if !ok {
			continue
		}
		hi, lo := mul128(a, x)
		if v := mod128(hi, lo, m); v < l || v > r {
			t.Fatalf("modInterval(%d, %d, %d, %d) = %d gives %d", a, m, l, r, x, v)
		}
	}
}

// TestVirtualClipExtent checks slicesBelow and clipExtent against an
// enumeration of the selected indices.
func TestVirtualClipExtent(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 5000; i++ {
		a := randDim(rng, rng.IntN(2) == 0)
		e := rng.Uint64N(150)
		idx := []uint64{}
		set := bruteSet(a, 1000)
		for x := uint64(0); x < 1000; x++ {
			if set[x] {
				idx = append(idx, x)
			}
		}
		n := uint64(0)
		for _, x := range idx {
			if x < e {
				n++
			}
		}
		if got := slicesBelow(a, e); got != n {
			t.Fatalf("slicesBelow(%+v, %d) = %d, want %d", a, e, got, n)
		}
		if n > uint64(len(idx)) {
			continue
		}
		// Last available: one past the n-th index; first missing: the
		// (n+1)-th index.
		var last, first uint64
		if n > 0 {
			last = idx[n-1] + 1
		}
		if n < uint64(len(idx)) {
			first = idx[n]
		} else {
			continue
		}
		if got := clipExtent(a, n, false); got != last {
			t.Fatalf("clipExtent(%+v, %d, last) = %d, want %d", a, n, got, last)
		}
		if got := clipExtent(a, n, true); got != first {
			t.Fatalf("clipExtent(%+v, %d, first) = %d, want %d", a, n, got, first)
		}
	}
}

func mul128(a, b uint64) (hi, lo uint64) { return bits.Mul64(a, b) }

func mod128(hi, lo, m uint64) uint64 { return bits.Rem64(hi%m, lo, m) }

// FuzzVirtualMappings: a stored mapping list decodes and checks with a
// typed error or not at all, never panics, and a list it accepts has no
// two overlapping virtual selections (the sweep's answer agrees with
// comparing every pair).
func FuzzVirtualMappings(f *testing.F) {
	for _, ms := range [][]VirtualMapping{roundRobin(3, 2, 2, false), {
		{Virtual: Hyperslab([]uint64{0, 0, 0}, []uint64{2, 1, 1}, []uint64{Unlimited, 1, 1}, []uint64{1, 2, 2}), File: "p%b", Dataset: "d", Source: Box([]uint64{0, 0}, []uint64{2, 2})},
	}} {
		fm := make([]format.VirtualMapping, len(ms))
		for i, m := range ms {
			fm[i] = format.VirtualMapping{Virtual: fromSel(m.Virtual), File: m.File, Dataset: m.Dataset, Source: fromSel(m.Source)}
		}
		f.Add(format.EncodeVirtualParams(fm), false)
	}
	f.Fuzz(func(t *testing.T, b []byte, fixed bool) {
		ms, err := format.DecodeVirtualParams(b)
		if err != nil || len(ms) > 64 {
			return
		}
		maxShape := make([]uint64, len(ms[0].Virtual.Start))
		for d := range maxShape {
			maxShape[d] = Unlimited
			if fixed {
				maxShape[d] = 1 << 40
			}
		}
		maps, err := decodeVirtualMaps(b, maxShape)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		for i := range maps {
			for j := i + 1; j < len(maps); j++ {
				if overlaps(maps[i].v, maps[j].v) {
					t.Fatalf("accepted mappings %d and %d overlap", i, j)
				}
			}
		}
	})
}

// TestVirtualFindOverlap checks the sweep against comparing every pair, on
// random lists of boxes and strided selections.
func TestVirtualFindOverlap(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for i := 0; i < 300; i++ {
		n := 2 + rng.IntN(40)
		ms := make([]*vmap, n)
		for k := range ms {
			ms[k] = &vmap{v: []dim1{randDim(rng, rng.IntN(4) == 0), randDim(rng, false)}}
			ms[k].v[0].start *= 20
			ms[k].v[1].start *= 5
		}
		want := false
		for a := range ms {
			for b := a + 1; b < n; b++ {
				want = want || overlaps(ms[a].v, ms[b].v)
			}
		}
		a, b, got := findOverlap(ms)
		if got != want || (got && !overlaps(ms[a].v, ms[b].v)) {
			t.Fatalf("findOverlap = %d %d %v, want %v", a, b, got, want)
		}
	}
}
