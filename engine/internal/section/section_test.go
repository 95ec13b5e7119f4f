package section

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	secs := []Stored{{Data: []byte("selection"), Decoded: 9, Mask: 0}, {Data: []byte("values!!"), Decoded: 20, Mask: 3}}
	f, sum := appendFrame0([]byte("prefix"), secs)
	f = f[len("prefix"):]
	if len(f) != FrameSize(9, 8) {
		t.Fatalf("frame %d bytes, FrameSize %d", len(f), FrameSize(9, 8))
	}
	h, err := parseHeader0(f, int64(len(f)), 2, 100)
	if err != nil {
		t.Fatal(err)
	}
	if h.Sum != sum || HeaderSum(f, 2) != sum {
		t.Fatalf("sum %08x, header says %08x", sum, h.Sum)
	}
	for i, s := range secs {
		b, err := h.Section(f, i)
		if err != nil || !bytes.Equal(b, s.Data) || h.Sec[i].Decoded != s.Decoded || h.Sec[i].Mask != s.Mask {
			t.Fatalf("section %d: %q %v %+v", i, b, err, h.Sec[i])
		}
	}
	// A prefix holding the header and section 0 verifies section 0 alone.
	pre := f[:HeaderSize(2)+9]
	h2, err := parseHeader0(pre, int64(len(f)), 2, 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h2.Section(pre, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := h2.Section(pre, 1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("section past the prefix: %v", err)
	}
	// Every single-byte change is caught by the header or a section.
	for i := range f {
		g := bytes.Clone(f)
		g[i] ^= 0x20
		h, err := parseHeader0(g, int64(len(g)), 2, 100)
		if err == nil {
			_, err = h.Section(g, 0)
			if err == nil {
				_, err = h.Section(g, 1)
			}
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip at %d not caught: %v", i, err)
		}
	}
	if _, err := parseHeader0(f, int64(len(f)), 2, 10); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("decoded size over the limit: %v", err)
	}
	if _, err := parseHeader0(f, int64(len(f)+1), 2, 100); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("frame size mismatch: %v", err)
	}
}

func TestRunsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for it := 0; it < 200; it++ {
		limit := uint64(1 + rng.IntN(5000))
		var runs []Run
		pos, at := uint64(0), uint32(0)
		for pos < limit {
			gap := uint64(rng.IntN(50))
			if len(runs) > 0 && gap == 0 {
				gap = 1
			}
			if pos+gap >= limit {
				break
			}
			ln := uint64(1 + rng.IntN(20))
			if pos+gap+ln > limit {
				ln = limit - pos - gap
			}
			runs = append(runs, Run{Start: uint32(pos + gap), Len: uint32(ln), At: at})
			at += uint32(ln)
			pos += gap + ln
		}
		b := AppendRuns(nil, runs)
		if uint64(len(b)) > MaxRunBytes(uint64(at), limit) {
			t.Fatalf("encoding of %d elements is %d bytes, bound %d", at, len(b), MaxRunBytes(uint64(at), limit))
		}
		got, k, err := DecodeRuns(b, limit, nil)
		if err != nil || k != uint64(at) || len(got) != len(runs) {
			t.Fatalf("decode: %v, k %d want %d, %d runs want %d", err, k, at, len(got), len(runs))
		}
		for i := range runs {
			if got[i] != runs[i] {
				t.Fatalf("run %d: %+v want %+v", i, got[i], runs[i])
			}
		}
		if len(runs) > 0 {
			if _, _, err := DecodeRuns(b, uint64(runs[len(runs)-1].End())-1, nil); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("run past a smaller limit: %v", err)
			}
		}
	}
	for _, bad := range [][]byte{
		{},                 // no count
		{1, 0, 0},          // zero length
		{2, 0, 1, 0, 1},    // adjacent runs (gap 0)
		{1, 0, 1, 7},       // trailing byte
		{200, 1},           // count the bytes cannot hold
		{1, 0, 0xff, 0xff}, // truncated varint
	} {
		if _, _, err := DecodeRuns(bad, 100, nil); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%v: %v", bad, err)
		}
	}
}
