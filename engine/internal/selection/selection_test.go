package selection

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

var elemSizes = []int{1, 2, 4, 8}

func TestSplitGatherScatterRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// Beyond the machine word sizes, 3 and 16 bytes (compound elements)
	// take the generic copy path.
	sizes := append([]int{3, 16}, elemSizes...)
	for i := range 2000 {
		dims, chunkDims, h := randCase(rng)
		es := sizes[i%len(sizes)]
		if err := h.Validate(dims); err != nil {
			t.Fatalf("case %d: generated invalid selection %v for %v: %v", i, h, dims, err)
		}
		pieces, err := Pieces(h, chunkDims)
		if err != nil {
			t.Fatalf("case %d: Pieces: %v", i, err)
		}
		if err := checkCover(h, chunkDims, pieces); err != nil {
			t.Fatalf("case %d: dims %v chunk %v %v: %v", i, dims, chunkDims, h, err)
		}
		if err := roundTrip(rng, dims, chunkDims, h, es); err != nil {
			t.Fatalf("case %d: dims %v chunk %v %v es %d: %v", i, dims, chunkDims, h, es, err)
		}
	}
}

// TestSplitFullDetection checks, per chunk of the grid, that a
// piece is produced iff the reference selects something in it, and that
// Full/FullWithin agree with the reference counts.
func TestSplitFullDetection(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	fulls, fullWithins := 0, 0
	for i := range 1500 {
		dims, chunkDims, h := randCase(rng)
		if i%3 == 0 { // bias towards selections that cover whole chunks
			start := make([]uint64, len(dims))
			h = Box(start, dims)
		}
		sel := refIndices(h)
		got := map[string]*Piece{}
		err := Split(h, chunkDims, func(p *Piece) error {
			q := p.Clone()
			got[coordKey(p.Coord)] = &q
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		eachCoord(gridDims(dims, chunkDims), func(c []uint64) {
			n, inside := uint64(1), uint64(1)
			for d := range c {
				lo, hi := c[d]*chunkDims[d], (c[d]+1)*chunkDims[d]
				var k uint64
				for _, g := range sel[d] {
					if g >= lo && g < hi {
						k++
					}
				}
				n *= k
				inside *= min(hi, dims[d]) - lo
			}
			p := got[coordKey(c)]
			if (p != nil) != (n > 0) {
				t.Fatalf("case %d chunk %v: piece present %v, reference count %d", i, c, p != nil, n)
			}
			if p == nil {
				return
			}
			if p.N != n {
				t.Fatalf("case %d chunk %v: N %d, reference %d", i, c, p.N, n)
			}
			full := n == prod(chunkDims)
			if p.Full(chunkDims) != full {
				t.Fatalf("case %d chunk %v: Full %v, reference %v", i, c, !full, full)
			}
			within := n == inside
			if p.FullWithin(chunkDims, dims) != within {
				t.Fatalf("case %d chunk %v: FullWithin %v, reference %v", i, c, !within, within)
			}
			if full {
				fulls++
			}
			if within {
				fullWithins++
			}
		})
	}
	if fulls == 0 || fullWithins <= fulls {
		t.Fatalf("generator too weak: %d full, %d full-within pieces", fulls, fullWithins)
	}
}

func TestFillBuf(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 1000 {
		_, chunkDims, h := randCase(rng)
		es := elemSizes[i%len(elemSizes)]
		var fill []byte
		if i%4 != 0 {
			fill = make([]byte, es)
			fillRand(rng, fill)
			fill[0] |= 1 // non-zero
		}
		shape := h.Shape()
		n := int(h.NumElements())
		dst := make([]byte, n*es)
		fillRand(rng, dst)
		want := bytes.Clone(dst)
		pieces, err := Pieces(h, chunkDims)
		if err != nil {
			t.Fatal(err)
		}
		elem := fill
		if elem == nil {
			elem = make([]byte, es)
		}
		// Fill every other piece; the rest of dst must stay untouched.
		for pi := range pieces {
			if pi%2 == 1 {
				continue
			}
			p := &pieces[pi]
			FillBuf(dst, shape, p, es, fill)
			eachRun(p, shape, func(pos uint64) { copy(want[int(pos)*es:], elem) })
		}
		if !bytes.Equal(dst, want) {
			t.Fatalf("case %d: FillBuf differs from reference (%v chunk %v es %d)", i, h, chunkDims, es)
		}
	}
}

// eachRun calls fn with the packed-buffer position of every element of p,
// by plain enumeration.
func eachRun(p *Piece, shape []uint64, fn func(pos uint64)) {
	r := len(p.Runs)
	bp := make([]uint64, r)
	var rec func(d int)
	rec = func(d int) {
		if d == r {
			fn(linear(bp, shape))
			return
		}
		for _, run := range p.Runs[d] {
			for j := uint64(0); j < run.Len; j++ {
				bp[d] = run.Buf + j
				rec(d + 1)
			}
		}
	}
	rec(0)
}

func TestFillBufShortOrLongFill(t *testing.T) {
	p := &Piece{Coord: []uint64{0}, Runs: [][]Run{{{Chunk: 0, Buf: 1, Len: 2}}}, N: 2}
	dst := make([]byte, 4*4)
	FillBuf(dst, []uint64{4}, p, 4, []byte{1, 2}) // padded with zeros
	want := []byte{0, 0, 0, 0, 1, 2, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0}
	if !bytes.Equal(dst, want) {
		t.Fatalf("short fill: got %v want %v", dst, want)
	}
	FillBuf(dst, []uint64{4}, p, 4, []byte{9, 8, 7, 6, 5}) // cut to 4 bytes
	want = []byte{0, 0, 0, 0, 9, 8, 7, 6, 9, 8, 7, 6, 0, 0, 0, 0}
	if !bytes.Equal(dst, want) {
		t.Fatalf("long fill: got %v want %v", dst, want)
	}
}

func TestFillChunk(t *testing.T) {
	for _, es := range elemSizes {
		for _, n := range []int{0, 1, 3, 1000} {
			b := bytes.Repeat([]byte{0xAB}, n*es)
			fill := make([]byte, es)
			for i := range fill {
				fill[i] = byte(i + 1)
			}
			FillChunk(b, es, fill)
			if !bytes.Equal(b, bytes.Repeat(fill, n)) {
				t.Fatalf("es %d n %d: pattern fill wrong", es, n)
			}
			FillChunk(b, es, nil)
			if !bytes.Equal(b, make([]byte, n*es)) {
				t.Fatalf("es %d n %d: zero fill wrong", es, n)
			}
		}
	}
}

func TestTrim(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	outsides := 0
	for i := range 400 {
		r := 1 + rng.IntN(4)
		es := elemSizes[i%len(elemSizes)]
		chunkDims := make([]uint64, r)
		coord := make([]uint64, r)
		dims := make([]uint64, r)
		for d := range r {
			chunkDims[d] = uint64(1 + rng.IntN(6))
			coord[d] = uint64(rng.IntN(4))
			// Extent ends somewhere before, inside or after this chunk.
			dims[d] = uint64(rng.IntN(int((coord[d] + 2) * chunkDims[d])))
			if rng.IntN(2) == 0 {
				dims[d] = (coord[d] + 1 + uint64(rng.IntN(2))) * chunkDims[d]
			}
		}
		var fill []byte
		if i%3 != 0 {
			fill = make([]byte, es)
			fillRand(rng, fill)
			fill[es-1] |= 0x80
		}
		elem := fill
		if elem == nil {
			elem = make([]byte, es)
		}
		chunk := make([]byte, int(prod(chunkDims))*es)
		fillRand(rng, chunk)
		want := bytes.Clone(chunk)
		wantOut := false
		eachCoord(chunkDims, func(c []uint64) {
			for d := range c {
				if coord[d]*chunkDims[d]+c[d] >= dims[d] {
					off := int(linear(c, chunkDims)) * es
					copy(want[off:off+es], elem)
					wantOut = true
					return
				}
			}
		})
		got := Trim(chunk, coord, chunkDims, dims, es, fill)
		if got != wantOut {
			t.Fatalf("case %d: Trim returned %v, want %v", i, got, wantOut)
		}
		if !bytes.Equal(chunk, want) {
			t.Fatalf("case %d: coord %v chunk %v dims %v: chunk differs from reference", i, coord, chunkDims, dims)
		}
		if wantOut {
			outsides++
		}
	}
	if outsides < 100 {
		t.Fatalf("generator too weak: %d trims", outsides)
	}
}

func TestTrimRankMismatchTouchesNothing(t *testing.T) {
	chunk := []byte{1, 2, 3, 4}
	if Trim(chunk, []uint64{0}, []uint64{2, 2}, []uint64{1, 1}, 1, nil) {
		t.Fatal("Trim with mismatched ranks reported a change")
	}
	if !bytes.Equal(chunk, []byte{1, 2, 3, 4}) {
		t.Fatal("Trim with mismatched ranks wrote")
	}
	// Coordinates so large that coord*chunkDim overflows: wholly outside.
	chunk = []byte{1, 2, 3, 4}
	if !Trim(chunk, []uint64{math.MaxUint64}, []uint64{4}, []uint64{10}, 1, []byte{7}) {
		t.Fatal("overflowing chunk origin not treated as outside")
	}
	if !bytes.Equal(chunk, []byte{7, 7, 7, 7}) {
		t.Fatalf("got %v", chunk)
	}
}

// TestKernelMergesCoveredDims proves the fast path: dimensions the piece
// covers completely on both sides are folded into one copy.
func TestKernelMergesCoveredDims(t *testing.T) {
	cases := []struct {
		name      string
		dims      []uint64
		chunk     []uint64
		h         Hyperslab
		wantSegs  int // per piece
		wantPiece int
	}{
		{"whole chunk", []uint64{8, 16, 32}, []uint64{8, 16, 32}, Box([]uint64{0, 0, 0}, []uint64{8, 16, 32}), 1, 1},
		{"full rows", []uint64{8, 16, 32}, []uint64{8, 16, 32}, Box([]uint64{2, 0, 0}, []uint64{3, 16, 32}), 1, 1},
		{"full planes of a 2x2 grid", []uint64{8, 16}, []uint64{4, 16}, Box([]uint64{0, 0}, []uint64{8, 16}), 1, 2},
		{"stride-1 hyperslab", []uint64{100}, []uint64{10}, Hyperslab{[]uint64{0}, []uint64{1}, []uint64{100}, []uint64{1}}, 1, 10},
		{"sub-box rows", []uint64{16, 16}, []uint64{16, 16}, Box([]uint64{2, 3}, []uint64{5, 7}), 5, 1},
		{"strided rows", []uint64{16, 16}, []uint64{16, 16}, Hyperslab{[]uint64{0, 0}, []uint64{4, 1}, []uint64{4, 1}, []uint64{2, 16}}, 4, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.h.Validate(tc.dims); err != nil {
				t.Fatal(err)
			}
			shape := tc.h.Shape()
			es := 2
			buf := make([]byte, int(tc.h.NumElements())*es)
			chunk := make([]byte, int(prod(tc.chunk))*es)
			pieces := 0
			err := Split(tc.h, tc.chunk, func(p *Piece) error {
				pieces++
				if n := walk(opScatter, buf, shape, chunk, tc.chunk, p.Runs, es, fillValue{}); n != tc.wantSegs {
					t.Fatalf("scatter: %d segments, want %d", n, tc.wantSegs)
				}
				if n := walk(opGather, buf, shape, chunk, tc.chunk, p.Runs, es, fillValue{}); n != tc.wantSegs {
					t.Fatalf("gather: %d segments, want %d", n, tc.wantSegs)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if pieces != tc.wantPiece {
				t.Fatalf("%d pieces, want %d", pieces, tc.wantPiece)
			}
		})
	}
}

func TestKernelsDoNotAllocate(t *testing.T) {
	h := Hyperslab{[]uint64{1, 0, 2}, []uint64{3, 1, 2}, []uint64{3, 1, 3}, []uint64{2, 5, 1}}
	chunkDims := []uint64{4, 4, 4}
	shape := h.Shape()
	pieces, err := Pieces(h, chunkDims)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, int(h.NumElements())*4)
	chunk := make([]byte, 64*4)
	fill := []byte{1, 2, 3, 4}
	allocs := testing.AllocsPerRun(50, func() {
		for i := range pieces {
			Scatter(buf, shape, chunk, chunkDims, &pieces[i], 4)
			Gather(chunk, chunkDims, buf, shape, &pieces[i], 4)
			FillBuf(buf, shape, &pieces[i], 4, fill)
		}
		Trim(chunk, []uint64{1, 1, 1}, chunkDims, []uint64{6, 7, 5}, 4, fill)
		FillChunk(chunk, 4, fill)
	})
	if allocs != 0 {
		t.Fatalf("kernels allocate %.1f times per run", allocs)
	}
}

// TestSplitIterates: Split's allocations do not grow with the number of
// chunks (no per-chunk or per-element intermediate structure).
func TestSplitIterates(t *testing.T) {
	count := func(n uint64) float64 {
		h := Box([]uint64{0, 0}, []uint64{n, n})
		return testing.AllocsPerRun(5, func() {
			if err := Split(h, []uint64{1, 1}, func(*Piece) error { return nil }); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := count(2), count(300) // 4 vs 90000 chunks
	if large > small {
		t.Fatalf("Split allocates %.0f times for 4 chunks, %.0f for 90000", small, large)
	}
}

// TestSplitSkipsGaps: a strided selection over a huge extent visits only the
// chunks it touches, without walking the gaps.
func TestSplitSkipsGaps(t *testing.T) {
	h := Hyperslab{
		Start:  []uint64{5, 3},
		Stride: []uint64{1 << 60, 1 << 40},
		Count:  []uint64{3, 4},
		Block:  []uint64{2, 1},
	}
	dims := []uint64{1 << 62, 1 << 43}
	if err := h.Validate(dims); err != nil {
		t.Fatal(err)
	}
	var coords [][]uint64
	err := Split(h, []uint64{1, 1}, func(p *Piece) error {
		coords = append(coords, slices.Clone(p.Coord))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(coords) != 3*2*4 {
		t.Fatalf("%d chunks visited, want 24", len(coords))
	}
	if !slices.Equal(coords[23], []uint64{2<<60 + 6, 3<<40 + 3}) {
		t.Fatalf("last chunk %v", coords[23])
	}
}

func TestSplitStopsOnError(t *testing.T) {
	stop := errors.New("stop")
	calls := 0
	err := Split(Box([]uint64{0}, []uint64{100}), []uint64{10}, func(*Piece) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 3 {
		t.Fatalf("err %v after %d calls", err, calls)
	}
}

func TestSplitEmptySelection(t *testing.T) {
	h := Box([]uint64{3, 4}, []uint64{5, 0})
	if err := h.Validate([]uint64{10, 10}); err != nil {
		t.Fatal(err)
	}
	if h.NumElements() != 0 {
		t.Fatalf("NumElements %d", h.NumElements())
	}
	err := Split(h, []uint64{2, 2}, func(*Piece) error { t.Fatal("called"); return nil })
	if err != nil {
		t.Fatal(err)
	}
}

func TestPiecesAreIndependent(t *testing.T) {
	ps, err := Pieces(Hyperslab{[]uint64{0}, []uint64{3}, []uint64{10}, []uint64{2}}, []uint64{4})
	if err != nil {
		t.Fatal(err)
	}
	for i := range ps {
		if ps[i].Coord[0] != uint64(i) {
			t.Fatalf("piece %d has coord %v: pieces alias", i, ps[i].Coord)
		}
	}
	if ps[0].Runs[0][0] == ps[len(ps)-1].Runs[0][0] {
		t.Fatal("runs alias")
	}
}

func TestBoxRepresentation(t *testing.T) {
	h := Box([]uint64{1, 2}, []uint64{3, 4})
	if !slices.Equal(h.Count, []uint64{1, 1}) || !slices.Equal(h.Block, []uint64{3, 4}) {
		t.Fatalf("Box %v is not one block per dimension", h)
	}
	if !slices.Equal(h.Shape(), []uint64{3, 4}) || h.NumElements() != 12 {
		t.Fatalf("shape %v n %d", h.Shape(), h.NumElements())
	}
	start := []uint64{1, 2}
	h = Box(start, []uint64{3, 4})
	start[0] = 99
	if h.Start[0] != 1 {
		t.Fatal("Box aliases its start slice")
	}
}

func TestValidate(t *testing.T) {
	big := uint64(1) << 40
	cases := []struct {
		name string
		h    Hyperslab
		dims []uint64
		want error
	}{
		{"ok box", Box([]uint64{0, 0}, []uint64{10, 10}), []uint64{10, 10}, nil},
		{"ok strided", Hyperslab{[]uint64{1}, []uint64{3}, []uint64{3}, []uint64{2}}, []uint64{9}, nil},
		{"ok single block stride<block", Hyperslab{[]uint64{0}, []uint64{1}, []uint64{1}, []uint64{5}}, []uint64{5}, nil},
		{"ok empty", Box([]uint64{20}, []uint64{0}), []uint64{10}, nil},
		{"end past extent", Box([]uint64{5}, []uint64{6}), []uint64{10}, ErrOutOfRange},
		{"start past extent", Box([]uint64{10}, []uint64{1}), []uint64{10}, ErrOutOfRange},
		{"strided past extent", Hyperslab{[]uint64{1}, []uint64{3}, []uint64{3}, []uint64{2}}, []uint64{8}, ErrOutOfRange},
		{"zero extent", Box([]uint64{0}, []uint64{1}), []uint64{0}, ErrOutOfRange},
		{"zero stride", Hyperslab{[]uint64{0}, []uint64{0}, []uint64{2}, []uint64{1}}, []uint64{10}, ErrInvalid},
		{"zero block", Hyperslab{[]uint64{0}, []uint64{1}, []uint64{2}, []uint64{0}}, []uint64{10}, ErrInvalid},
		{"block > stride", Hyperslab{[]uint64{0}, []uint64{2}, []uint64{2}, []uint64{3}}, []uint64{10}, ErrInvalid},
		{"rank mismatch dims", Box([]uint64{0}, []uint64{1}), []uint64{10, 10}, ErrInvalid},
		{"rank mismatch fields", Hyperslab{[]uint64{0, 0}, []uint64{1}, []uint64{1}, []uint64{1}}, []uint64{10}, ErrInvalid},
		{"box mismatched lengths", Box([]uint64{0, 0}, []uint64{1}), []uint64{10, 10}, ErrInvalid},
		{"rank 0", Hyperslab{}, nil, ErrInvalid},
		{"rank too large", Box(make([]uint64, MaxRank+1), make([]uint64, MaxRank+1)), make([]uint64, MaxRank+1), ErrInvalid},
		{"huge count overflows", Hyperslab{[]uint64{0}, []uint64{4}, []uint64{1 << 63}, []uint64{1}}, []uint64{math.MaxUint64}, ErrOutOfRange},
		{"huge start+block overflows", Box([]uint64{math.MaxUint64}, []uint64{1}), []uint64{math.MaxUint64}, ErrOutOfRange},
		{"count*stride wraps", Hyperslab{[]uint64{0}, []uint64{1 << 33}, []uint64{1 << 33}, []uint64{1}}, []uint64{math.MaxUint64}, ErrOutOfRange},
		{"element count overflows", Box([]uint64{0, 0}, []uint64{big, big}), []uint64{big, big}, ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.h.Validate(tc.dims)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			// Split rejects the same malformed selections (it does not know
			// the extent, so only the structural ones).
			if errors.Is(err, ErrInvalid) && len(tc.h.Start) == len(tc.dims) {
				chunk := make([]uint64, len(tc.h.Start))
				for d := range chunk {
					chunk[d] = 1
				}
				if err := Split(tc.h, chunk, func(*Piece) error { return nil }); !errors.Is(err, ErrInvalid) {
					t.Fatalf("Split: got %v, want ErrInvalid", err)
				}
			}
		})
	}
}

func TestSplitRejectsBadChunkDims(t *testing.T) {
	h := Box([]uint64{0, 0}, []uint64{2, 2})
	for _, cd := range [][]uint64{{1}, {1, 0}, {1, 1, 1}} {
		if err := Split(h, cd, func(*Piece) error { return nil }); !errors.Is(err, ErrInvalid) {
			t.Fatalf("chunk dims %v: got %v", cd, err)
		}
	}
}

func TestCountsAndLengths(t *testing.T) {
	big := uint64(1) << 40
	h := Box([]uint64{0, 0}, []uint64{big, big})
	if h.NumElements() != math.MaxUint64 {
		t.Fatalf("overflowing NumElements = %d, want saturation", h.NumElements())
	}
	if _, err := h.CountElements(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("CountElements: %v", err)
	}
	h = Box([]uint64{0}, []uint64{1 << 62})
	if n, err := h.CountElements(); err != nil || n != 1<<62 {
		t.Fatalf("CountElements %d %v", n, err)
	}
	if _, err := h.BufferLen(8); !errors.Is(err, ErrInvalid) {
		t.Fatalf("BufferLen overflow: %v", err)
	}
	if n, err := Box([]uint64{0, 0}, []uint64{3, 5}).BufferLen(4); err != nil || n != 60 {
		t.Fatalf("BufferLen %d %v", n, err)
	}
	if _, err := Box([]uint64{0}, []uint64{3}).BufferLen(0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("BufferLen es 0: %v", err)
	}
	if n, err := ChunkLen([]uint64{4, 5}, 2); err != nil || n != 40 {
		t.Fatalf("ChunkLen %d %v", n, err)
	}
	for _, cd := range [][]uint64{nil, {0, 1}, {1 << 40, 1 << 40}} {
		if _, err := ChunkLen(cd, 2); !errors.Is(err, ErrInvalid) {
			t.Fatalf("ChunkLen %v: %v", cd, err)
		}
	}
	if (Hyperslab{Count: []uint64{1, 2}, Block: []uint64{1}}).NumElements() != 0 {
		t.Fatal("malformed NumElements not 0")
	}
	if (Hyperslab{Count: []uint64{1, 2}, Block: []uint64{1}}).Shape() != nil {
		t.Fatal("malformed Shape not nil")
	}
}

func TestPieceCheck(t *testing.T) {
	p := &Piece{Coord: []uint64{0, 0}, Runs: [][]Run{{{0, 0, 2}}, {{1, 3, 2}}}, N: 4}
	if err := p.Check([]uint64{2, 3}, []uint64{2, 5}); err != nil {
		t.Fatal(err)
	}
	bad := []struct{ chunk, buf []uint64 }{
		{[]uint64{2, 2}, []uint64{2, 5}}, // chunk too small
		{[]uint64{2, 3}, []uint64{2, 4}}, // buffer too small
		{[]uint64{2}, []uint64{2}},       // rank
	}
	for _, b := range bad {
		if err := p.Check(b.chunk, b.buf); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%v/%v: %v", b.chunk, b.buf, err)
		}
	}
	p.Runs[1][0] = Run{Chunk: math.MaxUint64, Buf: 0, Len: 2}
	if err := p.Check([]uint64{2, 3}, []uint64{2, 5}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("overflowing run: %v", err)
	}
}

func TestFullWithinEdge(t *testing.T) {
	// Extent 10, chunk 4: chunk 2 holds indices 8..11, of which 8,9 exist.
	h := Box([]uint64{8}, []uint64{2})
	ps, err := Pieces(h, []uint64{4})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || ps[0].Full([]uint64{4}) || !ps[0].FullWithin([]uint64{4}, []uint64{10}) {
		t.Fatalf("edge piece %+v", ps)
	}
	if ps[0].FullWithin([]uint64{4}, []uint64{11}) {
		t.Fatal("FullWithin true though index 10 is in the extent and unselected")
	}
}

func TestHyperslabCloneAndRank(t *testing.T) {
	h := Hyperslab{[]uint64{1, 2}, []uint64{3, 4}, []uint64{5, 6}, []uint64{1, 2}}
	c := h.Clone()
	if c.Rank() != 2 || h.Rank() != 2 {
		t.Fatalf("rank %d", c.Rank())
	}
	c.Start[0], c.Stride[0], c.Count[0], c.Block[0] = 9, 9, 9, 9
	if h.Start[0] != 1 || h.Stride[0] != 3 || h.Count[0] != 5 || h.Block[0] != 1 {
		t.Fatalf("Clone aliases: %v", h)
	}
}

// TestSplitNearUint64Max: chunk ends that do not fit in 64 bits are handled
// (the last chunk along a dimension may extend past 2^64-1).
func TestSplitNearUint64Max(t *testing.T) {
	cd := uint64(1)<<63 + 1
	h := Box([]uint64{1<<63 + 5}, []uint64{3})
	if err := h.Validate([]uint64{math.MaxUint64}); err != nil {
		t.Fatal(err)
	}
	ps, err := Pieces(h, []uint64{cd})
	if err != nil {
		t.Fatal(err)
	}
	want := Run{Chunk: 4, Buf: 0, Len: 3}
	if len(ps) != 1 || ps[0].Coord[0] != 1 || len(ps[0].Runs[0]) != 1 || ps[0].Runs[0][0] != want || ps[0].N != 3 {
		t.Fatalf("pieces %+v", ps)
	}
}

// TestConcurrentUse: Split and the kernels only read the hyperslab, the
// piece and the source buffer, so many goroutines may share them (run
// under -race).
func TestConcurrentUse(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	dims := []uint64{37, 23, 11}
	chunkDims := []uint64{8, 5, 4}
	h := Hyperslab{[]uint64{1, 2, 0}, []uint64{3, 2, 1}, []uint64{12, 10, 11}, []uint64{2, 1, 1}}
	if err := h.Validate(dims); err != nil {
		t.Fatal(err)
	}
	const es = 4
	chunks := map[string][]byte{}
	eachCoord(gridDims(dims, chunkDims), func(c []uint64) {
		b := make([]byte, int(prod(chunkDims))*es)
		fillRand(rng, b)
		chunks[coordKey(c)] = b
	})
	shape := h.Shape()
	n := int(h.NumElements()) * es
	want := make([]byte, n)
	if err := Split(h, chunkDims, func(p *Piece) error {
		Scatter(want, shape, chunks[coordKey(p.Coord)], chunkDims, p, es)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	pieces, err := Pieces(h, chunkDims)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 16)
	for g := range 16 {
		go func() {
			dst := make([]byte, n)
			var err error
			if g%2 == 0 {
				err = Split(h, chunkDims, func(p *Piece) error {
					Scatter(dst, shape, chunks[coordKey(p.Coord)], chunkDims, p, es)
					return nil
				})
			} else {
				for i := range pieces {
					Scatter(dst, shape, chunks[coordKey(pieces[i].Coord)], chunkDims, &pieces[i], es)
				}
			}
			if err == nil && !bytes.Equal(dst, want) {
				err = errors.New("concurrent scatter differs")
			}
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
