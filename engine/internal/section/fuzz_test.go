package section

import (
	"bytes"
	"testing"
)

// FuzzParseHeader feeds arbitrary bytes to the frame decoder: it must
// never panic, and a frame it accepts re-encodes to the same bytes.
func FuzzParseHeader(f *testing.F) {
	fr, _ := appendFrame0(nil, []Stored{{Data: []byte{1, 0, 3}, Decoded: 3}, {Data: []byte("abcdef"), Decoded: 6, Mask: 1}})
	f.Add(fr, 2)
	f.Add(fr[:10], 2)
	one, _ := appendFrame0(nil, []Stored{{Data: nil}})
	f.Add(one, 1)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		h, err := parseHeader0(b, int64(len(b)), n, 1<<20)
		if err != nil {
			return
		}
		secs := make([]Stored, h.N)
		for i := 0; i < h.N; i++ {
			s, err := h.Section(b, i)
			if err != nil {
				return
			}
			secs[i] = Stored{Data: s, Decoded: h.Sec[i].Decoded, Mask: h.Sec[i].Mask}
		}
		again, sum := appendFrame0(nil, secs)
		if !bytes.Equal(again, b) || sum != h.Sum {
			t.Fatalf("accepted frame does not re-encode to itself")
		}
	})
}

// FuzzDecodeRuns feeds arbitrary bytes to the run decoder: no panic, no
// allocation beyond len(b)/2 runs, and accepted input is canonical.
func FuzzDecodeRuns(f *testing.F) {
	f.Add(AppendRuns(nil, []Run{{Start: 3, Len: 2}, {Start: 9, Len: 1}}), uint64(16))
	f.Add([]byte{0}, uint64(1))
	f.Add([]byte{1, 0, 0x80, 0x80, 0x80, 0x80, 0x10}, uint64(1<<40))
	f.Fuzz(func(t *testing.T, b []byte, limit uint64) {
		runs, k, err := DecodeRuns(b, limit, nil)
		if err != nil {
			return
		}
		if cap(runs) > len(b)/2+1 {
			t.Fatalf("%d runs allocated for %d bytes", cap(runs), len(b))
		}
		var sum uint64
		for i, r := range runs {
			if r.Len == 0 || uint64(r.End()) > limit || i > 0 && r.Start <= runs[i-1].End() {
				t.Fatalf("run %d %+v not canonical", i, r)
			}
			sum += uint64(r.Len)
		}
		if sum != k || !bytes.Equal(AppendRuns(nil, runs), b) {
			t.Fatalf("accepted runs do not re-encode to the input")
		}
	})
}
