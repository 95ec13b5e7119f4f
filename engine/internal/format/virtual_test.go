package format

import (
	"errors"
	"reflect"
	"testing"
)

func virtualSeeds() [][]byte {
	box := func(start, count []uint64) VirtualSelection {
		one := make([]uint64, len(start))
		for i := range one {
			one[i] = 1
		}
		return VirtualSelection{Start: start, Stride: one, Count: count, Block: one}
	}
	return [][]byte{
		EncodeVirtualParams([]VirtualMapping{{
			Virtual: box([]uint64{0, 0}, []uint64{4, 8}), File: "", Dataset: "a",
			Source: box([]uint64{2, 0}, []uint64{4, 8}),
		}}),
		EncodeVirtualParams([]VirtualMapping{{
			Virtual: VirtualSelection{Start: []uint64{1, 0, 0}, Stride: []uint64{4, 1, 1}, Count: []uint64{Unlimited, 1, 1}, Block: []uint64{1, 16, 16}},
			File:    "w%b.scc", Dataset: "frames",
			Source: box([]uint64{0, 0}, []uint64{16, 16}),
		}, {
			Virtual: box([]uint64{0, 0, 0}, []uint64{1, 16, 16}), File: "/abs/x.scc", Dataset: "f",
			Source: VirtualSelection{Start: []uint64{0, 0, 0}, Stride: []uint64{1, 1, 1}, Count: []uint64{Unlimited, 1, 1}, Block: []uint64{1, 16, 16}},
		}}),
	}
}

func TestVirtualParamsRoundTrip(t *testing.T) {
	for _, b := range virtualSeeds() {
		ms, err := DecodeVirtualParams(b)
		if err != nil {
			t.Fatal(err)
		}
		if again := EncodeVirtualParams(ms); !reflect.DeepEqual(again, b) {
			t.Fatalf("re-encoding differs")
		}
	}
	// Every truncation and every single-byte change either decodes or
	// fails with ErrCorrupt.
	b := virtualSeeds()[1]
	for n := 0; n < len(b); n++ {
		if _, err := DecodeVirtualParams(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	bad := append([]byte(nil), b...)
	bad[0] = 2
	if _, err := DecodeVirtualParams(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 2: %v", err)
	}
	// Two unlimited dimensions in one selection.
	two := EncodeVirtualParams([]VirtualMapping{{
		Virtual: VirtualSelection{Start: []uint64{0, 0}, Stride: []uint64{1, 1}, Count: []uint64{Unlimited, Unlimited}, Block: []uint64{1, 1}},
		Dataset: "a",
		Source:  VirtualSelection{Start: []uint64{0}, Stride: []uint64{1}, Count: []uint64{1}, Block: []uint64{1}},
	}})
	if _, err := DecodeVirtualParams(two); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("two unlimited dimensions: %v", err)
	}
}

// FuzzVirtualParams: arbitrary bytes decode to a mapping list that
// re-encodes to the same bytes, or fail with ErrCorrupt; nothing panics and
// nothing allocates beyond what the input's length allows.
func FuzzVirtualParams(f *testing.F) {
	for _, s := range virtualSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := DecodeVirtualParams(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		again := EncodeVirtualParams(ms)
		if !reflect.DeepEqual(again, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, again)
		}
		for _, m := range ms {
			if CheckVirtualSelection(m.Virtual) != nil || CheckVirtualSelection(m.Source) != nil {
				t.Fatal("decoded selection fails its check")
			}
		}
	})
}
